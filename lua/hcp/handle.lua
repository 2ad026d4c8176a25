--- The handle `rt:start` returns: the asynchronous face of one call.
---
---     local h = rt:start({ pack = "jq", args = { "-n", "1" } }, { on_stdout = print })
---     local res, why = h:wait(0.05)    -- nil, "timeout": still running
---     h:kill("TERM"); res = h:wait()
---
--- Waiting drives the whole runtime (other calls progress and their
--- callbacks fire too). Closing a handle (`<close>`) before its call
--- finished kills the call and cleans up; so does collecting it, unless
--- the call reports to callbacks (`on_exit`, `on_stdout`, `on_stderr`) —
--- the runtime keeps such a handle until its call has reported.
---@class hcp.handle
local M = {}

local loop_mod = require("hcp.loop")
local core = require("hcp.core")

---@class hcp.Handle
---@field call hcp.Call
---@field loop hcp.Loop
local Handle = {}
Handle.__index = Handle
Handle.__name = "hcp.Handle"

--- A handle over a call that the loop has taken in.
---@param call hcp.Call
---@param loop hcp.Loop
---@return hcp.Handle
function M.new(call, loop)
  return setmetatable({ call = call, loop = loop }, Handle)
end

-- Kill the call's child and finish it now (leaving by an error, closing).
local function abort(self)
  local c = self.call
  if c.state == "running" then
    c.proc:kill("KILL")
    c:finish(loop_mod.wait_proc(c.proc))
  elseif c.state == "queued" then
    c:abandon("spawn: call abandoned before it started")
  end
  self.loop:finished(c)
end

--- Wait for the result: up to `timeout_s` seconds (nil: as long as it
--- takes). Returns the result, or nil, "timeout" with the call still
--- running. Leaving by an error (Ctrl-C in the REPL raises from a hook)
--- kills the child at once.
---@param timeout_s number?
---@return hcp.Result? result, string? why
function Handle:wait(timeout_s)
  local c = self.call
  if c.result then
    -- a refusal or a mock: its on_exit (if any) fires now, as it would in a step
    local err = self.loop:fire()
    if err then error(err, 0) end
    return c.result
  end
  local deadline = timeout_s and core.monotonic_us() + timeout_s * 1e6
  local guard <close> = setmetatable({}, { __close = function(_, err) -- luacheck: no unused
    if err ~= nil and not c.result then abort(self) end
  end })
  while not c.result do
    local left = deadline and (deadline - core.monotonic_us()) / 1e6
    if left and left <= 0 then return nil, "timeout" end
    self.loop:step(left)
  end
  return c.result
end

--- Whether the call has finished (services the runtime once, without
--- blocking).
---@return boolean
function Handle:done()
  if not self.call.result then self.loop:step(0) end
  return self.call.result ~= nil
end

--- The result once the call has finished, else nil.
---@return hcp.Result?
function Handle:result()
  return self.call.result
end

--- "queued" (waiting for its workspace), "running", or "done".
---@return string
function Handle:status()
  local st = self.call.state
  if st == "refused" then return "done" end
  return st
end

--- The child's pid (its process group) while it has one, else nil.
---@return integer?
function Handle:pid()
  local p = self.call.proc
  return p and self.call.state == "running" and p:pid() or nil
end

--- Send `sig` (default "KILL"; a name or a number) to the call's process
--- group. A call still waiting for its workspace is abandoned instead.
---@param sig (string|integer)?
---@return boolean? ok, string? err
function Handle:kill(sig)
  local c = self.call
  if c.state == "queued" then
    c:abandon("spawn: call killed before it started")
    return true
  end
  if c.state ~= "running" then return nil, "spawn: the call has finished" end
  return c.proc:kill(sig or "KILL")
end

function Handle:__close()
  if not self.call.result then abort(self) end
end

function Handle:__gc()
  if not self.call.result then abort(self) end
end

--- A handle over a call; kept by the loop while the call reports to callbacks.
---@param call hcp.Call
---@param loop hcp.Loop
---@return hcp.Handle
function M.start(call, loop)
  local h = M.new(call, loop)
  local o = call.opts or {}
  if not call.result and (o.on_exit or o.on_stdout or o.on_stderr) then loop:keep(call, h) end
  return h
end

local function call_name(call)
  local r = call.req
  return type(r) == "table" and type(r.pack) == "string" and (r.pack .. "." .. (r.op or "exec")) or "exec"
end

function Handle:__tostring()
  return string.format("hcp.Handle %s (%s)", call_name(self.call), self:status())
end

return M
