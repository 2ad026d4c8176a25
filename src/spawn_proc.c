/* spawn_proc.c — the proc handle that core.spawn returns (pid, wait, kill,
 * done, __gc/__close), its result table, core.wait_any and core.signame. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static proc_t *checkproc(lua_State *L, int idx)
{
    return luaL_checkudata(L, idx, PROC_MT);
}

static int has_result(lua_State *L, int idx)
{
    int t = lua_getiuservalue(L, idx, UV_RESULT);
    lua_pop(L, 1);
    return t != LUA_TNIL;
}

static void setfield_bool(lua_State *L, const char *k, int v)
{
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}

static void setfield_int(lua_State *L, const char *k, long long v)
{
    lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, k);
}

/* { user_ms, sys_ms, max_rss_kb, read_bytes, write_bytes, disk_read_bytes,
 * disk_write_bytes }, each present only when the kernel reported it. */
static void push_usage(lua_State *L, const struct usage *u)
{
    lua_createtable(L, 0, 7);
    if (u->have_ru) {
        lua_pushnumber(L, (lua_Number)u->user_us / 1000.0);
        lua_setfield(L, -2, "user_ms");
        lua_pushnumber(L, (lua_Number)u->sys_us / 1000.0);
        lua_setfield(L, -2, "sys_ms");
        setfield_int(L, "max_rss_kb", u->maxrss_kb);
    }
    if (u->have_io) {
        setfield_int(L, "read_bytes", (long long)u->io.rchar);
        setfield_int(L, "write_bytes", (long long)u->io.wchar);
        setfield_int(L, "disk_read_bytes", (long long)u->io.read_bytes);
        setfield_int(L, "disk_write_bytes", (long long)u->io.write_bytes);
    }
}

/* Pushes the result of a done (or closed) proc at idx, building and caching
 * it the first time; the output buffers become its strings. */
static void push_result(lua_State *L, int idx, proc_t *p)
{
    static const char *const names[2] = { "stdout", "stderr" };
    idx = lua_absindex(L, idx);
    if (lua_getiuservalue(L, idx, UV_RESULT) != LUA_TNIL)
        return;
    lua_pop(L, 1);
    lua_createtable(L, 0, 8);
    int code = -1;   /* status unknown (reaped by someone else) */
    if (p->status != -1 && WIFSIGNALED(p->status)) {
        code = 128 + WTERMSIG(p->status);
        lua_pushinteger(L, WTERMSIG(p->status));
        lua_setfield(L, -2, "signal");
    } else if (p->status != -1) {
        code = WEXITSTATUS(p->status);
    }
    lua_pushinteger(L, code);
    lua_setfield(L, -2, "exit");
    for (int i = 0; i < 2; i++) {
        struct stream *s = &p->out[i];
        /* a result whose building was cut short (no memory) after its
         * strings took the bytes: they are gone, and it says so */
        if (s->handed)
            s->truncated = 1;
        s->handed = s->cap.len > 0;
        hcp_strbuf_push(L, &s->cap);   /* the buffer itself: no copy */
        lua_setfield(L, -2, names[i]);
    }
    setfield_bool(L, "stdout_truncated", p->out[0].truncated);
    setfield_bool(L, "stderr_truncated", p->out[1].truncated);
    setfield_bool(L, "timed_out", p->timed_out);
    lua_pushnumber(L, (lua_Number)(p->t_end - p->t0) / 1e6);
    lua_setfield(L, -2, "ms");
    push_usage(L, &p->usage);
    lua_setfield(L, -2, "usage");
    setfield_bool(L, "captured", p->capture);
    if (p->spawn_step != -1) {   /* async: the child failed before exec */
        hcp_push_spawn_error(L, p);
        lua_setfield(L, -2, "spawn_error");
        setfield_int(L, "errno", p->spawn_err);
    }
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, idx, UV_RESULT);
}

/* Optional timeout (ms) at idx as an absolute deadline. */
static int64_t opt_deadline(lua_State *L, int idx)
{
    if (lua_isnoneornil(L, idx))
        return NEVER;
    lua_Number ms = luaL_checknumber(L, idx);
    luaL_argcheck(L, ms >= 0, idx, "timeout must be a non-negative number");
    if (ms > 1e12)   /* decades: as good as never, and no int64 overflow */
        return NEVER;
    return hcp_now_ns() + (int64_t)(ms * 1e6);
}

static void check_open(lua_State *L, proc_t *p)
{
    if (p->state == S_CLOSED && !has_result(L, 1))
        luaL_error(L, "attempt to use a closed process");
}

static int p_pid(lua_State *L)
{
    lua_pushinteger(L, checkproc(L, 1)->pid);
    return 1;
}

static int p_wait(lua_State *L)
{
    proc_t *p = checkproc(L, 1);
    int64_t deadline = opt_deadline(L, 2);
    check_open(L, p);
    if (p->state == S_RUNNING || p->state == S_DRAINING) {
        int err = hcp_proc_drive(L, &p, 1, 1, deadline, 0, NULL, 0);
        if (err == EINTR) {
            luaL_pushfail(L);
            lua_pushliteral(L, "interrupted");
            lua_pushinteger(L, EINTR);
            return 3;
        }
        if (err)
            return hcp_push_oserror(L, err, "spawn: poll");
    }
    if (p->state == S_RUNNING || p->state == S_DRAINING) {
        luaL_pushfail(L);
        lua_pushliteral(L, "timeout");
        return 2;
    }
    push_result(L, 1, p);
    return 1;
}

static int p_done(lua_State *L)
{
    proc_t *p = checkproc(L, 1);
    if (p->state == S_RUNNING || p->state == S_DRAINING) {
        int err = hcp_proc_drive(L, &p, 1, 1, hcp_now_ns(), 0, NULL, 0);   /* one non-blocking pass */
        if (err)
            return hcp_push_oserror(L, err, "spawn: poll");
    }
    if (p->state == S_DONE)
        push_result(L, 1, p);
    lua_pushboolean(L, p->state == S_DONE || has_result(L, 1));
    return 1;
}

static const struct { int sig; const char *name; } signals[] = {
    { SIGHUP, "HUP" }, { SIGINT, "INT" }, { SIGQUIT, "QUIT" }, { SIGILL, "ILL" },
    { SIGTRAP, "TRAP" }, { SIGABRT, "ABRT" }, { SIGBUS, "BUS" }, { SIGFPE, "FPE" },
    { SIGKILL, "KILL" }, { SIGUSR1, "USR1" }, { SIGSEGV, "SEGV" },
    { SIGUSR2, "USR2" }, { SIGPIPE, "PIPE" }, { SIGALRM, "ALRM" },
    { SIGTERM, "TERM" }, { SIGSTKFLT, "STKFLT" }, { SIGCHLD, "CHLD" },
    { SIGCONT, "CONT" }, { SIGSTOP, "STOP" }, { SIGTSTP, "TSTP" },
    { SIGTTIN, "TTIN" }, { SIGTTOU, "TTOU" }, { SIGURG, "URG" },
    { SIGXCPU, "XCPU" }, { SIGXFSZ, "XFSZ" }, { SIGVTALRM, "VTALRM" },
    { SIGPROF, "PROF" }, { SIGWINCH, "WINCH" }, { SIGIO, "IO" },
    { SIGPWR, "PWR" }, { SIGSYS, "SYS" },
};
#define NSIGNALS (sizeof signals / sizeof signals[0])

static int p_kill(lua_State *L)
{
    proc_t *p = checkproc(L, 1);
    int sig = SIGKILL;
    if (lua_type(L, 2) == LUA_TSTRING) {
        const char *name = lua_tostring(L, 2);
        size_t i;
        if (strncmp(name, "SIG", 3) == 0)
            name += 3;
        for (i = 0; i < NSIGNALS && strcmp(signals[i].name, name) != 0; i++)
            ;
        luaL_argcheck(L, i < NSIGNALS, 2, "unknown signal name");
        sig = signals[i].sig;
    } else if (!lua_isnoneornil(L, 2)) {
        lua_Integer n = luaL_checkinteger(L, 2);
        luaL_argcheck(L, n >= 0 && n < NSIG, 2, "signal number out of range");
        sig = (int)n;
    }
    if (p->state != S_RUNNING) {
        luaL_pushfail(L);
        lua_pushliteral(L, "spawn: process already reaped");
        lua_pushinteger(L, ESRCH);
        return 3;
    }
    p->signalled = 1;   /* whatever it does, its network namespace is not reused */
    if (killpg(p->pid, sig) < 0)
        return hcp_push_oserror(L, errno, "spawn: kill");
    lua_pushboolean(L, 1);
    return 1;
}

/* proc:take() -> stdout_chunk|nil, stderr_chunk|nil: what a streaming
 * proc received since the last take, as read. */
static int p_take(lua_State *L)
{
    proc_t *p = checkproc(L, 1);
    for (int i = 0; i < 2; i++) {
        struct stream *s = &p->out[i];
        if (s->plen > 0)
            lua_pushlstring(L, s->pend, s->plen);
        else
            lua_pushnil(L);
        s->plen = 0;
        if (s->pcap > ((size_t)1 << 22)) {   /* a burst grew it: give it back */
            free(s->pend);
            s->pend = NULL;
            s->pcap = 0;
        }
    }
    p->got_output = 0;
    return 2;
}

/* proc:next_ms() -> milliseconds until the proc's next timer event, or nil
 * (none: only its descriptors can wake it). For event loops that arm one
 * timer for all procs. */
static int p_next_ms(lua_State *L)
{
    proc_t *p = checkproc(L, 1);
    int64_t now = hcp_now_ns(), t = hcp_proc_next(p, now);
    if (t == NEVER)
        return luaL_pushfail(L), 1;
    lua_pushnumber(L, t <= now ? 0 : (lua_Number)(t - now) / 1e6);
    return 1;
}

/* proc:fds() -> the descriptors the proc is waiting on (stdout, stderr,
 * stdin, pidfd, the exec report, hcp-init's end report), for registering
 * with an event loop. */
static int p_fds(lua_State *L)
{
    proc_t *p = checkproc(L, 1);
    int fds[6] = { p->out[0].fd, p->out[1].fd, p->in_fd, p->pidfd, p->report_fd,
                   p->state == S_RUNNING ? p->status_fd : -1 }, k = 0;
    lua_createtable(L, 6, 0);
    for (int i = 0; i < 6; i++)
        if (fds[i] >= 0) {
            lua_pushinteger(L, fds[i]);
            lua_rawseti(L, -2, ++k);
        }
    return 1;
}

/* proc:nsfd(kind) -> a namespace of the running child (kind: "net",
 * "user", "ipc", "mnt", "pid", "uts"), held open: for a later spawn's
 * isolation.netns / userns = nsfd (the child is ours and unreaped, so the
 * pid names it). With pidns, the intermediate's: its network, user and IPC
 * namespaces are the program's. */
static int p_nsfd(lua_State *L)
{
    static const char *const kinds[] = { "net", "user", "ipc", "mnt", "pid", "uts", NULL };
    proc_t *p = checkproc(L, 1);
    const char *kind = kinds[luaL_checkoption(L, 2, NULL, kinds)];
    if (p->state != S_RUNNING)
        return luaL_pushfail(L), lua_pushliteral(L, "spawn: nsfd: the process has ended"),
               lua_pushinteger(L, ESRCH), 3;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/ns/%s", (long)p->pid, kind);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hcp_push_oserror(L, errno, "spawn: nsfd: %s", path);
    hcp_push_nsfd(L, fd);
    return 1;
}

static int p_gc(lua_State *L)
{
    hcp_proc_release(checkproc(L, 1));
    return 0;
}

/* extras at idx: an array of pollables (hcp_pollable_at), into x. */
static int collect_extras(lua_State *L, int idx, struct hcp_pollable *x)
{
    if (lua_isnoneornil(L, idx))
        return 0;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Unsigned len = lua_rawlen(L, idx);
    luaL_argcheck(L, len <= HCP_POLLABLE_MAX, idx, "too many extras");
    for (lua_Unsigned i = 1; i <= len; i++) {
        lua_rawgeti(L, idx, (lua_Integer)i);
        x[i - 1] = hcp_pollable_at(L, -1);
        if (!x[i - 1].ops)
            luaL_error(L, "drive: extras[%d] is not a pollable", (int)i);
        lua_pop(L, 1);   /* pinned by the caller's array, kept below */
    }
    return (int)len;
}

/* core.wait_any(procs, timeout_ms) -> array of the finished procs;
 * core.drive(procs, timeout_ms [, extras]) the same, but it also returns
 * (after one pass) when a streaming proc received output, for proc:take(),
 * or when an extra (a pollable) asked for it. */
static int drive_procs(lua_State *L, int on_output)
{
    struct hcp_pollable extras[HCP_POLLABLE_MAX];
    luaL_checktype(L, 1, LUA_TTABLE);
    int64_t deadline = opt_deadline(L, 2);
    int nextra = on_output ? collect_extras(L, 3, extras) : 0;   /* pinned by arg 3 */
    lua_Unsigned len = lua_rawlen(L, 1);
    luaL_argcheck(L, len <= 65536, 1, "too many procs");
    int n = (int)len;
    proc_t **ps = lua_newuserdatauv(L, sizeof *ps * (n ? (size_t)n : 1), 0);
    lua_createtable(L, n, 0);   /* keeps the procs alive whatever happens to arg 1 */
    int keep = lua_gettop(L);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 1, i + 1);
        ps[i] = luaL_testudata(L, -1, PROC_MT);
        if (!ps[i])
            return luaL_error(L, "wait_any: procs[%d] is not a proc", i + 1);
        if (ps[i]->state == S_CLOSED && !has_result(L, -1))
            return luaL_error(L, "wait_any: procs[%d] is closed", i + 1);
        lua_rawseti(L, keep, i + 1);
    }
    if (n > 0 || nextra > 0) {
        int err = hcp_proc_drive(L, ps, n, 1, deadline, on_output, extras, nextra);
        if (err && err != EINTR)   /* interrupted: report what has finished */
            return hcp_push_oserror(L, err, "spawn: poll");
    }
    lua_newtable(L);
    for (int i = 0, k = 0; i < n; i++) {
        if (ps[i]->state != S_DONE && ps[i]->state != S_CLOSED)
            continue;
        lua_rawgeti(L, keep, i + 1);
        push_result(L, -1, ps[i]);   /* cache it now: a later __close frees the buffers */
        lua_pop(L, 1);
        lua_rawseti(L, -2, ++k);
    }
    return 1;
}

static int l_wait_any(lua_State *L)
{
    return drive_procs(L, 0);
}

/* core.reap_late(): waits for and reaps the children of calls that ended
 * on hcp-init's report and were still exiting (hcp_reap_late): the
 * runtime's close leaves none. */
static int l_reap_late(lua_State *L)
{
    (void)L;
    hcp_reap_late(1);
    return 0;
}

static int l_drive(lua_State *L)
{
    return drive_procs(L, 1);
}

static int l_signame(lua_State *L)
{
    lua_Integer n = luaL_checkinteger(L, 1);
    for (size_t i = 0; i < NSIGNALS; i++)
        if (signals[i].sig == n) {
            lua_pushfstring(L, "SIG%s", signals[i].name);
            return 1;
        }
    lua_pushfstring(L, "SIG%I", n);
    return 1;
}

/* ---- namespace descriptors ----------------------------------------------- */

#define NSFD_MT "hcp.nsfd"

void hcp_push_nsfd(lua_State *L, int fd)
{
    int *u = lua_newuserdatauv(L, sizeof *u, 0);
    *u = fd;
    luaL_setmetatable(L, NSFD_MT);
}

int hcp_nsfd_get(lua_State *L, int idx)
{
    int *u = luaL_testudata(L, idx, NSFD_MT);
    if (!u || *u < 0)
        return -1;
    return *u;
}

/* nsfd:fd() -> the descriptor (nil once closed) */
static int ns_fd(lua_State *L)
{
    int *u = luaL_checkudata(L, 1, NSFD_MT);
    if (*u < 0)
        return luaL_pushfail(L), 1;
    lua_pushinteger(L, *u);
    return 1;
}

static int ns_gc(lua_State *L)
{
    hcp_closefd(luaL_checkudata(L, 1, NSFD_MT));
    return 0;
}

void hcp_register_proc(lua_State *L)
{
    static const luaL_Reg ns_meta[] = { { "__gc", ns_gc }, { "__close", ns_gc }, { NULL, NULL } };
    static const luaL_Reg ns_methods[] = { { "fd", ns_fd }, { "close", ns_gc }, { NULL, NULL } };
    luaL_newmetatable(L, NSFD_MT);
    luaL_setfuncs(L, ns_meta, 0);
    luaL_newlib(L, ns_methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    static const luaL_Reg meta[] = {
        { "__gc", p_gc }, { "__close", p_gc }, { NULL, NULL },
    };
    static const luaL_Reg methods[] = {
        { "pid", p_pid }, { "wait", p_wait }, { "kill", p_kill },
        { "done", p_done }, { "take", p_take }, { "next_ms", p_next_ms },
        { "fds", p_fds }, { "nsfd", p_nsfd }, { "close", p_gc }, { NULL, NULL },
    };
    static const luaL_Reg funcs[] = {
        { "wait_any", l_wait_any }, { "drive", l_drive }, { "signame", l_signame },
        { "reap_late", l_reap_late },
        { NULL, NULL },
    };
    luaL_newmetatable(L, PROC_MT);
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_setfuncs(L, funcs, 0);
}
