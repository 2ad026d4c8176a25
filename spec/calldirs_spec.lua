-- spec/calldirs_spec.lua — a call's own directories made ahead of it and
-- removed behind it by the core's worker thread (src/calldirs.c):
-- core.mkdtemp_ahead, core.rmtree_later, core.calldirs_settle, and what the
-- runtime does with them (lua/hcp/driver/local.lua, lua/hcp/private.lua).
-- The attacks: a spare made ahead that something changed before a call got
-- it (a file planted by an earlier call's child, a link, another mode), a
-- link left in a tree removed behind, two calls given one directory.
local core = require("hcp.core")
local hcp = require("hcp")
local S = require("support")

local q = S.q
-- what a call's jail holds, but the TMPDIR the runtime makes there
local LS = "ls -A | grep -vx .hcp-tmp; true"

local function entries(dir)
  local out = {}
  for name in S.must_sh("ls -A " .. q(dir)):gmatch("[^\n]+") do out[#out + 1] = name end
  table.sort(out)
  return out
end

local function mode_of(path)
  return S.must_sh("stat -c %a " .. q(path)):match("%d+")
end

-- The spares the worker made in base: its entries but the ones named.
local function spares(base, known)
  local out = {}
  for _, e in ipairs(entries(base)) do
    if not known[base .. "/" .. e] then out[#out + 1] = base .. "/" .. e end
  end
  return out
end

-- Asks twice (spares are made from the second ask on) and waits for them.
local function with_spares(base, prefix)
  local known = {}
  for _ = 1, 2 do known[assert(core.mkdtemp_ahead(base, prefix))] = true end
  local list = assert(S.wait_until(function()
    local s = spares(base, known)
    return #s >= 2 and s
  end, 30, "two directories made ahead"))
  return list, known
end

describe("core.mkdtemp_ahead", function()
  it("makes a new 0700 directory each time, never the same twice, empty", function()
    local base = S.tmpdir("ahead-")
    local seen = {}
    for i = 1, 30 do
      local d = assert(core.mkdtemp_ahead(base, "jail-"))
      assert.is_nil(seen[d], "handed out twice: " .. d)
      seen[d] = true
      assert.matches("^" .. base:gsub("%p", "%%%0") .. "/jail%-", d)
      assert.equal("700", mode_of(d))
      assert.same({}, entries(d))
      S.write(d .. "/used", "x")
      if i % 2 == 0 then assert(core.rmtree_later(d)) end
    end
    core.calldirs_settle(base)
  end)

  it("keeps arguments as core.mkdtemp does: absolute parent, no '/' in the prefix", function()
    assert.has_error(function() core.mkdtemp_ahead("relative", "jail-") end)
    assert.has_error(function() core.mkdtemp_ahead("/tmp", "a/b") end)
    local a, msg, errno = core.mkdtemp_ahead("/nonexistent-hcp-dir", "jail-")
    assert.is_nil(a)
    assert.matches("^mkdtemp /nonexistent%-hcp%-dir", msg)
    assert.equal(2, errno)
  end)

  it("makes the next ones ahead from the second ask on, and hands them out", function()
    local base = S.tmpdir("ahead-")
    local list, known = with_spares(base, "jail-")
    local d = assert(core.mkdtemp_ahead(base, "jail-"))
    assert.is_nil(known[d])
    assert.equal(list[1] == d or list[2] == d, true, "a spare was handed out: " .. d)
    core.calldirs_settle(base)
  end)

  -- what an earlier call's child (under "minimal", the runtime's own uid)
  -- could do to the next call's jail while it waits
  for _, attack in ipairs({
    { "a file planted in it", function(d) S.write(d .. "/planted", "x") end },
    { "a directory planted in it", function(d) S.mkdir(d .. "/sub") end },
    { "its mode opened", function(d) S.must_sh("chmod 0755 " .. q(d)) end },
    { "it swapped for a link to a directory elsewhere", function(d, outside)
      S.must_sh("rmdir " .. q(d) .. " && ln -s " .. q(outside) .. " " .. q(d))
    end },
  }) do
    it("never hands out a directory made ahead with " .. attack[1] .. ", and removes it as it is", function()
      local base, outside = S.tmpdir("ahead-"), S.tmpdir("outside-")
      S.write(outside .. "/keep", "host file")
      local list, known = with_spares(base, "call-")
      for _, d in ipairs(list) do attack[2](d, outside) end
      local d = assert(core.mkdtemp_ahead(base, "call-"))
      assert.is_nil(known[d])
      for _, s in ipairs(list) do assert.are_not.equal(s, d) end
      assert.equal("700", mode_of(d))
      assert.same({}, entries(d))
      core.calldirs_settle(base)
      for _, s in ipairs(list) do assert.is_nil(core.kind(s), s .. " left") end
      assert.equal("host file", S.read(outside .. "/keep"))
    end)
  end

  it("a process that asks once starts no thread; asking again starts the worker", function()
    local code = [[
      local c = require("hcp.core")
      local function tasks()
        local p = io.popen("ls /proc/" .. c.getpid() .. "/task")
        local n = 0
        for _ in p:lines() do n = n + 1 end
        p:close()
        return n
      end
      local base = c.mkdtemp("/tmp", "hcp-ahead-")
      local d = c.mkdtemp_ahead(base, "jail-")
      c.rmtree_later(d)
      print(tasks(), (c.kind(d)))        -- one task; removed in the caller
      d = c.mkdtemp_ahead(base, "jail-")
      print(tasks())                     -- the worker
      c.rmtree_later(d)
      c.calldirs_settle(base)
      print((c.kind(d)), next((c.scan(base))) == nil)
      c.rmtree(base)
      os.exit(0, true)   -- the state closed: the worker joined before the module goes
    ]]
    local out, status = S.sh(string.format("LUA_CPATH=%s %s -e %s 2>&1; echo \"exit $?\"", q(S.CPATH), S.LUA, q(code)))
    assert.equal(0, status)
    assert.equal("1\tnil\n2\nnil\ttrue\nexit 0\n", out)
  end)
end)

describe("core.rmtree_later", function()
  it("removes a tree behind the caller, never through a link it holds", function()
    local base, outside = S.tmpdir("behind-"), S.tmpdir("outside-")
    S.write(outside .. "/keep", "host file")
    with_spares(base, "jail-")   -- the worker runs: the removal is handed over
    local d = assert(core.mkdtemp_ahead(base, "jail-"))
    S.must_sh(table.concat({ "mkdir -p " .. q(d .. "/a/b/c"), "echo x > " .. q(d .. "/a/b/c/f"),
      "ln -s " .. q(outside) .. " " .. q(d .. "/a/link"), "ln -s " .. q(outside .. "/keep") .. " " .. q(d .. "/flink"),
      "mkfifo " .. q(d .. "/fifo") }, " && "))
    assert.is_true(core.rmtree_later(d))
    assert(S.wait_until(function() return core.kind(d) == nil end, 30, d .. " removed"))
    assert.equal("host file", S.read(outside .. "/keep"))
    assert.same({ "keep" }, entries(outside))
    core.calldirs_settle(base)
  end)

  it("raises for a relative path or /, as core.rmtree", function()
    assert.has_error(function() core.rmtree_later("rel") end)
    assert.has_error(function() core.rmtree_later("/") end)
  end)

  it("calldirs_settle returns once every handed-over tree and every spare of its base are gone", function()
    local base = S.tmpdir("settle-")
    local _, known = with_spares(base, "jail-")
    local handed = {}
    for i = 1, 20 do
      local d = assert(core.mkdtemp_ahead(base, "jail-"))
      S.mkdir(d .. "/x/y")
      S.write(d .. "/x/y/z", tostring(i))
      handed[#handed + 1] = d
      assert(core.rmtree_later(d))
    end
    for d in pairs(known) do assert(core.rmtree(d)) end
    assert.is_true(core.calldirs_settle(base))
    for _, d in ipairs(handed) do assert.is_nil(core.kind(d), d .. " left") end
    assert.same({}, entries(base))
  end)
end)

describe("the runtime's call directories (§10.6: ephemeral is a fresh jail per exec)", function()
  local function sh_pack(mode)
    local root = S.pack(S.manifest("sh", "/bin/sh", { wrap = { workspace = { mode = mode } } }))
    return assert(hcp.create({ pack_dirs = { root }, allow_bins = { "/bin/sh" } }))
  end

  it("gives every one of 8 calls in flight a jail of its own, empty", function()
    local rt = sh_pack("ephemeral")
    for _ = 1, 2 do
      local list = {}
      for i = 1, 8 do list[i] = { pack = "sh", args = { "-c", "pwd; " .. LS .. "; echo mine > f" } } end
      local seen = {}
      for _, res in ipairs(rt:call_all(list)) do
        assert.is_true(res.ok, res.error)
        local cwd, rest = res.stdout:match("^([^\n]+)\n(.*)$")
        assert.equal("", rest, "the jail was not empty")
        assert.is_nil(seen[cwd], "two calls in one jail: " .. cwd)
        seen[cwd] = true
      end
    end
    rt:close()
  end)

  it("removes each call's jail behind it, and everything at close", function()
    local rt = sh_pack("ephemeral")
    local jails = {}
    for i = 1, 6 do
      local res = rt:call({ pack = "sh", args = { "-c", "pwd; mkdir -p d/e; echo " .. i .. " > d/e/f" } })
      assert.is_true(res.ok, res.error)
      jails[i] = res.stdout:match("^([^\n]+)")
    end
    local private = rt._host.private.dir
    assert.is_string(private)
    for _, j in ipairs(jails) do
      assert(S.wait_until(function() return core.kind(j) == nil end, 30, j .. " removed"))
    end
    rt:close()
    assert.is_nil(core.kind(private))
  end)

  it("a call's child that plants files in the directories beside its jail does not reach the next call's", function()
    -- under "auto" the child cannot reach them at all; under "minimal" it
    -- runs as the runtime's uid and can: the spare it planted in is not
    -- handed out (the next call's jail is empty either way)
    for _, iso in ipairs({ "auto", "minimal" }) do
      local root = S.pack(S.manifest("sh", "/bin/sh", { wrap = { workspace = { mode = "ephemeral" } } }))
      local rt = assert(hcp.create({ pack_dirs = { root }, allow_bins = { "/bin/sh" }, isolation = iso }))
      for _ = 1, 3 do assert.is_true(rt:call({ pack = "sh", args = { "-c", "true" } }).ok) end
      local private = rt._host.private.dir
      assert(S.wait_until(function() return #entries(private) >= 2 end, 30, "directories made ahead"))
      local plant = string.format("for d in %s/*; do echo planted > \"$d/planted\" 2>/dev/null; done; true", private)
      assert.is_true(rt:call({ pack = "sh", args = { "-c", plant } }).ok)
      for _ = 1, 3 do
        local res = rt:call({ pack = "sh", args = { "-c", LS } })
        assert.is_true(res.ok, res.error)
        assert.equal("", res.stdout, iso .. ": the jail held " .. res.stdout)
      end
      rt:close()
    end
  end)
end)
