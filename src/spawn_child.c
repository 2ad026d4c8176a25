/* spawn_child.c — the fork child: a straight line of checked steps from the
 * runtime's state to exec, with the isolation layers asked for applied in
 * the order that lets each one work (privileged steps first, then the drops).
 * A failing step reports {step, errno} through a close-on-exec pipe and
 * _exit(127)s; EOF on that pipe means the exec happened. */
#include "spawn.h"
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#endif

/* Kernel headers may predate the running kernel; the numbers are fixed ABI. */
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_execveat
#define SYS_execveat 322
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static const char *const step_names[ST_NSTEPS] = {
    "signals", "setsid", "prctl(PDEATHSIG)", "isolation: cgroup",
    "isolation: stage", "isolation: userns", "isolation: netns",
    "isolation: ipcns", "isolation: pidns", "isolation: rootfs", "dup2",
    "chdir", "close fds", "isolation: rlimits", "isolation: run_as",
    "isolation: caps", "prctl(NO_NEW_PRIVS)", "isolation: landlock",
    "isolation: seccomp", "execveat", "spawn helper", "isolation: pids_max",
    "isolation: egress",
};

const char *hcp_step_name(int step)
{
    return step >= 0 && step < ST_NSTEPS ? step_names[step] : NULL;
}

int hcp_step_has_arg(int step)
{
    return step == ST_ROOTFS || step == ST_STAGE;
}

_Noreturn void hcp_child_fail(int pipefd, int step, int arg)
{
    struct hcp_child_err ce = { step, errno, arg };
    ssize_t r;
    do
        r = write(pipefd, &ce, sizeof ce);   /* 12 bytes: atomic on a pipe */
    while (r < 0 && errno == EINTR);
    _exit(127);
}

static _Noreturn void child_fail(int pipefd, int step)
{
    hcp_child_fail(pipefd, step, -1);
}

/* Keeps the descriptors we still need off 0..min-1 so dup2 cannot clobber
 * them (below 3: possible only if the runtime itself was started with 0..2
 * closed; the data fds go to 3 and up). */
static int lift(int *fd, int min)
{
    if (*fd < 0 || *fd >= min)
        return 0;
    int n = fcntl(*fd, F_DUPFD_CLOEXEC, min);
    if (n < 0)
        return -1;
    *fd = n;
    return 0;
}

static int fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > (1U << 20))
        return 1 << 20;
    return (int)rl.rlim_cur;
}

/* Marks every fd from `from` up close-on-exec; the ones we keep until exec
 * (the binary, the error pipe, the Landlock ruleset) are close-on-exec
 * already, so exec closes all of them. */
static int close_extra_fds(unsigned from, const int keep[3])
{
    if (syscall(SYS_close_range, from, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return 0;
    for (int fd = (int)from, max = fd_limit(); fd < max; fd++)
        if (fd != keep[0] && fd != keep[1] && fd != keep[2])
            (void)close(fd);   /* EBADF for the many fds that are not open */
    return 0;
}

/* rt_sigaction without glibc's filter: an all-zero kernel sigaction is
 * SIG_DFL with no flags and an empty mask on every architecture. */
static int reset_raw(int sig)
{
    unsigned long ksa[4] = { 0, 0, 0, 0 };
    return (int)syscall(SYS_rt_sigaction, sig, ksa, NULL, (size_t)(_NSIG / 8));
}

/* The stack of a CLONE_VM child (hcp_clone_vm). hcp_child's steps after
 * the clone, the helper stub and child_tail use a few hundred bytes. */
#define CHILD_STACK 32768

pid_t hcp_clone_vm(int (*fn)(void *), void *arg, int flags)
{
    char stack[CHILD_STACK] __attribute__((aligned(16)));
    pid_t pid = clone(fn, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD | flags, arg);
#ifdef __SANITIZE_ADDRESS__
    /* the child's instrumented frames poisoned parts of this region in the
     * shadow memory we share; our later frames reuse it */
    int e = errno;
    __asan_unpoison_memory_region(stack, sizeof stack);
    errno = e;
#endif
    return pid;
}

/* ---- pid namespace: three processes ------------------------------------ */
/* unshare(CLONE_NEWPID) puts only our next child in the new namespace, so
 * the tree is: the intermediate (host side, the pid the runtime knows) ->
 * hcp-init (pid 1, a reaper: no exec) -> the program (pid 2). The program
 * is not pid 1 because pid 1 ignores every signal it has no handler for
 * when it comes from inside the namespace, SIGKILL included: `kill $$`,
 * raise() and abort() would stop working. Killing the intermediate (timeout,
 * close) kills hcp-init through PDEATHSIG, and the kernel then kills
 * everything in the namespace, setsid()ed or not; so does hcp-init's exit
 * when the program has ended. */

/* Closes every fd but a, b and c (-1: none; a repeat is one): neither the
 * intermediate nor hcp-init may hold a pipe of the runtime, so EOF on the
 * error pipe and on stdout means the program. */
static void close_all_but(int a, int b, int c)
{
    int k[3] = { a, b, c }, ok = 1;
    for (int i = 1; i < 3; i++)   /* ascending */
        for (int j = i; j > 0 && k[j] < k[j - 1]; j--) {
            int t = k[j];
            k[j] = k[j - 1];
            k[j - 1] = t;
        }
    unsigned from = 0;
    for (int i = 0; i < 3 && ok; i++) {
        if (k[i] < 0 || (unsigned)k[i] < from)
            continue;
        if ((unsigned)k[i] > from)
            ok = syscall(SYS_close_range, from, (unsigned)k[i] - 1, 0U) == 0;
        from = (unsigned)k[i] + 1;
    }
    ok = ok && syscall(SYS_close_range, from, ~0U, 0U) == 0;
    if (!ok)
        for (int fd = 0, max = fd_limit(); fd < max; fd++)
            if (fd != a && fd != b && fd != c)
                (void)close(fd);
}

static int wait_for(pid_t pid, int *st)
{
    pid_t r;
    while ((r = waitpid(pid, st, 0)) < 0 && errno == EINTR)
        ;
    return r;
}

/* The intermediate ends as the program did (hcp-init sends its wait status
 * through `status`; without it, as hcp-init did), so the runtime sees the
 * real exit code or signal. hcp-init's report goes on to the runtime at
 * once (`end`), before hcp-init is reaped: the call may end on it
 * (spawn_io.c) while hcp-init and this process exit. */
static _Noreturn void relay(pid_t init, int life, int status, int end)
{
    int st;
    struct hcp_end_report rep;
    ssize_t n;
    close_all_but(life, status, end);   /* our end of `life` stays open until we exit */
    while ((n = read(status, &rep, sizeof rep)) < 0 && errno == EINTR)
        ;
    if (end >= 0 && n == (ssize_t)sizeof rep)
        (void)write(end, &rep, sizeof rep);   /* one write: whole, or not at all */
    if (wait_for(init, &st) < 0)
        _exit(127);
    if (n == (ssize_t)sizeof rep)
        st = rep.status;
    if (WIFEXITED(st))
        _exit(WEXITSTATUS(st));
    int sig = WTERMSIG(st);
    /* The program dumped core already if it was to; ours would land in the
     * runtime's cwd. */
    struct rlimit zero = { 0, 0 };
    (void)setrlimit(RLIMIT_CORE, &zero);
    (void)signal(sig, SIG_DFL);   /* it is already; SIGKILL gives SIG_ERR */
    (void)kill(getpid(), sig);    /* unblocked: delivered before kill returns */
    _exit(128 + sig);
}

/* hcp-init reaps whatever is reparented to it, and when the program ends
 * reports its status and exits, which ends the namespace. */
/* hcp-init as the runtime's own child (init_direct): a signal the runtime
 * sends (its timeout's TERM, a kill) ends the namespace, and the runtime
 * reads which one from the status pipe. pid 1 can die only of SIGKILL from
 * outside, so the others are handled: caught, reported, exit. */
static int status_out = -1;

static void report_signal(int sig)
{
    struct hcp_end_report rep = { .status = sig & 0x7f };   /* a wait status: killed by sig */
    (void)write(status_out, &rep, sizeof rep);
    _exit(0);
}

static void catch_ending_signals(int status)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = report_signal;
    sigfillset(&sa.sa_mask);
    status_out = status;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP && s != SIGCHLD && s != SIGCONT && s != SIGTSTP &&
            s != SIGTTIN && s != SIGTTOU && s != SIGURG && s != SIGWINCH)
            (void)sigaction(s, &sa, NULL);   /* 32, 33 and such: EINVAL under glibc, nothing lost */
}

static unsigned long long io_value(const char *text, const char *key)
{
    const char *at = strstr(text, key);
    unsigned long long v = 0;
    if (at)
        for (at += strlen(key); *at >= '0' && *at <= '9'; at++)
            v = v * 10 + (unsigned long long)(*at - '0');
    return v;
}

int hcp_read_io(const char *path, struct hcp_io *io)
{
    char buf[512];
    if (hcp_read_small(path, buf, sizeof buf) <= 0)
        return -1;
    io->rchar = io_value(buf, "rchar: ");
    io->wchar = io_value(buf, "wchar: ");
    io->read_bytes = io_value(buf, "read_bytes: ");
    io->write_bytes = io_value(buf, "write_bytes: ");
    return 0;
}

/* The program ended (wait status prog_st): whatever else runs in the
 * namespace is killed and reaped here, before the report — so the runtime
 * can end the call on the report, without waiting for this process's own
 * exit, which tears the namespaces down. kill(-1) from pid 1 reaches every
 * other process of the namespace, nested ones too; all of them are our
 * descendants, so ECHILD means none is left. No signal is taken from here
 * on: the call is ending, and a timeout's TERM must not write a second
 * report (the runtime's SIGKILL still ends us). */
static _Noreturn void end_report(int status, int prog_st)
{
    struct hcp_end_report rep = { .status = prog_st, .gone = 1 };
    sigset_t all;
    struct rusage ru;
    int st;
    sigfillset(&all);
    (void)sigprocmask(SIG_BLOCK, &all, NULL);
    (void)kill(-1, SIGKILL);
    while (wait_for(-1, &st) >= 0)
        ;
    if (errno != ECHILD)
        rep.gone = 0;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
        rep.user_us = (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec;
        rep.sys_us = (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
        rep.maxrss_kb = ru.ru_maxrss;
    }
    /* the namespace's own /proc: ours, holding what we reaped */
    rep.have_io = hcp_read_io("/proc/self/io", &rep.io) == 0;
    (void)write(status, &rep, sizeof rep);
    _exit(0);
}

static _Noreturn void reaper(pid_t prog, int status, int direct)
{
    int st;
    close_all_but(status, -1, -1);
    if (direct)
        catch_ending_signals(status);
    for (;;) {
        pid_t r = wait_for(-1, &st);
        if (r < 0)
            _exit(127);
        if (r == prog)
            end_report(status, st);
    }
}

/* The early child's view, begun before its plan came (hcp_child_early):
 * the mounts then only finish it. */
static struct { int active, root, old, pid_max_fd; const unsigned char *done; } early = { 0, -1, -1, -1, NULL };

/* In pid 1 (or, without a pid namespace, the child itself): the mounts of
 * the new mount namespace: a constructed root, or only our own /proc. */
static void mounts(const struct hcp_isolation *iso, int pipefd)
{
    int where;
    if (early.active) {
        if (hcp_rootfs_end(&iso->rootfs, early.done, early.root, early.old, &where) < 0)
            hcp_child_fail(pipefd, ST_ROOTFS, where);
    } else if (iso->layers & ISO_ROOTFS) {
        if ((iso->rootfs.base ? hcp_rootfs_build_on(&iso->rootfs, &where)
                              : hcp_rootfs_build(&iso->rootfs, &where)) < 0)
            hcp_child_fail(pipefd, ST_ROOTFS, where);
    } else if ((iso->layers & ISO_PIDNS) && hcp_iso_pidns_mounts() < 0) {
        child_fail(pipefd, ST_PIDNS);
    }
}

static _Noreturn void child_tail(const struct hcp_launch *l, int pipefd);

/* The program (pid 2), started by hcp-init: a session of its own, and on
 * to exec. It runs in hcp-init's memory (hcp_clone_vm) until then.
 *
 * Its descriptors (the call's pipes, the report pipe, the binary, the
 * Landlock ruleset, the data fds) reach it through a socket, not by
 * inheritance: hcp-init sends them and closes its own copies before the
 * program exists. hcp-init resumes only once the program's exec lets go of
 * its memory, and until it closes what it holds, a program that may open
 * hcp-init's descriptors (/proc/1/fd: one that kept its capabilities)
 * would find the call's pipes there — and write a false failure report,
 * or output in hcp-init's name — and the runtime's own stdin, stdout and
 * stderr, inherited by the helper (an MCP server's channel to its agent).
 * Now it finds hcp-init's status pipe and a socket whose other end is
 * closed: hcp-init keeps nothing else once the program's are sent. */
enum { HAND_MAX = 6 + HCP_DATA_FDS };
struct program {
    struct hcp_launch *l;   /* hcp-init's copy: its fds are the program's once received */
    struct hcp_isolation *iso;
    int pipefd, status, sock;
};

/* The descriptors the program needs, as places in hcp-init's copies: the
 * report pipe first. Only the open ones (>= 0) are handed over. */
static int hand_slots(struct program *p, int **slot)
{
    int n = 0;
    slot[n++] = &p->pipefd;
    slot[n++] = &p->l->in_fd;
    slot[n++] = &p->l->out_fd;
    slot[n++] = &p->l->err_fd;
    slot[n++] = &p->l->exe_fd;
    slot[n++] = &p->iso->landlock_fd;
    for (int i = 0; i < p->l->ndata; i++)
        slot[n++] = &p->l->data_fd[i];
    return n;
}

/* hcp-init: every open slot sent on `sock` (one message), then closed. */
static int hand_over(struct program *p, int sock)
{
    int *slot[HAND_MAX], fds[HAND_MAX], n = hand_slots(p, slot), k = 0;
    for (int i = 0; i < n; i++)
        if (*slot[i] >= 0)
            fds[k++] = *slot[i];
    if (hcp_send_fds(sock, 'h', fds, k) < 0)
        return -1;
    for (int i = 0; i < k; i++)
        (void)close(fds[i]);   /* EBADF for a repeat (stdout and stderr one pipe) */
    return 0;
}

/* The receiving side (the program, or hcp-init taking them back to report
 * a failed clone): the slots that were sent get the new descriptors, in
 * the same order. */
static int take_over(struct program *p, int sock)
{
    int *slot[HAND_MAX], fds[HAND_MAX], n = hand_slots(p, slot), want = 0;
    char byte;
    for (int i = 0; i < n; i++)
        want += *slot[i] >= 0;
    if (hcp_recv_fds(sock, 0, &byte, fds, HAND_MAX) != want)
        return -1;
    for (int i = 0, k = 0; i < n; i++)
        if (*slot[i] >= 0)
            *slot[i] = fds[k++];
    return 0;
}

static int program_main(void *arg)
{
    struct program *p = arg;
    close(p->status);
    if (take_over(p, p->sock) < 0)
        _exit(127);   /* no report pipe to say why: hcp-init reports the exit */
    close(p->sock);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        child_fail(p->pipefd, ST_PIDNS);
    if (getppid() != 1)   /* hcp-init is gone, and with it the namespace */
        _exit(127);
    if (setsid() < 0)
        child_fail(p->pipefd, ST_SETSID);
    child_tail(p->l, p->pipefd);
}

/* In hcp-init, pid 1: the namespace's pid_max, its mounts, then the
 * program started (pid 2), and hcp-init its reaper from then on.
 * `status`: where hcp-init reports the program's end; `direct`: hcp-init is
 * the runtime's own child (init_direct), not the intermediate's.
 *
 * The program is a CLONE_VM|CLONE_VFORK child, not a fork: a fork copied
 * hcp-init's page tables and then took a copy-on-write fault in both
 * processes for every page either wrote, ~0.9 ms per call on this kind of
 * VM, more than the pid namespace itself. hcp-init has nothing to do until
 * the program execs (it installs its handlers only then), and the
 * program's steps touch only its own stack, its descriptors and its own
 * task's state (credentials, seccomp, Landlock, limits: all per task). */
static _Noreturn void init_and_start(const struct hcp_launch *l, int pipefd, int status, int direct)
{
    const struct hcp_isolation *iso = l->iso;
    (void)prctl(PR_SET_NAME, "hcp-init", 0, 0, 0);   /* what `ps` shows; cosmetic */
    /* before anything else runs in the namespace */
    if (iso->pid_max && (early.active ? hcp_iso_pid_max_fd(early.pid_max_fd, iso->pid_max)
                                      : hcp_iso_pid_max(iso->pid_max)) < 0)
        child_fail(pipefd, ST_PIDS_MAX);
    if (early.pid_max_fd >= 0)
        close(early.pid_max_fd);
    mounts(iso, pipefd);
    /* copies the program's slots are rewritten in (hand_slots) */
    struct hcp_launch lc = *l;
    struct hcp_isolation ic = *iso;
    lc.iso = &ic;
    struct program prog = { &lc, &ic, pipefd, status, -1 };
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0 || hand_over(&prog, sv[0]) < 0)
        child_fail(pipefd, ST_PIDNS);
    /* what was sent waits in sv[1]'s queue; nothing else of ours (the
     * runtime's own stdio, the plan, the helper's pipes) stays either */
    close_all_but(status, sv[1], -1);
    prog.sock = sv[1];
    pid_t pid = hcp_clone_vm(program_main, &prog, 0);
    if (pid < 0) {
        int err = errno;
        if (take_over(&prog, sv[1]) < 0)
            _exit(127);
        errno = err;
        child_fail(prog.pipefd, ST_PIDNS);
    }
    reaper(pid, status, direct);   /* closes sv[1] */
}

/* Three processes: the intermediate (host side) forks hcp-init into the
 * namespace unshare made for its children. A fork: hcp-init never execs,
 * and two processes running at once in one memory would share errno and
 * every static. */
static _Noreturn void pidns_fork(const struct hcp_launch *l, int pipefd)
{
    int end = l->end_fd;
    int life[2], status[2];
    if (pipe2(life, O_CLOEXEC) < 0 || pipe2(status, O_CLOEXEC) < 0)
        child_fail(pipefd, ST_PIDNS);
    pid_t pid = fork();
    if (pid < 0)
        child_fail(pipefd, ST_PIDNS);
    if (pid > 0)
        relay(pid, life[1], status[0], end);
    close(life[1]);
    close(status[0]);
    if (end >= 0)
        close(end);   /* the intermediate's alone */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        child_fail(pipefd, ST_PIDNS);
    /* getppid() is 0 here (the parent is outside the namespace), so the
     * re-check after PDEATHSIG reads the pipe instead: POLLHUP means the
     * intermediate died before PDEATHSIG was armed. */
    struct pollfd pf = { .fd = life[0], .events = POLLIN, .revents = 0 };
    int r = poll(&pf, 1, 0);
    if (r < 0)
        child_fail(pipefd, ST_PIDNS);
    if (r > 0)
        _exit(127);
    close(life[0]);
    init_and_start(l, pipefd, status[1], 0);
}

/* Two processes: the runtime cloned us as pid 1 of a new namespace
 * (CLONE_NEWPID, root only: no user namespace to make first), so we are
 * hcp-init ourselves and report the program's end on l->status_fd. The
 * runtime died before PDEATHSIG was armed if the report pipe has no reader
 * any more (getppid() is 0 from inside). */
static _Noreturn void init_direct(const struct hcp_launch *l, int pipefd)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        child_fail(pipefd, ST_PIDNS);
    struct pollfd pf = { .fd = pipefd, .events = POLLOUT, .revents = 0 };
    if (poll(&pf, 1, 0) < 0)
        child_fail(pipefd, ST_PIDNS);
    if (pf.revents & (POLLERR | POLLHUP))
        _exit(127);
    init_and_start(l, pipefd, l->status_fd, 1);
}

/* ---- the child ---------------------------------------------------------- */

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The signals this process ignores or catches: SigIgn | SigCgt of its own
 * /proc/self/status (bit n-1 is signal n). A child made without
 * CLONE_SIGHAND reads its own copy of the table, which no other thread can
 * change. All of them when it cannot be read (no /proc). Three system
 * calls, where asking every signal costs 64 — in a vfork child, while the
 * runtime waits. */
static uint64_t disposed_signals(void)
{
    char buf[4096];
    uint64_t set = 0;
    if (hcp_read_small("/proc/self/status", buf, sizeof buf) <= 0)
        return ~(uint64_t)0;
    for (int k = 0; k < 2; k++) {
        const char *at = strstr(buf, k ? "\nSigCgt:\t" : "\nSigIgn:\t");
        if (!at)
            return ~(uint64_t)0;
        at += 9;
        uint64_t v = 0;
        for (int i = 0; i < 16; i++) {
            int d = hex_digit(at[i]);
            if (d < 0)
                return ~(uint64_t)0;
            v = v << 4 | (uint64_t)d;
        }
        set |= v;
    }
    return set;
}

static void reset_signals(int pipefd)
{
    struct sigaction sa;
    sigset_t none;

    /* Handlers make no sense after exec, and ignored signals would be
     * inherited. glibc refuses its own real-time signals (32, 33) with
     * EINVAL, though they may arrive ignored from whoever started us: those
     * go to the kernel directly. SIGKILL/SIGSTOP give EINVAL, as expected. */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    uint64_t set = disposed_signals();
    for (int s = 1; s < NSIG && s <= 64; s++) {
        if (!(set >> (s - 1) & 1))
            continue;
        if (sigaction(s, &sa, NULL) < 0 && errno != EINVAL)
            child_fail(pipefd, ST_SIGNALS);
        else if (s >= 32 && s < SIGRTMIN && reset_raw(s) < 0)
            child_fail(pipefd, ST_SIGNALS);
    }
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        child_fail(pipefd, ST_SIGNALS);
}

/* A process group of our own, and PDEATHSIG. */
static void own_group(unsigned want, int pipefd, pid_t parent)
{
    /* A process group whose id is our pid, so the parent can signal
     * everything we start, and for the program a session of its own: no
     * controlling tty (TIOCSTI). With a pid namespace the program gets its
     * session there (pidns_fork); the intermediate, which runs only our own
     * code, needs only the group — a new session also makes the scheduler a
     * new autogroup, which took up to milliseconds on a loaded machine. */
    if ((want & ISO_PIDNS) ? setpgid(0, 0) < 0 : setsid() < 0)
        child_fail(pipefd, ST_SETSID);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        child_fail(pipefd, ST_PDEATHSIG);
    /* the parent died before PDEATHSIG was set (a direct hcp-init, pid 1,
     * sees no parent: init_direct checks its own way) */
    if (getpid() != 1 && getppid() != parent)
        _exit(127);
}

_Noreturn void hcp_child(const struct hcp_launch *l, int pipefd, pid_t parent)
{
    const struct hcp_isolation *iso = l->iso;
    unsigned want = iso->layers;

    reset_signals(pipefd);
    own_group(want, pipefd, parent);

    /* Privileged steps first: joining a cgroup, namespaces, mounts. */
    if ((want & ISO_CGROUP) && hcp_iso_cgroup_join(iso->cgroup_fd) < 0)
        child_fail(pipefd, ST_CGROUP);
    int where;
    if ((want & ISO_STAGE) && hcp_stage_build(&iso->stage, &where) < 0)
        hcp_child_fail(pipefd, ST_STAGE, where);
    if ((iso->userns || iso->userns_fd >= 0) && hcp_iso_userns(iso) < 0)
        child_fail(pipefd, ST_USERNS);
    if ((want & ISO_NETNS) && hcp_iso_netns(iso) < 0)
        child_fail(pipefd, ST_NETNS);
    /* issue 14: the proxy's listeners, made in this namespace, to the runtime */
    if ((want & ISO_EGRESS) && hcp_egress_listen(iso->egress_fd) < 0)
        child_fail(pipefd, ST_EGRESS);
    if ((want & ISO_IPCNS) && hcp_iso_ipcns() < 0)
        child_fail(pipefd, ST_IPCNS);
    /* On a base view the mount namespace is a copy of the base's, made
     * from the host's (setns, then unshare): a copy of the host's made here
     * first would be thrown away at the setns, and freeing a namespace waits
     * for an RCU grace period (milliseconds on an idle machine). */
    int on_base = (want & ISO_ROOTFS) && iso->rootfs.base;
    if ((want & ISO_PIDNS) && getpid() == 1) {
        if (!on_base && unshare(CLONE_NEWNS) < 0)
            child_fail(pipefd, ST_PIDNS);
        init_direct(l, pipefd);    /* hcp-init; the program goes on to child_tail */
    } else if (want & ISO_PIDNS) {
        if (hcp_iso_pidns_unshare(!on_base) < 0)
            child_fail(pipefd, ST_PIDNS);
        pidns_fork(l, pipefd);     /* the same, one process further down */
    } else if (want & ISO_ROOTFS) {
        if (!on_base && unshare(CLONE_NEWNS) < 0)
            child_fail(pipefd, ST_ROOTFS);
        mounts(iso, pipefd);
    }
    child_tail(l, pipefd);
}

/* From the namespaces to exec: the descriptors, the drops, the exec. */
static _Noreturn void child_tail(const struct hcp_launch *l, int pipefd)
{
    const struct hcp_isolation *iso = l->iso;
    unsigned want = iso->layers;
    int in = l->in_fd, out = l->out_fd, err = l->err_fd, exe = l->exe_fd;
    int ruleset = iso->landlock_fd;
    int nd = l->ndata, low = 3 + nd;
    if (lift(&pipefd, low) < 0 || lift(&exe, low) < 0 || lift(&ruleset, low) < 0 ||
        lift(&in, 3) < 0 || lift(&out, 3) < 0 || lift(&err, 3) < 0)
        child_fail(pipefd, ST_DUP2);
    int data[HCP_DATA_FDS];
    for (int i = 0; i < nd; i++)
        if ((data[i] = l->data_fd[i]) >= 0 && lift(&data[i], low) < 0)
            child_fail(pipefd, ST_DUP2);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        child_fail(pipefd, ST_DUP2);
    for (int i = 0; i < nd; i++)   /* dup2 leaves the copy open across exec */
        if (dup2(data[i], 3 + i) < 0)
            child_fail(pipefd, ST_DUP2);
    if (chdir(l->cwd) < 0)
        child_fail(pipefd, ST_CHDIR);
    int keep[3] = { exe, pipefd, ruleset };
    if (close_extra_fds((unsigned)low, keep) < 0)
        child_fail(pipefd, ST_CLOSEFDS);

    /* Then the drops, each after the last step that needed what it takes. */
    if ((want & ISO_RLIMITS) && hcp_iso_rlimits(iso) < 0)
        child_fail(pipefd, ST_RLIMITS);
    if ((want & ISO_RUN_AS) && !(want & ISO_CAPS) && hcp_iso_run_as(iso) < 0)
        child_fail(pipefd, ST_RUN_AS);
    if ((want & ISO_CAPS) && hcp_iso_caps(iso->cap_last, (want & ISO_RUN_AS) ? iso : NULL) < 0)
        child_fail(pipefd, ST_CAPS);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        child_fail(pipefd, ST_NNP);
    if ((want & ISO_LANDLOCK) && hcp_iso_landlock(iso, ruleset) < 0)
        child_fail(pipefd, ST_LANDLOCK);
    /* The kernel hands a #! interpreter "/dev/fd/N": N must survive exec.
     * A constructed root without a pid namespace has no /proc, so there
     * the script runs by its path — the same file, checked by identity. */
    int by_path = l->script && (want & ISO_ROOTFS) && !(want & ISO_PIDNS);
    if (l->script && !by_path && fcntl(exe, F_SETFD, 0) < 0)
        child_fail(pipefd, ST_EXEC);
    if (by_path) {
        struct stat a, b;
        if (fstat(exe, &a) < 0 || stat(l->path, &b) < 0)
            child_fail(pipefd, ST_EXEC);
        if (a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            errno = ESTALE;
            child_fail(pipefd, ST_EXEC);
        }
    }
    if ((want & ISO_SECCOMP) && hcp_iso_seccomp() < 0)
        child_fail(pipefd, ST_SECCOMP);
    if (by_path)
        execve(l->path, l->argv, l->envp);
    else
        syscall(SYS_execveat, exe, "", l->argv, l->envp, AT_EMPTY_PATH);
    child_fail(pipefd, ST_EXEC);
}


/* ---- the early child ---------------------------------------------------- */

#define EARLY_FDS (1 + HCP_PLAN_FDS)

/* One message: the byte 'p', the plan's memfd, then the descriptors the
 * plan names (hcp_plan_fd_slots' order, those >= 0). The count received;
 * at EOF (the runtime made no call of this kind, or ended) we end. */
static int receive_call(int sock, int *fds)
{
    char byte;
    int n = hcp_recv_fds(sock, 0, &byte, fds, EARLY_FDS);
    if (n == -2)
        _exit(0);
    return n < 1 || byte != 'p' ? -1 : n;
}

/* The call's plan, from the memfd received, its descriptors put in place:
 * 0, or -1 when the message is not one call's plan. */
static int take_plan(const int *fds, int n, struct hcp_launch *l, struct hcp_isolation *iso)
{
    int *slots[HCP_PLAN_FDS];
    if (n < 1 || hcp_plan_map(fds[0], l, iso) < 0)
        return -1;
    int ns = hcp_plan_fd_slots(l, iso, slots), k = 1;
    for (int i = 0; i < ns; i++)
        if (*slots[i] >= 0) {
            if (k == n)
                return -1;
            *slots[i] = fds[k++];
        }
    return k == n ? 0 : -1;
}

/* What the early child did ahead suits this plan: a pid namespace of which
 * it is init (direct: the report on status_fd), its IPC namespace, its view
 * begun; nothing it would have had to do before them (a cgroup to join, a
 * user namespace, a stage). The runtime checked the same (early.c). */
int hcp_early_suits(const struct hcp_isolation *ahead, const struct hcp_launch *l, unsigned char *done)
{
    const struct hcp_isolation *iso = l->iso;
    unsigned need = ISO_ROOTFS | ISO_PIDNS | ISO_IPCNS | (ahead->layers & ISO_NETNS);
    return (iso->layers & need) == need && !(iso->layers & (ISO_CGROUP | ISO_STAGE)) && !iso->userns &&
           iso->userns_fd < 0 && l->status_fd >= 0 && hcp_rootfs_extends(&ahead->rootfs, &iso->rootfs, done);
}

_Noreturn void hcp_child_early(const struct hcp_launch *e, int sock)
{
    static struct hcp_launch l;
    static struct hcp_isolation iso;
    static unsigned char done[HCP_EARLY_MAX];
    int pipefd = e->report_fd, where, fds[EARLY_FDS];

    reset_signals(pipefd);
    own_group(ISO_PIDNS, pipefd, e->parent);
    (void)prctl(PR_SET_NAME, "hcp-init", 0, 0, 0);
    /* pid_max is written once the plan says how much; by then the view
     * hides /proc/sys */
    early.pid_max_fd = open("/proc/sys/kernel/pid_max", O_WRONLY | O_CLOEXEC);
    /* a fresh network namespace, what a call gets when none is pooled */
    if ((e->iso->layers & ISO_NETNS) && unshare(CLONE_NEWNET) < 0)
        child_fail(pipefd, ST_NETNS);
    if (hcp_iso_ipcns() < 0)
        child_fail(pipefd, ST_IPCNS);
    if (unshare(CLONE_NEWNS) < 0)
        child_fail(pipefd, ST_PIDNS);
    if (hcp_rootfs_begin(&e->iso->rootfs, &early.root, &early.old, &where) < 0)
        hcp_child_fail(pipefd, ST_ROOTFS, where);

    int n = receive_call(sock, fds);
    close(sock);
    if (n < 0 || take_plan(fds, n, &l, &iso) < 0) {
        errno = EINVAL;
        child_fail(pipefd, ST_HELPER);
    }
    if (!hcp_early_suits(e->iso, &l, done)) {
        errno = ESTALE;
        child_fail(pipefd, ST_HELPER);
    }
    early.active = 1;
    early.done = done;
    /* a pooled one instead of ours, or (without the one made ahead) a fresh one */
    if ((iso.layers & ISO_NETNS) && (iso.netns_fd >= 0 || !(e->iso->layers & ISO_NETNS)) && hcp_iso_netns(&iso) < 0)
        child_fail(pipefd, ST_NETNS);
    if ((iso.layers & ISO_EGRESS) && hcp_egress_listen(iso.egress_fd) < 0)
        child_fail(pipefd, ST_EGRESS);
    init_direct(&l, pipefd);    /* hcp-init; the program goes on to child_tail */
}
