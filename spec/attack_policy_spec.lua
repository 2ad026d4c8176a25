-- Attack (issue 11, category 3): running the whole CLI under the name of
-- one allowed op. With only db.tables allowed and raw db.exec denied,
-- {"op":"tables","args":["DROP TABLE precious"]} ran sqlite3 with the SQL
-- and dropped the table; the same skipped a confirm op. An op call with raw
-- args is now also <pack>.exec for policy (contract §4), unless the op
-- declares extra_args. Run against the db example as shipped, under both
-- drivers.
local hcp = require("hcp")
local S = require("support")

local EXAMPLES = S.REPO .. "/packs-examples"

S.each_driver("attack: policy bypass with raw args", function(driver, case)

  local function runtime(state, policy)
    return assert(hcp.create({ pack_dirs = { EXAMPLES }, driver = driver, state_dir = state,
      out_dir = S.tmpdir("out-"), policy = policy }))
  end

  case("the db example: op tables with args DROP TABLE is refused and the table stays", function()
    local state = S.tmpdir("state-")
    local setup = runtime(state)
    local res = setup:call({ pack = "db", op = "sql", params = { sql = "create table precious(x); insert into precious values(1)" } })
    assert.is_true(res.ok, tostring(res.error) .. tostring(res.stderr))
    setup:close()

    local rt = runtime(state, { allow = { "db.tables" }, deny = { "db.exec" } })
    res = rt:call({ pack = "db", op = "tables", args = { "DROP TABLE precious" } })
    assert.equal(126, res.exit)
    assert.equal('policy: "db.exec" not covered (op "tables" was given raw args, which run as db.exec)', res.error)
    assert.is_nil(res.stdout)
    -- without args the op itself is allowed, and the table is still there
    res = rt:call({ pack = "db", op = "tables" })
    assert.is_true(res.ok, res.error)
    assert.matches("precious", res.stdout)
    -- an empty args array is no raw args
    res = rt:call({ pack = "db", op = "tables", args = {} })
    assert.is_true(res.ok, res.error)
    rt:close()
  end)

  case("with db.exec allowed too, op + args runs (covered under both names)", function()
    local rt = runtime(S.tmpdir("state-"), { allow = { "db.tables", "db.exec" } })
    local res = rt:call({ pack = "db", op = "tables", args = { "select 40+2" } })
    assert.is_true(res.ok, res.error)
    assert.matches("42", res.stdout)
    rt:close()
  end)

  case("a confirm op is not skipped by calling another op with raw args", function()
    local packs = S.tmpdir("confirm-")
    S.pack(S.manifest("tool", "sh", { wrap = { args = { "-c", 'echo "ran $*"', "sh" } }, ops = {
      list = { args = { "list" } },
      wipe = { args = { "wipe" }, confirm = true },
    } }), packs)
    local asked = {}
    local rt = assert(hcp.create({ pack_dirs = { packs }, driver = driver, out_dir = S.tmpdir("out-"),
      policy = { allow = { "tool.*" }, confirm = function(call) asked[#asked + 1] = call.name return false end } }))
    local res = rt:call({ pack = "tool", op = "list", args = { "wipe" } })
    assert.equal(126, res.exit)
    assert.equal('policy: "tool.list" not confirmed', res.error)
    assert.same({ "tool.list" }, asked)
    -- the op alone needs no confirmation
    res = rt:call({ pack = "tool", op = "list" })
    assert.equal("ran list\n", res.stdout)
    rt:close()
  end)

  case("an op that declares extra_args takes trailing args as its own", function()
    local packs = S.tmpdir("extra-")
    S.pack(S.manifest("grepish", "sh", { wrap = { args = { "-c", 'echo "$*"', "sh" } }, ops = {
      search = { args = { "search" }, extra_args = true },
    } }), packs)
    local rt = assert(hcp.create({ pack_dirs = { packs }, driver = driver, out_dir = S.tmpdir("out-"),
      policy = { allow = { "grepish.search" } } }))
    local res = rt:call({ pack = "grepish", op = "search", args = { "-i", "needle" } })
    assert.is_true(res.ok, res.error)
    assert.equal("search -i needle\n", res.stdout)
    -- and raw args alone are still grepish.exec
    res = rt:call({ pack = "grepish", args = { "anything" } })
    assert.equal('policy: "grepish.exec" not covered', res.error)
    rt:close()
  end)
end)

describe("manifest: extra_args", function()
  it("must be a boolean", function()
    local root = S.pack(S.manifest("ea", "true", { ops = { x = { extra_args = "yes" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.equal("ops.x.extra_args", rt:problems()[1].field)
  end)
end)
