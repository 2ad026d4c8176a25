/* poller.c — core.poller(): one descriptor an event loop can watch for all
 * the calls of a runtime. It is an epoll set holding every descriptor a
 * running proc waits on (its output pipes, its stdin pipe, its pidfd, the
 * exec and end reports) and a
 * timerfd the runtime arms for the next timeout, kill or drain deadline;
 * the set is readable whenever some call needs service. Level-triggered:
 * readiness that came before a descriptor was watched is not lost, and a
 * descriptor is dropped from the set by the kernel when the proc closes it. */
#include "spawn.h"
#include "egress.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define POLLER_MT "hcp.poller"

typedef struct { int epfd, tfd; } poller_t;

static poller_t *checkpoller(lua_State *L)
{
    poller_t *pl = luaL_checkudata(L, 1, POLLER_MT);
    if (pl->epfd < 0)
        luaL_error(L, "attempt to use a closed poller");
    return pl;
}

static int watch_fd(int epfd, int fd, uint32_t events)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.fd = fd;
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 || errno == EEXIST)
        return 0;
    return -1;
}

/* core.poller() -> poller | nil, msg, errno */
static int l_poller(lua_State *L)
{
    poller_t *pl = lua_newuserdatauv(L, sizeof *pl, 0);
    pl->epfd = pl->tfd = -1;
    luaL_setmetatable(L, POLLER_MT);
    pl->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (pl->epfd < 0)
        return hcp_push_oserror(L, errno, "poller: epoll_create1");
    pl->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (pl->tfd < 0 || watch_fd(pl->epfd, pl->tfd, EPOLLIN) < 0) {
        int err = errno;
        hcp_closefd(&pl->tfd);
        hcp_closefd(&pl->epfd);
        return hcp_push_oserror(L, err, "poller: timerfd");
    }
    return 1;
}

/* poller:fd() -> the epoll descriptor (readable when a call needs service) */
static int pl_fd(lua_State *L)
{
    lua_pushinteger(L, checkpoller(L)->epfd);
    return 1;
}

/* poller:watch(proc | egress proxy) -> true | nil, msg, errno: adds the
 * proc's open descriptors (or the proxy's epoll set) to the set. */
static int pl_watch(lua_State *L)
{
    poller_t *pl = checkpoller(L);
    struct hcp_egress *e = hcp_egress_test(L, 2);   /* issue 14 */
    if (e) {
        if (watch_fd(pl->epfd, hcp_egress_fd(e), EPOLLIN) < 0)
            return hcp_push_oserror(L, errno, "poller: epoll_ctl");
        lua_pushboolean(L, 1);
        return 1;
    }
    proc_t *p = luaL_checkudata(L, 2, PROC_MT);
    /* hcp-init's end report too: the call can end on it (spawn_io.c) */
    const int fds[6] = { p->out[0].fd, p->out[1].fd, p->in_fd, p->pidfd, p->report_fd,
                         p->state == S_RUNNING ? p->status_fd : -1 };
    for (int i = 0; i < 6; i++)
        if (fds[i] >= 0 && watch_fd(pl->epfd, fds[i], i == 2 ? EPOLLOUT : EPOLLIN) < 0)
            return hcp_push_oserror(L, errno, "poller: epoll_ctl");
    lua_pushboolean(L, 1);
    return 1;
}

/* poller:arm(ms | nil): the set becomes readable in `ms` milliseconds (0:
 * at once); nil disarms. Any earlier setting is replaced. */
static int pl_arm(lua_State *L)
{
    poller_t *pl = checkpoller(L);
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (!lua_isnoneornil(L, 2)) {
        lua_Number ms = luaL_checknumber(L, 2);
        luaL_argcheck(L, ms >= 0, 2, "must not be negative");
        if (ms > 1e12)
            ms = 1e12;
        int64_t ns = (int64_t)(ms * 1e6);
        if (ns < 1)
            ns = 1;   /* all zero would disarm */
        its.it_value.tv_sec = ns / 1000000000;
        its.it_value.tv_nsec = ns % 1000000000;
    }
    if (timerfd_settime(pl->tfd, 0, &its, NULL) < 0)
        return hcp_push_oserror(L, errno, "poller: timerfd_settime");
    lua_pushboolean(L, 1);
    return 1;
}

/* poller:clear(): acknowledges an expired timer, so the set stops being
 * readable for it. */
static int pl_clear(lua_State *L)
{
    poller_t *pl = checkpoller(L);
    uint64_t n;
    while (read(pl->tfd, &n, sizeof n) < 0 && errno == EINTR)
        ;
    return 0;
}

/* poller:ready(timeout_ms) -> boolean: whether the set is readable, waiting
 * up to timeout_ms (0: a check). */
static int pl_ready(lua_State *L)
{
    poller_t *pl = checkpoller(L);
    lua_Number ms = luaL_optnumber(L, 2, 0);
    struct epoll_event ev;
    int timeout = ms < 0 ? -1 : ms > 2e9 ? 2000000000 : (int)ms;
    int r;
    while ((r = epoll_wait(pl->epfd, &ev, 1, timeout)) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return hcp_push_oserror(L, errno, "poller: epoll_wait");
    lua_pushboolean(L, r > 0);
    return 1;
}

static int pl_gc(lua_State *L)
{
    poller_t *pl = luaL_checkudata(L, 1, POLLER_MT);
    hcp_closefd(&pl->tfd);
    hcp_closefd(&pl->epfd);
    return 0;
}

void hcp_register_poller(lua_State *L)
{
    static const luaL_Reg meta[] = { { "__gc", pl_gc }, { "__close", pl_gc }, { NULL, NULL } };
    static const luaL_Reg methods[] = {
        { "fd", pl_fd }, { "watch", pl_watch }, { "arm", pl_arm }, { "clear", pl_clear },
        { "ready", pl_ready }, { "close", pl_gc }, { NULL, NULL },
    };
    luaL_newmetatable(L, POLLER_MT);
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_poller);
    lua_setfield(L, -2, "poller");
}
