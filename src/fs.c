/* fs.c — the few filesystem operations the Lua runtime needs and that must
 * not follow links: listing pack folders, private temporary directories,
 * exclusive 0600 files for minted credentials, and removing a tree that a
 * child may have filled with symlinks to host directories. */
#include "hcp_core.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* core.mkdtemp(parent, prefix) -> path of a new 0700 directory */
static int l_mkdtemp(lua_State *L)
{
    const char *parent = luaL_checkstring(L, 1);
    const char *prefix = luaL_optstring(L, 2, "hcp-");
    luaL_argcheck(L, parent[0] == '/', 1, "absolute path expected");
    luaL_argcheck(L, strchr(prefix, '/') == NULL, 2, "prefix must not contain '/'");
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, parent);
    if (parent[strlen(parent) - 1] != '/')
        luaL_addchar(&b, '/');
    luaL_addstring(&b, prefix);
    luaL_addstring(&b, "XXXXXX");
    luaL_pushresult(&b);
    char *tmpl = strdup(lua_tostring(L, -1));
    if (!tmpl)
        return luaL_error(L, "out of memory");
    if (!mkdtemp(tmpl)) {
        int err = errno;
        free(tmpl);
        return hcp_push_oserror(L, err, "mkdtemp %s", parent);
    }
    lua_pushstring(L, tmpl);
    free(tmpl);
    return 1;
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

/* Remove everything inside the directory open at dfd. Works by descriptor
 * and never follows a symlink: a link to a host directory is unlinked as a
 * link, and a directory swapped for a link mid-walk fails O_NOFOLLOW. */
static int remove_contents(int dfd, int depth)
{
    if (depth > 256)
        return ELOOP;
    int dup_fd = dup(dfd);
    if (dup_fd < 0)
        return errno;
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        int err = errno;
        close(dup_fd);
        return err;
    }
    int result = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (!e) {
            if (errno)
                result = errno;
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT)
                result = errno;
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                result = errno;
                continue;
            }
            int err = remove_contents(sub, depth + 1);
            close(sub);
            if (err)
                result = err;
            if (unlinkat(dfd, e->d_name, AT_REMOVEDIR) != 0 && errno != ENOENT)
                result = errno;
        } else if (unlinkat(dfd, e->d_name, 0) != 0 && errno != ENOENT) {
            result = errno;
        }
    }
    closedir(d);
    return result;
}

/* core.rmtree(path) -> true: removes a directory tree; a final symlink is
 * removed as a link, never followed. Missing path is success. */
static int l_rmtree(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    luaL_argcheck(L, path[0] == '/', 1, "absolute path expected");
    luaL_argcheck(L, strcmp(path, "/") != 0, 1, "refusing to remove /");
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) {
            lua_pushboolean(L, 1);
            return 1;
        }
        return hcp_push_oserror(L, errno, "%s", path);
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0)
            return hcp_push_oserror(L, errno, "unlink %s", path);
        lua_pushboolean(L, 1);
        return 1;
    }
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return hcp_push_oserror(L, errno, "%s", path);
    int err = remove_contents(dfd, 0);
    close(dfd);
    if (err)
        return hcp_push_oserror(L, err, "rmtree %s", path);
    if (rmdir(path) != 0)
        return hcp_push_oserror(L, errno, "rmdir %s", path);
    lua_pushboolean(L, 1);
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
    {"read_file", l_read_file},
    {"getpid", l_getpid},
    {"geteuid", l_geteuid},
    {NULL, NULL},
};

void hcp_register_fs(lua_State *L)
{
    luaL_setfuncs(L, fs_funcs, 0);
}
