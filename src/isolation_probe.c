/* isolation_probe.c — core.probe(): which isolation layers this host can
 * apply, each found out by doing it for real in a throwaway child (the same
 * steps a spawn runs), never by reading version numbers alone. The first
 * call does the work; the answer is kept for the life of the process. */
#include "isolation.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/magic.h>

#include "compat.h"

enum { P_LANDLOCK, P_SECCOMP, P_NETNS, P_PIDNS, P_USERNS, P_CAPS, P_RLIMITS,
       P_CGROUP, P_ROOTFS, P_IPCNS, P_RUN_AS, NPROBES };
static const char *const probe_names[NPROBES] = {
    "landlock", "seccomp", "netns", "pidns", "userns", "caps", "rlimits", "cgroup",
    "rootfs", "ipcns", "run_as",
};

#define WHY 512
struct layer { int ok; char why[WHY]; char note[WHY]; };

static struct {
    int done;
    struct layer l[NPROBES];
    int abi, ll_tcp, ll_scopes;
    int pid_max;                  /* a pid namespace has a pid_max of its own */
    char cg_path[256], cg_own[192];
    int cg_version;
} probed;

typedef int (*probe_fn)(char *why);

/* Runs fn in a child (signals blocked: no handler of the runtime runs
 * there) and reads its verdict; the child explains a failure in a shared
 * page, since it cannot return a string. Returns 1 when fn succeeded. */
static int in_child(probe_fn fn, char *why)
{
    char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    sigset_t all, old;
    int st = 0;
    if (page == MAP_FAILED) {
        snprintf(why, WHY, "mmap: %s", strerror(errno));
        return 0;
    }
    page[0] = '\0';
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn(page) == 0 ? 0 : 1);
    int e = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        snprintf(why, WHY, "fork: %s", strerror(e));
    else
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
    if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        munmap(page, 4096);
        return 1;
    }
    if (pid > 0 && page[0])
        snprintf(why, WHY, "%.*s", WHY - 1, page);
    else if (pid > 0 && WIFSIGNALED(st))
        snprintf(why, WHY, "probe child killed by signal %d", WTERMSIG(st));
    else if (pid > 0)
        snprintf(why, WHY, "probe child failed");
    munmap(page, 4096);
    return 0;
}

#define FAIL(...) (snprintf(why, WHY, __VA_ARGS__), -1)

static struct hcp_isolation self_ids(void)
{
    struct hcp_isolation iso;
    memset(&iso, 0, sizeof iso);
    iso.netns_fd = iso.userns_fd = -1;
    iso.uid = geteuid();
    iso.gid = getegid();
    return iso;
}

static int try_userns(char *why)
{
    struct hcp_isolation iso = self_ids();
    return hcp_iso_userns(&iso) < 0 ? FAIL("user namespace: %s", strerror(errno)) : 0;
}

/* As a spawn does it: a user namespace first when not root. */
static int ns_prelude(char *why)
{
    return geteuid() != 0 ? try_userns(why) : 0;
}

static int try_netns(char *why)
{
    if (ns_prelude(why) < 0)
        return -1;
    struct hcp_isolation iso = self_ids();
    return hcp_iso_netns(&iso) < 0 ? FAIL("unshare(CLONE_NEWNET): %s", strerror(errno)) : 0;
}

static int try_pidns(char *why)
{
    int st;
    if (ns_prelude(why) < 0)
        return -1;
    if (hcp_iso_pidns_unshare(1) < 0)
        return FAIL("unshare(CLONE_NEWPID|CLONE_NEWNS): %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        return FAIL("fork into the pid namespace: %s", strerror(errno));
    if (pid == 0) {
        int r = hcp_iso_pidns_mounts() < 0 ? FAIL("mounting /proc: %s", strerror(errno))
              : getpid() != 1 ? FAIL("not pid 1 in the new namespace") : 0;
        _exit(r < 0);
    }
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return FAIL("waitpid: %s", strerror(errno));
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* In pid 1 of a new pid namespace: its own pid_max (Linux 6.14), read back
 * as written, and the host's untouched (checked by the caller). */
static int pid_max_child(void)
{
    char buf[16];
    if (hcp_iso_pid_max(1000) < 0)
        return -1;
    ssize_t n = hcp_read_small("/proc/sys/kernel/pid_max", buf, sizeof buf);
    return n == 5 && strncmp(buf, "1000\n", 5) == 0 ? 0 : -1;
}

static int try_pid_max(char *why)
{
    int st;
    if (ns_prelude(why) < 0)
        return -1;
    if (hcp_iso_pidns_unshare(1) < 0)
        return FAIL("unshare(CLONE_NEWPID|CLONE_NEWNS): %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        return FAIL("fork into the pid namespace: %s", strerror(errno));
    if (pid == 0)
        _exit(pid_max_child() < 0);
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return FAIL("waitpid: %s", strerror(errno));
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : FAIL("no pid_max of its own");
}

static int read_host_pid_max(void)
{
    char buf[16];
    return hcp_read_small("/proc/sys/kernel/pid_max", buf, sizeof buf) <= 0 ? -1 : atoi(buf);
}

static int try_seccomp(char *why)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return FAIL("prctl(NO_NEW_PRIVS): %s", strerror(errno));
    if (hcp_iso_seccomp() < 0)
        return FAIL("loading the filter: %s", strerror(errno));
    if (syscall(SYS_ptrace, 0L /* PTRACE_TRACEME */, 0L, 0L, 0L) != -1 || errno != EPERM)
        return FAIL("filter loaded, but ptrace was not refused");
    return 0;
}

static int try_caps(char *why)
{
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct d[2];
    if (hcp_iso_caps(-1, NULL) < 0)
        return FAIL("dropping capabilities: %s", strerror(errno));
    if (syscall(SYS_capget, &hdr, d) < 0)
        return FAIL("capget: %s", strerror(errno));
    for (int i = 0; i < 2; i++)
        if (d[i].effective || d[i].permitted || d[i].inheritable)
            return FAIL("capabilities left after the drop");
    return 0;
}

static int try_rlimits(char *why)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) < 0 || setrlimit(RLIMIT_NOFILE, &r) < 0)
        return FAIL("setrlimit: %s", strerror(errno));
    return 0;
}

static void probe_landlock(struct layer *l)
{
    probed.abi = hcp_landlock_abi();
    if (probed.abi < 0) {
        probed.abi = 0;
        snprintf(l->why, WHY, "%s", errno == ENOSYS ? "not built into this kernel"
                 : errno == EOPNOTSUPP ? "disabled at boot (lsm=)" : strerror(errno));
        return;
    }
    struct landlock_ruleset_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.handled_access_fs = hcp_landlock_rights(probed.abi, LL_HANDLED);
    int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U);
    if (fd < 0) {
        snprintf(l->why, WHY, "creating a ruleset: %s", strerror(errno));
        return;
    }
    close(fd);
    l->ok = 1;
    /* the words a spawn asks for beyond the filesystem, each tried */
    struct hcp_landlock_attr more = { 0, LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP, 0 };
    if (probed.abi >= 4 && (fd = (int)syscall(SYS_landlock_create_ruleset, &more, sizeof more, 0U)) >= 0) {
        probed.ll_tcp = 1;
        close(fd);
    }
    more = (struct hcp_landlock_attr){ 0, 0, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL };
    if (probed.abi >= 6 && (fd = (int)syscall(SYS_landlock_create_ruleset, &more, sizeof more, 0U)) >= 0) {
        probed.ll_scopes = 1;
        close(fd);
    }
}

/* ---- rootfs, ipcns, run_as ----------------------------------------------- */

static int try_ipcns(char *why)
{
    if (ns_prelude(why) < 0)
        return -1;
    return hcp_iso_ipcns() < 0 ? FAIL("unshare(CLONE_NEWIPC): %s", strerror(errno)) : 0;
}

static int try_run_as(char *why)
{
    struct hcp_isolation iso = self_ids();
    if (geteuid() != 0)
        return FAIL("not root: the child runs as the runtime's own uid %ld", (long)geteuid());
    iso.run_uid = 65534;
    iso.run_gid = 65534;
    if (hcp_iso_run_as(&iso) < 0)
        return FAIL("setresuid(65534): %s", strerror(errno));
    return geteuid() == 65534 ? 0 : FAIL("still uid %ld after setresuid", (long)geteuid());
}

/* A small view, built as a spawn builds it (a pid namespace, its /proc):
 * /usr read-only, nothing of the host's /home. In pid 1 of the namespace. */
static int build_small_view(char *why)
{
    static struct hcp_rootfs_ent ents[4] = {
        { "/dev", NULL, RF_DEV, 1, 1, 0 }, { "/proc", NULL, RF_PROC, 1, 1, 0 },
        { "/tmp", NULL, RF_TMP, 1, 1, 0 }, { "/usr", "/usr", RF_BIND, 0, 1, 0 },
    };
    struct hcp_rootfs rf = { 4, ents, 0, "mode=1777,size=1048576", -1, 0, 0, NULL };
    int where;
    if (hcp_rootfs_build(&rf, &where) < 0)
        return FAIL("building the view (%s): %s", hcp_rootfs_where(&rf, where), strerror(errno));
    struct stat st;
    if (stat("/usr/bin", &st) < 0)
        return FAIL("/usr/bin missing in the view: %s", strerror(errno));
    if (mkdir("/usr/.hcp-probe", 0700) == 0 || errno != EROFS)
        return FAIL("/usr is not read-only in the view");
    if (stat("/home", &st) == 0 || stat("/proc/1/status", &st) < 0)
        return FAIL("the view shows /home, or has no /proc of its own");
    return 0;
}

static int try_rootfs(char *why)
{
    int st;
    if (ns_prelude(why) < 0)
        return -1;
    if (hcp_iso_pidns_unshare(1) < 0)
        return FAIL("unshare(CLONE_NEWPID|CLONE_NEWNS): %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        return FAIL("fork: %s", strerror(errno));
    if (pid == 0)
        _exit(build_small_view(why) < 0);
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return FAIL("waitpid: %s", strerror(errno));
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* ---- cgroup: a pids controller we can create a child cgroup in and join --- */

static char join_dir[320];

static int try_join(char *why)
{
    char path[sizeof join_dir + 16];
    snprintf(path, sizeof path, "%s/cgroup.procs", join_dir);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return FAIL("%.160s: %s", path, strerror(errno));
    if (hcp_iso_cgroup_join(fd) < 0)
        return FAIL("joining %.160s: %s", join_dir, strerror(errno));
    return 0;
}

static int has_word(const char *path, const char *word)
{
    char buf[512];
    if (hcp_read_small(path, buf, sizeof buf) < 0)
        return 0;
    for (char *save = NULL, *w = strtok_r(buf, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
        if (strcmp(w, word) == 0)
            return 1;
    return 0;
}

/* A cgroup is removed once its last process is reaped; the kernel may take
 * a moment to notice. */
static void rmdir_retry(const char *dir)
{
    struct timespec ms = { 0, 1000000 };
    for (int i = 0; i < 200 && rmdir(dir) < 0 && errno == EBUSY; i++)
        nanosleep(&ms, NULL);
}

/* The runtime's own cgroup in a hierarchy, from /proc/self/cgroup: the
 * line "0::<path>" (v2) or "<n>:<controllers>:<path>" with pids among the
 * controllers (v1). Calls are nested under it, so that a limit the
 * operator put on the runtime bounds them too. */
static int own_cgroup(int version, char *out, size_t sz)
{
    char buf[4096];
    if (hcp_read_small("/proc/self/cgroup", buf, sizeof buf) < 0)
        return -1;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        int match = version == 2 ? strcmp(line, "0:") == 0 : 0;
        for (char *s2 = NULL, *w = version == 1 ? strtok_r(c1 + 1, ",", &s2) : NULL; w; w = strtok_r(NULL, ",", &s2))
            if (strcmp(w, "pids") == 0)
                match = 1;
        if (match && (size_t)snprintf(out, sz, "%s", c2 + 1) < sz)
            return 0;
    }
    return errno = ENOENT, -1;
}

/* Where calls' cgroups go for this hierarchy: under the runtime's own
 * cgroup, which must let us make children with a pids.max (on v2 that needs
 * "+pids" in its cgroup.subtree_control, which the kernel refuses while
 * the runtime itself is a process of it, unless it is the root). */
static int cgroup_candidate(const char *mnt, int version, char *why)
{
    struct statfs sf;
    char f[sizeof join_dir + 64], own[sizeof probed.cg_own], base[sizeof probed.cg_path];
    if (statfs(mnt, &sf) < 0)
        return FAIL("%.160s: %s", mnt, strerror(errno));
    if (sf.f_type != (version == 2 ? CGROUP2_SUPER_MAGIC : CGROUP_SUPER_MAGIC))
        return FAIL("%.160s: not a cgroup v%d mount", mnt, version);
    if (own_cgroup(version, own, sizeof own) < 0)
        return FAIL("%.160s: the runtime's cgroup is not in /proc/self/cgroup", mnt);
    snprintf(base, sizeof base, "%s%s", mnt, strcmp(own, "/") == 0 ? "" : own);
    snprintf(f, sizeof f, "%s/cgroup.controllers", base);
    if (version == 2 && !has_word(f, "pids"))
        return FAIL("%.160s: no pids controller", base);
    snprintf(f, sizeof f, "%s/cgroup.subtree_control", base);
    if (version == 2 && !has_word(f, "pids")) {
        int fd = open(f, O_WRONLY | O_CLOEXEC);
        int ok = fd >= 0 && write(fd, "+pids", 5) == 5;
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (!ok)
            return FAIL("%.160s: cannot enable pids for child cgroups: %s%s", base, strerror(e),
                        e == EBUSY ? " (the runtime is a process of it: start it in a delegated "
                                     "subtree of its own, e.g. systemd-run --scope -p Delegate=yes)" : "");
    }
    snprintf(join_dir, sizeof join_dir, "%s/hcp-probe-%ld", base, (long)getpid());
    if (mkdir(join_dir, 0755) < 0 && errno != EEXIST)
        return FAIL("%.160s: cannot create a cgroup in the runtime's own: %s", base, strerror(errno));
    snprintf(f, sizeof f, "%s/pids.max", join_dir);
    int r = access(f, F_OK) < 0
          ? FAIL("%.160s: no pids.max in a child cgroup (pids not enabled for children)", base)
          : in_child(try_join, why) ? 0 : -1;
    rmdir_retry(join_dir);
    if (r == 0) {
        snprintf(probed.cg_path, sizeof probed.cg_path, "%s", base);
        snprintf(probed.cg_own, sizeof probed.cg_own, "%s", own);
    }
    return r;
}

static void probe_cgroup(struct layer *l)
{
    static const struct { const char *path; int version; } cand[] = {
        { "/sys/fs/cgroup", 2 }, { "/sys/fs/cgroup/unified", 2 }, { "/sys/fs/cgroup/pids", 1 },
    };
    size_t used = 0;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        char why[WHY];
        if (cgroup_candidate(cand[i].path, cand[i].version, why) == 0) {
            l->ok = 1;
            probed.cg_version = cand[i].version;
            return;
        }
        used += (size_t)snprintf(l->why + used, WHY - used, "%s%s", used ? "; " : "", why);
        if (used >= WHY)
            used = WHY - 1;
    }
}

static const probe_fn probe_fns[NPROBES] = {
    [P_SECCOMP] = try_seccomp, [P_NETNS] = try_netns, [P_PIDNS] = try_pidns,
    [P_USERNS] = try_userns, [P_CAPS] = try_caps, [P_RLIMITS] = try_rlimits,
    [P_ROOTFS] = try_rootfs, [P_IPCNS] = try_ipcns, [P_RUN_AS] = try_run_as,
};

/* One layer, probed now (its note and reason start empty). */
static void probe_one(int i)
{
    memset(&probed.l[i], 0, sizeof probed.l[i]);
    if (i == P_LANDLOCK) {
        probed.ll_tcp = probed.ll_scopes = 0;
        probe_landlock(&probed.l[i]);
    }
    else if (i == P_CGROUP)
        probe_cgroup(&probed.l[i]);
    else if (probe_fns[i])
        probed.l[i].ok = in_child(probe_fns[i], probed.l[i].why);
}

static void probe_pid_max(void)
{
    char why[WHY];
    int before = read_host_pid_max();
    probed.pid_max = in_child(try_pid_max, why) && read_host_pid_max() == before;
}

static void probe_all(void)
{
    for (int i = 0; i < NPROBES; i++)
        probe_one(i);
    if (probed.l[P_PIDNS].ok)
        probe_pid_max();
    if (!hcp_iso_seccomp_supported()) {
        probed.l[P_SECCOMP].ok = 0;
        snprintf(probed.l[P_SECCOMP].why, WHY, "unsupported architecture");
    }
    if (probed.l[P_CAPS].ok && geteuid() != 0)
        snprintf(probed.l[P_CAPS].note, WHY, "not root: no capabilities to drop; the "
                 "bounding set is kept unless a user namespace is made (netns, pidns), "
                 "and NO_NEW_PRIVS keeps exec from granting any");
    probed.done = 1;
}

size_t hcp_probe_blob_size(void)
{
    return sizeof probed;
}

static const char *probe_source = "none";

/* A cached answer may claim more than the host has (the spawn that needs
 * it then fails closed) but is never believed when it claims less: whoever
 * could write the cache must not be able to switch a layer off for
 * "auto". So every layer it calls unavailable is probed again — on a host
 * that has them all, nothing is — and Landlock, whose probe makes no
 * process, always (its TCP and scope words too). */
static void reprobe_missing(void)
{
    for (int i = 0; i < NPROBES; i++)
        if (i == P_LANDLOCK || (!probed.l[i].ok && !(i == P_SECCOMP && !hcp_iso_seccomp_supported())))
            probe_one(i);
    if (probed.l[P_PIDNS].ok && !probed.pid_max)
        probe_pid_max();
    if (probed.l[P_CAPS].ok && geteuid() != 0 && !probed.l[P_CAPS].note[0])
        snprintf(probed.l[P_CAPS].note, WHY, "not root: no capabilities to drop; the "
                 "bounding set is kept unless a user namespace is made (netns, pidns), "
                 "and NO_NEW_PRIVS keeps exec from granting any");
}

/* The answer from this boot's cache when it holds one for this process
 * (probe_cache.c), else probed now and cached. */
static void probe_cached(void)
{
    char key[8192], path[PATH_MAX];
    int have = hcp_probe_key(key, sizeof key) >= 0 && hcp_probe_cache_path(key, path, sizeof path) == 0;
    if (have && hcp_probe_cache_read(path, key, &probed, sizeof probed) == 0 && probed.done) {
        int abi = hcp_landlock_abi();
        if ((abi < 0 ? 0 : abi) == probed.abi) {
            reprobe_missing();
            probe_source = "cache";
            return;
        }
    }
    memset(&probed, 0, sizeof probed);
    probe_all();
    probe_source = "probed";
    if (have && hcp_probe_cache_write(path, key, &probed, sizeof probed) == 0)
        probe_source = "probed, cached";
}

unsigned hcp_probe_early_layers(void)
{
    if (!probed.done)
        probe_cached();
    if (!probed.l[P_ROOTFS].ok || !probed.l[P_PIDNS].ok || !probed.l[P_IPCNS].ok || !probed.pid_max)
        return 0;
    return ISO_ROOTFS | ISO_PIDNS | ISO_IPCNS | (probed.l[P_NETNS].ok ? ISO_NETNS : 0);
}

/* core.probe_source() -> where this process's probe answer came from:
 * "cache", "probed, cached", "probed" (no cache here), or "none" yet. */
int hcp_probe_source(lua_State *L)
{
    lua_pushstring(L, probe_source);
    return 1;
}

/* core.probe() -> { <layer> = { available = bool, reason = string|nil, ... } } */
int hcp_probe(lua_State *L)
{
    if (!probed.done)
        probe_cached();
    lua_createtable(L, 0, NPROBES);
    for (int i = 0; i < NPROBES; i++) {
        const struct layer *l = &probed.l[i];
        lua_createtable(L, 0, 4);
        lua_pushboolean(L, l->ok);
        lua_setfield(L, -2, "available");
        if (!l->ok) {
            lua_pushstring(L, l->why[0] ? l->why : "unknown");
            lua_setfield(L, -2, "reason");
        }
        if (l->note[0]) {
            lua_pushstring(L, l->note);
            lua_setfield(L, -2, "note");
        }
        if (i == P_LANDLOCK) {
            lua_pushinteger(L, probed.abi);
            lua_setfield(L, -2, "abi");
            lua_pushboolean(L, probed.ll_tcp);
            lua_setfield(L, -2, "tcp");
            lua_pushboolean(L, probed.ll_scopes);
            lua_setfield(L, -2, "scopes");
        }
        if (i == P_PIDNS) {
            lua_pushboolean(L, probed.pid_max);
            lua_setfield(L, -2, "pid_max");
        }
        if (i == P_CGROUP && l->ok) {
            lua_pushstring(L, probed.cg_path);
            lua_setfield(L, -2, "path");
            lua_pushstring(L, probed.cg_own);
            lua_setfield(L, -2, "own");
            lua_pushinteger(L, probed.cg_version);
            lua_setfield(L, -2, "version");
        }
        if (i == P_ROOTFS && l->ok) {
            long r = syscall(SYS_mount_setattr, -1, "", 0, NULL, (size_t)0);
            lua_pushstring(L, r < 0 && errno == ENOSYS ? "mount(2) and remounts" : "mount_setattr");
            lua_setfield(L, -2, "method");
        }
        lua_setfield(L, -2, probe_names[i]);
    }
    return 1;
}
