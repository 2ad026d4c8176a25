-- make bench: per-call latency of rt:exec of /bin/true, under isolation
-- "minimal" (§10.2 only) and "auto" (every layer of §10.4 the host has),
-- against a bare posix_spawn of the same binary from a small C program,
-- all measured in the same run. Prints medians and their ratios; figures
-- mean something only as ratios on the machine that produced them.
--
-- usage: hcp-lua bench/exec_bench.lua BUILD/bench_spawn [N]
local hcp = require("hcp")

local baseline_bin = assert(arg[1], "usage: exec_bench.lua <spawn_baseline binary> [N]")
local n = tonumber(arg[2]) or 2000

local function median(t)
  table.sort(t)
  local m = #t // 2
  if #t % 2 == 1 then return t[m + 1] end
  return (t[m] + t[m + 1]) / 2
end

-- baseline first, then ours, then baseline again: a drift of the machine
-- shows up as two different baselines
local function run_baseline()
  local p = assert(io.popen(string.format("%q %d", baseline_bin, n)))
  local out = p:read("a")
  p:close()
  return assert(tonumber(out:match("posix_spawn_median_us%s+([%d.]+)")), "baseline printed: " .. out)
end

-- median per-call latency of rt:exec of /bin/true under a runtime
local function measure(opts)
  local rt = assert(hcp.create(opts))
  local clock = require("hcp.core").monotonic_us
  local samples = {}
  for i = 1, n do
    local t0 = clock()
    local res = rt:exec({ bin = "/bin/true" })
    samples[i] = clock() - t0
    if not res.ok then error("rt:exec failed: " .. tostring(res.error)) end
  end
  local layers = rt:layers()
  rt:close()
  return median(samples), layers
end

local base1 = run_baseline()
local minimal = measure({ allow_bins = { "/bin/true" }, isolation = "minimal" })
local auto, auto_layers = measure({ allow_bins = { "/bin/true" } })
local base2 = run_baseline()
local base = (base1 + base2) / 2

print(string.format("calls per measurement:            %d", n))
print(string.format("posix_spawn /bin/true median:     %.1f us (runs: %.1f, %.1f)", base, base1, base2))
print(string.format("rt:exec, isolation=\"minimal\":     %.1f us", minimal))
print(string.format("rt:exec, isolation=\"auto\":        %.1f us  (%s)", auto, table.concat(auto_layers, ",")))
print(string.format("ratio minimal / posix_spawn:      %.2fx", minimal / base))
print(string.format("ratio auto / posix_spawn:         %.2fx", auto / base))
print(string.format("ratio auto / minimal (isolation): %.2fx", auto / minimal))
