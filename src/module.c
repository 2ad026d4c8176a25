/* module.c — luaopen_hcp_core: assembles the module from each concern's file. */
#include "hcp_core.h"

int luaopen_hcp_core(lua_State *L)
{
    lua_newtable(L);
    hcp_register_paths(L);
    hcp_register_spawn(L);
    hcp_register_fs(L);
    lua_pushliteral(L, HCP_CORE_VERSION);
    lua_setfield(L, -2, "version");
    return 1;
}
