--- Shape checks shared by the manifest, envelope and option validators:
--- arrays, objects, string lists and maps, names. Each is a pure predicate
--- or returns the checked value and nil, or nil and a message naming
--- `what` — so every caller words its errors the same way.
---@class hcp.check
local M = {}

--- Whether `t` is a table whose keys are exactly 1..#t.
---@param t any
---@return boolean
function M.is_array(t)
  if type(t) ~= "table" then return false end
  local n = #t
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

--- Whether `t` is a table usable as an object: `{}` counts as one (an empty
--- JSON object and an empty array decode alike).
---@param t any
---@return boolean
function M.is_object(t)
  if type(t) ~= "table" then return false end
  if next(t) == nil then return true end
  return not M.is_array(t)
end

--- Whether a string holds a NUL byte (never valid in argv, env or paths).
---@param s string
---@return boolean
function M.has_nul(s)
  return s:find("\0", 1, true) ~= nil
end

--- An array of strings.
---@param v any
---@param what string how the caller names the value, for the message
---@return string[]? list, string? err
function M.string_list(v, what)
  if not M.is_array(v) then return nil, what .. " must be an array of strings" end
  for i, s in ipairs(v) do
    if type(s) ~= "string" then return nil, string.format("%s[%d] must be a string", what, i) end
  end
  return v
end

--- An object mapping strings to strings.
---@param v any
---@param what string
---@return table<string, string>? map, string? err
function M.string_map(v, what)
  if not M.is_object(v) then return nil, what .. " must be an object of strings" end
  for k, s in pairs(v) do
    if type(k) ~= "string" then return nil, what .. " keys must be strings" end
    if type(s) ~= "string" then return nil, string.format("%s.%s must be a string", what, k) end
  end
  return v
end

--- Keys of `t` (as strings) in sorted order, for deterministic messages.
---@param t table
---@return string[]
function M.sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = tostring(k) end
  table.sort(ks)
  return ks
end

--- The first key of `t` that `allowed` does not list, in sorted order.
---@param t table
---@param allowed table<string, any>
---@return string? key
function M.unknown_key(t, allowed)
  for _, k in ipairs(M.sorted_keys(t)) do
    if allowed[k] == nil then return k end
  end
  return nil
end

--- A positive integer (a Lua float with an integral value counts).
---@param v any
---@param max number? inclusive upper bound
---@return integer?
function M.positive_integer(v, max)
  if type(v) ~= "number" or v ~= v or v <= 0 or v ~= math.floor(v) then return nil end
  if max and v > max then return nil end
  return math.tointeger(v)
end

M.ENV_PAT = "^[A-Za-z_][A-Za-z0-9_]*$"
M.PACK_NAME_PAT = "^[a-z0-9][a-z0-9._%-]*$"
M.OP_NAME_PAT = "^[A-Za-z0-9][A-Za-z0-9_%-]*$"
M.PARAM_NAME_PAT = "^[%a_][%w_]*$"
M.PRINCIPAL_PAT = "^[A-Za-z0-9._-]+$"

--- Whether `name` is a valid environment variable name.
---@param name any
---@return boolean
function M.is_env_name(name)
  return type(name) == "string" and name:match(M.ENV_PAT) ~= nil
end

--- Whether `name` is a valid pack name (contract §1).
---@param name any
---@return boolean
function M.is_pack_name(name)
  return type(name) == "string" and #name <= 64 and name:match(M.PACK_NAME_PAT) ~= nil
end

return M
