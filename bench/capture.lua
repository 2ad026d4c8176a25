-- bench/capture.lua — make bench, capture: BYTES (default 1 GiB) of a
-- child's stdout through a call, captured into the result, against a C
-- program that captures the same the plain way (bench/capture.c); and the
-- same call streamed to a callback instead (capture = false): its memory
-- must not grow with the output. Each run in a fresh process (its peak RSS
-- is the run's); medians of 3, interleaved.
--
-- usage: hcp-lua bench/capture.lua BUILD_DIR
local lib = require("bench.lib")
local core = require("hcp.core")

local build = assert(arg[1], "usage: capture.lua BUILD_DIR")
local bytes = (tonumber(os.getenv("HCP_BENCH_CAPTURE_MB")) or 1024) * (1 << 20)
local q = lib.q

local dir = lib.tmp() .. "/cpacks"
assert(core.mkdir(dir) and core.mkdir(dir .. "/head"))
local fh = assert(io.open(dir .. "/head/hcp.json", "w"))
fh:write('{"hcp":1,"name":"head","wrap":{"bin":"/usr/bin/head","timeout_ms":600000}}')
fh:close()

local function run(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  p:close()
  local s, n, rss = out:match("^(%S+) (%d+) (%d+)")
  assert(s, "bench: " .. cmd .. ": " .. out)
  assert(tonumber(n) == bytes, string.format("bench: %s got %s bytes, not %d", cmd, n, bytes))
  return { secs = tonumber(s), rss = tonumber(rss) }
end

local cases = {
  c = string.format("%s/bench_capture %d", q(build), bytes),
  capture = string.format("%s/bin/hcp-lua bench/capture_worker.lua %s %d capture", q(build), q(dir), bytes),
  stream = string.format("%s/bin/hcp-lua bench/capture_worker.lua %s %d stream", q(build), q(dir), bytes),
}
local got = { c = {}, capture = {}, stream = {} }
for _ = 1, 3 do
  for _, k in ipairs({ "c", "capture", "stream" }) do got[k][#got[k] + 1] = run(cases[k]) end
end

local function med(k, f)
  local t = {}
  for i, r in ipairs(got[k]) do t[i] = r[f] end
  return (lib.stats(t))
end

local MiB = 1 << 20
print(string.format("capture of %d MiB (head -c %d /dev/zero), medians of 3, each run a fresh process", bytes // MiB, bytes))
local c_rate = bytes / med("c", "secs")
for _, k in ipairs({ "c", "capture", "stream" }) do
  local rate, rss = bytes / med(k, "secs"), med(k, "rss")
  local line = string.format("%-34s %7.0f MiB/s %5.2fx C   peak RSS %6.0f MiB = %5.2fx the bytes", ({
    c = "C capture loop (realloc doubling)", capture = "rt:call, captured (auto)", stream = "rt:start, streamed (capture=false)" })[k],
    rate / MiB, rate / c_rate, rss / MiB, rss / bytes)
  if k == "capture" then
    line = line .. string.format("   targets >= 0.80x C: %s, RSS <= 1.10x: %s", lib.verdict(rate / c_rate >= 0.8),
      lib.verdict(rss / bytes <= 1.1))
  elseif k == "stream" then
    line = line .. string.format("   target O(1): peak RSS %s (<= 64 MiB)", lib.verdict(rss <= 64 * MiB))
  end
  print(line)
end
lib.cleanup()
