--- `wrap.limits`: per-call limits under stronger isolation (§10.4).
---@class hcp.manifest.limits
local M = {}

local check = require("hcp.check")

M.KEYS = { cpu_s = true, memory_mb = true, file_mb = true, nofile = true, procs = true }

--- Validate `wrap.limits`.
---@param v any
---@param r hcp.Report
---@return table<string, integer>
function M.validate(v, r)
  local out = {}
  if v == nil then return out end
  if not check.is_object(v) then
    r:bad("wrap.limits", "must be an object")
    return out
  end
  r:fields(v, "wrap.limits", M.KEYS)
  for k, n in pairs(v) do
    if M.KEYS[k] then
      local int = check.positive_integer(n)
      if not int then r:bad("wrap.limits." .. k, "must be a positive integer") else out[k] = int end
    end
  end
  return out
end

return M
