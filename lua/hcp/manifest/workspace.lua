--- `wrap.workspace` (§10.6): the jail mode, the variables pointed at the
--- jail, and the flags whose value is a file — `file_flags` (inputs, staged
--- in) and `output_flags` (outputs, written back; contract §8).
---
--- Old manifests list `--output`/`-o` among `file_flags`: without
--- `output_flags`, those two in `file_flags` are the outputs
--- (hcp.workspace.flags), as before. With `output_flags`, `file_flags` are
--- inputs only, default `--file --json-file --env-file`, and a flag may not
--- be in both.
---@class hcp.manifest.workspace
local M = {}

local check = require("hcp.check")
local env = require("hcp.manifest.env")

M.MODES = { none = true, ephemeral = true, workspace = true }
M.DEFAULT_FILE_FLAGS = { "--file", "--json-file", "--output", "-o", "--env-file" }
-- the inputs among the defaults, when output_flags says what the outputs are
M.DEFAULT_INPUT_FLAGS = { "--file", "--json-file", "--env-file" }
M.DEFAULT_OUTPUT_FLAGS = { "--output", "-o" }
local FIELDS = { mode = true, home_env = true, file_flags = true, output_flags = true }
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

-- A flag named in both lists is a problem: it is an input or an output.
local function overlap(ws, r, f)
  local inputs = {}
  for _, fl in ipairs(ws.file_flags) do inputs[fl] = true end
  for i, fl in ipairs(ws.output_flags) do
    if inputs[fl] then
      r:bad(f .. ".output_flags[" .. i .. "]", "%s is also in file_flags: a flag's value is an input (file_flags) "
        .. "or an output (output_flags), not both", fl)
    end
  end
end

--- Validate `wrap.workspace`, defaults applied. `output_flags` is nil when
--- the manifest has none (then hcp.workspace.flags reads the outputs out of
--- `file_flags`, as manifests before it said them).
---@param v any
---@param r hcp.Report
---@return { mode: string, home_env: string[], file_flags: string[], output_flags: string[]? }
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
    if v.output_flags ~= nil then
      ws.output_flags = flags(v.output_flags, r, f .. ".output_flags")
      if v.file_flags == nil then ws.file_flags = M.DEFAULT_INPUT_FLAGS end
      overlap(ws, r, f)
    end
  end
  if ws.home_env == nil then ws.home_env = ws.mode == "workspace" and { "HOME" } or {} end
  return ws
end

return M
