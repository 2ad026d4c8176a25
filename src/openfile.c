/* openfile.c — opening a file the runtime reads (a staged input, a jail
 * output, a manifest, a pack's bin) so that it can never block on it nor
 * touch a device: the path is opened O_PATH first (no side effect, never
 * waits for a FIFO's writer), its type checked on that descriptor, and only
 * a regular file is then reopened for reading — the very inode checked,
 * through /proc/self/fd, or where /proc is missing by a second
 * non-blocking open compared by device and inode.
 *
 * Also: opening beneath a root (openat2 RESOLVE_BENEATH, with a component
 * walk where the kernel has no openat2) and the kernel's name for a
 * descriptor. */
#include "hcp_core.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"

int hcp_open_beneath(int dirfd, const char *rel, int flags, mode_t mode, uint64_t resolve)
{
    int fd = hcp_openat2(dirfd, rel, flags, mode, resolve);
    if (fd >= 0 || errno != ENOSYS)
        return fd;
    /* fallback: walk each component without following anything */
    char buf[PATH_MAX];
    if (strlen(rel) >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(buf, rel);
    int cur = dup(dirfd);
    if (cur < 0)
        return -1;
    char *save = NULL, *part = strtok_r(buf, "/", &save);
    while (part) {
        char *next = strtok_r(NULL, "/", &save);
        if (strcmp(part, "..") == 0) {
            close(cur);
            errno = EXDEV;
            return -1;
        }
        int nfd = next ? openat(cur, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                       : openat(cur, part, flags | O_NOFOLLOW | O_CLOEXEC, mode);
        int e = errno;
        close(cur);
        if (nfd < 0) {
            errno = e == ELOOP ? EXDEV : e;
            return -1;
        }
        cur = nfd;
        part = next;
    }
    return cur;
}

const char *hcp_file_type(mode_t m)
{
    if (S_ISREG(m))
        return "a regular file";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISLNK(m))
        return "a symbolic link";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    return "not a regular file";
}

int hcp_reopen(int pathfd, const struct stat *st, int flags)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", pathfd);
    int fd = open(proc, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat now;
    if (fstat(fd, &now) < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
        int e = errno;
        close(fd);
        errno = e ? e : ESTALE;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

/* The O_PATH step of hcp_open_regular: beneath dirfd when resolve is set,
 * else a plain openat (dirfd may be AT_FDCWD). */
static int open_path(int dirfd, const char *rel, int flags, uint64_t resolve)
{
    int pflags = O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW);
    return resolve ? hcp_open_beneath(dirfd, rel, pflags, 0, resolve) : openat(dirfd, rel, pflags);
}

int hcp_open_regular(int dirfd, const char *rel, int flags, uint64_t resolve, struct stat *st)
{
    int pfd = open_path(dirfd, rel, flags, resolve);
    if (pfd < 0)
        return -1;
    if (fstat(pfd, st) < 0) {
        int e = errno;
        close(pfd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        close(pfd);
        return HCP_NOT_REGULAR;
    }
    int fd = hcp_reopen(pfd, st, O_RDONLY);
    int e = errno;
    if (fd < 0 && (e == ENOENT || e == ENOTDIR)) {
        /* no /proc: the same path again, without blocking, and it must be
         * the inode that was checked */
        int rflags = O_RDONLY | O_NONBLOCK | O_NOCTTY | (flags & O_NOFOLLOW);
        fd = resolve ? hcp_open_beneath(dirfd, rel, rflags, 0, resolve)
                     : openat(dirfd, rel, rflags | O_CLOEXEC);
        struct stat now;
        if (fd >= 0 && (fstat(fd, &now) < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino)) {
            close(fd);
            fd = -1;
            e = ESTALE;
        } else {
            e = errno;
        }
    }
    close(pfd);
    errno = e;
    return fd;
}

int hcp_fd_path(int fd, char *buf, size_t size)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, size);
    if (n < 0)
        return -1;
    if ((size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    buf[n] = '\0';
    /* a deleted file or a name outside our mount namespace: no path */
    if (buf[0] != '/' || (n > 10 && strcmp(buf + n - 10, " (deleted)") == 0)) {
        errno = ESTALE;
        return -1;
    }
    return 0;
}
