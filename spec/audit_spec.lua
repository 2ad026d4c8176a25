-- The audit log (hcp.create{ audit = }, --audit): one JSON line per call,
-- refusals included, holding what an operator accounts for and nothing a
-- call carried; a log that cannot be written fails closed.
local hcp = require("hcp")
local json = require("hcp.json")
local S = require("support")

local function lines(path)
  local out = {}
  for l in (S.read(path) or ""):gmatch("[^\n]+") do out[#out + 1] = assert(json.decode(l)) end
  return out
end

describe("audit log", function()
  local root = S.pack(S.manifest("echo", "sh", { wrap = { args = { "-c", 'echo "$1"; cat', "sh" } },
    ops = { say = { args = { "{word}" }, params = { word = "string" } } } }))

  it("appends one line per call: id, principal, call, decision, exit, usage, layers — no arguments or output", function()
    local log = S.tmpdir("audit-") .. "/audit.jsonl"
    local rt = assert(hcp.create({ pack_dirs = { root }, audit = log, policy = { allow = { "echo.say" } } }))
    assert.is_true(rt:call({ id = "c-1", pack = "echo", op = "say", params = { word = "s3cr3t-word" },
      stdin = "s3cr3t-stdin", principal = "alice" }).ok)
    assert.is_false(rt:call({ id = 2, pack = "echo", args = { "s3cr3t-arg" } }).ok)
    rt:close()
    local text = S.read(log)
    for _, secret in ipairs({ "s3cr3t-word", "s3cr3t-stdin", "s3cr3t-arg" }) do
      assert.is_nil(text:find(secret, 1, true), secret .. " reached the audit log")
    end
    local l = lines(log)
    assert.equal(2, #l)
    assert.same({ "c-1", "alice", "echo.say", "allowed", true, 0 },
      { l[1].id, l[1].principal, l[1].call, l[1].decision, l[1].ok, l[1].exit })
    assert.is_number(l[1].usage.wall_ms)
    assert.is_table(l[1].isolation)
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$", l[1].time)
    assert.same({ 2, "echo.exec", 'policy: "echo.exec" not covered', false, 126 },
      { l[2].id, l[2].call, l[2].decision, l[2].ok, l[2].exit })
  end)

  it("refuses a relative path or one it cannot open at create; an output can never replace it", function()
    assert.same({ nil, 'hcp.create: option "audit" must be an absolute path' }, { hcp.create({ audit = "a.jsonl" }) })
    assert.matches('^hcp.create: option "audit": ', select(2, hcp.create({ audit = "/nonexistent-hcp-dir/a.jsonl" })))
    local out = S.tmpdir("audit-out-")
    local w = S.pack(S.manifest("w", "sh", { wrap = { args = { "-c", 'echo x > "$1"', "sh", "-o" } } }))
    local rt = assert(hcp.create({ pack_dirs = { w }, audit = out .. "/audit.jsonl", out_dir = out, replace = true }))
    local res = rt:call({ pack = "w", args = { "audit.jsonl" } })
    assert.is_false(res.ok)
    assert.matches("protects", res.error)
  end)

  it("fails closed: once a line cannot be written, every later call is refused", function()
    local rt = assert(hcp.create({ pack_dirs = { root }, audit = "/dev/full" }))
    rt:call({ pack = "echo", op = "say", params = { word = "x" } })
    local res = rt:call({ pack = "echo", op = "say", params = { word = "y" } })
    assert.equal(126, res.exit)
    assert.matches("^audit: cannot write /dev/full: ", res.error)
    assert.is_nil(res.stdout)
    assert.matches("^audit: ", rt:exec({ bin = "sh", args = { "-c", "true" } }).error)
  end)

  it("hcp call --audit FILE writes the log of the commands", function()
    local log = S.tmpdir("audit-cli-") .. "/a.jsonl"
    local cmd = string.format("printf '%%s\\n' '{\"pack\":\"echo\",\"op\":\"say\",\"params\":{\"word\":\"hi\"}}' | "
      .. "%s call --pack-dir %s --audit %s", S.HCP, S.q(root), S.q(log))
    local out, code = S.sh(cmd)
    assert.equal(0, code, out)
    local l = lines(log)
    assert.equal(1, #l)
    assert.equal("echo.say", l[1].call)
  end)
end)
