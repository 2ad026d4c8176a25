/* spawn.c — core.spawn, the proc handle and core.wait_any. Options are read
 * and refused before anything is acquired; every resource lives in the proc
 * userdata from the moment it exists, so proc_release is the one cleanup path
 * (error returns, __gc and __close alike). One poll loop drives the pipes,
 * the pidfds and the timers of any number of procs. */
#include "hcp_core.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Our own calls get their formats checked; the shared header has no attribute. */
int hcp_push_oserror(lua_State *L, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define PROC_MT "hcp.proc"
#define MS ((int64_t)1000000)
#define NEVER INT64_MAX
#define DRAIN_NS (250 * MS)     /* pipe draining after the child was reaped */
#define TICK_NS (10 * MS)       /* exit polling when there is no pidfd */
#define DEFAULT_MAX_OUTPUT ((lua_Integer)16 << 20)

enum { S_CLOSED, S_RUNNING, S_DRAINING, S_DONE };
enum { UV_STDIN = 1, UV_RESULT = 2 };
enum { T_EXE, T_IN, T_OUT, T_ERR, NTMP };   /* fds only needed until fork */
enum { SLOT_OUT, SLOT_ERR, SLOT_IN, SLOT_PID };

struct stream { int fd; char *buf; size_t len, cap; int truncated; int tee; };

typedef struct {
    int state;
    pid_t pid;                 /* also the process-group id (setsid) */
    int pidfd, in_fd;
    int tmp[NTMP];
    struct stream out[2];      /* stdout, stderr: parent's read ends */
    const char *in_data;       /* pinned by the UV_STDIN uservalue */
    size_t in_len, in_off, max_output;
    int64_t t0, t_end, deadline, grace, kill_at, drain_end;
    int timed_out, term_sent, kill_sent;
    int status;                /* from waitpid; -1 if unknown */
} proc_t;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* cannot fail for this clock */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void closefd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);   /* nothing to do about an error on close here */
        *fd = -1;
    }
}

static void proc_release(proc_t *p)
{
    if (p->state == S_RUNNING) {
        (void)killpg(p->pid, SIGKILL);   /* ESRCH: the group is gone already */
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    closefd(&p->pidfd);
    closefd(&p->in_fd);
    for (int i = 0; i < NTMP; i++)
        closefd(&p->tmp[i]);
    for (int i = 0; i < 2; i++) {
        closefd(&p->out[i].fd);
        free(p->out[i].buf);
        p->out[i].buf = NULL;
    }
    p->state = S_CLOSED;
}

/* ---- the I/O engine ----------------------------------------------------- */

/* The direct child has exited, seen without reaping it: what is left of its
 * group is killed while the zombie still pins the group id, then it is reaped
 * and the pipes get DRAIN_NS more to deliver what was written. */
static void proc_check_exit(proc_t *p)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
        if (errno == EINTR)
            return;
        /* ECHILD: reaped behind our back (SIGCHLD ignored by the host
         * program). The group id is no longer pinned: do not signal it. */
        p->status = -1;
    } else if (si.si_pid == 0) {
        return;
    } else {
        int st;
        pid_t r;
        (void)killpg(p->pid, SIGKILL);   /* ESRCH: nothing left in the group */
        while ((r = waitpid(p->pid, &st, 0)) < 0 && errno == EINTR)
            ;
        p->status = r < 0 ? -1 : st;
    }
    p->t_end = now_ns();
    p->state = S_DRAINING;
    p->drain_end = p->t_end + DRAIN_NS;
    closefd(&p->in_fd);
    closefd(&p->pidfd);
}

static int grow(struct stream *s, size_t max)
{
    if (s->cap > s->len)
        return 0;
    size_t cap = s->cap ? s->cap * 2 : 65536;
    if (cap > max)
        cap = max;
    char *b = realloc(s->buf, cap);
    if (!b)
        return -1;
    s->buf = b;
    s->cap = cap;
    return 0;
}

/* One write with SIGPIPE blocked, and a SIGPIPE this write raised consumed,
 * so a reader that went away cannot kill the runtime and no process-wide
 * disposition changes: EPIPE comes back as an error like any other.
 * Returns what write returned; *err holds its errno. */
static ssize_t write_nopipe(int fd, const char *buf, size_t len, int *err)
{
    sigset_t pipeset, old, pending;
    struct timespec zero = { 0, 0 };
    ssize_t n;
    sigemptyset(&pipeset);
    sigaddset(&pipeset, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipeset, &old);   /* valid args: cannot fail */
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    do
        n = write(fd, buf, len);
    while (n < 0 && errno == EINTR);
    *err = errno;
    if (n < 0 && *err == EPIPE && !was_pending)
        while (sigtimedwait(&pipeset, NULL, &zero) < 0 && errno == EINTR)
            ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return n;
}

/* Copies a chunk to the caller's tee fd as it arrives (hcp run passes output
 * through this way, so the child never holds the caller's terminal). A
 * reader that went away, or any other error, ends the copying, never the
 * capture; an fd that is non-blocking is waited on. */
static void tee_write(struct stream *s, const char *buf, size_t len)
{
    while (len > 0) {
        int err;
        ssize_t w = write_nopipe(s->tee, buf, len, &err);
        if (w > 0) {
            buf += w;
            len -= (size_t)w;
        } else if (w < 0 && err == EAGAIN) {
            struct pollfd pf = { .fd = s->tee, .events = POLLOUT, .revents = 0 };
            if (poll(&pf, 1, 1000) <= 0) {
                s->tee = -1;
                return;
            }
        } else {
            s->tee = -1;
            return;
        }
    }
}

/* Reads until the pipe is empty; past max_output (or when memory runs out)
 * bytes are read and dropped, so the child never blocks on a full pipe. */
static void read_stream(proc_t *p, struct stream *s)
{
    char sink[16384];
    for (int i = 0; i < 64; i++) {   /* bounded: other fds get their turn */
        char *dst = sink;
        size_t room = sizeof sink;
        if (s->len < p->max_output && grow(s, p->max_output) == 0) {
            dst = s->buf + s->len;
            room = s->cap - s->len;
        }
        ssize_t n = read(s->fd, dst, room);
        if (n > 0) {
            if (s->tee >= 0)
                tee_write(s, dst, (size_t)n);
            if (dst == sink)
                s->truncated = 1;
            else
                s->len += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return;
        } else {
            closefd(&s->fd);   /* EOF (or a read error a pipe does not have) */
            return;
        }
    }
}

/* A child that closes its stdin early only ends the writing (EPIPE). */
static void write_stdin(proc_t *p)
{
    int err;
    ssize_t n = write_nopipe(p->in_fd, p->in_data + p->in_off, p->in_len - p->in_off, &err);
    if (n > 0)
        p->in_off += (size_t)n;
    if (p->in_off == p->in_len || (n < 0 && err != EAGAIN))
        closefd(&p->in_fd);
}

/* Timers and state changes that need no fd event. */
static void proc_step(proc_t *p, int64_t now)
{
    if (p->state == S_RUNNING && p->pidfd < 0)
        proc_check_exit(p);
    if (p->state == S_RUNNING && !p->term_sent && now >= p->deadline) {
        (void)killpg(p->pid, SIGTERM);   /* ESRCH: exiting already */
        p->timed_out = p->term_sent = 1;
        p->kill_at = now + p->grace;
    }
    if (p->state == S_RUNNING && p->term_sent && !p->kill_sent && now >= p->kill_at) {
        (void)killpg(p->pid, SIGKILL);
        p->kill_sent = 1;
    }
    if (p->state == S_DRAINING &&
        ((p->out[0].fd < 0 && p->out[1].fd < 0) || now >= p->drain_end)) {
        closefd(&p->out[0].fd);
        closefd(&p->out[1].fd);
        p->state = S_DONE;
    }
}

static int64_t proc_next(const proc_t *p, int64_t now)
{
    int64_t t = NEVER;
    if (p->state == S_RUNNING) {
        if (p->pidfd < 0)
            t = now + TICK_NS;
        if (!p->term_sent && p->deadline < t)
            t = p->deadline;
        else if (p->term_sent && !p->kill_sent && p->kill_at < t)
            t = p->kill_at;
    } else if (p->state == S_DRAINING) {
        t = p->drain_end;
    }
    return t;
}

static int *slot_fd(proc_t *p, int slot)
{
    switch (slot) {
    case SLOT_OUT: return &p->out[0].fd;
    case SLOT_ERR: return &p->out[1].fd;
    case SLOT_IN:  return &p->in_fd;
    default:       return &p->pidfd;
    }
}

struct ref { proc_t *p; int slot; };

/* Drives n procs until `need` of them are done or `deadline` has passed
 * (after at least one poll pass). Returns 0 or poll's errno. */
static int drive(lua_State *L, proc_t **ps, int n, int need, int64_t deadline)
{
    struct pollfd *pfd = lua_newuserdatauv(L, sizeof *pfd * 4 * (size_t)n, 0);
    struct ref *refs = lua_newuserdatauv(L, sizeof *refs * 4 * (size_t)n, 0);
    int polled = 0, err = 0;
    for (;;) {
        int64_t now = now_ns(), next = deadline;
        int done = 0, nf = 0;
        for (int i = 0; i < n; i++) {
            proc_step(ps[i], now);
            if (ps[i]->state == S_DONE || ps[i]->state == S_CLOSED)
                done++;
            else if (proc_next(ps[i], now) < next)
                next = proc_next(ps[i], now);
        }
        if (done >= need || (polled && now >= deadline))
            break;
        for (int i = 0; i < n; i++)
            for (int s = SLOT_OUT; s <= SLOT_PID; s++) {
                int fd = *slot_fd(ps[i], s);
                if (fd < 0)
                    continue;
                pfd[nf].fd = fd;
                pfd[nf].events = s == SLOT_IN ? POLLOUT : POLLIN;
                pfd[nf].revents = 0;
                refs[nf].p = ps[i];
                refs[nf++].slot = s;
            }
        int64_t wait_ms = next == NEVER ? -1 : next <= now ? 0 : (next - now + MS - 1) / MS;
        int r = poll(pfd, (nfds_t)nf, wait_ms > INT_MAX ? INT_MAX : (int)wait_ms);
        /* A signal with a handler (Ctrl-C in the REPL) returns to Lua, whose
         * hook may then raise; callers that only want the result wait again. */
        if (r < 0) {
            err = errno;
            break;
        }
        polled = 1;
        for (int k = 0; k < nf && r > 0; k++) {
            proc_t *p = refs[k].p;
            /* skip an fd a previous event of this pass closed */
            if (!pfd[k].revents || *slot_fd(p, refs[k].slot) != pfd[k].fd)
                continue;
            r--;
            if (refs[k].slot == SLOT_IN)
                write_stdin(p);
            else if (refs[k].slot == SLOT_PID)
                proc_check_exit(p);
            else
                read_stream(p, &p->out[refs[k].slot]);
        }
    }
    lua_pop(L, 2);   /* the scratch arrays */
    return err;
}

/* ---- results and the proc methods --------------------------------------- */

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

/* Pushes the result of a done (or closed) proc at idx, building and caching
 * it the first time; the output buffers are freed once copied. */
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
        lua_pushlstring(L, p->out[i].buf ? p->out[i].buf : "", p->out[i].len);
        lua_setfield(L, -2, names[i]);
    }
    setfield_bool(L, "stdout_truncated", p->out[0].truncated);
    setfield_bool(L, "stderr_truncated", p->out[1].truncated);
    setfield_bool(L, "timed_out", p->timed_out);
    lua_pushnumber(L, (lua_Number)(p->t_end - p->t0) / 1e6);
    lua_setfield(L, -2, "ms");
    lua_pushvalue(L, -1);
    lua_setiuservalue(L, idx, UV_RESULT);
    for (int i = 0; i < 2; i++) {
        free(p->out[i].buf);
        p->out[i].buf = NULL;
        p->out[i].len = p->out[i].cap = 0;
    }
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
    return now_ns() + (int64_t)(ms * 1e6);
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
        int err = drive(L, &p, 1, 1, deadline);
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
        int err = drive(L, &p, 1, 1, now_ns());   /* one non-blocking pass */
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
    if (killpg(p->pid, sig) < 0)
        return hcp_push_oserror(L, errno, "spawn: kill");
    lua_pushboolean(L, 1);
    return 1;
}

static int p_gc(lua_State *L)
{
    proc_release(checkproc(L, 1));
    return 0;
}

/* core.wait_any(procs, timeout_ms) -> array of the finished procs */
static int l_wait_any(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int64_t deadline = opt_deadline(L, 2);
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
    if (n > 0) {
        int err = drive(L, ps, n, 1, deadline);
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

/* ---- core.spawn --------------------------------------------------------- */

static const char *const known_opts[] = {
    "path", "beneath", "argv", "env", "cwd", "stdin", "max_output",
    "timeout_ms", "kill_grace_ms", "tee_stdout", "tee_stderr", NULL,
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

static int nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
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
        if (nonblock(p->in_fd) < 0)
            return "fcntl";
    }
    for (int i = 0; i < 2; i++) {
        if (pipe2(fds, O_CLOEXEC) < 0)
            return "pipe";
        p->out[i].fd = fds[0];
        p->tmp[T_OUT + i] = fds[1];
        /* 1 MiB pipes roughly double throughput; refused past pipe-max-size
         * or the per-user pipe quota, and the default size works, slower. */
        (void)fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
        if (nonblock(fds[0]) < 0)
            return "fcntl";
    }
    return NULL;
}

static int l_spawn(lua_State *L)
{
    size_t plen, blen = 0, clen, in_len = 0;
    luaL_checktype(L, 1, LUA_TTABLE);
    check_known(L);
    const char *path = opt_path(L, "path", 1, &plen);
    const char *beneath = opt_path(L, "beneath", 0, &blen);
    const char *cwd = opt_path(L, "cwd", 1, &clen);
    int t = lua_getfield(L, 1, "stdin");
    int in_idx = lua_gettop(L);
    if (t != LUA_TNIL && t != LUA_TSTRING)
        luaL_error(L, "spawn: option 'stdin' must be a string");
    const char *in = t == LUA_TSTRING ? lua_tolstring(L, in_idx, &in_len) : NULL;
    lua_Number max_out = opt_num(L, "max_output", (lua_Number)DEFAULT_MAX_OUTPUT, 1);
    lua_Number timeout = opt_num(L, "timeout_ms", -1, 0);
    lua_Number grace = opt_num(L, "kill_grace_ms", 500, 0);
    int tee[2] = { opt_fd(L, "tee_stdout"), opt_fd(L, "tee_stderr") };
    const char *nul = strlen(path) != plen ? "path"
                    : beneath && strlen(beneath) != blen ? "beneath"
                    : strlen(cwd) != clen ? "cwd" : NULL;
    if (nul) {
        lua_pushfstring(L, "spawn: %s contains a NUL byte", nul);
        return refuse(L);
    }
    struct hcp_launch l;
    if (!(l.argv = build_argv(L)) || !(l.envp = build_envp(L)))
        return refuse(L);
    l.cwd = cwd;

    proc_t *p = lua_newuserdatauv(L, sizeof *p, 2);
    memset(p, 0, sizeof *p);
    p->state = S_CLOSED;   /* safe to collect before anything is acquired */
    p->pidfd = p->in_fd = p->out[0].fd = p->out[1].fd = -1;
    p->out[0].tee = tee[0];   /* the caller's fds: never closed here */
    p->out[1].tee = tee[1];
    for (int i = 0; i < NTMP; i++)
        p->tmp[i] = -1;
    luaL_setmetatable(L, PROC_MT);
    int pidx = lua_gettop(L);
    if (in) {
        lua_pushvalue(L, in_idx);
        lua_setiuservalue(L, pidx, UV_STDIN);
        p->in_data = in;
        p->in_len = in_len;
    }
    p->max_output = (size_t)max_out;

    int why, err;
    err = hcp_exe_open(path, beneath, &p->tmp[T_EXE], &l.script, &why);
    if (err) {
        proc_release(p);
        if (why == EXE_NOTEXEC)
            return luaL_pushfail(L), lua_pushfstring(L, "spawn: %s: not a regular executable file", path),
                   lua_pushinteger(L, err), 3;
        if (why == EXE_ESCAPES)
            return luaL_pushfail(L), lua_pushfstring(L, "spawn: %s: escapes %s", path, beneath),
                   lua_pushinteger(L, err), 3;
        return hcp_push_oserror(L, err, "spawn: %s", path);
    }
    const char *step = open_stdio(p, in != NULL);
    if (step) {
        err = errno;
        proc_release(p);
        return hcp_push_oserror(L, err, "spawn: %s", step);
    }
    l.exe_fd = p->tmp[T_EXE];
    l.in_fd = p->tmp[T_IN];
    l.out_fd = p->tmp[T_OUT];
    l.err_fd = p->tmp[T_ERR];
    p->t0 = now_ns();
    pid_t pid = hcp_launch(&l, &err, &step);
    for (int i = 0; i < NTMP; i++)
        closefd(&p->tmp[i]);
    if (pid < 0) {
        proc_release(p);
        return hcp_push_oserror(L, err, "spawn: %s", step);
    }
    p->pid = pid;
    p->state = S_RUNNING;
    /* Without a pidfd (ENOSYS before 5.3, or EMFILE) exits are polled every
     * TICK_NS instead; nothing else changes. */
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (p->pidfd < 0)
        p->pidfd = -1;
    if (in && in_len == 0)
        closefd(&p->in_fd);
    p->deadline = timeout < 0 ? NEVER : p->t0 + (int64_t)(timeout * 1e6);
    p->grace = (int64_t)(grace * 1e6);
    p->kill_at = NEVER;
    lua_pushvalue(L, pidx);
    return 1;
}

void hcp_register_spawn(lua_State *L)
{
    static const luaL_Reg meta[] = {
        { "__gc", p_gc }, { "__close", p_gc }, { NULL, NULL },
    };
    static const luaL_Reg methods[] = {
        { "pid", p_pid }, { "wait", p_wait }, { "kill", p_kill },
        { "done", p_done }, { NULL, NULL },
    };
    static const luaL_Reg funcs[] = {
        { "spawn", l_spawn }, { "wait_any", l_wait_any },
        { "signame", l_signame }, { NULL, NULL },
    };
    luaL_newmetatable(L, PROC_MT);
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_setfuncs(L, funcs, 0);
}
