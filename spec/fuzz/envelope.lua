-- Fuzz target: request envelopes off the wire (hcp.envelope decode and
-- validate). Neither raises; a refusal is "envelope: …"; a validated
-- request validates again to itself, survives JSON and back, and the
-- result envelopes built for it encode to JSON that decodes.
local envelope = require("hcp.envelope")
local json = require("hcp.json")
local F = require("fuzzlib")

local function check_request(req)
  assert(type(req.pack) == "string" and req.pack ~= "", "validate let an empty pack through")
  assert(req.mode == "live" or req.mode == "mock", "validate let a bad mode through")
  assert(type(req.principal) == "string" and req.principal:match(envelope.PRINCIPAL_PAT)
    and req.principal ~= "." and req.principal ~= "..", "validate let a bad principal through: " .. F.show(req.principal))
  for i, a in ipairs(req.args or {}) do assert(type(a) == "string", "args[" .. i .. "] is not a string") end
  assert(req.stdin == nil or type(req.stdin) == "string", "stdin is not a string")
end

return function(data)
  local v, err = F.must_not_raise("envelope.decode", envelope.decode, data)
  if v == nil then
    assert(type(err) == "string" and err:match("^envelope: invalid JSON"), "envelope.decode: bad error " .. F.show(err))
    return
  end
  local req, verr = F.must_not_raise("envelope.validate", envelope.validate, v)
  if not req then
    assert(type(verr) == "string" and verr:match("^envelope: "), "envelope.validate: bad error " .. F.show(verr))
    local res = envelope.refusal(type(v) == "table" and v or {}, 126, verr, "sandbox")
    assert(json.decode(envelope.encode(res)), "a refusal does not encode to JSON")
    return
  end
  check_request(req)
  local again = F.must_not_raise("envelope.validate", envelope.validate, req)
  assert(again and F.same(again, req), "validating a validated request changed it: " .. F.show(data))
  local wire = json.encode(req)
  if wire then   -- (nil only past the encoder's nesting limit, in params)
    local back = F.must_not_raise("envelope.validate", envelope.validate, assert(envelope.decode(wire)))
    assert(back and (F.same(back, req) or F.has_infinity(req)), "a request changed through JSON: " .. F.show(wire))
  end
  for _, res in ipairs({ envelope.refusal(req, 126, "fuzz", "sandbox"),
    envelope.from_run(req, { exit = 0, stdout = data, stderr = "", ms = 1 }, "sandbox", {}, {}, 1000, tostring) }) do
    local text = envelope.encode(res)
    local r = json.decode(text)
    assert(type(r) == "table" and r.hcp == 1, "a result does not encode to JSON: " .. F.show(text))
    -- (an id beyond the double range decodes to an infinity, written as null)
    assert(F.same(r.id, req.id == nil and json.null or req.id) or F.has_infinity(req.id),
      "the result lost the request's id")
  end
end
