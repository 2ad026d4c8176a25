-- bench/lib.lua — what the make bench scripts share: samplers (processes
-- that time one call per request, over a FIFO pair), statistics, an idle
-- sleep, a temporary tree of packs, and the table printer. Figures mean
-- something only as ratios to a reference measured in the same run.
local core = require("hcp.core")

local M = {}

M.N = tonumber(os.getenv("HCP_BENCH_N")) or 300
M.CADENCES = { 0, 30 } -- ms of idle before each call: back to back, an agent's pace

local tmp
--- The bench's temporary directory (removed by M.cleanup).
function M.tmp()
  if not tmp then tmp = assert(core.mkdtemp("/tmp", "hcp-bench-")) end
  return tmp
end

function M.cleanup()
  if tmp then core.rmtree(tmp) end
end

function M.q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local poller
--- Sleep `ms` milliseconds without spinning (the machine is idle meanwhile).
--- The path of a command on $PATH, or nil.
function M.which(name)
  local p = io.popen("command -v " .. name .. " 2>/dev/null")
  local out = p:read("l")
  p:close()
  return out
end

function M.sleep_ms(ms)
  poller = poller or assert(core.poller())
  poller:arm(ms)
  poller:ready(ms + 1000)
  poller:clear()
end

--- Median and 90th percentile of a list of numbers.
function M.stats(samples)
  local s = table.move(samples, 1, #samples, 1, {})
  table.sort(s)
  local function at(q) return s[math.max(1, math.min(#s, math.floor(q * #s + 0.5)))] end
  return at(0.5), at(0.9)
end

--- `rounds` rounds of one sample per case, the case order rotated each
--- round, `gap` ms of idle before each sample: every case sees the same
--- machine. A case is { key =, name =, s = sampler, k = its command };
--- returns the samples (microseconds) by key.
function M.interleave(cases, rounds, gap)
  local samples = {}
  for _, c in ipairs(cases) do samples[c.key] = {} end
  for round = 1, rounds do
    for j = 0, #cases - 1 do
      local c = cases[(round + j) % #cases + 1]
      if gap > 0 then M.sleep_ms(gap) end
      local us, st = c.s:sample(c.k)
      if st ~= 0 then error(string.format("bench: %s failed (status %s)", c.name, tostring(st))) end
      local t = samples[c.key]
      t[#t + 1] = us
    end
  end
  return samples
end

local Sampler = {}
Sampler.__index = Sampler

--- Start `cmd` (a shell command line) as a sampler: each request line gets
--- one answer line "<us> <status>". Its stderr goes to the bench's log.
---@return table sampler
function M.sampler(name, cmd)
  local dir = M.tmp()
  local fin, fout = dir .. "/" .. name .. ".in", dir .. "/" .. name .. ".out"
  assert(os.execute("mkfifo " .. M.q(fin) .. " " .. M.q(fout)))
  assert(os.execute(string.format("%s <%s >%s 2>>%s &", cmd, M.q(fin), M.q(fout), M.q(dir .. "/log"))))
  local w = assert(io.open(fin, "w"))
  w:setvbuf("no")
  local r = assert(io.open(fout, "r"))
  return setmetatable({ name = name, w = w, r = r }, Sampler)
end

--- One sample of command `k` (default 0; a worker also takes "loop N"):
--- microseconds, status.
function Sampler:sample(k)
  self.w:write(tostring(k or 0), "\n")
  local line = self.r:read("l")
  if not line then error("bench: sampler " .. self.name .. " went away (see " .. M.tmp() .. "/log)") end
  local us, st = line:match("^(%S+) (%S+)")
  return tonumber(us), tonumber(st)
end

function Sampler:close()
  if self.closed then return end
  self.closed = true
  self.w:close()
  self.r:close()
end

--- A tree of packs: `true` and the `n - 1` others, all wrapping /bin/true.
function M.packs(n, name)
  local dir = M.tmp() .. "/" .. name
  assert(core.mkdir(dir))
  for i = 1, n do
    local pack = i == 1 and "true" or ("p" .. i)
    assert(core.mkdir(dir .. "/" .. pack))
    local fh = assert(io.open(dir .. "/" .. pack .. "/hcp.json", "w"))
    fh:write(string.format('{"hcp":1,"name":%q,"wrap":{"bin":"/bin/true"}}', pack))
    fh:close()
  end
  return dir
end

--- VmHWM (peak resident set) of this process, in bytes.
function M.peak_rss()
  local fh = assert(io.open("/proc/self/status"))
  local s = fh:read("a")
  fh:close()
  return tonumber(s:match("VmHWM:%s*(%d+)")) * 1024
end

--- "PASS" or "MISS" for a figure and its target.
function M.verdict(ok)
  return ok and "PASS" or "MISS"
end

return M
