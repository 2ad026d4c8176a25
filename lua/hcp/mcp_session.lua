--- One MCP session (protocol 2025-06-18 or 2025-11-25) over a runtime: the
--- lifecycle, the method handlers, and the calls in flight. It reads
--- decoded lines and writes messages through `send`; the loop that feeds
--- it (hcp.mcp) owns the descriptors.
---
---   initialize            version negotiated, capabilities tools + logging
---   ping                  {}
---   tools/list            rt:tools(), paginated by an opaque cursor
---   tools/call            rt:start; answered when the call ends (on_exit),
---                         so calls run concurrently; progress while it runs
---                         when the request carries a progressToken
---   logging/setLevel      the least severity sent as notifications/message
---   notifications/cancelled  kills the call (handle:kill) and sends nothing
---
--- A `confirm` tool asks the user first (elicitation/create) when the
--- client declared elicitation; the answer is a one-shot approval for that
--- call's envelope id, which the server's policy.confirm consumes (hcp.mcp).
--- Without the capability, or on anything but an accepted yes, the call is
--- still handed to the runtime, which refuses it in its own words.
---@class hcp.mcp_session
local M = {}

local json = require("hcp.json")
local core = require("hcp.core")
local rpc = require("hcp.mcp_rpc")
local result = require("hcp.mcp_result")
local tools = require("hcp.tools")

M.VERSIONS = { ["2025-11-25"] = true, ["2025-06-18"] = true }
M.LATEST = "2025-11-25"
M.PAGE_SIZE = 100
M.PROGRESS_S = 1.0 -- a running call with a progress token hears from us at least this often
M.MAX_CALLS = 16   -- calls running at once; more wait, in order (MCP: servers rate-limit tool calls)
M.MAX_WAITING = 256 -- calls waiting for a free slot; past it a call is refused
M.LEVELS = { debug = 1, info = 2, notice = 3, warning = 4, error = 5, critical = 6, alert = 7, emergency = 8 }

---@class hcp.McpSession
---@field rt hcp.Runtime
---@field send fun(msg: table|string): boolean  a message, or one already encoded as a line
local Session = {}
Session.__index = Session

--- A session. `opts.approvals` is the table the server's policy.confirm
--- reads (envelope id → true); `opts.version` the hcp version to report;
--- `opts.page_size` for tools/list.
---@param rt hcp.Runtime
---@param send fun(msg: table): boolean
---@param opts { approvals: table, version: string?, page_size: integer?, log_level: string?, max_calls: integer?, max_waiting: integer? }
---@return hcp.McpSession
function M.new(rt, send, opts)
  local self = setmetatable({ rt = rt, send = send, approvals = opts.approvals, hcp_version = opts.version or "?",
    page_size = opts.page_size or M.PAGE_SIZE, calls = {}, asking = {}, next_req = 0, next_env = 0,
    level = M.LEVELS[opts.log_level or "warning"], state = "new", running = 0, waiting = {},
    max_calls = opts.max_calls or M.MAX_CALLS, max_waiting = opts.max_waiting or M.MAX_WAITING }, Session)
  self.index, self.listed = {}, {}
  for _, t in ipairs(rt:tools({ all = true })) do
    self.index[t.name] = t
    if t.allowed then self.listed[#self.listed + 1] = t end
  end
  return self
end

-- Requests and responses are keyed by id with its type (1 and "1" differ).
local function key(id)
  return type(id) .. ":" .. tostring(id)
end

--- Send a log message to the client (notifications/message) when its
--- level is at least the one the client set (default: warning).
---@param level string
---@param data any
function Session:log(level, data)
  if self.state ~= "new" and M.LEVELS[level] >= self.level then
    self.send(rpc.notification("notifications/message", { level = level, logger = "hcp", data = data }))
  end
end

local handlers = {}

function handlers.initialize(self, p)
  if self.state ~= "new" then return nil, rpc.INVALID_REQUEST, "initialize: the session is already initialized" end
  if type(p.protocolVersion) ~= "string" then return nil, rpc.INVALID_PARAMS, "initialize: protocolVersion must be a string" end
  self.version = M.VERSIONS[p.protocolVersion] and p.protocolVersion or M.LATEST
  self.client_caps = type(p.capabilities) == "table" and p.capabilities or {}
  self.client_info = type(p.clientInfo) == "table" and p.clientInfo or {}
  self.state = "initializing"
  return { protocolVersion = self.version,
    capabilities = { tools = { listChanged = false }, logging = {} },
    serverInfo = { name = "hcp", title = "hcp-lua", version = self.hcp_version },
    instructions = "Each tool runs one operation of a command-line tool, sandboxed by hcp-lua; a result's "
      .. "structuredContent holds the exit status, stdout/stderr and the files written back." }
end

function handlers.ping()
  return {}
end

function handlers.logging_setLevel(self, p)
  local lv = M.LEVELS[p.level]
  if not lv then return nil, rpc.INVALID_PARAMS, string.format("logging/setLevel: unknown level %q", tostring(p.level)) end
  self.level = lv
  return {}
end

function handlers.tools_list(self, p)
  local start = 1
  if p.cursor ~= nil then
    start = type(p.cursor) == "string" and p.cursor:match("^p(%d+)$") and tonumber(p.cursor:sub(2)) or nil
    if not start or start < 1 or start > #self.listed then
      return nil, rpc.INVALID_PARAMS, "tools/list: invalid cursor"
    end
  end
  local page = json.array()
  for i = start, math.min(#self.listed, start + self.page_size - 1) do page[#page + 1] = tools.wire(self.listed[i]) end
  local next_start = start + self.page_size
  return { tools = page, nextCursor = next_start <= #self.listed and ("p" .. next_start) or nil }
end

-- Can the client show a form? (2025-11-25: `{}` means form; `{ url = {} }` alone does not)
local function can_elicit(caps)
  local e = caps and caps.elicitation
  return type(e) == "table" and (next(e) == nil or e.form ~= nil)
end

function handlers.tools_call(self, p, id)
  if type(p.name) ~= "string" then return nil, rpc.INVALID_PARAMS, "tools/call: name must be a string" end
  local t = self.index[p.name]
  if not t then return nil, rpc.INVALID_PARAMS, "Unknown tool: " .. p.name:sub(1, 200) end
  if p.arguments ~= nil and p.arguments ~= json.null and type(p.arguments) ~= "table" then
    return nil, rpc.INVALID_PARAMS, "tools/call: arguments must be an object"
  end
  if self.calls[key(id)] then return nil, rpc.INVALID_REQUEST, "tools/call: request id already in use" end
  self.next_env = self.next_env + 1
  local env_id = "mcp-" .. self.next_env
  local meta = type(p._meta) == "table" and p._meta or {}
  local token = meta.progressToken
  local rec = { id = id, tool = t, env_id = env_id, token = (type(token) == "string" or math.type(rpc.normalize_id(token)) == "integer")
    and rpc.normalize_id(token) or nil, progress = 0, bytes = 0 }
  self.calls[key(id)] = rec
  local req, err = tools.request(t, p.arguments ~= json.null and p.arguments or nil, { id = env_id })
  if not req then
    self:answer(rec, { hcp = 1, ok = false, exit = 126, error = err })
    return "later"
  end
  rec.req = req
  if t.confirm and t.allowed and can_elicit(self.client_caps) then
    self:ask(rec)
  else
    self:start(rec, t.confirm and t.allowed
      and "(the client declared no elicitation capability, so the user could not be asked to confirm)" or nil)
  end
  return "later"
end

-- Ask the user to confirm one call (elicitation/create).
function Session:ask(rec)
  self.next_req = self.next_req + 1
  local rid = "hcp-confirm-" .. self.next_req
  local args = rpc.encode(rec.req.params or { args = rec.req.args })
  if #args > 500 then args = args:sub(1, 500) .. "…" end
  if rec.req.stdin then args = args .. string.format(" (and %d bytes of stdin)", #rec.req.stdin) end
  rec.asking = rid
  self.asking[rid] = rec
  self.send(rpc.request(rid, "elicitation/create", {
    message = string.format("Run %s? Arguments: %s", rec.tool.call, args),
    requestedSchema = { type = "object", required = json.array({ "confirm" }), properties = {
      confirm = { type = "boolean", title = "Run " .. rec.tool.call, default = true,
        description = string.format("Let the agent run %s (%s) with these arguments", rec.tool.call,
          rec.tool.description:match("^[^\n]*")) } } },
  }))
end

--- The client's answer to a request we sent (elicitation/create).
---@param msg table
function Session:on_response(msg)
  local rec = self.asking[msg.id]
  if not rec then return self:log("debug", "a response to no request of ours: " .. tostring(msg.id)) end
  self.asking[msg.id], rec.asking = nil, nil
  local r = type(msg.result) == "table" and msg.result or {}
  local content = type(r.content) == "table" and r.content or {}
  if msg.error == nil and r.action == "accept" and content.confirm == true then
    self.approvals[rec.env_id] = true
    return self:start(rec)
  end
  local why = msg.error ~= nil and "the confirmation request failed"
    or r.action == "accept" and "the user did not tick the confirmation"
    or string.format("the user answered %q", tostring(r.action))
  self:start(rec, "(" .. why .. ")")
end

-- Hand the call to the runtime when a slot is free, else let it wait.
function Session:start(rec, note)
  rec.note = note
  if self.running < self.max_calls then return self:launch(rec) end
  if #self.waiting >= self.max_waiting then
    self.approvals[rec.env_id] = nil
    return self:answer(rec, { hcp = 1, ok = false, exit = 126, error = string.format(
      "spawn: hcp mcp has %d calls running and %d waiting; try again when one has finished", self.running, #self.waiting) })
  end
  rec.waiting = true
  self.waiting[#self.waiting + 1] = rec
end

-- Start the calls that waited, while there are free slots.
function Session:pump()
  while self.running < self.max_calls and #self.waiting > 0 do
    local rec = table.remove(self.waiting, 1)
    rec.waiting = nil
    if not rec.cancelled then self:launch(rec) end
  end
end

-- The call goes to the runtime; the answer goes out from on_exit.
function Session:launch(rec)
  self.running, rec.counted = self.running + 1, true
  local function on_output(chunk)
    rec.bytes = rec.bytes + #chunk
    if rec.token and rec.progress == 0 then self:progress(rec) end
  end
  rec.started = core.monotonic_us()
  rec.handle = self.rt:start(rec.req, { on_stdout = on_output, on_stderr = on_output,
    on_exit = function(res) self:answer(rec, res) end })
  -- the approval is for this one start: a refused or mocked call never took it
  self.approvals[rec.env_id] = nil
  if rec.handle:pid() then self:log("debug", string.format("%s started, pid %d", rec.tool.call, rec.handle:pid())) end
end

-- The response to a tools/call, unless it was cancelled; its slot goes to
-- the next call waiting.
function Session:answer(rec, res)
  if rec.counted then
    self.running, rec.counted = self.running - 1, false
    self:pump()
  end
  local k = key(rec.id)
  if rec.cancelled or self.calls[k] ~= rec then return end
  self.calls[k] = nil
  rec.handle = nil
  self.send(result.fit(rec.id, res, rec.note))
end

function Session:progress(rec)
  rec.progress = rec.progress + 1
  rec.last = core.monotonic_us()
  self.send(rpc.notification("notifications/progress", { progressToken = rec.token, progress = rec.progress,
    message = string.format("%s running for %.1f s, %d bytes of output", rec.tool.call,
      (rec.last - rec.started) / 1e6, rec.bytes) }))
end

--- Progress for the calls that asked for it; returns the milliseconds until
--- the next one is due (nil: none is).
---@return number?
function Session:tick()
  local now, soonest = core.monotonic_us(), nil
  for _, rec in pairs(self.calls) do
    if rec.token and rec.handle and rec.started then
      local due = (rec.last or rec.started) + M.PROGRESS_S * 1e6
      if now >= due then
        self:progress(rec)
        due = rec.last + M.PROGRESS_S * 1e6
      end
      local ms = math.max(0, (due - now) / 1000)
      if not soonest or ms < soonest then soonest = ms end
    end
  end
  return soonest
end

local notifications = {}

function notifications.initialized(self)
  if self.state == "initializing" then self.state = "ready" end
  for _, prob in ipairs(self.rt:problems()) do
    self:log("warning", require("hcp.manifest").format_problem(prob))
  end
end

function notifications.cancelled(self, p)
  local id = rpc.normalize_id(p.requestId)
  local rec = id ~= nil and self.calls[key(id)]
  if not rec then return end
  rec.cancelled = true
  self.calls[key(id)] = nil
  if rec.asking then self.asking[rec.asking] = nil end
  self.approvals[rec.env_id] = nil
  if rec.handle then rec.handle:kill("KILL") end
  self:log("info", string.format("%s cancelled%s", rec.tool.call,
    type(p.reason) == "string" and (": " .. p.reason) or ""))
end

local METHODS = { initialize = handlers.initialize, ping = handlers.ping, ["tools/list"] = handlers.tools_list,
  ["tools/call"] = handlers.tools_call, ["logging/setLevel"] = handlers.logging_setLevel }
local NOTIFICATIONS = { ["notifications/initialized"] = notifications.initialized,
  ["notifications/cancelled"] = notifications.cancelled }

function Session:request(msg)
  local h = METHODS[msg.method]
  if not h then return self.send(rpc.error(msg.id, rpc.METHOD_NOT_FOUND, "Method not found: " .. msg.method)) end
  if self.state == "new" and msg.method ~= "initialize" and msg.method ~= "ping" then
    return self.send(rpc.error(msg.id, rpc.INVALID_REQUEST, "the session is not initialized: send initialize first"))
  end
  local ok, res, code, message = pcall(h, self, msg.params, msg.id)
  if not ok then
    io.stderr:write("hcp mcp: ", tostring(res), "\n")
    return self.send(rpc.error(msg.id, rpc.INTERNAL_ERROR, "internal error: " .. tostring(res)))
  end
  if res == "later" then return true end
  if res == nil then return self.send(rpc.error(msg.id, code, message)) end
  return self.send(rpc.response(msg.id, res))
end

--- Handle one line of input.
---@param line string|false false: a line too long to read
function Session:receive(line)
  if line == false then
    return self.send(rpc.error(nil, rpc.INVALID_REQUEST, string.format("Invalid Request: a line longer than %d bytes",
      rpc.MAX_LINE)))
  end
  if not line:match("%S") then return true end
  local kind, msg = rpc.decode(line)
  if not kind then return self.send(msg) end
  if kind == "request" then return self:request(msg) end
  if kind == "response" then return self:on_response(msg) end
  local h = NOTIFICATIONS[msg.method]
  if h then
    local ok, err = pcall(h, self, msg.params)
    if not ok then io.stderr:write("hcp mcp: ", tostring(err), "\n") end
  end
  return true
end

--- Whether a call is still running or waiting for the user.
---@return boolean
function Session:busy()
  return next(self.calls) ~= nil
end

--- End of input: no answer to a confirmation can come any more.
function Session:eof()
  for rid, rec in pairs(self.asking) do
    self.asking[rid], rec.asking = nil, nil
    self:start(rec, "(the client closed the connection before the user answered)")
  end
end

M.Session = Session
return M
