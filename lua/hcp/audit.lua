--- The audit log (`hcp.create{ audit = "/path/audit.jsonl" }`, `--audit
--- FILE`): one JSON line per call, appended when its result is ready —
--- refusals included. A line holds what an operator accounts for, never
--- what a call carried: time, id, principal, the call's name, the
--- decision (allowed, or the refusal), the layers, exit, usage and the
--- egress attempts; no argument, parameter, stdin, output, environment or
--- credential. A log that can no longer be written fails closed: the
--- runtime refuses every later call (`audit: …`).
---@class hcp.audit
local M = {}

local json = require("hcp.json")
local envelope = require("hcp.envelope")

---@class hcp.Audit
---@field fh file*
---@field path string
---@field broken string? why the log cannot be written any more
local Audit = {}
Audit.__index = Audit

--- Open `path` for appending (created 0600 if missing). nil, message when
--- it cannot be.
---@param path string? absolute
---@return hcp.Audit|false|nil audit false when not configured, string? err
function M.open(path)
  if path == nil then return false end
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" then
    return nil, "hcp.create: option \"audit\" must be an absolute path"
  end
  local old = io.open(path, "rb")
  if old then old:close() end
  local fh, err = io.open(path, "ab")
  if not fh then return nil, "hcp.create: option \"audit\": " .. tostring(err) end
  if not old then os.execute("chmod 600 '" .. path:gsub("'", "'\\''") .. "'") end
  fh:setvbuf("no")
  return setmetatable({ fh = fh, path = path }, Audit)
end

local function call_name(req)
  if type(req) ~= "table" or type(req.pack) ~= "string" then return nil end
  return envelope.call_name({ pack = req.pack, op = type(req.op) == "string" and req.op or nil })
end

--- The line for one finished call.
---@param req table? the request as validated (or as given, for an invalid one)
---@param res hcp.Result
---@return table
function M.entry(req, res)
  local refused = res.stdout == nil
  return { time = os.date("!%Y-%m-%dT%H:%M:%SZ"), id = res.id, principal = type(req) == "table" and req.principal or nil,
    call = call_name(req), decision = refused and res.error or "allowed", ok = res.ok, exit = res.exit,
    error = not refused and res.error or nil, isolation = res.isolation, usage = res.usage, egress = res.egress,
    ms = res.ms }
end

--- Append the line of one call; on failure, refuse every later call.
---@param req table?
---@param res hcp.Result
function Audit:record(req, res)
  if self.broken then return end
  local line = json.encode(M.entry(req, res))
  local ok, err = self.fh:write(line, "\n")
  if not ok then self.broken = string.format("audit: cannot write %s: %s", self.path, tostring(err)) end
end

--- Why calls are refused, when the log broke.
---@return string?
function Audit:refusal()
  return self.broken
end

function Audit:close()
  if self.fh then self.fh:close() end
  self.fh = nil
  self.broken = self.broken or "audit: the runtime is closed"
end

return M
