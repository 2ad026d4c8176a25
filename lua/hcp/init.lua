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

--- What isolation this host offers and what a default runtime applies:
--- the layers every spawn gets, then each layer of §10.4 with whether this
--- host has it and why not.
---@return { version: string, core: string, layers: table[] } layers: { name, available, used, reason?, detail? }
function M.doctor()
  local layers = {}
  for _, name in ipairs(runtime.BASE_LAYERS) do
    layers[#layers + 1] = { name = name, available = true, used = true }
  end
  for _, l in ipairs(require("hcp.isolation").report()) do layers[#layers + 1] = l end
  return { version = M.version, core = core.version, layers = layers }
end

return M
