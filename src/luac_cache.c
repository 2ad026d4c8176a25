/* luac_cache.c — hcp-lua's compiled-module cache (issue 12): compiling the
 * Lua modules of `hcp run` takes ~4 ms of every invocation; loading them
 * compiled takes a fraction of it. A searcher placed before Lua's own finds
 * a module's source on package.path as Lua would, and loads the chunk
 * compiled from it (lua_dump, debug information kept: tracebacks still name
 * the source) from a file named after the source's path, inode, size and
 * modification time, in a directory only the interpreter's uid may write —
 * $HCP_RUNTIME_DIR/luac when set, else /run/hcp-lua/luac for root,
 * $XDG_RUNTIME_DIR/hcp-lua/luac otherwise, no cache without one; a file is used only if it is a regular file owned by
 * us, mode 0600. A changed source has another name: it is compiled again.
 * HCP_LUAC_CACHE=0 turns it off. Only in hcp-lua: a library user's Lua
 * loads modules its own way. */
#include "hcp_core.h"
#include "hcp_lua.h"
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0 &&
        st.st_size > 0 && st.st_size < (1 << 26) && (buf = malloc((size_t)st.st_size)) &&
        read(fd, buf, (size_t)st.st_size) != st.st_size) {
        free(buf);
        buf = NULL;
    }
    *len = buf ? (size_t)st.st_size : 0;
    close(fd);
    return buf;
}

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud)
{
    (void)L;
    return fwrite(p, 1, sz, ud) == sz ? 0 : 1;
}

/* Writes the function on top of the stack, compiled, to path (atomically). */
static void store(lua_State *L, const char *path)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!f) {
        if (fd >= 0)
            close(fd);
        return;
    }
    int bad = lua_dump(L, dump_writer, f, 0) != 0;
    bad = fclose(f) != 0 || bad;
    if (bad || rename(tmp, path) < 0)
        unlink(tmp);
}

/* package.searchers entry: loader, filename, or a message. */
static int searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushstring(L, name);
    lua_getfield(L, -3, "path");
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2))
        return 1;   /* the message: the next searcher says the same */
    const char *src = lua_tostring(L, -2);
    struct stat st;
    char path[PATH_MAX];
    if (stat(src, &st) < 0 ||
        (size_t)snprintf(path, sizeof path, "%s/%016llx-%llx-%llx-%lld.%ld.luac", cache_dir, hcp_fnv1a(src),
                         (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
                         (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec) >= sizeof path) {
        lua_pushfstring(L, "\n\tno compiled '%s'", name);
        return 1;
    }
    size_t len;
    char *chunk = read_own(path, &len);
    int r = chunk ? luaL_loadbufferx(L, chunk, len, src, "b") : LUA_ERRFILE;
    free(chunk);
    if (r != LUA_OK) {
        if (chunk)
            lua_pop(L, 1);
        if (luaL_loadfilex(L, src, "t") != LUA_OK)
            return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, src, lua_tostring(L, -1));
        store(L, path);
    }
    lua_pushstring(L, src);
    return 2;
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
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = n; i >= 2; i--) {   /* in at 2: after the preload searcher */
        lua_rawgeti(L, -1, i);
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushcfunction(L, searcher);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 2);
}
