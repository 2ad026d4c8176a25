--- Ops (contract §1): argv templates with `{param}` placeholders.
---
--- A placeholder is replaced inside exactly one argv element and never
--- splits it: `{"--name={who}"}` with `who = "a b; rm -rf /"` stays a single
--- argument. Nothing here goes near a shell.
---@class hcp.ops
local M = {}

local function render(value, ty)
  if ty == "string" then return value end
  if ty == "boolean" then return value and "true" or "false" end
  -- numbers: integers without a fraction, others with enough digits to round-trip
  if math.type(value) == "integer" or (value == math.floor(value) and math.abs(value) < 2^53) then
    return string.format("%d", math.tointeger(value) or value)
  end
  return string.format("%.17g", value)
end

--- Check `params` against the op's declared types.
---@param pack_name string
---@param op table validated op from the manifest
---@param params table<string, any>?
---@return table<string, string>? rendered, string? err
function M.check_params(pack_name, op, params)
  params = params or {}
  local rendered = {}
  for k, v in pairs(params) do
    local ty = op.params[k]
    if not ty then
      return nil, string.format("envelope: op \"%s.%s\" has no parameter %q", pack_name, op.name, k)
    end
    if type(v) ~= ty or (ty == "number" and (v ~= v or v == math.huge or v == -math.huge)) then
      return nil, string.format("envelope: parameter %q of \"%s.%s\" must be a %s", k, pack_name, op.name, ty)
    end
    rendered[k] = render(v, ty)
  end
  local missing = {}
  for k in pairs(op.params) do
    if rendered[k] == nil then missing[#missing + 1] = k end
  end
  if #missing > 0 then
    table.sort(missing)
    return nil, string.format("envelope: op \"%s.%s\" is missing parameter %q", pack_name, op.name, missing[1])
  end
  return rendered
end

--- Expand an op's argv template.
---@param template string[]
---@param rendered table<string, string> from check_params
---@return string[]
function M.expand(template, rendered)
  local out = {}
  for i, a in ipairs(template) do
    -- gsub with a function: the replacement is never re-scanned and "%" in a
    -- value is taken literally
    out[i] = (a:gsub("{([%a_][%w_]*)}", function(name)
      return rendered[name]
    end))
  end
  return out
end

return M
