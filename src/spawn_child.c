/* spawn_child.c — what runs is what was checked: the binary is opened once in
 * the parent and the child execs that descriptor after a straight line of
 * checked steps. A failing step reports {step, errno} through a close-on-exec
 * pipe and _exit(127)s; EOF on that pipe means the exec happened. */
#include "hcp_core.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/openat2.h>

/* Kernel headers may predate the running kernel; the numbers are fixed ABI. */
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_execveat
#define SYS_execveat 322
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef RESOLVE_BENEATH
#define RESOLVE_BENEATH 0x08
#endif
#ifndef RESOLVE_NO_MAGICLINKS
#define RESOLVE_NO_MAGICLINKS 0x02
#endif

/* ---- opening the binary (parent) --------------------------------------- */

/* O_RDONLY lets us pread the "#!"; an execute-only file (no read bit for us)
 * can still be exec'd through an O_PATH descriptor. */
static int open_rel(int dirfd, const char *rel, int beneath)
{
    int flags[2] = { O_RDONLY | O_CLOEXEC, O_PATH | O_CLOEXEC };
    int fd = -1;
    for (int i = 0; i < 2; i++) {
        if (beneath) {
            struct open_how how;
            memset(&how, 0, sizeof how);
            how.flags = (unsigned long long)flags[i];
            how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
            fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
        } else {
            fd = openat(dirfd, rel, flags[i]);
        }
        if (fd >= 0 || errno != EACCES)
            break;
    }
    return fd;
}

/* Without openat2 (ENOSYS): open normally, then require the real path of
 * what we got to lie under the real `beneath`. */
static int open_checked_fallback(int dirfd, const char *rel, const char *beneath,
                                 int *why)
{
    char proc[64], real[PATH_MAX], base[PATH_MAX];
    int fd = open_rel(dirfd, rel, 0);
    if (fd < 0)
        return -1;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (!realpath(proc, real) || !realpath(beneath, base)) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!hcp_path_contains(base, real)) {
        close(fd);
        *why = EXE_ESCAPES;
        errno = EXDEV;
        return -1;
    }
    return fd;
}

/* Opens `path` relative to `beneath`: the lexical prefix is stripped and the
 * kernel refuses any escape (symlinks, "..") while resolving the rest. */
static int open_beneath(const char *path, const char *beneath, int *why)
{
    char npath[PATH_MAX], nbase[PATH_MAX];
    if (hcp_path_normalize(path, npath, sizeof npath) < 0 ||
        hcp_path_normalize(beneath, nbase, sizeof nbase) < 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!hcp_path_contains(nbase, npath)) {
        *why = EXE_ESCAPES;
        errno = EXDEV;
        return -1;
    }
    size_t blen = strcmp(nbase, "/") == 0 ? 0 : strlen(nbase);
    const char *rel = npath + blen;
    while (*rel == '/')
        rel++;
    if (*rel == '\0')
        rel = ".";

    int dirfd = open(nbase, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0)
        return -1;
    int fd = open_rel(dirfd, rel, 1);
    if (fd < 0 && errno == EXDEV)
        *why = EXE_ESCAPES;
    else if (fd < 0 && errno == ENOSYS)
        fd = open_checked_fallback(dirfd, rel, nbase, why);
    int e = errno;
    close(dirfd);
    errno = e;
    return fd;
}

int hcp_exe_open(const char *path, const char *beneath, int *fdp, int *script,
                 int *why)
{
    struct stat st;
    char magic[2];
    *why = EXE_OSERR;
    int fd = beneath ? open_beneath(path, beneath, why)
                     : open_rel(AT_FDCWD, path, 0);
    if (fd < 0)
        return errno;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
        close(fd);
        *why = EXE_NOTEXEC;
        return EACCES;
    }
    /* pread fails (EBADF) on an O_PATH descriptor: such a file cannot be read
     * by an interpreter either, so it is not treated as a script. */
    *script = pread(fd, magic, 2, 0) == 2 && magic[0] == '#' && magic[1] == '!';
    *fdp = fd;
    return 0;
}

/* ---- the child ---------------------------------------------------------- */

enum { ST_SIGNALS, ST_SETSID, ST_PDEATHSIG, ST_DUP2, ST_CHDIR, ST_CLOSEFDS,
       ST_NNP, ST_ISOLATION, ST_EXEC };
static const char *const step_names[] = {
    "signals", "setsid", "prctl(PDEATHSIG)", "dup2", "chdir", "close fds",
    "prctl(NO_NEW_PRIVS)", "isolation", "execveat",
};

struct child_err { int step; int err; };

static _Noreturn void child_fail(int pipefd, int step)
{
    struct child_err ce = { step, errno };
    ssize_t r;
    do
        r = write(pipefd, &ce, sizeof ce);   /* 8 bytes: atomic on a pipe */
    while (r < 0 && errno == EINTR);
    _exit(127);
}

/* Keeps the descriptors we still need off 0..2 so dup2 cannot clobber them
 * (possible only if the runtime itself was started with 0..2 closed). */
static int lift(int *fd)
{
    if (*fd >= 3)
        return 0;
    int n = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (n < 0)
        return -1;
    *fd = n;
    return 0;
}

/* Marks every fd above 2 close-on-exec; the exe fd and the error pipe are
 * close-on-exec already, so exec closes all of them. */
static int close_extra_fds(int keep1, int keep2)
{
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
        return 0;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -1;
    rlim_t max = rl.rlim_cur;
    if (max == RLIM_INFINITY || max > (1U << 20))
        max = 1U << 20;
    for (int fd = 3; (rlim_t)fd < max; fd++)
        if (fd != keep1 && fd != keep2)
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

/* Hook for per-child confinement (rlimits, Landlock, seccomp), applied after
 * NO_NEW_PRIVS and right before exec. Returns 0 or -1 with errno set. */
static int apply_isolation(const struct hcp_launch *l)
{
    (void)l;
    return 0;
}

static _Noreturn void child(const struct hcp_launch *l, int pipefd, pid_t parent)
{
    struct sigaction sa;
    sigset_t none;
    int in = l->in_fd, out = l->out_fd, err = l->err_fd, exe = l->exe_fd;

    /* Handlers make no sense after exec, and ignored signals would be
     * inherited. glibc refuses its own real-time signals (32, 33) with
     * EINVAL, though they may arrive ignored from whoever started us: those
     * go to the kernel directly. SIGKILL/SIGSTOP give EINVAL, as expected. */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (sigaction(s, &sa, NULL) < 0 && errno != EINVAL)
            child_fail(pipefd, ST_SIGNALS);
        else if (s >= 32 && s < SIGRTMIN && reset_raw(s) < 0)
            child_fail(pipefd, ST_SIGNALS);
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        child_fail(pipefd, ST_SIGNALS);

    /* A new session: no controlling tty (TIOCSTI), and a process group whose
     * id is our pid, so the parent can signal everything we start. */
    if (setsid() < 0)
        child_fail(pipefd, ST_SETSID);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        child_fail(pipefd, ST_PDEATHSIG);
    if (getppid() != parent)   /* the parent died before PDEATHSIG was set */
        _exit(127);

    if (lift(&pipefd) < 0 || lift(&exe) < 0 || lift(&in) < 0 ||
        lift(&out) < 0 || lift(&err) < 0)
        child_fail(pipefd, ST_DUP2);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        child_fail(pipefd, ST_DUP2);
    if (chdir(l->cwd) < 0)
        child_fail(pipefd, ST_CHDIR);
    if (close_extra_fds(exe, pipefd) < 0)
        child_fail(pipefd, ST_CLOSEFDS);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        child_fail(pipefd, ST_NNP);
    if (apply_isolation(l) < 0)
        child_fail(pipefd, ST_ISOLATION);
    /* The kernel hands a #! interpreter "/dev/fd/N": N must survive exec. */
    if (l->script && fcntl(exe, F_SETFD, 0) < 0)
        child_fail(pipefd, ST_EXEC);
    syscall(SYS_execveat, exe, "", l->argv, l->envp, AT_EMPTY_PATH);
    child_fail(pipefd, ST_EXEC);
}

/* ---- fork and report ---------------------------------------------------- */

static void reap(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

pid_t hcp_launch(const struct hcp_launch *l, int *err, const char **step)
{
    int p[2];
    sigset_t all, old;
    struct child_err ce;
    size_t got = 0;

    *step = "pipe";
    if (pipe2(p, O_CLOEXEC) < 0)
        return *err = errno, -1;
    /* All signals blocked across fork: no handler of the runtime may run in
     * the child before it has reset the dispositions. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child(l, p[1], parent);
    int fork_err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        *step = "fork";
        return *err = fork_err, -1;
    }
    int read_err = 0;
    while (got < sizeof ce) {
        ssize_t n = read(p[0], (char *)&ce + got, sizeof ce - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            read_err = errno;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(p[0]);
    if (got == 0 && !read_err)
        return pid;
    if (read_err || got < sizeof ce || ce.step < 0 || ce.step > ST_EXEC) {
        /* Cannot happen on a pipe; but without the report we cannot know
         * the child's state, so it must not run. */
        (void)kill(pid, SIGKILL);
        reap(pid);
        *step = "read";
        *err = read_err ? read_err : EIO;
        return -1;
    }
    reap(pid);
    *step = step_names[ce.step];
    *err = ce.err;
    return -1;
}
