-- bench/worker.lua — a runtime that answers make bench's requests: each
-- line on stdin is one call, timed here, answered "<us> <status>".
--
--   hcp-lua bench/worker.lua PACK_DIR ISOLATION HEAP_MIB [MODE]
--
-- ISOLATION: "auto" or "minimal". HEAP_MIB: Lua strings held alive for the
-- whole run (1024: a runtime holding 1 GiB). MODE: "exec" (rt:exec of
-- /bin/true, the default), "call" (rt:call of the pack `true`), "spawn"
-- (core.spawn of /bin/true without layers: the spawn engine without the
-- call pipeline), or "loop N" per request: N back-to-back rt:exec, the
-- total time answered.
local hcp = require("hcp")
local core = require("hcp.core")

-- HCP_BENCH_WITHOUT (bench/techniques.lua): a comma list of the techniques
-- of issue 12 to do without — view_base, landlock_base, netns_pool, async,
-- calldirs — to measure what each one buys.
local without = {}
for t in (os.getenv("HCP_BENCH_WITHOUT") or ""):gmatch("[^,]+") do without[t] = true end
if without.view_base then core.view_base = nil end
if without.calldirs then core.mkdtemp_ahead, core.rmtree_later = core.mkdtemp, core.rmtree end
if without.landlock_base then core.landlock_base = nil end
if without.netns_pool or without.async then
  local spawn = core.spawn
  core.spawn = function(o)
    if without.netns_pool and o.isolation and o.isolation.netns == "pool" then o.isolation.netns = true end
    if without.async then o.async = nil end
    return spawn(o)
  end
end

local pack_dir, iso, heap = arg[1], arg[2], tonumber(arg[3]) or 0
local rt = assert(hcp.create({ pack_dirs = { pack_dir }, allow_bins = { "/bin/true" }, isolation = iso }))

local hold = {}
for i = 1, heap do hold[i] = string.rep(string.char(i % 251), 1 << 20) end

local ENGINE = { path = "/bin/true", argv = { "/bin/true" }, env = {}, cwd = "/" }

local function once(mode)
  if mode == "spawn" then
    local p = assert(core.spawn(ENGINE))
    local r = assert(p:wait())
    return r.exit == 0 and 0 or 1
  end
  local res = mode == "call" and rt:call({ pack = "true" }) or rt:exec({ bin = "/bin/true" })
  if not res.ok then io.stderr:write("bench worker: ", tostring(res.error), "\n") end
  return res.ok and 0 or 1
end

for _ = 1, 10 do once(arg[4]) end -- warm: first calls build caches

io.stdout:setvbuf("line")
for line in io.lines() do
  local loops = tonumber(line:match("^loop (%d+)"))
  local t0, st = core.monotonic_us(), 0
  for _ = 1, loops or 1 do st = math.max(st, once(arg[4])) end
  io.write(string.format("%.1f %d\n", core.monotonic_us() - t0, st))
end
io.stderr:write(string.format("bench worker %s %s: %d MiB held, layers %s\n", iso, pack_dir, #hold,
  table.concat(rt:layers(), ",")))
rt:close()
