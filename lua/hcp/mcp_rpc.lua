--- JSON-RPC 2.0 over newline-delimited stdio, as MCP frames it: one
--- message per line, no batches (MCP 2025-06-18 removed them), ids that are
--- strings or integers and never null. Decoding never raises; encoding
--- always yields one line of valid JSON — a string that is not valid UTF-8
--- (a child's output, an agent's bytes echoed in an error) has each bad
--- byte replaced by U+FFFD on the way out, so stdout carries only
--- protocol.
---@class hcp.mcp_rpc
local M = {}

local json = require("hcp.json")

M.PARSE_ERROR = -32700
M.INVALID_REQUEST = -32600
M.METHOD_NOT_FOUND = -32601
M.INVALID_PARAMS = -32602
M.INTERNAL_ERROR = -32603

M.MAX_LINE = 64 * 1024 * 1024 -- a request line past this is refused, and skipped

--- Whether `s` is valid UTF-8 (no overlong forms, surrogates or code
--- points past U+10FFFF: Lua 5.4's strict utf8.len).
---@param s string
---@return boolean
function M.is_utf8(s)
  return utf8.len(s) ~= nil
end

--- `s` with every byte that does not start a valid UTF-8 sequence replaced
--- by U+FFFD.
---@param s string
---@return string
function M.repair(s)
  if utf8.len(s) then return s end
  local out, i = {}, 1
  while true do
    local n, bad = utf8.len(s, i)
    if n then
      out[#out + 1] = s:sub(i)
      break
    end
    out[#out + 1] = s:sub(i, bad - 1)
    out[#out + 1] = "\u{FFFD}"
    i = bad + 1
    if i > #s then break end
  end
  return table.concat(out)
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local PAIRS -- 12 bits -> two characters, made on first use
local function pairs12()
  if not PAIRS then
    PAIRS = {}
    for n = 0, 4095 do
      local a, b = (n >> 6) + 1, (n & 63) + 1
      PAIRS[n] = B64:sub(a, a) .. B64:sub(b, b)
    end
  end
  return PAIRS
end

--- Standard base64 (RFC 4648, with padding).
---@param s string
---@return string
function M.base64(s)
  local P, out, n = pairs12(), {}, #s
  local full = n - n % 3
  for i = 1, full, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = (a << 16) | (b << 8) | c
    out[#out + 1] = P[v >> 12] .. P[v & 4095]
  end
  local rest = n - full
  if rest > 0 then
    local a, b = s:byte(full + 1, full + 2)
    local v = (a << 16) | ((b or 0) << 8)
    local four = P[v >> 12] .. P[v & 4095]
    out[#out + 1] = four:sub(1, rest + 1) .. string.rep("=", 3 - rest)
  end
  return table.concat(out)
end

-- A copy of `v` whose strings (keys too) are valid UTF-8.
local function clean(v, depth)
  if type(v) == "string" then return M.repair(v) end
  if type(v) ~= "table" or depth > 64 then return v end
  local out = setmetatable({}, getmetatable(v))
  for k, x in pairs(v) do
    out[type(k) == "string" and M.repair(k) or k] = clean(x, depth + 1)
  end
  return out
end

--- One message as a line of JSON (without the newline).
---@param msg table
---@return string
function M.encode(msg)
  local text, err = json.encode(clean(msg, 0))
  if not text then
    -- only a foreign value (a function) can get here; say so, as an error
    text = json.encode({ jsonrpc = "2.0", id = json.null,
      error = { code = M.INTERNAL_ERROR, message = "cannot encode a message: " .. tostring(err) } })
  end
  return text
end

--- An integral float id (cjson decodes every number as a float) as an
--- integer, so it is echoed back exactly; other ids as they are.
---@param id any
---@return any
function M.normalize_id(id)
  if math.type(id) == "float" and id == math.floor(id) and math.abs(id) <= 2 ^ 53 then
    return math.tointeger(id)
  end
  return id
end

--- A response carrying `result`.
---@param id string|integer
---@param result table
---@return table
function M.response(id, result)
  return { jsonrpc = "2.0", id = id, result = result }
end

--- An error response; `id` nil when the request's id could not be read.
---@param id (string|integer)?
---@param code integer
---@param message string
---@param data any
---@return table
function M.error(id, code, message, data)
  return { jsonrpc = "2.0", id = id == nil and json.null or id, error = { code = code, message = message, data = data } }
end

--- A notification (no id, no answer).
---@param method string
---@param params table?
---@return table
function M.notification(method, params)
  return { jsonrpc = "2.0", method = method, params = params }
end

--- A request of the server's own (e.g. elicitation/create).
---@param id string
---@param method string
---@param params table?
---@return table
function M.request(id, method, params)
  return { jsonrpc = "2.0", id = id, method = method, params = params }
end

local function valid_id(id)
  return type(id) == "string" or math.type(id) == "integer"
end

local function is_object(v)
  return type(v) == "table" and (next(v) == nil or #v == 0)
end

--- Decode one line. Returns the kind ("request", "notification" or
--- "response") and the message (its id normalised, `params` an object),
--- or nil and the error response to send back.
---@param line string
---@return string? kind, table msg
function M.decode(line)
  local v, err = json.decode(line)
  if v == nil then return nil, M.error(nil, M.PARSE_ERROR, "Parse error: " .. tostring(err)) end
  if type(v) ~= "table" or (next(v) ~= nil and #v > 0) then
    return nil, M.error(nil, M.INVALID_REQUEST, "Invalid Request: a message is one JSON object (no batches)")
  end
  local id = M.normalize_id(v.id)
  if v.jsonrpc ~= "2.0" then
    return nil, M.error(valid_id(id) and id or nil, M.INVALID_REQUEST, "Invalid Request: \"jsonrpc\" must be \"2.0\"")
  end
  v.id = id
  if v.method ~= nil then
    if type(v.method) ~= "string" then
      return nil, M.error(valid_id(id) and id or nil, M.INVALID_REQUEST, "Invalid Request: \"method\" must be a string")
    end
    if id ~= nil and not valid_id(id) then
      return nil, M.error(nil, M.INVALID_REQUEST, "Invalid Request: \"id\" must be a string or an integer")
    end
    if v.params == json.null then v.params = nil end
    if v.params ~= nil and not is_object(v.params) then
      if id == nil then return "notification", v end -- nobody to tell; the handler sees no params
      return nil, M.error(id, M.INVALID_PARAMS, "Invalid params: \"params\" must be an object")
    end
    v.params = v.params or {}
    return id == nil and "notification" or "request", v
  end
  if valid_id(id) and (v.result ~= nil or v.error ~= nil) then return "response", v end
  return nil, M.error(valid_id(id) and id or nil, M.INVALID_REQUEST, "Invalid Request: neither a request nor a response")
end

---@class hcp.LineReader
---@field buf string[]
---@field size integer
---@field skipping boolean
local LineReader = {}
LineReader.__index = LineReader

--- A reader that cuts chunks into lines (`\n`, an `\r` before it dropped).
---@return hcp.LineReader
function M.lines()
  return setmetatable({ buf = {}, size = 0, skipping = false }, LineReader)
end

--- Feed a chunk; returns the complete lines it finished, in order. A line
--- longer than MAX_LINE comes back as `false` (once), and the rest of it
--- is skipped.
---@param chunk string
---@return (string|false)[]
function LineReader:feed(chunk)
  local out, start = {}, 1
  while true do
    local nl = chunk:find("\n", start, true)
    local piece = chunk:sub(start, nl and nl - 1 or -1)
    if not self.skipping then
      self.buf[#self.buf + 1] = piece
      self.size = self.size + #piece
      if self.size > M.MAX_LINE then
        self.buf, self.size, self.skipping = {}, 0, true
        out[#out + 1] = false
      end
    end
    if not nl then break end
    if not self.skipping then
      local line = table.concat(self.buf):gsub("\r$", "")
      out[#out + 1] = line
    end
    self.buf, self.size, self.skipping = {}, 0, false
    start = nl + 1
  end
  return out
end

--- What is left without a newline at end of input (nil when nothing).
---@return string?
function LineReader:rest()
  if self.skipping or self.size == 0 then return nil end
  return table.concat(self.buf)
end

return M
