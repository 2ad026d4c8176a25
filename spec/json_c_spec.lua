-- core.json_decode, the C fast path of hcp.json.decode, against the Lua
-- decoder it stands in for (json._decode_lua, the reference). The
-- invariant: whenever C accepts a text, Lua accepts it too, with an
-- identical value (math.type, float bits, bytes, json.null, the array mark
-- on every array and on nothing else, the same keys). C returns nil for
-- anything else, and json.decode then gives Lua's own answer, so messages
-- cannot change. These cases also check that C accepts every valid text
-- (else the fast path would silently stop being one).
local core = require("hcp.core")
local json = require("hcp.json")
local F = require("fuzz.fuzzlib")
local S = require("support")

local ARRAY_MT = getmetatable(json.array())

local function c_decode(text)
  return core.json_decode(text, json.null, ARRAY_MT)
end

-- C and Lua agree on text: both accept with identical values, or both
-- refuse and json.decode answers with Lua's message. Returns the value.
local function agree(text, expect_ok)
  local c = c_decode(text)
  local l, err = json._decode_lua(text)
  local shown = F.show(text)
  if c ~= nil then
    assert(l ~= nil, "C accepted what Lua refuses (" .. tostring(err) .. "): " .. shown)
    assert(F.identical(c, l), "C and Lua decode differently: " .. shown)
  else
    assert(l == nil, "C refused what Lua accepts: " .. shown)
    local v, derr = json.decode(text)
    assert(v == nil and derr == err, "json.decode did not give Lua's message for " .. shown)
  end
  if expect_ok ~= nil then
    assert(expect_ok == (c ~= nil), (expect_ok and "refused: " or "accepted: ") .. shown)
  end
  return c
end

local function read_seeds()
  local texts = {}
  local cmd = "ls " .. S.q(S.REPO) .. "/packs-examples/*/hcp.json " .. S.q(S.REPO) .. "/spec/fuzz/envelope/seed-*"
  for name in io.popen(cmd):lines() do texts[#texts + 1] = assert(S.read(name)) end
  return texts
end

local function accepts(text) return agree(text, true) end
local function refuses(text) return agree(text, false) end

describe("core.json_decode against the Lua decoder", function()
  it("reads every number form to the same value and math.type as Lua's tonumber", function()
    local cases = {
      { "0", "integer" }, { "-0", "integer" }, { "1", "integer" }, { "-1", "integer" },
      { "1.0", "float" }, { "-0.0", "float" }, { "0.5", "float" }, { "1e2", "float" }, { "1E2", "float" },
      { "1e+2", "float" }, { "1e-2", "float" }, { "0e0", "float" }, { "123456789012345", "integer" },
      { "9007199254740993", "integer" }, { "9223372036854775807", "integer" },
      { "-9223372036854775808", "integer" }, { "9223372036854775808", "float" },
      -- no fraction, read as a float (too big), then math.tointeger's integer
      { "-9223372036854775809", "integer" }, { "12345678901234567890", "float" },
      { "1e308", "float" }, { "1e-400", "float" }, { "4.9e-324", "float" }, { "-1e-400", "float" },
      { string.rep("9", 100), "float" }, { "0." .. string.rep("1", 80), "float" },
      { "1" .. string.rep("0", 62), "float" }, { "1" .. string.rep("0", 63), "float" },
    }
    for _, case in ipairs(cases) do
      local v = accepts(case[1])
      assert.equal(case[2], math.type(v), case[1])
      accepts("[" .. case[1] .. "]")
      accepts('{"n":' .. case[1] .. '}')
    end
    assert.equal(math.mininteger, c_decode("-9223372036854775809"))
    assert.equal(0, c_decode("-0"))
    assert.equal("-0.0", string.format("%.1f", c_decode("-0.0")))
  end)

  it("refuses every non-JSON number, infinity and number run-on", function()
    for _, n in ipairs({ "+1", "01", "-01", "00", "1.", ".5", "1e", "1e+", "1E-", "0x1F", "0X10", "0b1",
      "NaN", "Infinity", "-Infinity", "1e400", "-1e400", string.rep("9", 400), "1.5.3", "--1", "-",
      "1x", "1-2", "1+2", "1e5e", "1.0e", "-.5", "1_000", "1e5.0", "٣" }) do
      refuses(n)
      refuses("[" .. n .. "]")
      refuses('{"n":' .. n .. '}')
    end
  end)

  it("reads literals, and refuses their misspellings and run-ons", function()
    assert.equal(true, accepts("true"))
    assert.equal(false, accepts("false"))
    assert.equal(json.null, accepts("null"))
    accepts("[true,false,null]")
    for _, w in ipairs({ "tru", "truex", "true_", "True", "nul", "null1", "fals", "falsey", "nil", "none" }) do
      refuses(w)
      refuses("[" .. w .. "]")
    end
  end)

  it("decodes each escape and surrogate pair to the same bytes", function()
    local cases = {
      ['"\\""'] = '"', ['"\\\\"'] = "\\", ['"\\/"'] = "/", ['"\\b"'] = "\b", ['"\\f"'] = "\f",
      ['"\\n"'] = "\n", ['"\\r"'] = "\r", ['"\\t"'] = "\t", ['"\\u0000"'] = "\0", ['"\\u0041"'] = "A",
      ['"\\u00e9"'] = "é", ['"\\u00E9"'] = "é", ['"\\u07ff"'] = "\u{7FF}", ['"\\u0800"'] = "\u{800}",
      ['"\\ud7ff"'] = "\u{D7FF}", ['"\\ue000"'] = "\u{E000}", ['"\\uffff"'] = "\u{FFFF}",
      ['"\\ud800\\udc00"'] = "\u{10000}", ['"\\ud83d\\ude00"'] = "😀", ['"\\uD83D\\uDE00"'] = "😀",
      ['"\\udbff\\udfff"'] = "\u{10FFFF}", ['"a\\u0000b"'] = "a\0b", ['""'] = "",
      ['"\x7f"'] = "\x7f", ['"é😀"'] = "é😀",
    }
    for text, want in pairs(cases) do
      assert.equal(want, accepts(text), text)
      accepts("[" .. text .. "," .. text .. "]")
    end
    -- past luaL_Buffer's own buffer, and past the short-string length
    local long = string.rep("ab\\n\\u00e9", 2000)
    assert.equal(string.rep("ab\né", 2000), accepts('"' .. long .. '"'))
    assert.equal(string.rep("x", 5000), accepts('"' .. string.rep("x", 5000) .. '"'))
  end)

  it("refuses lone surrogates, bad escapes and unterminated strings", function()
    for _, text in ipairs({ '"\\ud800"', '"\\udc00"', '"\\udfff"', '"\\ud800x"', '"\\ud800\\u0041"',
      '"\\ud800\\ud800"', '"\\ud800\\n"', '"\\ud800\\"', '"\\ud800\\u"', '"\\ud800\\udc0"', '"\\udc00\\ud800"',
      '"\\u12"', '"\\u12G4"', '"\\u"', '"\\x41"', "\"\\'\"", '"\\a"', '"\\U0041"', '"\\0"', '"\\', '"\\"',
      '"abc', '"', '"\\u00', '"\\ud83d\\ude0"' }) do
      refuses(text)
      refuses("[" .. text .. "]")
    end
  end)

  it("refuses raw control bytes in strings, DEL and the rest allowed", function()
    for b = 0, 31 do
      refuses('"a' .. string.char(b) .. 'b"')
      refuses('{"k' .. string.char(b) .. '":1}')
    end
    accepts('"\x7f"')
  end)

  it("reads UTF-8 as Lua's utf8.len does: no overlong form, surrogate, or byte past U+10FFFF", function()
    for _, s in ipairs({ "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbf",
      "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "é", "€", "😀" }) do
      assert.equal(s, accepts('"' .. s .. '"'))
    end
    for _, s in ipairs({ "\x80", "\xbf", "\xc0\xaf", "\xc1\xbf", "\xe0\x80\xaf", "\xe0\x9f\xbf",
      "\xed\xa0\x80", "\xed\xbf\xbf", "\xf0\x80\x80\xaf", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80",
      "\xf5\x80\x80\x80", "\xf8\x88\x80\x80\x80", "\xfc\x84\x80\x80\x80\x80", "\xfe", "\xff",
      "\xfe\x80\x80\x80\x80\x80\x80", "\xff\x80\x80\x80\x80\x80\x80\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98",
      "\xc3\x28", "\xe2\x28\xa1", "\xc3\xa9\xa9" }) do
      assert.is_nil(utf8.len(s), F.show(s))
      refuses('"' .. s .. '"')
      refuses('{"' .. s .. '":1}')
      refuses('["ok","' .. s .. '"]')
    end
    -- invalid UTF-8 outside a string, at the end of the text
    refuses("[\xc3]")
    refuses('"x"\xc3')
    refuses('"\xc3')
  end)

  it("keeps NUL bytes: in a string from \\u0000, and refused anywhere raw", function()
    assert.equal("\0", accepts('"\\u0000"'))
    for _, text in ipairs({ "1\0", "\0", "[1,\0 2]", '{"a":1}\0', '"a\0"', "[\0]", "tr\0ue" }) do
      refuses(text)
    end
  end)

  it("marks every array and no object, and keeps nulls in arrays", function()
    local v = accepts('{"a":[],"b":[[],{}],"c":{},"d":[null,null,1],"e":{"x":null}}')
    assert.equal(ARRAY_MT, getmetatable(v.a))
    assert.equal(ARRAY_MT, getmetatable(v.b[1]))
    assert.is_nil(getmetatable(v))
    assert.is_nil(getmetatable(v.b[2]))
    assert.is_nil(getmetatable(v.c))
    assert.equal(3, #v.d)
    assert.equal(json.null, v.d[1])
    assert.equal(json.null, v.e.x)
    assert.equal('{"a":[],"b":[[],{}],"c":{},"d":[null,null,1],"e":{"x":null}}', json.encode(json.decode(
      '{"a":[],"b":[[],{}],"c":{},"d":[null,null,1],"e":{"x":null}}')))
    -- keys stay strings, integers stay integers in arrays
    local k = accepts('{"1":1,"2":[1]}')
    assert.is_nil(rawget(k, 1))
    assert.equal(1, k["1"])
  end)

  it("refuses duplicate keys at any depth, also when spelled differently", function()
    for _, text in ipairs({ '{"a":1,"a":2}', '{"a":1,"b":2,"a":3}', '{"x":{"a":1,"a":1}}',
      '[{},{"a":null,"a":null}]', '{"a":1,"\\u0061":2}', '{"\\u00e9":1,"é":2}', '{"":1,"":2}',
      '{"a\\u0000":1,"a\\u0000":2}', '{"' .. string.rep("k", 100) .. '":1,"' .. string.rep("k", 100) .. '":2}' }) do
      refuses(text)
    end
    accepts('{"a":1,"A":2,"a ":3," a":4,"a\\u0000":5}')
  end)

  it("refuses broken structure", function()
    for _, text in ipairs({ "", " ", "[", "]", "{", "}", "[1,]", "[,1]", "[1 2]", "[1,,2]", '{"a"}',
      '{"a":}', '{"a" 1}', '{"a":1,}', '{,"a":1}', '{1:1}', "{a:1}", "{'a':1}", '{"a":1 "b":2}',
      '{"a":1]', '[1}', "[[]", "[]]", "1 2", "{} {}", "[]x", '"a" "b"', "\xef\xbb\xbf{}",
      "[1]\f", "\v1", "\f1", '{"a":1};', "//x\n1", "/* */1", "[1,2", '{"a":1,"b"' }) do
      refuses(text)
    end
    for _, text in ipairs({ " 1 ", "\t\n\r 1\r\n", "[ 1 , 2 ]", '{ "a" : 1 , "b" : [ ] }', "[\n]", "{\t}" }) do
      accepts(text)
    end
  end)

  it("nests exactly as deep as the Lua decoder: a value at depth 501 is refused", function()
    local function arrays(n, inner) return string.rep("[", n) .. (inner or "") .. string.rep("]", n) end
    accepts(arrays(500, "1"))  -- the 1 at depth 500
    refuses(arrays(501, "1"))  -- the 1 at depth 501
    accepts(arrays(501))       -- the innermost [] at depth 500
    refuses(arrays(502))       -- at depth 501
    local function objects(n, inner) return string.rep('{"k":', n) .. inner .. string.rep("}", n) end
    accepts(objects(500, "1"))
    refuses(objects(501, "1"))
    accepts(objects(500, "{}"))
    refuses(objects(501, "{}"))
    accepts(string.rep('[{"k":', 250) .. "true" .. string.rep("}]", 250))
    refuses(string.rep('[{"k":', 250) .. "[0]" .. string.rep("}]", 250))
    -- far deeper than the limit, and cut short: refused without trouble
    refuses(string.rep("[", 100000))
    refuses(string.rep('{"a":', 100000))
    refuses(arrays(100000))
  end)

  it("reads large texts: many elements and members", function()
    local n = 50000
    local parts, members = {}, {}
    for i = 1, n do
      parts[i] = tostring(i)
      members[i] = string.format('"k%d":%d', i, i)
    end
    local a = accepts("[" .. table.concat(parts, ",") .. "]")
    assert.equal(n, #a)
    local o = accepts("{" .. table.concat(members, ",") .. "}")
    assert.equal(n, o["k" .. n])
    refuses("{" .. table.concat(members, ",") .. ',"k1":0}')
  end)

  it("leaves a text with more open elements than the Lua stack holds to the Lua decoder", function()
    -- C reads elements onto the stack (LUAI_MAXSTACK slots, a million by default)
    local text = "[" .. string.rep("0,", 1100000) .. "0]"
    assert.is_nil(c_decode(text))
    local v = assert(json.decode(text))
    assert.equal(1100001, #v)
    assert.equal(getmetatable(json.array()), getmetatable(v))
  end)

  it("accepts every example manifest, with identical values, and agrees on the fuzz seeds", function()
    local n = 0
    for name in io.popen("ls " .. S.q(S.REPO) .. "/packs-examples/*/hcp.json"):lines() do
      accepts(assert(S.read(name)))
      n = n + 1
    end
    assert.is_true(n >= 8)
    -- seeds of the fuzz targets: some are not JSON on purpose
    for name in io.popen("ls " .. S.q(S.REPO) .. "/spec/fuzz/envelope/* " .. S.q(S.REPO) .. "/spec/fuzz/json/*"):lines() do
      agree(assert(S.read(name)))
    end
  end)

  it("raises only for a caller's mistake: wrong argument types", function()
    assert.has_error(function() core.json_decode(1, json.null, ARRAY_MT) end)
    assert.has_error(function() core.json_decode("1", json.null, nil) end)
    assert.has_error(function() core.json_decode("1") end)
  end)
end)

-- ---------------------------------------------------------------------
-- Differential: mutated real texts
-- ---------------------------------------------------------------------

-- Bytes and snippets that sit on the decoders' edges.
local SNIPPETS = { '"', "\\", "{", "}", "[", "]", ",", ":", " ", "\t", "\0", "\x1f", "\x7f", "\xc3", "\xa9",
  "\xed\xa0\x80", "\xc0\xaf", "\xf4\x90\x80\x80", "\xff", "\\u", "\\ud800", "\\udc00", "\\ud83d\\ude00",
  "\\u0000", "\\x", "0", "-0", "1e400", "1.", ".5", "01", "-", "e", "E+", "9223372036854775808",
  "-9223372036854775809", "1.0", "true", "null", "nul", "NaN", "Infinity", '"a":1,"a":2', "é", "😀" }

local function mutate(rng, text, pool)
  local len = #text
  local pos = rng(1, len + 1)
  local kind = rng(1, 9)
  if kind == 1 then -- flip a byte
    return text:sub(1, pos - 1) .. string.char(rng(0, 255)) .. text:sub(pos + 1)
  elseif kind == 2 then -- insert a snippet
    return text:sub(1, pos - 1) .. SNIPPETS[rng(1, #SNIPPETS)] .. text:sub(pos)
  elseif kind == 3 then -- delete a few bytes
    return text:sub(1, pos - 1) .. text:sub(pos + rng(1, 4))
  elseif kind == 4 then -- truncate
    return text:sub(1, pos - 1)
  elseif kind == 5 then -- duplicate the first key of an object after pos
    local s, e, key = text:find('{%s*("[^"]*")%s*:', pos)
    if not s then return text end
    return text:sub(1, e - #key - 1):gsub("%s*$", "") .. key .. ":0," .. text:sub(e - #key)
  elseif kind == 6 then -- nest deep, around the limit
    local n = rng(495, 505)
    return string.rep("[", n) .. text .. string.rep("]", n)
  elseif kind == 7 then -- splice a span of another text
    local other = pool[rng(1, #pool)]
    local a = rng(1, #other)
    return text:sub(1, pos - 1) .. other:sub(a, a + rng(0, 64)) .. text:sub(pos + rng(0, 64))
  elseif kind == 8 then -- replace a string's content with a snippet
    local s, e = text:find('"[^"\\]*"', pos)
    if not s then return text end
    return text:sub(1, s) .. SNIPPETS[rng(1, #SNIPPETS)] .. text:sub(e)
  else -- replace a number with an edge number
    local s, e = text:find("%-?%d[%d.eE+-]*", pos)
    if not s then return text end
    local nums = { "0", "-0", "1.0", "1e2", "-9223372036854775808", "9223372036854775808", "1e400", "01", "1.",
      "12345678901234567890", "-9223372036854775809", "4.9e-324", "1E-2" }
    return text:sub(1, s - 1) .. nums[rng(1, #nums)] .. text:sub(e + 1)
  end
end

describe("core.json_decode on mutated manifests and envelopes", function()
  it("accepts exactly what the Lua decoder accepts, with identical values (3000 texts, fixed seed)", function()
    local pool = read_seeds()
    assert.is_true(#pool >= 8)
    math.randomseed(20240611)
    local rng = math.random
    local accepted, refused = 0, 0
    for i = 1, 3000 do
      local text = pool[(i % #pool) + 1]
      for _ = 1, rng(1, 3) do text = mutate(rng, text, pool) end
      if agree(text) ~= nil then accepted = accepted + 1 else refused = refused + 1 end
    end
    -- both sides of the line were exercised
    assert.is_true(accepted >= 300, "accepted " .. accepted)
    assert.is_true(refused >= 300, "refused " .. refused)
  end)
end)
