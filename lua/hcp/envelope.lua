--- Envelopes (contract §2): request validation, result construction and
--- the JSON wire form.
---@class hcp.envelope
local M = {}

local json = require("hcp.json")
local check = require("hcp.check")

---@class hcp.Request
---@field hcp integer?
---@field id string|number|nil
---@field pack string
---@field op string?
---@field params table<string, string|number|boolean>?
---@field args string[]?
---@field stdin string?
---@field mode "live"|"mock"|nil
---@field principal string?
---@field timeout_ms integer?

---@class hcp.Usage
---@field wall_ms number
---@field user_ms number?
---@field sys_ms number?
---@field max_rss_kb integer?
---@field read_bytes integer?        bytes through read-family syscalls (pipes included)
---@field write_bytes integer?
---@field disk_read_bytes integer?   bytes the child caused to be fetched from storage
---@field disk_write_bytes integer?

---@class hcp.Result
---@field hcp integer
---@field id string|number|nil
---@field ok boolean
---@field exit integer
---@field signal string?
---@field error string?
---@field stdout string?
---@field stderr string?
---@field files string[]?
---@field files_truncated boolean?
---@field left_in_jail string[]?  files a mode-none or ephemeral call left in its jail, not written back (relative)
---@field left_in_jail_truncated boolean?
---@field hint string?            why a relative argument was not found, and how to pass a file
---@field sandbox string?
---@field isolation string[]?
---@field timed_out boolean?
---@field truncated boolean?
---@field ms number?
---@field usage hcp.Usage?

local FIELDS = { hcp = true, id = true, pack = true, op = true, params = true, args = true,
  stdin = true, mode = true, principal = true, timeout_ms = true }

-- A request's timeout_ms: a positive integer of milliseconds (whether the
-- pack allows it is the call's to decide).
M.MAX_TIMEOUT_MS = 86400000

M.PRINCIPAL_PAT = check.PRINCIPAL_PAT

local is_array = check.is_array

local function fail(fmt, ...)
  return nil, "envelope: " .. string.format(fmt, ...)
end

-- One checker per field, in the order they are checked: each takes the
-- value (nil when absent or JSON null) and the request so far, and returns
-- the clean value or nil, message. A checker that returns nothing for an
-- absent field leaves it absent.
local CHECKS = {}

function CHECKS.hcp(v)
  if v ~= nil and v ~= 1 then return fail("field \"hcp\" must be 1") end
  return 1
end

function CHECKS.id(v)
  if v ~= nil and type(v) ~= "string" and type(v) ~= "number" then return fail("field \"id\" must be a string or a number") end
  return v
end

function CHECKS.pack(v)
  if type(v) ~= "string" or v == "" then return fail("field \"pack\" is required (a pack name)") end
  return v
end

function CHECKS.op(v)
  if v ~= nil and (type(v) ~= "string" or v == "") then return fail("field \"op\" must be a non-empty string") end
  return v
end

function CHECKS.params(v, req)
  if v == nil then return nil end
  if type(v) ~= "table" or (is_array(v) and next(v) ~= nil) then return fail("field \"params\" must be an object") end
  if req.op == nil and next(v) ~= nil then return fail("field \"params\" needs an \"op\"") end
  local copy = {}
  for k, p in pairs(v) do
    if type(k) ~= "string" then return fail("params keys must be strings") end
    if p ~= json.null then copy[k] = p end
  end
  return copy
end

function CHECKS.args(v)
  if v == nil then return nil end
  if not is_array(v) then return fail("field \"args\" must be an array of strings") end
  local copy = {}
  for i, a in ipairs(v) do
    if type(a) ~= "string" then return fail("args[%d] must be a string", i) end
    copy[i] = a
  end
  return copy
end

function CHECKS.stdin(v)
  if v ~= nil and type(v) ~= "string" then return fail("field \"stdin\" must be a string") end
  return v
end

function CHECKS.mode(v)
  if v == nil then return "live" end
  if v ~= "live" and v ~= "mock" then return fail("field \"mode\" must be \"live\" or \"mock\"") end
  return v
end

function CHECKS.principal(v)
  if v == nil then return "default" end
  if type(v) ~= "string" or #v > 64 or not v:match(M.PRINCIPAL_PAT) then
    return fail("field \"principal\" must match ^[A-Za-z0-9._-]{1,64}$")
  end
  -- it names a directory of the persisted jails: "." and ".." would not
  if v == "." or v == ".." then return fail("field \"principal\" cannot be \".\" or \"..\"") end
  return v
end

function CHECKS.timeout_ms(v)
  if v == nil then return nil end
  local t = check.positive_integer(v, M.MAX_TIMEOUT_MS)
  if not t then return fail("field \"timeout_ms\" must be a positive integer of milliseconds (at most %d)", M.MAX_TIMEOUT_MS) end
  return t
end

local ORDER = { "hcp", "id", "pack", "op", "params", "args", "stdin", "mode", "principal", "timeout_ms" }

--- Validate a request envelope (a Lua table, or decoded JSON where `null`
--- counts as absent). Returns a clean copy or `nil, "envelope: …"`.
---@param t any
---@return hcp.Request? req, string? err
function M.validate(t)
  if type(t) ~= "table" or is_array(t) and next(t) ~= nil then return fail("request must be an object") end
  local unknown = check.unknown_key(t, FIELDS)
  if unknown then return fail("unknown field %q", unknown) end
  local req = {}
  for _, k in ipairs(ORDER) do
    local v = t[k]
    if v == json.null then v = nil end
    local clean, err = CHECKS[k](v, req)
    if err then return nil, err end
    req[k] = clean
  end
  return req
end

--- The name a call is known by for policy and mocks: `pack.op`, or
--- `pack.exec` for raw args.
---@param req hcp.Request
---@return string
function M.call_name(req)
  return req.pack .. "." .. (req.op or "exec")
end

--- A refusal: `ok = false`, an error naming the layer, nothing was spawned.
---@param req table? the (possibly invalid) request, for its id
---@param exit integer 126 or 127
---@param message string
---@param mode string? the runtime's mode
---@return hcp.Result
function M.refusal(req, exit, message, mode)
  local id = type(req) == "table" and req.id or nil
  if id == json.null or (id ~= nil and type(id) ~= "string" and type(id) ~= "number") then id = nil end
  return { hcp = 1, id = id, ok = false, exit = exit, error = message, sandbox = mode }
end

--- Build the result of a call whose child ran (or was mocked).
---@param req hcp.Request
---@param r table the core's result table
---@param mode string
---@param isolation string[]
---@param files string[]?
---@param timeout_ms integer?
---@param signame fun(n: integer): string
---@return hcp.Result
function M.from_run(req, r, mode, isolation, files, timeout_ms, signame)
  local res = {
    hcp = 1, id = req.id, exit = r.exit, stdout = r.stdout, stderr = r.stderr,
    files = json.array(files or {}), sandbox = mode, isolation = json.array(isolation),
    timed_out = r.timed_out and true or false,
    truncated = (r.stdout_truncated or r.stderr_truncated) and true or false,
    ms = r.ms and math.floor(r.ms * 100 + 0.5) / 100 or 0,
  }
  res.signal = r.signal and signame(r.signal) or nil
  res.ok = (r.exit == 0 and not r.timed_out)
  res.usage = M.usage(r)
  if r.timed_out then
    res.error = string.format("exit: timed out after %d ms", timeout_ms or 0)
  elseif r.signal then
    res.error = "exit: signal " .. res.signal
  elseif r.exit ~= 0 then
    res.error = "exit: status " .. tostring(r.exit)
  end
  return res
end

local function round(x)
  return x and math.floor(x * 100 + 0.5) / 100 or nil
end

--- What the call cost, from the core's result: wall time always, the rest
--- where the kernel reported it.
---@param r table
---@return hcp.Usage
function M.usage(r)
  local u = r.usage or {}
  return { wall_ms = round(r.ms or 0), user_ms = round(u.user_ms), sys_ms = round(u.sys_ms),
    max_rss_kb = u.max_rss_kb, read_bytes = u.read_bytes, write_bytes = u.write_bytes,
    disk_read_bytes = u.disk_read_bytes, disk_write_bytes = u.disk_write_bytes }
end

-- Fields a full result always carries on the wire, null when absent.
local RESULT_NULLS = { "id", "signal" }

local function string_array(t)
  if type(t) ~= "table" or #t == 0 then return false end
  for _, v in ipairs(t) do
    if type(v) ~= "string" then return false end
  end
  return true
end

-- The wire form of one field that is not valid UTF-8: a capped stream
-- loses the incomplete character the cap left at its end; anything else
-- goes base64-encoded as <field>_b64 (`error` also stays, as text with
-- U+FFFD, so a refusal always says why). Arrays of strings keep their
-- valid members and put the others in <field>_b64.
local function wire_field(wire, res, k, v)
  if type(v) == "string" then
    if json.is_utf8(v) then return end
    if (k == "stdout" or k == "stderr") and res.truncated then
      local cut = json.trim_partial(v)
      if json.is_utf8(cut) then wire[k] = cut return end
    end
    wire[k .. "_b64"] = json.base64(v)
    wire[k] = k == "error" and json.sanitize(v) or nil
  elseif string_array(v) then
    local good, raw = {}, {}
    for _, s in ipairs(v) do
      if json.is_utf8(s) then good[#good + 1] = s else raw[#raw + 1] = json.base64(s) end
    end
    if #raw > 0 then
      wire[k] = json.array(good)
      wire[k .. "_b64"] = json.array(raw)
    end
  end
end

--- Encode a result (or any table) as one line of JSON. The line is always
--- valid UTF-8 JSON: a field that is not valid UTF-8 is sent as
--- `<field>_b64` (see wire_field); the table itself keeps its bytes.
---@param res hcp.Result
---@return string
function M.encode(res)
  local wire = {}
  for k, v in pairs(res) do wire[k] = v end
  for k, v in pairs(res) do wire_field(wire, res, k, v) end
  for _, k in ipairs(RESULT_NULLS) do
    if wire[k] == nil and wire[k .. "_b64"] == nil and (k == "id" or res.stdout ~= nil) then wire[k] = json.null end
  end
  if wire.files and getmetatable(wire.files) == nil then wire.files = json.array(wire.files) end
  if wire.isolation and getmetatable(wire.isolation) == nil then wire.isolation = json.array(wire.isolation) end
  if wire.left_in_jail and getmetatable(wire.left_in_jail) == nil then wire.left_in_jail = json.array(wire.left_in_jail) end
  local text, err = json.encode(wire)
  if not text then
    -- a result always encodes; this only guards against a foreign table
    return json.encode(M.refusal(res, 126, "envelope: cannot encode result: " .. tostring(err)))
  end
  return text
end

--- Decode one request line. Returns the decoded value or nil, "envelope: …".
---@param line string
---@return table? value, string? err
function M.decode(line)
  local v, err = json.decode(line)
  if v == nil then return nil, "envelope: invalid JSON: " .. tostring(err) end
  return v
end

return M
