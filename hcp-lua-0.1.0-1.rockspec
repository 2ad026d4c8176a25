-- LuaRocks package of the hcp Lua library: the modules of lua/hcp and the C
-- module hcp.core. `luarocks make` builds it from this checkout into a rocks
-- tree, where a stock lua5.4 finds it. The commands (hcp, hcpx, hcp-lua),
-- their man pages and shell completion come from `make install`.
--
-- The file name, `version` and lua/hcp/init.lua's M.version agree, and
-- `modules` lists every file of lua/hcp and every C source of hcp.core:
-- spec/packaging_spec.lua checks both.
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
  "lua-cjson >= 2.1",  -- hcp.json decodes through cjson.safe
  "argparse >= 0.7",   -- hcp.cli, the command-line parser of hcp and hcpx
}

build = {
  type = "builtin",
  modules = {
    ["hcp"] = "lua/hcp/init.lua",
    ["hcp.bindings"] = "lua/hcp/bindings.lua",
    ["hcp.cli"] = "lua/hcp/cli.lua",
    ["hcp.config"] = "lua/hcp/config.lua",
    ["hcp.envelope"] = "lua/hcp/envelope.lua",
    ["hcp.isolation"] = "lua/hcp/isolation.lua",
    ["hcp.json"] = "lua/hcp/json.lua",
    ["hcp.manifest"] = "lua/hcp/manifest.lua",
    ["hcp.ops"] = "lua/hcp/ops.lua",
    ["hcp.policy"] = "lua/hcp/policy.lua",
    ["hcp.repl"] = "lua/hcp/repl.lua",
    ["hcp.runtime"] = "lua/hcp/runtime.lua",
    ["hcp.sandbox"] = "lua/hcp/sandbox.lua",
    ["hcp.workspace"] = "lua/hcp/workspace.lua",
    ["hcp.driver.bwrap"] = "lua/hcp/driver/bwrap.lua",
    ["hcp.driver.local"] = "lua/hcp/driver/local.lua",
    -- the C core: every src/*.c but the interpreter (hcp_lua.c, repl.c),
    -- so no readline; Linux only
    ["hcp.core"] = {
      sources = {
        "src/fs.c", "src/isolation.c", "src/isolation_child.c", "src/isolation_probe.c",
        "src/jail.c", "src/module.c", "src/paths.c", "src/spawn.c", "src/spawn_child.c",
        "src/spawn_exe.c", "src/spawn_io.c", "src/spawn_proc.c",
      },
      defines = { "_GNU_SOURCE" },
      incdirs = { "src" },
    },
  },
  copy_directories = { "docs" },
}
