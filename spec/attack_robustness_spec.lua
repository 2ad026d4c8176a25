-- Robustness (issue 11, category 7): a pack root reached through a symlink
-- loaded but every call failed; the files list of a workspace call was
-- silently incomplete past 100 000 files or depth 32. Now the root is
-- resolved once, at load, by descriptor, and an incomplete list says
-- files_truncated = true. Both drivers.
local hcp = require("hcp")
local S = require("support")

S.each_driver("robustness", function(driver, case)

  case("a pack root reached through a symlink works: resolved once at load", function()
    local d = S.tmpdir("linkroot-")
    local real = S.mkdir(d .. "/real/p")
    S.mkdir(real .. "/bin")
    S.write(real .. "/bin/x", "#!/bin/sh\npwd; cat data.txt\n", 493)
    S.write(real .. "/data.txt", "data\n")
    S.write(real .. "/hcp.json", '{"hcp":1,"name":"p","wrap":{"bin":"./bin/x"}}')
    S.mkdir(d .. "/packs")
    S.must_sh(string.format("ln -s %s %s", S.q(real), S.q(d .. "/packs/p")))
    for _, dirs in ipairs({ { d .. "/packs" }, { d .. "/packs/p" } }) do
      local rt = assert(hcp.create({ pack_dirs = dirs, driver = driver }))
      assert.same({}, rt:problems())
      assert.equal(real, rt:packs()[1].root)
      local res = rt:call({ pack = "p" })
      assert.is_true(res.ok, tostring(res.error) .. " " .. tostring(res.stderr))
      assert.equal(real .. "\ndata\n", res.stdout)
      rt:close()
    end
  end)

  case("a workspace call's files list says files_truncated when the jail is deeper than the scan goes", function()
    local packs = S.tmpdir("trunc-")
    S.pack(S.manifest("shws", "sh", { wrap = { args = { "-c", 'eval "$1"', "sh" }, workspace = { mode = "workspace" } } }),
      packs)
    local rt = assert(hcp.create({ pack_dirs = { packs }, driver = driver, out_dir = S.tmpdir("out-"),
      state_dir = S.tmpdir("state-") }))
    local res = rt:call({ pack = "shws", args = { "echo a > a.txt" } })
    assert.is_true(res.ok, res.error)
    assert.equal(1, #res.files)
    assert.is_nil(res.files_truncated)
    res = rt:call({ pack = "shws", args = { 'd=.; for i in $(seq 40); do d="$d/d"; done; mkdir -p "$d" && echo x > "$d/deep.txt"; '
      .. "echo b > b.txt" } })
    assert.is_true(res.ok, res.error)
    assert.is_true(res.files_truncated)
    assert.matches("/b%.txt$", res.files[1])
    assert.equal(1, #res.files)
    rt:close()
  end)
end)
