/* egress.c — core.egress(): the proxy of one call, as a Lua value. The
 * runtime makes one per call that declares hosts, passes it to core.spawn
 * (isolation.egress: the child makes the listeners inside its network
 * namespace and hands them over), lets core.drive poll it with the call's
 * pipes, and answers what it asks: every request waits, parked, until the
 * runtime's Lua (hcp.egress) has decided, so the rules have one home.
 *
 *   eng:pending()             requests waiting for a decision
 *   eng:answer(id, addrs)     connect there (an address or a list, tried in order)
 *   eng:answer(id, nil, why)  refuse: 403 and the reason
 *   eng:resolve(id)           look the name up (it comes back with `addrs`)
 *   eng:log()                 every attempt so far, and how many were not kept
 *   eng:next_ms(), eng:fd()   for event loops
 *   eng:close()               also __gc and __close
 */
#include "egress_engine.h"
#include "spawn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>

typedef struct { struct hcp_egress e; int open; } egress_ud;

static egress_ud *check(lua_State *L)
{
    egress_ud *u = luaL_checkudata(L, 1, EGRESS_MT);
    if (!u->open)
        luaL_error(L, "attempt to use a closed egress proxy");
    return u;
}

struct hcp_egress *hcp_egress_test(lua_State *L, int idx)
{
    egress_ud *u = luaL_testudata(L, idx, EGRESS_MT);
    return u && u->open ? &u->e : NULL;
}

int hcp_egress_adopt(struct hcp_egress *e, const int *fds, int n)
{
    return hcp_eng_adopt(e, fds, n);
}

/* core.drive's view (pollable.h): self is the userdata's block, which
 * may have been closed since the drive was asked to poll it. A pending
 * request wakes the drive's caller: the runtime decides (hcp.egress). */
static int p_fill(void *self, struct pollfd *pfd, int max)
{
    egress_ud *u = self;
    return u->open ? hcp_eng_fill(&u->e, pfd, max) : 0;
}

static int p_ready(void *self, const struct pollfd *pfd, int n)
{
    egress_ud *u = self;
    if (!u->open)
        return 0;
    hcp_eng_ready(&u->e, pfd, n);
    int64_t now = hcp_now_ns();
    return hcp_eng_next(&u->e, now) <= now;
}

static int64_t p_next(void *self, int64_t now)
{
    egress_ud *u = self;
    return u->open ? hcp_eng_next(&u->e, now) : NEVER;
}

static const struct hcp_pollable_ops pollable_ops = { p_fill, p_ready, p_next };

int hcp_egress_fd(const struct hcp_egress *e)
{
    return e->epfd;
}

/* core.egress{ connect_timeout_ms = } -> proxy | nil, msg, errno */
static int l_egress(lua_State *L)
{
    lua_Number ms = 10000;
    if (!lua_isnoneornil(L, 1)) {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_pushnil(L);
        while (lua_next(L, 1)) {
            lua_pop(L, 1);
            if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "connect_timeout_ms") != 0)
                luaL_error(L, "egress: unknown option '%s'", luaL_tolstring(L, -1, NULL));
        }
        lua_getfield(L, 1, "connect_timeout_ms");
        ms = luaL_optnumber(L, -1, 10000);
        luaL_argcheck(L, ms > 0 && ms <= 3600000, 1, "connect_timeout_ms must be 1 to 3600000");
    }
    egress_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    hcp_eng_init(&u->e);
    u->open = 0;
    luaL_setmetatable(L, EGRESS_MT);
    u->e.connect_ns = (int64_t)(ms * 1e6);
    u->e.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (u->e.epfd < 0)
        return hcp_push_oserror(L, errno, "egress: epoll_create1");
    u->open = 1;
    return 1;
}

static void setstr(lua_State *L, const char *k, const char *v)
{
    if (v && *v) {
        lua_pushstring(L, v);
        lua_setfield(L, -2, k);
    }
}

static void push_addr(lua_State *L, const struct sockaddr_storage *a)
{
    char buf[INET6_ADDRSTRLEN];
    const void *src = a->ss_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)a)->sin6_addr
                                               : (const void *)&((const struct sockaddr_in *)a)->sin_addr;
    if (!inet_ntop(a->ss_family, src, buf, sizeof buf))
        buf[0] = '\0';
    lua_pushstring(L, buf);
}

/* eng:pending() -> { { id, host, port, method?, path?, addrs? }, ... } */
static int e_pending(lua_State *L)
{
    egress_ud *u = check(L);
    lua_newtable(L);
    int k = 0;
    for (int i = 0; i < CONN_MAX; i++) {
        const struct conn *c = u->e.conns[i];
        if (!c || c->state != C_PENDING)
            continue;
        lua_createtable(L, 0, 6);
        lua_pushinteger(L, c->id);
        lua_setfield(L, -2, "id");
        setstr(L, "host", c->req.host);
        lua_pushinteger(L, c->req.port);
        lua_setfield(L, -2, "port");
        if (!c->req.connect) {
            setstr(L, "method", c->req.method);
            setstr(L, "path", c->req.path);
        }
        if (c->resolved) {
            lua_createtable(L, c->naddr, 0);
            for (int a = 0; a < c->naddr; a++) {
                push_addr(L, &c->addr[a]);
                lua_rawseti(L, -2, a + 1);
            }
            lua_setfield(L, -2, "addrs");
        }
        lua_rawseti(L, -2, ++k);
    }
    return 1;
}

/* One address of an answer, as a sockaddr with the request's port. */
static void to_sockaddr(lua_State *L, int idx, int port, struct sockaddr_storage *out)
{
    const char *s = luaL_checkstring(L, idx);
    memset(out, 0, sizeof *out);
    struct sockaddr_in *a4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
    if (inet_pton(AF_INET, s, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, s, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
    } else {
        luaL_error(L, "egress: answer: \"%s\" is not an IP address", s);
    }
}

/* eng:answer(id, addr | { addr, ... } | nil, reason) -> true | false (no
 * such request waiting: the client left) */
static int e_answer(lua_State *L)
{
    egress_ud *u = check(L);
    struct conn *c = hcp_eng_find(&u->e, (int)luaL_checkinteger(L, 2));
    if (lua_isnoneornil(L, 3)) {
        const char *why = luaL_checkstring(L, 4);
        if (!c || c->state != C_PENDING)
            return lua_pushboolean(L, 0), 1;
        hcp_eng_refuse(&u->e, c, why);
        hcp_eng_kick(&u->e, c);
        return lua_pushboolean(L, 1), 1;
    }
    struct sockaddr_storage a[ADDR_MAX];
    int n = 0, port = c ? c->req.port : 1;
    if (lua_type(L, 3) == LUA_TTABLE) {
        lua_Integer len = (lua_Integer)lua_rawlen(L, 3);
        luaL_argcheck(L, len >= 1 && len <= ADDR_MAX, 3, "1 to 8 addresses");
        for (lua_Integer i = 1; i <= len; i++) {
            lua_rawgeti(L, 3, i);
            to_sockaddr(L, -1, port, &a[n++]);
            lua_pop(L, 1);
        }
    } else {
        to_sockaddr(L, 3, port, &a[n++]);
    }
    if (!c || c->state != C_PENDING)
        return lua_pushboolean(L, 0), 1;
    hcp_eng_connect(&u->e, c, a, n);
    hcp_eng_kick(&u->e, c);
    return lua_pushboolean(L, 1), 1;
}

/* eng:resolve(id) -> true | false: the runtime looks the name up; the
 * request comes back in pending() with `addrs`, or fails with a 502. */
static int e_resolve(lua_State *L)
{
    egress_ud *u = check(L);
    struct conn *c = hcp_eng_find(&u->e, (int)luaL_checkinteger(L, 2));
    if (!c || c->state != C_PENDING || c->resolved)
        return lua_pushboolean(L, 0), 1;
    hcp_eng_resolve(&u->e, c);
    hcp_eng_kick(&u->e, c);
    return lua_pushboolean(L, 1), 1;
}

/* eng:log() -> { { host, allowed, method?, path?, reason?, error?,
 * bytes_in?, bytes_out? }, ... }, dropped */
static int e_log(lua_State *L)
{
    egress_ud *u = check(L);
    lua_createtable(L, u->e.nlog, 0);
    for (int i = 0; i < u->e.nlog; i++) {
        const struct log_ent *l = &u->e.log[i];
        lua_createtable(L, 0, 8);
        setstr(L, "host", l->host);
        lua_pushboolean(L, l->allowed);
        lua_setfield(L, -2, "allowed");
        setstr(L, "method", l->method);
        setstr(L, "path", l->path);
        setstr(L, "reason", l->allowed ? NULL : l->reason);
        setstr(L, "error", l->allowed ? l->error : NULL);
        if (l->allowed) {
            lua_pushinteger(L, (lua_Integer)l->bytes_in);
            lua_setfield(L, -2, "bytes_in");
            lua_pushinteger(L, (lua_Integer)l->bytes_out);
            lua_setfield(L, -2, "bytes_out");
        }
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushinteger(L, u->e.dropped);
    return 2;
}

/* eng:next_ms() -> ms until it needs a pass (0: a decision waits), or nil */
static int e_next_ms(lua_State *L)
{
    egress_ud *u = check(L);
    int64_t now = hcp_now_ns(), t = hcp_eng_next(&u->e, now);
    if (t == NEVER)
        return luaL_pushfail(L), 1;
    lua_pushnumber(L, t <= now ? 0 : (lua_Number)(t - now) / 1e6);
    return 1;
}

/* eng:fd() -> the epoll descriptor (readable when a connection needs service) */
static int e_fd(lua_State *L)
{
    lua_pushinteger(L, check(L)->e.epfd);
    return 1;
}

/* eng:listening() -> how many listeners the child handed over */
static int e_listening(lua_State *L)
{
    lua_pushinteger(L, check(L)->e.nl);
    return 1;
}

static int e_gc(lua_State *L)
{
    egress_ud *u = luaL_checkudata(L, 1, EGRESS_MT);
    if (u->open)
        hcp_eng_close(&u->e);
    u->open = 0;
    return 0;
}

/* ---- the parsers, for the specs ---------------------------------------------- */

/* core.egress_parse(head) -> { connect, method, host, port, path, head_len,
 * body, length } | false (more bytes needed) | nil, status, why */
static int l_parse(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    static struct hcp_http_req req;   /* 8 KiB: not on the stack */
    const char *why = NULL;
    int r = hcp_http_parse(s, len, &req, &why);
    if (r == 0)
        return lua_pushboolean(L, 0), 1;
    if (r != 1) {
        luaL_pushfail(L);
        lua_pushinteger(L, r);
        lua_pushstring(L, why);
        return 3;
    }
    lua_createtable(L, 0, 8);
    lua_pushboolean(L, req.connect);
    lua_setfield(L, -2, "connect");
    setstr(L, "method", req.method);
    setstr(L, "host", req.host);
    lua_pushinteger(L, req.port);
    lua_setfield(L, -2, "port");
    lua_pushstring(L, req.path);
    lua_setfield(L, -2, "path");
    lua_pushinteger(L, (lua_Integer)req.head_len);
    lua_setfield(L, -2, "head_len");
    lua_pushstring(L, req.body == BODY_CHUNKED ? "chunked" : req.body == BODY_LENGTH ? "length" : "none");
    lua_setfield(L, -2, "body");
    lua_pushinteger(L, (lua_Integer)req.length);
    lua_setfield(L, -2, "length");
    if (!req.connect) {
        static char out[HCP_HTTP_HEAD_MAX + HCP_HTTP_PATH_MAX + 512];
        long n = hcp_http_rewrite(s, &req, out, sizeof out);
        if (n >= 0) {
            lua_pushlstring(L, out, (size_t)n);
            lua_setfield(L, -2, "upstream");
        }
    }
    return 1;
}

/* core.egress_chunked(chunks...) -> bytes of the message, done | nil (malformed):
 * the body framing fed chunk by chunk. */
static int l_chunked(lua_State *L)
{
    struct hcp_chunked ck;
    memset(&ck, 0, sizeof ck);
    lua_Integer total = 0;
    int done = 0;
    for (int i = 1; i <= lua_gettop(L) && !done; i++) {
        size_t len;
        const char *s = luaL_checklstring(L, i, &len);
        long n = hcp_chunked_feed(&ck, s, len, &done);
        if (n < 0)
            return luaL_pushfail(L), 1;
        total += n;
    }
    lua_pushinteger(L, total);
    lua_pushboolean(L, done);
    return 2;
}

void hcp_register_egress(lua_State *L)
{
    static const luaL_Reg meta[] = { { "__gc", e_gc }, { "__close", e_gc }, { NULL, NULL } };
    static const luaL_Reg methods[] = {
        { "pending", e_pending }, { "answer", e_answer }, { "resolve", e_resolve }, { "log", e_log },
        { "next_ms", e_next_ms }, { "fd", e_fd }, { "listening", e_listening }, { "close", e_gc },
        { NULL, NULL },
    };
    static const luaL_Reg funcs[] = {
        { "egress", l_egress }, { "egress_parse", l_parse }, { "egress_chunked", l_chunked },
        { NULL, NULL },
    };
    luaL_newmetatable(L, EGRESS_MT);
    luaL_setfuncs(L, meta, 0);
    lua_pushlightuserdata(L, (void *)(uintptr_t)&pollable_ops);
    lua_setfield(L, -2, "__hcp_pollable");
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    luaL_setfuncs(L, funcs, 0);
    lua_pushinteger(L, HCP_EGRESS_PORT);
    lua_setfield(L, -2, "EGRESS_PORT");
}
