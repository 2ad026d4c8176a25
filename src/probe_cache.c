/* probe_cache.c — core.probe()'s answer kept per boot (issue 12): probing
 * forks a dozen children that make namespaces, mounts and filters, ~15 ms
 * of every `hcp run`. The answer is written to a file only the runtime's
 * uid may write — $HCP_RUNTIME_DIR when set, else /run/hcp-lua/ for
 * root, $XDG_RUNTIME_DIR/hcp-lua/ otherwise (no cache without one) — under a key naming everything the
 * answer depends on: the boot, the kernel, this build of the core, the
 * process's ids, capabilities, no_new_privs and seccomp state, its user,
 * pid and cgroup namespaces and cgroups, its LSM label, and the sysctls that
 * allow user namespaces. Read back only from a regular file owned by us,
 * mode 0600, in a directory owned by us, mode 0700, with the same key; the
 * Landlock ABI is asked again each time (a syscall) and must agree.
 * HCP_PROBE_CACHE=0 turns it off. A forged file could only come from the
 * runtime's own uid (or root), which can do anything anyway; a stale one
 * that claims a layer the host lost fails the spawn closed, never silently,
 * and what one calls unavailable is probed again (isolation_probe.c). */
#include "isolation.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/uio.h>
#include <unistd.h>

#define KEY_MAX 8192

static size_t append_file(char *key, size_t len, const char *tag, const char *path)
{
    char buf[2048];
    (void)hcp_read_small(path, buf, sizeof buf);   /* unreadable: "" */
    for (char *c = buf; *c; c++)
        if (*c == '\n' || *c == ' ')
            *c = ',';
    int w = snprintf(key + len, KEY_MAX - len, " %s=%s", tag, buf);
    return w < 0 || (size_t)w >= KEY_MAX - len ? KEY_MAX : len + (size_t)w;
}

static size_t append_link(char *key, size_t len, const char *tag, const char *path)
{
    char buf[128];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    int w = snprintf(key + len, KEY_MAX - len, " %s=%s", tag, buf);
    return w < 0 || (size_t)w >= KEY_MAX - len ? KEY_MAX : len + (size_t)w;
}

/* The lines of /proc/self/status the probes depend on. */
static size_t append_status(char *key, size_t len)
{
    static const char *const fields[] = { "CapEff:", "CapBnd:", "NoNewPrivs:", "Seccomp:", "Seccomp_filters:" };
    char buf[4096];
    (void)hcp_read_small("/proc/self/status", buf, sizeof buf);   /* unreadable: "" */
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *at = strstr(buf, fields[i]);
        const char *end = at ? strchr(at, '\n') : NULL;
        int w = snprintf(key + len, KEY_MAX - len, " %.*s", at && end ? (int)(end - at) : 0, at ? at : "");
        if (w < 0 || (size_t)w >= KEY_MAX - len)
            return KEY_MAX;
        len += (size_t)w;
    }
    return len;
}

/* The core's own file and its change time: a rebuilt core probes again. */
static size_t append_build(char *key, size_t len)
{
    Dl_info info;
    struct stat st;
    memset(&info, 0, sizeof info);
    const char *name = dladdr((void *)(uintptr_t)hcp_probe_key, &info) && info.dli_fname ? info.dli_fname : "";
    if (stat(name[0] ? name : "/proc/self/exe", &st) < 0)
        memset(&st, 0, sizeof st);
    int w = snprintf(key + len, KEY_MAX - len, " core=%s:%s:%lld.%ld:%zu", HCP_CORE_VERSION, name,
                     (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec, hcp_probe_blob_size());
    return w < 0 || (size_t)w >= KEY_MAX - len ? KEY_MAX : len + (size_t)w;
}

int hcp_probe_key(char *key, size_t size)
{
    struct utsname u;
    if (size < KEY_MAX || uname(&u) < 0)
        return -1;
    size_t len = (size_t)snprintf(key, KEY_MAX, "hcp-probe rel=%s ver=%s uid=%ld gid=%ld", u.release, u.version,
                                  (long)geteuid(), (long)getegid());
    len = append_file(key, len, "boot", "/proc/sys/kernel/random/boot_id");
    len = append_build(key, len);
    len = append_status(key, len);
    len = append_link(key, len, "userns", "/proc/self/ns/user");
    len = append_link(key, len, "pidns", "/proc/self/ns/pid");
    len = append_link(key, len, "cgns", "/proc/self/ns/cgroup");
    len = append_file(key, len, "cg", "/proc/self/cgroup");
    len = append_file(key, len, "lsm", "/proc/self/attr/current");
    len = append_file(key, len, "uuc", "/proc/sys/kernel/unprivileged_userns_clone");
    len = append_file(key, len, "mun", "/proc/sys/user/max_user_namespaces");
    len = append_file(key, len, "aa", "/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    return len < KEY_MAX - 1 ? (int)len : -1;
}

/* A directory that is ours alone (made if missing, mode 0700): the only
 * place a per-boot cache is trusted from. */
int hcp_own_dir(const char *dir)
{
    struct stat st;
    /* there already, at every start but the first: one lstat */
    if (lstat(dir, &st) < 0) {
        if (errno != ENOENT || (mkdir(dir, 0700) < 0 && errno != EEXIST) || lstat(dir, &st) < 0)
            return 0;
    }
    return S_ISDIR(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0;
}

/* FNV-1a: one cache file per key, so runtimes of different builds or
 * cgroups side by side do not overwrite each other's. */
unsigned long long hcp_fnv1a(const char *s)
{
    unsigned long long h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

int hcp_runtime_dir(char *dir, size_t size)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR"), *own = getenv("HCP_RUNTIME_DIR");
    int w;
    if (own && own[0] == '/')
        w = snprintf(dir, size, "%s", own);
    else if (geteuid() == 0)
        w = snprintf(dir, size, "/run/hcp-lua");
    else if (xdg && xdg[0] == '/')
        w = snprintf(dir, size, "%s/hcp-lua", xdg);
    else
        return -1;
    return w < 0 || (size_t)w >= size || !hcp_own_dir(dir) ? -1 : 0;
}

int hcp_probe_cache_path(const char *key, char *path, size_t size)
{
    const char *off = getenv("HCP_PROBE_CACHE");
    char dir[PATH_MAX - 64];
    if ((off && strcmp(off, "0") == 0) || hcp_runtime_dir(dir, sizeof dir) < 0)
        return -1;
    int w = snprintf(path, size, "%s/probe-%ld-%016llx", dir, (long)geteuid(), hcp_fnv1a(key));
    return w < 0 || (size_t)w >= size ? -1 : 0;
}

int hcp_probe_cache_read(const char *path, const char *key, void *blob, size_t blob_size)
{
    struct stat st;
    size_t klen = strlen(key);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char *buf = NULL;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) == 0 &&
             (size_t)st.st_size == klen + 1 + blob_size && (buf = malloc((size_t)st.st_size)) &&
             read(fd, buf, (size_t)st.st_size) == st.st_size && memcmp(buf, key, klen) == 0 && buf[klen] == '\n';
    if (ok)
        memcpy(blob, buf + klen + 1, blob_size);
    free(buf);
    close(fd);
    return ok ? 0 : -1;
}

/* A cache file, whole or not at all: the pieces written to a private
 * temporary (mode 0600, never through a link), then renamed into place. */
int hcp_cache_write(const char *path, const struct iovec *iov, int n)
{
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = 1;
    for (int i = 0; ok && i < n; i++) {
        const char *p = iov[i].iov_base;
        for (size_t left = iov[i].iov_len; ok && left > 0;) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            ok = w > 0;
            p += ok ? w : 0;
            left -= ok ? (size_t)w : 0;
        }
    }
    ok = close(fd) == 0 && ok && rename(tmp, path) == 0;
    if (!ok)
        unlink(tmp);
    return ok ? 0 : -1;
}

int hcp_probe_cache_write(const char *path, const char *key, const void *blob, size_t blob_size)
{
    struct iovec iov[] = { { (void *)key, strlen(key) }, { "\n", 1 }, { (void *)blob, blob_size } };
    return hcp_cache_write(path, iov, 3);
}
