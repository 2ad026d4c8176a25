/* spec/fuzz/lua_target.c — a libFuzzer harness for the Lua modules: it
 * embeds Lua 5.4, points package.path at the checkout's lua/, preloads
 * hcp.core (luaopen_hcp_core, the sanitized objects it is linked with) and
 * loads spec/fuzz/<HCP_FUZZ_TARGET>.lua, which returns a function of the
 * input bytes. That function calls the code under test inside pcall where
 * the code's contract lets it raise, and raises itself when the code breaks
 * its contract or an invariant; any error that reaches this harness is a
 * finding (abort, so libFuzzer keeps the input).
 *
 * libFuzzer sees only C coverage, and the system's liblua is not
 * instrumented: a line hook feeds it Lua coverage instead, an edge (the
 * previous line, this line) of the checkout's own modules per counter in
 * __libfuzzer_extra_counters. */
#include "hcp_core.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HCP_FUZZ_TARGET
#error "build with -DHCP_FUZZ_TARGET=\"name\""
#endif
#ifndef HCP_REPO
#error "build with -DHCP_REPO=\"/path/of/the/checkout\""
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NEDGES (1u << 16)
__attribute__((section("__libfuzzer_extra_counters"), used)) static uint8_t lua_edges[NEDGES];

static lua_State *L;
static int target_ref;
static const char *last_source;
static int last_ours;
static uintptr_t prev_line;

static void line_hook(lua_State *l, lua_Debug *ar)
{
    if (!lua_getinfo(l, "S", ar))
        return;
    if (ar->source != last_source) {
        static const char ours[] = "@" HCP_REPO "/lua/";
        last_source = ar->source;
        last_ours = strncmp(ar->source, ours, sizeof ours - 1) == 0;
    }
    if (!last_ours)
        return;
    uintptr_t here = ((uintptr_t)ar->source * 31u) ^ ((uintptr_t)ar->currentline * 2654435761u);
    lua_edges[(here ^ prev_line) % NEDGES]++;
    prev_line = here >> 1;
}

static int traceback(lua_State *l)
{
    const char *msg = lua_tostring(l, 1);
    luaL_traceback(l, l, msg ? msg : "(error object is not a string)", 1);
    return 1;
}

static void die(const char *what)
{
    fprintf(stderr, "fuzz %s: %s: %s\n", HCP_FUZZ_TARGET, what, lua_tostring(L, -1));
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    L = luaL_newstate();
    if (!L)
        abort();
    luaL_openlibs(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, luaopen_hcp_core);
    lua_setfield(L, -2, "hcp.core");
    lua_pop(L, 1);
    if (luaL_dostring(L, "package.path = '" HCP_REPO "/lua/?.lua;" HCP_REPO "/lua/?/init.lua;"
                         HCP_REPO "/spec/fuzz/?.lua;' .. package.path") != LUA_OK)
        die("setting package.path");
    lua_pushcfunction(L, traceback);
    if (luaL_loadfile(L, HCP_REPO "/spec/fuzz/" HCP_FUZZ_TARGET ".lua") != LUA_OK)
        die("loading the target");
    if (lua_pcall(L, 0, 1, -2) != LUA_OK)
        die("running the target's chunk");
    if (!lua_isfunction(L, -1)) {
        lua_pushliteral(L, "the target does not return a function");
        die("loading the target");
    }
    target_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1);
    lua_sethook(L, line_hook, LUA_MASKLINE, 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    prev_line = 0;
    lua_pushcfunction(L, traceback);
    lua_rawgeti(L, LUA_REGISTRYINDEX, target_ref);
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, -3) != LUA_OK)
        die("finding");
    lua_pop(L, 1);
    return 0;
}
