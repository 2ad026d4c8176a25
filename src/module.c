/* module.c — luaopen_hcp_core: assembles the module from each concern's
 * file, plus the one clock the benchmarks and timing specs read. */
#include "hcp_core.h"
#include "isolation.h"

#include <errno.h>
#include <time.h>

/* core.monotonic_us() -> microseconds on CLOCK_MONOTONIC (float) */
static int l_monotonic_us(lua_State *L)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return hcp_push_oserror(L, errno, "clock_gettime");
    lua_pushnumber(L, (lua_Number)ts.tv_sec * 1e6 + (lua_Number)ts.tv_nsec / 1e3);
    return 1;
}

int luaopen_hcp_core(lua_State *L)
{
    lua_newtable(L);
    hcp_register_paths(L);
    hcp_register_spawn(L);
    hcp_register_fs(L);
    hcp_register_jail(L);
    hcp_register_isolation(L);
    hcp_register_viewbase(L);
    hcp_register_netns_pool(L);
    hcp_register_early(L);
    hcp_register_hostsock(L);
    hcp_register_rootfs(L);
    hcp_register_landlock_base(L);
    hcp_register_poller(L);
    hcp_register_pollable(L);
    hcp_register_stdio(L);
    hcp_register_egress(L);
    hcp_register_json(L);
    hcp_register_calldirs(L);
    lua_pushcfunction(L, l_monotonic_us);
    lua_setfield(L, -2, "monotonic_us");
    lua_pushliteral(L, HCP_CORE_VERSION);
    lua_setfield(L, -2, "version");
    return 1;
}
