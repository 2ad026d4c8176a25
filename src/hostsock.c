/* hostsock.c — the host's listening pathname unix sockets, so that a view
 * can hide the ones that lie inside what it shows.
 *
 * Why: a view binds whole directories (/usr, /opt, a pack root), and
 * connect(2) reaches a unix socket through a read-only bind. A service
 * built from source with its state under its prefix
 * (/usr/local/var/run/…), or one installed in /opt, has its socket inside
 * a system directory; without this, a sandboxed child could connect to it
 * and have the service act for it. Landlock (ABI ≤ 7) does not govern
 * connect(2) on a pathname socket; only the view can keep it away.
 *
 * Where from: /proc/net/unix, the kernel's list of the sockets of the
 * runtime's network namespace (each with the path it was bound to; a
 * service's accepted connections repeat its path, so each path is taken
 * once, and its directory resolved once for all its sockets). Only
 * paths that are a socket here and now count (after every link followed):
 * a name that a process of another mount namespace bound, or that was
 * since renamed, is left out — it names nothing here, or not that socket.
 * What this does not see — a socket bound in another network namespace on
 * a host directory, a second hard link to a socket — is said in
 * docs/security.md (known limits). */
#include "hcp_core.h"
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NET_UNIX "/proc/net/unix"
#define READ_MAX (64u << 20)   /* a host with a million sockets: refused, not read forever */

void hcp_socklist_free(struct hcp_socklist *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->path[i]);
    free(l->path);
    l->path = NULL;
    l->n = 0;
}

/* The whole of /proc/net/unix, NUL-terminated, malloc'd; NULL with errno. */
static char *read_all(void)
{
    int fd = open(NET_UNIX, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 0, n = 0;
    char *buf = NULL;
    int err = 0;
    for (;;) {
        if (cap - n < 4096) {
            size_t grown = cap ? cap * 2 : 16384;
            char *nb = cap >= READ_MAX ? NULL : realloc(buf, grown);
            if (!nb) {
                err = cap >= READ_MAX ? EFBIG : ENOMEM;
                break;
            }
            buf = nb;
            cap = grown;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            err = r < 0 ? errno : 0;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    if (err) {
        free(buf);
        return errno = err, NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* The path field of one line ("Num RefCount Protocol Flags Type St Inode
 * Path"): what follows the seventh field and its space, or NULL. */
static char *path_field(char *line)
{
    char *p = line;
    for (int f = 0; f < 7; f++) {
        while (*p == ' ')
            p++;
        if (!*p)
            return NULL;
        while (*p && *p != ' ')
            p++;
    }
    return *p == ' ' ? p + 1 : NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The absolute paths of buf's lines, each once (a service's accepted
 * connections show its listening path again, one line each): pointers
 * into buf, sorted; NULL with errno. */
static char **unique_paths(char *buf, int *n)
{
    size_t cap = 64;
    char **v = malloc(cap * sizeof *v);
    *n = 0;
    char *line = strchr(buf, '\n');   /* past the header */
    while (v && line && *++line) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        char *path = path_field(line);
        if (path && path[0] == '/') {
            if ((size_t)*n == cap) {
                char **nv = realloc(v, cap * 2 * sizeof *v);
                if (!nv) {
                    free(v);
                    return errno = ENOMEM, NULL;
                }
                v = nv;
                cap *= 2;
            }
            v[(*n)++] = path;
        }
        line = end;
    }
    if (!v)
        return errno = ENOMEM, NULL;
    qsort(v, (size_t)*n, sizeof *v, cmp_str);
    int out = 0;
    for (int i = 0; i < *n; i++)
        if (out == 0 || strcmp(v[out - 1], v[i]) != 0)
            v[out++] = v[i];
    *n = out;
    return v;
}

/* Whether real lies strictly inside one of the n directories of within
 * (NULL: anywhere). */
static int inside(const char *real, const char *const *within, int n)
{
    if (!within)
        return 1;
    for (int i = 0; i < n; i++)
        if (strcmp(within[i], "/") != 0 && strcmp(within[i], real) != 0 && hcp_path_contains(within[i], real))
            return 1;
    return 0;
}

int hcp_host_sockets(struct hcp_socklist *out, const char *const *within, int nwithin)
{
    int n = 0;
    out->n = 0;
    out->path = NULL;
    char *buf = read_all();
    if (!buf)
        return -1;
    char **paths = unique_paths(buf, &n);
    struct hcp_dir_memo *memo = paths ? malloc(sizeof *memo) : NULL;
    out->path = memo ? malloc(sizeof *out->path * (size_t)(n > 0 ? n : 1)) : NULL;
    int fail = !out->path;
    if (memo)
        memo->have = 0;
    /* The socket file itself is no link (bind made it), so its real path
     * is its directory's, resolved once per directory, and its name: only
     * one inside `within` costs an lstat more. */
    for (int i = 0; !fail && i < n; i++) {
        char real[PATH_MAX];
        struct stat st;
        if (hcp_real_in_dir(paths[i], memo, real, sizeof real) < 0 || !inside(real, within, nwithin) ||
            lstat(real, &st) < 0 || !S_ISSOCK(st.st_mode))
            continue;
        if (!(out->path[out->n] = strdup(real)))
            fail = 1;
        else
            out->n++;
    }
    free(memo);
    free(paths);
    free(buf);
    if (fail) {
        hcp_socklist_free(out);
        return errno = ENOMEM, -1;
    }
    return 0;
}

/* core.host_sockets([within]) -> { path... }: the real paths of the
 * listening pathname unix sockets of the runtime's network namespace —
 * with `within` (real directory paths), only those strictly inside one of
 * them (the bwrap driver passes its view's; the local driver's plan does
 * the same in C). nil, message, errno when /proc/net/unix cannot be read. */
#define WITHIN_MAX 4096

static int l_host_sockets(lua_State *L)
{
    const char *within[WITHIN_MAX];
    int nw = 0, has = !lua_isnoneornil(L, 1);
    if (has) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_Integer len = (lua_Integer)lua_rawlen(L, 1);
        luaL_argcheck(L, len <= WITHIN_MAX, 1, "too many paths");
        for (lua_Integer i = 1; i <= len; i++) {
            lua_rawgeti(L, 1, i);
            within[nw] = lua_tostring(L, -1);
            luaL_argcheck(L, lua_type(L, -1) == LUA_TSTRING && within[nw][0] == '/', 1,
                          "within must be absolute paths");
            nw++;
            lua_pop(L, 1);   /* the string stays reachable through the table */
        }
    }
    struct hcp_socklist l;
    if (hcp_host_sockets(&l, has ? within : NULL, nw) < 0)
        return hcp_push_oserror(L, errno, "%s", NET_UNIX);
    lua_createtable(L, l.n, 0);
    for (int i = 0; i < l.n; i++) {
        lua_pushstring(L, l.path[i]);
        lua_rawseti(L, -2, i + 1);
    }
    hcp_socklist_free(&l);
    return 1;
}

void hcp_register_hostsock(lua_State *L)
{
    lua_pushcfunction(L, l_host_sockets);
    lua_setfield(L, -2, "host_sockets");
}
