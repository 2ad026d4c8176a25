/* nolibc.c — the few C library functions the spawn helper uses, as raw
 * x86_64 system calls, with glibc's prototypes (its headers are still used
 * for types and constants). Why not glibc itself: a static glibc program
 * spends ~250 us starting on this kind of VM (CPU feature probing with
 * cpuid, which traps to the hypervisor), more than the isolation it sets
 * up; this starts in a few microseconds. Single-threaded, no allocation,
 * no stdio: exactly what code between fork and exec may use anyway.
 *
 * Signal handlers: plain ones only (no SA_SIGINFO), returning through an
 * rt_sigreturn trampoline of our own; hcp-init catches the signals that
 * would end a process. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "the spawn helper's system calls are written for x86_64"
#endif

int main(int argc, char **argv);
_Noreturn void hcp_start_c(long *sp);
int __libc_current_sigrtmin(void);

static int err_no;

int *__errno_location(void)
{
    return &err_no;
}

static long sc6(long n, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return r;
}

static long ret(long r)
{
    if (r < 0 && r > -4096) {
        err_no = (int)-r;
        return -1;
    }
    return r;
}

#define S0(n) ret(sc6((n), 0, 0, 0, 0, 0, 0))
#define S1(n, a) ret(sc6((n), (long)(a), 0, 0, 0, 0, 0))
#define S2(n, a, b) ret(sc6((n), (long)(a), (long)(b), 0, 0, 0, 0))
#define S3(n, a, b, c) ret(sc6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0))
#define S4(n, a, b, c, d) ret(sc6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0))
#define S5(n, a, b, c, d, e) ret(sc6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0))

/* ---- entry ----------------------------------------------------------------- */

__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "  xor %rbp, %rbp\n"
        "  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n"
        "  call hcp_start_c\n"
        "  hlt\n");

_Noreturn void hcp_start_c(long *sp)
{
    int argc = (int)sp[0];
    _exit(main(argc, (char **)(sp + 1)));
}

void _exit(int status)
{
    for (;;)
        sc6(SYS_exit_group, status, 0, 0, 0, 0, 0);
}

long syscall(long n, ...)
{
    va_list ap;
    long a[6];
    va_start(ap, n);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    return ret(sc6(n, a[0], a[1], a[2], a[3], a[4], a[5]));
}

/* ---- files ------------------------------------------------------------------ */

int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    long mode = (flags & (O_CREAT | __O_TMPFILE)) ? va_arg(ap, long) : 0;
    va_end(ap);
    return (int)S4(SYS_openat, AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    long mode = (flags & (O_CREAT | __O_TMPFILE)) ? va_arg(ap, long) : 0;
    va_end(ap);
    return (int)S4(SYS_openat, dirfd, path, flags, mode);
}

int close(int fd) { return (int)S1(SYS_close, fd); }
ssize_t read(int fd, void *buf, size_t n) { return S3(SYS_read, fd, buf, n); }
ssize_t write(int fd, const void *buf, size_t n) { return S3(SYS_write, fd, buf, n); }
int dup(int fd) { return (int)S1(SYS_dup, fd); }
int dup2(int fd, int to) { return (int)S2(SYS_dup2, fd, to); }
int pipe2(int fds[2], int flags) { return (int)S2(SYS_pipe2, fds, flags); }
int chdir(const char *path) { return (int)S1(SYS_chdir, path); }
int chroot(const char *path) { return (int)S1(SYS_chroot, path); }
int mkdir(const char *path, mode_t mode) { return (int)S2(SYS_mkdir, path, mode); }
int mkdirat(int dirfd, const char *path, mode_t mode) { return (int)S3(SYS_mkdirat, dirfd, path, mode); }
int rmdir(const char *path) { return (int)S1(SYS_rmdir, path); }
int symlinkat(const char *to, int dirfd, const char *path) { return (int)S3(SYS_symlinkat, to, dirfd, path); }
int fstat(int fd, struct stat *st) { return (int)S2(SYS_fstat, fd, st); }

int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    return (int)S4(SYS_newfstatat, dirfd, path, st, flags);
}

int stat(const char *path, struct stat *st)
{
    return fstatat(AT_FDCWD, path, st, 0);
}

int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return (int)S3(SYS_fcntl, fd, cmd, arg);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    return (int)S3(SYS_poll, fds, n, timeout);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    long r = ret(sc6(SYS_mmap, (long)addr, (long)len, prot, flags, fd, (long)off));
    return r == -1 ? MAP_FAILED : (void *)r;
}

/* statfs reports the mount flags (ST_*) in f_flags, with ST_VALID set. */
int statvfs(const char *path, struct statvfs *sv)
{
    struct statfs sf;
    if (S2(SYS_statfs, path, &sf) < 0)
        return -1;
    memset(sv, 0, sizeof *sv);
    sv->f_bsize = (unsigned long)sf.f_bsize;
    sv->f_frsize = (unsigned long)(sf.f_frsize ? sf.f_frsize : sf.f_bsize);
    sv->f_blocks = sf.f_blocks;
    sv->f_bfree = sf.f_bfree;
    sv->f_bavail = sf.f_bavail;
    sv->f_files = sf.f_files;
    sv->f_ffree = sf.f_ffree;
    sv->f_favail = sf.f_ffree;
    sv->f_namemax = (unsigned long)sf.f_namelen;
    sv->f_flag = (unsigned long)sf.f_flags & ~(unsigned long)0x20;   /* ST_VALID */
    return 0;
}

/* ---- mounts, namespaces ------------------------------------------------------ */

int mount(const char *src, const char *tgt, const char *type, unsigned long flags, const void *data)
{
    return (int)S5(SYS_mount, src, tgt, type, flags, data);
}

int umount2(const char *tgt, int flags) { return (int)S2(SYS_umount2, tgt, flags); }
int unshare(int flags) { return (int)S1(SYS_unshare, flags); }
int setns(int fd, int type) { return (int)S2(SYS_setns, fd, type); }

/* ---- sockets: the egress proxy's listeners (egress_child.c), hcp-init's handover (spawn_child.c) ---- */

int socket(int domain, int type, int proto) { return (int)S3(SYS_socket, domain, type, proto); }
int bind(int fd, const struct sockaddr *a, socklen_t len) { return (int)S3(SYS_bind, fd, a, len); }
int listen(int fd, int backlog) { return (int)S2(SYS_listen, fd, backlog); }
int socketpair(int domain, int type, int proto, int sv[2]) { return (int)S4(SYS_socketpair, domain, type, proto, sv); }

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    return (int)S5(SYS_setsockopt, fd, level, name, val, len);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) { return S3(SYS_sendmsg, fd, msg, flags); }
ssize_t recvmsg(int fd, struct msghdr *msg, int flags) { return S3(SYS_recvmsg, fd, msg, flags); }

int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)S3(SYS_ioctl, fd, req, arg);
}

/* ---- processes ---------------------------------------------------------------- */

pid_t fork(void)
{
    return (pid_t)S5(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

/* clone(2) the way glibc's wrapper does it: the child starts on `stack`
 * (its top), runs fn(arg) there and exits with what it returns. Written in
 * assembly because the child must not touch a byte of the parent's frame
 * — with CLONE_VM they share it — and C code after a raw clone would.
 * clone_raw returns the kernel's answer (a pid, or -errno) in the parent. */
long hcp_clone_raw(int (*fn)(void *), void *stack, long flags, void *arg);
__asm__(".text\n"
        ".global hcp_clone_raw\n"
        "hcp_clone_raw:\n"
        "  and $-16, %rsi\n"          /* the child's stack: fn and arg on it */
        "  sub $16, %rsi\n"
        "  mov %rdi, (%rsi)\n"
        "  mov %rcx, 8(%rsi)\n"
        "  mov %rdx, %rdi\n"          /* clone(flags, stack, 0, 0, 0) */
        "  xor %edx, %edx\n"
        "  xor %r10d, %r10d\n"
        "  xor %r8d, %r8d\n"
        "  mov $56, %eax\n"
        "  syscall\n"
        "  test %rax, %rax\n"
        "  jnz 1f\n"
        "  xor %ebp, %ebp\n"          /* the child, on its own stack */
        "  pop %rax\n"
        "  pop %rdi\n"
        "  call *%rax\n"
        "  mov %eax, %edi\n"
        "  mov $231, %eax\n"          /* exit_group */
        "  syscall\n"
        "  hlt\n"
        "1:\n"
        "  ret\n");

int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
    return (int)ret(hcp_clone_raw(fn, stack, flags, arg));
}

int execve(const char *path, char *const argv[], char *const envp[])
{
    return (int)S3(SYS_execve, path, argv, envp);
}

pid_t waitpid(pid_t pid, int *status, int options)
{
    return (pid_t)S4(SYS_wait4, pid, status, options, 0);
}

pid_t getpid(void) { return (pid_t)S0(SYS_getpid); }
pid_t getppid(void) { return (pid_t)S0(SYS_getppid); }
pid_t setsid(void) { return (pid_t)S0(SYS_setsid); }
int setpgid(pid_t pid, pid_t pgid) { return (int)S2(SYS_setpgid, pid, pgid); }
int kill(pid_t pid, int sig) { return (int)S2(SYS_kill, pid, sig); }
int getrusage(__rusage_who_t who, struct rusage *ru) { return (int)S2(SYS_getrusage, who, ru); }

int prctl(int op, ...)
{
    va_list ap;
    long a[4];
    va_start(ap, op);
    for (int i = 0; i < 4; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    return (int)S5(SYS_prctl, op, a[0], a[1], a[2], a[3]);
}

int getrlimit(__rlimit_resource_t res, struct rlimit *rl)
{
    return (int)S4(SYS_prlimit64, 0, res, 0, rl);
}

int setrlimit(__rlimit_resource_t res, const struct rlimit *rl)
{
    return (int)S4(SYS_prlimit64, 0, res, rl, 0);
}

/* ---- credentials ---------------------------------------------------------------- */

int setgroups(size_t n, const gid_t *list) { return (int)S2(SYS_setgroups, n, list); }
int getgroups(int n, gid_t list[]) { return (int)S2(SYS_getgroups, n, list); }
int setresuid(uid_t r, uid_t e, uid_t s) { return (int)S3(SYS_setresuid, r, e, s); }
int setresgid(gid_t r, gid_t e, gid_t s) { return (int)S3(SYS_setresgid, r, e, s); }
int getresuid(uid_t *r, uid_t *e, uid_t *s) { return (int)S3(SYS_getresuid, r, e, s); }
int getresgid(gid_t *r, gid_t *e, gid_t *s) { return (int)S3(SYS_getresgid, r, e, s); }

/* ---- signals (dispositions only) ------------------------------------------------- */

struct ksigaction { void (*handler)(int); unsigned long flags; void (*restorer)(void); unsigned long mask; };

int __libc_current_sigrtmin(void)
{
    return 34;   /* what glibc reports: 32 and 33 are its own */
}

int sigemptyset(sigset_t *set)
{
    memset(set, 0, sizeof *set);
    return 0;
}

/* Where a handler returns to: rt_sigreturn. */
void hcp_restorer(void);
__asm__(".text\n"
        ".global hcp_restorer\n"
        "hcp_restorer:\n"
        "  mov $15, %rax\n"
        "  syscall\n");

int sigfillset(sigset_t *set)
{
    memset(set, 0xff, sizeof *set);
    return 0;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    struct ksigaction k, ko;
    if (act && (act->sa_flags & SA_SIGINFO)) {
        err_no = EINVAL;
        return -1;
    }
    if (act) {
        int handler = act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN;
        k.handler = act->sa_handler;
        k.flags = (unsigned long)act->sa_flags | (handler ? 0x04000000UL /* SA_RESTORER */ : 0);
        k.restorer = handler ? hcp_restorer : 0;
        memcpy(&k.mask, &act->sa_mask, sizeof k.mask);
    }
    if (S4(SYS_rt_sigaction, sig, act ? &k : 0, old ? &ko : 0, sizeof k.mask) < 0)
        return -1;
    if (old) {
        memset(old, 0, sizeof *old);
        old->sa_handler = ko.handler;
        old->sa_flags = (int)ko.flags;
        memcpy(&old->sa_mask, &ko.mask, sizeof ko.mask);
    }
    return 0;
}

__sighandler_t signal(int sig, __sighandler_t handler)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    return sigaction(sig, &sa, &old) < 0 ? SIG_ERR : old.sa_handler;
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    return (int)S4(SYS_rt_sigprocmask, how, set, old, 8);
}

/* ---- strings ------------------------------------------------------------------------ */

void *memcpy(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    while (n--)
        *d++ = *s++;
    return dst;
}

void *memmove(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (d < s)
        while (n--)
            *d++ = *s++;
    else
        while (n--)
            d[n] = s[n];
    return dst;
}

void *memset(void *dst, int c, size_t n)
{
    unsigned char *d = dst;
    while (n--)
        *d++ = (unsigned char)c;
    return dst;
}

size_t strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

char *strstr(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (strncmp(hay, needle, n) == 0)
            return (char *)hay;
    return n == 0 ? (char *)hay : NULL;
}

int strcmp(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return (unsigned char)*a - (unsigned char)*b;
}

int strncmp(const char *a, const char *b, size_t n)
{
    for (; n > 0; n--, a++, b++)
        if (*a != *b || !*a)
            return (unsigned char)*a - (unsigned char)*b;
    return 0;
}

char *strchr(const char *s, int c)
{
    for (;; s++) {
        if (*s == (char)c)
            return (char *)(uintptr_t)s;
        if (!*s)
            return 0;
    }
}

char *strrchr(const char *s, int c)
{
    const char *last = 0;
    for (;; s++) {
        if (*s == (char)c)
            last = s;
        if (!*s)
            return (char *)(uintptr_t)last;
    }
}
