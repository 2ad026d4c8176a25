--- Stronger isolation (§10.4): which layers a runtime asks the C core for,
--- and what each call's layers contain. A pack never changes for any of it
--- (§10.4.2): everything here is derived from the runtime's options, the
--- host, and what the pack already declares (its jail, network need, limits).
---
--- Layers: rootfs (a constructed root: the child sees only its view,
--- hcp.view), landlock (filesystem rules; with ABI 4 no TCP without network),
--- scopes (Landlock ABI 6: no abstract unix socket or signal outside the
--- call), seccomp (syscalls), netns (no network unless the pack may use
--- it), ipcns (SysV and POSIX IPC of its own), pidns (own pid namespace and
--- /proc), caps (no capabilities), run_as (never host uid 0), limits
--- (rlimits clamped to the runtime's own, and a pids cgroup nested under
--- the runtime's own cgroup).
---@class hcp.isolation
local M = {}

local core = require("hcp.core")
local view = require("hcp.view")
local egress = require("hcp.egress")

M.LAYERS = { "rootfs", "landlock", "scopes", "seccomp", "netns", "ipcns", "pidns", "caps", "run_as", "limits" }
local KNOWN = {}
for _, l in ipairs(M.LAYERS) do KNOWN[l] = true end

-- Documented defaults of wrap.limits (docs/security.md).
M.DEFAULT_LIMITS = { cpu_s = 300, memory_mb = 8192, file_mb = 4096, nofile = 1024, procs = 512 }

-- The fewest processes a pid namespace's own pid_max can bound (Linux
-- refuses a pid_max below 301); below it `procs` needs a pids cgroup.
M.PIDS_MAX_MIN = 300

-- Whom the child runs as when the runtime is root: nobody/nogroup, the
-- overflow ids every Linux has and that own no file. The child shares the
-- uid with other nobody processes of the host, but cannot see them (pid
-- namespace) nor signal them (Landlock scope); operators who run several
-- runtimes side by side may give each its own (hcp.create{ run_as = }).
M.DEFAULT_RUN_AS = { uid = 65534, gid = 65534 }

-- What a dynamically linked program needs to read: the system directories,
-- and from /etc only the files the C library and common tools read (all of
-- /etc would include secrets that root owns).
-- The list lives in the C core (src/early.c), which begins a call's view
-- with it before any of this Lua has loaded (`hcp run`'s early child).
M.SYSTEM_READ = core.SYSTEM_READ
-- Device files every program may use as files.
M.DEVICES = { "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom" }

-- Under bwrap these come from bubblewrap itself; Landlock's filesystem
-- rules and the seccomp filter would stop it from making them.
local BY_BWRAP = { netns = true, pidns = true, caps = true, rootfs = true, ipcns = true }
local NOT_WITH_BWRAP = { landlock = "bubblewrap mounts, which Landlock forbids",
  seccomp = "bubblewrap needs the syscalls the filter denies" }

local probe_cache
--- What the host offers, from the C core's probe (cached per process).
---@return table<string, table>
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
  elseif layer == "scopes" then
    local ok, why = need("landlock")
    if not ok then return false, why end
    if not probe.landlock.scopes then return false, "Landlock ABI " .. tostring(probe.landlock.abi) .. " has no scopes (ABI 6)" end
    return true
  elseif layer == "netns" or layer == "pidns" then
    local ok, why = need(layer)
    if not ok then return false, why end
    if core.geteuid() ~= 0 then return need("userns") end
    return true
  end
  return need(layer)
end

-- A list's layers, checked against the driver and the host.
local function choose_list(option, driver, probe)
  local chosen = {}
  for _, l in ipairs(option) do
    if KNOWN[l] and not (driver == "bwrap" and BY_BWRAP[l]) then
      if driver == "bwrap" and NOT_WITH_BWRAP[l] then
        return nil, string.format("sandbox: isolation %q unavailable: not with driver bwrap (%s)", l, NOT_WITH_BWRAP[l])
      end
      local ok, why = availability(l, probe)
      if not ok then return nil, string.format("sandbox: isolation %q unavailable: %s", l, why) end
      chosen[l] = true
    end
  end
  -- a child of another uid reaches its jail only through the view (the
  -- runtime's own directories are closed to other users)
  if chosen.run_as and driver ~= "bwrap" and not chosen.rootfs then
    return nil, 'sandbox: isolation "run_as" needs "rootfs" (the child reaches its jail through the constructed root)'
  end
  -- a child that kept capabilities could unmount or remount its own view
  if chosen.rootfs and not chosen.caps then
    return nil, 'sandbox: isolation "rootfs" needs "caps" (a child with capabilities could remount its view)'
  end
  if chosen.landlock and availability("scopes", probe) then chosen.scopes = true end
  return chosen
end

--- Decide the runtime's layers from its `isolation` option.
---@param option "auto"|"minimal"|string[]
---@param mode string sandbox | native-local
---@param driver string driver name
---@return table<string, boolean>? layers, string? err
function M.choose(option, mode, driver)
  local probe = M.probe()
  if option == "minimal" then return {} end
  if option ~= "auto" then return choose_list(option, driver, probe) end
  -- native-local is a trust decision about the host: auto adds nothing there
  if mode == "native-local" then return {} end
  local chosen = {}
  for _, l in ipairs(M.LAYERS) do
    local skip = driver == "bwrap" and (NOT_WITH_BWRAP[l] or BY_BWRAP[l])
    if not skip and availability(l, probe) then chosen[l] = true end
  end
  if chosen.run_as and driver ~= "bwrap" and not chosen.rootfs then chosen.run_as = nil end
  if chosen.rootfs and not chosen.caps then chosen.rootfs, chosen.run_as = nil, nil end
  return chosen
end

--- Checks the operator's `run_as` and `sockets` options of hcp.create.
--- `run_as`: { uid = N, gid = N } (not 0); `sockets`: pack name (or "*")
--- → absolute paths of unix sockets the operator lets that pack's child
--- reach (bound read-only into its view). A pack cannot grant itself one.
---@param opts table
---@return { uid: integer, gid: integer }? run_as, table<string, string[]>|string sockets_or_err
function M.check_options(opts)
  local run_as = M.DEFAULT_RUN_AS
  if opts.run_as ~= nil then
    local r = opts.run_as
    for k in pairs(r) do
      if k ~= "uid" and k ~= "gid" then
        return nil, string.format("hcp.create: option \"run_as\": unknown key %q (uid, gid)", tostring(k))
      end
    end
    for _, k in ipairs({ "uid", "gid" }) do
      if math.type(r[k]) ~= "integer" or r[k] < 1 or r[k] > 2147483646 then
        return nil, string.format("hcp.create: option \"run_as\": %s must be an integer from 1 to 2147483646 (never 0)", k)
      end
    end
    run_as = { uid = r.uid, gid = r.gid }
  end
  local sockets = {}
  for pack, list in pairs(opts.sockets or {}) do
    if type(pack) ~= "string" or not (pack == "*" or pack:match("^[a-z0-9][a-z0-9._-]*$")) then
      return nil, string.format("hcp.create: option \"sockets\": key %q is not a pack name or \"*\"", tostring(pack))
    end
    if type(list) ~= "table" or #list == 0 then
      return nil, string.format("hcp.create: option \"sockets\": sockets[%q] must be an array of absolute paths", pack)
    end
    for i, p in ipairs(list) do
      if type(p) ~= "string" or p:sub(1, 1) ~= "/" or p:find("\0", 1, true) or core.normalize(p) == "/" then
        return nil, string.format("hcp.create: option \"sockets\": sockets[%q][%d] must be an absolute path", pack, i)
      end
    end
    sockets[pack] = list
  end
  return run_as, sockets
end

--- The granted sockets of a pack that exist and are sockets.
---@param sockets table<string, string[]>
---@param pack string?
---@return string[]? paths, string? err
function M.sockets_for(sockets, pack)
  local out = {}
  for _, key in ipairs({ "*", pack }) do
    for _, p in ipairs(sockets[key] or {}) do
      local kind = core.filetype(p)
      if kind and kind ~= "socket" then
        return nil, string.format("sandbox: granted socket %s is a %s, not a socket", p, kind)
      end
      if kind then out[#out + 1] = core.normalize(p) end
    end
  end
  return out
end

-- What a child can do as root when run_as is not applied (docs/security.md).
M.ROOT_WARNING = "the child runs as host uid 0: it can read and write every file root can "
  .. "that its other layers do not hide, and, without seccomp and a pid namespace, signal or ptrace "
  .. "any process of the host"

local function limits_detail(probe)
  local _, clamped = M.clamped_limits(nil)
  local parts = {}
  for _, k in ipairs({ "cpu_s", "memory_mb", "file_mb", "nofile", "procs" }) do
    local c = clamped[k]
    if c then parts[#parts + 1] = string.format("%s %d (the runtime's hard limit; default %d)", k, c.got, c.asked) end
  end
  local d = #parts > 0 and ("rlimits clamped to the runtime's own: " .. table.concat(parts, ", ")) or "rlimits"
  local cg = probe.cgroup
  if probe.pidns and probe.pidns.pid_max then
    d = d .. string.format(", procs as the pid_max of the call's pid namespace (procs >= %d; the call stays "
      .. "in the runtime's cgroup)", M.PIDS_MAX_MIN)
    if cg and cg.available then
      return d .. string.format(", else a pids cgroup v%d under the runtime's own cgroup (%s/hcp)", cg.version, cg.path)
    end
  elseif cg and cg.available then
    return d .. string.format(", pids cgroup v%d under the runtime's own cgroup (%s/hcp)", cg.version, cg.path)
  end
  return d .. " only (no pids cgroup under the runtime's own cgroup: " .. tostring(cg and cg.reason)
    .. "; calls stay in the runtime's cgroup, and procs is RLIMIT_NPROC, per uid)"
end

local function layer_detail(l, probe, driver, used, run_as)
  if driver == "bwrap" and BY_BWRAP[l] then return "by bubblewrap" end
  if driver == "bwrap" and NOT_WITH_BWRAP[l] then return "not with driver bwrap: " .. NOT_WITH_BWRAP[l] end
  if l == "landlock" and probe.landlock and probe.landlock.abi then
    return "ABI " .. probe.landlock.abi .. (probe.landlock.tcp and "; TCP bind/connect denied without network" or "")
  elseif l == "scopes" then
    return driver == "bwrap" and "abstract unix sockets and signals scoped to the call (a scope-only ruleset around bubblewrap)"
      or "abstract unix sockets and signals scoped to the call"
  elseif l == "rootfs" and probe.rootfs and probe.rootfs.available then
    return "the child sees only its view (" .. tostring(probe.rootfs.method) .. ")"
  elseif l == "run_as" and core.geteuid() == 0 then
    if not (run_as and math.type(run_as.uid) == "integer" and math.type(run_as.gid) == "integer") then
      run_as = M.DEFAULT_RUN_AS
    end
    if used then return string.format("the child runs as uid %d, gid %d", run_as.uid, run_as.gid) end
    return "NOT USED: " .. M.ROOT_WARNING
  elseif l == "limits" then
    return limits_detail(probe)
  end
  return nil
end

--- The doctor's view: every layer, whether this host has it, why not, and
--- whether a runtime with these options uses it (default: "auto", sandbox,
--- the local driver). Under bwrap, netns/pidns/caps/rootfs/ipcns come from
--- bubblewrap.
---@param option any isolation option
---@param mode string?
---@param driver string?
---@param run_as { uid: integer, gid: integer }? the runtime's run_as option
---@return { name: string, available: boolean, used: boolean, reason: string?, detail: string? }[]
function M.report(option, mode, driver, run_as)
  local probe = M.probe()
  driver = driver or "local"
  local auto = M.choose(option or "auto", mode or "sandbox", driver) or {}
  local out = {}
  for _, l in ipairs(M.LAYERS) do
    local ok, why = availability(l, probe)
    local by_bwrap = driver == "bwrap" and BY_BWRAP[l] or false
    local used = auto[l] == true or by_bwrap
    if l == "run_as" and core.geteuid() ~= 0 then why = "not needed: the runtime is not root (the child keeps its uid)" end
    out[#out + 1] = { name = l, available = ok, used = used, reason = (not ok) and why or nil,
      detail = layer_detail(l, probe, driver, used, type(run_as) == "table" and run_as or nil) }
  end
  return out
end

local function merged_limits(limits)
  local out = {}
  for k, v in pairs(M.DEFAULT_LIMITS) do out[k] = v end
  for k, v in pairs(limits or {}) do out[k] = v end
  return out
end

-- The names of the core's rlimits, from wrap.limits' names.
local RLIMIT_OF = { cpu_s = "cpu_s", memory_mb = "as_mb", file_mb = "fsize_mb", nofile = "nofile", procs = "nproc" }

--- wrap.limits (defaults merged) clamped to the runtime's own hard limits:
--- a child never gets more than the runtime may have, and a host with lower
--- limits (`ulimit -n 512`) does not refuse every call. Returns the limits
--- and what was clamped: { name = { asked =, got = } }.
---@param limits table?
---@return table limits, table clamped
function M.clamped_limits(limits)
  local l, clamped = merged_limits(limits), {}
  local hard = core.getrlimits()
  for k, v in pairs(l) do
    local h = hard[RLIMIT_OF[k]]
    if h and v > h then
      clamped[k] = { asked = v, got = h }
      l[k] = h
    end
  end
  return l, clamped
end

--- The parent cgroup of every call: `<the runtime's own cgroup>/hcp`, so a
--- limit the operator set on the runtime bounds every call; made once and
--- kept (one empty directory); each call gets its own child of it, removed
--- when the call ends. On cgroup v2 the pids controller is enabled for its
--- children.
---@return string? dir
local function parent_cgroup()
  local cg = M.probe().cgroup
  if not (cg and cg.available and cg.path) then return nil end
  local dir = cg.path .. "/hcp"
  if not (core.kind(dir) == "dir" or core.mkdir(dir) or core.kind(dir) == "dir") then return nil end
  if cg.version == 2 then
    local fh = io.open(dir .. "/cgroup.subtree_control", "w")
    local ok = fh and fh:write("+pids") and fh:close()
    if not ok then return nil end
  end
  return dir
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

--- Whether a call's cgroup is still waiting to be removed (the exit guard
--- retries it): a process that exits without closing its Lua state would
--- leave it behind.
---@return boolean
function M.cleanup_pending()
  retry_busy()
  return next(busy_cgroups) ~= nil
end

-- A pids cgroup for the call: its dir and the cleanup, or nil.
local function call_cgroup(procs)
  local parent = parent_cgroup()
  if not parent then return nil end
  retry_busy()
  call_seq = call_seq + 1
  local dir = string.format("%s/call-%d-%d", parent, core.getpid(), call_seq)
  local fh = core.mkdir(dir) and io.open(dir .. "/pids.max", "w")
  if fh and fh:write(tostring(procs)) and fh:close() then
    return dir, function() remove_cgroup(dir) end
  end
  if fh then fh:close() end
  core.rmdir(dir)
  return nil
end

-- `procs` as the pid_max of the call's own pid namespace: exact, free, and
-- the call stays in the runtime's cgroup, so a limit the operator put there
-- still bounds it. Needs the pidns layer, a kernel with a per-namespace
-- pid_max (6.14), and a bound it can express.
local function pids_in_ns(layers, procs)
  local p = M.probe().pidns
  return layers.pidns and p and p.pid_max and procs >= M.PIDS_MAX_MIN
end

local function add_limits(spec, applied, layers, call)
  local l = M.clamped_limits(call.limits)
  spec.rlimits = { cpu_s = l.cpu_s, as_mb = l.memory_mb, fsize_mb = l.file_mb, nofile = l.nofile }
  applied[#applied + 1] = "limits"
  if pids_in_ns(layers, l.procs) then
    spec.pids_max = l.procs
    applied[#applied + 1] = "pids_ns"
    return nil
  end
  -- moving a process into a cgroup costs ~10 ms when the machine is idle
  -- (an RCU grace period): only where the namespace cannot do it
  local dir, cleanup = call_cgroup(l.procs)
  if dir then
    spec.cgroup = dir
    applied[#applied + 1] = "pids_cgroup"
    return cleanup
  end
  -- without a pids cgroup, RLIMIT_NPROC is the bound (per uid, and not
  -- enforced for root: docs/security.md says so)
  spec.rlimits.nproc = l.procs
  return nil
end

-- The rules every call's Landlock ruleset has (the system paths, the
-- devices), from descriptors the core keeps open (core.landlock_base),
-- made once per process; false where the core cannot.
local ll_base
local function landlock_base()
  if ll_base == nil then
    ll_base = core.landlock_base and core.landlock_base({ read = M.SYSTEM_READ, write = M.DEVICES }) or false
  end
  return ll_base or nil
end

local function add_landlock(spec, applied, layers, call)
  local probe = M.probe().landlock or {}
  local ll = {}
  if layers.landlock then
    local read, write = {}, {}
    ll.base = landlock_base()
    if not ll.base then
      for _, p in ipairs(M.SYSTEM_READ) do read[#read + 1] = p end
      for _, d in ipairs(M.DEVICES) do write[#write + 1] = d end
    end
    if layers.pidns then read[#read + 1] = "/proc" end -- only the child's own processes are there
    if call.pack_root then read[#read + 1] = call.pack_root end
    read[#read + 1] = call.bin_path
    -- the pack root is read-only in every mode, also as the cwd of mode none
    if call.jail ~= call.pack_root then write[#write + 1] = call.jail end
    if call.scratch then write[#write + 1] = call.scratch end
    ll.read, ll.write = read, write
    applied[#applied + 1] = "landlock"
    -- a call with a proxy connects to it; inside its own namespace there
    -- is nothing else to connect to (add_egress)
    if not call.network and not egress.proxied(call.egress) and probe.tcp then
      ll.tcp = true
      applied[#applied + 1] = "landlock_tcp"
    end
  end
  if layers.scopes then
    ll.scopes = true
    applied[#applied + 1] = "scopes"
  end
  if next(ll) then spec.landlock = ll end
end

-- The jail, the private directory and what the runtime put there become
-- the run_as uid's (never the pack root).
-- issue 14: a call that declares hosts gets its own proxy (core.egress),
-- listening inside a network namespace of its own, whatever the layer
-- option says: without it the call would have the host's whole network.
-- A host that cannot make the namespace refuses the call. Under bwrap the
-- namespace is ours, and bubblewrap shares it (--share-net).
local function add_egress(spec, applied, call)
  if not egress.proxied(call.egress) then return true end
  local ok, why = availability("netns", M.probe())
  if not ok then
    return nil, string.format("sandbox: %s declares the hosts it reaches, and their proxy needs a network namespace, "
      .. "which this host cannot make (%s)", call.egress.who, why)
  end
  local eng, err = core.egress()
  if not eng then return nil, "sandbox: egress: " .. tostring(err) end
  if not spec.netns and call.driver ~= "bwrap" then applied[#applied + 1] = "netns" end
  spec.netns, spec.egress = true, eng
  applied[#applied + 1] = "egress"
  return true
end

local function hand_over(call, run_as)
  for _, dir in ipairs({ call.jail ~= call.pack_root and call.jail or false, call.scratch or false }) do
    if dir then
      local ok, err = core.chown_tree(dir, run_as.uid, run_as.gid)
      if not ok then return nil, "workspace: " .. tostring(err) end
    end
  end
  return true
end

-- The part of every call's view that is the same for all (the system
-- paths, /dev): built once per process in a mount namespace of its own
-- (core.view_base), which each call copies, then adds its own paths to.
-- Root only (a call's paths are cloned in the host's mount namespace); where
-- it cannot be made, every view is built from nothing, as before.
-- Made at a process's second view, not its first: a process that makes one
-- call (hcp run) would pay for the base and a copy of it, where one view
-- built from nothing costs the same as the base alone.
local base_cache, views = nil, 0
local function view_base()
  views = views + 1
  if base_cache == nil and views >= 2 then
    base_cache = core.geteuid() == 0 and core.view_base and core.view_base({ ro = M.SYSTEM_READ, tmp_mb = view.TMP_MB })
      or false
  end
  return base_cache or nil
end

--- The rootfs option of core.spawn for a view: on the base view where there
--- is one (only the call's own paths listed), else every path.
---@param v hcp.View
---@param bwrap boolean the bwrap driver (which builds its own)
---@return table
function M.rootfs_spec(v, bwrap)
  local base = not bwrap and view_base()
  if not base then return { ro = v.ro, rw = v.rw, tmp_mb = view.TMP_MB } end
  local system, ro = {}, {}
  for _, p in ipairs(M.SYSTEM_READ) do system[p] = true end
  for _, p in ipairs(v.ro) do
    if not system[p] then ro[#ro + 1] = p end
  end
  return { base = base, ro = ro, rw = v.rw, tmp_mb = view.TMP_MB }
end

---@class hcp.IsoCall
---@field jail string
---@field scratch string?
---@field pack_root string?
---@field bin_path string
---@field bin_beneath string?
---@field network boolean
---@field limits table?
---@field run_as { uid: integer, gid: integer }?
---@field sockets string[]?
---@field driver string?  "local" (default) or "bwrap"
---@field egress hcp.EgressPlan? what the call may reach (hcp.egress.for_call)

--- Whether a call's network namespace comes from the core's pool: a pid
--- namespace (so its end is its last process's), no network, no granted
--- socket, and no egress proxy (whose listeners need a namespace of its own).
---@param layers table<string, boolean> from choose()
---@param call { network: boolean?, sockets: table?, egress: hcp.EgressPlan? }
---@return boolean
function M.pools_netns(layers, call)
  return layers.netns and layers.pidns and not call.network and #(call.sockets or {}) == 0
    and not egress.proxied(call.egress) or false
end

--- The isolation table for one core.spawn, the layer names applied, the
--- cleanup, and the child's view (hcp.view; nil where neither the constructed
--- root nor bubblewrap shows one) — or nil and a refusal.
---@param layers table<string, boolean> from choose()
---@param call hcp.IsoCall
---@return table? spec, string[]|string applied_or_err, fun()? cleanup, hcp.View? view
function M.for_call(layers, call)
  local spec, applied = {}, {}
  local bwrap = call.driver == "bwrap"
  -- the view: what the constructed root or bubblewrap shows (none needed
  -- without either)
  local v = (layers.rootfs or bwrap) and view.paths({ system = M.SYSTEM_READ, pack_root = call.pack_root,
    bin_path = call.bin_path, bin_beneath = call.bin_beneath, jail = call.jail, scratch = call.scratch,
    sockets = call.sockets }) or nil
  if layers.rootfs then
    spec.rootfs = M.rootfs_spec(v, bwrap)
    applied[#applied + 1] = "rootfs"
  end
  add_landlock(spec, applied, layers, call)
  if layers.seccomp then
    spec.seccomp = true
    applied[#applied + 1] = "seccomp"
  end
  if layers.netns and not call.network then
    -- a network namespace lent by the core's pool (one call at a time, taken
    -- back only from a call that ended on its own: src/netns_pool.c); not
    -- when a granted socket could carry one of its sockets out to a service
    spec.netns = M.pools_netns(layers, call) and "pool" or true
    applied[#applied + 1] = "netns"
  end
  for _, l in ipairs({ "ipcns", "pidns", "caps" }) do
    if layers[l] then
      spec[l] = true
      applied[#applied + 1] = l
    end
  end
  if layers.run_as and call.run_as then
    local ok, err = hand_over(call, call.run_as)
    if not ok then return nil, err end
    spec.run_as = { uid = call.run_as.uid, gid = call.run_as.gid }
    applied[#applied + 1] = "run_as"
    if bwrap then spec.stage, v.source = view.staged(v, M.SYSTEM_READ) end
  end
  -- after the netns line: a proxied call gets a fresh namespace, never the pool's
  local ok, err = add_egress(spec, applied, call)
  if not ok then return nil, err end
  local cleanup = layers.limits and add_limits(spec, applied, layers, call) or function() end
  if spec.egress then
    local limits_undo = cleanup
    cleanup = function() spec.egress:close(); limits_undo() end
  end
  return spec, applied, cleanup, v
end

return M
