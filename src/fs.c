/* fs.c — the few filesystem operations the Lua runtime needs and that must
 * not follow links: listing pack folders, private temporary directories,
 * exclusive 0600 files for minted credentials, removing a tree that a
 * child may have filled with symlinks to host directories, thousands of
 * levels deep or with its permissions taken away, and handing a jail to
 * the uid a child runs as. Also the runtime's own ids and hard limits. */
#include "hcp_core.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* core.listdir(path) -> sorted array of entry names (no "." or "..") */
static int l_listdir(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    DIR *d = opendir(path);
    if (!d)
        return hcp_push_oserror(L, errno, "%s", path);
    lua_newtable(L);
    int n = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            int err = errno;
            if (err) {
                closedir(d);
                return hcp_push_oserror(L, err, "%s", path);
            }
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        lua_pushstring(L, e->d_name);
        lua_rawseti(L, -2, ++n);
    }
    closedir(d);
    /* Sort in Lua-independent C so listings are deterministic. */
    const char **names = n ? lua_newuserdatauv(L, sizeof(char *) * (size_t)n, 0) : NULL;
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -2, i + 1);
        names[i] = lua_tostring(L, -1);
        lua_pop(L, 1); /* the string stays alive: the table still holds it */
    }
    if (n) {
        qsort(names, (size_t)n, sizeof(char *), cmp_names);
        lua_newtable(L);
        for (int i = 0; i < n; i++) {
            lua_pushstring(L, names[i]);
            lua_rawseti(L, -2, i + 1);
        }
    }
    return 1;
}

/* core.kind(path) -> "file" | "dir" | "link" | "other", without following a
 * final symlink; nil, msg, errno when it does not exist. */
static int l_kind(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat st;
    if (lstat(path, &st) != 0)
        return hcp_push_oserror(L, errno, "%s", path);
    if (S_ISREG(st.st_mode))
        lua_pushliteral(L, "file");
    else if (S_ISDIR(st.st_mode))
        lua_pushliteral(L, "dir");
    else if (S_ISLNK(st.st_mode))
        lua_pushliteral(L, "link");
    else
        lua_pushliteral(L, "other");
    return 1;
}

char *hcp_mkdtemp(const char *parent, const char *prefix)
{
    size_t np = strlen(parent), nx = strlen(prefix);
    int slash = np > 0 && parent[np - 1] == '/';
    char *tmpl = malloc(np + nx + 8);
    if (!tmpl)
        return NULL;
    memcpy(tmpl, parent, np);
    if (!slash)
        tmpl[np++] = '/';
    memcpy(tmpl + np, prefix, nx);
    memcpy(tmpl + np + nx, "XXXXXX", 7);
    if (mkdtemp(tmpl))
        return tmpl;
    int err = errno;
    free(tmpl);
    errno = err;
    return NULL;
}

const char *hcp_check_mkdtemp_args(lua_State *L, const char **prefix)
{
    const char *parent = luaL_checkstring(L, 1);
    *prefix = luaL_optstring(L, 2, "hcp-");
    luaL_argcheck(L, parent[0] == '/', 1, "absolute path expected");
    luaL_argcheck(L, strchr(*prefix, '/') == NULL, 2, "prefix must not contain '/'");
    return parent;
}

int hcp_push_mkdtemp(lua_State *L, const char *parent, const char *prefix, char *path)
{
    if (!path && !(path = hcp_mkdtemp(parent, prefix)))
        return hcp_push_oserror(L, errno, "mkdtemp %s", parent);
    lua_pushstring(L, path);
    free(path);
    return 1;
}

/* core.mkdtemp(parent, prefix) -> path of a new 0700 directory */
static int l_mkdtemp(lua_State *L)
{
    const char *prefix, *parent = hcp_check_mkdtemp_args(L, &prefix);
    return hcp_push_mkdtemp(L, parent, prefix, NULL);
}

/* core.write_private(path, data) -> true: creates a new file (never an
 * existing one, never through a symlink) readable by its owner only. */
static int l_write_private(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    size_t len;
    const char *data = luaL_checklstring(L, 2, &len);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return hcp_push_oserror(L, errno, "%s", path);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int err = errno;
            close(fd);
            unlink(path);
            return hcp_push_oserror(L, err, "write %s", path);
        }
        off += (size_t)w;
    }
    if (close(fd) != 0) {
        int err = errno;
        unlink(path);
        return hcp_push_oserror(L, err, "close %s", path);
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* chmod through a descriptor that may be O_PATH (fchmod refuses those):
 * fchmodat2 where the kernel has it (6.6), else the fd's /proc link. */
static int chmod_fd(int fd, mode_t mode)
{
    if (syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
        return 0;
    if (errno != ENOSYS && errno != EINVAL && errno != EBADF)
        return -1;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return chmod(proc, mode);
}

/* A directory the child owns as we do (a non-root runtime: the same uid)
 * and made unreadable or unwritable (chmod 000, 0500) gets rwx back for
 * its owner, through a descriptor, so nothing is followed. Root needs none
 * of it; a directory of another owner is left as it is. */
static int give_back(int fd)
{
    struct stat st;
    if (geteuid() == 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 0700) == 0700)
        return 0;
    return chmod_fd(fd, (st.st_mode & 07777) | 0700);
}

/* The directory `name` of dfd, opened for listing, never through a link. */
static int open_dir(int dfd, const char *name)
{
    int p = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (p < 0)
        return -1;
    int fd = give_back(p) < 0 ? -1 : openat(p, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int e = errno;
    close(p);
    errno = e;
    return fd;
}

struct rm { int top; unsigned long seq; int err; int progress; };

static void rm_note(struct rm *r, int err)
{
    if (err && err != ENOENT && !r->err)
        r->err = err;
}

/* Empties sub: its files are unlinked, its directories moved up into the
 * top directory under a fresh name (so depth never costs a descriptor or a
 * stack frame: a chain of any length is removed level by level). */
static void rm_flatten(struct rm *r, int sub)
{
    int dup_fd = dup(sub);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d) {
        rm_note(r, errno);
        if (dup_fd >= 0)
            close(dup_fd);
        return;
    }
    struct dirent *e;
    while ((errno = 0, e = readdir(d))) {
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (fstatat(sub, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rm_note(r, errno);
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (unlinkat(sub, e->d_name, 0) == 0)
                r->progress++;
            else
                rm_note(r, errno);
            continue;
        }
        /* moving a directory to another parent needs write on it (its "..") */
        int p = openat(sub, e->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (p >= 0) {
            (void)give_back(p);
            close(p);
        }
        for (int tries = 0; tries < 1000; tries++) {
            char name[48];
            snprintf(name, sizeof name, ".hcp-rm-%lu", r->seq++);
            if (renameat2(sub, e->d_name, r->top, name, RENAME_NOREPLACE) == 0) {
                r->progress++;
                break;
            }
            if (errno != EEXIST) {
                rm_note(r, errno);
                break;
            }
        }
    }
    rm_note(r, errno);
    closedir(d);
}

/* One pass over the top directory; returns how many entries it held. */
static int rm_pass(struct rm *r)
{
    int dup_fd = dup(r->top), seen = 0;
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d) {
        rm_note(r, errno);
        if (dup_fd >= 0)
            close(dup_fd);
        return 0;
    }
    rewinddir(d);   /* the descriptor is shared with every earlier pass */
    struct dirent *e;
    while ((errno = 0, e = readdir(d))) {
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        seen++;
        if (fstatat(r->top, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rm_note(r, errno);
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            int sub = open_dir(r->top, e->d_name);
            if (sub < 0) {
                rm_note(r, errno);
                continue;
            }
            rm_flatten(r, sub);
            close(sub);
            if (unlinkat(r->top, e->d_name, AT_REMOVEDIR) == 0)
                r->progress++;
            else if (errno != ENOTEMPTY)
                rm_note(r, errno);
        } else if (unlinkat(r->top, e->d_name, 0) == 0) {
            r->progress++;
        } else {
            rm_note(r, errno);
        }
    }
    rm_note(r, errno);
    closedir(d);
    return seen;
}

/* Removes everything inside the directory open at dfd, by descriptor,
 * never following a link (a link to a host directory is unlinked as a
 * link; a directory swapped for a link mid-walk fails O_NOFOLLOW). Passes
 * repeat until the directory is empty or one pass changes nothing (what
 * is left then: an immutable or append-only file, which no child can make
 * without CAP_LINUX_IMMUTABLE, or a directory of another owner). */
static int remove_contents(int dfd)
{
    struct rm r = { dfd, 0, 0, 0 };
    for (;;) {
        r.progress = 0;
        if (rm_pass(&r) == 0)
            return 0;
        if (r.progress == 0)
            return r.err ? r.err : ENOTEMPTY;
    }
}

int hcp_rmtree(const char *path, const char **what)
{
    struct stat st;
    *what = "";
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : errno;
    if (!S_ISDIR(st.st_mode)) {
        *what = "unlink ";
        return unlink(path) != 0 ? errno : 0;
    }
    int dfd = open_dir(AT_FDCWD, path);
    if (dfd < 0)
        return errno;
    int err = remove_contents(dfd);
    close(dfd);
    *what = err ? "rmtree " : "rmdir ";
    if (!err && rmdir(path) != 0)
        err = errno;
    return err;
}

const char *hcp_check_rmtree_path(lua_State *L, int idx)
{
    const char *path = luaL_checkstring(L, idx);
    luaL_argcheck(L, path[0] == '/', idx, "absolute path expected");
    luaL_argcheck(L, strcmp(path, "/") != 0, idx, "refusing to remove /");
    return path;
}

int hcp_push_rmtree(lua_State *L, const char *path)
{
    const char *what;
    int err = hcp_rmtree(path, &what);
    if (err)
        return hcp_push_oserror(L, err, "%s%s", what, path);
    lua_pushboolean(L, 1);
    return 1;
}

/* core.rmtree(path) -> true: removes a directory tree; a final symlink is
 * removed as a link, never followed. Missing path is success. */
static int l_rmtree(lua_State *L)
{
    return hcp_push_rmtree(L, hcp_check_rmtree_path(L, 1));
}

/* ---- core.chown_tree ------------------------------------------------------ */

#define CHOWN_DEPTH 128

/* Gives dfd's entries to uid:gid, descending into directories up to
 * CHOWN_DEPTH levels (one descriptor each; what the runtime creates in a
 * jail is never that deep, and deeper is the child's own making). Never
 * follows a link; a file with other hard links is left alone unless it is
 * the child's already (it could be a host file linked in). */
static int chown_contents(int dfd, uid_t uid, gid_t gid, int depth)
{
    int dup_fd = dup(dfd), first = 0;
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    if (!d) {
        int e = errno;
        if (dup_fd >= 0)
            close(dup_fd);
        return e;
    }
    struct dirent *e;
    while ((errno = 0, e = readdir(d))) {
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISLNK(st.st_mode))
            continue;
        int mine = st.st_uid == uid && st.st_gid == gid;
        if (!S_ISDIR(st.st_mode)) {
            if (!mine && st.st_nlink == 1 &&
                fchownat(dfd, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0 && !first)
                first = errno;
            continue;
        }
        int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) {
            first = first ? first : errno;
            continue;
        }
        if (!mine && fchown(sub, uid, gid) < 0 && !first)
            first = errno;
        int r = depth < CHOWN_DEPTH ? chown_contents(sub, uid, gid, depth + 1) : 0;
        first = first ? first : r;
        close(sub);
    }
    first = first ? first : errno;
    closedir(d);
    return first;
}

/* core.chown_tree(path, uid, gid) -> true: path (a directory, not through
 * a link) and what it holds become uid:gid, so a child running as that
 * uid can use its jail; an OS failure is nil, msg, errno. */
static int l_chown_tree(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_Integer uid = luaL_checkinteger(L, 2), gid = luaL_checkinteger(L, 3);
    luaL_argcheck(L, path[0] == '/', 1, "absolute path expected");
    luaL_argcheck(L, uid >= 0 && uid < 0x7fffffff, 2, "uid out of range");
    luaL_argcheck(L, gid >= 0 && gid < 0x7fffffff, 3, "gid out of range");
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return hcp_push_oserror(L, errno, "%s", path);
    int err = fchown(fd, (uid_t)uid, (gid_t)gid) < 0 ? errno : 0;
    if (!err)
        err = chown_contents(fd, (uid_t)uid, (gid_t)gid, 1);
    close(fd);
    if (err)
        return hcp_push_oserror(L, err, "chown %s", path);
    lua_pushboolean(L, 1);
    return 1;
}

/* core.getrlimits() -> { cpu_s =, as_mb =, fsize_mb =, nofile =, nproc = }:
 * the runtime's own hard limits in the units of the isolation option
 * (rounded down); a limit that is unlimited is absent. A child can never
 * be given more than these unless the runtime is root. */
static int l_getrlimits(lua_State *L)
{
    static const struct { const char *key; int resource; unsigned long long unit; } keys[] = {
        { "cpu_s", RLIMIT_CPU, 1 }, { "as_mb", RLIMIT_AS, 1ULL << 20 },
        { "fsize_mb", RLIMIT_FSIZE, 1ULL << 20 }, { "nofile", RLIMIT_NOFILE, 1 },
        { "nproc", RLIMIT_NPROC, 1 },
    };
    lua_createtable(L, 0, 5);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        struct rlimit r;
        if (getrlimit(keys[i].resource, &r) < 0)
            return hcp_push_oserror(L, errno, "getrlimit %s", keys[i].key);
        if (r.rlim_max == RLIM_INFINITY)
            continue;
        lua_pushinteger(L, (lua_Integer)(r.rlim_max / keys[i].unit));
        lua_setfield(L, -2, keys[i].key);
    }
    return 1;
}

/* core.filetype(path) -> "file" | "dir" | "link" | "socket" | "fifo" |
 * "char" | "block", without following a final link; nil, msg, errno. */
static int l_filetype(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    struct stat st;
    if (lstat(path, &st) != 0)
        return hcp_push_oserror(L, errno, "%s", path);
    lua_pushstring(L, S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir"
                    : S_ISLNK(st.st_mode) ? "link" : S_ISSOCK(st.st_mode) ? "socket"
                    : S_ISFIFO(st.st_mode) ? "fifo" : S_ISCHR(st.st_mode) ? "char" : "block");
    return 1;
}

/* core.read_file(path, max_bytes) -> data | nil, msg, errno
 * Reads a whole regular file the runtime relies on (a manifest): opened
 * O_PATH first, so a FIFO, a socket or a device is refused without being
 * opened for reading (nothing blocks, no device is touched), and refused
 * when it holds more than max_bytes — also when it grows while read. */
static int l_read_file(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_Integer max = luaL_checkinteger(L, 2);
    luaL_argcheck(L, max >= 0 && max < ((lua_Integer)1 << 40), 2, "byte bound out of range");
    struct stat st;
    int fd = hcp_open_regular(AT_FDCWD, path, 0, 0, &st);
    if (fd == HCP_NOT_REGULAR)
        return luaL_pushfail(L), lua_pushfstring(L, "%s: %s, not a regular file", path, hcp_file_type(st.st_mode)),
               lua_pushinteger(L, EINVAL), 3;
    if (fd < 0)
        return hcp_push_oserror(L, errno, "%s", path);
    if (st.st_size > max) {
        close(fd);
        return luaL_pushfail(L), lua_pushfstring(L, "%s: %I bytes, more than the limit of %I", path,
                                                 (lua_Integer)st.st_size, max),
               lua_pushinteger(L, EFBIG), 3;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_Integer total = 0;
    for (;;) {
        char *p = luaL_prepbuffer(&b);
        ssize_t n = read(fd, p, LUAL_BUFFERSIZE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int err = errno;
            close(fd);
            return hcp_push_oserror(L, err, "%s", path);
        }
        if (n == 0)
            break;
        total += n;
        if (total > max) {
            close(fd);
            return luaL_pushfail(L), lua_pushfstring(L, "%s: more than the limit of %I bytes", path, max),
                   lua_pushinteger(L, EFBIG), 3;
        }
        luaL_addsize(&b, (size_t)n);
    }
    close(fd);
    luaL_pushresult(&b);
    return 1;
}

/* core.geteuid() -> the runtime's effective uid (namespaces need a user
 * namespace first when it is not 0) */
static int l_geteuid(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)geteuid());
    return 1;
}

/* core.getpid() -> the runtime's pid (names its private temp dirs) */
static int l_getpid(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)getpid());
    return 1;
}

/* core.getcwd() -> the runtime's working directory */
static int l_getcwd(lua_State *L)
{
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return hcp_push_oserror(L, errno, "getcwd");
    lua_pushstring(L, cwd);
    free(cwd);
    return 1;
}

/* core.mkdir(path) -> true: one directory, mode 0700 */
static int l_mkdir(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    if (mkdir(path, 0700) != 0)
        return hcp_push_oserror(L, errno, "mkdir %s", path);
    lua_pushboolean(L, 1);
    return 1;
}

/* core.isatty(fd) -> boolean */
static int l_isatty(lua_State *L)
{
    lua_Integer fd = luaL_checkinteger(L, 1);
    lua_pushboolean(L, fd >= 0 && fd <= INT_MAX && isatty((int)fd));
    return 1;
}

static const luaL_Reg fs_funcs[] = {
    {"isatty", l_isatty},
    {"mkdir", l_mkdir},
    {"getcwd", l_getcwd},
    {"listdir", l_listdir},
    {"kind", l_kind},
    {"mkdtemp", l_mkdtemp},
    {"write_private", l_write_private},
    {"rmtree", l_rmtree},
    {"chown_tree", l_chown_tree},
    {"getrlimits", l_getrlimits},
    {"filetype", l_filetype},
    {"read_file", l_read_file},
    {"getpid", l_getpid},
    {"geteuid", l_geteuid},
    {NULL, NULL},
};

void hcp_register_fs(lua_State *L)
{
    luaL_setfuncs(L, fs_funcs, 0);
}
