--- The `mocks` section: fixtures returned in mock mode, per op, "exec" or "*".
---@class hcp.manifest.mocks
local M = {}

local check = require("hcp.check")

local FIELDS = { exit = true, stdout = true, stderr = true }

local function one(key, m, r, ops)
  local f = "mocks." .. tostring(key)
  if key ~= "*" and key ~= "exec" and not (check.is_object(ops) and ops[key]) then
    return r:bad(f, "names no op of this pack (use an op name, \"exec\" or \"*\")")
  end
  if not check.is_object(m) then return r:bad(f, "must be an object") end
  r:fields(m, f, FIELDS)
  local e = m.exit == nil and 0 or m.exit
  if type(e) ~= "number" or e ~= math.floor(e) or e < 0 or e > 255 then r:bad(f .. ".exit", "must be an integer 0..255") end
  for _, s in ipairs({ "stdout", "stderr" }) do
    if m[s] ~= nil and type(m[s]) ~= "string" then r:bad(f .. "." .. s, "must be a string") end
  end
  return { exit = math.tointeger(e) or 0, stdout = m.stdout or "", stderr = m.stderr or "" }
end

--- Validate `doc.mocks` against the ops the document declares.
---@param v any
---@param r hcp.Report
---@param ops any the document's raw `ops` (a mock may name any op there)
---@return table<string, table>
function M.validate(v, r, ops)
  local out = {}
  if v == nil then return out end
  if not check.is_object(v) then
    r:bad("mocks", "must be an object")
    return out
  end
  for key, m in pairs(v) do out[key] = one(key, m, r, ops) end
  return out
end

return M
