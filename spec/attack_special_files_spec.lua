-- Attack (issue 11, category 4): special files that hung or exhausted the
-- runtime. A FIFO at a write-back target blocked the call forever (holding
-- the workspace lock), a FIFO at ./bin/* hung every later spawn, a FIFO or
-- /dev/zero as a pack's hcp.json stopped every pack from loading, a sparse
-- 2 GiB output was written back dense, and nothing bounded the bytes a call
-- may write back. The cases that used to hang run through `hcp` under
-- timeout(1), so a regression fails instead of hanging the suite. Both
-- drivers.
local hcp = require("hcp")
local json = require("hcp.json")
local S = require("support")
local core = require("hcp.core")

local HCP = S.HCP

local SH = { "-c", 'eval "$1"', "sh" }

-- hcp with a deadline: stdout lines, stderr, exit status (124: it hung)
local function hcp_cmd(cwd, args, stdin, driver)
  local dir = S.tmpdir("sf-")
  local conf = S.write(dir .. "/conf.lua", string.format("return { driver = %q, state_dir = %q }", driver,
    S.tmpdir("state-")))
  local cmd = string.format("cd %s && env -u HCP_PACK_PATH -u HCP_CONFIG timeout 30 %s %s --config %s %s > %s 2> %s < %s",
    S.q(cwd), HCP, args[1], S.q(conf), table.concat(args, " ", 2), S.q(dir .. "/out"), S.q(dir .. "/err"),
    S.q(S.write(dir .. "/in", stdin or "")))
  local _, _, code = os.execute(cmd)
  local lines = {}
  for l in (S.read(dir .. "/out") or ""):gmatch("[^\n]+") do lines[#lines + 1] = l end
  return lines, S.read(dir .. "/err"), code
end

S.each_driver("attack: special files", function(driver, case)

  case("a FIFO the child leaves at a write-back target is refused at once, and the lock is released", function()
    local packs = S.tmpdir("fifo-wb-")
    S.pack(S.manifest("shws", "sh", { wrap = { args = SH, workspace = { mode = "workspace" } } }), packs)
    local out = S.tmpdir("out-")
    local reqs = json.encode({ pack = "shws", args = { 'mkfifo "$3"', "-o", "out.txt" } }) .. "\n"
      .. json.encode({ pack = "shws", args = { "echo after" } }) .. "\n"
    local lines, err, code = hcp_cmd(out, { "call", "--pack-dir", S.q(packs) }, reqs, driver)
    assert.are_not.equal(124, code, "hcp call hung on the FIFO: " .. tostring(err))
    assert.equal(0, code, err)
    local first, second = assert(json.decode(lines[1])), assert(json.decode(lines[2]))
    assert.equal("workspace: write-back of out.txt refused: it is a FIFO, not a regular file", first.error)
    assert.equal("after\n", second.stdout)
  end)

  case("a ./bin/x turned into a FIFO: the child cannot do it, and later spawns are refused without waiting", function()
    local packs = S.tmpdir("fifo-bin-")
    -- mode none: the cwd is the pack root, which the child sees read-only
    -- (issue 10), so the bin cannot replace itself
    local root = S.pack(S.manifest("selfswap", "./bin/x"), packs)
    S.mkdir(root .. "/bin")
    S.write(root .. "/bin/x", "#!/bin/sh\nrm -f bin/x && mkfifo -m 755 bin/x && echo swapped\n", 493)
    S.pack(S.manifest("fine", "echo", { wrap = { args = { "fine" } } }), packs)
    local rt = assert(hcp.create({ pack_dirs = { packs }, driver = driver, state_dir = S.tmpdir("state-") }))
    local first = rt:call({ pack = "selfswap" })
    assert.is_false(first.ok)
    assert.equal("", first.stdout)
    assert.equal("file", core.filetype(root .. "/bin/x"))
    -- whoever else swaps it after load (the bin was resolved then): the
    -- spawn opens it without blocking and refuses it
    S.must_sh("rm -f " .. S.q(root .. "/bin/x") .. " && mkfifo -m 755 " .. S.q(root .. "/bin/x"))
    local done = {}
    for i = 1, 2 do
      local h = rt:start({ pack = "selfswap" })
      local r = h:wait(20)
      assert.is_table(r, "the spawn waited on the FIFO")
      done[i] = r
    end
    for _, r in ipairs(done) do
      assert.is_false(r.ok)
      assert.matches("not a regular", r.error or r.stderr or "")
    end
    assert.equal("fine\n", rt:call({ pack = "fine" }).stdout)
    rt:close()
  end)

  case("a FIFO, /dev/zero or a 2 MiB file as hcp.json is a load error for that pack only", function()
    local packs = S.tmpdir("fifo-manifest-")
    S.mkdir(packs .. "/fifo")
    S.must_sh("mkfifo " .. S.q(packs .. "/fifo/hcp.json"))
    S.mkdir(packs .. "/zero")
    S.must_sh("ln -s /dev/zero " .. S.q(packs .. "/zero/hcp.json"))
    S.mkdir(packs .. "/huge")
    S.write(packs .. "/huge/hcp.json", '{"hcp":1,"name":"huge","wrap":{"bin":"true"},"description":"'
      .. string.rep("x", 2 * 1024 * 1024) .. '"}')
    S.pack(S.manifest("fine", "true"), packs)
    local lines, err, code = hcp_cmd(S.tmpdir("cwd-"), { "list", "--json", "--pack-dir", S.q(packs) }, "", driver)
    assert.are_not.equal(124, code, "hcp list hung on a special manifest")
    assert.equal(0, code, err)
    local listed = assert(json.decode(lines[1]))
    assert.equal(1, #listed)
    assert.equal("fine", listed[1].name)
    assert.matches("fifo/hcp%.json: cannot read: .*a FIFO, not a regular file", err)
    assert.matches("zero/hcp%.json: cannot read: .*a character device, not a regular file", err)
    assert.matches("huge/hcp%.json: cannot read: .*more than the limit of 1048576", err)
  end)

  case("a FIFO in out_dir given as an input is refused at once", function()
    local packs = S.tmpdir("fifo-in-")
    S.pack(S.manifest("shx", "sh", { wrap = { args = SH } }), packs)
    local out = S.tmpdir("out-")
    S.must_sh("mkfifo " .. S.q(out .. "/in.txt"))
    local lines, err, code = hcp_cmd(out, { "run", "--json", "--pack-dir", S.q(packs), "shx", "'cat \"$3\"'",
      "--file", "in.txt" }, "", driver)
    assert.are_not.equal(124, code, "staging hung on the FIFO")
    assert.equal(126, code, err)
    assert.equal("workspace: staging of in.txt refused: it is a FIFO, not a regular file", assert(json.decode(lines[1])).error)
  end)

  case("a sparse 2 GiB output is written back sparse", function()
    local packs = S.tmpdir("sparse-")
    S.pack(S.manifest("shws", "sh", { wrap = { args = SH, workspace = { mode = "workspace" } } }), packs)
    local out = S.tmpdir("out-")
    local rt = assert(hcp.create({ pack_dirs = { packs }, driver = driver, out_dir = out, state_dir = S.tmpdir("state-") }))
    local res = rt:call({ pack = "shws", args = { 'truncate -s 2G "$3" && printf end >> "$3"', "-o", "big.bin" } })
    rt:close()
    assert.is_true(res.ok, res.error)
    assert.equal(tostring(2 * 1024 * 1024 * 1024 + 3), S.must_sh("stat -c %s " .. S.q(out .. "/big.bin")):match("%d+"))
    assert.is_true(tonumber(S.must_sh("du -k " .. S.q(out .. "/big.bin")):match("^(%d+)")) < 1024, "written back dense")
  end)

  case("max_writeback bounds a call's write-back: the excess is refused, nothing is cut", function()
    local packs = S.tmpdir("bound-")
    S.pack(S.manifest("shx", "sh", { wrap = { args = SH, workspace = { mode = "ephemeral" } } }), packs)
    local out = S.tmpdir("out-")
    local rt = assert(hcp.create({ pack_dirs = { packs }, driver = driver, out_dir = out, max_writeback = 100000 }))
    local res = rt:call({ pack = "shx", args = { 'head -c 300000 /dev/zero | tr "\\0" x > "$3"', "-o", "big.txt" } })
    assert.is_false(res.ok)
    assert.equal("workspace: write-back of big.txt refused: it holds more data than the 100000 bytes left of "
      .. "this call's write-back limit (max_writeback)", res.error)
    assert.same({}, S.sh("ls -A " .. S.q(out)) == "" and {} or { "not empty" })
    -- the bound is per call: two outputs of 60 000 bytes, the second refused
    res = rt:call({ pack = "shx", args = { 'head -c 60000 /dev/zero > "$3"; head -c 60000 /dev/zero > "$5"',
      "-o", "a.bin", "-o", "b.bin" } })
    assert.is_false(res.ok)
    assert.matches("^workspace: write%-back of b%.bin refused: it holds more data than the 40000 bytes left", res.error)
    assert.same({ out .. "/a.bin" }, res.files)
    assert.is_nil(S.read(out .. "/b.bin"))
    rt:close()
  end)
end)

describe("hcp.create: max_writeback", function()
  it("is a non-negative integer, default 1 GiB", function()
    local workspace = require("hcp.workspace")
    assert.equal(1024 * 1024 * 1024, assert(workspace.host_config({}, nil, nil)).max_writeback)
    assert.equal(5, assert(workspace.host_config({ max_writeback = 5 }, nil, nil)).max_writeback)
    local bad, err = hcp.create({ max_writeback = -1 })
    assert.is_nil(bad)
    assert.equal('hcp.create: option "max_writeback" must be a non-negative integer of bytes', err)
  end)
end)
