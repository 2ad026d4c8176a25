/* hcp_spawn.c — the spawn helper (build/libexec/hcp-spawn): what a child
 * with isolation layers execs first, so its namespaces, mounts and forks
 * happen in a process of its own rather than in a copy of the runtime.
 *
 *   hcp-spawn FD             FD: a memfd holding the launch plan (plan.c)
 *   hcp-spawn early FD SOCK  the early child (early.c): FD a plan that only
 *                            begins the view, SOCK where the call's comes
 *
 * It maps the plan, puts back the close-on-exec flag on the descriptors the
 * C module handed over, and runs hcp_child — the same sequence, from the
 * same source, that a fork of the runtime would run. It is linked without
 * libc (nolibc.c), so it starts in microseconds: glibc's start-up alone
 * (CPU feature probing) costs about 250 us on this kind of VM. Not meant to
 * be run by hand; it refuses anything that is not a plan. */
#include "../spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv);

static int parse_fd(const char *s)
{
    int v = 0;
    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 100000)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

static void cloexec(int fd)
{
    if (fd >= 0)
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
}

/* `hcp-spawn hold`: what holds a base view's mount namespace open while the
 * C module opens it (rootfs_base.c): waits for its stdin to close. */
static int hold(void)
{
    char c;
    ssize_t n;
    while ((n = read(0, &c, 1)) > 0 || (n < 0 && errno == EINTR))
        ;
    return 0;
}

int main(int argc, char **argv)
{
    static struct hcp_launch l;
    static struct hcp_isolation iso;
    if (argc == 2 && argv[1][0] == 'h' && argv[1][1] == 'o' && argv[1][2] == 'l' && argv[1][3] == 'd' &&
        argv[1][4] == '\0')
        return hold();
    /* `hcp-spawn early FD SOCK`: the early child (spawn.h) */
    int early = argc == 4 && argv[1][0] == 'e' && strcmp(argv[1], "early") == 0;
    int sock = early ? parse_fd(argv[3]) : -1;
    if (early && sock < 0)
        return 126;
    int fd = argc == 2 || early ? parse_fd(argv[early ? 2 : 1]) : -1;
    if (fd < 0 || hcp_plan_map(fd, &l, &iso) < 0)
        return 126;
    int pipefd = l.report_fd;
    if (early) {
        cloexec(pipefd);
        cloexec(sock);
        hcp_child_early(&l, sock);
    }
    int *slots[HCP_PLAN_FDS];
    cloexec(pipefd);
    for (int i = 0, n = hcp_plan_fd_slots(&l, &iso, slots); i < n; i++)
        cloexec(*slots[i]);
    hcp_child(&l, pipefd, l.parent);
}
