--- The `bwrap` driver (§10.6, §10.4 "containers"): the same stages as the
--- local driver, but the child runs under bubblewrap, an existing and
--- trusted container tool, in its own mount, pid, ipc, uts, user and
--- (unless the pack may use the network) network namespaces, with the same
--- view of the host as the local driver's constructed root (hcp.view): the
--- system paths and the pack read-only, only its jail (and the call's
--- private directory) writable, no capabilities. Packs run unchanged: paths
--- inside are the paths outside.
---
--- A root runtime starts bubblewrap as the run_as uid (so its user
--- namespace maps that uid, never host root), after the C core has bound
--- the paths only root may reach at /tmp/<i> of a private mount namespace
--- (isolation.stage); the checked binary is bound from that staging (or, not
--- as root, by descriptor: --ro-bind-fd), so a bin swapped for a link after
--- the check is not what runs. bwrap's options go through a descriptor
--- (--args), and an argument list past bwrap's limit through a launcher.
---@class hcp.driver.Bwrap : hcp.driver.Local
local Local = require("hcp.driver.local")

local Bwrap = setmetatable({}, { __index = Local })
Bwrap.__index = Bwrap
Bwrap.name = "bwrap"

local core = require("hcp.core")
local view = require("hcp.view")
local isolation = require("hcp.isolation")

--- A bwrap driver, if bubblewrap is in search_path and can make its
--- namespaces on this host (probed once, with /bin/true, as a call runs).
---@param host hcp.DriverHost
---@return hcp.driver.Bwrap? driver, string? err
function Bwrap.new(host)
  local path = core.resolve("bwrap", host.search_path)
  if not path then
    return nil, "bwrap not found in " .. host.search_path .. " (Debian package bubblewrap)"
  end
  local v = view.paths({ system = isolation.SYSTEM_READ, bin_path = "/bin/true", jail = "/" })
  v.rw = {}
  local opts = view.bwrap_spawn(path, v, { argv = { "true" }, env = {}, timeout_ms = 10000,
    isolation = core.geteuid() == 0 and { run_as = host.run_as } or nil }, { network = false })
  local proc, err = core.spawn(opts)
  if not proc then return nil, err end
  local r = proc:wait()
  if r.exit ~= 0 then
    return nil, "bwrap cannot create its namespaces here: " .. (r.stderr:match("[^\n]+") or ("exit " .. r.exit))
  end
  return setmetatable({ host = host, bwrap = path }, Bwrap)
end

--- Stage 3, under bubblewrap: the call's view (ctx.view), cwd the jail.
---@param ctx hcp.DriverContext
---@param spec table core.spawn options without cwd
---@return userdata? proc, string? err, integer? errno
function Bwrap:spawn(ctx, spec)
  -- bwrap execs the bin by its path inside; a bin that is no longer a
  -- regular file (a FIFO swapped in after load) is refused here with the
  -- local driver's words, rather than by bwrap's own exec
  local real = core.realpath(spec.path)
  if not real or core.filetype(real) ~= "file" then
    return nil, string.format("spawn: %s: not a regular executable file", spec.path), 13
  end
  -- each path of the view resolved once, for both of what follows
  local reals = {}
  local function realpath(p)
    if reals[p] == nil then reals[p] = core.realpath(p) or false end
    return reals[p] or nil
  end
  -- what bubblewrap binds is what the paths lead to now: never the host's
  -- /proc, /dev or /tmp through a link, nor a device node (view.check_sources)
  local ok, verr = view.check_sources(ctx.view, realpath, core.filetype)
  if not ok then return nil, verr, 22 end
  -- the host's listening unix sockets inside the view are covered
  local hide, serr, serrno = view.hidden_sockets(ctx.view, realpath, core.host_sockets)
  if not hide then return nil, "spawn: view: " .. tostring(serr), serrno end
  ctx.view.hide = hide
  -- issue 14: a call with a proxy runs in the namespace the core made for
  -- it (the proxy listens there): bubblewrap shares that one
  local proxied = spec.isolation ~= nil and spec.isolation.egress ~= nil
  local opts, err = view.bwrap_spawn(self.bwrap, ctx.view, spec, { network = ctx.network or proxied })
  if not opts then return nil, err end
  return core.spawn(opts)
end

--- bwrap reports a child killed by signal N as its own exit 128+N (its
--- --json-status-fd says no more). The driver reads such a status back as
--- the signal, so a killed child is reported as killed and its half-written
--- outputs are not written back. A tool that itself exits with 129..192 is
--- read as a signal too: the price of not replacing good files.
---@param ctx hcp.DriverContext
---@param r table the core's result
---@return table r
function Bwrap:result(ctx, r) -- luacheck: ignore 212
  if not r.signal and not r.timed_out and r.exit > 128 and r.exit <= 128 + 64 then
    r.signal = r.exit - 128
  end
  return r
end

--- The namespaces and restrictions bubblewrap adds.
---@param ctx hcp.DriverContext
---@return string[]
function Bwrap:layers(ctx) -- luacheck: ignore 212
  local l = { "bwrap", "rootfs", "pidns", "ipcns", "utsns", "userns", "caps" }
  if not ctx.network then l[#l + 1] = "netns" end
  return l
end

return Bwrap
