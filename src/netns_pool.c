/* netns_pool.c — network namespaces kept for reuse (isolation netns =
 * "pool"). A fresh network namespace costs ~0.4 ms to make and more to
 * free; joining one that exists costs nothing measurable. A namespace is
 * lent to one call at a time, and taken back only when nothing of that
 * call can be left in it: the call had a pid namespace, and its first
 * process ended on its own — which, in a pid namespace, it does only after
 * hcp-init, and with it every process of the namespace, has gone (the
 * kernel empties a pid namespace before its init can be reaped). A call
 * killed or timed out gives nothing back (its processes may still be
 * dying). Without capabilities nothing else of a network namespace can be
 * changed (its loopback stays down, no address, route or filter can be
 * set): the next call finds what a fresh one has. spec/netns_pool_spec.lua. */
#include "isolation.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#define POOL_MAX 16

static struct { struct hcp_netns ns[POOL_MAX]; int n; } pools[2];   /* non-root, root */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void close_ns(struct hcp_netns ns)
{
    if (ns.net >= 0)
        close(ns.net);
    if (ns.user >= 0)
        close(ns.user);
}

struct hcp_netns hcp_netns_take(int root)
{
    struct hcp_netns ns = { -1, -1 };
    pthread_mutex_lock(&lock);
    if (pools[root != 0].n > 0)
        ns = pools[root != 0].ns[--pools[root != 0].n];
    pthread_mutex_unlock(&lock);
    return ns;
}

void hcp_netns_give(struct hcp_netns ns, int root)
{
    if (ns.net < 0 || (!root && ns.user < 0)) {
        close_ns(ns);
        return;
    }
    pthread_mutex_lock(&lock);
    int full = pools[root != 0].n == POOL_MAX;
    if (!full)
        pools[root != 0].ns[pools[root != 0].n++] = ns;
    pthread_mutex_unlock(&lock);
    if (full)
        close_ns(ns);
}

/* Whether fd is the namespace the runtime itself is in (kind: "net"): never
 * one to lend — only a call's own is, and one opened too early would be ours. */
static int ours(int fd, const char *kind)
{
    char path[64];
    struct stat a, b;
    snprintf(path, sizeof path, "/proc/self/ns/%s", kind);
    return fstat(fd, &a) < 0 || stat(path, &b) < 0 || (a.st_dev == b.st_dev && a.st_ino == b.st_ino);
}

struct hcp_netns hcp_netns_of(pid_t pid, int with_user)
{
    char path[64];
    struct hcp_netns ns = { -1, -1 };
    snprintf(path, sizeof path, "/proc/%ld/ns/net", (long)pid);
    ns.net = open(path, O_RDONLY | O_CLOEXEC);
    if (ns.net >= 0 && with_user) {
        snprintf(path, sizeof path, "/proc/%ld/ns/user", (long)pid);
        ns.user = open(path, O_RDONLY | O_CLOEXEC);
    }
    if ((ns.net >= 0 && ours(ns.net, "net")) || (ns.user >= 0 && ours(ns.user, "user"))) {
        close_ns(ns);
        ns.net = ns.user = -1;
    }
    return ns;
}
