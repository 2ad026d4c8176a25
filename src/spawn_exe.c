/* spawn_exe.c — what runs is what was checked: the parent opens the binary
 * once (beneath a directory when asked, refusing any escape while resolving)
 * and the child execs that descriptor. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"


/* O_PATH: opening never blocks (a FIFO planted at ./bin/x would wait for a
 * writer) and never touches a device; the type is checked on this
 * descriptor, and only a regular file is reopened for reading (see
 * readable below). An execute-only file is exec'd through the O_PATH
 * descriptor itself. */
static int open_rel(int dirfd, const char *rel, int beneath)
{
    if (beneath)
        return hcp_openat2(dirfd, rel, O_PATH | O_CLOEXEC, 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
    return openat(dirfd, rel, O_PATH | O_CLOEXEC);
}

/* The checked regular file open for reading (the same inode), so its "#!"
 * can be read and an interpreter can open it; the O_PATH descriptor itself
 * when that is refused (execute-only) or impossible. */
static int readable(int pfd, const struct stat *st)
{
    int fd = hcp_reopen(pfd, st, O_RDONLY);
    if (fd < 0)
        return pfd;
    close(pfd);
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
    fd = readable(fd, &st);
    /* pread fails (EBADF) on an O_PATH descriptor: such a file cannot be read
     * by an interpreter either, so it is not treated as a script. */
    *script = pread(fd, magic, 2, 0) == 2 && magic[0] == '#' && magic[1] == '!';
    *fdp = fd;
    return 0;
}
