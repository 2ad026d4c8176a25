-- make bench: per-call latency of rt:exec of /bin/true, under isolation
-- "minimal" (§10.2 only), the layers of §10.4 before issue 10 (landlock,
-- seccomp, netns, pidns, caps, limits: what this host has of them), and
-- "auto" (every layer the host has, so also the constructed root, ipcns,
-- run_as), with the local driver and with bwrap, against a bare
-- posix_spawn of the same binary from a small C program, all measured in
-- the same run. Prints medians and their ratios; figures mean something
-- only as ratios on the machine that produced them.
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

-- the layers of §10.4 as they were before issue 10, as far as this host has them
local before = {}
for _, l in ipairs(hcp.doctor().layers) do
  for _, old in ipairs({ "landlock", "seccomp", "netns", "pidns", "caps", "limits" }) do
    if l.name == old and l.available then before[#before + 1] = old end
  end
end

local base1 = run_baseline()
local minimal = measure({ allow_bins = { "/bin/true" }, isolation = "minimal" })
local old = measure({ allow_bins = { "/bin/true" }, isolation = before })
local auto, auto_layers = measure({ allow_bins = { "/bin/true" } })
local bwrap_ok = hcp.create({ driver = "bwrap" })
local bwrap = bwrap_ok and measure({ allow_bins = { "/bin/true" }, driver = "bwrap" })
local base2 = run_baseline()
local base = (base1 + base2) / 2

print(string.format("calls per measurement:              %d", n))
print(string.format("posix_spawn /bin/true median:       %.1f us (runs: %.1f, %.1f)", base, base1, base2))
print(string.format("rt:exec, isolation=\"minimal\":       %.1f us", minimal))
print(string.format("rt:exec, the layers before issue 10: %.1f us  (%s)", old, table.concat(before, ",")))
print(string.format("rt:exec, isolation=\"auto\":          %.1f us  (%s)", auto, table.concat(auto_layers, ",")))
if bwrap then print(string.format("rt:exec, auto, driver bwrap:        %.1f us", bwrap)) end
print(string.format("ratio minimal / posix_spawn:        %.2fx", minimal / base))
print(string.format("ratio auto / posix_spawn:           %.2fx", auto / base))
print(string.format("ratio auto / minimal (isolation):   %.2fx", auto / minimal))
print(string.format("ratio auto / before (rootfs, ipcns, run_as, scopes): %.2fx", auto / old))
if bwrap then print(string.format("ratio bwrap / local (auto):         %.2fx", bwrap / auto)) end
