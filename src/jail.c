/* jail.c — moving files across the jail boundary, by descriptor.
 *
 * Staging copies an input file from under the caller's out_dir into the
 * jail; write-back copies a file the child wrote in the jail out to out_dir.
 * Both resolve every path beneath its root with openat2(RESOLVE_BENEATH),
 * so neither ".." nor a symlink can take them outside; both open what they
 * read O_PATH first and read it only when it is a regular file (a FIFO, a
 * socket or a device is refused, never waited on); the out_dir side is
 * checked again as the kernel resolved it (no hidden component, no
 * protected directory). Write-back refuses a jail file that is a symlink or
 * has other hard links (a child must not be able to make the runtime copy
 * ~/.ssh/id_rsa out, or write through a link), keeps holes, stops at a byte
 * bound, replaces an existing destination only when allowed, and does so
 * atomically (temporary file, then rename).
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

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

#define COPY_MAX ((off_t)1 << 34)   /* 16 GiB: a file larger is refused, not truncated */
#define MAX_PROTECTED 64

/* What the Lua side asks of one copy (the optional options table). */
struct copy_opts {
    int allow_hidden;      /* read or write through a dot-named component below the out_dir root */
    int replace;           /* write-back may replace an existing destination */
    lua_Integer max_bytes; /* data bytes this copy may still move */
    int nprot;
    const char *prot[MAX_PROTECTED];   /* paths the out_dir side never reaches */
};

/* Options at stack index idx (absent: the permissive defaults of the bare
 * core API). The strings stay referenced by the table, which stays on the
 * stack for the whole call. */
static void read_opts(lua_State *L, int idx, struct copy_opts *o)
{
    o->allow_hidden = 1;
    o->replace = 1;
    o->max_bytes = COPY_MAX;
    o->nprot = 0;
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    if (lua_getfield(L, idx, "allow_hidden") != LUA_TNIL)
        o->allow_hidden = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "replace") != LUA_TNIL)
        o->replace = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "max_bytes") != LUA_TNIL) {
        o->max_bytes = luaL_checkinteger(L, -1);
        luaL_argcheck(L, o->max_bytes >= 0, idx, "max_bytes must not be negative");
    }
    lua_pop(L, 1);
    if (lua_getfield(L, idx, "protected") == LUA_TTABLE) {
        lua_Integer n = luaL_len(L, -1);
        luaL_argcheck(L, n <= MAX_PROTECTED, idx, "too many protected paths");
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, -1, i);
            const char *p = lua_tostring(L, -1);
            luaL_argcheck(L, p && p[0] == '/', idx, "protected paths must be absolute strings");
            o->prot[o->nprot++] = p;
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

/* The out_dir side of a copy as the kernel resolved it (fd: the staged file,
 * or the destination's directory with name its leaf): beneath the root, no
 * hidden component below it unless allowed, not inside a protected path.
 * Checked on the descriptor, so a symlink inside out_dir cannot lead around
 * the lexical rules. NULL, or why not (possibly in msg). */
static const char *check_resolved(int fd, const char *name, int rootfd,
                                  const struct copy_opts *o, char *msg, size_t msgsz)
{
    char real[PATH_MAX], preal[PATH_MAX], root_real[PATH_MAX];
    if (o->allow_hidden && o->nprot == 0)
        return NULL;   /* nothing to check beyond RESOLVE_BENEATH */
    /* without /proc the resolved path is unknown: refused, never guessed */
    if (hcp_fd_path(fd, real, sizeof real) < 0 || hcp_fd_path(rootfd, root_real, sizeof root_real) < 0)
        return "its resolved path cannot be checked (is /proc mounted?)";
    if (name) {
        size_t len = strlen(real);
        int n = snprintf(real + len, sizeof real - len, "%s%s", len == 1 ? "" : "/", name);
        if (n < 0 || (size_t)n >= sizeof real - len)
            return "its resolved path is too long";
    }
    if (!hcp_path_contains(root_real, real))
        return "it resolves outside out_dir";
    size_t rlen = strcmp(root_real, "/") == 0 ? 0 : strlen(root_real);
    for (const char *c = real + rlen; !o->allow_hidden && *c; c++) {
        if (c[0] == '/' && c[1] == '.') {
            int n = (int)strcspn(c + 1, "/");
            snprintf(msg, msgsz, "it resolves through the hidden name \"%.*s\" (allow_hidden is off)", n, c + 1);
            return msg;
        }
    }
    for (int i = 0; i < o->nprot; i++) {
        if (realpath(o->prot[i], preal) && hcp_path_contains(preal, real))
            return "it lies in a directory the runtime protects (a pack, the state dir or the runtime's own files)";
    }
    return NULL;
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

/* Copies [from, to) of in to the same offsets of out. */
static int copy_range(int in, int out, off_t from, off_t to)
{
    char buf[65536];
    while (from < to) {
        off_t left = to - from;
        size_t want = left < (off_t)sizeof buf ? (size_t)left : sizeof buf;
        ssize_t n = pread(in, buf, want, from);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;   /* the file shrank: what is there is copied */
        for (ssize_t off = 0; off < n;) {
            ssize_t w = pwrite(out, buf + off, (size_t)(n - off), from + off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return -1;
            off += w;
        }
        from += n;
    }
    return 0;
}

/* Copies the first `size` bytes of in to out, data segment by data segment
 * (SEEK_DATA/SEEK_HOLE), so holes stay holes; a file system without them
 * shows one segment. Refuses (EFBIG) before writing a segment that would
 * take the data copied past budget. *copied: data bytes written. */
static int copy_sparse(int in, int out, off_t size, off_t budget, off_t *copied)
{
    off_t pos = 0;
    *copied = 0;
    while (pos < size) {
        off_t data = lseek(in, pos, SEEK_DATA);
        if (data < 0 && errno == ENXIO)
            break;      /* only a hole is left */
        if (data < 0 && errno != EINVAL)
            return -1;
        if (data < 0)
            data = pos; /* no SEEK_DATA here: the rest is data */
        if (data >= size)
            break;
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0 || hole > size)
            hole = size;
        if (*copied + (hole - data) > budget) {
            errno = EFBIG;
            return -1;
        }
        if (copy_range(in, out, data, hole) < 0)
            return -1;
        *copied += hole - data;
        pos = hole;
    }
    return ftruncate(out, size);
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

/* Moves tmp to name in dir: over an existing name only when replace. */
static int rename_into(int dir, const char *tmp, const char *name, int replace)
{
    if (replace)
        return renameat(dir, tmp, dir, name);
    if (renameat2(dir, tmp, dir, name, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    /* a file system without RENAME_NOREPLACE: a hard link fails on an
     * existing name just the same, and is as atomic */
    if (linkat(dir, tmp, dir, name, 0) < 0)
        return -1;
    (void)unlinkat(dir, tmp, 0);
    return 0;
}

static int push_refusal(lua_State *L, const char *verb, const char *rel, const char *why)
{
    luaL_pushfail(L);
    lua_pushfstring(L, "workspace: %s of %s refused: %s", verb, rel, why);
    lua_pushinteger(L, EPERM);
    return 3;
}

static const char *type_refusal(char *msg, size_t msgsz, mode_t m)
{
    if (S_ISLNK(m))
        return "it is a symbolic link or lies behind one";
    snprintf(msg, msgsz, "it is %s, not a regular file", hcp_file_type(m));
    return msg;
}

/* core.stage(src_root, rel, dst_root, dst_rel [, opts]) -> true, bytes
 * Copies src_root/rel (a regular file, reached without leaving src_root; a
 * FIFO, socket or device is refused and never opened for reading) to
 * dst_root/dst_rel (0600; parents created 0700), holes kept, through a
 * temporary name and a rename: a persisted jail may hold an older copy, and
 * whatever a child left at that name (even a symlink) is replaced, never
 * written through. opts: allow_hidden and protected (checked on the source
 * as the kernel resolved it), max_bytes. */
static int l_stage(lua_State *L)
{
    const char *src_path, *dst_path, *name;
    const char *rel = check_rel(L, 2);
    const char *dst_rel = check_rel(L, 4);
    struct copy_opts o;
    read_opts(L, 5, &o);
    int src_root, dst_root, pushed = open_roots(L, &src_root, &src_path, &dst_root, &dst_path);
    if (pushed)
        return pushed;
    int in = -1, dir = -1, out = -1, err = 0;
    const char *what = rel, *escaped_root = src_path, *refusal = NULL;
    char tmp[64] = "", msg[256];
    struct stat st;
    off_t copied = 0;
    in = hcp_open_regular(src_root, rel, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, &st);
    if (in == HCP_NOT_REGULAR) {
        in = -1;
        refusal = type_refusal(msg, sizeof msg, st.st_mode);
    } else if (in < 0) {
        err = errno;
    } else if ((refusal = check_resolved(in, NULL, src_root, &o, msg, sizeof msg)) != NULL) {
        /* refused as resolved */
    } else if (st.st_size > COPY_MAX) {
        err = EFBIG;
    } else if ((dir = make_parents(dst_root, dst_rel, &name)) < 0) {
        err = errno;
        what = dst_rel;
        escaped_root = dst_path;
    } else if ((out = open_tmp(dir, tmp, sizeof tmp, 0600)) < 0) {
        err = errno;
        what = dst_rel;
    } else if (copy_sparse(in, out, st.st_size, (off_t)o.max_bytes, &copied) < 0) {
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
    if (refusal)
        return push_refusal(L, "staging", rel, refusal);
    if (err == EXDEV)
        return luaL_pushfail(L), lua_pushfstring(L, "workspace: %s: path escapes %s", what, escaped_root),
               lua_pushinteger(L, err), 3;
    if (err == EFBIG) {
        snprintf(msg, sizeof msg, "it holds more than the %lld bytes this call may still copy",
                 (long long)(st.st_size > COPY_MAX ? COPY_MAX : o.max_bytes));
        return push_refusal(L, "staging", rel, msg);
    }
    if (err)
        return hcp_push_oserror(L, err, "workspace: %s", what);
    lua_pushboolean(L, 1);
    lua_pushinteger(L, (lua_Integer)copied);
    return 2;
}

/* The jail side of a write-back: a regular file with one link, reached
 * without any symlink. Returns the fd open for reading, or -1 with *missing
 * set (no such file), *refusal set, or errno. */
static int open_output(int jail, const char *rel, struct stat *st, int *missing, const char **refusal,
                       char *msg, size_t msgsz)
{
    int in = hcp_open_regular(jail, rel, O_NOFOLLOW,
                              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, st);
    if (in == HCP_NOT_REGULAR) {
        *refusal = type_refusal(msg, msgsz, st->st_mode);
        return -1;
    }
    if (in < 0) {
        if (errno == ENOENT)
            *missing = 1;
        else if (errno == ELOOP || errno == EXDEV)
            *refusal = "it is a symbolic link or lies behind one";
        return -1;
    }
    if (st->st_nlink != 1) {
        close(in);
        *refusal = "it has other hard links";
        return -1;
    }
    return in;
}

/* core.writeback(jail_root, rel, dst_root, dst_rel [, opts]) -> true, bytes
 * | false (no such file in the jail) | nil, msg, errno.
 * The jail file must be a regular file with one link, reached without any
 * symlink (a FIFO is refused, never opened for reading); the destination
 * directory must exist beneath dst_root and pass the resolved checks; the
 * file is written to a temporary name there, holes kept, and renamed to
 * dst_rel — over an existing file only with opts.replace. opts.max_bytes
 * bounds the data copied: past it the file is refused, not cut. */
static int l_writeback(lua_State *L)
{
    const char *jail_path, *dst_path, *name;
    const char *rel = check_rel(L, 2);
    const char *dst_rel = check_rel(L, 4);
    struct copy_opts o;
    read_opts(L, 5, &o);
    int jail, dst_root, pushed = open_roots(L, &jail, &jail_path, &dst_root, &dst_path);
    if (pushed)
        return pushed;
    int in, dir = -1, out = -1, err = 0, missing = 0;
    const char *refusal = NULL;
    char tmp[64] = "", msg[256], dirpart[PATH_MAX];
    struct stat st, dst;
    off_t copied = 0;
    in = open_output(jail, rel, &st, &missing, &refusal, msg, sizeof msg);
    if (in < 0) {
        err = errno;
    } else if (st.st_size > COPY_MAX) {
        err = EFBIG;
    } else if (split_rel(dst_rel, dirpart, sizeof dirpart, &name) < 0) {
        err = ENAMETOOLONG;
    } else if ((dir = hcp_open_beneath(dst_root, dirpart, O_PATH | O_DIRECTORY, 0,
                                       RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)) < 0) {
        err = errno;
    } else if ((refusal = check_resolved(dir, name, dst_root, &o, msg, sizeof msg)) != NULL) {
        /* refused as resolved */
    } else if (!o.replace && fstatat(dir, name, &dst, AT_SYMLINK_NOFOLLOW) == 0) {
        refusal = "it exists in out_dir and replacing is not allowed (replace is off)";
    } else {
        /* a name of our own beside the destination: same filesystem, so
         * the rename is atomic and a reader sees the old file or the new */
        out = open_tmp(dir, tmp, sizeof tmp, 0666);
        if (out < 0)
            err = errno;
        else if (copy_sparse(in, out, st.st_size, (off_t)o.max_bytes, &copied) < 0 || fsync(out) < 0)
            err = errno;
        if (out >= 0 && close(out) < 0 && !err)
            err = errno;
        if (out >= 0 && !err && rename_into(dir, tmp, name, o.replace) < 0) {
            err = errno;
            if (err == EEXIST)
                refusal = "it exists in out_dir and replacing is not allowed (replace is off)";
        }
        if (out >= 0 && (err || refusal))
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
        return push_refusal(L, "write-back", rel, refusal);
    if (err == EXDEV)
        return luaL_pushfail(L), lua_pushfstring(L, "workspace: %s: path escapes %s", dst_rel, dst_path),
               lua_pushinteger(L, err), 3;
    if (err == EFBIG) {
        if (st.st_size > COPY_MAX)
            snprintf(msg, sizeof msg, "it is larger than %lld bytes", (long long)COPY_MAX);
        else
            snprintf(msg, sizeof msg, "it holds more data than the %lld bytes left of this call's "
                     "write-back limit (max_writeback)", (long long)o.max_bytes);
        return push_refusal(L, "write-back", rel, msg);
    }
    if (err)
        return hcp_push_oserror(L, err, "workspace: write-back of %s", dst_rel);
    lua_pushboolean(L, 1);
    lua_pushinteger(L, (lua_Integer)copied);
    return 2;
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

#define SCAN_DEPTH 32
#define SCAN_FILES 100000

/* Records regular files under dirfd as rel -> "ino:size:mtime_ns" without
 * following links; depth and count are bounded so a child cannot make the
 * runtime walk forever. Whatever is left out (too deep, too many, a name too
 * long, a directory that cannot be read) sets *truncated. */
static void scan_dir(lua_State *L, int dirfd, const char *prefix, int depth, int *count, int *truncated)
{
    int dup_fd = dup(dirfd);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d) {
        if (dup_fd >= 0)
            close(dup_fd);
        *truncated = 1;
        return;
    }
    struct dirent *e;
    for (;;) {
        errno = 0;
        if ((e = readdir(d)) == NULL) {
            if (errno)
                *truncated = 1;
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        char rel[PATH_MAX];
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            snprintf(rel, sizeof rel, "%s%s", prefix, e->d_name) >= (int)sizeof rel) {
            *truncated = 1;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            char p2[PATH_MAX];
            int sub = -1;
            if (depth >= SCAN_DEPTH || snprintf(p2, sizeof p2, "%s/", rel) >= (int)sizeof p2 ||
                (sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                *truncated = 1;
                continue;
            }
            scan_dir(L, sub, p2, depth + 1, count, truncated);
            close(sub);
        } else if (S_ISREG(st.st_mode)) {
            if (*count >= SCAN_FILES) {
                *truncated = 1;
                break;
            }
            lua_pushfstring(L, "%I:%I:%I", (lua_Integer)st.st_ino, (lua_Integer)st.st_size,
                            (lua_Integer)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
            lua_setfield(L, -2, rel);
            (*count)++;
        }
    }
    closedir(d);
}

/* core.scan(dir) -> { [rel] = "ino:size:mtime" } of the regular files, and
 * true when the listing is incomplete (see scan_dir). */
static int l_scan(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return hcp_push_oserror(L, errno, "workspace: %s", path);
    int count = 0, truncated = 0;
    lua_newtable(L);
    scan_dir(L, fd, "", 0, &count, &truncated);
    close(fd);
    lua_pushboolean(L, truncated);
    return 2;
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
