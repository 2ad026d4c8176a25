-- spec/core_async_spec.lua — core.spawn{ async = true } (issue 12): spawn
-- returns as soon as the child is started, the runtime goes on while it
-- sets up, and a step that fails before the exec comes back in the result
-- (spawn_error, errno) instead of as spawn's own failure.
local core = require("hcp.core")
local S = require("spec.support")

local probe = core.probe()
local PIDNS = probe.pidns.available

local function spawn(o)
  o.env = o.env or {}
  o.cwd = o.cwd or "/"
  o.path = o.path or o.argv[1]
  o.async = true
  return assert(core.spawn(o))
end

describe("core.spawn async", function()
  it("runs the child as a synchronous spawn would: same output, status and fields", function()
    for _, iso in ipairs({ {}, PIDNS and { pidns = true, ipcns = true } or nil }) do
      local r = spawn({ argv = { "/bin/sh", "-c", "echo out; echo err >&2; exit 3" }, isolation = iso }):wait()
      assert.equals(3, r.exit)
      assert.equals("out\n", r.stdout)
      assert.equals("err\n", r.stderr)
      assert.is_nil(r.spawn_error)
      assert.is_nil(r.errno)
    end
  end)

  it("a step that fails before the exec is in the result, named as spawn would name it; nothing ran", function()
    local dir = S.tmpdir("async-")
    local mark = dir .. "/ran"
    local r = spawn({ argv = { "/bin/sh", "-c", "touch " .. mark }, cwd = "/nonexistent-hcp-async" }):wait()
    assert.equals(127, r.exit)
    assert.equals("spawn: chdir: No such file or directory", r.spawn_error)
    assert.equals(2, r.errno)
    assert.is_nil(core.kind(mark))
    if PIDNS and core.geteuid() == 0 then
      r = spawn({ argv = { "/bin/true" }, isolation = { pidns = true, stage = { "/nonexistent-hcp-stage" } } }):wait()
      assert.equals(127, r.exit)
      assert.equals("spawn: isolation: stage: /nonexistent-hcp-stage: No such file or directory", r.spawn_error)
    end
  end)

  it("the proc waits on its exec report too (p:fds), until the exec", function()
    if not PIDNS then pending("no pid namespace") return end
    local p = spawn({ argv = { "/bin/sleep", "5" }, isolation = { pidns = true } })
    assert.is_true(#p:fds() >= 3)
    assert.is_nil(p:wait(200))
    p:kill("KILL")
    assert.equals(9, p:wait().signal)
  end)

  it("refuses at once what the parent refuses (a plan error), as a synchronous spawn does", function()
    local p, err = core.spawn({ path = "/bin/true", argv = { "true" }, env = {}, cwd = "/", async = true,
      isolation = { caps = true, rootfs = { rw = { "/nonexistent-hcp-rw" } } } })
    assert.is_nil(p)
    assert.matches("spawn: isolation: rootfs: /nonexistent%-hcp%-rw: No such file or directory", err)
  end)
end)
