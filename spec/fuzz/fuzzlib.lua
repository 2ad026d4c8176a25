-- Helpers shared by the Lua fuzz targets (spec/fuzz/*.lua).
local json = require("hcp.json")

local F = {}

--- Deep equality of decoded JSON values (numbers by value, tables by
--- content, json.null by identity).
function F.same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  if a == json.null or b == json.null then return a == b end
  for k, v in pairs(a) do
    if not F.same(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

--- Identity of two decoded values, as strict as Lua can tell them apart:
--- the same types, integer or float alike (math.type), floats bit for bit
--- (so -0.0 is not 0.0), strings byte for byte, json.null by identity, the
--- same metatable on every table (json's array mark, or none) and the same
--- keys, key types included. For the C decoder against the Lua one.
function F.identical(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) == "number" then
    if math.type(a) ~= math.type(b) then return false end
    if math.type(a) == "float" then return string.pack("<d", a) == string.pack("<d", b) end
    return a == b
  end
  if type(a) ~= "table" then return a == b end
  if getmetatable(a) ~= getmetatable(b) then return false end
  for k, v in pairs(a) do
    local w = rawget(b, k)
    if w == nil or not F.identical(v, w) then return false end
  end
  for k in pairs(b) do
    if rawget(a, k) == nil then return false end
  end
  return true
end

--- Whether a decoded value holds a number JSON cannot write back: a
--- literal beyond the double range decodes to an infinity, which the
--- encoder writes as null (the one documented loss of the round trip).
function F.has_infinity(v)
  if v == math.huge or v == -math.huge then return true end
  if type(v) == "table" then
    for _, x in pairs(v) do
      if F.has_infinity(x) then return true end
    end
  end
  return false
end

--- Nesting depth of a value.
function F.depth(v, d)
  d = d or 0
  if type(v) ~= "table" then return d end
  local m = d + 1
  for _, x in pairs(v) do
    local dx = F.depth(x, d + 1)
    if dx > m then m = dx end
  end
  return m
end

--- A short printable form of an input for messages.
function F.show(s)
  s = tostring(s)
  if #s > 300 then s = s:sub(1, 300) .. "..." end
  return (string.format("%q", s):gsub("\\\n", "\\n"))
end

--- Call f(...) and raise a finding if it raises: the code's contract says
--- it returns nil, err instead.
function F.must_not_raise(name, f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] then error(name .. " raised (its contract is to return nil, err): " .. tostring(r[2]), 0) end
  return table.unpack(r, 2, r.n)
end

return F
