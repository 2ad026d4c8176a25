-- Helpers shared by the specs: temporary directories, packs written on the
-- fly, small executables. Everything is created under one temp root per
-- process and removed at exit.
local core = require("hcp.core")
local json = require("hcp.json")

local S = {}

local root
--- A fresh private temporary directory.
function S.tmpdir(prefix)
  if not root then
    root = assert(core.mkdtemp("/tmp", "hcp-spec-"))
    -- removed when the Lua state closes
    S._guard = setmetatable({}, { __gc = function() core.rmtree(root) end })
  end
  return assert(core.mkdtemp(root, prefix or "d-"))
end

--- Quote a string for a POSIX shell command line.
function S.q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

function S.write(path, data, mode)
  local fh = assert(io.open(path, "wb"))
  fh:write(data)
  fh:close()
  if mode then assert(os.execute(string.format("chmod %o %s", mode, S.q(path)))) end
  return path
end

function S.read(path)
  local fh = io.open(path, "rb")
  if not fh then return nil end
  local d = fh:read("a")
  fh:close()
  return d
end

function S.mkdir(path)
  assert(os.execute("mkdir -p '" .. path .. "'"))
  return path
end

--- Write a pack (manifest given as a Lua table, or a raw string) into a new
--- directory under `parent` (default: a new temp dir). Returns the pack root.
function S.pack(manifest, parent, dirname)
  parent = parent or S.tmpdir("packs-")
  local name = dirname or (type(manifest) == "table" and manifest.name) or "pack"
  local dir = S.mkdir(parent .. "/" .. name)
  local text = type(manifest) == "string" and manifest or assert(json.encode(manifest))
  S.write(dir .. "/hcp.json", text)
  return dir, parent
end

--- A minimal valid manifest for `bin`, merged with `extra` (shallow, and
--- `wrap` merged one level down).
function S.manifest(name, bin, extra)
  local m = { hcp = 1, name = name, wrap = { bin = bin } }
  for k, v in pairs(extra or {}) do
    if k == "wrap" then
      for wk, wv in pairs(v) do m.wrap[wk] = wv end
    else
      m[k] = v
    end
  end
  return m
end

local compiled = {}
--- Compile a small C program for a spec (cached per process). Returns its
--- path, or nil and the compiler's message.
function S.cc(name, source)
  if compiled[name] then return compiled[name] end
  local dir = S.tmpdir("cc-")
  local src = S.write(dir .. "/" .. name .. ".c", source)
  local out, code = S.sh(string.format("cc -O1 -o '%s/%s' '%s' 2>&1", dir, name, src))
  if code ~= 0 then return nil, out end
  compiled[name] = dir .. "/" .. name
  return compiled[name]
end

--- "k=v" pairs of a program's output (several per line allowed) as a
--- table, numbers converted.
---@param out string?
---@return table
function S.kv(out)
  local t = {}
  for k, v in (out or ""):gmatch("([%w_]+)=(%S+)") do t[k] = tonumber(v) or v end
  return t
end

-- A wrapper (S.cc it) that runs a command with the Landlock syscalls
-- (444-446) answering ENOSYS, as on a kernel without Landlock.
S.NOLANDLOCK_C = [[
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(int argc, char **argv) {
  struct sock_filter f[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 444, 0, 2),
    BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, 446, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = { sizeof f / sizeof f[0], f };
  if (argc < 2 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) return 99;
  execvp(argv[1], argv + 1);
  return 98;
}
]]

--- Run a shell command, return its stdout and exit status.
function S.sh(cmd)
  local p = io.popen(cmd, "r")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

--- Whether a process with this pid is alive (not a zombie).
function S.alive(pid)
  local st = S.read("/proc/" .. pid .. "/stat")
  if not st then return false end
  local state = st:match("^%d+ %b() (%a)")
  return state ~= nil and state ~= "Z"
end

--- Every pid whose process group is `pgid`.
function S.group_members(pgid)
  local out = {}
  for _, name in ipairs(core.listdir("/proc") or {}) do
    if name:match("^%d+$") then
      local st = S.read("/proc/" .. name .. "/stat")
      if st then
        local fields = st:match("^%d+ %b() (.*)$")
        if fields then
          local f = {}
          for w in fields:gmatch("%S+") do f[#f + 1] = w end
          -- f[1]=state f[2]=ppid f[3]=pgrp
          if tonumber(f[3]) == pgid and f[1] ~= "Z" then out[#out + 1] = tonumber(name) end
        end
      end
    end
  end
  return out
end

--- Live processes whose command line is exactly `argv` (in any pid
--- namespace: /proc of the host sees them all).
---@param argv string[]
---@return integer[]
function S.pids_of(argv)
  local want = table.concat(argv, "\0") .. "\0"
  local found = {}
  for _, name in ipairs(core.listdir("/proc") or {}) do
    if name:match("^%d+$") and S.read("/proc/" .. name .. "/cmdline") == want and S.alive(name) then
      found[#found + 1] = tonumber(name)
    end
  end
  return found
end

S.REPO = assert(core.getcwd())   -- busted runs from the checkout

-- ---------------------------------------------------------------------------
-- The build under test. One place for every spec: make test leaves it at
-- build/, make check and make valgrind set HCP_BUILD (absolute, or relative
-- to the checkout) to their own build directory.
-- ---------------------------------------------------------------------------
local build = os.getenv("HCP_BUILD") or "build"
S.BUILD = build:sub(1, 1) == "/" and build or S.REPO .. "/" .. build
S.HCP_LUA = S.BUILD .. "/bin/hcp-lua"
S.HCP = S.BUILD .. "/bin/hcp"
S.HCPX = S.BUILD .. "/bin/hcpx"
-- The C module's search path: relative to the checkout when the build is
-- in it, as it always was (for `cd S.REPO && ...`), absolute when
-- HCP_BUILD points elsewhere.
local in_repo = S.BUILD:sub(1, #S.REPO + 1) == S.REPO .. "/"
S.CPATH = (in_repo and S.BUILD:sub(#S.REPO + 2) or S.BUILD) .. "/lib/lua/5.4/?.so"
-- The same, always absolute: for a process that runs anywhere.
S.CPATH_ABS = S.BUILD .. "/lib/lua/5.4/?.so"
-- A shell prefix for a second Lua process with this checkout's modules and
-- the build's core: "cd <checkout> && LUA_PATH=... LUA_CPATH=... ".
S.LUA_ENV = string.format("cd %s && LUA_PATH=%s LUA_CPATH=%s ", S.q(S.REPO),
  S.q(S.REPO .. "/lua/?.lua;" .. S.REPO .. "/lua/?/init.lua;;"), S.q(S.CPATH_ABS .. ";;"))
-- The interpreter for specs that start a second Lua process: stock lua5.4
-- with the C module of the build, or (make check) the sanitized hcp-lua,
-- which has the instrumented core preloaded.
S.LUA = os.getenv("HCP_SPEC_LUA") or "lua5.4"
-- What a stock lua5.4 needs preloaded to load a sanitized core.so (set by
-- make check; empty otherwise).
S.PRELOAD = os.getenv("HCP_SPEC_PRELOAD") or ""

-- ---------------------------------------------------------------------------
-- Waiting without fixed sleeps: poll the condition with a generous deadline.
-- ---------------------------------------------------------------------------

--- Seconds on the monotonic clock.
function S.now()
  return core.monotonic_us() / 1e6
end

-- luasystem (a dependency of busted) sleeps in-process; sleep(1) otherwise.
local has_system, system = pcall(require, "system")
--- Sleep `s` seconds (a short pause inside a polling loop, never a wait
--- for something to happen: use S.wait_until for that).
function S.sleep(s)
  if has_system and system.sleep then
    system.sleep(s)
  else
    os.execute("sleep " .. s)
  end
end

--- Poll `fn` every 10 ms until it returns a truthy value, for at most
--- `timeout_s` seconds (default 30: a deadline for a loaded machine, not a
--- measurement). Returns that value, or nil and "timed out after N s
--- waiting for <what>" (fn is tried once more at the deadline).
---@param fn fun(): any
---@param timeout_s number?
---@param what string?
function S.wait_until(fn, timeout_s, what)
  timeout_s = timeout_s or 30
  local deadline = S.now() + timeout_s
  repeat
    local v = fn()
    if v then return v end
    S.sleep(0.01)
  until S.now() > deadline
  local v = fn()
  if v then return v end
  return nil, string.format("timed out after %g s waiting for %s", timeout_s, what or "a condition")
end

--- A shell loop for a child: wait (polling every 10 ms, at most `timeout_s`
--- seconds) until the shell condition `cond` holds.
---@param cond string e.g. '[ -e go ]'
---@param timeout_s number?
function S.sh_wait(cond, timeout_s)
  return string.format("_i=0; until %s; do [ $_i -ge %d ] && break; _i=$((_i+1)); sleep 0.01; done",
    cond, (timeout_s or 30) * 100)
end

-- ---------------------------------------------------------------------------
-- A call's own directories are removed behind it by the core's worker
-- (src/calldirs.c); core.calldirs_settle() returns once it removed every
-- one handed to it.
-- ---------------------------------------------------------------------------

--- core.kind(path) once the worker removed what the calls handed it: nil
--- for a call's directory that is gone.
function S.kind_settled(path)
  core.calldirs_settle()
  return core.kind(path)
end

--- The descriptors open in this process, counted once the worker is idle:
--- while it removes a tree it holds that tree's directories open (the
--- descriptor table is the process's), which no call leaked. listdir's own
--- descriptor is in every count alike.
function S.open_fds()
  core.calldirs_settle()
  return #assert(core.listdir("/proc/self/fd"))
end

--- What is left in a runtime's private directory once the worker removed
--- what the calls handed it: its entries, sorted, but the empty 0700
--- directories made ahead for later calls.
function S.left_in_private(dir)
  core.calldirs_settle()
  local left = {}
  for name in S.must_sh("ls -A " .. S.q(dir)):gmatch("[^\n]+") do
    local p = dir .. "/" .. name
    local made_ahead = core.kind(p) == "dir" and S.must_sh("stat -c %a " .. S.q(p)) == "700\n"
      and S.must_sh("ls -A " .. S.q(p)) == ""
    if not made_ahead then left[#left + 1] = name end
  end
  table.sort(left)
  return left
end

-- ---------------------------------------------------------------------------
-- Host features. A spec that needs one the host lacks is declared pending,
-- with the reason, when it is defined (busted 2.1 ignores pending() called
-- from before_each, so a guard there runs the spec anyway).
-- ---------------------------------------------------------------------------

local function have_cmd(cmd)
  local _, code = S.sh("command -v " .. cmd .. " >/dev/null 2>&1")
  return code == 0
end

local function command(cmd, why)
  return function()
    if not have_cmd(cmd) then return "needs " .. cmd .. (why and " (" .. why .. ")" or "") end
  end
end

-- Root whose uid 0 is the host's: full uid map, so it can chown to any user,
-- and its capabilities count outside any user namespace.
local function init_root()
  if core.geteuid() ~= 0 then return "needs root (running as uid " .. core.geteuid() .. ")" end
  local map = S.read("/proc/self/uid_map") or ""
  if not map:match("^%s*0%s+0%s+4294967295%s*$") then
    return "needs root of the initial user namespace (this root is in a user namespace: uid_map "
      .. (map:gsub("%s+", " "):gsub("^ ", ""):gsub(" $", "")) .. ")"
  end
end

local FEATURES = {
  root = function()
    if core.geteuid() ~= 0 then return "needs root (running as uid " .. core.geteuid() .. ")" end
  end,
  nonroot = function()
    if core.geteuid() == 0 then return "needs a user who is not root" end
  end,
  init_root = init_root,
  nobody = function()
    if not (S.read("/etc/passwd") or ""):match("\nnobody:") then return "needs a user named nobody" end
  end,
  -- nobody can run the build under test and load its modules (a checkout
  -- under /root, say, is out of its reach)
  nobody_runs_build = function()
    local why = init_root()
    if why then return why end
    if not have_cmd("runuser") then return "needs runuser (to act as nobody)" end
    local out, code = S.sh("cd / && runuser -u nobody -- " .. S.q(S.HCP_LUA) .. " -e 'require(\"hcp\")' 2>&1")
    if code ~= 0 then
      return "nobody cannot run " .. S.HCP_LUA .. " from this checkout: " .. out:gsub("%s+$", "")
    end
  end,
  -- nobody can make a user namespace (what a non-root runtime's namespaces,
  -- constructed root and bwrap stand on)
  nobody_userns = function()
    local why = init_root()
    if why then return why end
    if not have_cmd("runuser") or not have_cmd("unshare") then return "needs runuser and unshare (to act as nobody)" end
    local out, code = S.sh("cd / && runuser -u nobody -- unshare --user true 2>&1")
    if code ~= 0 then return "nobody cannot make a user namespace here: " .. out:gsub("%s+$", "") end
  end,
  bwrap = function()
    local rt, err = require("hcp").create({ driver = "bwrap" })
    if not rt then return "bwrap unavailable: " .. tostring(err) end
    rt:close()
  end,
  -- the default runtime's child reads /proc (Landlock allows it only with
  -- the child's own pid namespace)
  child_proc = function()
    local rt = assert(require("hcp").create({ allow_bins = { "cat" } }))
    local res = rt:exec({ bin = "cat", args = { "/proc/self/status" } })
    rt:close()
    if not res.ok then
      return "the sandboxed child cannot read /proc here (" .. tostring(res.stderr or res.error):gsub("%s+$", "")
        .. "; layers " .. table.concat(res.isolation or {}, ",") .. ")"
    end
  end,
  cc = command("cc", "a C compiler builds the spec's helper"),
  python3 = command("python3", "it drives a pseudo-terminal"),
  script = command("script", "util-linux script(1) gives a pseudo-terminal"),
  runuser = command("runuser", "to act as another user"),
  -- an hcp-lua whose malloc is glibc's: make check's is ASan's, which has
  -- no brk heap and places its chunks at addresses fixed by design
  glibc_malloc = function()
    local _, asan = S.sh("grep -q __asan_init " .. S.q(S.HCP_LUA))
    if asan == 0 then return "the hcp-lua under test has a sanitizer's allocator (make check)" end
  end,
  -- the kernel randomizes where programs and their heaps are placed
  aslr = function()
    if (S.read("/proc/sys/kernel/randomize_va_space") or ""):match("^0") then
      return "address space randomization is off on this host (kernel.randomize_va_space = 0)"
    end
  end,
  -- transparent huge pages a process may ask for, and an hcp-lua whose
  -- malloc is glibc's
  thp = function()
    local mode = (S.read("/sys/kernel/mm/transparent_hugepage/enabled") or ""):match("%[(%a+)%]")
    if mode ~= "always" and mode ~= "madvise" then
      return "no transparent huge pages here (mode " .. tostring(mode) .. ")"
    end
    return S.lacks("glibc_malloc")
  end,
  -- the name resolves on this host (a root without /etc/hosts has none)
  localhost = function()
    local out = S.sh("getent ahosts localhost 2>&1")
    if not out:match("127%.0%.0%.1") and not out:match("::1") then return "localhost does not resolve on this host" end
  end,
  unshare = command("unshare", "util-linux unshare(1) makes the user namespace"),
  groff = command("groff"),
  pgrep = command("pgrep"),
}
for _, layer in ipairs({ "landlock", "seccomp", "netns", "pidns", "userns", "caps", "rlimits", "cgroup", "rootfs",
  "ipcns" }) do
  FEATURES[layer] = function()
    local l = core.probe()[layer]
    if not l.available then return layer .. " unavailable: " .. tostring(l.reason) end
  end
end

-- "layer:<name>": the default runtime applies that layer to its calls
-- (hcp.create{} layers, with hcp.doctor()'s reason when it does not).
local function runtime_layer(name)
  local rt = assert(require("hcp").create({}))
  for _, l in ipairs(rt:layers()) do
    if l == name then return nil end
  end
  for _, l in ipairs(require("hcp").doctor().layers) do
    if l.name == name then return name .. " unavailable on this host: " .. tostring(l.reason) end
  end
  return name .. " is not applied by the default runtime"
end

local known = {}
--- Why the host lacks `feature` (nil when it has it). Features: root,
--- nonroot, init_root, nobody, nobody_runs_build, bwrap, child_proc, thp, glibc_malloc, aslr, the core.probe() layers
--- (landlock, seccomp, netns, pidns, userns, caps, rlimits, cgroup, rootfs, ipcns), "layer:X"
--- (the default runtime applies layer X), localhost (the name resolves),
--- and the commands cc, python3, script, runuser, unshare, groff, pgrep. A list is checked in order; the first
--- missing one answers.
---@param needs string|string[]
---@return string? reason
function S.lacks(needs)
  if type(needs) == "string" then needs = { needs } end
  for _, f in ipairs(needs) do
    if known[f] == nil then
      local layer = f:match("^layer:(.+)$")
      local probe = layer and function() return runtime_layer(layer) end
        or assert(FEATURES[f], "support: unknown host feature " .. tostring(f))
      known[f] = probe() or false
    end
    if known[f] then return known[f] end
  end
  return nil
end

local busted = require("busted")

--- `it(name, fn)` when the host has every feature in `needs`, else a
--- visible `pending("<name>: <reason>")` and fn never runs.
---@param needs string|string[]
function S.it(needs, name, fn)
  local why = S.lacks(needs)
  if why then return busted.pending(name .. ": " .. why) end   -- a tail call: busted names the spec's line
  return busted.it(name, fn)
end

--- `describe(name, fn)` when the host has every feature in `needs`, else
--- one visible `pending("<name>: <reason>")` for the whole block, whose
--- body (setup, before_each, every it) never runs.
---@param needs string|string[]
--- A shell command that must succeed: its stdout, or an error with both.
---@param cmd string
---@return string
function S.must_sh(cmd)
  local out, code = S.sh(cmd)
  assert(code == 0, cmd .. ": " .. out)
  return out
end

--- One describe per exec-plane driver, "<title> (driver local|bwrap)":
--- `fn(driver, case)` defines its specs with `case(name, f)`, which under
--- bwrap is pending (with the reason) where bubblewrap cannot start.
---@param title string
---@param fn fun(driver: string, case: fun(name: string, f: function))
function S.each_driver(title, fn)
  for _, driver in ipairs({ "local", "bwrap" }) do
    busted.describe(title .. " (driver " .. driver .. ")", function()
      fn(driver, function(name, f) return S.it(driver == "bwrap" and "bwrap" or {}, name, f) end)
    end)
  end
end

function S.describe(needs, name, fn)
  local why = S.lacks(needs)
  if why then return busted.pending(name .. " (the whole block): " .. why) end
  return busted.describe(name, fn)
end

return S
