/* isolation_child.c — the isolation steps the fork child applies between
 * fork and exec (spawn_child.c calls them in order; core.probe runs them in
 * throwaway children). Each is a few checked syscalls: no allocation, no
 * stdio, nothing that could take a lock another thread held at fork. */
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>

/* Kernel headers may predate the running kernel; these are fixed ABI. */
#include "compat.h"
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)       /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)    /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)   /* ABI 5 */
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000U
#endif

/* ---- Landlock ------------------------------------------------------------ */

int hcp_landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, (size_t)0,
                       LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 0)
        return -1;   /* ENOSYS: not built in; EOPNOTSUPP: disabled at boot */
    if (abi < 1)
        return errno = EOPNOTSUPP, -1;
    return (int)abi;
}

/* Only the rights the running ABI knows may be handled (else EINVAL). The
 * ABI 4 (TCP) and ABI 6 (scopes) additions are not filesystem rights: they
 * go in their own words of the ruleset (isolation.c). */
unsigned long long hcp_landlock_rights(int abi, int which)
{
    unsigned long long handled = (LANDLOCK_ACCESS_FS_REFER - 1);   /* ABI 1: bits 0..12 */
    if (abi >= 2)
        handled |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3)
        handled |= LANDLOCK_ACCESS_FS_TRUNCATE;
    if (abi >= 5)
        handled |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
    switch (which) {
    case LL_READ:
        return LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
               LANDLOCK_ACCESS_FS_READ_DIR;
    case LL_FILE:   /* a rule on a file may only carry these (else EINVAL) */
        return handled & (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                          LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                          LANDLOCK_ACCESS_FS_IOCTL_DEV);
    default:        /* LL_HANDLED, LL_WRITE: everything */
        return handled;
    }
}

int hcp_landlock_add(int ruleset_fd, const char *path, int which, int abi)
{
    struct stat st;
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    struct landlock_path_beneath_attr pb;
    pb.allowed_access = hcp_landlock_rights(abi, which);
    pb.parent_fd = fd;
    long r = fstat(fd, &st);
    if (r == 0 && !S_ISDIR(st.st_mode))
        pb.allowed_access &= hcp_landlock_rights(abi, LL_FILE);
    if (r == 0)
        r = syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0U);
    int e = errno;
    close(fd);
    errno = e;
    return r < 0 ? -1 : 0;
}

/* The rules on what exists only in the child: paths on the child's own
 * procfs, and the private /tmp and /dev/shm of a constructed root (tmpfs
 * mounts the parent never saw). */
int hcp_iso_landlock(const struct hcp_isolation *iso, int ruleset_fd)
{
    for (int i = 0; i < iso->nproc_rules; i++)
        if (hcp_landlock_add(ruleset_fd, iso->proc_rules[i].path, iso->proc_rules[i].which,
                             iso->landlock_abi) < 0)
            return -1;
    if (iso->ll_fs && (iso->layers & ISO_ROOTFS) &&
        (hcp_landlock_add(ruleset_fd, "/tmp", LL_WRITE, iso->landlock_abi) < 0 ||
         hcp_landlock_add(ruleset_fd, "/dev/shm", LL_WRITE, iso->landlock_abi) < 0))
        return -1;
    return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, 0U);
}

/* ---- cgroup, namespaces, mounts ------------------------------------------ */

/* Writes all of buf, or fails (a short write to a control file is an error). */
static int write_all(int fd, const char *buf, size_t len)
{
    ssize_t n;
    do
        n = write(fd, buf, len);
    while (n < 0 && errno == EINTR);
    if (n >= 0 && (size_t)n != len)
        return errno = EIO, -1;
    return n < 0 ? -1 : 0;
}

/* Decimal of v into buf (at least 24 bytes), NUL-terminated; the length. */
static size_t fmt_uint(char *buf, unsigned long long v)
{
    char tmp[24];
    size_t n = 0, len = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0)
        buf[len++] = tmp[--n];
    buf[len] = '\0';
    return len;
}

int hcp_iso_cgroup_join(int cgroup_fd)
{
    char buf[24];
    size_t len = fmt_uint(buf, (unsigned long long)getpid());
    return write_all(cgroup_fd, buf, len);
}

static int write_file(const char *path, const char *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int r = write_all(fd, buf, len);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

/* "<id> <id> 1\n": ourselves, mapped to ourselves. */
static int write_map(const char *path, unsigned long long id)
{
    char buf[64];
    size_t n = fmt_uint(buf, id);
    buf[n++] = ' ';
    n += fmt_uint(buf + n, id);
    memcpy(buf + n, " 1\n", 4);
    return write_file(path, buf, n + 3);
}

/* Without root, the network and pid namespaces need a user namespace that
 * owns them; in it we keep our own uid and gid. setgroups must be denied
 * before an unprivileged process may write gid_map (absent before 3.19). */
int hcp_iso_userns(const struct hcp_isolation *iso)
{
    if (iso->userns_fd >= 0)   /* userns = fd: that one, its maps as they are */
        return setns(iso->userns_fd, CLONE_NEWUSER);
    if (unshare(CLONE_NEWUSER) < 0)
        return -1;
    if (write_file("/proc/self/setgroups", "deny", 4) < 0 && errno != ENOENT)
        return -1;
    if (write_map("/proc/self/uid_map", iso->uid) < 0 ||
        write_map("/proc/self/gid_map", iso->gid) < 0)
        return -1;
    return 0;
}

/* A fresh network namespace holds one loopback, down: no route anywhere,
 * not even to the host's 127.0.0.1 or ::1. A given one (netns = fd, or
 * from the pool) is joined instead. */
int hcp_iso_netns(const struct hcp_isolation *iso)
{
    return iso->netns_fd >= 0 ? setns(iso->netns_fd, CLONE_NEWNET) : unshare(CLONE_NEWNET);
}

/* SysV IPC and POSIX message queues of our own: the host's segments are not
 * there, and what the child makes dies with the namespace. */
int hcp_iso_ipcns(void)
{
    return unshare(CLONE_NEWIPC);
}

/* Our next child is pid 1 of the new pid namespace; the mount namespace
 * lets it mount its own /proc without touching ours. */
int hcp_iso_pidns_unshare(int mntns)
{
    return unshare(CLONE_NEWPID | (mntns ? CLONE_NEWNS : 0));
}

/* In pid 1: mounts stop propagating (a shared "/" would carry our /proc back
 * to the host), and a proc of the new namespace goes on /proc, on top of the
 * host's: no host pid in it. Stacked rather than replacing the host's, so a
 * Landlock rule on "/proc" (made on the host's proc root) still covers it;
 * unmounting it needs CAP_SYS_ADMIN, which the caps layer and the seccomp
 * filter (umount2) take away. */
int hcp_iso_pidns_mounts(void)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    return mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

int hcp_iso_pid_max(unsigned pid_max)
{
    char buf[24];
    size_t len = fmt_uint(buf, pid_max);
    return write_file("/proc/sys/kernel/pid_max", buf, len);
}

int hcp_iso_pid_max_fd(int fd, unsigned pid_max)
{
    char buf[24];
    size_t len = fmt_uint(buf, pid_max);
    return write_all(fd, buf, len);
}

/* ---- rlimits, capabilities ---------------------------------------------- */

int hcp_iso_rlimits(const struct hcp_isolation *iso)
{
    for (int i = 0; i < iso->nrlim; i++) {
        struct rlimit r = { iso->rlim[i].value, iso->rlim[i].value };
        if (setrlimit(iso->rlim[i].resource, &r) < 0)
            return -1;
    }
    return 0;
}

/* Groups, then gid, then uid (after the uid, setgroups and setresgid
 * would be refused), each checked: a half-done change must not run. */
static int set_ids(const struct hcp_isolation *iso)
{
    uid_t r, e, s;
    gid_t rg, eg, sg;
    if (setgroups(0, NULL) < 0 || setresgid(iso->run_gid, iso->run_gid, iso->run_gid) < 0 ||
        setresuid(iso->run_uid, iso->run_uid, iso->run_uid) < 0)
        return -1;
    if (getresuid(&r, &e, &s) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return -1;
    if (r != iso->run_uid || e != r || s != r || rg != iso->run_gid || eg != rg || sg != rg ||
        getgroups(0, NULL) != 0)
        return errno = EPERM, -1;
    return 0;
}

int hcp_iso_run_as(const struct hcp_isolation *iso)
{
    return set_ids(iso);
}

#define SECBITS (SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | \
                 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |       \
                 SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/* Securebits and the bounding set need CAP_SETPCAP, so they go first and
 * the sets themselves last; with run_as the ids change in between (the
 * securebits keep the kernel from clearing the sets on setresuid, and the
 * capset that follows empties them). Without CAP_SETPCAP (not root, no
 * user namespace) there is nothing in the sets to begin with beyond what
 * capset clears, and NO_NEW_PRIVS keeps exec from granting anything: the
 * bounding set is then left as it is. cap_last < 0: unknown, drop until
 * EINVAL. */
int hcp_iso_caps(int cap_last, const struct hcp_isolation *run_as)
{
    struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capget, &hdr, data) < 0)
        return -1;
    if (data[0].effective & (1U << CAP_SETPCAP)) {
        int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
        if (bits < 0 || prctl(PR_SET_SECUREBITS, (unsigned long)bits | SECBITS, 0, 0, 0) < 0)
            return -1;
        for (int c = 0; c <= (cap_last < 0 ? 63 : cap_last); c++)
            if (prctl(PR_CAPBSET_DROP, (unsigned long)c, 0, 0, 0) < 0) {
                if (cap_last < 0 && errno == EINVAL)
                    break;
                return -1;
            }
    }
    if (run_as && set_ids(run_as) < 0)
        return -1;
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
        return -1;
    memset(data, 0, sizeof data);
    hdr.version = _LINUX_CAPABILITY_VERSION_3;
    hdr.pid = 0;
    return (int)syscall(SYS_capset, &hdr, data);
}

/* ---- seccomp -------------------------------------------------------------- */

#ifdef __x86_64__

/* EPERM, not kill, for the syscalls a program may try and do without:
 * programs probe (ptrace for a debugger check, io_uring, bpf, keyctl,
 * userfaultfd, a new user namespace for their own sandbox) and carry on
 * when refused, so an error keeps honest programs working while the
 * operation stays impossible. Kill only for what no honest x86_64 program
 * does: a syscall made through another architecture's entry point (i386
 * int 0x80), whose numbers this filter does not know. The x32 ABI (nr with
 * bit 30) gets ENOSYS, as on kernels built without it; clone3 too, so libc
 * falls back to clone, whose flags (unlike clone3's struct) we can read. */
static const struct { unsigned lo, hi; } eperm[] = {
    { __NR_ptrace, __NR_ptrace },
    { __NR_pivot_root, __NR_pivot_root },
    { __NR_mount, __NR_umount2 },                 /* 165-166 */
    { __NR_kexec_load, __NR_kexec_load },
    { __NR_add_key, __NR_keyctl },                /* 248-250, request_key between */
    { __NR_perf_event_open, __NR_perf_event_open },
    { __NR_setns, __NR_setns },
    { __NR_process_vm_readv, __NR_process_vm_writev },   /* 310-311 */
    { 320, 321 },                                 /* kexec_file_load, bpf */
    { 323, 323 },                                 /* userfaultfd */
    { 425, 433 },   /* io_uring_setup/enter/register; open_tree, move_mount,
                       fsopen, fsconfig, fsmount, fspick: the new mount API */
    { 442, 442 },                                 /* mount_setattr */
};

enum { TO_NONE, TO_EPERM, TO_ENOSYS, TO_IOCTL, TO_FLAGS, NLABELS };

struct prog {
    struct sock_filter f[64];
    unsigned char to[64];   /* label the jt of f[i] jumps to, or TO_NONE */
    unsigned char jf_to[64];
    size_t n, at[NLABELS];
};

static void op(struct prog *p, unsigned short code, unsigned k, int to, int jf_to)
{
    p->f[p->n] = (struct sock_filter){ code, 0, 0, k };
    p->to[p->n] = (unsigned char)to;
    p->jf_to[p->n++] = (unsigned char)jf_to;
}

#define LD(off)        op(&p, BPF_LD | BPF_W | BPF_ABS, (unsigned)(off), TO_NONE, TO_NONE)
#define RET(v)         op(&p, BPF_RET | BPF_K, (v), TO_NONE, TO_NONE)
#define JEQ(k, to)     op(&p, BPF_JMP | BPF_JEQ | BPF_K, (k), (to), TO_NONE)
#define ARG_LO(i)      (offsetof(struct seccomp_data, args) + 8 * (i))   /* little-endian */

static size_t build_filter(struct sock_filter *out)
{
    struct prog p;
    p.n = 0;
    LD(offsetof(struct seccomp_data, arch));
    op(&p, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, TO_NONE, TO_NONE);
    p.f[p.n - 1].jt = 1;   /* over the kill */
    RET(SECCOMP_RET_KILL_PROCESS);
    LD(offsetof(struct seccomp_data, nr));
    op(&p, BPF_JMP | BPF_JGE | BPF_K, 0x40000000U, TO_ENOSYS, TO_NONE);
    for (size_t i = 0; i < sizeof eperm / sizeof eperm[0]; i++) {
        if (eperm[i].lo == eperm[i].hi) {
            JEQ(eperm[i].lo, TO_EPERM);
            continue;
        }
        op(&p, BPF_JMP | BPF_JGE | BPF_K, eperm[i].lo, TO_NONE, TO_NONE);
        p.f[p.n - 1].jf = 1;   /* below the range: over the next test */
        op(&p, BPF_JMP | BPF_JGT | BPF_K, eperm[i].hi, TO_NONE, TO_EPERM);
    }
    JEQ(435, TO_ENOSYS);                         /* clone3 */
    JEQ(__NR_ioctl, TO_IOCTL);
    JEQ(__NR_unshare, TO_FLAGS);
    JEQ(__NR_clone, TO_FLAGS);
    RET(SECCOMP_RET_ALLOW);
    /* ioctl(fd, request): only the low 32 bits are the request the kernel
     * acts on, so only they are compared (TIOCSTI | 1 << 32 is TIOCSTI). */
    p.at[TO_IOCTL] = p.n;
    LD(ARG_LO(1));
    JEQ(0x5412, TO_EPERM);   /* TIOCSTI: pushes input into a terminal */
    JEQ(0x541C, TO_EPERM);   /* TIOCLINUX: can too (selection paste) */
    RET(SECCOMP_RET_ALLOW);
    /* unshare(flags) and clone(flags, ...): no new user namespace */
    p.at[TO_FLAGS] = p.n;
    LD(ARG_LO(0));
    op(&p, BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, TO_EPERM, TO_NONE);
    RET(SECCOMP_RET_ALLOW);
    p.at[TO_EPERM] = p.n;
    RET(SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
    p.at[TO_ENOSYS] = p.n;
    RET(SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA));
    for (size_t i = 0; i < p.n; i++) {   /* every jump goes forward */
        if (p.to[i] != TO_NONE)
            p.f[i].jt = (unsigned char)(p.at[p.to[i]] - i - 1);
        if (p.jf_to[i] != TO_NONE)
            p.f[i].jf = (unsigned char)(p.at[p.jf_to[i]] - i - 1);
        out[i] = p.f[i];
    }
    return p.n;
}

int hcp_iso_seccomp_supported(void)
{
    return 1;
}

int hcp_iso_seccomp(void)
{
    struct sock_filter f[64];
    struct sock_fprog prog = { (unsigned short)build_filter(f), f };
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

#else

int hcp_iso_seccomp_supported(void)
{
    return 0;
}

int hcp_iso_seccomp(void)
{
    return errno = ENOSYS, -1;
}

#endif
