-- sandbox.resolve: §10.2.1 in one function, for pack bins at load time,
-- rt:exec and hcp wrap.
local sandbox = require("hcp.sandbox")
local S = require("support")

describe("sandbox.resolve", function()
  local lookup = "/usr/bin:/bin"

  it("resolves a bare name in the lookup path only", function()
    local r = assert(sandbox.resolve("sh", { lookup = lookup }))
    assert.matches("^/.*/sh$", r.path)
    assert.equal("sh", r.argv0)
    assert.is_nil(r.beneath)
    local none, exit, err = sandbox.resolve("sh", { lookup = S.tmpdir("empty-") })
    assert.is_nil(none)
    assert.equal(127, exit)
    assert.matches('^spawn: bin "sh": ', err)
  end)

  it("never looks up a bare name no allow-list entry could match", function()
    -- a name that exists in the lookup path, refused before the lookup
    local r, exit, err = sandbox.resolve("sh", { lookup = lookup, allowlist = { "jq", "/usr/bin/bc" } })
    assert.is_nil(r)
    assert.equal(127, exit)
    assert.equal('sandbox: bin "sh" not allowlisted', err)
  end)

  it("matches a bare entry by the path's last component, an absolute one exactly", function()
    assert.truthy(sandbox.resolve("sh", { lookup = lookup, allowlist = { "sh" } }))
    local sh = assert(sandbox.resolve("sh", { lookup = lookup })).path
    assert.truthy(sandbox.resolve(sh, { lookup = lookup, allowlist = { sh } }))
    assert.same({ nil, 127, string.format("sandbox: bin %q not allowlisted", sh) },
      { sandbox.resolve(sh, { lookup = lookup, allowlist = { "/opt/" .. "sh" } }) })
  end)

  it("opens ./rel beneath the root and refuses an escape, also through a symlink", function()
    local root = S.tmpdir("res-root-")
    S.mkdir(root .. "/bin")
    S.write(root .. "/bin/tool", "#!/bin/sh\n", 493)
    assert(os.execute("ln -s /bin/sh " .. S.q(root .. "/bin/out")))
    local r = assert(sandbox.resolve("./bin/tool", { lookup = lookup, root = root }))
    assert.equal(root .. "/bin/tool", r.path)
    assert.equal(root, r.beneath)
    assert.equal(r.path, r.argv0)
    local bad, exit = sandbox.resolve("./bin/out", { lookup = lookup, root = root })
    assert.is_nil(bad)
    assert.equal(127, exit)
    assert.same({ nil, 127, 'sandbox: bin "./bin/tool" not allowlisted' },
      { sandbox.resolve("./bin/tool", { lookup = lookup }) })
  end)

  it("refuses names that are neither bare nor absolute nor ./rel", function()
    for _, bin in ipairs({ "a/b", ".", "..", "../x" }) do
      assert.same({ nil, 127, string.format("sandbox: bin %q not allowlisted", bin) },
        { sandbox.resolve(bin, { lookup = lookup }) })
    end
    assert.equal(126, select(2, sandbox.resolve("", { lookup = lookup })))
    assert.equal(126, select(2, sandbox.resolve("a\0b", { lookup = lookup })))
    assert.equal(126, select(2, sandbox.resolve(nil, { lookup = lookup })))
  end)
end)
