-- make bench: per-call latency of rt:exec of /bin/true, against a bare
-- posix_spawn of the same binary from a small C program, measured in the
-- same run. Prints medians and their ratio; figures are only meaningful
-- as that ratio on the machine that produced them.
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

local base1 = run_baseline()

local rt = assert(hcp.create({ allow_bins = { "/bin/true" } }))
local clock = require("hcp.core").monotonic_us
local samples = {}
for i = 1, n do
  local t0 = clock()
  local res = rt:exec({ bin = "/bin/true" })
  samples[i] = clock() - t0
  if not res.ok then error("rt:exec failed: " .. tostring(res.error)) end
end
rt:close()
local ours = median(samples)

local base2 = run_baseline()
local base = (base1 + base2) / 2

print(string.format("calls per measurement:        %d", n))
print(string.format("posix_spawn /bin/true median: %.1f us (runs: %.1f, %.1f)", base, base1, base2))
print(string.format("rt:exec /bin/true median:     %.1f us", ours))
print(string.format("ratio rt:exec / posix_spawn:  %.2fx", ours / base))
