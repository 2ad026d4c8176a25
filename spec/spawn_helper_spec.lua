-- spec/spawn_helper_spec.lua — how the C core starts a child (issue 12):
-- without isolation layers a clone(CLONE_VM|CLONE_VFORK) child execs the
-- program; with layers such a child execs the spawn helper
-- (build/libexec/hcp-spawn), which runs the child sequence in a process of
-- its own, so no fork copies the runtime. Without the helper, the runtime
-- forks as before; a helper that is not trustworthy is never used, and one
-- that cannot run fails the spawn closed.
local core = require("hcp.core")
local S = require("spec.support")

local HELPER = core.spawn_helper()
local ISOLATED = core.geteuid() == 0 and core.probe().pidns.available

local function status(pid)
  local s = S.read("/proc/" .. pid .. "/status") or ""
  return { vmsize = tonumber(s:match("VmSize:%s*(%d+)")), name = s:match("Name:%s*(%S+)") }
end

-- A second Lua process with the C module from build/ and `env` set.
local function lua_with(env, code)
  local script = S.write(S.tmpdir("helper-") .. "/run.lua", code)
  return S.sh(string.format("env %s LUA_CPATH=%s %s %s 2>&1", env, S.q(S.CPATH_ABS .. ";;"),
    S.q(S.LUA), S.q(script)))
end

-- An isolated spawn of `sh -c 'echo ok'` in that process: prints the result
-- or the refusal, and which launcher it used.
local ISOLATED_SPAWN = [[
  local core = require("hcp.core")
  local p, err = core.spawn({ path = "/bin/sh", argv = { "sh", "-c", "echo ok" }, env = {}, cwd = "/",
    isolation = { pidns = true, ipcns = true } })
  io.write("helper=", tostring(core.spawn_helper()), "\n")
  if not p then io.write("refused: ", err, "\n") return end
  local r = p:wait()
  io.write("exit=", r.exit, " out=", r.stdout)
]]

describe("the spawn helper", function()
  it("is built beside the C module and found by it", function()
    if not HELPER then pending("no spawn helper on this architecture (x86_64 only): isolated children fork") return end
    assert.matches("/hcp%-spawn$", HELPER)
    assert.equals("file", core.filetype(HELPER))
  end)

  it("is what an isolated child runs as until it execs the program: a process of a few pages, not a copy of the runtime", function()
    if not HELPER then pending("no spawn helper on this architecture") return end
    if not ISOLATED then pending("needs root and a pid namespace") return end
    -- with pidns the proc's pid is the host-side intermediate, alive for the call
    local p = assert(core.spawn({ path = "/bin/sleep", argv = { "sleep", "5" }, env = {}, cwd = "/",
      isolation = { pidns = true } }))
    local exe = core.realpath("/proc/" .. p:pid() .. "/exe")
    local st = status(p:pid())
    local me = status(core.getpid())
    p:kill("KILL")
    p:wait()
    assert.equals(core.realpath(HELPER), exe)
    -- the helper maps itself and the plan; the runtime maps its whole heap
    assert.is_true(st.vmsize < 4096, "helper VmSize " .. tostring(st.vmsize) .. " kB")
    assert.is_true(st.vmsize < me.vmsize / 4, "helper " .. st.vmsize .. " kB, runtime " .. me.vmsize .. " kB")
  end)

  it("a child without isolation layers is the program itself (no intermediate)", function()
    local p = assert(core.spawn({ path = "/bin/sleep", argv = { "sleep", "5" }, env = {}, cwd = "/" }))
    local exe = core.realpath("/proc/" .. p:pid() .. "/exe")
    p:kill("KILL")
    p:wait()
    assert.equals(core.realpath("/bin/sleep"), exe)
  end)

  it("without it (HCP_SPAWN_HELPER=none) isolated children fork the runtime, and still run", function()
    if not ISOLATED then pending("needs root and a pid namespace") return end
    local out = lua_with("HCP_SPAWN_HELPER=none", ISOLATED_SPAWN)
    assert.matches("helper=nil", out, 1, true)
    assert.matches("exit=0 out=ok", out, 1, true)
  end)

  it("one that others may write is never used: the runtime forks instead", function()
    if not HELPER then pending("no spawn helper on this architecture") return end
    if not ISOLATED then pending("needs root and a pid namespace") return end
    local dir = S.tmpdir("badhelper-")
    local copy = dir .. "/hcp-spawn"
    S.write(copy, S.read(HELPER), 511) -- 0777
    local out = lua_with("HCP_SPAWN_HELPER=" .. S.q(copy), ISOLATED_SPAWN)
    assert.matches("helper=nil", out, 1, true)
    assert.matches("exit=0 out=ok", out, 1, true)
  end)

  it("one that cannot run fails the spawn closed: nothing runs", function()
    if not ISOLATED then pending("needs root and a pid namespace") return end
    local dir = S.tmpdir("nohelper-")
    local bogus = S.write(dir .. "/hcp-spawn", "not a program\n", 493) -- 0755, no #!
    local out = lua_with("HCP_SPAWN_HELPER=" .. S.q(bogus), ISOLATED_SPAWN)
    assert.matches("helper=" .. bogus, out, 1, true)
    assert.matches("refused: spawn: spawn helper: Exec format error", out, 1, true)
    assert.not_matches("out=ok", out, 1, true)
  end)

  it("refuses to run without a launch plan", function()
    if not HELPER then pending("no spawn helper on this architecture") return end
    local dir = S.tmpdir("plan-")
    local junk = S.write(dir .. "/junk", string.rep("x", 4096))
    for _, cmd in ipairs({ S.q(HELPER), S.q(HELPER) .. " 0", S.q(HELPER) .. " 3 3<" .. S.q(junk),
      S.q(HELPER) .. " 12x" }) do
      local _, code = S.sh(cmd .. " </dev/null >/dev/null 2>&1")
      assert.equals(126, code, cmd)
    end
  end)
end)
