/* nopipe.c — SIGPIPE-proof writes (nopipe.h): the child's stdin, the
 * tees, the runtime's own stdio (stdio.c) and the egress proxy's sockets. */
#include "nopipe.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

void hcp_nopipe_begin(struct hcp_nopipe *g)
{
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &g->old);   /* valid args: cannot fail */
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
}

void hcp_nopipe_end(const struct hcp_nopipe *g)
{
    sigset_t set, pending;
    struct timespec zero = { 0, 0 };
    int e = errno;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE))
        while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
            ;
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
    errno = e;
}

ssize_t hcp_write_nopipe(int fd, const void *buf, size_t len, int *err)
{
    struct hcp_nopipe g;
    ssize_t n;
    hcp_nopipe_begin(&g);
    do
        n = write(fd, buf, len);
    while (n < 0 && errno == EINTR);
    *err = errno;
    hcp_nopipe_end(&g);
    return n;
}
