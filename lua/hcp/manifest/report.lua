--- The problem collector every manifest section reports into: one list per
--- manifest, each problem naming the file and the dotted field at fault.
---@class hcp.manifest.report
local M = {}

---@class hcp.Problem
---@field file string   path of the manifest (or pack dir) at fault
---@field field string  dotted field name, "" for the whole file
---@field message string

---@class hcp.Report
---@field file string
---@field problems hcp.Problem[]
local Report = {}
Report.__index = Report

--- A new, empty report for `file`.
---@param file string
---@return hcp.Report
function M.new(file)
  return setmetatable({ file = file, problems = {} }, Report)
end

--- Record a problem at `field`.
---@param field string
---@param fmt string
function Report:bad(field, fmt, ...)
  self.problems[#self.problems + 1] = { file = self.file, field = field, message = string.format(fmt, ...) }
end

--- Record every key of `t` that `allowed` does not list as an unknown field
--- (a typo in a part the runtime executes would silently change what runs).
---@param t table
---@param field string the dotted name of `t`, "" for the top level
---@param allowed table<string, boolean>
function Report:fields(t, field, allowed)
  for k in pairs(t) do
    if not allowed[k] then self:bad(field == "" and tostring(k) or field .. "." .. tostring(k), "unknown field") end
  end
end

--- Whether nothing was recorded.
---@return boolean
function Report:ok()
  return #self.problems == 0
end

--- The problems, sorted by field.
---@return hcp.Problem[]
function Report:sorted()
  table.sort(self.problems, function(a, b) return a.field < b.field end)
  return self.problems
end

return M
