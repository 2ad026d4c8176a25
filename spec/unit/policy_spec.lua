-- policy.check_call (issue 11, category 3; contract §4), as a pure function.
local policy = require("hcp.policy")

describe("policy.check_call", function()
  local function p(cfg) return assert(policy.new(cfg)) end
  local function call(c) return { pack = c.pack, op = c.op or "exec" } end
  local function check(pol, c) return policy.check_call(pol, c, call(c)) end
  local base = { pack = "db", op = "tables", has_args = false, needs_confirm_op = false, needs_confirm_exec = false }
  local function with(t)
    local c = {}
    for k, v in pairs(base) do c[k] = v end
    for k, v in pairs(t) do c[k] = v end
    return c
  end

  it("an op without raw args needs only pack.op", function()
    assert.is_true(check(p({ allow = { "db.tables" } }), base))
  end)

  it("an op with raw args needs pack.exec too", function()
    local ok, err = check(p({ allow = { "db.tables" } }), with({ has_args = true }))
    assert.is_nil(ok)
    assert.equal('policy: "db.exec" not covered (op "tables" was given raw args, which run as db.exec)', err)
    assert.is_true(check(p({ allow = { "db.tables", "db.exec" } }), with({ has_args = true })))
    assert.is_true(check(p({ allow = { "db.*" } }), with({ has_args = true })))
  end)

  it("deny of pack.exec wins over allow db.*", function()
    local ok = check(p({ allow = { "db.*" }, deny = { "db.exec" } }), with({ has_args = true }))
    assert.is_nil(ok)
  end)

  it("extra_args makes trailing args the op's own", function()
    assert.is_true(check(p({ allow = { "db.tables" }, deny = { "db.exec" } }), with({ has_args = true, op_extra_args = true })))
  end)

  it("confirmation when either name needs it", function()
    local pol = p({ allow = { "*" } })
    assert.is_true(check(pol, with({ needs_confirm_exec = true })))
    local ok, err = check(pol, with({ has_args = true, needs_confirm_exec = true }))
    assert.is_nil(ok)
    assert.equal('policy: "db.tables" not confirmed', err)
    ok = check(pol, with({ needs_confirm_op = true }))
    assert.is_nil(ok)
    local yes = p({ allow = { "*" }, confirm = function() return true end })
    assert.is_true(check(yes, with({ has_args = true, needs_confirm_exec = true })))
  end)

  it("a raw call is pack.exec and needs the exec confirmation", function()
    local ok, err = check(p({ allow = { "*" } }), with({ op = false, has_args = true, needs_confirm_exec = true }))
    assert.is_nil(ok)
    assert.equal('policy: "db.exec" not confirmed', err)
  end)
end)
