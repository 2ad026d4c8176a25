--- hcp-lua: a sandboxed runtime for HCP packs.
---
---     local hcp = require("hcp")
---     local rt = assert(hcp.create{ pack_dirs = { "packs-examples" } })
---     local res = rt:call{ pack = "jq", args = { "-n", "1+1" } }
---
--- See docs/lua-api.md for the whole surface.
---@class hcp
local M = {}

local core = require("hcp.core")
local runtime = require("hcp.runtime")

M.version = "0.1.0"

--- Build a runtime (contract §5). Returns `nil, message` for a bad option;
--- never raises for bad input.
---@param opts table?
---@return hcp.Runtime? rt, string? err
function M.create(opts)
  local ok, rt, err = pcall(runtime.create, opts)
  if not ok then return nil, "hcp.create: " .. tostring(rt) end
  return rt, err
end

--- The runtime the hcp-lua REPL starts with (see hcp.repl).
---@return hcp.Runtime
function M.repl_runtime()
  return require("hcp.repl").runtime()
end

--- What isolation this host offers and what a runtime applies: the layers
--- every spawn gets, then each layer of §10.4 with whether this host has it,
--- why not, and whether a runtime created with `opts` (the options of
--- hcp.create; default: isolation "auto", sandbox, local driver) uses it.
---@param opts table?
---@return { version: string, core: string, mode: string, driver: string, layers: table[] }
function M.doctor(opts)
  opts = type(opts) == "table" and opts or {}
  local mode = require("hcp.sandbox").mode(opts.sandbox, opts.native_local)
  local driver = opts.driver or "local"
  local layers = {}
  for _, name in ipairs(runtime.BASE_LAYERS) do
    layers[#layers + 1] = { name = name, available = true, used = true }
  end
  for _, l in ipairs(require("hcp.isolation").report(opts.isolation, mode, driver, opts.run_as)) do
    layers[#layers + 1] = l
  end
  return { version = M.version, core = core.version, mode = mode, driver = driver, layers = layers }
end

return M
