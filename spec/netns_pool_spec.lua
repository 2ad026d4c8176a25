-- spec/netns_pool_spec.lua — network namespaces lent by the core's pool
-- (isolation netns = "pool", src/netns_pool.c) and given by descriptor
-- (netns = fd, userns = fd: issue 12, for issue 14's per-call egress). A
-- pooled namespace serves one call at a time; it is taken back only from a
-- call that had a pid namespace and no capabilities and ended on its own;
-- and a call finds nothing in it of the call before.
local core = require("hcp.core")
local S = require("spec.support")

local probe = core.probe()
local ROOT = core.geteuid() == 0
local HAS = probe.netns.available and probe.pidns.available
local WHY = "no network or pid namespace here"
local PID = core.getpid()
local ECONNREFUSED, ENETUNREACH = 111, 101

local TOOL_C = [[
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
static socklen_t abstract(struct sockaddr_un *sa, const char *name) {
  memset(sa, 0, sizeof *sa); sa->sun_family = AF_UNIX; strncpy(sa->sun_path + 1, name, sizeof sa->sun_path - 2);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name)); }
int main(int argc, char **argv) {
  char buf[64] = { 0 };
  if (readlink("/proc/self/ns/net", buf, sizeof buf - 1) > 0) printf("ns=%s\n", buf);
  if (argc < 3) return 0;
  if (!strcmp(argv[1], "alisten")) { struct sockaddr_un sa; socklen_t l = abstract(&sa, argv[2]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    printf("listen=%d\n", bind(fd, (void *)&sa, l) == 0 && listen(fd, 4) == 0 ? 0 : errno); fflush(stdout);
    sleep((unsigned)atoi(argv[3])); return 0; }
  if (!strcmp(argv[1], "aconnect")) { struct sockaddr_un sa; socklen_t l = abstract(&sa, argv[2]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0); printf("connect=%d\n", connect(fd, (void *)&sa, l) == 0 ? 0 : errno); return 0; }
  if (!strcmp(argv[1], "tlisten")) { struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2])) };
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    printf("tlisten=%d\n", bind(fd, (void *)&a, sizeof a) == 0 && listen(fd, 4) == 0 ? 0 : errno); return 0; }
  if (!strcmp(argv[1], "tconnect")) { struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2])) };
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr); int fd = socket(AF_INET, SOCK_STREAM, 0);
    printf("tconnect=%d\n", connect(fd, (void *)&a, sizeof a) == 0 ? 0 : errno); return 0; }
  return 2; }
]]

local TOOL
local function tool()
  TOOL = TOOL or assert(S.cc("nstool", TOOL_C))
  return TOOL
end

local kv = S.kv

local POOLED = { netns = "pool", pidns = true, caps = true }

local function start(args, iso, opts)
  local o = { path = tool(), argv = { "nstool", table.unpack(args or {}) }, env = {}, cwd = "/", isolation = iso or POOLED }
  for k, v in pairs(opts or {}) do o[k] = v end
  return assert(core.spawn(o))
end

local function run(args, iso)
  local r = start(args, iso):wait()
  return kv(r.stdout), r
end

describe("netns = \"pool\"", function()
  it("a call that ended on its own gives its namespace to the next", function()
    if not HAS then pending(WHY) return end
    local a = run()
    local b = run()
    assert.is_string(a.ns)
    assert.equals(a.ns, b.ns)
  end)

  it("an async spawn (the runtime's) lends the namespace its child made, never the runtime's own", function()
    if not HAS then pending(WHY) return end
    local own = core.realpath("/proc/self/ns/net")
    local seen = {}
    for _ = 1, 20 do
      local r = kv(start(nil, nil, { async = true }):wait().stdout)
      assert.is_string(r.ns)
      assert.not_equals(own and own:match("net:%S+"), r.ns)
      seen[#seen + 1] = r.ns
    end
    assert.equals(seen[2], seen[3]) -- and it is reused
    -- through a runtime, every call's namespace is its own too
    local hcp = require("hcp")
    local rt = assert(hcp.create({ allow_bins = { "/bin/readlink" } }))
    for _ = 1, 3 do
      local res = rt:exec({ bin = "/bin/readlink", args = { "/proc/self/ns/net" } })
      assert.is_true(res.ok, res.error)
      if table.concat(res.isolation, ","):find("netns", 1, true) then
        assert.not_equals(own and own:match("net:%S+"), res.stdout:match("net:%S+"))
      end
    end
    rt:close()
  end)

  it("two calls at once never share one", function()
    if not HAS then pending(WHY) return end
    local p1 = start({ "alisten", "hcp-pool-a-" .. PID, "1" })
    local p2 = start({ "alisten", "hcp-pool-b-" .. PID, "1" })
    local r1, r2 = kv(p1:wait().stdout), kv(p2:wait().stdout)
    assert.equals(0, r1.listen)
    assert.not_equals(r1.ns, r2.ns)
  end)

  it("finds nothing of the call before: its abstract and TCP listeners are gone, the loopback still down", function()
    if not HAS then pending(WHY) return end
    local name = "hcp-pool-left-" .. PID
    local a = run({ "alisten", name, "0" })
    assert.equals(0, a.listen)
    local t = run({ "tlisten", "5555" })
    local b = run({ "aconnect", name })
    assert.equals(a.ns, b.ns)
    assert.equals(ECONNREFUSED, b.connect)
    local c = run({ "tconnect", "5555" })
    assert.equals(t.ns, c.ns)
    assert.equals(ENETUNREACH, c.tconnect)
  end)

  it("a program without capabilities cannot bring the loopback up for the next call", function()
    if not HAS then pending(WHY) return end
    if not core.kind("/bin/ip") then pending("no /bin/ip") return end
    local p = assert(core.spawn({ path = "/bin/sh", argv = { "sh", "-c", "readlink /proc/self/ns/net; ip link set lo up; echo rc=$?" },
      env = {}, cwd = "/", isolation = POOLED }))
    local r = p:wait()
    assert.matches("rc=[1-9]", r.stdout)
    local ns = r.stdout:match("(net:%S+)")
    local c = run({ "tconnect", "5555" })
    assert.equals(ns, c.ns)
    assert.equals(ENETUNREACH, c.tconnect)
  end)

  it("a call killed, or timed out, gives nothing back", function()
    if not HAS then pending(WHY) return end
    local p = start({ "alisten", "hcp-pool-k-" .. PID, "30" })
    assert(p:wait(200) == nil)
    local ns = S.read("/proc/" .. p:pid() .. "/ns/net") and core.realpath("/proc/" .. p:pid() .. "/ns/net")
    p:kill("KILL")
    p:wait()
    local q = start({ "alisten", "hcp-pool-t-" .. PID, "30" }, nil, { timeout_ms = 100 })
    local qns = core.realpath("/proc/" .. q:pid() .. "/ns/net")
    assert.is_true(q:wait().timed_out)
    for _ = 1, 3 do
      local n = run().ns
      assert.not_equals(ns and ns:match("net:%S+"), n)
      assert.not_equals(qns and qns:match("net:%S+"), n)
    end
  end)

  it("is not used without a pid namespace, or with capabilities left: each such call gets a fresh one", function()
    if not HAS then pending(WHY) return end
    for _, iso in ipairs({ { netns = "pool", caps = true }, { netns = "pool", pidns = true } }) do
      local a = run(nil, iso)
      local b = run(nil, iso)
      assert.not_equals(a.ns, b.ns)
    end
  end)
end)

-- A namespace made ahead is for a process's first calls (once one has been
-- given back, the pool serves): these run in a fresh process of their own.
-- What it prints is one "name=value" line per fact the spec checks.
local AHEAD = [==[
local core = require("hcp.core")
local tool, mode = arg[1], arg[2]
local pid = core.getpid()
local function say(k, v) io.write(k, "=", tostring(v), "\n") end
local function children()
  local out = {}
  for c in (io.open("/proc/" .. pid .. "/task/" .. pid .. "/children"):read("a")):gmatch("%d+") do out[c] = true end
  return out
end
local function run(args)
  local p = assert(core.spawn({ path = tool, argv = { "nstool", table.unpack(args) }, env = {}, cwd = "/",
    isolation = { netns = "pool", pidns = true, caps = true } }))
  local r = p:wait()
  return r.stdout:match("ns=(%S+)"), r.stdout:match("connect=(%d+)")
end
local before = children()
say("started", core.netns_prefill())
say("second", core.netns_prefill())
local holder
for c in pairs(children()) do if not before[c] then holder = c end end
say("holder", holder ~= nil)
local own = io.popen("readlink /proc/" .. pid .. "/ns/net"):read("l")
if mode == "close" then
  local rt = assert(require("hcp").create({ allow_bins = { "/bin/true" } }))
  rt:close()
  say("holder_left", children()[holder] ~= nil or io.open("/proc/" .. holder .. "/status") ~= nil)
  return
end
-- a listener in the runtime's own namespace, which the call must not reach
local name = "hcp-ahead-" .. pid
local listener = assert(core.spawn({ path = tool, argv = { "nstool", "alisten", name, "30" }, env = {}, cwd = "/" }))
local deadline = core.monotonic_us() + 10e6
repeat -- until it listens: connected from the runtime's own namespace
  local r = assert(core.spawn({ path = tool, argv = { "nstool", "aconnect", name }, env = {}, cwd = "/" })):wait()
until r.stdout:find("connect=0", 1, true) or core.monotonic_us() > deadline
local ns, connect = run({ "aconnect", name })
listener:kill("KILL")
listener:wait()
say("ns_is_own", ns == own)
say("connect", connect)
-- ended on its own: pooled, and the next call is in it; none is made ahead any more
say("reused", run({}) == ns)
say("after_pooled", core.netns_prefill())
core.netns_prefill_cancel()
say("holder_left", children()[holder] ~= nil)
]==]

local function ahead(mode)
  local script = S.write(S.tmpdir("ahead-") .. "/ahead.lua", AHEAD)
  local out = S.sh(S.LUA_ENV .. string.format("%s %s %s %s 2>&1", S.q(S.LUA), S.q(script), S.q(tool()), mode))
  return kv(out), out
end

describe("a network namespace made ahead (core.netns_prefill)", function()
  it("is fresh, not the runtime's, taken by the first pooled call, and made for a process's first calls only",
    function()
      if not HAS then pending(WHY) return end
      local r, out = ahead("call")
      if not ROOT then
        assert.equals("false", r.started, out) -- root only: a call makes its own
        return
      end
      assert.equals("true", r.started, out)
      assert.equals("false", r.second) -- one is on its way: not a second
      assert.equals("true", r.holder, "no holder process was started: " .. out)
      assert.equals("false", r.ns_is_own, out)
      assert.equals(ECONNREFUSED, r.connect) -- nothing of the runtime's namespace in it
      assert.equals("true", r.reused)
      assert.equals("false", r.after_pooled) -- the pool serves from here on
      assert.equals("false", r.holder_left) -- ended and reaped
    end)

  it("one that no call took is ended, and its holder reaped, by the runtime's close", function()
    if not HAS then pending(WHY) return end
    if not ROOT then pending("root only: a runtime that is not root makes none ahead") return end
    local r, out = ahead("close")
    assert.equals("true", r.started, out)
    assert.equals("true", r.holder, out)
    assert.equals("false", r.holder_left, out)
  end)
end)

-- `hcp run` starts that holder from its first instruction (hcp_lua.c), so
-- the namespace is made while the modules load — or, as root where the
-- probe allows one, the early child (src/early.c, spec/early_child_spec.lua),
-- a helper too, which makes the namespace itself. A config file runs in the
-- command's own process after they loaded: it tells whether the helper is
-- there by then.
describe("hcp run: the call's network namespace made before the modules load", function()
  local PROBE = [[
local core = require("hcp.core")
local me = core.getpid()
local f = io.open("/proc/" .. me .. "/task/" .. me .. "/children")
local kids, holder = f and f:read("a") or "", false
if f then f:close() end
for pid in kids:gmatch("%%d+") do
  local c = io.open("/proc/" .. pid .. "/cmdline")
  -- the holder execs the helper twice, "hcp-spawn 9" then "hcp-spawn hold";
  -- in the middle of an exec its command line reads empty
  local cmd = c and c:read("a") or "?"
  if cmd == "" or cmd:sub(1, 10) == "hcp-spawn\0" then holder = true end
  if c then c:close() end
end
local out = assert(io.open(%q, "w"))
out:write("holder_at_config=", tostring(holder), "\n")
out:close()
return %s
]]

  local function hcp_run(dir, extra, iso)
    local cfg = S.write(dir .. "/cfg.lua", string.format(PROBE, dir .. "/probe.out", iso or "{}"))
    local pack = S.pack(S.manifest("nstool", tool()), dir .. "/packs")
    local out, code = S.sh(string.format("%s run --config %s --pack-dir %s nstool %s 2>&1", S.HCP, S.q(cfg),
      S.q(pack), extra or ""))
    local probe_out = S.read(dir .. "/probe.out") or ""
    return kv(out .. "\n" .. probe_out), out .. "\n" .. probe_out, code
  end

  -- processes of the spawn helper, in whatever stage (a zombie counts: it is
  -- alive to kill(0))
  local function holders()
    local n = 0
    for _, pid in ipairs(core.listdir("/proc") or {}) do
      local cmd = pid:match("^%d+$") and S.read("/proc/" .. pid .. "/cmdline")
      if cmd and cmd:sub(1, 10) == "hcp-spawn\0" and S.alive(pid) then n = n + 1 end
    end
    return n
  end
  local function none_left(before, what)
    assert(S.wait_until(function() return holders() == before end, 10, "no helper process left after " .. what))
  end

  it("is there before the config file runs, fresh, and taken by the call; nothing is left", function()
    if not HAS then pending(WHY) return end
    if not ROOT then pending("root only: a runtime that is not root makes none ahead") return end
    local name = "hcp-early-" .. PID
    local listener = start({ "alisten", name, "30" }, {}) -- in the runtime's own namespace
    assert(S.wait_until(function() -- until it listens: connected from the runtime's own namespace
      return start({ "aconnect", name }, {}):wait().stdout:find("connect=0", 1, true)
    end, 10, "the listener"))
    local before = holders()
    local r, out, code = hcp_run(S.tmpdir("early-"), "aconnect " .. name)
    listener:kill("KILL")
    listener:wait()
    assert.equals(0, code, out)
    assert.equals("true", r.holder_at_config, out)
    assert.equals(ECONNREFUSED, r.connect, out) -- not the runtime's namespace: its listener is not there
    assert.are_not.equal(kv(start(nil, {}):wait().stdout).ns, r.ns)
    none_left(before, "hcp run")
  end)

  it("one the call does not use (isolation minimal), or a run that stops at its arguments, leaves none", function()
    if not HAS then pending(WHY) return end
    if not ROOT then pending("root only: a runtime that is not root makes none ahead") return end
    local before = holders()
    local r, out, code = hcp_run(S.tmpdir("early-"), "", '{ isolation = "minimal" }')
    assert.equals(0, code, out)
    assert.equals("true", r.holder_at_config, out) -- made before the options were known
    assert.equals(kv(start(nil, {}):wait().stdout).ns, r.ns) -- minimal: the runtime's own
    none_left(before, "hcp run with isolation minimal")
    for _, args in ipairs({ "run --help", "run --bogus x", "run" }) do
      local _, c = S.sh(S.HCP .. " " .. args .. " > /dev/null 2>&1")
      assert.is_true(c ~= 0 or args == "run --help", args)
      none_left(before, "hcp " .. args)
    end
  end)
end)

describe("netns = fd", function()
  it("joins that namespace: a listener in it is reachable, the host's loopback is not", function()
    if not HAS then pending(WHY) return end
    local name = "hcp-joined-" .. PID
    local holder = start({ "alisten", name, "30" }, { netns = true, pidns = true })
    local ns <close> = assert(holder:nsfd("net"))
    -- a runtime that is not root may join it only with the user namespace
    -- that owns it (the next spec's subject)
    local user <close> = not ROOT and assert(holder:nsfd("user")) or nil
    -- the holder may not listen yet when its namespace is there: connect
    -- until it does (ECONNREFUSED until then), or fail at the deadline
    local mine
    S.wait_until(function()
      mine = kv(assert(core.spawn({ path = tool(), argv = { "nstool", "aconnect", name }, env = {}, cwd = "/",
        isolation = { netns = ns, userns = user, pidns = true, caps = true } })):wait().stdout)
      return mine.connect == 0
    end, 10, "a connect to the holder's listener")
    holder:kill("KILL")
    holder:wait()
    assert.equals(0, mine.connect, "connect to the listener in the joined namespace")
    -- an integer works too, and it is the holder's namespace
    local again = kv(start(nil, { netns = ns:fd(), userns = user and user:fd(), pidns = true }):wait().stdout)
    assert.equals(mine.ns, again.ns)
    assert.equals(ENETUNREACH, run({ "tconnect", "22" }, { netns = ns, userns = user }).tconnect)
  end)

  it("refuses a descriptor that is not a network namespace, and one that is not open; nothing runs", function()
    if not HAS then pending(WHY) return end
    local holder = start({ "alisten", "hcp-ipc-" .. PID, "30" }, { netns = true, ipcns = true, pidns = true })
    local ipc <close> = assert(holder:nsfd("ipc"))
    local p, err = core.spawn({ path = tool(), argv = { "nstool" }, env = {}, cwd = "/", isolation = { netns = ipc } })
    holder:kill("KILL")
    holder:wait()
    assert.is_nil(p)
    assert.matches("spawn: isolation: netns: descriptor %d+ is not a network namespace", err)
    ipc:close()
    assert.error_matches(function()
      core.spawn({ path = tool(), argv = { "nstool" }, env = {}, cwd = "/", isolation = { netns = ipc } })
    end, "netns must be a boolean")
    assert.error_matches(function()
      core.spawn({ path = tool(), argv = { "nstool" }, env = {}, cwd = "/", isolation = { netns = "shared" } })
    end, "netns must be a boolean")
  end)

  -- as nobody, who needs user namespaces of its own (root of the initial
  -- one, to become nobody)
  S.it({ "nobody_userns", "nobody_runs_build" }, "a non-root runtime joins it with the user namespace that owns it "
    .. "(userns = fd)", function()
    local dir = assert(core.mkdtemp("/var/tmp", "hcp-nsnb-"))
    finally(function() core.rmtree(dir) end)
    assert(os.execute("chmod 755 " .. S.q(dir)))
    local t = dir .. "/nstool"
    assert(os.execute(string.format("cp %s %s && chmod 755 %s", S.q(tool()), S.q(t), S.q(t))))
    local script = S.write(dir .. "/run.lua", string.format([[
      local core = require("hcp.core")
      local t = %q
      local h = assert(core.spawn({ path = t, argv = { "nstool", "alisten", "nb-%d", "30" }, env = {}, cwd = "/",
        isolation = { netns = true, pidns = true } }))
      local net, user = assert(h:nsfd("net")), assert(h:nsfd("user"))
      -- until the holder listens (ECONNREFUSED before), at most 10 s
      local out, deadline = nil, core.monotonic_us() + 10e6
      repeat
        local p, err = core.spawn({ path = t, argv = { "nstool", "aconnect", "nb-%d" }, env = {}, cwd = "/",
          isolation = { netns = net, userns = user, pidns = true, caps = true } })
        out = p and p:wait().stdout or ("refused=" .. err:gsub("%%s", "_"))
      until not p or out:find("connect=0", 1, true) or core.monotonic_us() > deadline
      io.write(out, "\n")
      local q, qerr = core.spawn({ path = t, argv = { "nstool" }, env = {}, cwd = "/",
        isolation = { netns = net, pidns = true } })
      io.write(q and ("without=" .. q:wait().exit) or ("without_refused=" .. qerr:gsub("%%s", "_")), "\n")
      h:kill("KILL") h:wait()
      -- the pool, for a non-root runtime: each namespace with the user namespace that owns it
      local own = io.open("/proc/self/ns/net") and io.popen("readlink /proc/self/ns/net"):read("l")
      for i = 1, 4 do
        local c, cerr = core.spawn({ path = t, argv = { "nstool" }, env = {}, cwd = "/", async = true,
          isolation = { netns = "pool", pidns = true, caps = true } })
        local r = c and c:wait()
        local ns = r and r.stdout:match("ns=(%%S+)")
        local why = "fail_" .. tostring(r and r.spawn_error or cerr):gsub("%%s", "_")
        io.write("pool", i, "=", ns and (ns == own and "own" or "call") or why, "\n")
      end
    ]], t, PID, PID))
    local out, code = S.sh(string.format("cd %s && runuser -u nobody -- env LUA_CPATH='%s;;' %s %s 2>&1",
      S.q(S.REPO), S.CPATH_ABS, S.q(S.LUA), S.q(script)))
    assert.equals(0, code, out)
    if out:match("refused=") and not probe.userns.available then pending("no user namespaces for nobody") return end
    local r = kv(out)
    assert.equals(0, r.connect, out)
    for i = 1, 4 do assert.equals("call", r["pool" .. i], out) end
    -- without the owner's user namespace, the join is refused in the child: nothing runs
    assert.matches("without_refused=spawn:_isolation:_netns:_Operation_not_permitted", out, 1, true)
  end)
end)
