--- The child's view of the host (§10.4 "read-only root, mounted pack dir"):
--- which host paths a call's child sees, read-only or read-write, each at
--- its host path (so argument paths stay valid), and nothing else. One view
--- for both drivers: the local driver gives it to the C core
--- (`isolation.rootfs`), the bwrap driver turns it into bubblewrap's
--- arguments (`bwrap_args`). Pure functions over explicit arguments.
---
--- What the view holds besides these paths is fixed: a minimal /dev (null,
--- zero, full, random, urandom, the fd links; under bwrap also tty, pts and
--- ptmx), a private /dev/shm and /tmp, and /proc of the child's own pid
--- namespace with /proc/sys read-only.
---@class hcp.view
local M = {}

local core = require("hcp.core")

-- Size of the private /tmp and /dev/shm (tmpfs, counted against memory).
M.TMP_MB = core.VIEW_TMP_MB

-- bubblewrap refuses more than 9000 arguments, its own options included
-- (--args does not help: what it reads counts too).
M.BWRAP_MAX_ARGS = 9000

---@class hcp.ViewCall
---@field system string[]    system paths (isolation.SYSTEM_READ)
---@field pack_root string?
---@field bin_path string    the checked binary
---@field bin_beneath string? the directory a relative bin was checked beneath
---@field jail string        the child's cwd (the pack root in mode none)
---@field scratch string?    the call's private directory
---@field sockets string[]?  socket paths the operator granted this pack

---@class hcp.View
---@field ro string[]
---@field rw string[]
---@field cwd string
---@field bin string
---@field bin_beneath string?
---@field hide string[]?  places of host sockets to cover (hidden_sockets; the bwrap driver sets it)

local function under_any(list, p)
  for _, base in ipairs(list) do
    if p == base or p:sub(1, #base + 1) == base .. "/" then return true end
  end
  return false
end

--- The view of one call. The pack root is read-only in every mode: in mode
--- none it is the cwd, but a program that writes gets its private
--- directory (TMPDIR) and its file-flag outputs, never the pack.
---@param c hcp.ViewCall
---@return hcp.View
function M.paths(c)
  local ro, rw = {}, {}
  for _, p in ipairs(c.system) do ro[#ro + 1] = p end
  if c.pack_root then ro[#ro + 1] = c.pack_root end
  -- the binary gets a bind of its own (pinning the checked file) unless a
  -- system directory, read-only and root's, shows it already
  if c.bin_beneath or not under_any(c.system, c.bin_path) then ro[#ro + 1] = c.bin_path end
  for _, s in ipairs(c.sockets or {}) do ro[#ro + 1] = s end
  if c.jail ~= c.pack_root then rw[#rw + 1] = c.jail end
  if c.scratch and c.scratch ~= c.jail then rw[#rw + 1] = c.scratch end
  return { ro = ro, rw = rw, cwd = c.jail, bin = c.bin_path, bin_beneath = c.bin_beneath }
end

--- The paths a bwrap started as another uid cannot be trusted to reach
--- itself (they may lie under directories only the runtime may enter): the
--- jail, the private directory, the pack root, granted sockets and the
--- binary (beneath its pack root when relative, so a link swapped in later
--- is refused). The C core binds path i at /tmp/<i> (`isolation.stage`).
---@param v hcp.View
---@param system string[]
---@return (string|table)[] stage, table<string, string> source
function M.staged(v, system)
  local sys = {}
  for _, p in ipairs(system) do sys[p] = true end
  local stage, source = {}, {}
  local function add(p, entry)
    if source[p] or sys[p] then return end
    stage[#stage + 1] = entry or p
    source[p] = "/tmp/" .. #stage
  end
  if v.bin_beneath then add(v.bin, { path = v.bin, beneath = v.bin_beneath }) end
  for _, p in ipairs(v.ro) do add(p) end
  for _, p in ipairs(v.rw) do add(p) end
  return stage, source
end

--- The view's paths checked as bubblewrap will bind them, every link
--- followed now: none may lead to the host's root, /dev, /proc or /tmp,
--- nor be a device node (the local driver's core does the same in its
--- plan). A path that does not exist is left to the bind (a missing
--- system path is skipped).
---@param v hcp.View
---@param realpath fun(p: string): string?
---@param filetype fun(p: string): string? core.filetype's answer
---@return true? ok, string? err
function M.check_sources(v, realpath, filetype)
  for _, list in ipairs({ v.ro, v.rw }) do
    for _, p in ipairs(list) do
      local real = realpath(p)
      local kind = real and filetype(real)
      -- the host's root, its /dev, /proc and /tmp: the C core's own rule
      -- (rootfs.c), which the local driver's plan applies
      local why = real and (core.view_reserved(real)
        or (kind == "char" or kind == "block") and "a device node cannot be part of the view (its /dev is its own)")
      if why then return nil, string.format("spawn: view: %s: resolves to %s: %s", p, real, why) end
    end
  end
  return true
end

--- The places where the view would show a listening unix socket of the
--- host inside one of its directories — a service under /usr/local or
--- /opt, say: connect(2) works through a read-only bind, so each is
--- covered by a read-only /dev/null (bwrap_args). `list_sockets(within)`
--- (core.host_sockets) gets the view's real paths and answers the sockets
--- inside them. A socket the view lists itself (one the operator granted)
--- stays. The local driver's core does the same in its plan.
---@param v hcp.View
---@param realpath fun(p: string): string?
---@param list_sockets fun(within: string[]): string[]?, string?, integer?
---@return string[]? places sorted, or nil, err, errno from list_sockets
---@return string? err
---@return integer? errno
function M.hidden_sockets(v, realpath, list_sockets)
  local entries, listed, within = {}, {}, {}
  for _, list in ipairs({ v.ro, v.rw }) do
    for _, p in ipairs(list) do
      local real = realpath(p)
      if real then
        entries[#entries + 1] = { p, real }
        listed[real] = true
        within[#within + 1] = real
      end
    end
  end
  local sockets, err, errno = list_sockets(within)
  if not sockets then return nil, err, errno end
  local places, seen = {}, {}
  for _, s in ipairs(sockets) do
    for _, e in ipairs(entries) do
      local p, real = e[1], e[2]
      local inside = not listed[s] and real ~= "/" and s:sub(1, #real + 1) == real .. "/"
      local at = inside and p .. s:sub(#real + 1)
      if at and not seen[at] then
        seen[at] = true
        places[#places + 1] = at
      end
    end
  end
  table.sort(places)
  return places
end

local function push(t, ...)
  for _, a in ipairs({ ... }) do t[#t + 1] = a end
end

--- bubblewrap's options for the view, in the order it must apply them (a
--- directory before what is mounted inside it). `o.source` maps a path to
--- where it was staged; `o.bin_fd`: the checked binary is passed on that
--- fd (--ro-bind-fd) instead. Options only: no command.
---@param v hcp.View
---@param o { network: boolean, source: table<string,string>?, bin_fd: integer?, tmp_mb: integer? }
---@return string[]
function M.bwrap_args(v, o)
  local size = tostring((o.tmp_mb or M.TMP_MB) * 1024 * 1024)
  local a = { "--die-with-parent", "--new-session", "--unshare-all", "--unshare-user",
    "--disable-userns", "--cap-drop", "ALL" }
  if o.network then push(a, "--share-net") end
  push(a, "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--proc", "/proc",
    "--ro-bind", "/proc/sys", "/proc/sys", "--size", size, "--tmpfs", "/tmp")
  local entries = {}
  for _, p in ipairs(v.ro) do entries[#entries + 1] = { p, "ro" } end
  for _, p in ipairs(v.rw) do entries[#entries + 1] = { p, "rw" } end
  table.sort(entries, function(x, y) return x[1] < y[1] end)
  local source = o.source or {}
  for _, e in ipairs(entries) do
    local path = e[1]
    if path == v.bin and o.bin_fd and not source[path] then
      push(a, "--ro-bind-fd", tostring(o.bin_fd), path)
    elseif e[2] == "rw" then
      push(a, "--bind", source[path] or path, path)
    else
      -- a system path the host lacks (/lib32 …) is skipped, as in the core
      push(a, source[path] and "--ro-bind" or "--ro-bind-try", source[path] or path, path)
    end
  end
  -- the host's sockets inside the view (hidden_sockets), after the binds
  -- that show them
  for _, at in ipairs(v.hide or {}) do push(a, "--ro-bind", "/dev/null", at) end
  push(a, "--remount-ro", "/", "--chdir", v.cwd)
  return a
end

-- The launcher for an argument list too long for bwrap: bash reads the
-- environment and argv, NUL-separated, from fd N and hands them to env,
-- which execs the binary with exactly that environment (bash's own
-- variables never reach it, nor does fd N).
local LAUNCHER = 'mapfile -d "" -t -u %d a && exec %d<&- && exec /usr/bin/env -i -- "${a[@]}"'

--- The command bubblewrap runs: the binary and its arguments, or, past
--- bwrap's limit, the launcher and the data it reads from fd `fd`.
---@param nopts integer how many options bwrap gets
---@param bin string
---@param argv string[] the child's argv (argv[1] is its name)
---@param env table<string,string>
---@param fd integer
---@return string[]? cmd, string? data nil, or the launcher's input (or the refusal)
function M.bwrap_command(nopts, bin, argv, env, fd)
  if nopts + #argv + 4 <= M.BWRAP_MAX_ARGS then
    local cmd = { bin }
    for i = 2, #argv do cmd[#cmd + 1] = argv[i] end
    return cmd
  end
  if bin:find("=", 1, true) then
    return nil, "spawn: bwrap: more than " .. M.BWRAP_MAX_ARGS .. " arguments need a bin path without '='"
  end
  local items, keys = {}, {}
  for k in pairs(env) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do items[#items + 1] = k .. "=" .. env[k] end
  items[#items + 1] = bin
  for i = 2, #argv do items[#items + 1] = argv[i] end
  return { "/usr/bin/env", "-i", "/bin/bash", "--norc", "--noprofile", "-c", LAUNCHER:format(fd, fd) },
    table.concat(items, "\0") .. "\0"
end

--- The core.spawn options that run `spec` (what the local driver would
--- spawn) under bubblewrap with the view v: bwrap's options on fd 3
--- (--args), the checked binary on fd 4 when it was not staged, the
--- launcher's input after that. cwd "/": the jail is bwrap's --chdir (with
--- staging, its host path is hidden from bwrap's own namespace).
---@param bwrap string
---@param v hcp.View with `source` when the paths were staged
---@param spec table
---@param o { network: boolean }
---@return table? opts, string? err
function M.bwrap_spawn(bwrap, v, spec, o)
  local data = {}
  local pinned = false
  for _, p in ipairs(v.ro) do pinned = pinned or p == v.bin end
  local bin_fd = pinned and not v.source and 4 or nil
  local opts = M.bwrap_args(v, { network = o.network, source = v.source, bin_fd = bin_fd })
  data[1] = table.concat(opts, "\0") .. "\0"
  if bin_fd then data[2] = { exe = v.bin, beneath = v.bin_beneath } end
  local cmd, extra = M.bwrap_command(#opts, v.bin, spec.argv, spec.env, #data + 3)
  if not cmd then return nil, extra end
  if extra then data[#data + 1] = extra end
  local argv = { "bwrap", "--args", "3", "--" }
  for _, a in ipairs(cmd) do argv[#argv + 1] = a end
  -- everything the call asked of the spawn (stdin, timeout, capture,
  -- streaming, tees, isolation) holds for bwrap as it would for the bin
  local out = {}
  for k, val in pairs(spec) do out[k] = val end
  out.path, out.argv, out.cwd, out.beneath, out.data_fds = bwrap, argv, "/", nil, data
  return out
end

return M
