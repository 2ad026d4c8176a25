--- The `ops` section (contract §1): named operations, each an argv
--- template with typed `{param}` placeholders.
---@class hcp.manifest.ops
local M = {}

local check = require("hcp.check")

M.PARAM_TYPES = { string = true, number = true, boolean = true }
local FIELDS = { args = true, params = true, confirm = true, bindings = true, description = true, extra_args = true }

local function params(v, r, f)
  local out = {}
  if v == nil then return out end
  if not check.is_object(v) then
    r:bad(f, "must be an object of parameter types")
    return out
  end
  for p, ty in pairs(v) do
    if type(p) ~= "string" or not p:match(check.PARAM_NAME_PAT) then
      r:bad(f .. "." .. tostring(p), "parameter name must match ^[A-Za-z_][A-Za-z0-9_]*$")
    elseif not M.PARAM_TYPES[ty] then
      r:bad(f .. "." .. p, "type must be string, number or boolean, got %s", tostring(ty))
    else
      out[p] = ty
    end
  end
  return out
end

-- The template: strings without NUL whose placeholders are declared.
local function template(v, r, f, declared)
  local out = {}
  if v == nil then return out end
  if not check.is_array(v) then
    r:bad(f, "must be an array of strings")
    return out
  end
  for i, a in ipairs(v) do
    if type(a) ~= "string" or check.has_nul(a) then
      r:bad(f .. "[" .. i .. "]", "must be a string without NUL")
    else
      for p in a:gmatch("{([%a_][%w_]*)}") do
        if declared[p] == nil then r:bad(f .. "[" .. i .. "]", "placeholder {%s} is not a declared parameter", p) end
      end
      out[i] = a
    end
  end
  return out
end

local function binding_names(v, r, f, bindings)
  local out = {}
  if v == nil then return out end
  if not check.is_array(v) then
    r:bad(f, "must be an array of binding names")
    return out
  end
  for i, name in ipairs(v) do
    if type(name) ~= "string" or not bindings[name] then
      r:bad(f .. "[" .. i .. "]", "%s is not a binding of this pack", tostring(name))
    else
      out[#out + 1] = name
    end
  end
  return out
end

local function one(name, op, r, bindings)
  local f = "ops." .. tostring(name)
  if type(name) ~= "string" or #name > 64 or not name:match(check.OP_NAME_PAT) then
    return r:bad(f, "op name must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
  end
  if not check.is_object(op) then return r:bad(f, "must be an object") end
  r:fields(op, f, FIELDS)
  local o = { name = name, params = params(op.params, r, f .. ".params"), confirm = false }
  -- a placeholder counts as declared even when its type was wrong: one
  -- problem is reported, at the parameter
  o.args = template(op.args, r, f .. ".args", check.is_object(op.params) and op.params or {})
  if op.confirm ~= nil then
    if type(op.confirm) ~= "boolean" then r:bad(f .. ".confirm", "must be a boolean") else o.confirm = op.confirm end
  end
  o.bindings = binding_names(op.bindings, r, f .. ".bindings", bindings)
  -- trailing raw args of an op call are the op's own only when it says so
  -- (contract §4); otherwise such a call is also <pack>.exec for policy
  if op.extra_args ~= nil and type(op.extra_args) ~= "boolean" then r:bad(f .. ".extra_args", "must be a boolean") end
  o.extra_args = op.extra_args == true
  if op.description ~= nil and type(op.description) ~= "string" then r:bad(f .. ".description", "must be a string") end
  o.description = op.description
  return o
end

--- Validate `doc.ops`.
---@param v any
---@param r hcp.Report
---@param bindings table<string, table> the pack's validated bindings
---@return table<string, table> ops
function M.validate(v, r, bindings)
  local out = {}
  if v == nil then return out end
  if not check.is_object(v) then
    r:bad("ops", "must be an object")
    return out
  end
  for name, op in pairs(v) do out[name] = one(name, op, r, bindings) end
  return out
end

return M
