-- bench/latency.lua — make bench, per-call latency: rt:exec of /bin/true
-- under "auto" and "minimal", against a bare posix_spawn + wait from C,
-- `bwrap --unshare-all` and Node's spawnSync of the same binary; and the
-- same auto call from a runtime holding a 1 GiB Lua heap, and from one with
-- 1000 packs loaded. Every case runs in a process of its own and times its
-- own calls; the samples are taken interleaved (one of each case per
-- round), at both cadences, so every case sees the same machine.
--
-- usage: hcp-lua bench/latency.lua BUILD_DIR
local lib = require("bench.lib")
local hcp = require("hcp")

local build = assert(arg[1], "usage: latency.lua BUILD_DIR")
local HCP_LUA = build .. "/bin/hcp-lua"
local q = lib.q

local BWRAP = { "bwrap", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
  "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
  "/bin/true" }

local which = lib.which

local function worker(name, packs, iso, heap, mode)
  return lib.sampler(name, string.format("%s bench/worker.lua %s %s %d %s", q(HCP_LUA), q(packs), iso, heap,
    mode or "exec"))
end

-- The cases: a name, the sampler, the command index, what it is compared to.
local function cases()
  local six, thousand = lib.packs(6, "six"), lib.packs(1000, "thousand")
  local bwrap = which("bwrap")
  local c = lib.sampler("c", build .. "/bench_sampler /bin/true" ..
    (bwrap and (" -- " .. table.concat(BWRAP, " "):gsub("^bwrap", bwrap)) or ""))
  local list = {
    { key = "spawn", name = "posix_spawn+wait /bin/true (C)", s = c, k = 0 },
    { key = "auto", name = "rt:exec auto", s = worker("auto", six, "auto", 0) },
    { key = "minimal", name = "rt:exec minimal", s = worker("minimal", six, "minimal", 0) },
    { key = "engine", name = "core.spawn, no layers (engine)", s = worker("engine", six, "minimal", 0, "spawn") },
    { key = "heap", name = "rt:exec auto, 1 GiB Lua heap", s = worker("heap", six, "auto", 1024) },
    { key = "packs", name = "rt:exec auto, 1000 packs loaded", s = worker("packs", thousand, "auto", 0) },
  }
  -- the floor of auto, in the same rounds: its kernel sequence in one C child
  local floor = lib.sampler("floor", build .. "/bench_floors sample")
  local _, fst = floor:sample(1)
  if fst == 0 then
    list[#list + 1] = { key = "floor", name = "auto's kernel sequence (C floor)", s = floor, k = 1 }
  else
    print("floor of auto: not measurable here (bench_floors sample 1 failed), row left out")
    floor:close()
  end
  if bwrap then list[#list + 1] = { key = "bwrap", name = "bwrap --unshare-all /bin/true", s = c, k = 1 } end
  local node = which("node")
  if node then
    list[#list + 1] = { key = "node", name = "node spawnSync /bin/true", s = lib.sampler("node",
      q(node) .. " bench/sampler.js /bin/true") }
  end
  return list
end

-- What each case is held to: { reference case, target ratio, wording }.
local TARGETS = {
  auto = { "spawn", 1.5, "<= 1.50x posix_spawn" },
  minimal = { "spawn", 1.15, "<= 1.15x posix_spawn" },
  engine = { "spawn", nil, "no target: minimal's spawn without the call pipeline" },
  floor = { "spawn", nil, "no target: the kernel sequence every auto call pays" },
  heap = { "auto", 1.1, "<= 1.10x auto (small heap)" },
  packs = { "auto", 1.05, "<= 1.05x auto (6 packs)" },
  bwrap = { "auto", 1.0, "auto faster (ratio auto/this < 1)", true },
  node = { "auto", 1.0, "auto faster (ratio auto/this < 1)", true },
}

local function report(list, by_gap)
  print(string.format("%-34s %-30s %-30s %s", "case", "back to back: median p90 ratio",
    "30 ms idle: median p90 ratio", "target"))
  for _, cs in ipairs(list) do
    local row, tgt = { string.format("%-34s", cs.name) }, TARGETS[cs.key]
    local verdicts = {}
    for _, gap in ipairs(lib.CADENCES) do
      local s = by_gap[gap]
      local med, p90 = lib.stats(s[cs.key])
      local ratio = 1
      if tgt then
        local ref = lib.stats(s[tgt[1]])
        ratio = tgt[4] and ref / med or med / ref
        if tgt[2] then verdicts[#verdicts + 1] = lib.verdict(tgt[4] and ratio < 1 or ratio <= tgt[2] + 1e-9) end
      end
      row[#row + 1] = string.format("%8.0f us %7.0f %6.2fx    ", med, p90, ratio)
    end
    row[#row + 1] = not tgt and "reference" or #verdicts == 0 and tgt[3] or (tgt[3] .. ": " .. table.concat(verdicts, "/"))
    print(table.concat(row, " "))
  end
end

-- Whether "faster than Node" is possible at all: Node's whole spawnSync
-- against the floor of auto from the same rounds (above 1: the layers alone
-- cost more than Node's call without any).
local function floor_note(by_gap)
  local row = {}
  for _, gap in ipairs(lib.CADENCES) do
    local s = by_gap[gap]
    if not (s.floor and s.node) then return end
    row[#row + 1] = string.format("%s %.2f", gap == 0 and "back to back" or (gap .. " ms idle"),
      lib.stats(s.floor) / lib.stats(s.node))
  end
  print("floor of auto / node spawnSync (above 1: no call with auto's layers can beat node): "
    .. table.concat(row, ", "))
end

local list = cases()
local by_gap = {}
for _, gap in ipairs(lib.CADENCES) do by_gap[gap] = lib.interleave(list, lib.N, gap) end
print(string.format("per-call latency, %d calls per case and cadence, interleaved; layers of auto: %s", lib.N,
  table.concat(assert(hcp.create({})):layers(), ",")))
print("(bwrap and node rows: ratio = auto / that case, below 1 when auto is faster)")
report(list, by_gap)
floor_note(by_gap)
for _, cs in ipairs(list) do cs.s:close() end
lib.cleanup()
