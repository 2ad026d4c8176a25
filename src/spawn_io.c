/* spawn_io.c — the I/O engine of core.spawn: one poll loop drives the pipes,
 * the pidfds and the timers of any number of procs. A proc's resources are
 * released in one place, hcp_proc_release (error returns, __gc and __close
 * alike). */
#include "spawn.h"
#include "nopipe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DRAIN_NS (250 * MS)     /* pipe draining after the child was reaped */
#define TICK_NS (10 * MS)       /* exit polling when there is no pidfd */

enum { SLOT_OUT, SLOT_ERR, SLOT_IN, SLOT_PID, SLOT_REPORT, SLOT_STATUS, NSLOTS };

int64_t hcp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* cannot fail for this clock */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void hcp_closefd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);   /* nothing to do about an error on close here */
        *fd = -1;
    }
}

/* The children that are only exiting — those of a call that ended on
 * hcp-init's report (hcp-init, killed then, or the intermediate that reaps
 * it), the netns pool's holders whose stdin was closed: nothing of a call
 * is left in them, so they are reaped later rather than waited for in the
 * loop — without a lock held across a wait, at each drive pass,
 * and all of them at hcp_reap_late(1) (the runtime's close, the end of `hcp
 * run`). Not tied to the proc's release: a proc kept for its result keeps
 * no zombie. A pid stays ours until reaped, so none of them names another
 * process. */
#define MAX_LATE 64
static pthread_mutex_t late_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t late[MAX_LATE];
static atomic_int nlate;

static int reaped(pid_t pid, int block)
{
    pid_t r;
    while ((r = waitpid(pid, NULL, block ? 0 : WNOHANG)) < 0 && errno == EINTR)
        ;
    return r != 0;   /* reaped, or not ours any more (ECHILD: reaped behind our back) */
}

void hcp_reap_later(pid_t pid)
{
    pthread_mutex_lock(&late_lock);
    int at = atomic_load(&nlate);
    if (at < MAX_LATE) {
        late[at] = pid;
        atomic_store(&nlate, at + 1);
    }
    pthread_mutex_unlock(&late_lock);
    if (at >= MAX_LATE)
        (void)reaped(pid, 1);   /* full: this one is waited for */
}

void hcp_reap_late(int block)
{
    if (atomic_load(&nlate) == 0)
        return;
    pid_t mine[MAX_LATE];
    int n = 0;
    pthread_mutex_lock(&late_lock);
    for (int i = 0; i < atomic_load(&nlate); i++)
        mine[n++] = late[i];
    atomic_store(&nlate, 0);
    pthread_mutex_unlock(&late_lock);
    for (int i = 0; i < n; i++)
        if (!reaped(mine[i], block))
            hcp_reap_later(mine[i]);
}

void hcp_proc_release(proc_t *p)
{
    if (p->state == S_RUNNING) {
        (void)killpg(p->pid, SIGKILL);   /* ESRCH: the group is gone already */
        (void)reaped(p->pid, 1);
    }
    hcp_closefd(&p->pidfd);
    hcp_closefd(&p->in_fd);
    hcp_closefd(&p->netns.net);
    hcp_closefd(&p->netns.user);
    hcp_closefd(&p->status_fd);
    hcp_closefd(&p->report_fd);
    for (int i = 0; i < NTMP; i++)
        hcp_closefd(&p->tmp[i]);
    for (int i = 0; i < 2; i++) {
        hcp_closefd(&p->out[i].fd);
        hcp_strbuf_free(&p->out[i].cap);
        free(p->out[i].pend);
        p->out[i].pend = NULL;
        p->out[i].plen = p->out[i].pcap = 0;
    }
    p->state = S_CLOSED;
}

/* ---- usage -------------------------------------------------------------- */

/* /proc/<pid>/io of the exited child, before it is reaped: its own I/O and
 * that of the descendants it reaped. Unreadable (another uid without
 * CAP_SYS_PTRACE, no procfs): left unknown. */
static void read_io(proc_t *p)
{
    char path[40];
    snprintf(path, sizeof path, "/proc/%ld/io", (long)p->pid);
    p->usage.have_io = hcp_read_io(path, &p->usage.io) == 0;
}

static void keep_rusage(proc_t *p, const struct rusage *ru)
{
    p->usage.user_us = (long long)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec;
    p->usage.sys_us = (long long)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec;
    p->usage.maxrss_kb = ru->ru_maxrss;
    p->usage.have_ru = 1;
}

/* ---- the I/O engine ----------------------------------------------------- */

/* netns = "pool": the call's namespace goes back only when the call ended
 * on its own (netns_pool.c says why that leaves nothing of it there). */
static void give_back_netns(proc_t *p)
{
    if (p->netns.net < 0)
        return;
    if (p->netns_reuse && p->status != -1 && WIFEXITED(p->status) && !p->term_sent && !p->kill_sent &&
        !p->signalled) {
        hcp_netns_give(p->netns, p->root);
        p->netns.net = p->netns.user = -1;
    }
    hcp_closefd(&p->netns.net);
    hcp_closefd(&p->netns.user);
}

/* async: the exec report as it comes. EOF: the program was exec'd; a
 * record: the step that failed (the child exits 127 then). Anything else
 * (a part of a record, a read error): its state is unknown, so it is
 * killed, and the spawn fails as "read". */
static void read_report(proc_t *p)
{
    for (;;) {
        ssize_t n = read(p->report_fd, (char *)&p->report + p->report_got,
                         sizeof p->report - (size_t)p->report_got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n > 0) {
            p->report_got += (int)n;
            if ((size_t)p->report_got < sizeof p->report)
                continue;
        }
        if (n > 0 && hcp_step_name(p->report.step)) {
            p->spawn_step = p->report.step;
            p->spawn_err = p->report.err;
            p->spawn_arg = hcp_step_has_arg(p->report.step) ? p->report.arg : -1;
        } else if (n != 0 || p->report_got > 0) {
            p->spawn_step = -2;   /* hcp_push_spawn_error: "read" */
            p->spawn_err = n < 0 ? errno : EIO;
            if (p->state == S_RUNNING)
                (void)killpg(p->pid, SIGKILL);
        } else if (p->netns_reuse && p->netns.net < 0 && p->state == S_RUNNING) {
            /* exec'd: its namespaces are made, and can be kept for the next */
            p->netns = hcp_netns_of(p->pid, !p->root);
        }
        hcp_closefd(&p->report_fd);
        return;
    }
}

/* hcp-init's report, when it has come (non-blocking; one write, so it is
 * whole or not there). Read once: after it, or EOF, the pipe is closed. */
static void read_end_report(proc_t *p)
{
    ssize_t n;
    while ((n = read(p->status_fd, &p->end, sizeof p->end)) < 0 && errno == EINTR)
        ;
    if (n < 0 && errno == EAGAIN)
        return;
    p->end_got = n == (ssize_t)sizeof p->end;
    hcp_closefd(&p->status_fd);
}

/* The end of a running child: no more input, no more exit polling, its
 * output drained for DRAIN_NS more. */
static void now_draining(proc_t *p)
{
    p->t_end = hcp_now_ns();
    p->state = S_DRAINING;
    p->drain_end = p->t_end + DRAIN_NS;
    hcp_closefd(&p->in_fd);
    hcp_closefd(&p->pidfd);
}

/* A `gone` report ends the call at once: the program and all it started
 * are dead and reaped. Our child is left to reap later (reap_later):
 * hcp-init, still exiting (the namespaces' teardown), is killed first —
 * whatever it would still do, it does not; an intermediate that passed the
 * report on is left to reap hcp-init and exit (killed, it would leave
 * hcp-init to whatever reaper is above us). The report has the usage of
 * what hcp-init reaped. */
static void end_on_report(proc_t *p)
{
    if (p->end.have_io) {
        p->usage.io = p->end.io;
        p->usage.have_io = 1;
    } else {
        read_io(p);
    }
    p->status = p->end.status;
    p->usage.user_us = p->end.user_us;
    p->usage.sys_us = p->end.sys_us;
    p->usage.maxrss_kb = p->end.maxrss_kb;
    p->usage.have_ru = 1;
    give_back_netns(p);
    if (!p->relayed)
        (void)killpg(p->pid, SIGKILL);   /* unreaped: the id is still ours */
    if (!reaped(p->pid, 0))
        hcp_reap_later(p->pid);
    now_draining(p);
}

static void status_ready(proc_t *p)
{
    read_end_report(p);
    if (p->end_got && p->end.gone && p->early_end && p->state == S_RUNNING)
        end_on_report(p);
}

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
        struct rusage ru;
        if (p->report_fd >= 0)   /* a failure was written before the exit */
            read_report(p);
        read_io(p);
        (void)killpg(p->pid, SIGKILL);   /* ESRCH: nothing left in the group */
        while ((r = wait4(p->pid, &st, 0, &ru)) < 0 && errno == EINTR)
            ;
        p->status = r < 0 ? -1 : st;
        if (r > 0)
            keep_rusage(p, &ru);
        /* hcp-init as our child reports how the program ended (it cannot
         * die of the program's signal itself) */
        if (r > 0 && !p->end_got && p->status_fd >= 0)
            read_end_report(p);
        if (r > 0 && p->end_got)
            p->status = p->end.status;
        hcp_closefd(&p->status_fd);
        give_back_netns(p);
    }
    now_draining(p);
}

/* Copies a chunk to the caller's tee fd as it arrives (hcp run passes output
 * through this way, so the child never holds the caller's terminal). A
 * reader that went away, or any other error, ends the copying, never the
 * capture; an fd that is non-blocking is waited on. */
static void tee_write(struct stream *s, const char *buf, size_t len)
{
    while (len > 0) {
        int err;
        ssize_t w = hcp_write_nopipe(s->tee, buf, len, &err);
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

/* Appends to the queue a streaming caller takes with proc:take(). A queue
 * that cannot grow drops nothing silently: the capture says truncated. */
static void queue(proc_t *p, struct stream *s, const char *buf, size_t len)
{
    if (s->plen + len > s->pcap) {
        size_t cap = s->pcap ? s->pcap : 65536;
        while (cap < s->plen + len)
            cap *= 2;
        char *b = realloc(s->pend, cap);
        if (!b) {
            s->truncated = 1;
            return;
        }
        s->pend = b;
        s->pcap = cap;
    }
    memcpy(s->pend + s->plen, buf, len);
    s->plen += len;
    p->got_output = 1;
}

/* Reads until the pipe is empty; past max_output (or when memory runs out,
 * or when the caller does not capture) bytes are read and dropped from the
 * capture, so the child never blocks on a full pipe. Each chunk also goes
 * to the tee fd and the streaming queue as it comes. */
static void read_stream(proc_t *p, struct stream *s)
{
    char sink[16384];
    for (int i = 0; i < 64; i++) {   /* bounded: other fds get their turn */
        char *dst = sink;
        size_t room = sizeof sink;
        /* one buffer per stream, doubled as it fills: past glibc's mmap
         * threshold realloc moves pages (mremap), it copies nothing.
         * (Offering it huge pages, MADV_HUGEPAGE, made a 256 MiB capture 2x
         * slower here: the faults then compact memory.) */
        struct hcp_strbuf *c = &s->cap;
        if (p->capture && hcp_strbuf_grow(c, p->max_output) == 0) {
            dst = hcp_strbuf_data(c) + c->len;
            room = c->cap - c->len;
        }
        ssize_t n = read(s->fd, dst, room);
        if (n > 0 && (size_t)n == room && !s->grown) {
            /* more than a read takes: a 1 MiB pipe roughly doubles the
             * throughput (refused past pipe-max-size or the per-user pipe
             * quota; the default size works, slower). Not made so at once:
             * most calls write little, and it costs a system call each. */
            s->grown = 1;
            (void)fcntl(s->fd, F_SETPIPE_SZ, 1 << 20);
        }
        if (n > 0) {
            if (s->tee >= 0)
                tee_write(s, dst, (size_t)n);
            if (p->streaming)
                queue(p, s, dst, (size_t)n);
            if (dst != sink)
                s->cap.len += (size_t)n;
            else if (p->capture)
                s->truncated = 1;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && errno == EAGAIN) {
            return;
        } else {
            hcp_closefd(&s->fd);   /* EOF (or a read error a pipe does not have) */
            return;
        }
        if (p->streaming && s->plen >= ((size_t)1 << 22))
            return;   /* 4 MiB queued: let the caller take it first */
    }
}

/* A child that closes its stdin early only ends the writing (EPIPE). */
static void write_stdin(proc_t *p)
{
    int err;
    ssize_t n = hcp_write_nopipe(p->in_fd, p->in_data + p->in_off, p->in_len - p->in_off, &err);
    if (n > 0)
        p->in_off += (size_t)n;
    if (p->in_off == p->in_len || (n < 0 && err != EAGAIN))
        hcp_closefd(&p->in_fd);
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
        hcp_closefd(&p->out[0].fd);
        hcp_closefd(&p->out[1].fd);
        p->state = S_DONE;
    }
}

int64_t hcp_proc_next(const proc_t *p, int64_t now)
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
    case SLOT_PID: return &p->pidfd;
    case SLOT_STATUS: return &p->status_fd;
    default:       return &p->report_fd;
    }
}

struct ref { proc_t *p; int slot; };

/* The extras' descriptors after the procs' in pfd (from index nf); their
 * count per extra in counts. Returns the new nf. */
static int fill_extras(const struct hcp_pollable *x, int nx, struct pollfd *pfd, int nf, int *counts)
{
    for (int i = 0; i < nx; i++) {
        int c = x[i].ops->fill ? x[i].ops->fill(x[i].self, pfd + nf, HCP_POLLABLE_FDS) : 0;
        counts[i] = c < 0 ? 0 : c > HCP_POLLABLE_FDS ? HCP_POLLABLE_FDS : c;
        nf += counts[i];
    }
    return nf;
}

/* The signals a wait takes: every asynchronous one. A handler (Ctrl-C in
 * hcp-lua or lua.c) only arms a hook that raises once control is back in
 * Lua; one that ran while the loop handled events, and the loop then
 * waited again, was lost until the next event — with a child that writes
 * without end, never. So asynchronous signals are blocked while the loop
 * works and taken only inside its wait (ppoll), which they end. */
static void async_signals(sigset_t *set)
{
    static const int sync[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT };
    sigfillset(set);
    for (size_t i = 0; i < sizeof sync / sizeof sync[0]; i++)
        sigdelset(set, sync[i]);
}

int hcp_proc_drive(lua_State *L, proc_t **ps, int n, int need, int64_t deadline,
                   int on_output, const struct hcp_pollable *extras, int nextra)
{
    size_t cap = NSLOTS * (size_t)n + (size_t)nextra * HCP_POLLABLE_FDS + 1;
    struct pollfd *pfd = lua_newuserdatauv(L, sizeof *pfd * cap, 0);
    struct ref *refs = lua_newuserdatauv(L, sizeof *refs * NSLOTS * ((size_t)n + 1), 0);
    int counts[HCP_POLLABLE_MAX];
    sigset_t block, open_mask;
    async_signals(&block);
    pthread_sigmask(SIG_BLOCK, &block, &open_mask);
    hcp_reap_late(0);
    int polled = 0, err = 0, wake = 0;
    for (;;) {
        int64_t now = hcp_now_ns(), next = deadline;
        int done = 0, nf = 0;
        for (int i = 0; i < n; i++) {
            proc_step(ps[i], now);
            if (ps[i]->state == S_DONE || ps[i]->state == S_CLOSED)
                done++;
            else if (hcp_proc_next(ps[i], now) < next)
                next = hcp_proc_next(ps[i], now);
        }
        for (int i = 0; i < nextra; i++) {
            int64_t t = extras[i].ops->next ? extras[i].ops->next(extras[i].self, now) : NEVER;
            if (t < next)
                next = t;
        }
        if (done >= need || (polled && now >= deadline) || wake)
            break;
        if (on_output && polled) {
            int any = 0;
            for (int i = 0; i < n; i++)
                any |= ps[i]->got_output;
            if (any)
                break;
        }
        for (int i = 0; i < n; i++)
            for (int s = SLOT_OUT; s < NSLOTS; s++) {
                int fd = *slot_fd(ps[i], s);
                if (fd < 0 || (s == SLOT_STATUS && ps[i]->state != S_RUNNING))
                    continue;
                pfd[nf].fd = fd;
                pfd[nf].events = s == SLOT_IN ? POLLOUT : POLLIN;
                pfd[nf].revents = 0;
                refs[nf].p = ps[i];
                refs[nf++].slot = s;
            }
        int nprocs = nf;
        nf = fill_extras(extras, nextra, pfd, nf, counts);
        int64_t wait_ms = next == NEVER ? -1 : next <= now ? 0 : (next - now + MS - 1) / MS;
        struct timespec ts = { (time_t)(wait_ms / 1000), (long)(wait_ms % 1000) * 1000000L };
        int r = ppoll(pfd, (nfds_t)nf, wait_ms < 0 ? NULL : &ts, &open_mask);
        /* A signal with a handler (Ctrl-C in the REPL), pending since the
         * loop began or come now, ends the wait and returns to Lua, whose
         * hook may then raise; callers that only want the result wait again. */
        if (r < 0) {
            err = errno;
            break;
        }
        polled = 1;
        for (int k = 0; k < nprocs && r > 0; k++) {
            proc_t *p = refs[k].p;
            /* skip an fd a previous event of this pass closed */
            if (!pfd[k].revents || *slot_fd(p, refs[k].slot) != pfd[k].fd)
                continue;
            r--;
            if (refs[k].slot == SLOT_IN)
                write_stdin(p);
            else if (refs[k].slot == SLOT_REPORT)
                read_report(p);
            else if (refs[k].slot == SLOT_PID)
                proc_check_exit(p);
            else if (refs[k].slot == SLOT_STATUS)
                status_ready(p);
            else
                read_stream(p, &p->out[refs[k].slot]);
        }
        for (int i = 0, at = nprocs; i < nextra; at += counts[i++])
            if (extras[i].ops->ready && extras[i].ops->ready(extras[i].self, pfd + at, counts[i]))
                wake = 1;
    }
    pthread_sigmask(SIG_SETMASK, &open_mask, NULL);   /* the handler runs here, if one came */
    lua_pop(L, 2);   /* the scratch arrays */
    return err;
}
