-- bench/floors.lua — make bench, the floors: what each isolation technique
-- costs alone on this host (bench/floors.c, a C loop starting /bin/true the
-- posix_spawn way with one technique applied first), at both cadences, as
-- the added microseconds over clone(VM|VFORK)+exec. Where a target above is
-- missed, these are the costs that bound it.
--
-- usage: hcp-lua bench/floors.lua BUILD_DIR
local lib = require("bench.lib")
local core = require("hcp.core")

local build = assert(arg[1], "usage: floors.lua BUILD_DIR")

-- a cgroup to join, under the runtime's own (where the probe found one)
local cg = core.probe().cgroup
local cgdir = cg and cg.available and string.format("%s/hcp-bench-floors-%d", cg.path, core.getpid())
if cgdir and not core.mkdir(cgdir) then cgdir = nil end

-- at an agent's cadence every sample waits 30 ms per technique: fewer rounds
local function rounds(gap) return gap > 0 and math.min(lib.N, 100) or lib.N end

local function run(gap)
  local cmd = string.format("%s/bench_floors %d %d %s", lib.q(build), rounds(gap), gap,
    cgdir and lib.q(cgdir .. "/cgroup.procs") or "")
  local p = assert(io.popen(cmd))
  local rows = {}
  for line in p:lines() do
    local name, med, p90 = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)$")
    rows[#rows + 1] = { name = name, med = tonumber(med), p90 = tonumber(p90) }
  end
  p:close()
  return rows
end

local by_gap = {}
for _, gap in ipairs(lib.CADENCES) do by_gap[gap] = run(gap) end
if cgdir then core.rmdir(cgdir) end
print(string.format("floors: each technique alone (C loop, %d rounds back to back, %d at 30 ms, interleaved), microseconds; "
  .. "+N = over clone+exec", rounds(0), rounds(30)))
print(string.format("%-52s %-28s %s", "technique", "back to back: median p90 (+)", "30 ms idle: median p90 (+)"))
local base = {}
for _, gap in ipairs(lib.CADENCES) do base[gap] = by_gap[gap][2] and by_gap[gap][2].med end
for i, r in ipairs(by_gap[0]) do
  local cells = {}
  for _, gap in ipairs(lib.CADENCES) do
    local x = by_gap[gap][i]
    cells[#cells + 1] = x.med and string.format("%6.0f %7.0f (%+6.0f)      ", x.med, x.p90, x.med - base[gap])
      or "  n/a on this host           "
  end
  print(string.format("%-52s %s %s", r.name, cells[1], cells[2]))
end

-- What auto pays the kernel per call, from these rows alone: the sum of the
-- techniques it applies over clone+exec (its root's own mounts, the jail,
-- the helper's exec and the Lua call pipeline come on top).
local AUTO = { "+ fresh IPC namespace", "+ setns into an existing netns", "+ fresh mount namespace (copy)",
  "+ pid_max in it", "+ seccomp filter", "+ capabilities dropped", "+ Landlock, a ruleset built once" }
for _, gap in ipairs(lib.CADENCES) do
  local rows, sum, ref = by_gap[gap], base[gap], by_gap[gap][1].med
  for _, want in ipairs(AUTO) do
    for _, r in ipairs(rows) do
      if r.med and r.name:sub(1, #want) == want then sum = sum + math.max(0, r.med - base[gap]) end
    end
  end
  if ref and sum then
    print(string.format("auto's kernel floor, %s: clone+exec + ipcns + setns netns + mntns copy + pidns with pid_max"
      .. " + seccomp + caps + Landlock = %.0f us = %.2fx posix_spawn (target 1.50x)",
      gap > 0 and "30 ms idle" or "back to back", sum, sum / ref))
  end
end
-- and measured: the whole sequence in one child, with what it pools and
-- prebuilds (a runtime's call), and from nothing (a one-call process's)
local MEASURED = {
  { "auto's sequence in one child", "auto's kernel floor, %s, measured in one child: %.0f us = %.2fx posix_spawn" },
  { "the same from nothing", "one call from nothing (hcp run's floor), %s, measured in one child: %.0f us = %.2fx"
    .. " posix_spawn, +%.0f us" },
}
for _, gap in ipairs(lib.CADENCES) do
  local rows, ref = by_gap[gap], by_gap[gap][1].med
  for _, m in ipairs(MEASURED) do
    for _, r in ipairs(rows) do
      if r.med and ref and r.name:sub(1, #m[1]) == m[1] then
        print(string.format(m[2], gap > 0 and "30 ms idle" or "back to back", r.med, r.med / ref, r.med - ref))
      end
    end
  end
end

-- The floor of 8 calls in flight: 8 processes starting children back to
-- back, by posix_spawn and with auto's sequence (calls/s)
local par = {}
local pp = assert(io.popen(string.format("%s/bench_floors par 8 %d", lib.q(build), math.max(50, lib.N // 2))))
for line in pp:lines() do
  local what, rate = line:match("^par\t([^\t]+)\t(%S+)$")
  if what then par[what] = tonumber(rate) end
end
pp:close()
if par.posix_spawn and par.auto and par.auto > 0 then
  print(string.format("8 in flight, kernel floor: auto's sequence %.0f calls/s against posix_spawn %.0f calls/s = %.2f "
    .. "(target for the runtime: >= 0.60)", par.auto, par.posix_spawn, par.auto / par.posix_spawn))
end
