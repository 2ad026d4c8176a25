/* jail.c — moving files across the jail boundary, by descriptor.
 *
 * Staging copies an input file from under the caller's out_dir into the
 * jail; write-back copies a file the child wrote in the jail out to out_dir.
 * Both resolve every path beneath its root with openat2(RESOLVE_BENEATH),
 * so neither ".." nor a symlink can take them outside; write-back refuses a
 * jail file that is a symlink or has other hard links (a child must not be
 * able to make the runtime copy ~/.ssh/id_rsa out, or write through a link),
 * and replaces the destination atomically (temporary file, then rename).
 * Also: a scan of the jail for files a call created, and an exclusive lock. */
#include "hcp_core.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "compat.h"

#define COPY_MAX ((off_t)1 << 34)   /* 16 GiB: a file larger is refused, not truncated */

/* openat2 beneath dirfd; on kernels without it (ENOSYS), a component walk
 * with O_NOFOLLOW at every step gives the same refusal of links and "..". */
static int open_beneath(int dirfd, const char *rel, int flags, mode_t mode, uint64_t resolve)
{
    int fd = hcp_openat2(dirfd, rel, flags, mode, resolve);
    if (fd >= 0 || errno != ENOSYS)
        return fd;
    /* fallback: walk each component without following anything */
    char buf[PATH_MAX];
    if (strlen(rel) >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(buf, rel);
    int cur = dup(dirfd);
    if (cur < 0)
        return -1;
    char *save = NULL, *part = strtok_r(buf, "/", &save);
    while (part) {
        char *next = strtok_r(NULL, "/", &save);
        if (strcmp(part, "..") == 0) {
            close(cur);
            errno = EXDEV;
            return -1;
        }
        int nfd = next ? openat(cur, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                       : openat(cur, part, flags | O_NOFOLLOW | O_CLOEXEC, mode);
        int e = errno;
        close(cur);
        if (nfd < 0) {
            errno = e == ELOOP ? EXDEV : e;
            return -1;
        }
        cur = nfd;
        part = next;
    }
    return cur;
}

/* Split "a/b/c" into the directory part "a/b" (or ".") and the name "c". */
static int split_rel(const char *rel, char *dir, size_t dsz, const char **name)
{
    const char *slash = strrchr(rel, '/');
    if (!slash) {
        if (dsz < 2)
            return -1;
        strcpy(dir, ".");
        *name = rel;
        return 0;
    }
    size_t n = (size_t)(slash - rel);
    if (n + 1 > dsz)
        return -1;
    memcpy(dir, rel, n);
    dir[n] = '\0';
    *name = slash + 1;
    return 0;
}

/* mkdir -p for the directory part of rel, beneath rootfd, 0700, never
 * through a link; returns an fd of the parent directory. */
static int make_parents(int rootfd, const char *rel, const char **name)
{
    char dir[PATH_MAX];
    if (split_rel(rel, dir, sizeof dir, name) < 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int cur = dup(rootfd);
    if (cur < 0)
        return -1;
    if (strcmp(dir, ".") == 0)
        return cur;
    char *save = NULL;
    for (char *part = strtok_r(dir, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
        if (strcmp(part, ".") == 0)
            continue;
        if (strcmp(part, "..") == 0) {
            close(cur);
            errno = EXDEV;
            return -1;
        }
        if (mkdirat(cur, part, 0700) < 0 && errno != EEXIST) {
            int e = errno;
            close(cur);
            errno = e;
            return -1;
        }
        int nfd = openat(cur, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(cur);
        if (nfd < 0) {
            errno = e == ELOOP || e == ENOTDIR ? EXDEV : e;
            return -1;
        }
        cur = nfd;
    }
    return cur;
}

static int copy_fd(int in, int out)
{
    char buf[65536];
    off_t total = 0;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        total += n;
        if (total > COPY_MAX) {
            errno = EFBIG;
            return -1;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return -1;
            off += w;
        }
    }
}

/* A new file of our own in dir, named into tmp: created exclusively, never
 * through a link. The mode is filtered by the umask as a tool's would be. */
static int open_tmp(int dir, char *tmp, size_t tmpsz, mode_t mode)
{
    static unsigned counter;
    for (int i = 0; i < 100; i++) {
        snprintf(tmp, tmpsz, ".hcp-tmp-%ld-%u", (long)getpid(), ++counter);
        int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

static int open_root(lua_State *L, int idx, const char **path)
{
    *path = luaL_checkstring(L, idx);
    luaL_argcheck(L, (*path)[0] == '/', idx, "absolute path expected");
    return open(*path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* Opens the two roots of a copy (arguments 1 and 3). Returns 0, or the
 * number of values pushed for the error, with nothing left open. */
static int open_roots(lua_State *L, int *a, const char **a_path, int *b, const char **b_path)
{
    *a = open_root(L, 1, a_path);
    if (*a < 0)
        return hcp_push_oserror(L, errno, "workspace: %s", *a_path);
    *b = open_root(L, 3, b_path);
    if (*b < 0) {
        int e = errno;
        close(*a);
        return hcp_push_oserror(L, e, "workspace: %s", *b_path);
    }
    return 0;
}

static const char *check_rel(lua_State *L, int idx)
{
    size_t len;
    const char *rel = luaL_checklstring(L, idx, &len);
    luaL_argcheck(L, len > 0 && rel[0] != '/' && strlen(rel) == len, idx,
                  "non-empty relative path without NUL expected");
    return rel;
}

/* core.stage(src_root, rel, dst_root, dst_rel) -> true
 * Copies src_root/rel (a regular file, reached without leaving src_root)
 * to dst_root/dst_rel (0600; parents created 0700), through a temporary
 * name and a rename: a persisted jail may hold an older copy, and whatever
 * a child left at that name (even a symlink) is replaced, never written
 * through. */
static int l_stage(lua_State *L)
{
    const char *src_path, *dst_path, *name;
    const char *rel = check_rel(L, 2);
    const char *dst_rel = check_rel(L, 4);
    int src_root, dst_root, pushed = open_roots(L, &src_root, &src_path, &dst_root, &dst_path);
    if (pushed)
        return pushed;
    int in = -1, dir = -1, out = -1, err = 0;
    const char *what = rel, *escaped_root = src_path;
    char tmp[64] = "";
    struct stat st;
    in = open_beneath(src_root, rel, O_RDONLY, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
    if (in < 0 || fstat(in, &st) < 0) {
        err = errno;
    } else if (!S_ISREG(st.st_mode)) {
        err = EINVAL;
    } else if ((dir = make_parents(dst_root, dst_rel, &name)) < 0) {
        err = errno;
        what = dst_rel;
        escaped_root = dst_path;
    } else if ((out = open_tmp(dir, tmp, sizeof tmp, 0600)) < 0) {
        err = errno;
        what = dst_rel;
    } else if (copy_fd(in, out) < 0) {
        err = errno;
    }
    if (out >= 0 && close(out) < 0 && !err)
        err = errno;
    if (out >= 0 && !err && renameat(dir, tmp, dir, name) < 0) {
        err = errno;
        what = dst_rel;
    }
    if (err && out >= 0)
        (void)unlinkat(dir, tmp, 0);   /* a partial copy must not be used */
    if (in >= 0)
        close(in);
    if (dir >= 0)
        close(dir);
    close(src_root);
    close(dst_root);
    if (err == EXDEV)
        return luaL_pushfail(L), lua_pushfstring(L, "workspace: %s: path escapes %s", what, escaped_root),
               lua_pushinteger(L, err), 3;
    if (err == EINVAL)
        return luaL_pushfail(L), lua_pushfstring(L, "workspace: %s: not a regular file", what),
               lua_pushinteger(L, err), 3;
    if (err)
        return hcp_push_oserror(L, err, "workspace: %s", what);
    lua_pushboolean(L, 1);
    return 1;
}

/* core.writeback(jail_root, rel, dst_root, dst_rel) -> true | false (no such
 * file in the jail) | nil, msg, errno.
 * The jail file must be a regular file with one link, reached without any
 * symlink; the destination directory must exist beneath dst_root; the file
 * is written to a temporary name there and renamed over dst_rel. */
static int l_writeback(lua_State *L)
{
    const char *jail_path, *dst_path, *name;
    const char *rel = check_rel(L, 2);
    const char *dst_rel = check_rel(L, 4);
    int jail, dst_root, pushed = open_roots(L, &jail, &jail_path, &dst_root, &dst_path);
    if (pushed)
        return pushed;
    int in = -1, dir = -1, out = -1, err = 0, missing = 0;
    const char *refusal = NULL;
    char tmp[64] = "";
    struct stat st;
    char dirpart[PATH_MAX];
    in = open_beneath(jail, rel, O_RDONLY | O_NOFOLLOW, 0,
                      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (in < 0) {
        err = errno;
        if (err == ENOENT)
            missing = 1;
        else if (err == ELOOP || err == EXDEV)
            refusal = "is a symbolic link or lies behind one";
    } else if (fstat(in, &st) < 0) {
        err = errno;
    } else if (!S_ISREG(st.st_mode)) {
        refusal = "is not a regular file";
    } else if (st.st_nlink != 1) {
        refusal = "has other hard links";
    } else if (split_rel(dst_rel, dirpart, sizeof dirpart, &name) < 0) {
        err = ENAMETOOLONG;
    } else if ((dir = open_beneath(dst_root, dirpart, O_PATH | O_DIRECTORY, 0,
                                   RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)) < 0) {
        err = errno;
    } else {
        /* a name of our own beside the destination: same filesystem, so
         * the rename is atomic and a reader sees the old file or the new */
        out = open_tmp(dir, tmp, sizeof tmp, 0666);
        if (out < 0)
            err = errno;
        else if (copy_fd(in, out) < 0 || fsync(out) < 0)
            err = errno;
        if (out >= 0 && close(out) < 0 && !err)
            err = errno;
        if (out >= 0 && !err && renameat(dir, tmp, dir, name) < 0)
            err = errno;
        if (out >= 0 && err)
            (void)unlinkat(dir, tmp, 0);
    }
    if (in >= 0)
        close(in);
    if (dir >= 0)
        close(dir);
    close(jail);
    close(dst_root);
    if (missing) {
        lua_pushboolean(L, 0);
        return 1;
    }
    if (refusal)
        return luaL_pushfail(L), lua_pushfstring(L, "workspace: write-back of %s refused: it %s", rel, refusal),
               lua_pushinteger(L, EPERM), 3;
    if (err == EXDEV)
        return luaL_pushfail(L), lua_pushfstring(L, "workspace: %s: path escapes %s", dst_rel, dst_path),
               lua_pushinteger(L, err), 3;
    if (err)
        return hcp_push_oserror(L, err, "workspace: write-back of %s", dst_rel);
    lua_pushboolean(L, 1);
    return 1;
}

/* core.mkdirs_beneath(root, rel) -> true: makes root/rel and its parents
 * (0700) without following any link: a directory a child replaced by a
 * symlink (say to a host directory) is refused, never created through. */
static int l_mkdirs_beneath(lua_State *L)
{
    const char *root_path, *name;
    const char *rel = check_rel(L, 2);
    int root = open_root(L, 1, &root_path);
    if (root < 0)
        return hcp_push_oserror(L, errno, "workspace: %s", root_path);
    char with_leaf[PATH_MAX];
    /* make_parents makes the directories of a file's path: give it one */
    if (snprintf(with_leaf, sizeof with_leaf, "%s/x", rel) >= (int)sizeof with_leaf) {
        close(root);
        return hcp_push_oserror(L, ENAMETOOLONG, "workspace: %s", rel);
    }
    int dir = make_parents(root, with_leaf, &name);
    int err = dir < 0 ? errno : 0;
    close(root);
    if (dir >= 0)
        close(dir);
    if (err == EXDEV)
        return luaL_pushfail(L), lua_pushfstring(L, "workspace: %s: path escapes the jail", rel),
               lua_pushinteger(L, err), 3;
    if (err)
        return hcp_push_oserror(L, err, "workspace: %s", rel);
    lua_pushboolean(L, 1);
    return 1;
}

/* Records regular files under dirfd as rel -> "ino:size:mtime_ns" without
 * following links; depth and count are bounded so a child cannot make the
 * runtime walk forever. */
static void scan_dir(lua_State *L, int dirfd, const char *prefix, int depth, int *count)
{
    if (depth > 32 || *count > 100000)
        return;
    int dup_fd = dup(dirfd);
    if (dup_fd < 0)
        return;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL && *count <= 100000) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        char rel[PATH_MAX];
        if (snprintf(rel, sizeof rel, "%s%s", prefix, e->d_name) >= (int)sizeof rel)
            continue;
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                char p2[PATH_MAX];
                if (snprintf(p2, sizeof p2, "%s/", rel) < (int)sizeof p2)
                    scan_dir(L, sub, p2, depth + 1, count);
                close(sub);
            }
        } else if (S_ISREG(st.st_mode)) {
            lua_pushfstring(L, "%I:%I:%I", (lua_Integer)st.st_ino, (lua_Integer)st.st_size,
                            (lua_Integer)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
            lua_setfield(L, -2, rel);
            (*count)++;
        }
    }
    closedir(d);
}

/* core.scan(dir) -> { [rel] = "ino:size:mtime" } of the regular files. */
static int l_scan(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return hcp_push_oserror(L, errno, "workspace: %s", path);
    int count = 0;
    lua_newtable(L);
    scan_dir(L, fd, "", 0, &count);
    close(fd);
    return 1;
}

/* ---- the lock ----------------------------------------------------------- */

#define LOCK_MT "hcp.lock"

typedef struct { int fd; } lock_t;

static int lock_release(lua_State *L)
{
    lock_t *lk = luaL_checkudata(L, 1, LOCK_MT);
    if (lk->fd >= 0) {
        close(lk->fd);   /* closing the only descriptor drops the flock */
        lk->fd = -1;
    }
    return 0;
}

/* core.lock(path, timeout_ms) -> lock | nil, msg, errno: an exclusive flock
 * on path (created 0600), waited for up to timeout_ms. Locks between
 * processes; the runtime serialises its own calls before taking it. */
static int l_lock(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_Integer timeout = luaL_optinteger(L, 2, 30000);
    lock_t *lk = lua_newuserdatauv(L, sizeof *lk, 0);
    lk->fd = -1;
    luaL_setmetatable(L, LOCK_MT);
    lk->fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lk->fd < 0)
        return hcp_push_oserror(L, errno, "workspace: lock %s", path);
    struct timespec tick = { 0, 10 * 1000000 };
    for (lua_Integer waited = 0;; waited += 10) {
        if (flock(lk->fd, LOCK_EX | LOCK_NB) == 0)
            return 1;
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        if (waited >= timeout) {
            errno = ETIMEDOUT;
            break;
        }
        nanosleep(&tick, NULL);
    }
    int e = errno;
    close(lk->fd);
    lk->fd = -1;
    return hcp_push_oserror(L, e, "workspace: lock %s", path);
}

void hcp_register_jail(lua_State *L)
{
    static const luaL_Reg lock_meta[] = {
        { "__gc", lock_release }, { "__close", lock_release }, { NULL, NULL },
    };
    static const luaL_Reg lock_methods[] = { { "unlock", lock_release }, { NULL, NULL } };
    static const luaL_Reg funcs[] = {
        { "stage", l_stage }, { "writeback", l_writeback }, { "scan", l_scan },
        { "mkdirs_beneath", l_mkdirs_beneath },
        { "lock", l_lock }, { NULL, NULL },
    };
    luaL_newmetatable(L, LOCK_MT);
    luaL_setfuncs(L, lock_meta, 0);
    luaL_newlib(L, lock_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_setfuncs(L, funcs, 0);
}
