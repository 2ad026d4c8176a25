--- Serialisation of workspace-mode calls (§10.6): the calls on one
--- persisted jail run one after the other — within a runtime by a queue,
--- between processes by an exclusive flock on the jail's lock file, which
--- is only ever *tried*, so no call blocks the runtime's loop while another
--- process holds it (the runtime retries on a timer).
---@class hcp.workspace.locks
local M = {}

local core = require("hcp.core")

---@class hcp.Locks
---@field held table<string, any> jail path -> the call holding it
local Locks = {}
Locks.__index = Locks

--- A registry for one runtime.
---@return hcp.Locks
function M.new()
  return setmetatable({ held = {} }, Locks)
end

--- Whether another call of this runtime holds `key`.
---@param key string the persisted jail's path
---@return boolean
function Locks:busy(key)
  return self.held[key] ~= nil
end

--- Take `key` for `owner`: the in-runtime claim, then the flock between
--- processes. Returns the lock, or nil, "busy" when another process holds
--- it (retry later), or nil, message for an error.
---@param key string
---@param lockfile string
---@param owner any
---@return userdata? lock, string? err
function Locks:try(key, lockfile, owner)
  if self.held[key] then return nil, "busy" end
  local lock, err, errno = core.lock(lockfile, 0)
  if not lock then
    if errno == 110 or errno == 11 then return nil, "busy" end -- ETIMEDOUT, EWOULDBLOCK
    return nil, err
  end
  self.held[key] = owner
  return lock
end

--- Release `key` (and its flock).
---@param key string
---@param lock userdata?
function Locks:release(key, lock)
  if lock then lock:unlock() end
  self.held[key] = nil
end

return M
