--- JSON for hcp-lua, strict both ways.
---
--- Decoding (RFC 8259, nothing more): the text must be UTF-8; `NaN`,
--- `Infinity`, hex and other non-JSON numbers, duplicate keys, raw control
--- characters, lone surrogates and trailing text are errors that name the
--- field (`field "params.x": …`). Integers decode as Lua integers, so an id
--- such as 123456789012345 comes back exactly; arrays carry `json.array`'s
--- mark so `[]` re-encodes as `[]`. The decoder below, in Lua, is the
--- reference and words every refusal; a C decoder (core.json_decode,
--- src/json_decode.c) that accepts exactly the same texts, with the same
--- values, answers first and hands every refusal back to it.
---
--- Encoding: a stable key order, real empty arrays, integers exactly,
--- floats in the shortest form that reads back the same, and always valid
--- UTF-8 — bytes that are not (in a string from anywhere) are written as
--- U+FFFD. Results keep their bytes another way: hcp.envelope sends such a
--- field base64-encoded as `<field>_b64` before it gets here.
---@class hcp.json
local M = {}

local core = require("hcp.core")

--- The value JSON `null` decodes to: lua-cjson's `cjson.null` (the light
--- userdata NULL, equal to it wherever it comes from), without loading cjson.
M.null = core.null

local array_mt = { __name = "hcp.json.array" }

--- Mark a table as a JSON array, so that an empty one encodes as `[]`.
---@param t table?
---@return table
function M.array(t)
  return setmetatable(t or {}, array_mt)
end

-- ---------------------------------------------------------------------
-- UTF-8 and base64 helpers (shared with hcp.envelope)
-- ---------------------------------------------------------------------

--- Whether `s` is valid UTF-8 (no surrogates, nothing above U+10FFFF, no
--- overlong forms).
---@param s string
---@return boolean
function M.is_utf8(s)
  return utf8.len(s) ~= nil
end

--- `s` without a trailing incomplete UTF-8 sequence (what a byte cap leaves
--- when it cuts a character in two); `s` itself when it ends cleanly.
---@param s string
---@return string
function M.trim_partial(s)
  for back = 1, math.min(3, #s) do
    local b = s:byte(#s - back + 1)
    if b < 0x80 then return s end
    if b >= 0xC0 then
      -- a lead byte: complete when its sequence has the bytes it needs
      local need = b >= 0xF0 and 4 or b >= 0xE0 and 3 or 2
      if back < need then return s:sub(1, #s - back) end
      return s
    end
  end
  return s
end

--- `s` with every byte that is not part of valid UTF-8 replaced by U+FFFD.
---@param s string
---@return string
function M.sanitize(s)
  if M.is_utf8(s) then return s end
  local out, i = {}, 1
  while i <= #s do
    local n, bad = utf8.len(s, i)
    if n then out[#out + 1] = s:sub(i); break end
    out[#out + 1] = s:sub(i, bad - 1)
    out[#out + 1] = "\u{FFFD}"
    i = bad + 1
  end
  return table.concat(out)
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

--- Standard base64 (RFC 4648, with padding).
---@param s string
---@return string
function M.base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    local q1, q2, q3, q4 = (n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63
    out[#out + 1] = B64:sub(q1 + 1, q1 + 1) .. B64:sub(q2 + 1, q2 + 1)
      .. (b and B64:sub(q3 + 1, q3 + 1) or "=") .. (c and B64:sub(q4 + 1, q4 + 1) or "=")
  end
  return table.concat(out)
end

-- ---------------------------------------------------------------------
-- Decoding
-- ---------------------------------------------------------------------

local MAX_DEPTH = 500

-- the decoder's state for one text: the text, and the path of the value
-- being read (for messages)
local D = {}
D.__index = D

-- The path is kept raw while decoding (a key, or an array index) and
-- spelled only for a message: "ops.q.params[1]".
function D:fail(fmt, ...)
  local parts = {}
  for i, v in ipairs(self.path) do
    parts[i] = math.type(v) == "integer" and string.format("[%d]", v) or ((i > 1 and "." or "") .. v)
  end
  local where = #parts > 0 and string.format("field %q: ", table.concat(parts)) or ""
  error({ msg = where .. string.format(fmt, ...) }, 0)
end

function D:skip(pos)
  local text = self.text
  local b = text:byte(pos)
  -- most calls land on the token itself: no pattern needed
  if b ~= 32 and b ~= 10 and b ~= 13 and b ~= 9 then return b and pos or #text + 1 end
  return text:find("[^ \t\n\r]", pos + 1) or #text + 1
end

local ESC = { ['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }

function D:hex4(pos)
  local h = self.text:sub(pos, pos + 3)
  if not h:match("^%x%x%x%x$") then self:fail("bad \\u escape at byte %d", pos - 2) end
  return tonumber(h, 16)
end

-- a \uXXXX escape at pos (just after the "u"), surrogate pairs joined
function D:unicode(pos)
  local cp = self:hex4(pos)
  if cp >= 0xDC00 and cp <= 0xDFFF then self:fail("lone surrogate \\u%04x at byte %d", cp, pos - 2) end
  if cp >= 0xD800 and cp <= 0xDBFF then
    if self.text:sub(pos + 4, pos + 5) ~= "\\u" then self:fail("lone surrogate \\u%04x at byte %d", cp, pos - 2) end
    local lo = self:hex4(pos + 6)
    if lo < 0xDC00 or lo > 0xDFFF then self:fail("lone surrogate \\u%04x at byte %d", cp, pos - 2) end
    return utf8.char(0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)), pos + 10
  end
  return utf8.char(cp), pos + 4
end

-- a string whose opening quote is at pos - 1; returns it and the position after it
function D:string(pos)
  local text, parts = self.text, {}
  while true do
    local s = text:find('["\\\0-\31]', pos)
    if not s then self:fail("unterminated string") end
    if s > pos then
      local run = text:sub(pos, s - 1)
      -- a text that is valid UTF-8 as a whole has no bad run: its runs end
      -- at ASCII bytes
      if not self.utf8 then
        local ok, bad = utf8.len(run)
        if not ok then self:fail("invalid UTF-8 at byte %d", pos + bad - 1) end
      end
      -- the common string: one run, no escape
      if text:byte(s) == 34 and #parts == 0 then return run, s + 1 end
      parts[#parts + 1] = run
    end
    local c = text:sub(s, s)
    if c == '"' then return table.concat(parts), s + 1 end
    if c ~= "\\" then self:fail("raw control character in a string at byte %d", s) end
    local e = text:sub(s + 1, s + 1)
    if ESC[e] then
      parts[#parts + 1] = ESC[e]
      pos = s + 2
    elseif e == "u" then
      parts[#parts + 1], pos = self:unicode(s + 2)
    else
      self:fail("bad escape \\%s at byte %d", e, s)
    end
  end
end

local WORDS = { NaN = "NaN is not a JSON number", Infinity = "Infinity is not a JSON number",
  ["-Infinity"] = "-Infinity is not a JSON number" }

-- whether tok is a JSON number (-?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?), and
-- whether it has a fraction or an exponent
local function json_number(tok)
  local i = tok:sub(1, 1) == "-" and 2 or 1
  local int = tok:match("^0", i) or tok:match("^[1-9]%d*", i)
  if not int then return false end
  i = i + #int
  local frac = tok:match("^%.%d+", i)
  if frac then i = i + #frac end
  local exp = tok:match("^[eE][-+]?%d+", i)
  if exp then i = i + #exp end
  return i == #tok + 1, (frac or exp) ~= nil
end

function D:number(pos)
  local tok = self.text:match("^[-+%w.]+", pos)
  if WORDS[tok] then self:fail("%s", WORDS[tok]) end
  local ok, float = json_number(tok)
  if not ok then self:fail("%s is not a JSON number (at byte %d)", tok:sub(1, 24), pos) end
  local v = tonumber(tok)
  if v == math.huge or v == -math.huge then self:fail("%s is out of range (at byte %d)", tok:sub(1, 24), pos) end
  if not float then v = math.tointeger(v) or v end
  return v, pos + #tok
end

local LITERALS = { ["true"] = true, ["false"] = false, null = M.null }

function D:value(pos, depth)
  if depth > MAX_DEPTH then self:fail("nested deeper than %d", MAX_DEPTH) end
  pos = self:skip(pos)
  local text = self.text
  local b = text:byte(pos)
  if b == 123 then return self:object(pos + 1, depth) end -- {
  if b == 91 then return self:array(pos + 1, depth) end -- [
  if b == 34 then return self:string(pos + 1) end -- "
  if b and ((b >= 48 and b <= 57) or b == 45 or b == 43 or b == 46) then return self:number(pos) end -- 0-9 - + .
  local c = text:sub(pos, pos)
  local word = text:match("^[%w_]+", pos)
  if LITERALS[word] ~= nil then return LITERALS[word], pos + #word end
  if c == "" then self:fail("unexpected end of input") end
  if word and WORDS[word] then self:fail("%s", WORDS[word]) end
  self:fail("unexpected %s at byte %d", word and string.format("%q", word:sub(1, 16)) or string.format("character %q", c), pos)
end

function D:array(pos, depth)
  local t = setmetatable({}, array_mt)
  pos = self:skip(pos)
  if self.text:sub(pos, pos) == "]" then return t, pos + 1 end
  local path = self.path
  local base = #path
  local text, n = self.text, 0
  while true do
    n = n + 1
    path[base + 1] = n
    local v
    v, pos = self:value(pos, depth + 1)
    t[n] = v
    path[base + 1] = nil
    pos = self:skip(pos)
    local c = text:byte(pos)
    if c == 93 then return t, pos + 1 end -- ]
    if c ~= 44 then self:fail("expected , or ] at byte %d", pos) end -- ,
    pos = pos + 1
  end
end

function D:object(pos, depth)
  local t, seen = {}, {}
  pos = self:skip(pos)
  if self.text:sub(pos, pos) == "}" then return t, pos + 1 end
  local path = self.path
  local base = #path
  local text = self.text
  while true do
    if text:byte(pos) ~= 34 then self:fail("expected a key at byte %d", pos) end -- "
    local key
    key, pos = self:string(pos + 1)
    path[base + 1] = key
    if seen[key] then self:fail("duplicate key") end
    seen[key] = true
    pos = self:skip(pos)
    if text:byte(pos) ~= 58 then self:fail("expected : at byte %d", pos) end -- :
    local v
    v, pos = self:value(pos + 1, depth + 1)
    -- null members are kept as json.null: "absent" is the reader's decision
    t[key] = v
    path[base + 1] = nil
    pos = self:skip(pos)
    local c = text:byte(pos)
    if c == 125 then return t, pos + 1 end -- }
    if c ~= 44 then self:fail("expected , or } at byte %d", pos) end -- ,
    pos = self:skip(pos + 1)
  end
end

-- The decoder above, on a string: the reference, and the one that words
-- every refusal.
local function decode_lua(text)
  local d = setmetatable({ text = text, path = {}, utf8 = utf8.len(text) ~= nil }, D)
  local ok, v, pos = pcall(D.value, d, 1, 0)
  if not ok then
    if type(v) == "table" then return nil, v.msg end
    return nil, tostring(v)
  end
  pos = d:skip(pos)
  if pos <= #text then return nil, string.format("unexpected text after the value at byte %d", pos) end
  return v
end

-- For spec/json_c_spec.lua, which checks the C decoder against it.
M._decode_lua = decode_lua

local c_decode = core.json_decode

--- Decode a JSON text strictly. Never raises.
---
--- The C decoder (core.json_decode, about 13x faster) answers first; it accepts
--- only what decode_lua accepts, with the same value, and returns nil for
--- anything else, so a refusal's message is always decode_lua's own.
--- pcall: the C side raises only when out of memory, where decode_lua's
--- own pcall answers.
---@param text string
---@return any value, string? err
function M.decode(text)
  if type(text) ~= "string" then
    return nil, "expected a JSON string, got " .. type(text)
  end
  local ok, v = pcall(c_decode, text, M.null, array_mt)
  if ok and v ~= nil then return v end
  return decode_lua(text)
end

-- ---------------------------------------------------------------------
-- Encoding
-- ---------------------------------------------------------------------

-- Keys of result envelopes in the order a reader expects them; other keys
-- follow in sorted order.
local key_rank = {}
for i, k in ipairs({ "hcp", "id", "id_b64", "ok", "exit", "signal", "error", "error_b64", "stdout", "stdout_b64",
  "stderr", "stderr_b64", "files", "files_b64", "files_truncated",
  "left_in_jail", "left_in_jail_b64", "left_in_jail_truncated", "hint", "sandbox", "isolation", "timed_out", "truncated", "ms",
  -- manifests, in the order the contract presents them
  "name", "version", "class", "description", "wrap", "bin", "args", "agent_env", "timeout_ms",
  "workspace", "mode", "home_env", "file_flags", "output_flags", "network", "limits", "ops", "params", "confirm",
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
-- it is (cjson writes "\/", which is valid but unpleasant to read); bytes
-- that are not UTF-8 become U+FFFD, so the text is always valid.
local function encode_string(s)
  return '"' .. M.sanitize(s):gsub('[%c"\\]', function(c)
    return ESCAPES[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

--- A number as JSON: integers exactly; floats in the shortest of %.15g,
--- %.16g, %.17g that reads back as the same value; NaN and infinities
--- (which JSON cannot say) as null.
---@param v number
---@return string
function M.number(v)
  if math.type(v) == "integer" then return string.format("%d", v) end
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", math.tointeger(v)) end
  for _, fmt in ipairs({ "%.15g", "%.16g" }) do
    local s = string.format(fmt, v)
    if tonumber(s) == v then return s end
  end
  return string.format("%.17g", v)
end

local indent_unit -- set by encode(v, { indent = n }) for the duration of one call

local function newline(out, depth)
  if indent_unit then out[#out + 1] = "\n" .. string.rep(indent_unit, depth) end
end

encode_value = function(v, out, depth)
  local tv = type(v)
  if depth > 100 then error("json: nesting too deep", 0) end
  if v == nil or v == M.null then
    out[#out + 1] = "null"
  elseif tv == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif tv == "number" then
    out[#out + 1] = M.number(v)
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
