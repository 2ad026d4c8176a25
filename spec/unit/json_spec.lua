-- hcp.json and hcp.envelope's wire form (issue 11, category 5), as pure
-- functions: strict decoding that names the field, exact integers, and an
-- encoder that only ever writes valid UTF-8 JSON, with <field>_b64 for the
-- bytes a result carries that are not UTF-8.
local json = require("hcp.json")
local envelope = require("hcp.envelope")

local function refused(text)
  local v, err = json.decode(text)
  assert.is_nil(v, text)
  return err
end

describe("json.decode is strict", function()
  it("refuses NaN, Infinity and -Infinity, naming the field", function()
    assert.equal('field "id": NaN is not a JSON number', refused('{"id":NaN}'))
    assert.equal('field "id": Infinity is not a JSON number', refused('{"id":Infinity}'))
    assert.equal('field "p.x": -Infinity is not a JSON number', refused('{"p":{"x":-Infinity}}'))
  end)

  it("refuses hex, octal-looking, signed and dotted non-JSON numbers", function()
    for _, n in ipairs({ "0x1F", "0X10", "01", "+1", "1.", ".5", "1e", "--1", "1.5.3", "0b1" }) do
      local err = refused('{"id":' .. n .. '}')
      assert.is_truthy(err:match('^field "id": .* is not a JSON number'), n .. ": " .. tostring(err))
    end
    assert.equal('field "id": 1e400 is out of range (at byte 7)', refused('{"id":1e400}'))
  end)

  it("refuses duplicate keys at any depth, naming the field", function()
    assert.equal('field "pack": duplicate key', refused('{"pack":"a","pack":"b"}'))
    assert.equal('field "params.sql": duplicate key', refused('{"params":{"sql":"x","sql":"y"}}'))
    assert.equal('field "args[2].a": duplicate key', refused('{"args":[{},{"a":1,"a":1}]}'))
  end)

  it("refuses invalid UTF-8, lone surrogates, raw control characters and trailing text", function()
    assert.matches("invalid UTF%-8", refused('{"a":"\xff"}'))
    assert.matches("invalid UTF%-8", refused('{"a":"\xc0\xaf"}')) -- overlong "/"
    assert.matches("invalid UTF%-8", refused('{"a":"\xed\xa0\x80"}')) -- a surrogate, encoded
    assert.matches("lone surrogate", refused('{"a":"\\ud800"}'))
    assert.matches("lone surrogate", refused('{"a":"\\udc00x"}'))
    assert.matches("raw control character", refused('{"a":"a\tb"}'))
    assert.matches("unexpected text after the value", refused('{"a":1} {}'))
    assert.matches("unexpected", refused("\xef\xbb\xbf{}")) -- a BOM is not JSON
  end)

  it("decodes integers as integers: a 15- and a 16-digit id round-trip exactly", function()
    for _, text in ipairs({ '{"id":123456789012345}', '{"id":9007199254740993}', '{"id":-9007199254740992}' }) do
      local v = assert(json.decode(text))
      assert.equal("integer", math.type(v.id))
      assert.equal(text, json.encode(v))
    end
    assert.equal("float", math.type(json.decode("[1.5]")[1]))
    assert.equal('{"id":"0012"}', json.encode(json.decode('{"id":"0012"}')))
  end)

  it("decodes escapes and surrogate pairs, null as json.null, [] as a marked array", function()
    local v = assert(json.decode('{"s":"a\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\\u0000","n":null,"a":[]}'))
    assert.equal('a"\\/\b\f\n\r\té😀\0', v.s)
    assert.equal(json.null, v.n)
    assert.equal("[]", json.encode(v.a))
  end)
end)

describe("json.encode", function()
  it("writes floats in the shortest form that reads back the same", function()
    assert.equal("[3.2,0.1,0.3333333333333333,1e+300,9007199254740992]",
      json.encode(json.array({ 3.2, 0.1, 1 / 3, 1e300, 2.0 ^ 53 })))
    assert.equal("[null,null]", json.encode(json.array({ 0 / 0, math.huge })))
  end)

  it("never writes invalid UTF-8: bad bytes become U+FFFD", function()
    local text = json.encode({ root = "/packs/\xff\xfe" })
    assert.equal('{"root":"/packs/\u{FFFD}\u{FFFD}"}', text)
    assert.is_true(json.is_utf8(text))
  end)
end)

describe("envelope.encode on the wire", function()
  local function wire(res) return assert(json.decode(envelope.encode(res))) end

  it("sends a stdout that is not UTF-8 as stdout_b64; the table keeps the bytes", function()
    local res = { hcp = 1, ok = true, exit = 0, stdout = "\xff\x00ok", stderr = "fine" }
    local w = wire(res)
    assert.is_nil(w.stdout)
    assert.equal(json.base64("\xff\x00ok"), w.stdout_b64)
    assert.equal("fine", w.stderr)
    assert.equal(json.null, w.signal)
    assert.equal("\xff\x00ok", res.stdout)
  end)

  it("a cap that cut a character leaves it out on the wire instead of going base64", function()
    local euro = "\xe2\x82\xac"
    local cut = string.rep(euro, 3) .. euro:sub(1, 2)
    local w = wire({ hcp = 1, ok = true, exit = 0, stdout = cut, stderr = "", truncated = true })
    assert.equal(string.rep(euro, 3), w.stdout)
    -- not truncated: the same bytes are the child's own, kept exactly
    w = wire({ hcp = 1, ok = true, exit = 0, stdout = cut, stderr = "", truncated = false })
    assert.equal(json.base64(cut), w.stdout_b64)
  end)

  it("keeps error readable (U+FFFD) and exact (error_b64)", function()
    local w = wire({ hcp = 1, ok = false, exit = 126, error = 'sandbox: host path not allowed: "/etc/\xff"' })
    assert.equal('sandbox: host path not allowed: "/etc/\u{FFFD}"', w.error)
    assert.equal(json.base64('sandbox: host path not allowed: "/etc/\xff"'), w.error_b64)
  end)

  it("splits files: UTF-8 names in files, the others in files_b64", function()
    local w = wire({ hcp = 1, ok = true, exit = 0, files = { "/j/a.txt", "/j/\xff.txt", "/j/é" } })
    assert.same({ "/j/a.txt", "/j/é" }, w.files)
    assert.same({ json.base64("/j/\xff.txt") }, w.files_b64)
  end)

  it("echoes ids exactly: integers up to 2^53 and beyond, strings as given", function()
    assert.equal(123456789012345, wire({ hcp = 1, id = 123456789012345, ok = false, exit = 126 }).id)
    assert.equal(math.tointeger(2 ^ 53) + 1, wire({ hcp = 1, id = math.tointeger(2 ^ 53) + 1, ok = false, exit = 126 }).id)
    assert.equal("1.2345678901234e+14", wire({ hcp = 1, id = "1.2345678901234e+14", ok = false, exit = 126 }).id)
  end)

  it("request lines: NaN, hex and duplicate keys are envelope errors naming the field", function()
    local _, err = envelope.decode('{"pack":"jq","id":NaN}')
    assert.equal('envelope: invalid JSON: field "id": NaN is not a JSON number', err)
    _, err = envelope.decode('{"pack":"jq","id":0x10}')
    assert.matches('^envelope: invalid JSON: field "id": 0x10 is not a JSON number', err)
    _, err = envelope.decode('{"pack":"jq","pack":"db"}')
    assert.equal('envelope: invalid JSON: field "pack": duplicate key', err)
  end)
end)
