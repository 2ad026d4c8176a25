--- The `bwrap` driver (§10.6, §10.4 "containers"): the same stages as the
--- local driver, but the child runs under bubblewrap, an existing and
--- trusted container tool, in its own mount, pid, ipc, uts, user and
--- (unless the pack may use the network) network namespaces, with a
--- read-only view of the host, a fresh /tmp, /home and /root hidden, no
--- capabilities, and only its jail (and the call's private directory)
--- writable. Packs run unchanged: paths inside are the paths outside.
---
--- What it does not keep from the local driver: the local driver executes
--- the very descriptor it checked; here bwrap executes the checked path
--- again, inside a read-only view of the same file system.
---@class hcp.driver.Bwrap : hcp.driver.Local
local Local = require("hcp.driver.local")

local Bwrap = setmetatable({}, { __index = Local })
Bwrap.__index = Bwrap
Bwrap.name = "bwrap"

local core = require("hcp.core")

-- Directories of people's files: replaced by an empty tmpfs inside.
local HIDDEN = { "/home", "/root", "/Users" }

local function base_args(net)
  local args = { "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL" }
  if net then args[#args + 1] = "--share-net" end
  for _, a in ipairs({ "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp" }) do
    args[#args + 1] = a
  end
  for _, d in ipairs(HIDDEN) do
    if core.kind(d) == "dir" then
      args[#args + 1] = "--tmpfs"
      args[#args + 1] = d
    end
  end
  return args
end

--- A bwrap driver, if bubblewrap is in search_path and can make its
--- namespaces on this host (probed once, with /bin/true).
---@param host hcp.DriverHost
---@return hcp.driver.Bwrap? driver, string? err
function Bwrap.new(host)
  local path = core.resolve("bwrap", host.search_path)
  if not path then
    return nil, "bwrap not found in " .. host.search_path .. " (Debian package bubblewrap)"
  end
  local probe_args = base_args(false)
  for _, a in ipairs({ "--", "/bin/true" }) do probe_args[#probe_args + 1] = a end
  local proc, err = core.spawn({ path = path, argv = probe_args, env = {}, cwd = "/", timeout_ms = 10000 })
  if not proc then return nil, err end
  local r = proc:wait()
  if r.exit ~= 0 then
    return nil, "bwrap cannot create its namespaces here: " .. (r.stderr:match("[^\n]+") or ("exit " .. r.exit))
  end
  return setmetatable({ host = host, bwrap = path }, Bwrap)
end

--- Stage 3, under bubblewrap: the pack root read-only (read-write when it
--- is the jail, as in mode none), the jail and the call's private directory
--- read-write, cwd the jail.
---@param ctx hcp.DriverContext
---@param spec table core.spawn options without cwd
---@return userdata? proc, string? err, integer? errno
function Bwrap:spawn(ctx, spec)
  local args = base_args(ctx.network)
  local function bind(kind, dir)
    args[#args + 1] = kind
    args[#args + 1] = dir
    args[#args + 1] = dir
  end
  if ctx.pack_root and ctx.pack_root ~= ctx.jail then bind("--ro-bind", ctx.pack_root) end
  bind("--bind", ctx.jail)
  if ctx.scratch then bind("--bind", ctx.scratch) end
  for _, a in ipairs({ "--chdir", ctx.jail, "--", spec.path }) do args[#args + 1] = a end
  for i = 2, #spec.argv do args[#args + 1] = spec.argv[i] end
  spec.path, spec.argv, spec.cwd, spec.beneath = self.bwrap, args, ctx.jail, nil
  -- only limits reach here in spec.isolation (hcp.isolation.choose)
  return core.spawn(spec)
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
  local l = { "bwrap", "mountns", "pidns", "ipcns", "utsns", "userns", "ro_root", "caps" }
  if not ctx.network then l[#l + 1] = "netns" end
  return l
end

return Bwrap
