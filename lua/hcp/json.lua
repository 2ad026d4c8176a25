--- JSON for hcp-lua: decoding through `cjson.safe` (never raises on bad
--- input), encoding with a stable key order and real empty arrays, which the
--- lua-cjson shipped by Debian cannot express (it has no `empty_array`).
---@class hcp.json
local M = {}

-- A private instance, held to JSON's number grammar: the default also takes
-- nan, inf and hex (0x10), which are not JSON (found by spec/fuzz/envelope).
local cjson = require("cjson.safe").new()
cjson.decode_invalid_numbers(false)

--- The value cjson uses for JSON `null`.
M.null = cjson.null

local array_mt = { __name = "hcp.json.array" }

--- Mark a table as a JSON array, so that an empty one encodes as `[]`.
---@param t table?
---@return table
function M.array(t)
  return setmetatable(t or {}, array_mt)
end

--- Decode a JSON text. Never raises.
---@param text string
---@return any value, string? err
function M.decode(text)
  if type(text) ~= "string" then
    return nil, "expected a JSON string, got " .. type(text)
  end
  local value, err = cjson.decode(text)
  if value == nil and err then return nil, err end
  return value
end

-- Keys of result envelopes in the order a reader expects them; other keys
-- follow in sorted order.
local key_rank = {}
for i, k in ipairs({ "hcp", "id", "ok", "exit", "signal", "error", "stdout", "stderr",
  "files", "sandbox", "isolation", "timed_out", "truncated", "ms",
  -- manifests, in the order the contract presents them
  "name", "version", "class", "description", "wrap", "bin", "args", "agent_env", "timeout_ms",
  "workspace", "mode", "home_env", "file_flags", "network", "limits", "ops", "params", "confirm",
  "bindings", "mocks", "privacy" }) do
  key_rank[k] = i
end

--- The order keys are written in: result fields first, in their usual
--- order, then the rest sorted.
---@param a any
---@param b any
---@return boolean
function M.key_less(a, b)
  local ra, rb = key_rank[a], key_rank[b]
  if ra and rb then return ra < rb end
  if ra then return true end
  if rb then return false end
  return tostring(a) < tostring(b)
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, M.key_less)
  return keys
end

local function is_array(t)
  if getmetatable(t) == array_mt then return true end
  local n = #t
  if n == 0 then return false end
  local count = 0
  for _ in pairs(t) do count = count + 1 end
  return count == n
end

local encode_value

local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

-- Quote and escape: the two JSON specials and control bytes; "/" stays as
-- it is (cjson writes "\/", which is valid but unpleasant to read), and
-- other bytes pass through unchanged.
local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return ESCAPES[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local indent_unit -- set by encode(v, { indent = n }) for the duration of one call

local function newline(out, depth)
  if indent_unit then out[#out + 1] = "\n" .. string.rep(indent_unit, depth) end
end

encode_value = function(v, out, depth)
  local tv = type(v)
  if depth > 100 then error("json: nesting too deep", 0) end
  if v == nil or v == cjson.null then
    out[#out + 1] = "null"
  elseif tv == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif tv == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      out[#out + 1] = "null"
    elseif math.type(v) == "integer" then
      out[#out + 1] = string.format("%d", v)
    else
      -- 14 digits where that reads back exactly, else 17, which always does
      -- (found by spec/fuzz/envelope: a request's id came back changed)
      local text = string.format("%.14g", v)
      if tonumber(text) ~= v then text = string.format("%.17g", v) end
      out[#out + 1] = text
    end
  elseif tv == "string" then
    out[#out + 1] = encode_string(v)
  elseif tv == "table" then
    if is_array(v) then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        newline(out, depth + 1)
        encode_value(v[i], out, depth + 1)
      end
      if #v > 0 then newline(out, depth) end
      out[#out + 1] = "]"
    else
      out[#out + 1] = "{"
      local first = true
      for _, k in ipairs(sorted_keys(v)) do
        if not first then out[#out + 1] = "," end
        first = false
        newline(out, depth + 1)
        out[#out + 1] = encode_string(tostring(k))
        out[#out + 1] = indent_unit and ": " or ":"
        encode_value(v[k], out, depth + 1)
      end
      if not first then newline(out, depth) end
      out[#out + 1] = "}"
    end
  else
    error("json: cannot encode a " .. tv, 0)
  end
end

--- Encode a Lua value as JSON: one line, or indented with `{ indent = n }`
--- (for files people edit, such as the manifests `hcp wrap` writes). Fields
--- holding `nil` are absent; use `json.null` for an explicit null.
---@param v any
---@param opts { indent: integer? }?
---@return string? text, string? err
function M.encode(v, opts)
  local out = {}
  indent_unit = opts and opts.indent and string.rep(" ", opts.indent) or nil
  local ok, err = pcall(encode_value, v, out, 0)
  indent_unit = nil
  if not ok then return nil, err end
  return table.concat(out)
end

return M
