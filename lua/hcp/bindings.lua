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

-- One token from its minter: a string without NUL; else nil and, when
-- the minter raised, its message.
local function mint_one(minter, ctx)
  local ok, token = pcall(minter, ctx)
  if not ok then return nil, ": " .. tostring(token) end
  if type(token) ~= "string" or token == "" or token:find("\0", 1, true) then return nil, "" end
  return token
end

---@class hcp.MintRequest
---@field pack hcp.Pack
---@field op string          the op name, or "exec"
---@field principal string
---@field names string[]     binding names the call needs
---@field secret_dir fun(): string?, string? a private dir for `as = "file"` tokens

--- Mint the named bindings of a pack for one call. A minter is called with
--- `{ pack=, op=, binding=, family=, principal= }`. No minter, no token
--- (nil, empty, not a string, a NUL byte) or an error all fail closed with
--- `binding: mint failed for "<name>"`; what a minter raised is kept after
--- it (`: <message>`), never swallowed.
---@param minters table<string, function>
---@param req hcp.MintRequest
---@return table<string, string>? env, string? err
function M.mint(minters, req)
  local env = {}
  for _, name in ipairs(req.names) do
    local b = req.pack.bindings[name]
    local fail = string.format("binding: mint failed for %q", name)
    local minter = minters[name]
    if not b or not minter then return nil, fail end
    local token, why = mint_one(minter, { pack = req.pack.name, op = req.op, binding = name, family = b.family,
      principal = req.principal })
    if not token then return nil, fail .. why end
    if b.as == "file" then
      local dir, derr = req.secret_dir()
      if not dir then return nil, fail .. ": " .. tostring(derr) end
      local path = dir .. "/" .. name
      local ok, werr = core.write_private(path, token)
      if not ok then return nil, fail .. ": " .. tostring(werr) end
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
