--- Which variables a manifest may set in the child's environment, through
--- `wrap.agent_env`, a binding's `env` or `wrap.workspace.home_env`.
---@class hcp.manifest.env
local M = {}

local check = require("hcp.check")

--- Variables no manifest may set: the sandbox marker, the fixed PATH, and
--- every variable that makes a program load code (LD_PRELOAD, GCONV_PATH,
--- BASH_ENV, …: hcp.envrules has the list).
---@param name string
---@param value string? the value agent_env gives it ("" and "/dev/null" turn a loader off)
---@return string? reason
function M.reserved_env(name, value)
  if name == "HCP_SANDBOX" then return "is set by the runtime" end
  if name == "PATH" then return "is fixed by the runtime (search_path)" end
  -- the list is built when a manifest first sets a variable, not at every start
  return require("hcp.envrules").reason(name, value)
end

--- Check one variable of agent_env (name and value); the reason it is
--- refused, if any.
---@param name any
---@param value any
---@return string? problem
function M.problem(name, value)
  if not check.is_env_name(name) then return "not a valid environment variable name" end
  local why = M.reserved_env(name, type(value) == "string" and value or nil)
  if why then return name .. " " .. why end
  return nil
end

return M
