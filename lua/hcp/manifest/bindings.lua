--- The `bindings` section (contract §3): credentials minted at call time.
---@class hcp.manifest.bindings
local M = {}

local check = require("hcp.check")
local egress = require("hcp.egress")
local env = require("hcp.manifest.env")

local FIELDS = { family = true, env = true, as = true, description = true, hosts = true }

local function one(name, b, r, used_env)
  local f = "bindings." .. tostring(name)
  if not check.is_object(b) then return r:bad(f, "must be an object") end
  r:fields(b, f, FIELDS)
  if type(b.family) ~= "string" or b.family == "" then r:bad(f .. ".family", "required string") end
  local as = b.as == nil and "env" or b.as
  if as ~= "env" and as ~= "file" then r:bad(f .. ".as", "must be \"env\" or \"file\", got %s", tostring(b.as)) end
  if not check.is_env_name(b.env) then
    r:bad(f .. ".env", "required environment variable name")
  else
    local why = env.reserved_env(b.env)
    if why then r:bad(f .. ".env", "%s %s", b.env, why) end
    if used_env[b.env] then r:bad(f .. ".env", "%s is already used by binding %q", b.env, used_env[b.env]) end
    used_env[b.env] = name
  end
  if b.description ~= nil and type(b.description) ~= "string" then r:bad(f .. ".description", "must be a string") end
  -- the hosts this credential is for: what a call that uses it may reach
  local hosts = egress.validate_list(b.hosts, r, f .. ".hosts", string.format("binding %q", tostring(name)))
  if hosts and b.family ~= "http" then r:bad(f .. ".hosts", "only a binding of family \"http\" lists hosts") end
  return { name = name, family = b.family, env = b.env, as = as, hosts = hosts }
end

--- Validate `doc.bindings`.
---@param v any
---@param r hcp.Report
---@return table<string, table> bindings, table<string, string> env_of variable -> binding name
function M.validate(v, r)
  local out, used_env = {}, {}
  if v == nil then return out, used_env end
  if not check.is_object(v) then
    r:bad("bindings", "must be an object")
    return out, used_env
  end
  for name, b in pairs(v) do out[name] = one(name, b, r, used_env) end
  return out, used_env
end

return M
