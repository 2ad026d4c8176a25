--- The runtime's loop: every call of a runtime between start and result.
--- One `step` services whatever is ready — launches calls whose workspace
--- came free, hands streamed output to callbacks, finishes calls whose
--- child ended (write-back, cleanup, `on_exit`) — and waits at most the
--- time it is given. Callbacks run here, in the caller's own thread of
--- control, never from a signal handler.
---
--- For event loops, `pollfd` is one descriptor that is readable whenever a
--- call needs service: an epoll set of every running child's pipes and
--- pidfd, plus a timer armed for the next timeout, kill or retry.
---@class hcp.loop
local M = {}

local core = require("hcp.core")
local egress = require("hcp.egress")

local RETRY_MS = 10 -- a workspace held by another process is tried again this often

---@class hcp.Loop
---@field running hcp.Call[]
---@field queued hcp.Call[]     waiting for their workspace
---@field notify hcp.Call[]     finished, on_exit not yet called
---@field kept table<hcp.Call, any> handles kept alive while their call reports to a callback
local Loop = {}
Loop.__index = Loop

--- A loop. The poller is made on first use of `pollfd`.
---@return hcp.Loop
function M.new()
  return setmetatable({ running = {}, queued = {}, notify = {}, kept = {} }, Loop)
end

local function filter(list, keep)
  local out = {}
  for _, c in ipairs(list) do
    if keep(c) then out[#out + 1] = c end
  end
  return out
end

-- Launch what can be launched; a call the loop gave up on is refused.
function Loop:promote()
  local now = core.monotonic_us()
  local still = {}
  for _, c in ipairs(self.queued) do
    local st = c.state == "queued" and c:launch() or "done"
    if st == "busy" then
      c.queued_since = c.queued_since or now
      if now - c.queued_since >= c.timeout_ms * 1000 then
        c:abandon(string.format("workspace: lock not taken within %d ms: another call or process holds it", c.timeout_ms))
        self.notify[#self.notify + 1] = c
      else
        still[#still + 1] = c
      end
    elseif st == "running" then
      self.running[#self.running + 1] = c
      if self.poller then self:watch(c) end
    else
      self.notify[#self.notify + 1] = c
    end
  end
  self.queued = still
end

--- Take a call in: a finished one (a refusal, a mock) waits for its
--- on_exit; the others are launched now, or queued for their workspace.
---@param call hcp.Call
function Loop:add(call)
  if call.result then
    self.notify[#self.notify + 1] = call
  else
    self.queued[#self.queued + 1] = call
    self:promote()
  end
  self:rearm()
end

--- Keep `handle` alive until its call has finished and reported: a call
--- that reports to callbacks goes on even when its caller dropped the
--- handle (as an event loop expects); one that reports to nobody is killed
--- when its handle is collected.
---@param call hcp.Call
---@param handle any
function Loop:keep(call, handle)
  self.kept[call] = handle
end

--- A call finished outside the loop (killed through its handle): its
--- on_exit fires at the next step.
---@param call hcp.Call
function Loop:finished(call)
  self.notify[#self.notify + 1] = call
  self:rearm()
end

-- Call on_exit for the finished calls; the first error a callback raised.
function Loop:fire()
  local list, first = self.notify, nil
  self.notify = {}
  for _, c in ipairs(list) do
    self.kept[c] = nil
    local cb = c.opts and c.opts.on_exit
    if cb and not c.notified then
      c.notified = true
      local ok, err = pcall(cb, c.result)
      if not ok and not first then first = err end
    end
  end
  return first, #list
end

-- Finish the calls whose child ended; the number finished.
function Loop:reap(done)
  local ended = {}
  for _, proc in ipairs(done) do ended[proc] = true end
  local n = 0
  for _, c in ipairs(self.running) do
    if c.state == "running" and ended[c.proc] then
      c:finish(c.proc:wait())
      self.notify[#self.notify + 1] = c
      n = n + 1
    end
  end
  self.running = filter(self.running, function(c) return c.state == "running" end)
  return n
end

-- How long a step may wait: the caller's bound, shortened to the next
-- workspace retry when calls are queued.
local function wait_ms(self, timeout_s)
  local ms = timeout_s and math.max(0, timeout_s * 1000) or nil
  if #self.queued > 0 and (ms == nil or ms > RETRY_MS) then ms = RETRY_MS end
  return ms
end

--- Service the calls: wait up to `timeout_s` (nil: until something
--- happens) for output, an exit or a timer, then handle all of it.
--- Returns how many calls finished. Errors raised by callbacks are raised
--- here, after the loop's own bookkeeping is done.
---@param timeout_s number?
---@return integer finished
function Loop:step(timeout_s)
  local first = nil
  self:promote()
  local ms = #self.notify > 0 and 0 or wait_ms(self, timeout_s)
  local procs, proxies = {}, {}
  for i, c in ipairs(self.running) do
    procs[i] = c.proc
    if c.proxy then proxies[#proxies + 1] = c.proxy end
  end
  local done = {}
  if #procs > 0 then
    done = core.drive(procs, ms, proxies)
    self:serve_egress()
  elseif #self.queued > 0 and ms and ms > 0 then
    self:sleep(ms)
  end
  for _, c in ipairs(self.running) do first = first or c:deliver() end
  self:reap(done)
  self:promote()
  local ferr, n = self:fire()
  self:rearm()
  if first or ferr then error(first or ferr, 0) end
  return n
end

-- issue 14: what the running calls' proxies ask is decided here, by each
-- call's own plan (hcp.egress.serve).
function Loop:serve_egress()
  for _, c in ipairs(self.running) do
    if c.proxy and c.state == "running" then egress.serve(c.proxy, c.egress) end
  end
end

-- Watch a running call's descriptors (its proc's, its proxy's).
function Loop:watch(c)
  self.poller:watch(c.proc)
  if c.proxy then self.poller:watch(c.proxy) end
end

-- Nothing running, calls queued: wait for the retry without spinning.
function Loop:sleep(ms)
  local p = self:get_poller()
  if p then
    p:arm(ms)
    p:ready(ms)
    p:clear()
  end
end

--- The poller, made on first use (nil when the host refuses epoll).
---@return userdata?
function Loop:get_poller()
  if self.poller == nil then
    self.poller = core.poller() or false
    if self.poller then
      for _, c in ipairs(self.running) do self:watch(c) end
    end
  end
  return self.poller or nil
end

--- One descriptor, readable when a call needs service: watch it for
--- reading in an event loop and call `step(0)` when it is.
---@return integer? fd
function Loop:pollfd()
  local p = self:get_poller()
  if not p then return nil end
  self:rearm()
  return p:fd()
end

-- Arm the poller's timer for the soonest timer event of any call.
function Loop:rearm()
  local p = self.poller
  if not p then return end
  p:clear()
  local soonest
  for _, c in ipairs(self.running) do
    local t = c.proc:next_ms()
    if t and (not soonest or t < soonest) then soonest = t end
    t = c.proxy and c.proxy:next_ms()
    if t and (not soonest or t < soonest) then soonest = t end
  end
  if #self.queued > 0 and (not soonest or soonest > RETRY_MS) then soonest = RETRY_MS end
  if #self.notify > 0 then soonest = 0 end
  p:arm(soonest)
end

--- A proc's result, waiting through interruptions (a signal with a
--- handler, such as Ctrl-C in the REPL, makes the core's wait return early).
---@param proc userdata
---@return table
function M.wait_proc(proc)
  local r, why = proc:wait()
  while not r and why == "interrupted" do r, why = proc:wait() end
  if not r then error("hcp: wait failed: " .. tostring(why)) end
  return r
end

--- Kill every running call, finish everything, refuse what was queued.
--- `quiet`: no callbacks (the runtime is being collected).
---@param quiet boolean?
function Loop:close(quiet)
  for _, c in ipairs(self.queued) do c:abandon("spawn: runtime is closed") end
  self.notify, self.queued = table.move(self.queued, 1, #self.queued, #self.notify + 1, self.notify), {}
  for _, c in ipairs(self.running) do c.proc:kill("KILL") end
  for _, c in ipairs(self.running) do
    c:finish(M.wait_proc(c.proc))
    self.notify[#self.notify + 1] = c
  end
  self.running = {}
  if quiet then self.notify, self.kept = {}, {} else self:fire() end
  if self.poller then self.poller:close() end
  self.poller = false
end

return M
