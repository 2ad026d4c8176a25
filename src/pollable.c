/* pollable.c — what else core.drive can service in the same poll as the
 * procs (struct hcp_pollable, spawn.h): how a C object shows itself to
 * Lua as one, and core.test_pollable(), the smallest one there is, for the
 * specs and as the example for whoever writes the next (issue 14's egress
 * proxy): a pipe of its own that :poke() writes a byte into, and a timer
 * :arm(ms) sets; each byte read or timer that fired is counted, and wakes
 * the drive's caller. */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define TEST_MT "hcp.test_pollable"

struct hcp_pollable hcp_pollable_at(lua_State *L, int idx)
{
    struct hcp_pollable x = { NULL, NULL };
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx))
        return x;
    if (lua_getfield(L, -1, "__hcp_pollable") == LUA_TLIGHTUSERDATA) {
        x.ops = lua_touserdata(L, -1);
        x.self = lua_touserdata(L, idx);
    }
    lua_pop(L, 2);
    return x;
}

/* ---- core.test_pollable() -------------------------------------------------- */

typedef struct { int rd, wr; int64_t due; lua_Integer count; } test_t;

static int t_fill(void *self, struct pollfd *pfd, int max)
{
    test_t *t = self;
    if (max < 1 || t->rd < 0)
        return 0;
    pfd[0] = (struct pollfd){ .fd = t->rd, .events = POLLIN, .revents = 0 };
    return 1;
}

static int t_ready(void *self, const struct pollfd *pfd, int n)
{
    test_t *t = self;
    int woke = 0;
    char buf[64];
    if (n > 0 && (pfd[0].revents & POLLIN)) {
        ssize_t r = read(t->rd, buf, sizeof buf);
        if (r > 0) {
            t->count += r;
            woke = 1;
        }
    }
    if (t->due != NEVER && hcp_now_ns() >= t->due) {
        t->due = NEVER;
        t->count++;
        woke = 1;
    }
    return woke;
}

static int64_t t_next(void *self, int64_t now)
{
    (void)now;
    return ((test_t *)self)->due;
}

static const struct hcp_pollable_ops test_ops = { t_fill, t_ready, t_next };

static test_t *checktest(lua_State *L)
{
    return luaL_checkudata(L, 1, TEST_MT);
}

/* core.test_pollable() -> a pollable, or nil, msg, errno */
static int l_test_pollable(lua_State *L)
{
    int fds[2];
    test_t *t = lua_newuserdatauv(L, sizeof *t, 0);
    *t = (test_t){ -1, -1, NEVER, 0 };
    luaL_setmetatable(L, TEST_MT);
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0)
        return hcp_push_oserror(L, errno, "test_pollable: pipe");
    t->rd = fds[0];
    t->wr = fds[1];
    return 1;
}

/* :poke() writes a byte its drive will read; :arm(ms) sets its timer;
 * :count() the bytes read and timers fired so far. */
static int t_poke(lua_State *L)
{
    test_t *t = checktest(L);
    lua_pushboolean(L, t->wr >= 0 && write(t->wr, "x", 1) == 1);
    return 1;
}

static int t_arm(lua_State *L)
{
    test_t *t = checktest(L);
    lua_Number ms = luaL_checknumber(L, 2);
    luaL_argcheck(L, ms >= 0 && ms < 1e9, 2, "must be a number of milliseconds");
    t->due = hcp_now_ns() + (int64_t)(ms * 1e6);
    return 0;
}

static int t_count(lua_State *L)
{
    lua_pushinteger(L, checktest(L)->count);
    return 1;
}

static int t_gc(lua_State *L)
{
    test_t *t = checktest(L);
    hcp_closefd(&t->rd);
    hcp_closefd(&t->wr);
    return 0;
}

void hcp_register_pollable(lua_State *L)
{
    static const luaL_Reg meta[] = { { "__gc", t_gc }, { "__close", t_gc }, { NULL, NULL } };
    static const luaL_Reg methods[] = { { "poke", t_poke }, { "arm", t_arm }, { "count", t_count }, { NULL, NULL } };
    luaL_newmetatable(L, TEST_MT);
    luaL_setfuncs(L, meta, 0);
    lua_pushlightuserdata(L, (void *)(uintptr_t)&test_ops);
    lua_setfield(L, -2, "__hcp_pollable");
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_test_pollable);
    lua_setfield(L, -2, "test_pollable");
}
