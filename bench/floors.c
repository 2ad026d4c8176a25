/* floors.c — what each isolation technique costs by itself on this host,
 * measured by a small C loop (make bench prints it beside the figures, so a
 * target that is missed shows the floor that bounds it). Each case starts
 * /bin/true through clone(CLONE_VM|CLONE_VFORK) — posix_spawn's way — with
 * one technique applied in the child first, and waits; the cases run
 * interleaved, N rounds, at the cadence given (ms of idle before each).
 *
 *   floors N GAP_MS [CGROUP_DIR]
 *   floors par K N
 *   floors sample
 *
 * Prints one line per case: "<name>\t<median us>\t<p90 us>". The last
 * case is auto's whole kernel sequence in one child, measured rather than
 * summed. `par`: K processes starting N children each, back to back, first
 * by posix_spawn, then with auto's sequence: "par\t<case>\t<calls/s>" —
 * the floor of K calls in flight. `sample`: bench/sampler.c's protocol —
 * each line "<k>" on stdin starts one child, k = 0 by posix_spawn, k = 1
 * with auto's sequence, and answers "<us> <status>" — so bench/latency.lua
 * takes the floor interleaved with its own cases, in the same run. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>

#include "../src/compat.h"   /* the mount API's numbers where the headers are older */

static char *argv_true[] = { "true", NULL }, *envp[] = { NULL };
static int netns_fd = -1, prebuilt_fd = -1;
static char forker[4096];                  /* bench_forker beside us; "" when not built */
static int zygote_in = -1, zygote_out = -1;   /* its serve mode's stdin and stdout */
static volatile int ruleset_fd = -1;   /* read by the CLONE_VM child: no store may be elided */
static const char *cgroup_dir;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void load_filter(void)   /* a filter as long as the core's (36) */
{
    struct sock_filter f[36];
    for (int i = 0; i < 35; i++)
        f[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 10000 + i, 0, 0);
    f[35] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog p = { 36, f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p, 0, 0))
        _exit(90);
}

static void drop_caps(void)
{
    struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    for (int c = 0; c <= 40; c++)
        prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
    if (syscall(SYS_capset, &h, d))
        _exit(91);
}

/* The system paths a call's Landlock ruleset holds (isolation.SYSTEM_READ). */
static const char *const ll_paths[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib64", "/opt", "/etc/ld.so.cache", "/etc/ld.so.conf",
    "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
    "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/gai.conf", "/etc/protocols", "/etc/services",
    "/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/magic", "/etc/magic.mime",
    "/etc/mime.types", "/etc/xml", "/etc/sgml", "/etc/terminfo", "/etc/inputrc", "/etc/locale.alias",
    "/sys/devices/system/cpu", "/proc", "/tmp", "/dev/null", "/dev/zero", "/dev/full", "/dev/random",
    "/dev/urandom", NULL,
};

static int build_ruleset(void)
{
    struct landlock_ruleset_attr a = { .handled_access_fs = (1ULL << 13) - 1 };
    int fd = (int)syscall(SYS_landlock_create_ruleset, &a, sizeof a, 0);
    for (int i = 0; fd >= 0 && ll_paths[i]; i++) {
        int p = open(ll_paths[i], O_PATH | O_CLOEXEC);
        if (p < 0)
            continue;
        struct stat st;
        fstat(p, &st);
        struct landlock_path_beneath_attr pb = { S_ISDIR(st.st_mode) ? (1ULL << 13) - 1 : 7, p };
        syscall(SYS_landlock_add_rule, fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
        close(p);
    }
    return fd;
}

/* The view's binds (isolation.SYSTEM_READ, the devices, a jail), each
 * read-only but the jail, in a tmpfs root: what a call's view built from
 * nothing needs at least. /bin, /lib and their like are links on merged-/usr
 * hosts: a link, as the view keeps them. */
static const char *const view_paths[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/etc/ld.so.cache",
    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone", "/etc/nsswitch.conf",
    "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/gai.conf",
    "/etc/protocols", "/etc/services", "/etc/ssl", "/etc/ca-certificates", "/etc/alternatives", "/etc/magic",
    "/etc/magic.mime", "/etc/mime.types", "/etc/xml", "/etc/sgml", "/etc/terminfo", "/etc/inputrc",
    "/etc/locale.alias", "/etc/papersize", "/sys/devices/system/cpu", "/dev/null", "/dev/zero", "/dev/full",
    "/dev/random", "/dev/urandom", NULL,
};
static char view_root[64] = "/tmp/hcp-floor-root-XXXXXX";   /* where the child mounts its root */
static char view_jail[64] = "/tmp/hcp-floor-jail-XXXXXX";   /* a directory of our own, bound read-write */

/* mkdir -p of path's parents under the new root r (a short path). */
static void parents(const char *r, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s%s", r, path);
    for (char *c = buf + strlen(r) + 1; (c = strchr(c, '/')) != NULL; c++) {
        *c = '\0';
        mkdir(buf, 0755);
        *c = '/';
    }
}

/* One bind: the host path cloned, made read-only, moved onto a mount point
 * of the same type (or a link where the host has one). */
static int bind_one(const char *r, const char *path, int rw)
{
    char dest[256], link[256];
    struct stat st;
    if (lstat(path, &st) < 0)
        return 0;   /* not on this host */
    parents(r, path);
    snprintf(dest, sizeof dest, "%s%s", r, path);
    if (S_ISLNK(st.st_mode)) {
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n < 0)
            return -1;
        link[n] = '\0';
        return symlink(link, dest);
    }
    int fd = (int)syscall(SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (fd < 0)
        return -1;
    if (S_ISDIR(st.st_mode) ? mkdir(dest, 0755) : close(open(dest, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)))
        return -1;
    struct hcp_mount_attr a = { .attr_set = (rw ? 0 : MOUNT_ATTR_RDONLY) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
    if (S_ISCHR(st.st_mode))
        a.attr_set &= ~(unsigned long long)MOUNT_ATTR_NODEV;
    int r2 = (int)syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a);
    if (r2 == 0)
        r2 = (int)syscall(SYS_move_mount, fd, "", AT_FDCWD, dest, MOVE_MOUNT_F_EMPTY_PATH);
    close(fd);
    return r2;
}

/* A fresh mount namespace whose root is a tmpfs holding only the view,
 * pivoted into, the host's root detached; then a private /proc is not
 * mounted (the pid namespace case has its own). */
static void build_view(void)
{
    const char *r = view_root;
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
        mount("tmpfs", r, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"))
        _exit(96);
    for (int i = 0; view_paths[i]; i++)
        if (bind_one(r, view_paths[i], 0) < 0)
            _exit(97);
    char old[96];
    snprintf(old, sizeof old, "%s/.old", r);
    if (bind_one(r, view_jail, 1) < 0 || mkdir(old, 0700) || syscall(SYS_pivot_root, r, old) || chdir("/") ||
        umount2("/.old", MNT_DETACH) || rmdir("/.old"))
        _exit(98);
}

enum { C_SPAWN, C_VFORK, C_TRAMPOLINE, C_ZYGOTE, C_SETSID, C_IPCNS, C_NETNS, C_SETNS, C_MNTNS, C_VIEW, C_PIDNS, C_PIDMAX, C_SECCOMP,
       C_CAPS, C_LANDLOCK, C_LANDLOCK_PRE, C_CGROUP, C_AUTO, C_ONECALL, NCASES };
static const char *const names[NCASES] = {
    "posix_spawn+wait (reference)", "clone(VM|VFORK)+exec",
    "+ a static helper exec'd first (hcp-spawn)", "a helper started once forks it (zygote)",
    "+ setsid (a session: an autogroup)",
    "+ fresh IPC namespace", "+ fresh network namespace", "+ setns into an existing netns",
    "+ fresh mount namespace (copy)", "+ a view built from nothing (41 paths, pivot_root)",
    "+ fresh pid namespace (its init starts the program)", "+ pid_max in it",
    "+ seccomp filter, 36 instructions", "+ capabilities dropped (41 prctl)",
    "+ Landlock, 39 rules built and applied", "+ Landlock, a ruleset built once, applied",
    "+ cgroup.procs write (join a cgroup)",
    "auto's sequence in one child (measured)",
    "the same from nothing, as a one-call process must (measured)",
};

static volatile int current;

/* The program (pid 2): for auto's cases it loads the filter, drops the
 * capabilities and applies Landlock first (`fresh`, one call from nothing:
 * a ruleset built now rather than the prebuilt one), then execs true. */
static int prog_layers, fresh;

static int program(void *arg)
{
    (void)arg;
    if (prog_layers) {
        int rs = fresh ? build_ruleset() : ruleset_fd;
        load_filter();
        drop_caps();
        if (rs < 0 || syscall(SYS_landlock_restrict_self, rs, 0))
            _exit(93);
    }
    execve(fresh ? "/usr/bin/true" : "/bin/true", argv_true, envp);
    _exit(99);
}

/* Pid 1 of the namespace the clone made (CLONE_NEWPID), as hcp-init is for
 * a root runtime: its own /proc first (`proc`, when nothing was mounted
 * before), pid_max, then the program started as hcp-init starts it
 * (CLONE_VM|CLONE_VFORK: no page table copied), waited for. */
static _Noreturn void as_init(int proc, int pid_max)
{
    static char stack[1 << 16] __attribute__((aligned(16)));
    if (proc && (mkdir("/proc", 0555) || mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)))
        _exit(92);
    if (pid_max) {
        int fd = open("/proc/sys/kernel/pid_max", O_WRONLY);
        if (fd < 0 || write(fd, "513", 3) != 3)
            _exit(92);
        close(fd);
    }
    int st;
    pid_t q = clone(program, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    if (q < 0 || waitpid(q, &st, 0) < 0)
        _exit(94);
    _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 94);
}

static int child(void *arg)
{
    (void)arg;
    char buf[24];
    switch (current) {
    case C_TRAMPOLINE: {
        char *av[] = { "bench_forker", "exec", "/bin/true", NULL };
        execve(forker, av, envp);
        _exit(99);
    }
    case C_SETSID: if (setsid() < 0) _exit(80); break;
    case C_IPCNS: if (unshare(CLONE_NEWIPC)) _exit(81); break;
    case C_NETNS: if (unshare(CLONE_NEWNET)) _exit(82); break;
    case C_SETNS: if (setns(netns_fd, CLONE_NEWNET)) _exit(83); break;
    case C_MNTNS: if (unshare(CLONE_NEWNS)) _exit(84); break;
    case C_VIEW: build_view(); execve("/usr/bin/true", argv_true, envp); _exit(99);
    case C_SECCOMP: load_filter(); break;
    case C_CAPS: drop_caps(); break;
    case C_LANDLOCK: case C_LANDLOCK_PRE:
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || syscall(SYS_landlock_restrict_self, ruleset_fd, 0))
            _exit(85);
        break;
    case C_CGROUP: {
        int fd = open(cgroup_dir, O_WRONLY);
        snprintf(buf, sizeof buf, "%d", getpid());
        if (fd < 0 || write(fd, buf, strlen(buf)) < 0)
            _exit(86);
        close(fd);
        break;
    }
    case C_PIDNS: case C_PIDMAX:   /* cloned as pid 1 of a fresh pid namespace */
        prog_layers = fresh = 0;
        as_init(0, current == C_PIDMAX);
    case C_AUTO:   /* what the helper does for auto as root, in its order */
        if (unshare(CLONE_NEWIPC) || setns(netns_fd, CLONE_NEWNET) || unshare(CLONE_NEWNS))
            _exit(91);
        prog_layers = 1, fresh = 0;
        as_init(0, 1);
    case C_ONECALL:   /* C_AUTO with nothing made before: what `hcp run` needs at least */
        if (unshare(CLONE_NEWIPC | CLONE_NEWNET))
            _exit(91);
        build_view();
        prog_layers = fresh = 1;
        as_init(1, 1);
    default: break;
    }
    execve("/bin/true", argv_true, envp);
    _exit(99);
}

static double sample(int c)
{
    static char stack[1 << 16] __attribute__((aligned(16)));
    double t0 = now_us();
    pid_t pid;
    int st;
    current = c;
    if (c == C_LANDLOCK)
        ruleset_fd = build_ruleset();
    else if (c == C_LANDLOCK_PRE || c == C_AUTO)
        ruleset_fd = prebuilt_fd;
    if (c == C_ZYGOTE) {   /* the helper forks and waits; we wait for its word */
        char k = 'f';
        if (write(zygote_in, &k, 1) != 1 || read(zygote_out, &k, 1) != 1 || k != 'k')
            return -1;
        return now_us() - t0;
    }
    if (c == C_SPAWN)
        posix_spawn(&pid, "/bin/true", NULL, NULL, argv_true, envp);
    else
        pid = clone(child, stack + sizeof stack,
                    CLONE_VM | CLONE_VFORK | SIGCHLD |
                        (c == C_PIDNS || c == C_PIDMAX || c == C_AUTO || c == C_ONECALL ? CLONE_NEWPID : 0),
                    NULL);
    if (c == C_LANDLOCK)
        close(ruleset_fd);
    ruleset_fd = -1;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return now_us() - t0;
}

static void remove_view_dirs(void)
{
    rmdir(view_root);
    rmdir(view_jail);
}

/* bench_forker, beside this program (make bench builds both), started in
 * its serve mode: the zygote case's helper, started once. */
static void start_forker(void)
{
    ssize_t n = readlink("/proc/self/exe", forker, sizeof forker - 32);
    char *slash = n > 0 ? memrchr(forker, '/', (size_t)n) : NULL;
    int in[2], out[2];
    if (!slash || (strcpy(slash + 1, "bench_forker"), access(forker, X_OK) != 0) || pipe2(in, O_CLOEXEC) ||
        pipe2(out, O_CLOEXEC)) {
        forker[0] = '\0';
        return;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char *av[] = { "bench_forker", "serve", "/bin/true", NULL };
    pid_t pid;
    if (posix_spawn(&pid, forker, &fa, NULL, av, envp) != 0)
        forker[0] = '\0';
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    zygote_in = in[1];   /* its EOF ends it when we exit */
    zygote_out = out[0];
}

/* A network namespace to join, made once; a Landlock ruleset built once;
 * the directories of the view's case; the zygote case's helper. */
static void setup(void)
{
    start_forker();
    if (mkdtemp(view_root) && mkdtemp(view_jail))
        atexit(remove_view_dirs);
    else
        view_root[0] = '\0';
    int p[2];
    if (pipe(p) == 0) {   /* a network namespace to join, made once */
        pid_t h = fork();
        if (h == 0) {
            if (unshare(CLONE_NEWNET) == 0 && write(p[1], "x", 1) == 1)
                pause();
            _exit(0);
        }
        char c, path[64];
        if (read(p[0], &c, 1) == 1) {
            snprintf(path, sizeof path, "/proc/%d/ns/net", h);
            netns_fd = open(path, O_RDONLY | O_CLOEXEC);
        }
        kill(h, SIGKILL);
        waitpid(h, NULL, 0);
    }
    prebuilt_fd = build_ruleset();
}

/* K processes, N children each, back to back: calls/s of case c. */
static double parallel(int c, int k, int n)
{
    double t0 = now_us();
    for (int i = 0; i < k; i++)
        if (fork() == 0) {
            for (int j = 0; j < n; j++)
                if (sample(c) < 0)
                    _exit(1);
            _exit(0);
        }
    int st, bad = 0;
    for (int i = 0; i < k; i++)
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad = 1;
    return bad ? -1 : k * n / ((now_us() - t0) / 1e6);
}

/* The sampler protocol of bench/sampler.c, for the floor of auto's call. */
static int serve(void)
{
    char line[64];
    setup();
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        int k = atoi(line);
        double t = k == 0                                            ? sample(C_SPAWN)
                   : k == 1 && netns_fd >= 0 && prebuilt_fd >= 0 ? sample(C_AUTO)
                   : k == 2 && view_root[0]                      ? sample(C_ONECALL)
                                                                 : -1;
        printf("%.1f %d\n", t < 0 ? -1.0 : t, t < 0 ? 1 : 0);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "sample") == 0)
        return serve();
    if (argc == 4 && strcmp(argv[1], "par") == 0) {
        int k = atoi(argv[2]), n = atoi(argv[3]);
        setup();
        printf("par\tposix_spawn\t%.0f\n", parallel(C_SPAWN, k, n));
        printf("par\tauto\t%.0f\n", netns_fd >= 0 && prebuilt_fd >= 0 ? parallel(C_AUTO, k, n) : -1.0);
        return 0;
    }
    if (argc < 3)
        return fprintf(stderr, "usage: floors N GAP_MS [CGROUP_DIR/cgroup.procs] | floors par K N | floors sample\n"), 2;
    int n = atoi(argv[1]), gap = atoi(argv[2]);
    cgroup_dir = argc > 3 ? argv[3] : NULL;
    setup();
    double *s = calloc((size_t)n * NCASES, sizeof *s);
    int skip[NCASES] = { 0 };
    skip[C_TRAMPOLINE] = skip[C_ZYGOTE] = forker[0] == '\0';
    skip[C_SETNS] = netns_fd < 0;
    skip[C_CGROUP] = cgroup_dir == NULL;
    skip[C_VIEW] = skip[C_ONECALL] = view_root[0] == '\0';
    skip[C_LANDLOCK_PRE] = prebuilt_fd < 0;
    skip[C_AUTO] = netns_fd < 0 || prebuilt_fd < 0;
    for (int r = 0; r < n; r++)
        for (int k = 0; k < NCASES; k++) {
            int c = (r + k) % NCASES;
            if (skip[c])
                continue;
            if (gap) {
                struct timespec ts = { gap / 1000, (gap % 1000) * 1000000L };
                nanosleep(&ts, NULL);
            }
            double t = sample(c);
            if (t < 0)
                skip[c] = 1;   /* not possible here */
            s[c * n + r] = t;
        }
    for (int c = 0; c < NCASES; c++) {
        if (skip[c]) {
            printf("%s\t-\t-\n", names[c]);
            continue;
        }
        qsort(s + c * n, (size_t)n, sizeof *s, cmp);
        printf("%s\t%.0f\t%.0f\n", names[c], s[c * n + n / 2], s[c * n + n * 9 / 10]);
    }
    return 0;
}
