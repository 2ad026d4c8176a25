-- spec/drive_extras_spec.lua — core.drive(procs, timeout_ms, extras): other
-- things one drive services in the same poll as the procs (struct
-- hcp_pollable, src/spawn.h), for issue 14's proxy sockets; here with the
-- smallest pollable there is, core.test_pollable().
local core = require("hcp.core")

local function sleeper(secs)
  return assert(core.spawn({ path = "/bin/sleep", argv = { "sleep", tostring(secs) }, env = {}, cwd = "/" }))
end

describe("core.drive with extras", function()
  it("returns when an extra asks for it, before any proc is done; the proc keeps running", function()
    local p <close> = sleeper(30)
    local x <close> = core.test_pollable()
    assert.is_true(x:poke())
    local t0 = core.monotonic_us()
    local done = core.drive({ p }, 10000, { x })
    assert.same({}, done)
    assert.equals(1, x:count())
    assert.is_true(core.monotonic_us() - t0 < 5e6)
    assert.is_false(p:done())
  end)

  it("services an extra's timer: the drive wakes when it is due", function()
    local p <close> = sleeper(30)
    local x <close> = core.test_pollable()
    x:arm(50)
    local done = core.drive({ p }, 10000, { x })
    assert.same({}, done)
    assert.equals(1, x:count())
  end)

  it("without anything from the extra, waits for the procs as before", function()
    local p = assert(core.spawn({ path = "/bin/echo", argv = { "echo", "hi" }, env = {}, cwd = "/" }))
    local x <close> = core.test_pollable()
    local done = core.drive({ p }, 10000, { x })
    assert.equals(1, #done)
    assert.equals("hi\n", done[1]:wait().stdout)
    assert.equals(0, x:count())
  end)

  it("drives extras alone, until one asks or the timeout", function()
    local x <close> = core.test_pollable()
    assert.same({}, core.drive({}, 30, { x }))
    assert.equals(0, x:count())
    x:poke()
    x:poke()
    assert.same({}, core.drive({}, 10000, { x }))
    assert.equals(2, x:count())
  end)

  it("refuses what is not a pollable", function()
    local p <close> = sleeper(30)
    assert.error_matches(function() core.drive({ p }, 10, { {} }) end, "extras%[1%] is not a pollable")
    assert.error_matches(function() core.drive({ p }, 10, { p }) end, "extras%[1%] is not a pollable")
  end)
end)
