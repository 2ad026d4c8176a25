/* paths.c — lexical path helpers and executable resolution for hcp.core.
 *
 * normalize/contains are pure string functions; resolve, resolve_beneath and
 * allow_match decide which file a sandboxed call may execute, so they fail
 * closed: anything ambiguous is a refusal, never a guess. */
#include "hcp_core.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"

int hcp_push_oserror(lua_State *L, int err, const char *fmt, ...)
{
    const char *msg = strerror(err);
    va_list ap, ap2;
    luaL_Buffer b;
    int n;

    luaL_pushfail(L);
    va_start(ap, fmt);
    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        /* An encoding error in the arguments: keep the bare format. */
        va_end(ap2);
        lua_pushfstring(L, "%s: %s", fmt, msg);
    } else {
        char *p = luaL_buffinitsize(L, &b, (size_t)n + 1);
        vsnprintf(p, (size_t)n + 1, fmt, ap2);
        va_end(ap2);
        luaL_addsize(&b, (size_t)n);
        luaL_addstring(&b, ": ");
        luaL_addstring(&b, msg);
        luaL_pushresult(&b);
    }
    lua_pushinteger(L, err);
    return 3;
}

/* ---- Lua argument helpers -------------------------------------------- */

/* A path argument: a string without NUL bytes (a C call would silently cut it). */
static const char *checkpath(lua_State *L, int arg, size_t *lenp)
{
    size_t len;
    const char *s = luaL_checklstring(L, arg, &len);

    luaL_argcheck(L, strlen(s) == len, arg, "path contains a NUL byte");
    if (lenp)
        *lenp = len;
    return s;
}

static const char *checkabs(lua_State *L, int arg)
{
    const char *s = checkpath(L, arg, NULL);

    luaL_argcheck(L, s[0] == '/', arg, "absolute path expected");
    return s;
}

/* Pushes normalize(s) and returns it; the string lives on the Lua stack. */
static const char *pushnormal(lua_State *L, const char *s)
{
    size_t len = strlen(s);
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, len + 2);
    long n = hcp_path_normalize(s, out, len + 2);

    if (n < 0)  /* cannot happen: the output is never longer than max(len, 1) */
        luaL_error(L, "normalize: internal buffer too small");
    luaL_pushresultsize(&b, (size_t)n);
    return lua_tostring(L, -1);
}

static int is_exec_mode(const struct stat *st)
{
    return S_ISREG(st->st_mode) && (st->st_mode & (S_IXUSR | S_IXGRP | S_IXOTH));
}

/* A regular file that this process may execute. For root, access(X_OK)
 * succeeds on any file with one execute bit, so both tests are needed. */
static int is_executable(const char *path)
{
    struct stat st;

    if (stat(path, &st) != 0 || !is_exec_mode(&st))
        return 0;
    return faccessat(AT_FDCWD, path, X_OK, AT_EACCESS) == 0;
}

static int push_notexec(lua_State *L, const char *path)
{
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: not executable", path);
    lua_pushinteger(L, EACCES);
    return 3;
}

/* ---- Lua functions ----------------------------------------------------- */

static int l_normalize(lua_State *L)
{
    pushnormal(L, checkpath(L, 1, NULL));
    return 1;
}

static int l_contains(lua_State *L)
{
    const char *base = pushnormal(L, checkabs(L, 1));
    const char *path = pushnormal(L, checkabs(L, 2));

    lua_pushboolean(L, hcp_path_contains(base, path));
    return 1;
}

static int l_resolve(lua_State *L)
{
    size_t nlen, splen;
    const char *name = checkpath(L, 1, &nlen);
    const char *sp = checkpath(L, 2, &splen);
    const char *p, *end;
    char *cand, *norm;
    size_t csz;

    luaL_argcheck(L, nlen > 0, 1, "empty name");
    if (strchr(name, '/')) {
        const char *path;

        luaL_argcheck(L, name[0] == '/', 1, "bare name or absolute path expected");
        path = pushnormal(L, name);
        if (!is_executable(path)) {
            struct stat st;

            /* A missing file is an OS error; one that exists but is no
             * regular executable is the EACCES refusal. */
            if (stat(path, &st) != 0) {
                int err = errno;
                return hcp_push_oserror(L, err, "%s", path);
            }
            return push_notexec(L, path);
        }
        return 1;
    }
    luaL_argcheck(L, strcmp(name, ".") != 0 && strcmp(name, "..") != 0, 1,
                  "not a command name");

    /* Scratch space on the Lua stack (collected if anything raises): the
     * joined candidate and its normalised form, each bounded by dir+/+name. */
    csz = splen + nlen + 3;
    cand = lua_newuserdatauv(L, 2 * csz, 0);
    norm = cand + csz;
    for (p = sp; *p; p = *end ? end + 1 : end) {
        size_t dlen;

        end = strchr(p, ':');
        if (!end)
            end = p + strlen(p);
        dlen = (size_t)(end - p);
        /* Empty and relative entries mean "the cwd" to a shell: never here. */
        if (dlen == 0 || p[0] != '/')
            continue;
        memcpy(cand, p, dlen);
        cand[dlen] = '/';
        memcpy(cand + dlen + 1, name, nlen + 1);
        if (hcp_path_normalize(cand, norm, csz) < 0)
            continue;  /* cannot happen: csz bounds the candidate */
        if (is_executable(norm)) {
            lua_pushstring(L, norm);
            return 1;
        }
    }
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: not found in %s", name, sp);
    lua_pushinteger(L, ENOENT);
    return 3;
}

/* Pushes the path the kernel has for fd (its real absolute path). */
static int push_fdpath(lua_State *L, int fd, int *errp)
{
    char link[64], buf[PATH_MAX];
    ssize_t n;

    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, buf, sizeof buf);
    if (n < 0) {
        *errp = errno;
        return 0;
    }
    if ((size_t)n >= sizeof buf) {
        *errp = ENAMETOOLONG;
        return 0;
    }
    lua_pushlstring(L, buf, (size_t)n);
    return 1;
}

static int push_escape(lua_State *L, const char *rel, const char *root)
{
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: escapes %s", rel, root);
    lua_pushinteger(L, EXDEV);
    return 3;
}

/* Kernels without openat2 (< 5.6): resolve both with realpath and compare
 * component-wise. Racy against a concurrent rename, which is why it is only
 * the fallback; spawn re-opens and re-checks the file it executes. */
static int beneath_fallback(lua_State *L, const char *root, const char *rel)
{
    char rroot[PATH_MAX], rpath[PATH_MAX];
    struct stat st;
    const char *joined;
    int err;

    /* The lexical escape ("../x", "a/../../x") gets the same answer as
     * from openat2, even when the target does not exist. */
    {
        const char *n = pushnormal(L, rel);
        if (strcmp(n, "..") == 0 || strncmp(n, "../", 3) == 0)
            return push_escape(L, rel, root);
    }
    if (!realpath(root, rroot)) {
        err = errno;
        return hcp_push_oserror(L, err, "%s", root);
    }
    joined = lua_pushfstring(L, "%s/%s", rroot, rel);
    if (!realpath(joined, rpath)) {
        err = errno;
        return hcp_push_oserror(L, err, "%s", rel);
    }
    if (!hcp_path_contains(rroot, rpath))
        return push_escape(L, rel, root);
    if (stat(rpath, &st) != 0) {
        err = errno;
        return hcp_push_oserror(L, err, "%s", rel);
    }
    if (!is_exec_mode(&st))
        return push_notexec(L, rel);
    lua_pushstring(L, rpath);
    return 1;
}

static int l_resolve_beneath(lua_State *L)
{
    const char *root = checkpath(L, 1, NULL);
    size_t rlen;
    const char *rel = checkpath(L, 2, &rlen);
    struct stat st;
    int rootfd, fd, err;

    luaL_argcheck(L, rlen > 0 && rel[0] != '/', 2, "relative path expected");

    rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        err = errno;
        return hcp_push_oserror(L, err, "%s", root);
    }
    fd = hcp_openat2(rootfd, rel, O_PATH, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
    err = fd < 0 ? errno : 0;
    if (fd < 0) {
        close(rootfd);
        if (err == ENOSYS)
            return beneath_fallback(L, root, rel);
        if (err == EXDEV)
            return push_escape(L, rel, root);
        /* Everything else is an OS error, ELOOP included: a magic link
         * refused by RESOLVE_NO_MAGICLINKS, or a symlink loop. */
        return hcp_push_oserror(L, err, "%s", rel);
    }
    if (fstat(fd, &st) != 0) {
        err = errno;
        close(fd);
        close(rootfd);
        return hcp_push_oserror(L, err, "%s", rel);
    }
    if (!is_exec_mode(&st)) {
        close(fd);
        close(rootfd);
        return push_notexec(L, rel);
    }
    /* The kernel's names for both descriptors. RESOLVE_BENEATH already
     * guarantees the file is under root; comparing the names too guards
     * against a surprise such as a bind mount inside the pack. */
    if (!push_fdpath(L, rootfd, &err) || !push_fdpath(L, fd, &err)) {
        close(fd);
        close(rootfd);
        return hcp_push_oserror(L, err, "%s", rel);
    }
    close(fd);
    close(rootfd);
    if (!hcp_path_contains(lua_tostring(L, -2), lua_tostring(L, -1)))
        return push_escape(L, rel, root);
    return 1;
}

/* core.realpath(path) -> the kernel's name for what path leads to (every
 * symlink followed once, now), read from a descriptor of it: what a pack
 * root reached through a link is, resolved at load. */
static int l_realpath(lua_State *L)
{
    const char *path = checkabs(L, 1);
    int err, fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) {
        err = errno;
        return hcp_push_oserror(L, err, "%s", path);
    }
    char buf[PATH_MAX];
    if (hcp_fd_path(fd, buf, sizeof buf) < 0) {
        err = errno;
        close(fd);
        if (!realpath(path, buf))   /* no /proc: the library's walk */
            return hcp_push_oserror(L, err, "%s", path);
        lua_pushstring(L, buf);
        return 1;
    }
    close(fd);
    lua_pushstring(L, buf);
    return 1;
}

static int l_allow_match(lua_State *L)
{
    const char *path;
    size_t plen;
    lua_Integer i, n;

    path = pushnormal(L, checkabs(L, 1));  /* stack index 3 */
    plen = strlen(path);
    luaL_checktype(L, 2, LUA_TTABLE);
    n = (lua_Integer)lua_rawlen(L, 2);
    for (i = 1; i <= n; i++) {
        size_t elen;
        const char *e;
        int match = 0;

        if (lua_rawgeti(L, 2, i) != LUA_TSTRING)
            return luaL_error(L, "allow_match: list[%I] is not a string", i);
        e = lua_tolstring(L, -1, &elen);
        /* Empty entries, entries with a NUL byte, and relative paths such as
         * "bin/x" never match: fail closed on anything unclear. */
        if (elen == 0 || strlen(e) != elen) {
            match = 0;
        } else if (e[0] == '/') {
            match = strcmp(pushnormal(L, e), path) == 0;
            lua_pop(L, 1);
        } else if (!strchr(e, '/')) {
            match = plen > elen && path[plen - elen - 1] == '/' &&
                    memcmp(path + plen - elen, e, elen) == 0;
        }
        if (match)
            return 1;  /* the entry, as given */
        lua_pop(L, 1);
    }
    luaL_pushfail(L);
    return 1;
}

static const luaL_Reg paths_funcs[] = {
    {"normalize", l_normalize},
    {"contains", l_contains},
    {"resolve", l_resolve},
    {"resolve_beneath", l_resolve_beneath},
    {"allow_match", l_allow_match},
    {"realpath", l_realpath},
    {NULL, NULL}
};

void hcp_register_paths(lua_State *L)
{
    luaL_setfuncs(L, paths_funcs, 0);
}
