-- spec/huge_heap_spec.lua — hcp-lua's heap made before the first malloc
-- (issue 12, src/heap.c): by default its first megabyte populated in one
-- call; on a transparent huge page when asked for: with HCP_HUGE_HEAP=1
-- loading hcp's modules costs a handful of page faults instead of one per
-- 4 KiB of heap, at the price of a heap whose start is the same below a
-- 2 MB boundary in every process. So it is not the default: without it the
-- heap's addresses are as random as the kernel makes them.
local S = require("spec.support")

local q = S.q

-- What hcp-lua reports of itself once hcp's modules are loaded: the huge
-- pages of its [heap] mappings (kB), whether one is marked for them ("hg"
-- among its VmFlags), and its minor page faults so far.
local REPORT = [[
require("hcp.cli")
local huge, marked, in_heap = 0, false, false
for line in io.lines("/proc/self/smaps") do
  local name = line:match("^%x+%-%x+ %S+ %S+ %S+ %S+%s*(.*)$")
  if name then in_heap = name == "[heap]" end
  if in_heap then
    huge = huge + tonumber(line:match("^AnonHugePages:%s+(%d+) kB") or 0)
    if line:match("^VmFlags:.* hg") then marked = true end
  end
end
local stat = io.open("/proc/self/stat"):read("a"):gsub("^.*%) ", "")
local fields = {}
for f in stat:gmatch("%S+") do fields[#fields + 1] = f end
io.write(huge, " ", tostring(marked), " ", fields[8])  -- field 10 of stat: minflt
]]

local script -- written once, on the first report
local function report(env)
  script = script or S.write(S.tmpdir("hh-") .. "/report.lua", REPORT)
  local out = S.must_sh(string.format("cd %s && env %s %s %s", q(S.REPO), env, q(S.HCP_LUA), q(script)))
  local huge, marked, faults = out:match("^(%d+) (%a+) (%d+)$")
  assert(huge, "unexpected report: " .. out)
  return tonumber(huge), marked == "true", tonumber(faults)
end

describe("hcp-lua's heap", function()
  S.it("thp", "is marked for huge pages and backed by one once hcp's modules are loaded", function()
    local huge, marked = report("HCP_HUGE_HEAP=1")
    assert.is_true(marked)
    assert.is_true(huge >= 2048, "AnonHugePages of [heap]: " .. huge .. " kB")
  end)

  S.it("thp", "costs fewer page faults than the same load on small pages", function()
    local _, _, on = report("HCP_HUGE_HEAP=1")
    local _, _, off = report("HCP_HUGE_HEAP=0 HCP_HEAP_POPULATE=0")
    -- ~1 MB of heap: ~250 faults on 4 KiB pages, a few on a huge one
    assert.is_true(on + 50 < off, string.format("minor faults: %d with, %d without", on, off))
  end)

  it("is on small pages, unmarked, unless HCP_HUGE_HEAP=1 asks (unset, 0, anything else)", function()
    for _, env in ipairs({ "-u HCP_HUGE_HEAP", "HCP_HUGE_HEAP=0", "HCP_HUGE_HEAP=yes" }) do
      local huge, marked = report(env)
      assert.is_false(marked, env)
      assert.equals(0, huge, env)
    end
  end)

  -- the resident kB of the [heap] mappings of an hcp-lua that loaded nothing
  local function heap_rss(env)
    local out = S.must_sh(string.format("env %s %s -e %s", env, q(S.HCP_LUA), q([[
      local kb, h = 0, false
      for l in io.lines("/proc/self/smaps") do
        local n = l:match("^%x+%-%x+ %S+ %S+ %S+ %S+%s*(.*)$")
        if n then h = n == "[heap]" end
        if h then kb = kb + tonumber(l:match("^Rss:%s+(%d+) kB") or 0) end
      end
      io.write(kb)]])))
    return assert(tonumber(out), out)
  end

  S.it("glibc_malloc", "has its first megabyte populated at start by default, not with HCP_HEAP_POPULATE=0", function()
    local on, off = heap_rss("-u HCP_HEAP_POPULATE -u HCP_HUGE_HEAP"), heap_rss("-u HCP_HUGE_HEAP HCP_HEAP_POPULATE=0")
    assert.is_true(on >= 1000, "[heap] resident at start: " .. on .. " kB")
    assert.is_true(off < 512, "[heap] resident at start without: " .. off .. " kB")
  end)

  -- the address of the first table a script makes, within its 2 MB: the
  -- same in every process when the heap starts below a 2 MB boundary
  local function offsets(env)
    local seen, n = {}, 0
    for _ = 1, 6 do
      local out = S.must_sh(string.format("env %s %s -e %s", env, q(S.HCP_LUA),
        q('io.write(tonumber(string.format("%p", {}):sub(3), 16) % (2 << 20))')))
      if not seen[out] then seen[out], n = true, n + 1 end
    end
    return n
  end

  -- glibc's heap only: the sanitizers' allocator places chunks at fixed
  -- addresses whatever the knob says
  S.it({ "aslr", "glibc_malloc" },
    "keeps the kernel's randomness by default: the heap's addresses differ below 2 MB from run to run", function()
    -- 6 runs on one offset by chance: 2^-45 with 9 random bits
    assert.is_true(offsets("-u HCP_HUGE_HEAP") > 1)
  end)

  S.it("thp", "with HCP_HUGE_HEAP=1 gives up that randomness (why it is asked for, not the default)", function()
    assert.equals(1, offsets("HCP_HUGE_HEAP=1"))
  end)
end)
