/* rootfs.c — the constructed root (isolation layer `rootfs`), planned in
 * the parent: the child's "/" is a fresh tmpfs holding only what it was
 * given — read-only binds of the system paths and the pack, read-write
 * binds of its jail and private directory, each at its host path so argv
 * paths stay valid; a minimal /dev; a private /tmp and /dev/shm; its own
 * /proc (with /proc/sys and its like read-only) when it has a pid
 * namespace, none otherwise. Nothing else of the host is there: no /home,
 * /root, /run, /var, host /tmp, state dir, sockets, other jails.
 *
 * Here: reading the option and planning (paths normalised, symlinks and
 * real paths resolved, sorted so a directory is mounted before what goes
 * inside it); rootfs_build.c builds it in the child. Also reading the
 * staging option of the bwrap driver (hcp_stage_check). */
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"

#define RF_MAX 4096                  /* entries: a caller's mistake beyond */
#define DEFAULT_TMP_MB 64
#define HIDE_MAX 1024                /* host sockets inside a view: refused beyond */

/* ---- reading the option (parent) ---------------------------------------- */

int hcp_rootfs_check(lua_State *L, int t)
{
    if (!lua_istable(L, t))
        luaL_error(L, "spawn: isolation: rootfs must be a table");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        if (strcmp(k, "ro") == 0 || strcmp(k, "rw") == 0) {
            if (hcp_iso_path_list(L, lua_gettop(L), k[1] == 'o' ? "rootfs.ro" : "rootfs.rw", "rootfs path") < 0)
                return -1;
        } else if (strcmp(k, "tmp_mb") == 0) {
            if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > (1 << 20))
                luaL_error(L, "spawn: isolation: rootfs.tmp_mb must be an integer from 1 to 1048576");
        } else if (strcmp(k, "legacy") == 0) {
            if (!lua_isboolean(L, -1))
                luaL_error(L, "spawn: isolation: rootfs.legacy must be a boolean");
        } else if (strcmp(k, "base") == 0) {
            if (!luaL_testudata(L, -1, "hcp.viewbase"))
                luaL_error(L, "spawn: isolation: rootfs.base must be a view base (core.view_base)");
        } else {
            luaL_error(L, "spawn: isolation: rootfs: unknown key '%s' (ro, rw, tmp_mb, legacy, base)",
                       luaL_tolstring(L, -2, NULL));
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* ---- planning it (parent) ----------------------------------------------- */

static int rf_error(lua_State *L, int err, const char *path, const char *what)
{
    if (what)
        lua_pushfstring(L, "spawn: isolation: rootfs: %s: %s", path, what);
    else
        lua_pushfstring(L, "spawn: isolation: rootfs: %s: %s", path, strerror(err));
    return err;
}

/* A refusal of what path `given` leads to (`real`), said as rf_error does,
 * naming `real` when a link made it another path. */
static int rf_refuse_real(lua_State *L, const char *given, const char *real, const char *what)
{
    if (strcmp(given, real) == 0)
        return rf_error(L, EINVAL, given, what);
    lua_pushfstring(L, "spawn: isolation: rootfs: %s: resolves to %s: %s", given, real, what);
    return EINVAL;
}

/* Pushes s into the pin table and returns the pinned copy. */
static const char *pin_str(lua_State *L, int pin, const char *s)
{
    lua_pushstring(L, s);
    const char *p = lua_tostring(L, -1);
    lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);
    return p;
}

static int under(const char *base, const char *path)
{
    return hcp_path_contains(base, path);
}

/* The paths under /dev and /proc are the layer's own; "/" would be the
 * host's root again. */
static const char *reserved(const char *p)
{
    if (strcmp(p, "/") == 0)
        return "the host's root cannot be part of the view";
    if ((under("/dev", p) && !(under("/dev/shm", p) && strcmp(p, "/dev/shm") != 0)) ||
        under("/proc", p) || strcmp(p, "/tmp") == 0)
        return "reserved: the view has its own /dev, /proc and /tmp";
    return NULL;
}

/* core.view_reserved(path) -> why, or nil: the same rule for a path the
 * bwrap driver's view would bind (hcp.view.check_sources), one source for
 * both drivers. `path` is taken as given: normalise it first. */
static int l_view_reserved(lua_State *L)
{
    const char *why = reserved(luaL_checkstring(L, 1));
    if (why)
        lua_pushstring(L, why);
    else
        lua_pushnil(L);
    return 1;
}

void hcp_register_rootfs(lua_State *L)
{
    lua_pushcfunction(L, l_view_reserved);
    lua_setfield(L, -2, "view_reserved");
}

/* A view's paths come a few directories at a time (/etc, /usr), as do a
 * host's sockets, and realpath(3) asks readlink of every component of
 * each path: the last directory resolved is remembered (struct
 * hcp_dir_memo, isolation.h). */
int hcp_real_in_dir(const char *path, struct hcp_dir_memo *m, char *out, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash[1] == '\0')
        return errno = EINVAL, -1;
    size_t dlen = slash == path ? 1 : (size_t)(slash - path);
    if (dlen >= sizeof m->dir)
        return errno = ENAMETOOLONG, -1;
    if (!m->have || strlen(m->dir) != dlen || strncmp(m->dir, path, dlen) != 0) {
        memcpy(m->dir, path, dlen);
        m->dir[dlen] = '\0';
        m->have = realpath(m->dir, m->real) != NULL;
        if (!m->have)
            return -1;
    }
    /* the parent is "/": no second slash */
    if ((size_t)snprintf(out, size, "%s/%s", strcmp(m->real, "/") != 0 ? m->real : "", slash + 1) >= size)
        return errno = ENAMETOOLONG, -1;
    return 0;
}

/* realpath(norm), malloc'd: for a path that is no link itself (its lstat
 * in st), the resolved parent joined to the last component — the same
 * name, since only a link there could change it; realpath for a link. */
static char *resolve(const char *norm, const struct stat *st, struct hcp_dir_memo *m)
{
    const char *slash = strrchr(norm, '/');
    if (S_ISLNK(st->st_mode) || !slash || slash[1] == '\0')
        return realpath(norm, NULL);
    char out[PATH_MAX];
    if (hcp_real_in_dir(norm, m, out, sizeof out) < 0)
        return NULL;
    char *r = strdup(out);
    if (!r)
        errno = ENOMEM;
    return r;
}

/* One path of ro or rw into e (kind, src, isdir); returns 1 when it is
 * there, 0 when it is an optional path the host lacks, or an errno with the
 * message pushed. A final symlink of a ro path is kept as a link, decided
 * in link_or_bind once every entry is known. */
static int plan_one(lua_State *L, int pin, const char *given, int rw, struct hcp_rootfs_ent *e,
                    struct hcp_dir_memo *memo)
{
    char norm[PATH_MAX], *real;
    struct stat st;
    if (hcp_path_normalize(given, norm, sizeof norm) < 0)
        return rf_error(L, ENAMETOOLONG, given, NULL);
    const char *bad = reserved(norm);
    if (bad)
        return rf_error(L, EINVAL, norm, bad);
    if (lstat(norm, &st) < 0) {
        if ((errno == ENOENT || errno == ENOTDIR) && !rw)
            return 0;   /* /lib32 and its like: not on every host */
        return rf_error(L, errno, norm, NULL);
    }
    if (S_ISLNK(st.st_mode) && rw)
        return rf_error(L, ELOOP, norm, "a read-write path must not be a symlink");
    if (!(real = resolve(norm, &st, memo))) {
        if (errno == ENOENT && !rw)
            return 0;   /* a dangling link */
        return rf_error(L, errno, norm, NULL);
    }
    e->dest = pin_str(L, pin, norm);
    e->src = pin_str(L, pin, real);
    free(real);
    /* What is bound is the resolved path: a link (at the end or on the way)
     * must not lead where the given path may not be (/proc/self: the
     * runtime's fds and environ; /dev/shm: the host's shared memory; /tmp:
     * the host's unix sockets, which connect(2) reaches on a read-only bind). */
    if (strcmp(e->src, "/") == 0)
        return rf_error(L, EINVAL, norm, "resolves to the host's root");
    if ((bad = reserved(e->src)))
        return rf_refuse_real(L, norm, e->src, bad);
    /* a link: what it leads to (no link: lstat said already) */
    if (S_ISLNK(st.st_mode) && stat(e->src, &st) < 0)
        return rf_error(L, errno, norm, NULL);
    /* Binds are nodev, so a node would be inert; but a view's devices are
     * its own /dev's, and a node elsewhere is a host's mistake or a trap. */
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
        return rf_refuse_real(L, norm, e->src, "a device node cannot be part of the view (its /dev is its own)");
    e->kind = RF_BIND;   /* or RF_LINK, decided in link_or_bind */
    e->base = 0;
    e->rw = (unsigned char)rw;
    e->isdir = S_ISDIR(st.st_mode);
    return 1;
}

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const struct hcp_rootfs_ent *)a)->dest, ((const struct hcp_rootfs_ent *)b)->dest);
}

/* A bind whose view path shows the same host path (no symlink on the way). */
static int identity(const struct hcp_rootfs_ent *e)
{
    return e->kind == RF_BIND && strcmp(e->dest, e->src) == 0;
}

/* A ro entry that is a symlink (dest != src although its parent is shown
 * as on the host): if its target is visible, unchanged, through another
 * entry, the view gets the link (pointing at the real path); else the
 * target itself is bound at the link's place. An entry that a read-only
 * parent already shows as it is gets no mount of its own. */
static void link_or_bind(struct hcp_rootfs *rf, int i, int *drop)
{
    struct hcp_rootfs_ent *e = &rf->e[i];
    *drop = 0;
    if (e->kind != RF_BIND)
        return;
    for (int j = 0; j < rf->n; j++) {
        const struct hcp_rootfs_ent *p = &rf->e[j];
        if (j == i || !identity(p))
            continue;
        if (!e->rw && !p->rw && identity(e) && under(p->dest, e->dest) && strcmp(p->dest, e->dest) != 0)
            *drop = 1;   /* already there, read-only, through p */
        else if (!e->rw && !identity(e) && under(p->dest, e->src))
            e->kind = RF_LINK;
    }
}

/* The paths of t.ro and t.rw planned into rf->e (room for them made by
 * the caller), after rf->n entries already there. */
static int plan_lists(lua_State *L, int t, int pin, struct hcp_rootfs *rf)
{
    static const char *const lists[] = { "ro", "rw" };
    struct hcp_dir_memo memo;
    memo.have = 0;
    for (int k = 0; k < 2; k++) {
        lua_getfield(L, t, lists[k]);
        lua_Integer len = lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
        for (lua_Integer i = 1; i <= len; i++) {
            lua_rawgeti(L, -1, i);
            const char *p = lua_tostring(L, -1);   /* pinned by opts */
            lua_pop(L, 1);
            int r = plan_one(L, pin, p, k, &rf->e[rf->n], &memo);
            if (r > 1)
                return r;
            rf->n += r;
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* How many entries t's lists and `extra` more need; E2BIG beyond RF_MAX. */
static int count_room(lua_State *L, int t, int extra, int *n)
{
    static const char *const lists[] = { "ro", "rw" };
    lua_Integer c = extra;
    for (int k = 0; k < 2; k++) {
        lua_getfield(L, t, lists[k]);
        c += lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
        lua_pop(L, 1);
    }
    if (c > RF_MAX + extra)
        return lua_pushfstring(L, "spawn: isolation: rootfs: more than %d paths", RF_MAX), E2BIG;
    *n = (int)c;
    return 0;
}

static void add_own_ent(struct hcp_rootfs *rf, const char *dest, int kind)
{
    rf->e[rf->n++] = (struct hcp_rootfs_ent){ dest, NULL, (unsigned char)kind, 1, 1, 0 };
}

/* Sorted so a directory comes first; a path asked for twice kept once (an
 * entry of a base view rather than the call's), refused when both read-only
 * and read-write; then links and drops (link_or_bind). */
static int settle(lua_State *L, struct hcp_rootfs *rf)
{
    qsort(rf->e, (size_t)rf->n, sizeof *rf->e, cmp_ent);
    int out = 0;
    for (int i = 0; i < rf->n; i++) {
        if (out > 0 && strcmp(rf->e[out - 1].dest, rf->e[i].dest) == 0) {
            if (rf->e[out - 1].rw != rf->e[i].rw)
                return rf_error(L, EINVAL, rf->e[i].dest, "both read-only and read-write");
            if (rf->e[i].base)
                rf->e[out - 1] = rf->e[i];
            continue;   /* asked for twice */
        }
        rf->e[out++] = rf->e[i];
    }
    rf->n = out;
    out = 0;
    for (int i = 0; i < rf->n; i++) {
        int drop;
        link_or_bind(rf, i, &drop);
        if (!drop)
            rf->e[out++] = rf->e[i];
    }
    rf->n = out;
    return 0;
}

static void plan_options(lua_State *L, int t, struct hcp_rootfs *rf)
{
    lua_getfield(L, t, "legacy");
    rf->legacy = lua_toboolean(L, -1);
    lua_getfield(L, t, "tmp_mb");
    lua_Integer mb = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : DEFAULT_TMP_MB;
    lua_pop(L, 2);
    hcp_join(rf->tmp_opts, "mode=1777,size=", "", (long long)mb << 20);
    rf->base_fd = -1;
    rf->is_base = 0;
    rf->nbase = 0;
    rf->base = NULL;
}

static struct hcp_rootfs_ent *new_ents(lua_State *L, int pin, int n)
{
    struct hcp_rootfs_ent *e = lua_newuserdatauv(L, sizeof *e * (size_t)(n > 0 ? n : 1), 0);
    lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);
    return e;
}

/* ---- host sockets the view would show (hostsock.c) ---------------------- */

/* The host's listening sockets, less those an entry lists itself (a socket
 * the operator granted): read before settle, which may drop such an entry
 * as shown already by a parent directory. 0, or an errno, message pushed. */
static int sockets_to_hide(lua_State *L, const struct hcp_rootfs *rf, struct hcp_socklist *socks)
{
    /* only those inside a directory the view binds: the others cost no
     * system call but their directory's realpath */
    const char **within = malloc(sizeof *within * (size_t)(rf->n > 0 ? rf->n : 1));
    int nw = 0;
    if (!within)
        return rf_error(L, ENOMEM, "/proc/net/unix", NULL);
    for (int j = 0; j < rf->n; j++)
        if (rf->e[j].kind == RF_BIND && rf->e[j].isdir && rf->e[j].src)
            within[nw++] = rf->e[j].src;
    int r = hcp_host_sockets(socks, within, nw);
    int err = errno;
    free(within);
    if (r < 0)
        return rf_error(L, err, "/proc/net/unix", NULL);
    int out = 0;
    for (int i = 0; i < socks->n; i++) {
        int listed = 0;
        for (int j = 0; j < rf->n && !listed; j++)
            listed = rf->e[j].src && strcmp(rf->e[j].src, socks->path[i]) == 0;
        if (listed)
            free(socks->path[i]);
        else
            socks->path[out++] = socks->path[i];
    }
    socks->n = out;
    return 0;
}

/* Where bind e shows host path p, into buf (p strictly inside e's source):
 * 1, or 0 when e does not show it. */
static int shown_at(const struct hcp_rootfs_ent *e, const char *p, char *buf, size_t size)
{
    if (e->kind != RF_BIND || !e->isdir || !under(e->src, p) || strcmp(e->src, p) == 0)
        return 0;
    const char *tail = p + strlen(e->src);
    return (size_t)snprintf(buf, size, "%s%s", e->dest, tail) < size;
}

static int has_dest(const struct hcp_rootfs_ent *e, int n, const char *dest)
{
    for (int i = 0; i < n; i++)
        if (strcmp(e[i].dest, dest) == 0)
            return 1;
    return 0;
}

/* Every socket of `socks` that a bind of rf shows gets, at each place it is
 * shown, a read-only bind of /dev/null over it (nodev: nothing can be
 * opened there; connect(2) finds no socket): entries of the call, sorted
 * in after settle. */
static int hide_sockets(lua_State *L, int pin, struct hcp_rootfs *rf, const struct hcp_socklist *socks)
{
    char at[PATH_MAX];
    int extra = 0;
    for (int i = 0; i < socks->n; i++)
        for (int j = 0; j < rf->n; j++)
            extra += shown_at(&rf->e[j], socks->path[i], at, sizeof at);
    if (extra == 0)
        return 0;
    if (extra > HIDE_MAX)
        return lua_pushfstring(L, "spawn: isolation: rootfs: %d places of host sockets to hide, more than %d",
                               extra, HIDE_MAX), E2BIG;
    struct hcp_rootfs_ent *e = new_ents(L, pin, rf->n + extra);
    memcpy(e, rf->e, sizeof *e * (size_t)rf->n);
    int n = rf->n;
    for (int i = 0; i < socks->n; i++)
        for (int j = 0; j < rf->n; j++)
            if (shown_at(&rf->e[j], socks->path[i], at, sizeof at) && !has_dest(e, n, at))
                e[n++] = (struct hcp_rootfs_ent){ pin_str(L, pin, at), "/dev/null", RF_BIND, 0, 0, 0 };
    rf->e = e;
    rf->n = n;
    qsort(rf->e, (size_t)rf->n, sizeof *rf->e, cmp_ent);
    return 0;
}

/* settle, with the host's sockets hidden when `hide` (a call's view). */
static int settle_hiding(lua_State *L, int pin, struct hcp_rootfs *rf, int hide)
{
    struct hcp_socklist socks = { 0, NULL };
    int err = hide ? sockets_to_hide(L, rf, &socks) : 0;
    if (!err)
        err = settle(L, rf);
    if (!err && socks.n)
        err = hide_sockets(L, pin, rf, &socks);
    hcp_socklist_free(&socks);
    return err;
}

/* ---- the plans ----------------------------------------------------------- */

static int prepare(lua_State *L, int t, int pin, int with_proc, struct hcp_rootfs *rf, int hide)
{
    int n, err = count_room(L, t, 3, &n);
    if (err)
        return err;
    rf->e = new_ents(L, pin, n);
    rf->n = 0;
    if ((err = plan_lists(L, t, pin, rf)) != 0)
        return err;
    add_own_ent(rf, "/dev", RF_DEV);
    add_own_ent(rf, "/tmp", RF_TMP);
    if (with_proc)
        add_own_ent(rf, "/proc", RF_PROC);
    if ((err = settle_hiding(L, pin, rf, hide)) != 0)
        return err;
    plan_options(L, t, rf);
    return 0;
}

int hcp_rootfs_prepare(lua_State *L, int t, int pin, int with_proc, struct hcp_rootfs *rf)
{
    return prepare(L, t, pin, with_proc, rf, 0);
}

/* Whether entry e of a call must be built fresh rather than on `base`: it
 * lies in one of the base's own tmpfs directories (/etc, /sys), shared by
 * every call, where no mount point may be made. */
static int needs_fresh(const struct hcp_rootfs *base, const struct hcp_rootfs_ent *e)
{
    for (int j = 0; j < base->n; j++)
        if (base->e[j].kind == RF_GROUP && under(base->e[j].dest, e->dest))
            return 1;
    return 0;
}

static int prepare_on(lua_State *L, int t, int pin, int with_proc, const struct hcp_rootfs *base,
                      struct hcp_rootfs *rf, int hide)
{
    int n, err = count_room(L, t, base->n + 3, &n);
    if (err)
        return err;
    rf->e = new_ents(L, pin, n);
    rf->n = 0;
    for (int i = 0; i < base->n; i++) {
        if (base->e[i].kind == RF_TMP)
            continue;   /* where the call mounts its root, not a part of it */
        rf->e[rf->n] = base->e[i];
        rf->e[rf->n++].base = 1;
    }
    if ((err = plan_lists(L, t, pin, rf)) != 0)
        return err;
    add_own_ent(rf, "/tmp", RF_TMP);
    add_own_ent(rf, "/dev/shm", RF_SHM);
    if (with_proc)
        add_own_ent(rf, "/proc", RF_PROC);
    if ((err = settle_hiding(L, pin, rf, hide)) != 0)
        return err;
    /* the base's entries are there already: only the call's are built */
    int out = 0, kept = 0;
    for (int i = 0; i < rf->n; i++) {
        if (rf->e[i].base) {
            kept++;
            continue;
        }
        if (needs_fresh(base, &rf->e[i]))
            return HCP_ROOTFS_FRESH;
        rf->e[out++] = rf->e[i];
    }
    int own = 0;
    for (int i = 0; i < base->n; i++)
        own += base->e[i].kind != RF_TMP;
    if (kept != own)   /* a call's path hid or changed one of the base's */
        return HCP_ROOTFS_FRESH;
    rf->n = out;
    plan_options(L, t, rf);
    return 0;
}

int hcp_rootfs_prepare_call(lua_State *L, int t, int pin, int with_proc, const struct hcp_rootfs *base,
                            struct hcp_rootfs *rf)
{
    return base ? prepare_on(L, t, pin, with_proc, base, rf, 1) : prepare(L, t, pin, with_proc, rf, 1);
}

const char *hcp_rootfs_where(const struct hcp_rootfs *rf, int where)
{
    if (where >= 0 && where < rf->n)
        return rf->e[where].dest;
    return where == RF_AT_FINISH ? "detaching the host's root" : "setting up";
}

/* ---- staging for a process that builds its own view --------------------- */

int hcp_stage_check(lua_State *L, int t, struct hcp_stage *st)
{
    if (!lua_istable(L, t))
        luaL_error(L, "spawn: isolation: stage must be an array of paths");
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    if (n > HCP_STAGE_MAX)
        luaL_error(L, "spawn: isolation: stage holds at most %d paths", HCP_STAGE_MAX);
    st->n = 0;
    for (lua_Integer i = 1; i <= n; i++) {
        const char *path = NULL, *beneath = NULL;
        size_t len = 0, blen = 0;   /* (clang cannot see that luaL_error does not return) */
        int ty = lua_rawgeti(L, t, i);
        if (ty == LUA_TTABLE) {
            lua_getfield(L, -1, "path");
            lua_getfield(L, -2, "beneath");
            path = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &len) : NULL;
            beneath = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &blen) : NULL;
            lua_pop(L, 2);   /* both pinned by the entry, pinned by opts */
        } else if (ty == LUA_TSTRING) {
            path = lua_tolstring(L, -1, &len);
        }
        if (!path || path[0] != '/' || (beneath && beneath[0] != '/') ||
            (ty == LUA_TTABLE && !beneath))
            luaL_error(L, "spawn: isolation: stage[%I] must be an absolute path or "
                       "{ path = <absolute>, beneath = <absolute> }", i);
        lua_pop(L, 1);
        if (strlen(path) != len || (beneath && strlen(beneath) != blen)) {
            lua_pushfstring(L, "spawn: isolation: stage[%I] contains a NUL byte", i);
            return -1;
        }
        st->e[st->n].path = path;
        st->e[st->n].beneath = beneath;
        st->e[st->n].rel = NULL;
        if (beneath) {   /* the part below `beneath`, lexically; the kernel checks the rest */
            size_t bl = strlen(beneath);
            while (bl > 1 && beneath[bl - 1] == '/')
                bl--;
            if (strncmp(path, beneath, bl) != 0 || (bl > 1 && path[bl] != '/'))
                luaL_error(L, "spawn: isolation: stage[%I]: %s is not beneath %s", i, path, beneath);
            const char *rel = path + (bl > 1 ? bl : 0);
            while (*rel == '/')
                rel++;
            st->e[st->n].rel = *rel ? rel : ".";
        }
        st->n++;
    }
    return 0;
}

