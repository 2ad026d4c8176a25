--- Which variables a manifest may set in the child's environment, through
--- `wrap.agent_env`, a binding's `env` or `wrap.workspace.home_env`.
---@class hcp.manifest.env
local M = {}

local check = require("hcp.check")

--- Variables no manifest may set: the sandbox marker, the fixed PATH, and
--- the dynamic loader's LD_* family (LD_PRELOAD would run a library that is
--- on no allow-list inside an allowed bin).
---@param name string
---@return string? reason
function M.reserved_env(name)
  if name == "HCP_SANDBOX" then return "is set by the runtime" end
  if name == "PATH" then return "is fixed by the runtime (search_path)" end
  if name:sub(1, 3) == "LD_" then return "LD_* variables are refused (loader injection)" end
  return nil
end

--- Check one variable name for `field`; the reason it is refused, if any.
---@param name any
---@return string? problem
function M.problem(name)
  if not check.is_env_name(name) then return "not a valid environment variable name" end
  local why = M.reserved_env(name)
  if why then return name .. " " .. why end
  return nil
end

return M
