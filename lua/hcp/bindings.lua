--- Bindings (contract §3): credentials minted at call time.
---
--- The runtime never reads its own environment to satisfy a binding: the
--- only source of a credential is the minter the operator configured. Any
--- failure (no minter, an error, a nil or empty token) fails the call
--- closed before anything is spawned.
---@class hcp.bindings
local M = {}

local core = require("hcp.core")

--- Validate the `bindings` option of `hcp.create`.
---@param cfg any
---@return table<string, function>? minters, string? err
function M.new(cfg)
  if cfg == nil then return {} end
  if type(cfg) ~= "table" then return nil, "hcp.create: option \"bindings\" must be a table of minters" end
  local out = {}
  for name, fn in pairs(cfg) do
    if type(name) ~= "string" then return nil, "hcp.create: bindings keys must be binding names" end
    if type(fn) ~= "function" then
      return nil, string.format("hcp.create: bindings.%s must be a function (the minter)", name)
    end
    out[name] = fn
  end
  return out
end

--- Mint the named bindings of a pack for one call.
---@param minters table<string, function>
---@param pack hcp.Pack
---@param opname string
---@param names string[] binding names the call needs
---@param secret_dir fun(): string?, string? returns a private dir for `as = "file"` tokens
---@return table<string, string>? env, string? err
function M.mint(minters, pack, opname, names, secret_dir)
  local env = {}
  for _, name in ipairs(names) do
    local b = pack.bindings[name]
    local fail = string.format("binding: mint failed for %q", name)
    local minter = minters[name]
    if not b or not minter then return nil, fail end
    local ok, token = pcall(minter, { pack = pack.name, op = opname, binding = name, family = b.family })
    if not ok or type(token) ~= "string" or token == "" or token:find("\0", 1, true) then
      return nil, fail
    end
    if b.as == "file" then
      local dir = secret_dir()
      if not dir then return nil, fail end
      local path = dir .. "/" .. name
      if not core.write_private(path, token) then return nil, fail end
      env[b.env] = path
    else
      env[b.env] = token
    end
  end
  return env
end

--- Which bindings a call needs: those its op lists; a raw-args call (the
--- whole CLI, named `pack.exec`) needs every binding the pack declares.
---@param pack hcp.Pack
---@param op table?
---@return string[]
function M.needed(pack, op)
  if op then return op.bindings end
  local names = {}
  for name in pairs(pack.bindings) do names[#names + 1] = name end
  table.sort(names)
  return names
end

return M
