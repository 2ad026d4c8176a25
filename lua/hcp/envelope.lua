--- Envelopes (contract §2): request validation, result construction and
--- the JSON wire form.
---@class hcp.envelope
local M = {}

local json = require("hcp.json")

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
---@field sandbox string?
---@field isolation string[]?
---@field timed_out boolean?
---@field truncated boolean?
---@field ms number?

local FIELDS = { hcp = true, id = true, pack = true, op = true, params = true, args = true,
  stdin = true, mode = true, principal = true }

M.PRINCIPAL_PAT = "^[A-Za-z0-9._-]+$"

local function is_array(t)
  if type(t) ~= "table" then return false end
  local n = #t
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = tostring(k) end
  table.sort(ks)
  return ks
end

--- Validate a request envelope (a Lua table, or decoded JSON where `null`
--- counts as absent). Returns a clean copy or `nil, "envelope: …"`.
---@param t any
---@return hcp.Request? req, string? err
function M.validate(t)
  if type(t) ~= "table" or is_array(t) and next(t) ~= nil then
    return nil, "envelope: request must be an object"
  end
  for _, k in ipairs(sorted_keys(t)) do
    if not FIELDS[k] then return nil, string.format("envelope: unknown field %q", k) end
  end
  local function get(k)
    local v = t[k]
    if v == json.null then return nil end
    return v
  end
  local req = {}
  local hcpv = get("hcp")
  if hcpv ~= nil and hcpv ~= 1 then return nil, "envelope: field \"hcp\" must be 1" end
  req.hcp = 1
  local id = get("id")
  if id ~= nil and type(id) ~= "string" and type(id) ~= "number" then
    return nil, "envelope: field \"id\" must be a string or a number"
  end
  req.id = id
  local pack = get("pack")
  if type(pack) ~= "string" or pack == "" then
    return nil, "envelope: field \"pack\" is required (a pack name)"
  end
  req.pack = pack
  local op = get("op")
  if op ~= nil and (type(op) ~= "string" or op == "") then
    return nil, "envelope: field \"op\" must be a non-empty string"
  end
  req.op = op
  local params = get("params")
  if params ~= nil then
    if type(params) ~= "table" or (is_array(params) and next(params) ~= nil) then
      return nil, "envelope: field \"params\" must be an object"
    end
    if op == nil and next(params) ~= nil then
      return nil, "envelope: field \"params\" needs an \"op\""
    end
    local copy = {}
    for k, v in pairs(params) do
      if type(k) ~= "string" then return nil, "envelope: params keys must be strings" end
      if v ~= json.null then copy[k] = v end
    end
    req.params = copy
  end
  local args = get("args")
  if args ~= nil then
    if not is_array(args) then return nil, "envelope: field \"args\" must be an array of strings" end
    local copy = {}
    for i, a in ipairs(args) do
      if type(a) ~= "string" then
        return nil, string.format("envelope: args[%d] must be a string", i)
      end
      copy[i] = a
    end
    req.args = copy
  end
  local stdin = get("stdin")
  if stdin ~= nil and type(stdin) ~= "string" then
    return nil, "envelope: field \"stdin\" must be a string"
  end
  req.stdin = stdin
  local mode = get("mode")
  if mode == nil then mode = "live" end
  if mode ~= "live" and mode ~= "mock" then
    return nil, "envelope: field \"mode\" must be \"live\" or \"mock\""
  end
  req.mode = mode
  local principal = get("principal")
  if principal == nil then principal = "default" end
  if type(principal) ~= "string" or #principal > 64 or not principal:match(M.PRINCIPAL_PAT) then
    return nil, "envelope: field \"principal\" must match ^[A-Za-z0-9._-]{1,64}$"
  end
  -- it names a directory of the persisted jails: "." and ".." would not
  if principal == "." or principal == ".." then
    return nil, "envelope: field \"principal\" cannot be \".\" or \"..\""
  end
  req.principal = principal
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
  if r.timed_out then
    res.error = string.format("exit: timed out after %d ms", timeout_ms or 0)
  elseif r.signal then
    res.error = "exit: signal " .. res.signal
  elseif r.exit ~= 0 then
    res.error = "exit: status " .. tostring(r.exit)
  end
  return res
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
