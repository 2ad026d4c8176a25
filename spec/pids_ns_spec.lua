-- spec/pids_ns_spec.lua — wrap.limits.procs as the pid_max of the call's own
-- pid namespace (issue 12): no per-call cgroup (moving a process into one
-- costs ~10 ms on an idle machine), the call stays in the runtime's cgroup
-- so the operator's limit still bounds it, and the bound is exact.
local core = require("hcp.core")
local hcp = require("hcp")
local S = require("spec.support")

local probe = core.probe()
local HAS = probe.pidns.available and probe.pidns.pid_max
local WHY = not probe.pidns.available and ("no pid namespace: " .. tostring(probe.pidns.reason))
  or "this kernel has no per-namespace pid_max (Linux 6.14)"

-- Forks `n` children that sleep, reports how many it got, then kills them.
local FORKER = [[
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) { int n = atoi(argv[1]), ok = 0, failed = 0;
  for (int i = 0; i < n; i++) { pid_t p = fork(); if (p == 0) { sleep(5); _exit(0); } if (p > 0) ok++; else failed++; }
  printf("forked=%d failed=%d\n", ok, failed); fflush(stdout); kill(0, SIGKILL); return 0; }
]]

local function host_pid_max()
  return tonumber(S.read("/proc/sys/kernel/pid_max"))
end

describe("pids_max (core)", function()
  it("bounds the processes of the namespace, hcp-init and the program included", function()
    if not HAS then pending(WHY) return end
    local forker = assert(S.cc("forker", FORKER))
    local before = host_pid_max()
    local p = assert(core.spawn({ path = forker, argv = { "forker", "400" }, env = {}, cwd = "/",
      isolation = { pidns = true, pids_max = 300 } }))
    local r = p:wait()
    local forked = tonumber(r.stdout:match("forked=(%d+)"))
    -- 300 in the namespace: hcp-init, the program, 298 children
    assert.equals(298, forked, r.stdout)
    assert.equals(before, host_pid_max())
  end)

  it("needs pidns, and a bound the kernel can express", function()
    local base = { path = "/bin/true", argv = { "true" }, env = {}, cwd = "/" }
    base.isolation = { pids_max = 300 }
    assert.error_matches(function() core.spawn(base) end, "pids_max needs pidns")
    for _, bad in ipairs({ 299, 4194304, 1.5, "300" }) do
      base.isolation = { pidns = true, pids_max = bad }
      assert.error_matches(function() core.spawn(base) end, "pids_max must be an integer from 300 to 4194303")
    end
  end)

  it("is what core.probe().pidns.pid_max says the host has", function()
    assert.is_boolean(probe.pidns.pid_max)
    if probe.pidns.available and not probe.pidns.pid_max then
      pending("no per-namespace pid_max here; nothing more to check")
    end
  end)
end)

describe("pids_max (runtime)", function()
  local function runtime(procs)
    local forker = assert(S.cc("forker", FORKER))
    local root = S.pack(S.manifest("forker", forker, { wrap = { limits = { procs = procs } } }))
    return assert(hcp.create({ pack_dirs = { root } }))
  end

  it("wrap.limits.procs >= 300 is the call's pid namespace's bound; the call stays in the runtime's cgroup", function()
    if not HAS then pending(WHY) return end
    local rt = runtime(300)
    local res = rt:call({ pack = "forker", args = { "400" } })
    local isol = {}
    for _, l in ipairs(res.isolation) do isol[l] = true end
    if not isol.pidns then pending("pidns not applied by auto here") return end
    assert.is_true(isol.pids_ns, table.concat(res.isolation, ","))
    assert.is_nil(isol.pids_cgroup)
    assert.equals("298", res.stdout:match("forked=(%d+)"), res.stdout)
    rt:close()
  end)

  it("the default procs (512) takes the namespace's bound, not a cgroup", function()
    if not HAS then pending(WHY) return end
    local rt = assert(hcp.create({ allow_bins = { "/bin/cat" } }))
    local res = rt:exec({ bin = "/bin/cat", args = { "/proc/self/cgroup" } })
    assert.is_true(res.ok, res.error)
    local isol = table.concat(res.isolation, ",")
    if not isol:find("pidns", 1, true) then pending("pidns not applied by auto here") return end
    assert.matches("pids_ns", isol, 1, true)
    -- the child is in the runtime's own cgroups, no call-… below them
    assert.equals(S.read("/proc/self/cgroup"), res.stdout)
    rt:close()
  end)

  it("below 300 procs is a pids cgroup where one can be made (the exact bound, at its cost)", function()
    if not (probe.cgroup and probe.cgroup.available) then pending("no pids cgroup here") return end
    local rt = runtime(20)
    local res = rt:call({ pack = "forker", args = { "100" } })
    local isol = table.concat(res.isolation, ",")
    assert.matches("pids_cgroup", isol, 1, true)
    assert.not_matches("pids_ns", isol, 1, true)
    assert.is_true(tonumber(res.stdout:match("forked=(%d+)")) < 20, res.stdout)
    rt:close()
  end)
end)
