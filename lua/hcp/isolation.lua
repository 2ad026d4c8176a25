--- Stronger isolation (§10.4): which layers a runtime asks the C core for,
--- and what each call's layers contain. A pack never changes for any of it
--- (§10.4.2): everything here is derived from the runtime's options, the
--- host, and what the pack already declares (its jail, network need, limits).
---
--- Layers: landlock (filesystem), seccomp (syscalls), netns (no network
--- unless the pack may use it), pidns (own pid namespace and /proc), caps
--- (no capabilities), limits (rlimits and a pids cgroup).
---@class hcp.isolation
local M = {}

local core = require("hcp.core")

M.LAYERS = { "landlock", "seccomp", "netns", "pidns", "caps", "limits" }
local KNOWN = {}
for _, l in ipairs(M.LAYERS) do KNOWN[l] = true end

-- Documented defaults of wrap.limits (docs/security.md).
M.DEFAULT_LIMITS = { cpu_s = 300, memory_mb = 8192, file_mb = 4096, nofile = 1024, procs = 256 }

-- What a dynamically linked program needs to read: the system directories,
-- and from /etc only the files the C library and common tools read (all of
-- /etc would include secrets that root owns, and a child runs as the
-- runtime's uid).
M.SYSTEM_READ = {
  "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
  "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
  "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
  "/etc/gai.conf", "/etc/protocols", "/etc/services", "/etc/ssl", "/etc/ca-certificates",
  "/etc/alternatives", "/etc/magic", "/etc/magic.mime", "/etc/mime.types", "/etc/xml", "/etc/sgml",
  "/etc/terminfo", "/etc/inputrc", "/etc/locale.alias", "/etc/papersize",
  "/sys/devices/system/cpu",
}
-- Device files every program may use as files.
M.DEVICES = { "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom" }

local probe_cache
--- What the host offers, from the C core's probe (cached per process).
---@return table<string, { available: boolean, reason: string? }>
function M.probe()
  if not probe_cache then
    local ok, p = pcall(core.probe)
    probe_cache = ok and p or {}
  end
  return probe_cache
end

-- Whether a named layer can be applied on this host, and why not.
local function availability(layer, probe)
  local function need(key)
    local p = probe[key]
    if not p then return false, "the C core cannot probe " .. key end
    if not p.available then return false, p.reason or (key .. " unavailable") end
    return true
  end
  if layer == "limits" then
    return true -- rlimits always; the pids cgroup is added where writable
  elseif layer == "netns" or layer == "pidns" then
    local ok, why = need(layer)
    if not ok then return false, why end
    if core.geteuid() ~= 0 then return need("userns") end
    return true
  end
  return need(layer)
end

--- Decide the runtime's layers from its `isolation` option.
---@param option "auto"|"minimal"|string[]
---@param mode string sandbox | native-local
---@param driver string driver name
---@return table<string, boolean>? layers, string? err
function M.choose(option, mode, driver)
  local probe = M.probe()
  local chosen = {}
  -- bwrap brings its own namespaces; Landlock and seccomp would stop it
  -- from making them
  local with_bwrap = { landlock = "bubblewrap mounts, which Landlock forbids",
    seccomp = "bubblewrap needs the syscalls the filter denies" }
  -- under bwrap these come from bubblewrap itself (hcp.driver.bwrap:layers)
  local by_bwrap = { netns = true, pidns = true, caps = true }
  if option == "minimal" then return chosen end
  if option == "auto" then
    -- native-local is a trust decision about the host: auto adds nothing there
    if mode == "native-local" then return chosen end
    for _, l in ipairs(M.LAYERS) do
      local skip = driver == "bwrap" and (with_bwrap[l] or by_bwrap[l])
      if not skip and availability(l, probe) then chosen[l] = true end
    end
    return chosen
  end
  for _, l in ipairs(option) do
    if KNOWN[l] and not (driver == "bwrap" and by_bwrap[l]) then
      if driver == "bwrap" and with_bwrap[l] then
        return nil, string.format("sandbox: isolation %q unavailable: not with driver bwrap (%s)", l, with_bwrap[l])
      end
      local ok, why = availability(l, probe)
      if not ok then return nil, string.format("sandbox: isolation %q unavailable: %s", l, why) end
      chosen[l] = true
    end
  end
  return chosen
end

--- The doctor's view: every layer, whether this host has it, why not, and
--- whether a runtime with these options uses it (default: "auto", sandbox,
--- the local driver). Under bwrap, netns/pidns/caps come from bubblewrap.
---@param option any isolation option
---@param mode string?
---@param driver string?
---@return { name: string, available: boolean, used: boolean, reason: string?, detail: string? }[]
function M.report(option, mode, driver)
  local probe = M.probe()
  driver = driver or "local"
  local auto = M.choose(option or "auto", mode or "sandbox", driver) or {}
  local out = {}
  for _, l in ipairs(M.LAYERS) do
    local ok, why = availability(l, probe)
    local by_bwrap = driver == "bwrap" and (l == "netns" or l == "pidns" or l == "caps")
    local entry = { name = l, available = ok, used = auto[l] == true or by_bwrap, reason = (not ok) and why or nil }
    if by_bwrap then entry.detail = "by bubblewrap" end
    if l == "landlock" and probe.landlock and probe.landlock.abi then entry.detail = "ABI " .. probe.landlock.abi end
    if l == "limits" then
      local cg = probe.cgroup
      if cg and cg.available then
        entry.detail = "rlimits, pids cgroup v" .. tostring(cg.version) .. " at " .. tostring(cg.path)
      else
        entry.detail = "rlimits only (no writable pids cgroup: " .. tostring(cg and cg.reason) .. ")"
      end
    end
    out[#out + 1] = entry
  end
  return out
end

local function merged_limits(limits)
  local out = {}
  for k, v in pairs(M.DEFAULT_LIMITS) do out[k] = v end
  for k, v in pairs(limits or {}) do out[k] = v end
  return out
end

--- The parent cgroup of every call: `<pids controller>/hcp`, made once and
--- kept (one empty directory); each call gets its own child of it, removed
--- when the call ends, so nothing is left behind even by a runtime that was
--- never closed.
---@return string? dir
local function parent_cgroup()
  local cg = M.probe().cgroup
  if not (cg and cg.available and cg.path) then return nil end
  local dir = cg.path .. "/hcp"
  if core.kind(dir) == "dir" or core.mkdir(dir) or core.kind(dir) == "dir" then return dir end
  return nil
end

local call_seq = 0

-- Call cgroups whose last processes were still exiting at cleanup (killing
-- a pid namespace is asynchronous): retried at the next call and at exit.
local busy_cgroups = {}
local function remove_cgroup(dir)
  if not core.rmdir(dir) and core.kind(dir) == "dir" then busy_cgroups[dir] = true end
end
local function retry_busy()
  for dir in pairs(busy_cgroups) do
    if core.rmdir(dir) or not core.kind(dir) then busy_cgroups[dir] = nil end
  end
end
M._exit_guard = setmetatable({}, { __gc = function()
  for _ = 1, 20 do
    retry_busy()
    if next(busy_cgroups) == nil then return end
    os.execute("sleep 0.05")
  end
end })

--- The isolation table for one core.spawn, and the layer names applied.
---@param layers table<string, boolean> from choose()
---@param call { jail: string, scratch: string?, pack_root: string?, bin_path: string, network: boolean, limits: table?, tmpdir: string? }
---@return table spec, string[] applied, fun() cleanup
function M.for_call(layers, call)
  local spec, applied = {}, {}
  local cleanup = function() end
  if layers.landlock then
    local read, write = {}, {}
    for _, p in ipairs(M.SYSTEM_READ) do read[#read + 1] = p end
    if layers.pidns then read[#read + 1] = "/proc" end -- only the child's own processes are there
    if call.pack_root then read[#read + 1] = call.pack_root end
    read[#read + 1] = call.bin_path
    write[#write + 1] = call.jail
    if call.scratch then write[#write + 1] = call.scratch end
    for _, d in ipairs(M.DEVICES) do write[#write + 1] = d end
    spec.landlock = { read = read, write = write }
    applied[#applied + 1] = "landlock"
  end
  if layers.seccomp then
    spec.seccomp = true
    applied[#applied + 1] = "seccomp"
  end
  if layers.netns and not call.network then
    spec.netns = true
    applied[#applied + 1] = "netns"
  end
  if layers.pidns then
    spec.pidns = true
    applied[#applied + 1] = "pidns"
  end
  if layers.caps then
    spec.caps = true
    applied[#applied + 1] = "caps"
  end
  if layers.limits then
    local l = merged_limits(call.limits)
    spec.rlimits = { cpu_s = l.cpu_s, as_mb = l.memory_mb, fsize_mb = l.file_mb, nofile = l.nofile }
    applied[#applied + 1] = "limits"
    local parent = parent_cgroup()
    if parent then
      retry_busy()
      call_seq = call_seq + 1
      local dir = string.format("%s/call-%d-%d", parent, core.getpid(), call_seq)
      local fh = core.mkdir(dir) and io.open(dir .. "/pids.max", "w")
      if fh and fh:write(tostring(l.procs)) and fh:close() then
        spec.cgroup = dir
        applied[#applied + 1] = "pids_cgroup"
        cleanup = function() remove_cgroup(dir) end
      else
        if fh then fh:close() end
        core.rmdir(dir)
      end
    end
    if not spec.cgroup then
      -- without a pids cgroup, RLIMIT_NPROC is the bound (per uid, and
      -- not enforced for root: docs/security.md says so)
      spec.rlimits.nproc = l.procs
    end
  end
  return spec, applied, cleanup
end

return M
