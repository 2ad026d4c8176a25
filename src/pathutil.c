/* pathutil.c — the path helpers that need no Lua: openat2 with retries,
 * lexical normalisation and containment, reading a small file whole, and
 * passing descriptors over a unix socket.
 * Shared by the C module and the spawn helper (build/libexec/hcp-spawn),
 * which links no Lua and no libc. */
#include "hcp_core.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"

int hcp_openat2(int dirfd, const char *path, int flags, mode_t mode,
                unsigned long long resolve)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (unsigned long long)(flags | O_CLOEXEC);
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = resolve;
    /* EAGAIN: a concurrent rename somewhere under dirfd; the kernel asks
     * for a retry. A few are plenty; after that it is reported. */
    int fd, tries = 0;
    do
        fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    while (fd < 0 && errno == EAGAIN && ++tries < 8);
    return fd;
}

/* ---- pure helpers ------------------------------------------------------ */

long hcp_path_normalize(const char *in, char *out, size_t outsz)
{
    int abs = in[0] == '/';
    size_t base = abs ? 1 : 0;  /* out[0..base) is the root and never popped */
    size_t len = base;
    size_t ncomp = 0, nup = 0;  /* components in out; leading ".." among them */
    const char *p = in;

    if (outsz < base + 1)
        return -1;
    if (abs)
        out[0] = '/';
    while (*p) {
        const char *s;
        size_t n;

        while (*p == '/')
            p++;
        s = p;
        while (*p && *p != '/')
            p++;
        n = (size_t)(p - s);
        if (n == 0 || (n == 1 && s[0] == '.'))
            continue;
        if (n == 2 && s[0] == '.' && s[1] == '.') {
            if (ncomp > nup) {
                /* Drop the last component (and its separator, unless it is
                 * the root's slash). */
                while (len > base && out[len - 1] != '/')
                    len--;
                if (len > base)
                    len--;
                ncomp--;
                continue;
            }
            if (abs)
                continue;  /* "/.." is "/" */
            nup++;
        }
        /* separator + component + the final NUL must fit */
        if (len + (len > base) + n + 1 > outsz)
            return -1;
        if (len > base)
            out[len++] = '/';
        memcpy(out + len, s, n);
        len += n;
        ncomp++;
    }
    if (len == 0) {
        if (outsz < 2)
            return -1;
        out[len++] = '.';
    }
    out[len] = '\0';
    return (long)len;
}

int hcp_path_contains(const char *base, const char *path)
{
    size_t n;

    if (base[0] != '/' || path[0] != '/')
        return 0;
    if (strcmp(base, "/") == 0)
        return 1;
    n = strlen(base);
    /* Component-wise: "/a/pre" must not contain "/a/prefix". */
    return strncmp(base, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

ssize_t hcp_read_small(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    return n;
}

int hcp_send_fds(int sock, char byte, const int *fds, int n)
{
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int) * HCP_SEND_FDS_MAX)]; } ctl;
    struct iovec iov = { &byte, 1 };
    struct msghdr msg;
    if (n < 1 || n > HCP_SEND_FDS_MAX)
        return errno = EINVAL, -1;
    memset(&ctl, 0, sizeof ctl);
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
    ssize_t r;
    do
        r = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
    return r == 1 ? 0 : (r >= 0 ? (errno = EIO, -1) : -1);
}

int hcp_recv_fds(int sock, int flags, char *byte, int *fds, int max)
{
    union { struct cmsghdr h; char buf[CMSG_SPACE(sizeof(int) * HCP_SEND_FDS_MAX)]; } ctl;
    struct iovec iov = { byte, 1 };
    struct msghdr msg;
    if (max < 0 || max > HCP_SEND_FDS_MAX)
        return errno = EINVAL, -1;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)max);
    ssize_t r;
    do
        r = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return r == 0 ? -2 : -1;
    /* one header of descriptors fits the room for max: a second one, or
     * more than max, truncates (the kernel closes what did not fit) */
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    int n = c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS
                ? (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)) : 0;
    if (n > max)
        n = max;
    if (n > 0)
        memcpy(fds, CMSG_DATA(c), sizeof(int) * (size_t)n);
    if (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) {
        for (int i = 0; i < n; i++)
            close(fds[i]);
        return errno = EMSGSIZE, -1;
    }
    return n;
}
