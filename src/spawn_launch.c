/* spawn_launch.c — starting the child without copying the runtime.
 *
 * fork() copies the page tables of the whole runtime (21 ms for a 1 GiB Lua
 * heap, measured); clone(CLONE_VM|CLONE_VFORK) — posix_spawn's way — shares
 * them while the parent waits, and costs the same for any size. Such a child
 * runs in the parent's memory, so it may only make system calls until it
 * execs. Without isolation layers that is all hcp_child does, so it runs
 * there directly. With layers the child needs forks of its own (a pid
 * namespace's init and program) and much more work: it execs the spawn
 * helper at once, a small static program without libc
 * (build/libexec/hcp-spawn) that maps the launch plan the parent wrote into
 * a memfd and runs the same hcp_child in a process of its own, where a fork
 * copies almost nothing. Without the helper (not built, or
 * HCP_SPAWN_HELPER=none), fork() and hcp_child, as before.
 *
 * All signals are blocked across the clone: no handler of the runtime may
 * run in a child that shares its memory, nor before the dispositions were
 * reset. The exec report is read the same way on every path: EOF on the
 * close-on-exec pipe means the program was exec'd. */
#include "spawn.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_execveat
#define SYS_execveat 322
#endif

/* ---- finding the helper ------------------------------------------------- */

/* A helper runs with the runtime's privileges: it must be a regular file
 * owned by root or by us that nobody else may write. */
static int open_helper(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & S_IXUSR) ||
        (st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_uid != 0 && st.st_uid != geteuid())) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The kernel's name of the file mapped at `base` (/proc/self/maps), into
 * buf: the object this code was loaded from, however it was found. */
static int mapped_name(uintptr_t base, char *buf, size_t size)
{
    char line[PATH_MAX + 128];
    FILE *f = fopen("/proc/self/maps", "re");
    int found = -1;
    if (!f)
        return -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        unsigned long start;
        char *path = strchr(line, '/');
        if (sscanf(line, "%lx-", &start) != 1 || start != base || !path)
            continue;
        path[strcspn(path, "\n")] = '\0';
        if (strlen(path) < size) {
            memcpy(buf, path, strlen(path) + 1);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

/* The directory of the object this code was loaded from: core.so, or the
 * hcp-lua executable that links the core in. */
static int own_dir(char *buf, size_t size)
{
    Dl_info info;
    char name[PATH_MAX];
    memset(&info, 0, sizeof info);
    if (!dladdr((void *)(uintptr_t)hcp_helper_fd, &info) ||
        mapped_name((uintptr_t)info.dli_fbase, name, sizeof name) < 0) {
        if (!info.dli_fname || info.dli_fname[0] != '/' || strlen(info.dli_fname) >= sizeof name)
            return -1;
        memcpy(name, info.dli_fname, strlen(info.dli_fname) + 1);
    }
    const char *slash = strrchr(name, '/');
    size_t len = (size_t)(slash - name);
    if (len + 1 > size)
        return -1;
    memcpy(buf, name, len);
    buf[len] = '\0';
    return 0;
}

int hcp_helper_fd(void)
{
    static int fd = -2;
    if (fd != -2)
        return fd;
    fd = -1;
    const char *env = getenv("HCP_SPAWN_HELPER");
    if (env && env[0]) {
        if (strcmp(env, "none") != 0)
            fd = open_helper(env);
        return fd;
    }
    char dir[PATH_MAX], path[PATH_MAX + 64];
    if (own_dir(dir, sizeof dir) < 0)
        return fd;
    /* beside core.so (a rock, an install's lib/lua/5.4/hcp), or libexec/ of
     * the tree hcp-lua (bin/) or core.so (lib/lua/5.4/hcp/) belongs to */
    static const char *const rel[] = { "/hcp-spawn", "/../libexec/hcp-spawn",
                                       "/../../../../libexec/hcp-spawn" };
    for (size_t i = 0; fd < 0 && i < sizeof rel / sizeof rel[0]; i++)
        if ((size_t)snprintf(path, sizeof path, "%s%s", dir, rel[i]) < sizeof path)
            fd = open_helper(path);
    return fd;
}

/* ---- the children ------------------------------------------------------- */

struct direct { const struct hcp_launch *l; int pipefd; pid_t parent; };

static int direct_main(void *arg)
{
    const struct direct *d = arg;
    hcp_child(d->l, d->pipefd, d->parent);
}

/* The fds the helper needs, handed over across its exec. */
#define MAX_KEEP (2 + HCP_PLAN_FDS)   /* the plan, the report pipe, the plan's own */
struct stub {
    int helper, pipefd, nkeep, keep[MAX_KEEP];
    char *argv[5], *envp[1];
};

static int stub_main(void *arg)
{
    struct stub *s = arg;
    for (int i = 0; i < s->nkeep; i++)
        if (s->keep[i] >= 0 && fcntl(s->keep[i], F_SETFD, 0) < 0)
            hcp_child_fail(s->pipefd, ST_HELPER, -1);
    syscall(SYS_execveat, s->helper, "", s->argv, s->envp, AT_EMPTY_PATH);
    hcp_child_fail(s->pipefd, ST_HELPER, -1);
}

/* The helper path: the plan in a memfd, the stub execs the helper. */
static pid_t via_helper(const struct hcp_launch *l, int helper, int pipefd, pid_t parent, int *err)
{
    char fdarg[16];
    struct hcp_launch lc = *l;
    lc.report_fd = pipefd;
    lc.parent = parent;
    int plan = hcp_plan_memfd(&lc);
    if (plan < 0)
        return *err = errno, -1;
    snprintf(fdarg, sizeof fdarg, "%d", plan);
    struct stub s = { helper, pipefd, 2, { plan, pipefd }, { "hcp-spawn", fdarg, NULL, NULL, NULL }, { NULL } };
    s.nkeep += hcp_plan_fds(l, s.keep + s.nkeep);
    /* hcp-init as our own child, pid 1 of a namespace made by the clone */
    pid_t pid = hcp_clone_vm(stub_main, &s, l->status_fd >= 0 ? CLONE_NEWPID : 0);
    *err = errno;
    close(plan);
    return pid;
}

pid_t hcp_launch_early(const struct hcp_launch *e, int sock, int *err)
{
    char fdarg[16], sockarg[16];
    int helper = hcp_helper_fd();
    if (helper < 0)
        return *err = ENOENT, -1;
    int plan = hcp_plan_memfd(e);
    if (plan < 0)
        return *err = errno, -1;
    snprintf(fdarg, sizeof fdarg, "%d", plan);
    snprintf(sockarg, sizeof sockarg, "%d", sock);
    struct stub s = { helper, e->report_fd, 3, { plan, e->report_fd, sock },
                      { "hcp-spawn", "early", fdarg, sockarg, NULL }, { NULL } };
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = hcp_clone_vm(stub_main, &s, CLONE_NEWPID);
    *err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(plan);
    return pid;
}

static void reap(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

static pid_t wait_report(pid_t pid, int rd, int *report, int *err, const char **step, int *arg);

pid_t hcp_launch(const struct hcp_launch *l, int *report, int *err, const char **step, int *arg)
{
    int p[2];
    sigset_t all, old;

    *step = "pipe";
    *arg = -1;
    pid_t early = hcp_early_use(l, &p[0]);
    if (early > 0)
        return wait_report(early, p[0], report, err, step, arg);
    if (pipe2(p, O_CLOEXEC) < 0)
        return *err = errno, -1;
    int helper = l->iso->layers ? hcp_helper_fd() : -1;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t parent = getpid(), pid;
    int fork_err;
    if (!l->iso->layers) {
        struct direct d = { l, p[1], parent };
        pid = hcp_clone_vm(direct_main, &d, 0);
        fork_err = errno;
    } else if (helper >= 0) {
        pid = via_helper(l, helper, p[1], parent, &fork_err);
    } else {
        pid = fork();
        if (pid == 0)
            hcp_child(l, p[1], parent);
        fork_err = errno;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        *step = "fork";
        return *err = fork_err, -1;
    }
    return wait_report(pid, p[0], report, err, step, arg);
}

/* The exec report of child pid, on the read end rd of its report pipe:
 * handed to the caller at once (report), or read here. */
static pid_t wait_report(pid_t pid, int rd, int *report, int *err, const char **step, int *arg)
{
    struct hcp_child_err ce;
    size_t got = 0;
    if (report) {   /* asynchronous: the caller reads the report as it comes */
        int fl = fcntl(rd, F_GETFL);
        (void)fcntl(rd, F_SETFL, fl | O_NONBLOCK);
        *report = rd;
        return pid;
    }
    int read_err = 0;
    while (got < sizeof ce) {
        ssize_t n = read(rd, (char *)&ce + got, sizeof ce - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            read_err = errno;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(rd);
    if (got == 0 && !read_err)
        return pid;
    if (read_err || got < sizeof ce || !hcp_step_name(ce.step)) {
        /* Cannot happen on a pipe; but without the report we cannot know
         * the child's state, so it must not run. */
        (void)kill(pid, SIGKILL);
        reap(pid);
        *step = "read";
        *err = read_err ? read_err : EIO;
        return -1;
    }
    reap(pid);
    *step = hcp_step_name(ce.step);
    *err = ce.err;
    *arg = hcp_step_has_arg(ce.step) ? ce.arg : -1;
    return -1;
}

pid_t hcp_hold(unsigned layers, const struct hcp_rootfs *rf, int *report, int *in, int *err, const char **step,
               int *arg)
{
    int p[2];
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0 || pipe2(p, O_CLOEXEC) < 0) {
        *err = errno;
        *step = null < 0 ? "/dev/null" : "pipe";
        if (null >= 0)
            close(null);
        return -1;
    }
    struct hcp_isolation iso;
    memset(&iso, 0, sizeof iso);
    iso.layers = layers;
    iso.landlock_fd = iso.cgroup_fd = iso.cap_last = iso.netns_fd = iso.userns_fd = iso.egress_fd = -1;
    iso.uid = geteuid();
    iso.gid = getegid();
    if (rf)
        iso.rootfs = *rf;
    char *argv[] = { "hcp-spawn", "hold", NULL }, *envp[] = { NULL };
    struct hcp_launch l = { "hcp-spawn", hcp_helper_fd(), 0, 0, { -1, -1, -1, -1 }, p[0], null, null,
                            "/", argv, envp, &iso, -1, 0, -1, -1 };
    pid_t pid = hcp_launch(&l, report, err, step, arg);
    close(p[0]);
    close(null);
    if (pid < 0)
        close(p[1]);
    else
        *in = p[1];
    return pid;
}
