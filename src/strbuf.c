/* strbuf.c — a growing byte buffer that becomes a Lua string without a
 * copy: a call's captured stdout and stderr.
 *
 * Why: Lua 5.4 has no way to hand it a buffer; lua_pushlstring allocates a
 * string object and copies the bytes into it. For a capture of 1 GiB that
 * copy touches a second GiB of fresh pages (2x the bytes resident at that
 * moment, and ~4 s of page faults on a slow VM phase here, more than the
 * capture itself). So the buffer is allocated, from the start, the way Lua
 * would allocate the string: through the state's own allocator, with room
 * for a string object's header in front of the bytes. At the end the state's
 * allocator is wrapped for the one lua_pushlstring, and the wrapper answers
 * Lua's request for that string object (the only allocation of a string of
 * exactly that size, with Lua's collector stopped meanwhile) with the
 * buffer. Lua's copy then has the same source and destination, which
 * glibc's memcpy (its memmove) skips. Lua frees the string later through the
 * same allocator, so the block is owned by Lua from then on.
 *
 * Nothing here depends on Lua's private layout: the header's size and the
 * place of the bytes are measured once per process from a string Lua makes
 * (calibrate), and a layout that does not fit the measure turns adoption
 * off (plain copy). Every push also checks that the string Lua returned
 * holds its bytes at the place the buffer had them. */
#include "hcp_core.h"

#include <stdatomic.h>
#include <string.h>

/* Below this, the copy costs less than the thought: a short string is also
 * interned by Lua, never adopted. */
#define ADOPT_MIN 4096

/* What the wrapper is doing: observing (calibration) or offering a block. */
struct adopt {
    lua_Alloc f;        /* the state's own allocator, which this wraps */
    void *ud;
    char *block;        /* offered for a string object of `want` bytes */
    size_t want;
    int taken;
    int observe;        /* calibration: note the first string object */
    char *seen;
    size_t seen_size;
};

static void *adopt_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct adopt *a = ud;
    /* a new object: osize is its type tag */
    if (ptr == NULL && osize == LUA_TSTRING && nsize > 0) {
        if (a->block && nsize == a->want) {
            char *b = a->block;
            a->block = NULL;
            a->taken = 1;
            return b;
        }
        if (a->observe && !a->seen) {
            a->seen = a->f(a->ud, NULL, osize, nsize);
            a->seen_size = nsize;
            return a->seen;
        }
    }
    return a->f(a->ud, ptr, osize, nsize);
}

/* The state's allocator, unwrapped: a buffer started while a push is under
 * way (by code the collector runs, were it running) must not keep the
 * wrapper, whose state lives on that push's stack. */
static lua_Alloc base_alloc(lua_State *L, void **ud)
{
    lua_Alloc f = lua_getallocf(L, ud);
    while (f == adopt_alloc) {
        struct adopt *a = *ud;
        f = a->f;
        *ud = a->ud;
    }
    return f;
}

struct push_args {
    const char *s;
    size_t len;
    const char *at;
};

static int push_protected(lua_State *L)
{
    struct push_args *p = lua_touserdata(L, 1);
    p->at = lua_pushlstring(L, p->s, p->len);
    return 1;
}

/* Pushes s[0..len) with the wrapper installed and the collector stopped,
 * and returns where Lua put the bytes. Protected: an error (no memory for
 * the calibration's string) must not leave the state with a wrapper whose
 * state lives on this stack; it is raised again once the state's own
 * allocator is back. */
static const char *wrapped_push(lua_State *L, struct adopt *a, const char *s, size_t len)
{
    struct push_args args = { s, len, NULL };
    luaL_checkstack(L, 3, "hcp.core: pushing a capture");   /* before the wrapper: may allocate */
    lua_pushcfunction(L, push_protected);
    lua_pushlightuserdata(L, &args);
    int running = lua_gc(L, LUA_GCISRUNNING) == 1;
    if (running)
        lua_gc(L, LUA_GCSTOP);
    lua_setallocf(L, adopt_alloc, a);
    int status = lua_pcall(L, 1, 1, 0);
    lua_setallocf(L, a->f, a->ud);
    if (running)
        lua_gc(L, LUA_GCRESTART);
    if (status != LUA_OK)
        lua_error(L);
    return args.at;
}

/* Bytes in front of a long string's contents in its object, measured once
 * per process (liblua's layout does not change while it runs): 0 when the
 * measure does not show the bytes at the end of the object, which turns
 * adoption off. */
static atomic_size_t head_bytes = SIZE_MAX;

static size_t calibrate(lua_State *L)
{
    size_t h = atomic_load_explicit(&head_bytes, memory_order_relaxed);
    if (h != SIZE_MAX)
        return h;
    char probe[ADOPT_MIN];
    memset(probe, 'h', sizeof probe);
    struct adopt a = { .observe = 1 };
    a.f = base_alloc(L, &a.ud);
    const char *at = wrapped_push(L, &a, probe, sizeof probe);
    h = 0;
    if (a.seen && a.seen_size > sizeof probe + 1 && at == a.seen + (a.seen_size - sizeof probe - 1) &&
        a.seen_size - sizeof probe - 1 <= 256)
        h = a.seen_size - sizeof probe - 1;
    lua_pop(L, 1);
    atomic_store_explicit(&head_bytes, h, memory_order_relaxed);
    return h;
}

void hcp_strbuf_init(struct hcp_strbuf *b, lua_State *L)
{
    memset(b, 0, sizeof *b);
    b->head = calibrate(L);
    b->f = base_alloc(L, &b->ud);
}

/* The block holds head + cap + 1 bytes: the header, the bytes, Lua's NUL. */
static size_t block_size(const struct hcp_strbuf *b, size_t cap)
{
    return cap ? b->head + cap + 1 : 0;
}

int hcp_strbuf_grow(struct hcp_strbuf *b, size_t max)
{
    if (b->cap > b->len)
        return 0;
    if (b->cap >= max)
        return -1;
    size_t cap = b->cap ? b->cap * 2 : 65536;
    if (cap > max || cap < b->cap)
        cap = max;
    if (cap > SIZE_MAX - b->head - 1)   /* no block size wraps around */
        return -1;
    char *nb = b->f(b->ud, b->block, block_size(b, b->cap), block_size(b, cap));
    if (!nb)
        return -1;
    b->block = nb;
    b->cap = cap;
    return 0;
}

void hcp_strbuf_free(struct hcp_strbuf *b)
{
    if (b->block)
        (void)b->f(b->ud, b->block, block_size(b, b->cap), 0);
    b->block = NULL;
    b->len = b->cap = 0;
}

/* The bytes offered as the string object, or copied (short, or adoption off,
 * or the block could not be fitted): the buffer is empty after either. */
void hcp_strbuf_push(lua_State *L, struct hcp_strbuf *b)
{
    if (b->len < ADOPT_MIN || b->head == 0) {
        lua_pushlstring(L, b->block ? hcp_strbuf_data(b) : "", b->len);
        hcp_strbuf_free(b);
        return;
    }
    /* the block to the string object's size: Lua frees it with that size */
    size_t want = block_size(b, b->len);
    char *nb = b->block;
    if (b->cap != b->len) {
        nb = b->f(b->ud, b->block, block_size(b, b->cap), want);
        if (nb) {
            b->block = nb;
            b->cap = b->len;
        }
    }
    /* not fitted: the copy below, then the block freed */
    struct adopt a = { .f = b->f, .ud = b->ud, .block = nb, .want = want };
    const char *data = hcp_strbuf_data(b);
    const char *at = wrapped_push(L, &a, data, b->len);
    if (!a.taken) {
        hcp_strbuf_free(b);
        return;
    }
    /* the string object is the block now: Lua owns it */
    b->block = NULL;
    b->len = b->cap = 0;
    if (at != data)   /* calibrated, so never: say it loud */
        luaL_error(L, "hcp.core: an adopted string is not where its bytes were");
}
