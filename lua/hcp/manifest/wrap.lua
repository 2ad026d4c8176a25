--- The `wrap` section (contract §1): the bin, its fixed arguments, the
--- environment the pack adds, the timeout, and (delegated) the workspace
--- and the limits.
---@class hcp.manifest.wrap
local M = {}

local check = require("hcp.check")
local egress = require("hcp.egress")
local env = require("hcp.manifest.env")
local limits = require("hcp.manifest.limits")
local workspace = require("hcp.manifest.workspace")

M.DEFAULT_TIMEOUT_MS = 30000
M.MAX_TIMEOUT_MS = 86400000
local FIELDS = { bin = true, args = true, agent_env = true, timeout_ms = true,
  workspace = true, network = true, limits = true, egress = true }

-- "bare" | "absolute" | "relative", or nil after reporting the problem.
local function bin_kind(bin, r)
  if type(bin) ~= "string" or bin == "" or check.has_nul(bin) then
    return r:bad("wrap.bin", "required non-empty string")
  elseif bin:sub(1, 1) == "/" then
    return "absolute"
  elseif bin:sub(1, 2) == "./" then
    if #bin == 2 then r:bad("wrap.bin", "\"./\" names no file") end
    return "relative"
  elseif bin:find("/", 1, true) or bin == "." or bin == ".." then
    return r:bad("wrap.bin", "%q must be a bare name, an absolute path, or start with ./", bin)
  end
  return "bare"
end

local function args(v, r)
  local out = {}
  if v == nil then return out end
  if not check.is_array(v) then
    r:bad("wrap.args", "must be an array of strings")
    return out
  end
  for i, a in ipairs(v) do
    if type(a) ~= "string" or check.has_nul(a) then r:bad("wrap.args[" .. i .. "]", "must be a string without NUL")
    else out[i] = a end
  end
  return out
end

local function agent_env(v, r, binding_env)
  local out = {}
  if v == nil then return out end
  if not check.is_object(v) then
    r:bad("wrap.agent_env", "must be an object of strings")
    return out
  end
  for k, val in pairs(v) do
    local f = "wrap.agent_env." .. tostring(k)
    local why = env.problem(k, val)
    if why then r:bad(f, "%s", why)
    elseif type(val) ~= "string" or check.has_nul(val) then r:bad(f, "value must be a string without NUL")
    elseif binding_env[k] then r:bad(f, "%s is the variable of binding %q", k, binding_env[k])
    else out[k] = val end
  end
  return out
end

local function timeout(v, r)
  if v == nil then return M.DEFAULT_TIMEOUT_MS end
  local t = check.positive_integer(v, M.MAX_TIMEOUT_MS)
  if not t then r:bad("wrap.timeout_ms", "must be a positive integer of milliseconds (at most %d)", M.MAX_TIMEOUT_MS) end
  return t or M.DEFAULT_TIMEOUT_MS
end

--- Validate `doc.wrap`, defaults applied.
---@param v any
---@param r hcp.Report
---@param binding_env table<string, string> variables the bindings use
---@return table wrap
function M.validate(v, r, binding_env)
  if not check.is_object(v) or next(v) == nil then
    r:bad("wrap", "required object")
    return {}
  end
  r:fields(v, "wrap", FIELDS)
  local w = { bin = v.bin, bin_kind = bin_kind(v.bin, r), args = args(v.args, r),
    agent_env = agent_env(v.agent_env, r, binding_env), timeout_ms = timeout(v.timeout_ms, r),
    network = false, limits = limits.validate(v.limits, r), workspace = workspace.validate(v.workspace, r) }
  if v.network ~= nil then
    if type(v.network) ~= "boolean" then r:bad("wrap.network", "must be a boolean") else w.network = v.network end
  end
  -- the hosts the pack reaches without a credential (hcp.egress)
  w.egress = egress.validate_list(v.egress, r, "wrap.egress", "wrap.egress")
  if w.network and w.egress and #w.egress > 0 then
    r:bad("wrap.egress", "means nothing with wrap.network: true (the whole network); declare one of the two")
  end
  return w
end

return M
