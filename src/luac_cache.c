/* luac_cache.c — hcp-lua's compiled-module cache (issue 12): compiling the
 * Lua modules of `hcp run` takes ~4 ms of every invocation; loading them
 * compiled takes a fraction of it. A searcher placed before Lua's own finds
 * a module's source on package.path as Lua would, and loads the chunk
 * compiled from it (lua_dump, without the names of locals — luac_trim.c;
 * source names and lines kept: tracebacks are the same) from a file
 * named after the source's path, inode, size and change time, in a
 * directory only the interpreter's uid may write —
 * $HCP_RUNTIME_DIR/luac when set, else /run/hcp-lua/luac for root,
 * $XDG_RUNTIME_DIR/hcp-lua/luac otherwise, no cache without one; a file is used only if it is a regular file owned by
 * us, mode 0600. A changed source has another name: it is compiled again,
 * and the files compiled from its earlier versions are removed, so the
 * directory (on tmpfs: memory) holds one file per source path, not one per
 * edit. The searcher takes the place of Lua's own: a module that is not on
 * package.path is looked for there once, not twice (cjson.safe, a C module,
 * was searched for in eight places twice). HCP_LUAC_CACHE=0 turns it off.
 * Only in hcp-lua: a library user's Lua loads modules its own way. */
#include "hcp_core.h"
#include "hcp_lua.h"
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

static char cache_dir[PATH_MAX];

/* A compiled chunk: the file's bytes, if the file is ours alone. */
static char *read_own(const char *path, size_t *len)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = NULL;
    static uid_t euid = (uid_t)-1;   /* asked once: hcp-lua never changes it */
    if (euid == (uid_t)-1)
        euid = geteuid();
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == euid && (st.st_mode & 077) == 0 &&
        st.st_size > 0 && st.st_size < (1 << 26) && (buf = malloc((size_t)st.st_size)) &&
        read(fd, buf, (size_t)st.st_size) != st.st_size) {
        free(buf);
        buf = NULL;
    }
    *len = buf ? (size_t)st.st_size : 0;
    close(fd);
    return buf;
}

/* Removes what was compiled from earlier versions of the same source: the
 * other files of the cache whose names start with the same path hash
 * ("<16 hex digits>-"). A reader that had one open keeps its copy; one
 * about to open it finds none and compiles the source. */
static void drop_older(const char *path)
{
    const char *name = strrchr(path, '/') + 1;
    DIR *d = opendir(cache_dir);
    if (!d)
        return;
    int dfd = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, name, 17) == 0 && strcmp(e->d_name, name) != 0 &&
            strlen(e->d_name) > 6 && strcmp(e->d_name + strlen(e->d_name) - 5, ".luac") == 0)
            unlinkat(dfd, e->d_name, 0);
    closedir(d);
}

/* lua_dump's bytes, gathered in one growing buffer. */
struct dump { unsigned char *p; size_t len, cap; };

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud)
{
    struct dump *d = ud;
    (void)L;
    if (d->len + sz > d->cap) {
        size_t cap = d->cap ? d->cap : 16384;
        while (cap < d->len + sz)
            cap *= 2;
        unsigned char *n = realloc(d->p, cap);
        if (!n)
            return 1;
        d->p = n;
        d->cap = cap;
    }
    memcpy(d->p + d->len, p, sz);
    d->len += sz;
    return 0;
}

/* Writes the function on top of the stack, compiled, to path (atomically):
 * without the names of its locals where the trim can (luac_trim.c), as
 * dumped otherwise. */
static void store(lua_State *L, const char *path)
{
    struct dump d = { NULL, 0, 0 };
    if (lua_dump(L, dump_writer, &d, 0) == 0 && d.len > 0) {
        unsigned char *trimmed = malloc(d.len);
        size_t n = trimmed ? hcp_luac_trim(d.p, d.len, trimmed) : 0;
        struct iovec iov = { n ? trimmed : d.p, n ? n : d.len };
        if (hcp_cache_write(path, &iov, 1) == 0)
            drop_older(path);
        free(trimmed);
    }
    free(d.p);
}

/* The cache file of a source as it is now (path, inode, size, change
 * time: any write, chmod, chown or rename of it gives another name). */
static int cache_name(const char *src, const struct stat *st, char *path, size_t size)
{
    int w = snprintf(path, size, "%s/%016llx-%llx-%llx-%lld.%ld-t.luac", cache_dir, hcp_fnv1a(src),
                     (unsigned long long)st->st_ino, (unsigned long long)st->st_size,
                     (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
    return w > 0 && (size_t)w < size;
}

/* One candidate file: 1 with its chunk on the stack, 0 when it cannot be
 * opened (the search goes on, as package.searchpath skips a file it cannot
 * open), or a raised error for one that does not compile. */
static int load_candidate(lua_State *L, const char *name, const char *src, const struct stat *st)
{
    char path[PATH_MAX];
    int keyed = cache_name(src, st, path, sizeof path);
    size_t len;
    char *chunk = keyed ? read_own(path, &len) : NULL;
    int cached = chunk != NULL;
    int r = cached ? luaL_loadbufferx(L, chunk, len, src, "b") : LUA_ERRFILE;
    free(chunk);
    if (r == LUA_OK)
        return 1;
    if (cached)
        lua_pop(L, 1);   /* the message of a damaged file: the source is loaded instead */
    /* the source, as Lua's own searcher would load it (and say why not) */
    r = luaL_loadfilex(L, src, "t");
    if (r == LUA_ERRFILE) {
        lua_pop(L, 1);
        return 0;
    }
    if (r != LUA_OK)
        return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, src, lua_tostring(L, -1));
    if (keyed)
        store(L, path);
    return 1;
}

/* package.searchers entry: loader, filename, or a message. The templates
 * of package.path in order, as package.searchpath tries them, but a
 * candidate is asked for with one stat (its cache name needs it) instead
 * of being opened and closed first. */
static int searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "path");
    const char *tmpl = lua_tostring(L, -1);
    if (!tmpl)
        return luaL_error(L, "'package.path' must be a string");
    const char *file = luaL_gsub(L, name, ".", LUA_DIRSEP);
    int top = lua_gettop(L);
    while (*tmpl) {
        const char *end = strchr(tmpl, *LUA_PATH_SEP);
        size_t n = end ? (size_t)(end - tmpl) : strlen(tmpl);
        if (n > 0) {
            lua_pushlstring(L, tmpl, n);
            const char *src = luaL_gsub(L, lua_tostring(L, -1), LUA_PATH_MARK, file);
            struct stat st;
            if (stat(src, &st) == 0 && load_candidate(L, name, src, &st)) {
                lua_pushstring(L, src);
                return 2;
            }
            lua_settop(L, top);
        }
        tmpl += n + (end ? 1 : 0);
    }
    /* not found: the message Lua's own searcher gives */
    lua_getfield(L, -3, "searchpath");
    lua_pushstring(L, name);
    lua_getfield(L, -5, "path");
    lua_call(L, 2, 2);
    return 1;
}

void hcp_luac_install(lua_State *L)
{
    const char *off = getenv("HCP_LUAC_CACHE");
    char base[PATH_MAX - 16];
    if ((off && strcmp(off, "0") == 0) || hcp_runtime_dir(base, sizeof base) < 0 ||
        (size_t)snprintf(cache_dir, sizeof cache_dir, "%s/luac", base) >= sizeof cache_dir || !hcp_own_dir(cache_dir))
        return;
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    lua_pushcfunction(L, searcher);
    lua_rawseti(L, -2, 2);   /* Lua's own file searcher's place: after preload, before C modules */
    lua_pop(L, 2);
}
