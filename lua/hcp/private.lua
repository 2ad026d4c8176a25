--- A runtime's private directory (0700 under $TMPDIR, else /tmp): jails of
--- ephemeral and pack-less calls and each call's own directory live in it.
--- Made on first use, removed by the runtime's close.
---@class hcp.private
local M = {}

local core = require("hcp.core")

---@class hcp.PrivateDir
---@field dir string?
local PrivateDir = {}
PrivateDir.__index = PrivateDir

---@return hcp.PrivateDir
function M.new()
  return setmetatable({}, PrivateDir)
end

--- The directory, made now if it does not exist yet.
---@return string? path, string? err
function PrivateDir:path()
  if self.dir then return self.dir end
  local tmp = os.getenv("TMPDIR")
  if not tmp or tmp:sub(1, 1) ~= "/" or core.kind(tmp) ~= "dir" then tmp = "/tmp" end
  local dir, err = core.mkdtemp(tmp, "hcp-rt-")
  if not dir then return nil, err end
  self.dir = dir
  return dir
end

--- Remove it and everything in it (never following a link), once the
--- core's worker has removed what the calls handed it and stopped making
--- directories ahead in it (core.calldirs_settle).
function PrivateDir:remove()
  if self.dir then
    core.calldirs_settle(self.dir)
    core.rmtree(self.dir)
    self.dir = nil
  end
end

return M
