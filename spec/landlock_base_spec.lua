-- spec/landlock_base_spec.lua — core.landlock_base (issue 12): the Landlock
-- rules every call shares, from descriptors opened once; each call's
-- ruleset is still its own. Same rights as rules made per call; a path it
-- holds replaced on the host gets its rule on the new file.
local core = require("hcp.core")
local S = require("spec.support")

local probe = core.probe()
local HAS = probe.landlock.available
local PID = core.getpid()

local function cat(path, ll)
  local p = assert(core.spawn({ path = "/bin/cat", argv = { "cat", path }, env = {}, cwd = "/",
    isolation = { landlock = ll } }))
  return p:wait()
end

describe("core.landlock_base", function()
  local dir = "/var/tmp/hcp-spec-llb-" .. PID
  setup(function()
    assert(core.mkdir(dir) and core.mkdir(dir .. "/etc") and core.mkdir(dir .. "/other"))
    S.write(dir .. "/etc/conf", "one\n")
    S.write(dir .. "/other/secret", "no\n")
  end)
  teardown(function() core.rmtree(dir) end)

  local SYSTEM = { "/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache" }

  local function base_with(extra)
    local read = table.move(SYSTEM, 1, #SYSTEM, 1, {})
    for _, p in ipairs(extra) do read[#read + 1] = p end
    return assert(core.landlock_base({ read = read, write = { "/dev/null" } }))
  end

  it("gives a call the rights its paths would have had as rules of the call, and no more", function()
    if not HAS then pending("no Landlock here") return end
    local b = base_with({ dir .. "/etc/conf" })
    local with_base = cat(dir .. "/etc/conf", { base = b })
    local read = table.move(SYSTEM, 1, #SYSTEM, 1, {})
    read[#read + 1] = dir .. "/etc/conf"
    local per_call = cat(dir .. "/etc/conf", { read = read, write = { "/dev/null" } })
    assert.equals("one\n", with_base.stdout)
    assert.equals(per_call.stdout, with_base.stdout)
    local denied = cat(dir .. "/other/secret", { base = b })
    assert.not_equals(0, denied.exit)
    assert.matches("Permission denied", denied.stderr)
    -- the call's own rules are added to the base's
    assert.equals("no\n", cat(dir .. "/other/secret", { base = b, read = { dir .. "/other" } }).stdout)
  end)

  it("a file it holds replaced by a rename: the rule is on the new file", function()
    if not HAS then pending("no Landlock here") return end
    local b = base_with({ dir .. "/etc/conf" })
    assert.equals("one\n", cat(dir .. "/etc/conf", { base = b }).stdout)
    assert.equals(1, b:builds())
    S.write(dir .. "/etc/conf.new", "two\n")
    assert(os.rename(dir .. "/etc/conf.new", dir .. "/etc/conf"))
    assert.equals("two\n", cat(dir .. "/etc/conf", { base = b }).stdout)
    assert.equals(2, b:builds())
  end)

  it("refuses a path on procfs (that rule is each child's own) and a relative one", function()
    assert.error_matches(function() core.landlock_base({ read = { "/proc" } }) end, "is on procfs")
    assert.error_matches(function() core.landlock_base({ read = { "usr" } }) end, "must be an absolute path")
    assert.error_matches(function()
      core.spawn({ path = "/bin/true", argv = { "true" }, env = {}, cwd = "/", isolation = { landlock = { base = {} } } })
    end, "landlock.base must be a Landlock base")
  end)
end)
