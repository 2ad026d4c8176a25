/* spawn.c — core.spawn. Options are read and refused before anything is
 * acquired; every resource lives in the proc userdata from the moment it
 * exists, so hcp_proc_release is the one cleanup path. The isolation layers
 * that can be prepared in the parent (the Landlock ruleset, the cgroup.procs
 * descriptor) are, so the child only applies them. */
#include "spawn.h"
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define DEFAULT_MAX_OUTPUT ((lua_Integer)16 << 20)

static const char *const known_opts[] = {
    "path", "beneath", "argv", "env", "cwd", "stdin", "max_output",
    "timeout_ms", "kill_grace_ms", "tee_stdout", "tee_stderr", "isolation",
    "capture", "stream", "data_fds", "async", NULL,
};

/* An unknown option is a caller's mistake, and ignoring one (say, a future
 * isolation layer asked for by name) would be a silent downgrade. */
static void check_known(lua_State *L)
{
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        lua_pop(L, 1);
        int i = 0;
        if (lua_type(L, -1) == LUA_TSTRING)
            while (known_opts[i] && strcmp(known_opts[i], lua_tostring(L, -1)) != 0)
                i++;
        if (lua_type(L, -1) != LUA_TSTRING || !known_opts[i])
            luaL_error(L, "spawn: unknown option '%s'", luaL_tolstring(L, -1, NULL));
    }
}

/* Turns the message on top of the stack into nil, message, EINVAL. */
static int refuse(lua_State *L)
{
    luaL_pushfail(L);
    lua_insert(L, -2);
    lua_pushinteger(L, EINVAL);
    return 3;
}

/* Pushes opts[name] (the stack keeps it, so a string stays valid) and
 * returns it, or NULL when absent and optional. Absolute paths only. */
static const char *opt_path(lua_State *L, const char *name, int required, size_t *len)
{
    int t = lua_getfield(L, 1, name);
    if (t == LUA_TNIL && !required)
        return NULL;
    if (t != LUA_TSTRING)
        luaL_error(L, "spawn: option '%s' must be a string", name);
    const char *s = lua_tolstring(L, -1, len);
    if (s[0] != '/')
        luaL_error(L, "spawn: option '%s' must be an absolute path", name);
    return s;
}

/* opts[name]: a boolean, dflt when absent. */
static int opt_bool(lua_State *L, const char *name, int dflt)
{
    int t = lua_getfield(L, 1, name);
    int v = dflt;
    if (t != LUA_TNIL) {
        if (t != LUA_TBOOLEAN)
            luaL_error(L, "spawn: option '%s' must be a boolean", name);
        v = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    return v;
}

static lua_Number opt_num(lua_State *L, const char *name, lua_Number dflt, int integer)
{
    int t = lua_getfield(L, 1, name);
    lua_Number v = dflt;
    if (t != LUA_TNIL) {
        if (t != LUA_TNUMBER || (integer && !lua_isinteger(L, -1)))
            luaL_error(L, "spawn: option '%s' must be %s", name,
                       integer ? "an integer" : "a number");
        v = lua_tonumber(L, -1);
        if (!(v >= 0))
            luaL_error(L, "spawn: option '%s' must not be negative", name);
    }
    lua_pop(L, 1);
    return v > 1e12 ? 1e12 : v;   /* ms: decades; bytes: more than memory */
}

/* opts[name]: an open fd of the caller, or -1 when absent. */
static int opt_fd(lua_State *L, const char *name)
{
    int t = lua_getfield(L, 1, name);
    lua_Integer fd = -1;
    if (t != LUA_TNIL) {
        int isint;
        fd = lua_tointegerx(L, -1, &isint);
        if (!isint || fd < 0 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0)
            luaL_error(L, "spawn: option '%s' must be an open file descriptor", name);
    }
    lua_pop(L, 1);
    return (int)fd;
}

/* Builds argv or envp as a NULL-terminated array whose strings are pinned in
 * a table kept on the stack. Returns the array, or NULL with the refusal's
 * message on top of the stack. */
static char **build_argv(lua_State *L)
{
    if (lua_getfield(L, 1, "argv") != LUA_TTABLE)
        luaL_error(L, "spawn: option 'argv' must be an array of strings");
    int src = lua_gettop(L);
    lua_Unsigned n = lua_rawlen(L, src);
    if (n < 1 || n > 1u << 20)
        luaL_error(L, "spawn: option 'argv' must hold 1 to 2^20 strings");
    char **v = lua_newuserdatauv(L, sizeof *v * ((size_t)n + 1), 0);
    lua_createtable(L, (int)n, 0);
    for (lua_Unsigned i = 1; i <= n; i++) {
        size_t len;
        if (lua_rawgeti(L, src, (lua_Integer)i) != LUA_TSTRING)
            luaL_error(L, "spawn: argv[%I] must be a string", (lua_Integer)i);
        v[i - 1] = (char *)lua_tolstring(L, -1, &len);
        if (strlen(v[i - 1]) != len) {
            lua_pushfstring(L, "spawn: argv[%I] contains a NUL byte", (lua_Integer)i);
            return NULL;
        }
        lua_rawseti(L, -2, (lua_Integer)i);
    }
    v[n] = NULL;
    return v;
}

static char **build_envp(lua_State *L)
{
    if (lua_getfield(L, 1, "env") != LUA_TTABLE)
        luaL_error(L, "spawn: option 'env' must be a table of strings");
    int src = lua_gettop(L);
    lua_newtable(L);   /* "k=v" strings, pinned */
    int pin = lua_gettop(L), n = 0;
    lua_pushnil(L);
    while (lua_next(L, src)) {
        size_t klen, vlen;
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "spawn: option 'env' must map strings to strings");
        const char *k = lua_tolstring(L, -2, &klen);
        const char *val = lua_tolstring(L, -1, &vlen);
        const char *bad = strlen(k) != klen ? "spawn: env key \"%s\" contains a NUL byte"
                        : klen == 0 ? "spawn: env key \"%s\" is empty"
                        : strchr(k, '=') ? "spawn: env key \"%s\" contains '='"
                        : strlen(val) != vlen ? "spawn: env value of \"%s\" contains a NUL byte"
                        : NULL;
        if (bad) {
            lua_pushfstring(L, bad, k);
            return NULL;
        }
        if (n >= 1 << 20)
            luaL_error(L, "spawn: option 'env' holds too many variables");
        lua_pushfstring(L, "%s=%s", k, val);
        lua_rawseti(L, pin, ++n);
        lua_pop(L, 1);
    }
    char **v = lua_newuserdatauv(L, sizeof *v * ((size_t)n + 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, pin, i + 1);
        v[i] = (char *)lua_tostring(L, -1);   /* pinned by `pin` */
        lua_pop(L, 1);
    }
    v[n] = NULL;
    return v;
}

/* data_fds = { string | { exe = path, beneath = dir }, ... }: checked
 * before anything is acquired. */
static int check_data(lua_State *L)
{
    int t = lua_getfield(L, 1, "data_fds");
    lua_Integer n = t == LUA_TTABLE ? (lua_Integer)lua_rawlen(L, -1) : 0;
    if (t != LUA_TNIL && (t != LUA_TTABLE || n > HCP_DATA_FDS))
        luaL_error(L, "spawn: option 'data_fds' must be an array of at most %d entries", HCP_DATA_FDS);
    for (lua_Integer i = 1; i <= n; i++) {
        int ty = lua_rawgeti(L, -1, i);
        if (ty == LUA_TTABLE) {
            int e = lua_getfield(L, -1, "exe"), b = lua_getfield(L, -2, "beneath");
            if (e != LUA_TSTRING || lua_tostring(L, -2)[0] != '/' ||
                (b != LUA_TNIL && (b != LUA_TSTRING || lua_tostring(L, -1)[0] != '/')))
                luaL_error(L, "spawn: data_fds[%I].exe (and beneath) must be absolute paths", i);
            lua_pop(L, 2);
        } else if (ty != LUA_TSTRING) {
            luaL_error(L, "spawn: data_fds[%I] must be a string or { exe =, beneath = }", i);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return (int)n;
}

/* Each string of data_fds in a memfd read from its start: the child reads
 * it at its own pace, and nothing here blocks on a pipe. An `exe` entry is
 * that file, opened and checked as the binary itself is (beneath its
 * directory, a regular executable file): a tool given it by descriptor
 * (bwrap --ro-bind-fd) gets the file that was checked. */
static const char *open_data(lua_State *L, proc_t *p, int n)
{
    lua_getfield(L, 1, "data_fds");
    for (int i = 0; i < n; i++) {
        size_t len, off = 0;
        if (lua_rawgeti(L, -1, i + 1) == LUA_TTABLE) {
            int script, why;
            lua_getfield(L, -1, "exe");
            lua_getfield(L, -2, "beneath");
            int err = hcp_exe_open(lua_tostring(L, -2), lua_tostring(L, -1), &p->tmp[T_DATA + i], &script, &why);
            lua_pop(L, 3);
            if (err)
                return lua_pop(L, 1), errno = err, "data_fds: exe";
            continue;
        }
        const char *d = lua_tolstring(L, -1, &len);
        lua_pop(L, 1);   /* pinned by opts */
        int fd = memfd_create("hcp-data", MFD_CLOEXEC);
        if (fd < 0)
            return lua_pop(L, 1), "memfd_create";
        p->tmp[T_DATA + i] = fd;
        while (off < len) {
            ssize_t w = write(fd, d + off, len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return lua_pop(L, 1), "write";
            off += (size_t)w;
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
            return lua_pop(L, 1), "lseek";
    }
    lua_pop(L, 1);
    return NULL;
}

static int nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* The same for an end pipe2 just made with O_CLOEXEC only, whose status
 * flags are therefore none: one call, not two. */
static int pipe_nonblock(int fd)
{
    return fcntl(fd, F_SETFL, O_NONBLOCK);
}

/* The three standard streams: a pipe we write `stdin` into (or /dev/null)
 * and two pipes we read. Returns NULL, or what failed (errno set). */
static const char *open_stdio(proc_t *p, int with_stdin)
{
    int fds[2];
    if (!with_stdin) {
        if ((p->tmp[T_IN] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
            return "/dev/null";
    } else {
        if (pipe2(fds, O_CLOEXEC) < 0)
            return "pipe";
        p->tmp[T_IN] = fds[0];
        p->in_fd = fds[1];
        if (pipe_nonblock(p->in_fd) < 0)
            return "fcntl";
    }
    for (int i = 0; i < 2; i++) {
        if (pipe2(fds, O_CLOEXEC) < 0)
            return "pipe";
        p->out[i].fd = fds[0];
        p->tmp[T_OUT + i] = fds[1];
        /* grown to 1 MiB once output fills what a read takes (spawn_io.c) */
        if (pipe_nonblock(fds[0]) < 0)
            return "fcntl";
    }
    return NULL;
}

/* issue 14: the socketpair the child sends its listeners back through. */
static int egress_pair(proc_t *p, struct hcp_isolation *iso)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    p->tmp[T_EGRESS] = sv[0];
    p->tmp[T_EGRESS_P] = sv[1];
    iso->egress_fd = sv[0];
    return 0;
}

/* After the exec: the listeners the child made, into the proxy. A child
 * that ran without them must not run at all (it was promised a proxy). */
static int egress_adopt(proc_t *p, const struct hcp_isolation *iso, pid_t pid)
{
    int fds[2];
    int n = hcp_egress_receive(p->tmp[T_EGRESS_P], fds, 2);
    if (n > 0 && hcp_egress_adopt(iso->egress, fds, n) == 0)   /* it owns them either way */
        return 0;
    int err = errno;
    p->pid = pid;
    p->state = S_RUNNING;   /* so the release kills and reaps it */
    errno = err;
    return -1;
}

/* async: what a failure reported after spawn returned names — the entries
 * of the rootfs and stage plans — stays alive with the proc. */
static void keep_plan(lua_State *L, int pidx, int pin, proc_t *p, const struct hcp_isolation *iso)
{
    lua_createtable(L, 2, 0);
    lua_pushvalue(L, pin);
    lua_rawseti(L, -2, 1);
    lua_pushvalue(L, 1);   /* the options: the stage paths are theirs */
    lua_rawseti(L, -2, 2);
    lua_setiuservalue(L, pidx, UV_PLAN);
    p->rf_e = iso->rootfs.e;
    p->rf_n = iso->rootfs.n;
    p->stage_n = iso->stage.n;
    for (int i = 0; i < iso->stage.n; i++)
        p->stage_path[i] = iso->stage.e[i].path;
}

void hcp_push_spawn_error(lua_State *L, const proc_t *p)
{
    const char *step = hcp_step_name(p->spawn_step);
    const char *err = strerror(p->spawn_err);
    if (!step)
        lua_pushfstring(L, "spawn: read: %s", err);
    else if (p->spawn_step == ST_ROOTFS) {
        struct hcp_rootfs rf;
        memset(&rf, 0, sizeof rf);
        rf.e = (struct hcp_rootfs_ent *)(uintptr_t)p->rf_e;
        rf.n = p->rf_n;
        lua_pushfstring(L, "spawn: %s: %s: %s", step, hcp_rootfs_where(&rf, p->spawn_arg), err);
    } else if (p->spawn_step == ST_STAGE && p->spawn_arg >= 0 && p->spawn_arg < p->stage_n)
        lua_pushfstring(L, "spawn: %s: %s: %s", step, p->stage_path[p->spawn_arg], err);
    else
        lua_pushfstring(L, "spawn: %s: %s", step, err);
}

/* The caller's options, checked before anything is acquired. The strings
 * are the options table's (argument 1) or on the stack (stdin at in_idx). */
struct spawn_opts {
    const char *path, *beneath, *cwd, *in;
    size_t in_len;
    int in_idx, tee[2], capture, streaming, async, ndata;
    lua_Number max_out, timeout, grace;
};

/* Stage 1: options, isolation and argv/envp. Caller mistakes raise; a
 * refusal returns -1 with its message on the stack. */
static int read_opts(lua_State *L, struct spawn_opts *o, struct hcp_isolation *iso, struct hcp_launch *l)
{
    size_t plen, blen = 0, clen;
    o->path = opt_path(L, "path", 1, &plen);
    o->beneath = opt_path(L, "beneath", 0, &blen);
    o->cwd = opt_path(L, "cwd", 1, &clen);
    int t = lua_getfield(L, 1, "stdin");
    o->in_idx = lua_gettop(L);
    if (t != LUA_TNIL && t != LUA_TSTRING)
        luaL_error(L, "spawn: option 'stdin' must be a string");
    o->in_len = 0;
    o->in = t == LUA_TSTRING ? lua_tolstring(L, o->in_idx, &o->in_len) : NULL;
    o->max_out = opt_num(L, "max_output", (lua_Number)DEFAULT_MAX_OUTPUT, 1);
    o->timeout = opt_num(L, "timeout_ms", -1, 0);
    o->grace = opt_num(L, "kill_grace_ms", 500, 0);
    o->tee[0] = opt_fd(L, "tee_stdout");
    o->tee[1] = opt_fd(L, "tee_stderr");
    o->capture = opt_bool(L, "capture", 1);
    o->streaming = opt_bool(L, "stream", 0);
    o->async = opt_bool(L, "async", 0);
    o->ndata = check_data(L);
    if (hcp_iso_check(L, 1, iso) < 0)
        return -1;
    /* the proxy takes the child's listeners once it has exec'd: before
     * spawn returns, so a call never runs without the proxy it was promised */
    if (iso->layers & ISO_EGRESS)
        o->async = 0;
    const char *nul = strlen(o->path) != plen ? "path"
                    : o->beneath && strlen(o->beneath) != blen ? "beneath"
                    : strlen(o->cwd) != clen ? "cwd" : NULL;
    if (nul) {
        lua_pushfstring(L, "spawn: %s contains a NUL byte", nul);
        return -1;
    }
    if (!(l->argv = build_argv(L)) || !(l->envp = build_envp(L)))
        return -1;
    l->cwd = o->cwd;
    l->path = o->path;
    l->iso = iso;
    l->ndata = o->ndata;
    return 0;
}

/* Stage 2: the proc, holding nothing yet (safe to collect), at *pidx. */
static proc_t *new_proc(lua_State *L, const struct spawn_opts *o, int *pidx)
{
    proc_t *p = lua_newuserdatauv(L, sizeof *p, 3);
    memset(p, 0, sizeof *p);
    p->state = S_CLOSED;
    p->pidfd = p->in_fd = p->out[0].fd = p->out[1].fd = -1;
    p->out[0].tee = o->tee[0];   /* the caller's fds: never closed here */
    p->out[1].tee = o->tee[1];
    hcp_strbuf_init(&p->out[0].cap, L);
    hcp_strbuf_init(&p->out[1].cap, L);
    for (int i = 0; i < NTMP; i++)
        p->tmp[i] = -1;
    luaL_setmetatable(L, PROC_MT);
    *pidx = lua_gettop(L);
    if (o->in) {
        lua_pushvalue(L, o->in_idx);
        lua_setiuservalue(L, *pidx, UV_STDIN);
        p->in_data = o->in;
        p->in_len = o->in_len;
    }
    p->netns.net = p->netns.user = -1;
    p->status_fd = p->report_fd = -1;
    p->spawn_step = -1;
    p->max_output = (size_t)o->max_out;
    p->capture = o->capture;
    p->streaming = o->streaming;
    return p;
}

/* Stage 3: the binary (the very file exec'd later), the stdio pipes and the
 * data fds. 0, or what spawn returns (the proc released). */
static int open_files(lua_State *L, proc_t *p, const struct spawn_opts *o, struct hcp_launch *l)
{
    int why, err = hcp_exe_open(o->path, o->beneath, &p->tmp[T_EXE], &l->script, &why);
    if (err) {
        hcp_proc_release(p);
        if (why == EXE_NOTEXEC)
            return luaL_pushfail(L), lua_pushfstring(L, "spawn: %s: not a regular executable file", o->path),
                   lua_pushinteger(L, err), 3;
        if (why == EXE_ESCAPES)
            return luaL_pushfail(L), lua_pushfstring(L, "spawn: %s: escapes %s", o->path, o->beneath),
                   lua_pushinteger(L, err), 3;
        return hcp_push_oserror(L, err, "spawn: %s", o->path);
    }
    const char *step = open_stdio(p, o->in != NULL);
    if (!step)
        step = open_data(L, p, o->ndata);
    if (step) {
        err = errno;
        hcp_proc_release(p);
        return hcp_push_oserror(L, err, "spawn: %s", step);
    }
    l->exe_fd = p->tmp[T_EXE];
    l->in_fd = p->tmp[T_IN];
    l->out_fd = p->tmp[T_OUT];
    l->err_fd = p->tmp[T_ERR];
    for (int i = 0; i < o->ndata; i++)
        l->data_fd[i] = p->tmp[T_DATA + i];
    return 0;
}

/* Stage 4: what the layers need prepared in the parent — a pooled network
 * namespace, the Landlock ruleset, the cgroup, the egress socketpair, the
 * hcp-init status pipe. Fail closed: a layer asked for that cannot be
 * prepared runs nothing. 0, or what spawn returns (the proc released). */
static int prepare_layers(lua_State *L, proc_t *p, struct hcp_isolation *iso, struct hcp_launch *l, int async,
                          int pidx)
{
    p->root = geteuid() == 0;
    /* a pid namespace, so the call's end is known to be its last process's;
     * no capabilities in the program, so it cannot have changed the
     * namespace (its loopback up, an address, a route); from here on a
     * pooled namespace is the proc's */
    p->netns_reuse = iso->netns_pool && (iso->layers & ISO_NETNS) && (iso->layers & ISO_PIDNS) &&
                     (iso->layers & ISO_CAPS);
    if (p->netns_reuse) {
        p->netns = hcp_netns_take(p->root);
        iso->netns_fd = p->netns.net;
        if (!p->root)
            iso->userns_fd = p->netns.user;
    }
    int err = hcp_iso_prepare(L, 1, iso, &p->tmp[T_LANDLOCK], &p->tmp[T_CGROUP]);
    if (err) {
        hcp_proc_release(p);   /* the message is on top of the stack */
        luaL_pushfail(L);
        lua_insert(L, -2);
        lua_pushinteger(L, err);
        return 3;
    }
    /* issue 14: the proxy's listeners come back from the child on this pair */
    if ((iso->layers & ISO_EGRESS) && egress_pair(p, iso) < 0) {
        err = errno;
        hcp_proc_release(p);
        return hcp_push_oserror(L, err, "spawn: isolation: egress: socketpair");
    }
    if (async)   /* a failure reported later names an entry of the plan: keep it */
        keep_plan(L, pidx, lua_gettop(L), p, iso);
    /* a pid namespace: hcp-init reports the program's end on a pipe of
     * its own (struct hcp_end_report, spawn.h) — to us when it is our own
     * child (root through the helper: no intermediate), else to the
     * intermediate, which passes it on here */
    l->status_fd = l->end_fd = -1;
    if (iso->layers & ISO_PIDNS) {
        int direct = !iso->userns && iso->userns_fd < 0 && p->root && hcp_helper_fd() >= 0, sp[2];
        if (pipe2(sp, O_CLOEXEC) < 0) {
            err = errno;
            hcp_proc_release(p);
            return hcp_push_oserror(L, err, "spawn: pipe");
        }
        p->status_fd = sp[0];
        p->tmp[T_STATUS] = sp[1];
        if (direct)
            l->status_fd = sp[1];
        else
            l->end_fd = sp[1];   /* the intermediate passes hcp-init's report on */
        p->relayed = !direct;
        (void)nonblock(p->status_fd);
        /* its report ends the call (spawn_io.c) only where the program could
         * not have written it: without capabilities, or as another uid, it
         * may neither open hcp-init's descriptors nor trace it */
        p->early_end = (iso->layers & (ISO_CAPS | ISO_RUN_AS)) != 0;
    }
    return 0;
}

/* Stage 5: the launch, and the running proc at pidx — or the failure the
 * child reported, naming its step (and the entry of the plan). */
static int launch(lua_State *L, proc_t *p, struct hcp_launch *l, const struct spawn_opts *o, int pidx)
{
    const struct hcp_isolation *iso = l->iso;
    const char *step;
    int err, arg;
    p->t0 = hcp_now_ns();
    pid_t pid = hcp_launch(l, o->async ? &p->report_fd : NULL, &err, &step, &arg);
    if (pid > 0 && (iso->layers & ISO_EGRESS) && egress_adopt(p, iso, pid) < 0) {
        err = errno;
        hcp_proc_release(p);
        return hcp_push_oserror(L, err, "spawn: isolation: egress: the child's listeners");
    }
    for (int i = 0; i < NTMP; i++)
        hcp_closefd(&p->tmp[i]);
    if (pid < 0) {
        hcp_proc_release(p);
        if (strcmp(step, "isolation: rootfs") == 0)
            return hcp_push_oserror(L, err, "spawn: %s: %s", step, hcp_rootfs_where(&iso->rootfs, arg));
        if (strcmp(step, "isolation: stage") == 0 && arg >= 0 && arg < iso->stage.n)
            return hcp_push_oserror(L, err, "spawn: %s: %s", step, iso->stage.e[arg].path);
        return hcp_push_oserror(L, err, "spawn: %s", step);
    }
    p->pid = pid;
    p->state = S_RUNNING;
    hcp_calldirs_kick();
    /* made for this call: kept for the next (its first process is in it
     * once it has exec'd; an async proc opens it when its report says so) */
    if (p->netns_reuse && p->netns.net < 0 && p->report_fd < 0)
        p->netns = hcp_netns_of(pid, !p->root);
    /* Without a pidfd (ENOSYS before 5.3, or EMFILE) exits are polled every
     * TICK_NS instead; nothing else changes. */
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (p->pidfd < 0)
        p->pidfd = -1;
    if (o->in && o->in_len == 0)
        hcp_closefd(&p->in_fd);
    p->deadline = o->timeout < 0 ? NEVER : p->t0 + (int64_t)(o->timeout * 1e6);
    p->grace = (int64_t)(o->grace * 1e6);
    p->kill_at = NEVER;
    lua_pushvalue(L, pidx);
    return 1;
}

/* core.spawn(opts): a straight line of the stages above. */
static int l_spawn(lua_State *L)
{
    struct spawn_opts o;
    struct hcp_isolation iso;
    struct hcp_launch l;
    int pidx;
    luaL_checktype(L, 1, LUA_TTABLE);
    check_known(L);
    if (read_opts(L, &o, &iso, &l) < 0)
        return refuse(L);
    proc_t *p = new_proc(L, &o, &pidx);
    int r = open_files(L, p, &o, &l);
    if (!r)
        r = prepare_layers(L, p, &iso, &l, o.async, pidx);
    return r ? r : launch(L, p, &l, &o, pidx);
}

/* core.spawn_helper() -> the path of the spawn helper isolated children
 * start through, or nil when they fork the runtime instead (no helper
 * found, HCP_SPAWN_HELPER=none, or one refused: not a regular executable
 * file owned by root or us, or writable by others). */
static int l_spawn_helper(lua_State *L)
{
    char proc[40], path[PATH_MAX];
    int fd = hcp_helper_fd();
    if (fd < 0)
        return luaL_pushfail(L), 1;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, path, sizeof path - 1);
    if (n <= 0)
        return lua_pushliteral(L, "?"), 1;   /* in use, its name unknown (no /proc) */
    lua_pushlstring(L, path, (size_t)n);
    return 1;
}

void hcp_register_spawn(lua_State *L)
{
    hcp_register_proc(L);
    lua_pushcfunction(L, l_spawn);
    lua_setfield(L, -2, "spawn");
    lua_pushcfunction(L, l_spawn_helper);
    lua_setfield(L, -2, "spawn_helper");
}
