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

---@class hcp.PlanRef
---@field before string   text kept before the path ("--output=", or "")
---@field root "jail"|"files"
---@field rel string      normalised path relative to that root ("" for the root itself)

---@class hcp.Plan
---@field argv (string|hcp.PlanRef)[]  the arguments, file references as refs
---@field stage { rel: string }[]   inputs: out_dir/rel is copied to files/rel before spawn
---@field outputs { rel: string }[] outputs: files/rel is written back to out_dir/rel after the call
---@field dirs string[]        directories to create in files so the tool can write its outputs
---@field uses_files boolean   whether any reference points into files

---@class hcp.PlanOptions
---@field file_flags string[]
---@field output_flags string[]? flags whose value is an output (default --output, -o)

local function escapes(norm)
  return norm == ".." or norm:sub(1, 3) == "../"
end

-- A path relative to a root, lexically normalised; nil when it leaves it.
local ROOT = "/hcp-plan-root"
local function beneath(rel)
  local path = core.normalize(ROOT .. "/" .. rel:gsub("^/+", ""))
  if not core.contains(ROOT, path) then return nil end
  return path:sub(#ROOT + 2)
end

--- Plan the rewriting of argv, root-free: references name a root ("jail"
--- or "files") and a relative path, bound to real directories later by
--- `bind`. Pure: touches no file, so a refused reference has written
--- nothing and spawned nothing.
---@param argv string[] arguments after argv[0]
---@param opts hcp.PlanOptions
---@return hcp.Plan? plan, string? err
function M.plan(argv, opts)
  local is_flag, is_output = {}, {}
  for _, f in ipairs(opts.output_flags or { "--output", "-o" }) do is_output[f] = true end
  for _, f in ipairs(opts.file_flags) do is_flag[f] = true end
  local plan = { argv = {}, stage = {}, outputs = {}, dirs = {}, uses_files = false }
  local seen_stage, seen_out = {}, {}

  local function jail_ref(before, rel, i)
    local r = beneath(rel)
    if not r then return nil, string.format("workspace: path escapes the jail: argument %d", i) end
    return { before = before, root = "jail", rel = r }
  end

  -- the value of a file flag
  local function file_value(flag, before, value, i)
    if value:sub(1, #M.PREFIX) == M.PREFIX then return jail_ref(before, value:sub(#M.PREFIX + 1), i) end
    -- "-" (stdin/stdout), absolute paths (checked by the host-path rule) and
    -- other URI schemes pass through unchanged
    if value == "" or value == "-" or value:sub(1, 1) == "/" or value:find("://", 1, true) then
      return before .. value
    end
    local norm = core.normalize(value)
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
    plan.uses_files = true
    return { before = before, root = "files", rel = norm }
  end

  local i = 1
  while i <= #argv do
    local a = argv[i]
    local out, err
    if is_flag[a] and i < #argv then
      -- `--flag value`: the flag stays, the value is rewritten
      plan.argv[#plan.argv + 1] = a
      i = i + 1
      out, err = file_value(a, "", argv[i], i)
    elseif a:sub(1, #M.PREFIX) == M.PREFIX then
      out, err = jail_ref("", a:sub(#M.PREFIX + 1), i)
    else
      local eq = a:find("=", 1, true)
      local flag = eq and a:sub(1, eq - 1)
      if flag and is_flag[flag] then
        out, err = file_value(flag, flag .. "=", a:sub(eq + 1), i)
      elseif flag and a:sub(1, 1) == "-" and a:sub(eq + 1, eq + #M.PREFIX) == M.PREFIX then
        -- --any-flag=workspace:REL
        out, err = jail_ref(flag .. "=", a:sub(eq + 1 + #M.PREFIX), i)
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

--- Bind a plan to the call's directories: the argv the child gets.
---@param plan hcp.Plan
---@param roots { jail: string, files_dir: string }
---@return string[]
function M.bind(plan, roots)
  local out = {}
  for i, a in ipairs(plan.argv) do
    if type(a) == "string" then
      out[i] = a
    else
      local dir = a.root == "jail" and roots.jail or roots.files_dir
      out[i] = a.before .. dir .. (a.rel ~= "" and a.rel ~= "." and ("/" .. a.rel) or "")
    end
  end
  return out
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
