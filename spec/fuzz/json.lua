-- Fuzz target: hcp.json, decode and the encode/decode round trip.
-- The C decoder (core.json_decode) against the Lua one (json._decode_lua,
-- the reference): neither raises, C accepts exactly what Lua accepts, and
-- then with an identical value (math.type, float bits, metatables, keys).
-- decode never raises; whatever it decodes, encode writes (or, past its
-- nesting limit, returns nil, err without raising), the text decodes back
-- to the same value (but for an infinity, from a literal beyond the double
-- range, which is written as null), re-encodes to the same text, and the
-- indented form decodes to the same value too.
local core = require("hcp.core")
local json = require("hcp.json")
local F = require("fuzzlib")

local ARRAY_MT = getmetatable(json.array())

local function c_against_lua(data)
  local c = F.must_not_raise("core.json_decode", core.json_decode, data, json.null, ARRAY_MT)
  local l, lerr = F.must_not_raise("json._decode_lua", json._decode_lua, data)
  if c ~= nil then
    assert(l ~= nil, "core.json_decode accepted what the Lua decoder refuses (" .. tostring(lerr) .. "): " .. F.show(data))
    assert(F.identical(c, l), "core.json_decode and the Lua decoder decode differently: " .. F.show(data))
  else
    assert(l == nil, "core.json_decode refused what the Lua decoder accepts: " .. F.show(data))
  end
end

return function(data)
  c_against_lua(data)
  local v, err = F.must_not_raise("json.decode", json.decode, data)
  if v == nil then
    assert(type(err) == "string", "json.decode: nil without a message")
    return
  end
  local text, eerr = F.must_not_raise("json.encode", json.encode, v)
  if text == nil then
    assert(eerr == "json: nesting too deep" and F.depth(v) > 100,
      "json.encode refused a decoded value: " .. tostring(eerr) .. " for " .. F.show(data))
    return
  end
  local back, berr = json.decode(text)
  assert(back ~= nil, "the encoder wrote what the decoder refuses: " .. tostring(berr) .. ": " .. F.show(text))
  assert(F.same(v, back) or F.has_infinity(v), "the round trip changed the value: " .. F.show(data) .. " -> " .. F.show(text))
  assert(json.encode(back) == text, "encoding is not stable: " .. F.show(text))
  local indented = assert(json.encode(v, { indent = 2 }))
  assert(F.same(json.decode(indented), back), "the indented form decodes differently: " .. F.show(indented))
end
