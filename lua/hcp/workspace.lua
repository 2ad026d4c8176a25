--- The workspace / exec plane (§10.6): file references in argv, and where
--- jails live.
---
--- `plan` is a pure function of argv and a few paths: it touches no file, so
--- a refused reference has written nothing and spawned nothing. The driver
--- (hcp.driver.local) carries the plan out: staging, spawn, write-back.
---@class hcp.workspace
local M = {}

local core = require("hcp.core")

M.PREFIX = "workspace:"
-- §10.6: these are written back after the call (when the pack lists them
-- among its file_flags); every other file flag names an input.
M.OUTPUT_FLAGS = { ["--output"] = true, ["-o"] = true }

---@class hcp.Plan
---@field argv string[]        the rewritten arguments
---@field stage { rel: string }[]   inputs: out_dir/rel is copied to files_dir/rel before spawn
---@field outputs { rel: string }[] outputs: files_dir/rel is written back to out_dir/rel after the call
---@field dirs string[]        directories to create in files_dir so the tool can write its outputs

---@class hcp.PlanOptions
---@field jail string          where `workspace:REL` points
---@field files_dir string     where file-flag values point (the jail, or a per-call directory in mode none)
---@field file_flags string[]

local function escapes(norm)
  return norm == ".." or norm:sub(1, 3) == "../"
end

--- Plan the rewriting of argv.
---@param argv string[] arguments after argv[0]
---@param opts hcp.PlanOptions
---@return hcp.Plan? plan, string? err
function M.plan(argv, opts)
  for i, a in ipairs(argv) do   -- (the path functions below raise for one)
    if a:find("\0", 1, true) then return nil, string.format("workspace: argument %d contains a NUL byte", i) end
  end
  local is_flag, is_output = {}, {}
  for _, f in ipairs(opts.file_flags) do
    is_flag[f] = true
    if M.OUTPUT_FLAGS[f] then is_output[f] = true end
  end
  local plan = { argv = {}, stage = {}, outputs = {}, dirs = {} }
  local seen_stage, seen_out = {}, {}

  local function jail_ref(rel, i)
    local path = core.normalize(opts.jail .. "/" .. rel:gsub("^/+", ""))
    if not core.contains(opts.jail, path) then
      return nil, string.format("workspace: path escapes the jail: argument %d", i)
    end
    return path
  end

  -- the value of a file flag
  local function file_value(flag, value, i)
    if value:sub(1, #M.PREFIX) == M.PREFIX then return jail_ref(value:sub(#M.PREFIX + 1), i) end
    -- "-" (stdin/stdout), absolute paths (checked by the host-path rule) and
    -- other URI schemes pass through unchanged; a "URL" that, read as the
    -- path a tool without URLs sees, climbs out ("a://../../x") does not
    -- (found by spec/fuzz/plan)
    if value == "" or value == "-" or value:sub(1, 1) == "/" then return value end
    local norm = core.normalize(value)
    if value:find("://", 1, true) and not escapes(norm) then return value end
    if escapes(norm) then
      return nil, string.format("workspace: path escapes the jail: argument %d", i)
    end
    if norm == "." then
      return nil, string.format("workspace: argument %d: %q names a directory, not a file", i, value)
    end
    if is_output[flag] then
      if not seen_out[norm] then
        seen_out[norm] = true
        plan.outputs[#plan.outputs + 1] = { rel = norm }
        local parent = norm:match("^(.*)/[^/]+$")
        if parent then plan.dirs[#plan.dirs + 1] = parent end
      end
    elseif not seen_stage[norm] then
      seen_stage[norm] = true
      plan.stage[#plan.stage + 1] = { rel = norm }
    end
    return opts.files_dir .. "/" .. norm
  end

  local i = 1
  while i <= #argv do
    local a = argv[i]
    local out, err
    if is_flag[a] and i < #argv then
      -- `--flag value`: the flag stays, the value is rewritten
      plan.argv[#plan.argv + 1] = a
      i = i + 1
      out, err = file_value(a, argv[i], i)
    elseif a:sub(1, #M.PREFIX) == M.PREFIX then
      out, err = jail_ref(a:sub(#M.PREFIX + 1), i)
    else
      local eq = a:find("=", 1, true)
      local flag = eq and a:sub(1, eq - 1)
      if flag and is_flag[flag] then
        out, err = file_value(flag, a:sub(eq + 1), i)
        if out then out = flag .. "=" .. out end
      elseif flag and a:sub(1, 1) == "-" and a:sub(eq + 1, eq + #M.PREFIX) == M.PREFIX then
        -- --any-flag=workspace:REL
        out, err = jail_ref(a:sub(eq + 1 + #M.PREFIX), i)
        if out then out = flag .. "=" .. out end
      else
        out = a
      end
    end
    if not out then return nil, err end
    plan.argv[#plan.argv + 1] = out
    i = i + 1
  end
  return plan
end

--- The default state directory: $XDG_STATE_HOME/hcp, else ~/.local/state/hcp.
---@return string? dir
function M.default_state_dir()
  local xdg = os.getenv("XDG_STATE_HOME")
  if xdg and xdg:sub(1, 1) == "/" then return xdg .. "/hcp" end
  local home = os.getenv("HOME")
  if home and home:sub(1, 1) == "/" then return core.normalize(home .. "/.local/state/hcp") end
  return nil
end

--- Where the persisted jail of a principal and pack lives, and its lock.
--- The lock's name starts with a dot, which no pack name can: packs `x`
--- and `x.lock` cannot meet.
---@param state_dir string
---@param principal string
---@param pack string
---@return string jail, string lockfile
function M.persisted_paths(state_dir, principal, pack)
  local base = state_dir .. "/workspaces/" .. principal
  return base .. "/" .. pack, base .. "/." .. pack .. ".lock"
end

--- mkdir -p with mode 0700 for each component created.
---@param path string absolute
---@return boolean? ok, string? err
function M.mkdirs(path)
  local cur = ""
  for part in path:gmatch("[^/]+") do
    cur = cur .. "/" .. part
    local kind = core.kind(cur)
    -- a link to a directory is followed: these are paths the operator
    -- configured (a symlinked $HOME, say), not paths a child controls
    local is_dir = kind == "dir" or (kind == "link" and core.kind(cur .. "/.") == "dir")
    if kind == nil then
      local ok, err = core.mkdir(cur)
      if not ok and core.kind(cur) ~= "dir" then return nil, err end
    elseif not is_dir then
      return nil, cur .. ": not a directory"
    end
  end
  return true
end

return M
