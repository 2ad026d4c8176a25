-- hcp.check: the shape checks manifest, envelope and option validation share.
local check = require("hcp.check")

describe("hcp.check", function()
  it("tells arrays from objects; {} is both", function()
    assert.is_true(check.is_array({ 1, 2 }))
    assert.is_false(check.is_array({ 1, nil, 3, x = 1 }))
    assert.is_false(check.is_array({ [2] = "x" }))
    assert.is_true(check.is_object({ a = 1 }))
    assert.is_false(check.is_object({ 1 }))
    assert.is_true(check.is_array({}) and check.is_object({}))
    assert.is_false(check.is_array("x") or check.is_object(7))
  end)

  it("checks string lists and maps, naming the element at fault", function()
    assert.same({ { "a" } }, { check.string_list({ "a" }, "args") })
    assert.same({ nil, "args[2] must be a string" }, { check.string_list({ "a", 1 }, "args") })
    assert.same({ nil, "args must be an array of strings" }, { check.string_list({ x = "a" }, "args") })
    assert.same({ nil, "env.A must be a string" }, { check.string_map({ A = true }, "env") })
  end)

  it("finds the first unknown key in sorted order", function()
    assert.equal("b", check.unknown_key({ c = 1, b = 1, a = 1 }, { a = true }))
    assert.is_nil(check.unknown_key({ a = 1 }, { a = true }))
  end)

  it("accepts positive integers only, with an optional maximum", function()
    assert.equal(3, check.positive_integer(3.0))
    for _, bad in ipairs({ 0, -1, 1.5, 0 / 0, math.huge, "3" }) do assert.is_nil(check.positive_integer(bad)) end
    assert.is_nil(check.positive_integer(11, 10))
  end)

  it("knows environment names and pack names", function()
    assert.is_true(check.is_env_name("_A1"))
    assert.is_false(check.is_env_name("1A") or check.is_env_name("A-B") or check.is_env_name(""))
    assert.is_true(check.is_pack_name("a.b-c_d"))
    assert.is_false(check.is_pack_name("-a") or check.is_pack_name("A") or check.is_pack_name(string.rep("a", 65)))
  end)
end)
