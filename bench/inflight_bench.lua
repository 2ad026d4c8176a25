-- make bench: calls per second with 8 calls kept in flight through the call
-- handle (rt:start, driven by rt:step alone), against a C program keeping 8
-- posix_spawns of the same binary in flight, measured in the same run.
-- Figures mean something only as ratios on the machine that produced them.
--
-- usage: hcp-lua bench/inflight_bench.lua BUILD/bench_spawn_parallel [N]
local hcp = require("hcp")
local core = require("hcp.core")

local baseline_bin = assert(arg[1], "usage: inflight_bench.lua <spawn_parallel binary> [N]")
local n = tonumber(arg[2]) or math.max(2000, tonumber(os.getenv("HCP_BENCH_N")) or 0)
local K = 8

local function run_baseline()
  local p = assert(io.popen(string.format("%q %d %d", baseline_bin, K, n)))
  local out = p:read("a")
  p:close()
  return assert(tonumber(out:match("posix_spawn_parallel_calls_per_s%s+([%d.]+)")), "baseline printed: " .. out)
end

-- calls/s of rt:start with K in flight: a new call as soon as one ends
local function measure(opts)
  local rt = assert(hcp.create(opts))
  local started, finished, failed = 0, 0, nil
  -- a handle must be kept while its call runs (dropping it kills the call)
  local live = {} -- luacheck: no unused
  local t0 = core.monotonic_us()
  while finished < n do
    while started < n and started - finished < K do
      started = started + 1
      local id = started
      live[id] = rt:start({ pack = "true" }, { on_exit = function(res)
        finished, live[id] = finished + 1, nil
        if not res.ok then failed = failed or res.error end
      end })
    end
    rt:step()
  end
  local rate = n / ((core.monotonic_us() - t0) / 1e6)
  rt:close()
  if failed then error("a call failed: " .. failed) end
  return rate
end

local packs = assert(core.mkdtemp("/tmp", "hcp-bench-"))
assert(core.mkdir(packs .. "/true"))
local fh = assert(io.open(packs .. "/true/hcp.json", "w"))
fh:write('{"hcp":1,"name":"true","wrap":{"bin":"/bin/true"}}')
fh:close()

local base1 = run_baseline()
local minimal = measure({ pack_dirs = { packs }, isolation = "minimal" })
local auto = measure({ pack_dirs = { packs } })
local base2 = run_baseline()
local base = (base1 + base2) / 2
core.rmtree(packs)

print(string.format("calls per measurement, %d in flight: %d", K, n))
print(string.format("C posix_spawn x%d of /bin/true:     %.0f calls/s (runs: %.0f, %.0f)", K, base, base1, base2))
print(string.format("rt:start/step, isolation=\"minimal\": %.0f calls/s", minimal))
print(string.format("rt:start/step, isolation=\"auto\":    %.0f calls/s", auto))
print(string.format("ratio minimal / C:                 %.2f", minimal / base))
print(string.format("ratio auto / C:                    %.2f   target >= 0.60: %s", auto / base,
  auto / base >= 0.6 and "PASS" or "MISS"))
