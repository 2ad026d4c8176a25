-- bench/cli.lua — make bench, the commands: what `hcp run PACK` adds to the
-- program's own run time (jq -n 1, run directly and through hcp run, both
-- by the same C sampler, interleaved, at both cadences); and the calls/s
-- `hcp call` sustains on a stream of requests against rt:exec in a loop
-- from Lua (the same packs, the same isolation, 3 runs of N calls each).
--
-- usage: hcp-lua bench/cli.lua BUILD_DIR
local lib = require("bench.lib")

local build = assert(arg[1], "usage: cli.lua BUILD_DIR")
local q = lib.q
local HCP = build .. "/bin/hcp"

local which = lib.which

-- ---- hcp run --------------------------------------------------------------
-- What `hcp run` adds, and where it goes, from the same rounds: the
-- interpreter alone (hcp-lua -e ''), the interpreter with every module of
-- hcp loaded (hcp --version, which argparse answers before any runtime),
-- both against /bin/true; and the floor of the layers: a C child doing
-- auto's sequence from nothing, as a one-call process must (a fresh network
-- namespace, a view of 41 binds, the pid namespace, Landlock built now:
-- `bench_floors sample` 2), against posix_spawn of /bin/true (its 0). The
-- rest is the runtime, the call and the exit (as root, `hcp run`'s early
-- child does much of the floor's work while the modules load: src/early.c).
-- And the same for a pack of
-- /bin/true against /bin/true: jq's own time varies by milliseconds from
-- run to run here (15–22 ms), /bin/true's by tens of microseconds, so this
-- pair measures what `hcp run` adds more exactly.
local RUN_CASES = { "jq", "run", "true", "interp", "modules", "run_true" }

local function run_samples(s, floor, n, gap)
  local cases = {}
  for i, name in ipairs(RUN_CASES) do cases[i] = { key = name, name = name, s = s, k = i - 1 } end
  if floor then
    cases[#cases + 1] = { key = "spawn", name = "posix_spawn (C)", s = floor, k = 0 }
    cases[#cases + 1] = { key = "floor", name = "auto from nothing (C floor)", s = floor, k = 2 }
  end
  local m = {}
  for k, l in pairs(lib.interleave(cases, n, gap)) do m[k] = { lib.stats(l) } end
  return m
end

-- The floor's sampler, or nil (said) where this host cannot build the view.
local function floor_sampler()
  local floor = lib.sampler("runfloor", q(build) .. "/bench_floors sample")
  local _, st = floor:sample(2)
  if st == 0 then return floor end
  print("  the floor of the layers: not measurable here (bench_floors sample 2 failed), left out")
  floor:close()
  return nil
end

local function run_section()
  local jq = which("jq")
  if not jq then print("hcp run: no jq on this host, skipped") return end
  local packs = lib.packs(1, "runpacks") -- the pack "true": /bin/true
  local s = lib.sampler("run", string.format("%s/bench_sampler %s -n 1 -- %s run --pack-dir packs-examples jq -n 1"
    .. " -- /bin/true -- %s -e '' -- %s --version -- %s run --pack-dir %s true", q(build), jq, HCP,
    q(build .. "/bin/hcp-lua"), HCP, HCP, q(packs)))
  local floor = floor_sampler()
  local n = math.max(100, lib.N // 3)
  print(string.format("hcp run jq -n 1 against jq -n 1 itself, %d each, interleaved", n))
  for _, gap in ipairs(lib.CADENCES) do
    local m = run_samples(s, floor, n, gap)
    local ma, pa, mb, pb = m.jq[1], m.jq[2], m.run[1], m.run[2]
    print(string.format("  %-14s jq %6.1f ms (p90 %6.1f)   hcp run %6.1f ms (p90 %6.1f)   adds %5.1f ms   target <= 5 ms: %s",
      gap == 0 and "back to back" or (gap .. " ms idle"), ma / 1e3, pa / 1e3, mb / 1e3, pb / 1e3, (mb - ma) / 1e3,
      lib.verdict(mb - ma <= 5000)))
    local mt, pt = m.run_true[1], m.run_true[2]
    print(string.format("  %-14s true %5.1f ms (p90 %6.1f)   hcp run %6.1f ms (p90 %6.1f)   adds %5.1f ms   target <= 5 ms: %s",
      "", m["true"][1] / 1e3, m["true"][2] / 1e3, mt / 1e3, pt / 1e3, (mt - m["true"][1]) / 1e3,
      lib.verdict(mt - m["true"][1] <= 5000)))
    local interp, mods = m.interp[1] - m["true"][1], m.modules[1] - m.interp[1]
    print(string.format("  %-14s of which: hcp-lua's start %4.1f ms (hcp-lua -e '' over /bin/true), its modules "
      .. "%4.1f ms (hcp --version over hcp-lua -e ''), the runtime, call and exit %4.1f ms (of /bin/true's)", "",
      interp / 1e3, mods / 1e3, (mt - m["true"][1] - interp - mods) / 1e3))
    if floor then
      local layers = m.floor[1] - m.spawn[1]
      print(string.format("  %-14s floor: the layers alone, from nothing, in C: %4.1f ms (p90 %4.1f) over posix_spawn;"
        .. " in series with hcp-lua's start, %4.1f of the 5 ms (as root the early child makes the namespaces"
        .. " and the system view beside the modules' load)", "", layers / 1e3,
        (m.floor[2] - m.spawn[2]) / 1e3, (layers + interp) / 1e3))
    end
  end
  s:close()
  if floor then floor:close() end
end

-- ---- hcp call ---------------------------------------------------------------
local function call_section()
  local packs = lib.packs(6, "callpacks")
  local n = lib.N
  local file = lib.tmp() .. "/requests.jsonl"
  local fh = assert(io.open(file, "w"))
  for i = 1, n do fh:write(string.format('{"pack":"true","id":%d}\n', i)) end
  fh:close()
  local s = lib.sampler("call", string.format("%s/bench_sampler %s call --pack-dir %s %s", q(build), HCP, q(packs), q(file)))
  local w = lib.sampler("loop", string.format("%s/bin/hcp-lua bench/worker.lua %s auto 0", q(build), q(packs)))
  local a, b = {}, {}
  for _ = 1, 3 do
    local us, st = s:sample(0)
    if st ~= 0 then error("bench: hcp call failed") end
    a[#a + 1] = n / (us / 1e6)
    us, st = w:sample("loop " .. n)
    if st ~= 0 then error("bench: rt:exec loop failed") end
    b[#b + 1] = n / (us / 1e6)
  end
  local ra, rb = lib.stats(a), lib.stats(b)
  print(string.format("hcp call, %d requests on stdin: %6.0f calls/s   rt:exec loop from Lua: %6.0f calls/s   "
    .. "ratio %4.2f   target >= 0.80: %s", n, ra, rb, ra / rb, lib.verdict(ra / rb >= 0.8)))
  s:close()
  w:close()
end

run_section()
call_section()
lib.cleanup()
