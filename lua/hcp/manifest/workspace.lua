--- `wrap.workspace` (§10.6): the jail mode, the variables pointed at the
--- jail, and the flags whose value is a file.
---@class hcp.manifest.workspace
local M = {}

local check = require("hcp.check")
local env = require("hcp.manifest.env")

M.MODES = { none = true, ephemeral = true, workspace = true }
M.DEFAULT_FILE_FLAGS = { "--file", "--json-file", "--output", "-o", "--env-file" }
local FIELDS = { mode = true, home_env = true, file_flags = true }
local FLAG_PAT = "^%-%-?[%w][%w_.%-]*$"

local function home_env(v, r, f)
  if not check.is_array(v) then
    r:bad(f, "must be an array of variable names")
    return {}
  end
  local out = {}
  for i, k in ipairs(v) do
    if not check.is_env_name(k) then r:bad(f .. "[" .. i .. "]", "not a variable name")
    elseif env.reserved_env(k) then r:bad(f .. "[" .. i .. "]", "%s %s", k, env.reserved_env(k))
    else out[i] = k end
  end
  return out
end

local function flags(v, r, f)
  if not check.is_array(v) then
    r:bad(f, "must be an array of flags")
    return {}
  end
  local out = {}
  for i, fl in ipairs(v) do
    if type(fl) ~= "string" or not fl:match(FLAG_PAT) then
      r:bad(f .. "[" .. i .. "]", "must be a flag such as --file or -o")
    else
      out[i] = fl
    end
  end
  return out
end

--- Validate `wrap.workspace`, defaults applied.
---@param v any
---@param r hcp.Report
---@return { mode: string, home_env: string[], file_flags: string[] }
function M.validate(v, r)
  local ws = { mode = "none", file_flags = M.DEFAULT_FILE_FLAGS }
  local f = "wrap.workspace"
  if v ~= nil and not check.is_object(v) then
    r:bad(f, "must be an object")
  elseif v ~= nil then
    r:fields(v, f, FIELDS)
    if v.mode ~= nil then
      if M.MODES[v.mode] then ws.mode = v.mode
      else r:bad(f .. ".mode", "must be none, ephemeral or workspace, got %s", tostring(v.mode)) end
    end
    if v.home_env ~= nil then ws.home_env = home_env(v.home_env, r, f .. ".home_env") end
    if v.file_flags ~= nil then ws.file_flags = flags(v.file_flags, r, f .. ".file_flags") end
  end
  if ws.home_env == nil then ws.home_env = ws.mode == "workspace" and { "HOME" } or {} end
  return ws
end

return M
