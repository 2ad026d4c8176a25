-- LuaRocks package of the hcp Lua library: the modules of lua/hcp and the C
-- module hcp.core. `luarocks make` builds it from this checkout into a rocks
-- tree, where a stock lua5.4 finds it. The commands (hcp, hcpx, hcp-lua),
-- their man pages and shell completion come from `make install`.
--
-- The file name, `version` and lua/hcp/init.lua's M.version agree
-- (spec/packaging_spec.lua checks it).
rockspec_format = "3.0"
package = "hcp-lua"
version = "0.1.0-1"

source = {
  -- luarocks make builds from the working tree and fetches nothing; a
  -- published release points this at its tarball or git tag.
  url = ".",
}

description = {
  summary = "A sandboxed runtime for HCP packs: real command-line tools called with JSON envelopes",
  detailed = [[
An HCP pack is a directory whose hcp.json wraps a real command-line binary.
hcp-lua loads packs, answers request envelopes with result envelopes, and runs
each pack's binary sandboxed by default (allow-listed binaries resolved in a
fixed search path, an environment built from nothing, Landlock, seccomp and
namespaces where the host has them). require("hcp") gives the Lua API:
hcp.create, rt:call, rt:exec, hcp.doctor.
]],
  labels = { "sandbox", "agents", "linux" },
  -- no license field yet: the project has not chosen one (luarocks lint
  -- asks for it before an upload)
}

supported_platforms = { "linux" }

dependencies = {
  "lua >= 5.4, < 5.5",
  "argparse >= 0.7",   -- hcp.cli, the command-line parser of hcp and hcpx
}

build = {
  -- the Makefile knows every module and C source (it globs them), so the
  -- rock is built by it and cannot fall out of date: `make rock` builds
  -- hcp.core alone (no readline, no interpreter), `make rock-install`
  -- copies lua/hcp/** and core.so into the directories LuaRocks gives
  type = "make",
  build_target = "rock",
  build_variables = { LUA_INCDIR = "$(LUA_INCDIR)", CFLAGS = "$(CFLAGS)" },
  install_target = "rock-install",
  install_variables = { INST_LUADIR = "$(LUADIR)", INST_LIBDIR = "$(LIBDIR)" },
  copy_directories = { "docs" },
}
