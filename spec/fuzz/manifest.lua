-- Fuzz target: manifest loading, json.decode of hcp.json then
-- manifest.validate. Neither raises; validate returns a pack and no
-- problems, or no pack and at least one problem naming this file, and it
-- is a pure function (the same answer twice).
local json = require("hcp.json")
local manifest = require("hcp.manifest")
local F = require("fuzzlib")

local FILE, ROOT = "/fuzz/pack/hcp.json", "/fuzz/pack"

return function(data)
  local doc, err = F.must_not_raise("json.decode", json.decode, data)
  if doc == nil then
    assert(type(err) == "string", "json.decode: nil without a message")
    return
  end
  local pack, problems = F.must_not_raise("manifest.validate", manifest.validate, doc, FILE, ROOT)
  assert(type(problems) == "table", "manifest.validate returned no problem list")
  if pack then
    assert(#problems == 0, "a pack and problems at once")
    assert(type(pack.name) == "string" and pack.name ~= "", "a pack without a name")
    assert(type(pack.wrap) == "table" and type(pack.wrap.bin) == "string", "a pack without wrap.bin")
    assert(math.type(pack.wrap.timeout_ms) == "integer" and pack.wrap.timeout_ms > 0, "a bad timeout_ms")
    for i, a in ipairs(pack.wrap.args) do assert(type(a) == "string", "wrap.args[" .. i .. "] is not a string") end
  else
    assert(#problems > 0, "no pack and no problem")
    for _, p in ipairs(problems) do
      assert(p.file == FILE and type(p.field) == "string" and type(p.message) == "string", "a malformed problem")
      assert(type(manifest.format_problem(p)) == "string")
    end
  end
  local pack2, problems2 = manifest.validate(doc, FILE, ROOT)
  assert((pack2 == nil) == (pack == nil) and #problems2 == #problems, "validate is not a pure function")
end
