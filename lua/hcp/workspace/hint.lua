--- Hints (issue 15, contract §8 `hint`): when a child says that a name it
--- was given was not found — or could not be written — and that name was a
--- plain argument the agent sent, not a file reference, the result says how
--- to pass a file: the tool runs in its own directory, not the caller's, so
--- `in.txt` reaches nothing there; `in:in.txt` (or a file parameter) does.
---
--- Pure: it reads the plan, which arguments the agent sent, and the child's
--- stderr; the hint holds nothing but the agent's own argument and fixed
--- text (never a path of the runtime, never a line of stderr).
---@class hcp.workspace.hint
local M = {}

-- What tools print when a name they were given does not exist (lowercased)
local NOT_FOUND = { "no such file", "cannot open", "can't open", "could not open", "couldn't open",
  "unable to open", "failed to open", "cannot stat", "can't stat", "cannot access", "cannot read",
  "not found", "does not exist", "doesn't exist" }
-- ... and when it could not create one (mode none's cwd is read-only)
local NOT_WRITABLE = { "read-only file system", "permission denied" }

-- Bounds on the work a child's stderr (or a long argv) can cause.
local MAX_STDERR = 64 * 1024
local MAX_VALUE = 200
local MAX_LINES = 32   -- "not found" lines looked at
local MAX_ARGS = 256   -- candidate arguments

-- Characters that may stand around a name in a message: `a.txt`, 'a.txt',
-- "a.txt", a.txt:, (a.txt), a.txt,
local EDGE = "[%s'\"`:,;()%[%]<>\226\128\152\226\128\153\226\128\156\226\128\157]"

local function any(line, phrases)
  for _, p in ipairs(phrases) do
    if line:find(p, 1, true) then return true end
  end
  return false
end

-- Whether `name` occurs in `line` as a word of its own.
local function mentions(line, name)
  local init = 1
  while true do
    local s, e = line:find(name, init, true)
    if not s then return false end
    local before = s > 1 and line:sub(s - 1, s - 1) or " "
    local after = e < #line and line:sub(e + 1, e + 1) or " "
    if before:match(EDGE) and (after:match(EDGE) or after == ".") then return true end
    init = s + 1
  end
end

-- A plain argument that could be a relative file name.
local function relative_name(v)
  return type(v) == "string" and v ~= "" and #v <= MAX_VALUE and not v:find("^[-/~]")
    and not v:find("[%c]") and not v:find("://", 1, true) and v ~= "." and v ~= ".."
end

local function what(i, sent, v)
  local who = type(sent) == "string" and string.format("parameter %q", sent) or string.format("argument %d", i)
  return string.format("%s (%q)", who, v)
end

--- The hint for a finished call, or nil.
---@param plan hcp.Plan? the call's plan (nil for a call refused before it)
---@param sent table<integer, string|true>? the arguments the agent sent: a parameter name, or true (raw)
---@param stderr string? the child's stderr
---@return string? hint
function M.for_run(plan, sent, stderr)
  if not plan or not sent or type(stderr) ~= "string" or stderr == "" then return nil end
  local candidates = {}
  for i, e in ipairs(plan.argv) do
    if sent[i] and relative_name(e) then candidates[#candidates + 1] = i end
    if #candidates >= MAX_ARGS then break end
  end
  if #candidates == 0 then return nil end
  local looked = 0
  for line in stderr:sub(1, MAX_STDERR):gmatch("[^\n]+") do
    local low = line:lower()
    local missing, readonly = any(low, NOT_FOUND), any(low, NOT_WRITABLE)
    if missing or readonly then
      looked = looked + 1
      if looked > MAX_LINES then return nil end
      for _, i in ipairs(candidates) do
        local e = plan.argv[i]
        if mentions(line, e) then
          -- "Cannot open: Read-only file system" is a file it could not write
          if not readonly then
            return string.format("%s is not a file reference: the tool runs in a directory of its own, not in "
              .. "yours. Give it your file as in:%s, or name a file it writes as out:%s (written back after the "
              .. "call).", what(i, sent[i], e), e, e)
          end
          return string.format("%s is not a file reference, and the tool's working directory is not writable. "
            .. "Name the file it writes as out:%s (written back after the call).", what(i, sent[i], e), e)
        end
      end
    end
  end
  return nil
end

return M
