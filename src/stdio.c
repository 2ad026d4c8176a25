/* stdio.c — descriptor I/O for servers that speak on their own stdin and
 * stdout while driving calls (hcp mcp): wait for input on several
 * descriptors at once, read what is there without blocking for more, and
 * write a whole message without a reader that went away killing the
 * process. Lua's io library buffers (a line sitting in a FILE buffer is
 * invisible to poll) and dies of SIGPIPE; these do neither. */
#include "hcp_core.h"
#include "nopipe.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_POLL_FDS 16
#define MAX_READ (1 << 20)

static int checkfd(lua_State *L, int arg)
{
    lua_Integer fd = luaL_checkinteger(L, arg);
    luaL_argcheck(L, fd >= 0 && fd <= INT_MAX, arg, "not a file descriptor");
    return (int)fd;
}

/* core.poll_in(fds, timeout_ms) -> array of the fds that are readable (or
 * at end of file, or in error: a read tells which). timeout_ms nil waits
 * until one is; {} when the time ran out or a signal came. */
static int l_poll_in(lua_State *L)
{
    struct pollfd pf[MAX_POLL_FDS];
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = luaL_len(L, 1);
    luaL_argcheck(L, n >= 1 && n <= MAX_POLL_FDS, 1, "between 1 and 16 descriptors");
    for (int i = 0; i < n; i++) {
        lua_geti(L, 1, i + 1);
        lua_Integer fd = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
        luaL_argcheck(L, fd >= 0 && fd <= INT_MAX, 1, "not an array of file descriptors");
        lua_pop(L, 1);
        pf[i].fd = (int)fd;
        pf[i].events = POLLIN;
        pf[i].revents = 0;
    }
    int timeout = -1;
    if (!lua_isnoneornil(L, 2)) {
        lua_Number t = luaL_checknumber(L, 2);
        luaL_argcheck(L, t >= 0, 2, "negative timeout");
        timeout = t > INT_MAX ? INT_MAX : (int)t;
    }
    int r = poll(pf, (nfds_t)n, timeout);
    if (r < 0 && errno != EINTR)
        return hcp_push_oserror(L, errno, "poll");
    lua_newtable(L);
    int k = 0;
    for (int i = 0; r > 0 && i < n; i++)
        if (pf[i].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
            lua_pushinteger(L, pf[i].fd);
            lua_rawseti(L, -2, ++k);
        }
    return 1;
}

/* core.read_fd(fd [, max]) -> the bytes one read(2) returned ("" at end
 * of file), or nil, "again", EAGAIN when a non-blocking fd has none, or
 * nil, msg, errno. Call it when poll_in said the fd is readable: then it
 * returns what is there without waiting for more. */
static int l_read_fd(lua_State *L)
{
    int fd = checkfd(L, 1);
    lua_Integer max = luaL_optinteger(L, 2, 65536);
    luaL_argcheck(L, max >= 1 && max <= MAX_READ, 2, "between 1 and 1 MiB");
    char *buf = malloc((size_t)max);
    if (!buf)
        return luaL_error(L, "read_fd: out of memory");
    ssize_t got;
    do
        got = read(fd, buf, (size_t)max);
    while (got < 0 && errno == EINTR);
    int err = errno;
    if (got < 0) {
        free(buf);
        if (err == EAGAIN || err == EWOULDBLOCK) {
            lua_pushnil(L);
            lua_pushliteral(L, "again");
            lua_pushinteger(L, err);
            return 3;
        }
        return hcp_push_oserror(L, err, "read");
    }
    lua_pushlstring(L, buf, (size_t)got);
    free(buf);
    return 1;
}

/* core.write_fd(fd, data) -> true once every byte is written (a full
 * non-blocking fd is waited on), or nil, msg, errno (EPIPE: the reader went
 * away). */
static int l_write_fd(lua_State *L)
{
    int fd = checkfd(L, 1);
    size_t len;
    const char *data = luaL_checklstring(L, 2, &len);
    while (len > 0) {
        int err;
        ssize_t w = hcp_write_nopipe(fd, data, len, &err);
        if (w > 0) {
            data += w;
            len -= (size_t)w;
        } else if (w < 0 && (err == EAGAIN || err == EWOULDBLOCK)) {
            struct pollfd pf = { .fd = fd, .events = POLLOUT, .revents = 0 };
            if (poll(&pf, 1, -1) < 0 && errno != EINTR)
                return hcp_push_oserror(L, errno, "poll");
        } else {
            return hcp_push_oserror(L, w < 0 ? err : EIO, "write");
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

static const luaL_Reg stdio_funcs[] = {
    {"poll_in", l_poll_in},
    {"read_fd", l_read_fd},
    {"write_fd", l_write_fd},
    {NULL, NULL},
};

void hcp_register_stdio(lua_State *L)
{
    luaL_setfuncs(L, stdio_funcs, 0);
}
