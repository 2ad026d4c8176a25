-- bench/techniques.lua — make bench, what each technique of issue 12 buys:
-- rt:exec of /bin/true under "auto" (and "minimal") with everything, against
-- the same call without one technique at a time (bench/worker.lua's HCP_BENCH_WITHOUT,
-- and HCP_SPAWN_HELPER=none for the fork of the runtime), interleaved, at
-- both cadences. A ratio above 1 is what the technique saves.
--
-- usage: hcp-lua bench/techniques.lua BUILD_DIR
local lib = require("bench.lib")

local build = assert(arg[1], "usage: techniques.lua BUILD_DIR")
local q = lib.q

-- { name, environment, isolation, the case its ratio is against }
local CASES = {
  { "everything", "", "auto", 1 },
  { "without the base view (a root built per call)", "HCP_BENCH_WITHOUT=view_base", "auto", 1 },
  { "without the Landlock base (paths opened per call)", "HCP_BENCH_WITHOUT=landlock_base", "auto", 1 },
  { "without the netns pool (a fresh netns per call)", "HCP_BENCH_WITHOUT=netns_pool", "auto", 1 },
  { "without async spawn (wait for the exec report)", "HCP_BENCH_WITHOUT=async", "auto", 1 },
  { "without the spawn helper (fork of the runtime)", "HCP_SPAWN_HELPER=none", "auto", 1 },
  { "without call dirs ahead/behind (made, removed in the call)", "HCP_BENCH_WITHOUT=calldirs", "auto", 1 },
  { "minimal: everything", "", "minimal", 8 },
  { "minimal: without call dirs ahead/behind", "HCP_BENCH_WITHOUT=calldirs", "minimal", 8 },
}

local packs = lib.packs(6, "six")
local list = {}
for i, c in ipairs(CASES) do
  list[i] = { key = i, name = c[1], ref = c[4], s = lib.sampler("t" .. i, string.format("env %s %s bench/worker.lua %s %s 0",
    c[2] == "" and "HCP_BENCH=1" or c[2], q(build .. "/bin/hcp-lua"), q(packs), c[3])) }
end

local function rounds(gap) return gap > 0 and math.min(lib.N, 100) or lib.N end

local by_gap = {}
for _, gap in ipairs(lib.CADENCES) do by_gap[gap] = lib.interleave(list, rounds(gap), gap) end

print(string.format("what each technique buys: rt:exec auto of /bin/true, %d calls back to back, %d at 30 ms, interleaved",
  rounds(0), rounds(30)))
print(string.format("%-60s %-26s %s", "case (x: against \"everything\" of its isolation)", "back to back: median p90 x",
  "30 ms idle: median p90 x"))
for i, c in ipairs(list) do
  local cells = {}
  for _, gap in ipairs(lib.CADENCES) do
    local med, p90 = lib.stats(by_gap[gap][i])
    cells[#cells + 1] = string.format("%7.0f us %6.0f %5.2fx   ", med, p90, med / lib.stats(by_gap[gap][c.ref]))
  end
  print(string.format("%-60s %s %s", c.name, cells[1], cells[2]))
end
for _, c in ipairs(list) do c.s:close() end
lib.cleanup()
