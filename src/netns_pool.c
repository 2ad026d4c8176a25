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
 * set): the next call finds what a fresh one has. spec/netns_pool_spec.lua.
 *
 * Made ahead (core.netns_prefill, root only): while the pool is empty, the
 * first call of a runtime starts `hcp-spawn hold` in a fresh network
 * namespace as its first step, and takes that namespace when it spawns — so
 * the ~0.5 ms of making one runs on another CPU while the call's Lua stages
 * run, instead of in the child after them. The holder runs nothing but the
 * helper's wait for its stdin to close; no process but it was ever in the
 * namespace, which is what a fresh one is.
 *
 * `hcp run` and `hcpx` (hcp_lua.c) start that holder before their modules
 * load, so the namespace is ready when the call spawns (started at the
 * call's first stage, the spawn waited ~0.7 ms for it) — unless they start
 * an early child (early.c), which makes the call's namespace itself: while
 * one waits, none is made ahead here (hcp_early_pending); one no call takes is
 * ended by the runtime's close, or at exit (atexit). A holder runs on the
 * CPUs the runtime is not on (hcp_pin_away): on the runtime's, the two took
 * turns and `hcp run` reached its spawn later. */
#include "isolation.h"
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The holder of a namespace made ahead: its pid, the read end of its exec
 * report (EOF: exec'd, so its namespace exists), the write end of its
 * stdin (closed: it exits). */
static struct { pid_t pid; int report, in; } ahead = { -1, -1, -1 };
/* Once a namespace has been given back, the pool serves the calls that
 * follow: one made ahead is for a process's first calls only (with calls in
 * flight the pool is empty most of the time, and a holder per call would
 * only double the processes started). */
static int given_back;

/* Ends the holder (the lock held): it exits once its stdin closes, and is
 * reaped later (hcp_reap_later) rather than waited for now. */
static void end_ahead(void)
{
    hcp_closefd(&ahead.in);
    hcp_closefd(&ahead.report);
    hcp_reap_later(ahead.pid);
    ahead.pid = -1;
}

/* The namespace made ahead, once its holder has exec'd (the lock held). */
static struct hcp_netns take_ahead(void)
{
    struct hcp_netns ns = { -1, -1 };
    struct pollfd pfd = { ahead.report, POLLIN, 0 };
    struct hcp_child_err e;
    ssize_t n = -1;
    while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
        ;
    do
        n = read(ahead.report, &e, sizeof e);
    while (n < 0 && errno == EINTR);
    if (n == 0)   /* exec'd: its namespace was made; a record would be a failure */
        ns = hcp_netns_of(ahead.pid, 0);
    end_ahead();
    return ns;
}

struct hcp_netns hcp_netns_take(int root)
{
    struct hcp_netns ns = { -1, -1 };
    pthread_mutex_lock(&lock);
    if (pools[root != 0].n > 0)
        ns = pools[root != 0].ns[--pools[root != 0].n];
    else if (root && ahead.pid > 0)
        ns = take_ahead();
    pthread_mutex_unlock(&lock);
    return ns;
}

/* Starts the holder of a fresh namespace (the lock held). 0, or -1. */
static int start_ahead(void)
{
    int report, err, arg;
    const char *step;
    pid_t pid = hcp_hold(ISO_NETNS, NULL, &report, &ahead.in, &err, &step, &arg);
    if (pid < 0)
        return -1;
    ahead.pid = pid;
    ahead.report = report;
    return 0;
}

/* Starts a holder if one is needed and possible: root, a helper, the pool
 * empty, none on its way, the pool never given to. 1 when started. */
static int prefill(void)
{
    int started = 0;
    if (geteuid() == 0 && hcp_helper_fd() >= 0 && !hcp_early_pending()) {
        pthread_mutex_lock(&lock);
        if (pools[1].n == 0 && ahead.pid < 0 && !given_back)
            started = start_ahead() == 0;
        cpu_set_t mine;
        if (started)   /* it only makes and holds a namespace: any CPU but ours */
            (void)hcp_pin_away(ahead.pid, &mine);
        pthread_mutex_unlock(&lock);
    }
    return started;
}

/* core.netns_prefill() -> true when a namespace is being made ahead, false
 * when none is needed (one is pooled or on its way, or the pool has served
 * calls already) or possible here (not root, no helper, or the start
 * failed: the call makes its own then). */
static int l_netns_prefill(lua_State *L)
{
    lua_pushboolean(L, prefill());
    return 1;
}

/* Ends a holder no spawn took, and reaps the ended ones (the lock held). */
static void cancel_locked(void)
{
    if (ahead.pid > 0)
        end_ahead();
    hcp_reap_late(1);
}

static void cancel_ahead(void)
{
    pthread_mutex_lock(&lock);
    cancel_locked();
    pthread_mutex_unlock(&lock);
}

/* At exit: the same, unless another thread holds the lock (an exit from
 * one thread while another takes a namespace) — then the holder ends by
 * itself, when its stdin closes with this process. */
static void cancel_at_exit(void)
{
    if (pthread_mutex_trylock(&lock) != 0)
        return;
    cancel_locked();
    pthread_mutex_unlock(&lock);
}

void hcp_netns_prefill_early(void)
{
    static int registered;
    if (prefill() && !registered)
        registered = atexit(cancel_at_exit) == 0;
}

/* core.netns_prefill_cancel(): ends a holder not taken (a runtime's close),
 * and reaps the ended ones. */
static int l_netns_prefill_cancel(lua_State *L)
{
    (void)L;
    cancel_ahead();
    return 0;
}

void hcp_register_netns_pool(lua_State *L)
{
    lua_pushcfunction(L, l_netns_prefill);
    lua_setfield(L, -2, "netns_prefill");
    lua_pushcfunction(L, l_netns_prefill_cancel);
    lua_setfield(L, -2, "netns_prefill_cancel");
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
    given_back = 1;
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
