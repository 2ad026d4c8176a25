/* isolation.c — the `isolation` option of core.spawn, read and prepared in
 * the parent: a caller's mistake raises (an unknown layer would otherwise be
 * a silent downgrade), and a layer asked for that cannot be prepared fails
 * the spawn before anything is forked. The Landlock ruleset is built here,
 * once per spawn, so the child only has to call landlock_restrict_self;
 * cgroup.procs is opened here, so the child only writes its pid. Also
 * core.rmdir, for the cgroup directories the Lua side creates. */
#include "isolation.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <linux/magic.h>
#include <linux/nsfs.h>

#include "compat.h"
#include "egress.h"

static const struct { const char *name; unsigned bit; } layer_names[] = {
    { "landlock", ISO_LANDLOCK }, { "seccomp", ISO_SECCOMP },
    { "netns", ISO_NETNS }, { "pidns", ISO_PIDNS }, { "caps", ISO_CAPS },
    { "rlimits", ISO_RLIMITS }, { "cgroup", ISO_CGROUP }, { "rootfs", ISO_ROOTFS },
    { "ipcns", ISO_IPCNS }, { "run_as", ISO_RUN_AS }, { "stage", ISO_STAGE },
    { "pids_max", ISO_PIDS_MAX }, { "userns", ISO_USERNS },
    { "egress", ISO_EGRESS },
};
#define NLAYERS (sizeof layer_names / sizeof layer_names[0])

static const struct { const char *key; int resource; unsigned long long unit; } rlim_keys[] = {
    { "cpu_s", RLIMIT_CPU, 1 }, { "as_mb", RLIMIT_AS, 1ULL << 20 },
    { "fsize_mb", RLIMIT_FSIZE, 1ULL << 20 }, { "nofile", RLIMIT_NOFILE, 1 },
    { "nproc", RLIMIT_NPROC, 1 },
};

/* ---- reading the option --------------------------------------------------- */

static unsigned layer_bit(lua_State *L, int key)
{
    if (lua_type(L, key) == LUA_TSTRING)
        for (size_t i = 0; i < NLAYERS; i++)
            if (strcmp(layer_names[i].name, lua_tostring(L, key)) == 0)
                return layer_names[i].bit;
    return (unsigned)luaL_error(L, "spawn: unknown isolation layer '%s'",
                                lua_type(L, key) == LUA_TSTRING ? lua_tostring(L, key)
                                                                : luaL_typename(L, key));
}

/* An absolute path; a NUL byte is a refusal (message pushed, -1). */
static int check_path(lua_State *L, int idx, const char *what)
{
    size_t len;
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "spawn: isolation: %s must be a string", what);
    const char *s = lua_tolstring(L, idx, &len);
    if (s[0] != '/')
        luaL_error(L, "spawn: isolation: %s must be an absolute path", what);
    if (strlen(s) != len) {
        lua_pushfstring(L, "spawn: isolation: %s contains a NUL byte", what);
        return -1;
    }
    return 0;
}

int hcp_iso_path_list(lua_State *L, int list, const char *what, const char *each)
{
    lua_Integer n = (lua_Integer)lua_rawlen(L, list), count = 0;
    if (!lua_istable(L, list))
        luaL_error(L, "spawn: isolation: %s must be an array of paths", what);
    lua_pushnil(L);
    while (lua_next(L, list)) {
        lua_pop(L, 1);
        count++;
    }
    if (count != n)
        luaL_error(L, "spawn: isolation: %s must be an array of paths", what);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, list, i);
        if (check_path(L, -1, each) < 0)
            return -1;
        lua_pop(L, 1);
    }
    return 0;
}

/* landlock = { read = {paths}, write = {paths}, scopes = bool, tcp = bool },
 * all optional. The filesystem is handled when read or write is given, or
 * when neither scopes nor tcp is (an empty table denies every file). */
static int check_landlock(lua_State *L, int t, struct hcp_isolation *iso)
{
    static const char *const lists[] = { "read", "write" };
    if (!lua_istable(L, t))
        luaL_error(L, "spawn: isolation: landlock must be a table");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        if (strcmp(k, "scopes") == 0 || strcmp(k, "tcp") == 0) {
            if (!lua_isboolean(L, -1))
                luaL_error(L, "spawn: isolation: landlock.%s must be a boolean", k);
            if (lua_toboolean(L, -1))
                *(k[0] == 's' ? &iso->ll_scopes : &iso->ll_tcp) = 1;
        } else if (strcmp(k, "read") == 0 || strcmp(k, "write") == 0) {
            iso->ll_fs = 1;
        } else if (strcmp(k, "base") == 0) {
            if (!luaL_testudata(L, -1, "hcp.landlock_base"))
                luaL_error(L, "spawn: isolation: landlock.base must be a Landlock base (core.landlock_base)");
            iso->ll_fs = 1;
        } else {
            luaL_error(L, "spawn: isolation: landlock: unknown key (read, write, base, scopes, tcp)");
        }
        lua_pop(L, 1);
    }
    if (!iso->ll_scopes && !iso->ll_tcp)
        iso->ll_fs = 1;
    for (int k = 0; k < 2; k++) {
        lua_pushstring(L, lists[k]);
        int ty = lua_rawget(L, t);
        if (ty == LUA_TNIL) {
            lua_pop(L, 1);
            continue;
        }
        if (ty != LUA_TTABLE)
            luaL_error(L, "spawn: isolation: landlock.%s must be an array of paths", lists[k]);
        if (hcp_iso_path_list(L, lua_gettop(L), k ? "landlock.write" : "landlock.read", "landlock path") < 0)
            return -1;
        lua_pop(L, 1);
    }
    return 0;
}

/* run_as = { uid = N, gid = N }: ids other than 0 */
static void check_run_as(lua_State *L, int t, struct hcp_isolation *iso)
{
    if (!lua_istable(L, t))
        luaL_error(L, "spawn: isolation: run_as must be a table { uid =, gid = }");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        if (strcmp(k, "uid") != 0 && strcmp(k, "gid") != 0)
            luaL_error(L, "spawn: isolation: run_as: unknown key (uid, gid)");
        lua_pop(L, 1);
    }
    for (int k = 0; k < 2; k++) {
        const char *name = k ? "gid" : "uid";
        lua_getfield(L, t, name);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > 0x7ffffffe)
            luaL_error(L, "spawn: isolation: run_as.%s must be an integer from 1 to 2147483646", name);
        if (k)
            iso->run_gid = (gid_t)lua_tointeger(L, -1);
        else
            iso->run_uid = (uid_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
}

static void check_rlimits(lua_State *L, int t, struct hcp_isolation *iso)
{
    if (!lua_istable(L, t))
        luaL_error(L, "spawn: isolation: rlimits must be a table");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        size_t i = 0, n = sizeof rlim_keys / sizeof rlim_keys[0];
        if (lua_type(L, -2) == LUA_TSTRING)
            while (i < n && strcmp(rlim_keys[i].key, lua_tostring(L, -2)) != 0)
                i++;
        if (lua_type(L, -2) != LUA_TSTRING || i == n)
            luaL_error(L, "spawn: isolation: rlimits: unknown limit '%s' "
                       "(cpu_s, as_mb, fsize_mb, nofile, nproc)", luaL_tolstring(L, -2, NULL));
        lua_Integer max = (lua_Integer)(INT64_MAX / (int64_t)rlim_keys[i].unit);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0 || lua_tointeger(L, -1) > max)
            luaL_error(L, "spawn: isolation: rlimits.%s must be an integer from 0 to %I",
                       rlim_keys[i].key, max);
        iso->rlim[iso->nrlim].resource = rlim_keys[i].resource;
        iso->rlim[iso->nrlim++].value =
            (unsigned long long)lua_tointeger(L, -1) * rlim_keys[i].unit;
        lua_pop(L, 1);
    }
}

/* An open descriptor of the caller (the layer is applied with setns). */
static int check_fd(lua_State *L, int v, const char *what)
{
    lua_Integer fd = lua_isinteger(L, v) ? lua_tointeger(L, v) : hcp_nsfd_get(L, v);
    if (fd < 0 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0)
        luaL_error(L, strcmp(what, "netns") == 0
                   ? "spawn: isolation: netns must be a boolean, \"pool\" or an open descriptor of a network namespace"
                   : "spawn: isolation: userns must be an open descriptor of a user namespace");
    return (int)fd;
}

/* netns = "pool" | fd (true and false are booleans, read by the caller) */
static void check_netns(lua_State *L, int v, struct hcp_isolation *iso)
{
    if (lua_type(L, v) == LUA_TSTRING && strcmp(lua_tostring(L, v), "pool") == 0)
        iso->netns_pool = 1;
    else
        iso->netns_fd = check_fd(L, v, "netns");
}

int hcp_iso_check(lua_State *L, int opts, struct hcp_isolation *iso)
{
    memset(iso, 0, sizeof *iso);
    iso->landlock_fd = iso->cgroup_fd = iso->cap_last = iso->egress_fd = -1;
    iso->netns_fd = iso->userns_fd = -1;
    int top = lua_gettop(L);
    int t = lua_getfield(L, opts, "isolation");
    if (t == LUA_TNIL)
        return lua_settop(L, top), 0;
    if (t != LUA_TTABLE)
        luaL_error(L, "spawn: option 'isolation' must be a table");
    int it = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, it)) {
        unsigned bit = layer_bit(L, -2);
        int v = lua_gettop(L);
        if (bit == ISO_LANDLOCK) {
            if (check_landlock(L, v, iso) < 0)
                return -1;
        } else if (bit == ISO_ROOTFS) {
            if (hcp_rootfs_check(L, v) < 0)
                return -1;
        } else if (bit == ISO_STAGE) {
            if (hcp_stage_check(L, v, &iso->stage) < 0)
                return -1;
        } else if (bit == ISO_RUN_AS) {
            check_run_as(L, v, iso);
        } else if (bit == ISO_RLIMITS) {
            check_rlimits(L, v, iso);
        } else if (bit == ISO_CGROUP) {
            if (check_path(L, v, "cgroup") < 0)
                return -1;
        } else if (bit == ISO_EGRESS) {   /* issue 14 */
            if (!(iso->egress = hcp_egress_test(L, v)))
                luaL_error(L, "spawn: isolation: egress must be an open core.egress() proxy");
        } else if (bit == ISO_PIDS_MAX) {
            if (!lua_isinteger(L, v) || lua_tointeger(L, v) < HCP_PIDS_MAX_MIN ||
                lua_tointeger(L, v) > HCP_PIDS_MAX_MAX)
                luaL_error(L, "spawn: isolation: pids_max must be an integer from %d to %d",
                           HCP_PIDS_MAX_MIN, HCP_PIDS_MAX_MAX);
            iso->pid_max = (unsigned)lua_tointeger(L, v) + 1;
        } else if (bit == ISO_NETNS && !lua_isboolean(L, v)) {
            check_netns(L, v, iso);
        } else if (bit == ISO_USERNS) {
            iso->userns_fd = check_fd(L, v, "userns");
            bit = 0;
        } else if (!lua_isboolean(L, v)) {
            luaL_error(L, "spawn: isolation: %s must be a boolean", lua_tostring(L, -2));
        } else if (!lua_toboolean(L, v)) {
            bit = 0;   /* false: not asked for, like an absent key */
        }
        iso->layers |= bit;
        lua_pop(L, 1);
    }
    /* the proxy listens on a fixed port of a namespace made for this call:
     * a lent or joined one may hold another call's listener */
    if ((iso->layers & ISO_EGRESS) && (!(iso->layers & ISO_NETNS) || iso->netns_pool || iso->netns_fd >= 0))
        luaL_error(L, "spawn: isolation: egress needs netns = true (the proxy listens in a namespace made for the call)");
    if ((iso->layers & ISO_PIDS_MAX) && !(iso->layers & ISO_PIDNS))
        luaL_error(L, "spawn: isolation: pids_max needs pidns (it is the pid namespace's pid_max)");
    lua_settop(L, top);
    return 0;
}

/* ---- preparing it ------------------------------------------------------- */

/* Pushes "spawn: isolation: <layer>: <what>: <strerror>" (what may be NULL)
 * and returns err, which the caller saved before any Lua call. */
static int layer_error(lua_State *L, int err, const char *layer, const char *what)
{
    if (what)
        lua_pushfstring(L, "spawn: isolation: %s: %s: %s", layer, what, strerror(err));
    else
        lua_pushfstring(L, "spawn: isolation: %s: %s", layer, strerror(err));
    return err;
}

/* On procfs (PROC_SUPER_MAGIC), when it can be told: those rules are the
 * child's to add (see proc_rules in isolation.h). */
static int on_procfs(const char *path)
{
    struct statfs sf;
    return statfs(path, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
}

static int add_rules(lua_State *L, int ll, const char *name, struct hcp_isolation *iso)
{
    int which = strcmp(name, "read") == 0 ? LL_READ : LL_WRITE;
    lua_getfield(L, ll, name);
    lua_Integer n = lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        const char *path = lua_tostring(L, -1);   /* pinned by opts */
        lua_pop(L, 1);
        if (on_procfs(path)) {
            if (iso->nproc_rules == HCP_PROC_RULES) {
                lua_pushfstring(L, "spawn: isolation: landlock: more than %d paths on /proc",
                                HCP_PROC_RULES);
                return EINVAL;
            }
            iso->proc_rules[iso->nproc_rules].path = path;
            iso->proc_rules[iso->nproc_rules++].which = which;
        } else if (hcp_landlock_add(iso->landlock_fd, path, which, iso->landlock_abi) < 0) {
            return layer_error(L, errno, "landlock", path);
        }
    }
    lua_pop(L, 1);
    return 0;
}

static int prepare_landlock(lua_State *L, int ll, struct hcp_isolation *iso, int *fdp)
{
    int abi = hcp_landlock_abi();
    if (abi < 0)
        return layer_error(L, errno, "landlock", NULL);
    const char *need = iso->ll_scopes && abi < 6 ? "scopes (abstract unix sockets, signals) need ABI 6"
                     : iso->ll_tcp && abi < 4 ? "tcp needs ABI 4" : NULL;
    if (need) {
        lua_pushfstring(L, "spawn: isolation: landlock: %s; this kernel has ABI %d", need, abi);
        return EOPNOTSUPP;
    }
    struct hcp_landlock_attr attr;
    memset(&attr, 0, sizeof attr);
    if (iso->ll_fs)
        attr.handled_access_fs = hcp_landlock_rights(abi, LL_HANDLED);
    if (iso->ll_tcp)
        attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
    if (iso->ll_scopes)
        attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
    int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U);
    if (fd < 0)
        return layer_error(L, errno, "landlock", "create ruleset");
    *fdp = iso->landlock_fd = fd;
    iso->landlock_abi = abi;
    if (!iso->ll_fs)
        return 0;
    if (lua_getfield(L, ll, "base") != LUA_TNIL && hcp_landlock_base_add(L, lua_gettop(L), fd, abi) < 0)
        return layer_error(L, errno, "landlock", "base");
    lua_pop(L, 1);
    int err = add_rules(L, ll, "read", iso);
    return err ? err : add_rules(L, ll, "write", iso);
}

/* The cgroup must already exist (the Lua side creates it and sets its
 * limits); a directory that is not on a cgroup filesystem is refused, so
 * the child never writes its pid into some ordinary file. */
static int prepare_cgroup(lua_State *L, const char *dir, struct hcp_isolation *iso, int *fdp)
{
    char path[PATH_MAX];
    struct statfs sf;
    if ((size_t)snprintf(path, sizeof path, "%s/cgroup.procs", dir) >= sizeof path)
        return layer_error(L, ENAMETOOLONG, "cgroup", dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return layer_error(L, errno, "cgroup", dir);
    *fdp = iso->cgroup_fd = fd;
    if (fstatfs(fd, &sf) < 0)
        return layer_error(L, errno, "cgroup", dir);
    if (sf.f_type != CGROUP_SUPER_MAGIC && sf.f_type != CGROUP2_SUPER_MAGIC) {
        lua_pushfstring(L, "spawn: isolation: cgroup: %s: not a cgroup directory", dir);
        return EINVAL;
    }
    return 0;
}

/* The kind of namespace fd refers to (NS_GET_NSTYPE, Linux 4.11), or -1. */
static int ns_type(int fd)
{
    return ioctl(fd, NS_GET_NSTYPE);
}

/* The kernel's last capability: fixed until the next boot, so read once
 * per process (three system calls fewer on every call's path). */
static int read_cap_last(void)
{
    static atomic_int known;   /* 0: not read yet */
    int last = atomic_load(&known);
    if (last > 0)
        return last;
    char buf[16];
    if (hcp_read_small("/proc/sys/kernel/cap_last_cap", buf, sizeof buf) <= 0)
        return -1;
    long v = strtol(buf, NULL, 10);
    if (v <= 0 || v >= 64)
        return -1;
    atomic_store(&known, (int)v);
    return (int)v;
}

/* Appends the array at `from` to the array at `to`. */
static void append(lua_State *L, int to, int from)
{
    lua_Integer n = lua_istable(L, from) ? (lua_Integer)lua_rawlen(L, from) : 0;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, from, i);
        lua_rawseti(L, to, (lua_Integer)lua_rawlen(L, to) + 1);
    }
}

/* The constructed root: on the base view when one is given and it can
 * serve (rootfs_base.c), else fresh — for the base's own paths too. On an
 * error its message is left on top of the stack. */
static int prepare_rootfs(lua_State *L, int t, int pin, int with_proc, struct hcp_rootfs *rf)
{
    int top = lua_gettop(L), b = top + 1;
    lua_getfield(L, t, "base");
    lua_getfield(L, t, "legacy");
    int use = !lua_isnil(L, b) && !lua_toboolean(L, top + 2);
    lua_settop(L, b);
    if (!use)
        return hcp_rootfs_prepare_call(L, t, pin, with_proc, NULL, rf);
    struct hcp_rootfs base;
    if (hcp_base_for_call(L, b, &base) == 0) {
        int err = hcp_rootfs_prepare_call(L, t, pin, with_proc, &base, rf);
        if (!err) {
            rf->base_fd = base.base_fd;
            rf->base = base.base;
            rf->nbase = base.nbase;
        }
        if (err != HCP_ROOTFS_FRESH)
            return err;
    }
    lua_settop(L, b);
    lua_createtable(L, 0, 3);   /* { ro = the base's and the call's, rw =, tmp_mb = } */
    lua_newtable(L);
    hcp_base_ro(L, b);
    lua_getfield(L, t, "ro");
    append(L, top + 3, top + 4);
    append(L, top + 3, top + 5);
    lua_settop(L, top + 3);
    lua_setfield(L, top + 2, "ro");
    lua_getfield(L, t, "rw");
    lua_setfield(L, top + 2, "rw");
    lua_getfield(L, t, "tmp_mb");
    lua_setfield(L, top + 2, "tmp_mb");
    lua_pushvalue(L, top + 2);
    lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);
    return hcp_rootfs_prepare_call(L, top + 2, pin, with_proc, NULL, rf);
}

int hcp_iso_prepare(lua_State *L, int opts, struct hcp_isolation *iso,
                    int *landlock_fd, int *cgroup_fd)
{
    if (!iso->layers)
        return lua_newtable(L), 0;
    iso->uid = geteuid();
    iso->gid = getegid();
    iso->userns = iso->uid != 0 && iso->userns_fd < 0 &&
                  (iso->layers & (ISO_NETNS | ISO_PIDNS | ISO_ROOTFS | ISO_IPCNS));
    if ((iso->netns_fd >= 0 && ns_type(iso->netns_fd) != CLONE_NEWNET) ||
        (iso->userns_fd >= 0 && ns_type(iso->userns_fd) != CLONE_NEWUSER)) {
        int net = iso->netns_fd >= 0 && ns_type(iso->netns_fd) != CLONE_NEWNET;
        lua_pushfstring(L, "spawn: isolation: %s: descriptor %d is not a %s namespace", net ? "netns" : "userns",
                        net ? iso->netns_fd : iso->userns_fd, net ? "network" : "user");
        return EINVAL;
    }
    if ((iso->layers & ISO_SECCOMP) && !hcp_iso_seccomp_supported()) {
        lua_pushliteral(L, "spawn: isolation: seccomp: unsupported architecture");
        return ENOSYS;
    }
    if (iso->layers & ISO_CAPS)
        iso->cap_last = read_cap_last();
    int top = lua_gettop(L), err = 0;
    lua_newtable(L);   /* pins what the plan points into, until the fork */
    int pin = top + 1;
    lua_getfield(L, opts, "isolation");
    int it = lua_gettop(L);
    if (iso->layers & ISO_LANDLOCK) {
        lua_getfield(L, it, "landlock");
        err = prepare_landlock(L, lua_gettop(L), iso, landlock_fd);
    }
    if (!err && (iso->layers & ISO_CGROUP)) {
        lua_getfield(L, it, "cgroup");
        err = prepare_cgroup(L, lua_tostring(L, -1), iso, cgroup_fd);
    }
    if (!err && (iso->layers & ISO_ROOTFS)) {
        lua_getfield(L, it, "rootfs");
        err = prepare_rootfs(L, lua_gettop(L), pin, (iso->layers & ISO_PIDNS) != 0, &iso->rootfs);
    }
    if (err) {   /* keep only the message */
        lua_replace(L, top + 1);
        lua_settop(L, top + 1);
        return err;
    }
    lua_settop(L, pin);
    return 0;
}

/* ---- core.rmdir ------------------------------------------------------------ */

/* core.rmdir(path) -> true | nil, msg, errno: plain rmdir(2), for the cgroup
 * directories the runtime made (a cgroup is removed this way, not emptied). */
static int l_rmdir(lua_State *L)
{
    size_t len;
    const char *path = luaL_checklstring(L, 1, &len);
    luaL_argcheck(L, strlen(path) == len, 1, "path contains a NUL byte");
    if (rmdir(path) < 0)
        return hcp_push_oserror(L, errno, "%s", path);
    lua_pushboolean(L, 1);
    return 1;
}

void hcp_register_isolation(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        { "probe", hcp_probe }, { "probe_source", hcp_probe_source }, { "rmdir", l_rmdir }, { NULL, NULL },
    };
    luaL_setfuncs(L, funcs, 0);
}
