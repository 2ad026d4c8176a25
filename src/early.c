/* early.c — the early child (issue 12): `hcp run` spends ~2 ms loading its
 * modules and planning its call before the child starts, and the child then
 * spends ~1 ms making its namespaces and the system part of its view. The
 * early child does the latter during the former: started at the process's
 * first instruction (hcp_lua.c), pid 1 of a pid namespace of its own, it
 * makes a network namespace (a fresh one, what the netns pool would lend:
 * no holder is made for `hcp run` then), an IPC and a mount namespace and
 * begins the view with the system paths (what every call's view holds),
 * then waits on a socketpair. The
 * call's launch is sent to it — the same plan the helper would read from
 * its memfd, and the descriptors it names — if the two suit each other
 * (hcp_early_suits: the plan's view holds every entry begun, in its order,
 * and nothing the early child did would have come after a step it skipped);
 * otherwise the launch goes as usual and the early child is ended unused.
 * Root only (the direct hcp-init of spawn_child.c), only where the probe
 * says every layer it makes is there and a call's `procs` is a pid_max of
 * its namespace rather than a cgroup to join first (else no call would
 * suit it); only the first launch. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* What a dynamically linked program needs to read: the system directories,
 * and from /etc only the files the C library and common tools read (all of
 * /etc would include secrets that root owns). Every call's view holds them
 * (core.SYSTEM_READ: isolation.lua's), with a /tmp of VIEW_TMP_MB
 * (core.VIEW_TMP_MB: view.lua's TMP_MB). */
static const char *const system_read[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
    "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
    "/etc/gai.conf", "/etc/protocols", "/etc/services", "/etc/ssl", "/etc/ca-certificates",
    "/etc/alternatives", "/etc/magic", "/etc/magic.mime", "/etc/mime.types", "/etc/xml", "/etc/sgml",
    "/etc/terminfo", "/etc/inputrc", "/etc/locale.alias", "/etc/papersize",
    "/sys/devices/system/cpu", NULL,
};
#define EARLY_TMP_MB 64   /* core.VIEW_TMP_MB */
_Static_assert(1 + HCP_PLAN_FDS <= HCP_SEND_FDS_MAX, "a plan's descriptors fit one message");

static struct {
    pid_t pid;
    int report, sock;
    int mounts;                 /* our /proc/self/mountinfo: polls when mounts change */
    struct hcp_isolation iso;   /* its rootfs: the view begun */
    int pinned;
    cpu_set_t mask;             /* ours, which the early child gets back */
} early = { 0, -1, -1, -1, { 0 }, 0, { { 0 } } };

/* Helpers that work while we load run beside us, not instead of us: on the
 * CPUs we are not on (with one CPU, nowhere else: nothing is moved). */
int hcp_pin_away(pid_t pid, cpu_set_t *mine)
{
    int cpu = sched_getcpu();
    if (cpu < 0 || sched_getaffinity(0, sizeof *mine, mine) < 0 || CPU_COUNT(mine) < 2 || !CPU_ISSET(cpu, mine))
        return 0;
    cpu_set_t away = *mine;
    CPU_CLR(cpu, &away);
    return sched_setaffinity(pid, sizeof away, &away) == 0;
}

void hcp_early_cancel(void)
{
    if (early.pid <= 0)
        return;
    close(early.sock);
    close(early.report);
    close(early.mounts);
    (void)kill(early.pid, SIGKILL);
    hcp_reap_later(early.pid);
    early.pid = 0;
}

/* The view begun: the system paths, planned as a call's are (strings
 * pinned in the registry for the process's life). */
static int plan_view(lua_State *L, struct hcp_rootfs *rf)
{
    int top = lua_gettop(L);
    lua_newtable(L);   /* pin */
    int pin = lua_gettop(L);
    lua_createtable(L, 0, 3);
    int t = lua_gettop(L);
    lua_createtable(L, (int)(sizeof system_read / sizeof system_read[0]), 0);
    for (int i = 0; system_read[i]; i++) {
        lua_pushstring(L, system_read[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, t, "ro");
    lua_newtable(L);
    lua_setfield(L, t, "rw");
    lua_pushinteger(L, EARLY_TMP_MB);
    lua_setfield(L, t, "tmp_mb");
    int r = hcp_rootfs_prepare(L, t, pin, 1, rf);
    lua_pushvalue(L, pin);
    (void)luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, top);
    return r;
}

int hcp_early_pending(void)
{
    return early.pid > 0;
}

int hcp_early_start(lua_State *L)
{
    const char *off = getenv("HCP_EARLY");
    int report[2], sv[2], err;
    if (geteuid() != 0 || (off && strcmp(off, "0") == 0) || early.pid != 0 || hcp_helper_fd() < 0)
        return 0;
    /* the probe the runtime reads anyway, now: where the call's limits
     * would join a cgroup, or a layer is missing, no call would suit it */
    unsigned layers = hcp_probe_early_layers();
    if (!layers)
        return 0;
    memset(&early.iso, 0, sizeof early.iso);
    struct hcp_isolation *iso = &early.iso;
    iso->layers = layers;
    iso->landlock_fd = iso->cgroup_fd = iso->cap_last = iso->netns_fd = iso->userns_fd = iso->egress_fd = -1;
    if (plan_view(L, &iso->rootfs) != 0)
        return 0;
    /* opened before the early child copies our mounts: it polls once a
     * mount is made or removed after (the early child would not have it) */
    int mounts = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (mounts < 0)
        return 0;
    if (pipe2(report, O_CLOEXEC) < 0) {
        close(mounts);
        return 0;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        close(mounts);
        close(report[0]);
        close(report[1]);
        return 0;
    }
    char *argv[] = { "hcp-init", NULL }, *envp[] = { NULL };
    struct hcp_launch e = { "hcp-init", -1, 0, 0, { -1, -1, -1, -1 }, -1, -1, -1,
                            "/", argv, envp, iso, report[1], getpid(), -1, -1 };
    pid_t pid = hcp_launch_early(&e, sv[1], &err);
    close(report[1]);
    close(sv[1]);
    if (pid < 0) {
        close(mounts);
        close(report[0]);
        close(sv[0]);
        return 0;
    }
    early.pid = pid;
    early.mounts = mounts;
    /* until it takes a call: its program gets our mask back */
    early.pinned = hcp_pin_away(pid, &early.mask);
    early.report = report[0];
    early.sock = sv[0];
    return 1;
}

/* The launch's plan into a memfd, and the descriptors it names. */
static int send_launch(const struct hcp_launch *l)
{
    struct hcp_launch lc = *l;
    int fds[1 + HCP_PLAN_FDS];
    lc.report_fd = -1;   /* the early child's own */
    lc.parent = getpid();
    int plan = hcp_plan_memfd(&lc);
    if (plan < 0)
        return -1;
    fds[0] = plan;
    int n = 1 + hcp_plan_fds(l, fds + 1);
    int r = hcp_send_fds(early.sock, 'p', fds, n);
    int e = errno;
    close(plan);
    errno = e;
    return r;
}

pid_t hcp_early_use(const struct hcp_launch *l, int *report)
{
    static unsigned char done[HCP_EARLY_MAX];
    if (early.pid <= 0 || !hcp_early_suits(&early.iso, l, done))
        return -2;
    /* a report already (a failure, or its exit), or a mount made or
     * removed since it copied ours (a pack or a jail on it would be missing
     * from its view, or one gone would still be there): it is no use */
    struct pollfd pf[2] = { { early.report, POLLIN, 0 }, { early.mounts, POLLPRI, 0 } };
    if (poll(pf, 2, 0) != 0) {
        hcp_early_cancel();
        return -2;
    }
    /* Nothing of the call has started when either fails (a seqpacket
     * message arrives whole or not at all): it is launched as usual. */
    if ((early.pinned && sched_setaffinity(early.pid, sizeof early.mask, &early.mask) < 0) || send_launch(l) < 0) {
        hcp_early_cancel();
        return -2;
    }
    pid_t pid = early.pid;
    close(early.sock);
    *report = early.report;
    close(early.mounts);
    early.pid = 0;
    early.sock = early.report = early.mounts = -1;
    return pid;
}

/* core.SYSTEM_READ (a copy: the caller may change its own), core.VIEW_TMP_MB */
void hcp_register_early(lua_State *L)
{
    lua_newtable(L);
    for (int i = 0; system_read[i]; i++) {
        lua_pushstring(L, system_read[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "SYSTEM_READ");
    lua_pushinteger(L, EARLY_TMP_MB);
    lua_setfield(L, -2, "VIEW_TMP_MB");
}
