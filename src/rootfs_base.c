/* rootfs_base.c — the base view (issue 12): the part of every call's
 * constructed root that is the same for every call — the system
 * directories, the /etc files, /sys/devices/system/cpu, /dev — built once
 * in a mount namespace of its own, held by a descriptor. A call then copies
 * that namespace (setns + unshare: one copy of ~40 mounts) instead of
 * making ~40 binds, and takes its top-level entries into a fresh root of
 * its own (rootfs_build.c, hcp_rootfs_build_on): what a call sees is
 * exactly what a view built from nothing would show.
 *
 * What is shared between calls: mounts of the same host files (as with
 * binds made per call), and the read-only tmpfs of /etc, /sys and /dev
 * that hold them. Each call's "/", /tmp, /dev/shm and /proc are its own.
 *
 * The base is checked at every call: the directories that hold what it
 * binds (/, /etc, …) are stat'ed, and a change of any of them (a file of
 * /etc replaced by a rename, say) rebuilds it before the call, so a call
 * never sees an older file than a fresh view would.
 *
 * Root only: the call's own binds are cloned (open_tree) in the host's
 * mount namespace, which needs CAP_SYS_ADMIN there. The namespace is held
 * by `hcp-spawn hold`, the spawn helper waiting on a pipe, for the moment
 * it takes to open /proc/<pid>/ns/mnt. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>

#include "compat.h"

#define BASE_MT "hcp.viewbase"
#define MAX_STAMPS 64
#define MAX_ITEMS 32
enum { UV_OPTS = 1, UV_PIN = 2 };

struct stamp { const char *path; dev_t dev; ino_t ino; struct timespec mtim, ctim; };

typedef struct {
    int mnt_fd;                   /* the base's mount namespace, or -1 */
    struct hcp_rootfs plan;       /* its entries, pinned by UV_PIN */
    int nitems, nstamps, builds;
    struct hcp_base_item items[MAX_ITEMS];
    struct stamp stamps[MAX_STAMPS];
} viewbase_t;

/* ---- the plan: the view's entries, top-level groups, items, stamps ------ */

static const char *pin_str(lua_State *L, int pin, const char *s, size_t len)
{
    lua_pushlstring(L, s, len);
    const char *p = lua_tostring(L, -1);
    lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);
    return p;
}

/* The length of dest's first component with its slash ("/etc/x": 4). */
static size_t top_len(const char *dest)
{
    const char *slash = strchr(dest + 1, '/');
    return slash ? (size_t)(slash - dest) : strlen(dest);
}

static int cmp_dest(const void *a, const void *b)
{
    return strcmp(((const struct hcp_rootfs_ent *)a)->dest, ((const struct hcp_rootfs_ent *)b)->dest);
}

/* The view with a tmpfs group for each top-level directory whose entries
 * lie deeper (a call moves top-level mounts). Its /tmp is only where a
 * call mounts its own root before pivoting into it. */
static int regroup(lua_State *L, int pin, struct hcp_rootfs *rf)
{
    struct hcp_rootfs_ent *e = lua_newuserdatauv(L, sizeof *e * (size_t)(2 * rf->n + 1), 0);
    lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);
    int n = 0;
    for (int i = 0; i < rf->n; i++) {
        const struct hcp_rootfs_ent *x = &rf->e[i];
        size_t t = top_len(x->dest);
        if (x->kind == RF_PROC)
            continue;
        int have = 0;
        for (int j = 0; j < n && !have; j++)
            have = strlen(e[j].dest) == t && strncmp(e[j].dest, x->dest, t) == 0;
        if (!have && x->dest[t] != '\0')
            e[n++] = (struct hcp_rootfs_ent){ pin_str(L, pin, x->dest, t), NULL, RF_GROUP, 0, 1, 0 };
        e[n++] = *x;
    }
    qsort(e, (size_t)n, sizeof *e, cmp_dest);
    rf->e = e;
    rf->n = n;
    return 0;
}

static int add_item(viewbase_t *b, const struct hcp_rootfs_ent *x)
{
    if (b->nitems == MAX_ITEMS)
        return -1;
    b->items[b->nitems++] = (struct hcp_base_item){ x->dest + 1, x->kind == RF_LINK ? x->src : NULL, x->isdir };
    return 0;
}

/* Records the directory holding `path` (its parent), once. */
static int add_stamp(lua_State *L, int pin, viewbase_t *b, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    for (int i = 0; i < b->nstamps; i++)
        if (strlen(b->stamps[i].path) == len && strncmp(b->stamps[i].path, path, len) == 0)
            return 0;
    if (b->nstamps == MAX_STAMPS)
        return -1;
    b->stamps[b->nstamps++].path = pin_str(L, pin, path, len);
    return 0;
}

static int take_stamp(struct stamp *s, struct stamp *now)
{
    struct stat st;
    if (stat(s->path, &st) < 0)
        return -1;
    *now = (struct stamp){ s->path, st.st_dev, st.st_ino, st.st_mtim, st.st_ctim };
    return 0;
}

static int same_stamp(const struct stamp *a, const struct stamp *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->mtim.tv_sec == b->mtim.tv_sec &&
           a->mtim.tv_nsec == b->mtim.tv_nsec && a->ctim.tv_sec == b->ctim.tv_sec &&
           a->ctim.tv_nsec == b->ctim.tv_nsec;
}

/* Items and stamps of b->plan; -1 when there are more than it can hold. */
static int index_plan(lua_State *L, int pin, viewbase_t *b)
{
    b->nitems = b->nstamps = 0;
    for (int i = 0; i < b->plan.n; i++) {
        const struct hcp_rootfs_ent *x = &b->plan.e[i];
        if (!strchr(x->dest + 1, '/') && x->kind != RF_TMP && add_item(b, x) < 0)
            return -1;
        if ((x->kind == RF_BIND || x->kind == RF_LINK) &&
            (add_stamp(L, pin, b, x->dest) < 0 || add_stamp(L, pin, b, x->src) < 0))
            return -1;
    }
    for (int i = 0; i < b->nstamps; i++)
        if (take_stamp(&b->stamps[i], &b->stamps[i]) < 0)
            return -1;
    return 0;
}

/* ---- building it: the helper holding the namespace ---------------------- */

/* Starts `hcp-spawn hold` in the view planned in rf and opens its mount
 * namespace. Returns the descriptor, or -1 with a message pushed. */
static int hold_view(lua_State *L, struct hcp_rootfs *rf)
{
    int in = -1, err = 0, arg, fd = -1;
    const char *step = "fork";
    pid_t pid = hcp_hold(ISO_ROOTFS, rf, NULL, &in, &err, &step, &arg);
    if (pid > 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/ns/mnt", (long)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        err = errno;
        step = "/proc/<pid>/ns/mnt";
        close(in);   /* the holder exits */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (fd < 0 && pid < 0 && strcmp(step, "isolation: rootfs") == 0)
        return hcp_push_oserror(L, err, "view base: %s: %s", step, hcp_rootfs_where(rf, arg)), -1;
    if (fd < 0)
        return hcp_push_oserror(L, err, "view base: %s", step), -1;
    return fd;
}

/* (Re)builds b (its userdata at ud) from its options: plans, holds, and
 * only then replaces the namespace in use. 0, or -1 with a message pushed. */
static int base_build(lua_State *L, int ud, viewbase_t *b)
{
    int top = lua_gettop(L);
    lua_newtable(L);
    int pin = lua_gettop(L);
    lua_getiuservalue(L, ud, UV_OPTS);
    struct hcp_rootfs rf;
    int err = hcp_rootfs_prepare(L, lua_gettop(L), pin, 0, &rf);
    if (err) {
        lua_replace(L, top + 1);
        lua_settop(L, top + 1);
        return -1;
    }
    for (int i = 0; i < rf.n; i++)
        if (rf.e[i].kind != RF_TMP && (hcp_path_contains("/tmp", rf.e[i].dest) ||
                                       hcp_path_contains("/dev/shm", rf.e[i].dest))) {
            lua_settop(L, top);
            lua_pushfstring(L, "view base: %s: /tmp and /dev/shm are each call's own", rf.e[i].dest);
            return -1;
        }
    viewbase_t next = *b;
    next.plan = rf;
    next.plan.is_base = 1;
    regroup(L, pin, &next.plan);
    if (index_plan(L, pin, &next) < 0) {
        lua_settop(L, top);
        lua_pushliteral(L, "view base: more top-level entries or directories than it can hold");
        return -1;
    }
    int fd = hold_view(L, &next.plan);
    if (fd < 0) {
        lua_replace(L, top + 1);
        lua_settop(L, top + 1);
        return -1;
    }
    if (b->mnt_fd >= 0)
        close(b->mnt_fd);
    next.mnt_fd = fd;
    next.builds = b->builds + 1;
    *b = next;
    lua_pushvalue(L, pin);
    lua_setiuservalue(L, ud, UV_PIN);
    lua_settop(L, top);
    return 0;
}

/* ---- Lua ------------------------------------------------------------------- */

/* Whether the mount namespace we are in belongs to our user namespace: a
 * call's paths are cloned there (open_tree) before it moves to the base's
 * copy, which takes CAP_SYS_ADMIN over its owner. Root of a user namespace
 * that still runs in the host's mount namespace (a container that shares
 * it) has none there: such a runtime builds every view from nothing. */
static int own_mount_ns(void)
{
    struct stat mine, owner;
    int mnt = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    int user = mnt < 0 ? -1 : ioctl(mnt, NS_GET_USERNS);
    int ok = user >= 0 && fstat(user, &owner) == 0 && stat("/proc/self/ns/user", &mine) == 0 &&
             owner.st_ino == mine.st_ino && owner.st_dev == mine.st_dev;
    if (user >= 0)
        close(user);
    if (mnt >= 0)
        close(mnt);
    return ok;
}

/* core.view_base({ ro = {paths}, tmp_mb = n }) -> base | nil, msg, errno */
static int l_view_base(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    if (hcp_rootfs_check(L, 1) < 0)
        return luaL_pushfail(L), lua_insert(L, -2), lua_pushinteger(L, EINVAL), 3;
    if (geteuid() != 0)
        return luaL_pushfail(L), lua_pushliteral(L, "view base: needs root (a call's binds are cloned "
                                                    "in the host's mount namespace)"),
               lua_pushinteger(L, EPERM), 3;
    if (!own_mount_ns())
        return luaL_pushfail(L), lua_pushliteral(L, "view base: the runtime's mount namespace belongs to another "
                                                    "user namespace (a call's paths cannot be cloned from it)"),
               lua_pushinteger(L, EPERM), 3;
    if (hcp_helper_fd() < 0)
        return luaL_pushfail(L), lua_pushliteral(L, "view base: needs the spawn helper"),
               lua_pushinteger(L, ENOENT), 3;
    if (syscall(SYS_mount_setattr, -1, "", 0, NULL, (size_t)0) < 0 && errno == ENOSYS)
        return luaL_pushfail(L), lua_pushliteral(L, "view base: needs mount_setattr (Linux 5.12)"),
               lua_pushinteger(L, ENOSYS), 3;
    viewbase_t *b = lua_newuserdatauv(L, sizeof *b, 2);
    memset(b, 0, sizeof *b);
    b->mnt_fd = -1;
    luaL_setmetatable(L, BASE_MT);
    int ud = lua_gettop(L);
    lua_newtable(L);   /* its own copy of the options: the caller's table may change */
    for (int k = 0; k < 2; k++) {
        static const char *const keys[] = { "ro", "tmp_mb" };
        lua_getfield(L, 1, keys[k]);
        lua_setfield(L, -2, keys[k]);
    }
    lua_setiuservalue(L, ud, UV_OPTS);
    if (base_build(L, ud, b) < 0)
        return luaL_pushfail(L), lua_insert(L, -2), lua_pushinteger(L, EIO), 3;
    lua_settop(L, ud);
    return 1;
}

static viewbase_t *checkbase(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, BASE_MT);
}

/* base:builds() -> how many times it was built (1, more after changes) */
static int b_builds(lua_State *L)
{
    lua_pushinteger(L, checkbase(L, 1)->builds);
    return 1;
}

static int b_gc(lua_State *L)
{
    viewbase_t *b = checkbase(L, 1);
    hcp_closefd(&b->mnt_fd);
    return 0;
}

int hcp_base_for_call(lua_State *L, int idx, struct hcp_rootfs *rf)
{
    viewbase_t *b = luaL_testudata(L, idx, BASE_MT);
    if (!b)
        return luaL_error(L, "spawn: isolation: rootfs.base must be a view base (core.view_base)");
    idx = lua_absindex(L, idx);
    int stale = b->mnt_fd < 0;
    for (int i = 0; i < b->nstamps && !stale; i++) {
        struct stamp now;
        stale = take_stamp(&b->stamps[i], &now) < 0 || !same_stamp(&b->stamps[i], &now);
    }
    if (stale && base_build(L, idx, b) < 0) {
        lua_pop(L, 1);   /* the call is built fresh instead */
        return -1;
    }
    *rf = b->plan;
    rf->base_fd = b->mnt_fd;
    rf->base = b->items;
    rf->nbase = b->nitems;
    return 0;
}

int hcp_base_ro(lua_State *L, int idx)
{
    lua_getiuservalue(L, idx, UV_OPTS);
    lua_getfield(L, -1, "ro");
    lua_remove(L, -2);
    return 0;
}

void hcp_register_viewbase(lua_State *L)
{
    static const luaL_Reg meta[] = { { "__gc", b_gc }, { "__close", b_gc }, { NULL, NULL } };
    static const luaL_Reg methods[] = { { "builds", b_builds }, { "close", b_gc }, { NULL, NULL } };
    luaL_newmetatable(L, BASE_MT);
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_view_base);
    lua_setfield(L, -2, "view_base");
}
