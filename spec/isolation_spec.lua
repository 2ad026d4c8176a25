-- §10.4 stronger isolation, attacked through the runtime as an agent's call
-- would: each layer is shown holding on this host, and a layer this host
-- lacks makes its spec pending with the reason (never a silent pass).
local hcp = require("hcp")
local core = require("hcp.core")
local S = require("support")

local q = S.q

local rt_auto = assert(hcp.create({}))
local LAYERS = {}
for _, l in ipairs(rt_auto:layers()) do LAYERS[l] = true end

--- Live processes whose command line is exactly `sleep <marker>`.
local function sleepers(marker)
  return S.pids_of({ "sleep", marker })
end

-- A runtime over one ephemeral sh pack; `extra` merges into its manifest.
local function sh_pack(name, extra, opts)
  local m = S.manifest(name, "sh", { wrap = { workspace = { mode = "ephemeral" }, timeout_ms = 10000 } })
  for k, v in pairs(extra or {}) do
    if k == "wrap" then for wk, wv in pairs(v) do m.wrap[wk] = wv end else m[k] = v end
  end
  local root = S.pack(m)
  local o = { pack_dirs = { root } }
  for k, v in pairs(opts or {}) do o[k] = v end
  return assert(hcp.create(o)), root
end

local function sh(rt, name, script, ...)
  return rt:call({ pack = name, args = { "-c", script, "sh", ... } })
end

local function layers_of(res)
  local t = {}
  for _, l in ipairs(res.isolation or {}) do t[l] = true end
  return t
end

describe("isolation: filesystem (landlock)", function()
  S.it("layer:landlock", "the child cannot write outside its jail: not /tmp, not its pack root", function()
    local rt, root = sh_pack("w")
    local outside = S.tmpdir("outside-") .. "/written"
    local res = sh(rt, "w", 'echo x > "$1"; echo "tmp:$?"; echo y > "$2/written"; echo "root:$?"; echo z > inside && echo inside:ok',
      outside, root)
    assert.is_true(layers_of(res).landlock)
    assert.matches("tmp:[1-9]", res.stdout)
    assert.matches("root:[1-9]", res.stdout)
    assert.matches("inside:ok", res.stdout)
    assert.is_nil(S.read(outside))
    assert.is_nil(S.read(root .. "/written"))
    -- the same call under "minimal" does write: the spec shows the layer
    local rt_min = sh_pack("w2", nil, { isolation = "minimal" })
    local outside2 = S.tmpdir("outside-") .. "/written"
    sh(rt_min, "w2", 'echo x > "$1"', outside2)
    assert.equal("x\n", S.read(outside2))
  end)

  S.it("layer:landlock", "the child cannot read a file under /root, nor ../../ its way out of the jail", function()
    local secret = S.write(S.tmpdir("secret-") .. "/secret", "s3cret")
    local root_secret
    if core.kind("/root") == "dir" and S.sh("id -u") == "0\n" then
      root_secret = S.write("/root/.hcp-spec-secret-" .. core.getpid(), "root s3cret")
    end
    local rt = sh_pack("r")
    -- the jail is <tmpdir>/hcp-rt-X/jail-Y: ../../ is the temp dir itself
    local rel = secret:gsub("^/tmp/", "")
    -- the child builds the /root path itself: in an argument the host-path
    -- rule would refuse it before Landlock had anything to do
    local res = sh(rt, "r", 'cat "../../$1"; echo "up:$?"; [ -n "$2" ] && { cat "/$3/$2"; echo "root:$?"; }; true',
      rel, root_secret and root_secret:gsub("^/root/", "") or "", "root")
    if root_secret then os.remove(root_secret) end
    assert.not_matches("s3cret", res.stdout)
    assert.matches("up:[1-9]", res.stdout)
    if root_secret then assert.matches("root:[1-9]", res.stdout) end
    -- Landlock denies; with the constructed root (rootfs) the path is not even there
    assert.is_truthy(res.stderr:find("Permission denied", 1, true) or
      (LAYERS.rootfs and res.stderr:find("No such file or directory", 1, true)), res.stderr)
  end)

  S.it("layer:landlock", "the child may read the system directories and its pack root, and write its TMPDIR", function()
    local rt, root = sh_pack("ok")
    S.write(root .. "/data.txt", "pack data")
    local res = sh(rt, "ok", 'cat "$1/data.txt" && echo t > "$TMPDIR/x" && cat "$TMPDIR/x" && ls /usr/bin/jq', root)
    assert.is_true(res.ok, res.stderr)
    assert.equal("pack datat\n/usr/bin/jq\n", res.stdout)
  end)
end)

describe("isolation: syscalls (seccomp)", function()
  local probe
  setup(function()
    probe = S.cc("sysprobe", [[
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <stdlib.h>
#include <unistd.h>
#include <sched.h>
static void show(const char *what, long r) { printf("%s=%s\n", what, r < 0 ? strerror(errno) : "ok"); }
int main(int argc, char **argv) {
  char c = 'x';
  show("ptrace", ptrace(PTRACE_TRACEME, 0, 0, 0));
  if (argc > 1) show("attach_runtime", ptrace(PTRACE_ATTACH, (pid_t)atoi(argv[1]), 0, 0));
  show("tiocsti", ioctl(0, TIOCSTI, &c));
  show("tiocsti_high", syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI | (1UL << 32), &c));
  show("userns", unshare(CLONE_NEWUSER));
  show("bpf", syscall(SYS_bpf, 0, 0, 0));
  show("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
  return 0;
}
]])
  end)

  -- `attach`: also try to ptrace the runtime itself — only where the filter
  -- is on (without it a root child would really stop this process)
  local function run(iso, attach)
    local rt = assert(hcp.create({ allow_bins = { probe }, isolation = iso }))
    return rt:exec({ bin = probe, stdin = "", args = { attach and tostring(core.getpid()) or nil } })
  end

  S.it("layer:seccomp",
    "ptrace (of itself and of the runtime), new user namespaces, bpf, keyctl, TIOCSTI (also with bit 32) get EPERM", function()
    assert.is_string(probe)
    local res = run("auto", true)
    assert.is_true(layers_of(res).seccomp)
    for _, what in ipairs({ "ptrace", "attach_runtime", "tiocsti", "tiocsti_high", "userns", "bpf", "keyctl" }) do
      assert.matches(what .. "=Operation not permitted\n", res.stdout, 1, true)
    end
    -- without the filter, TIOCSTI on a pipe is only "not a tty": EPERM is the filter's
    local bare = run("minimal")
    assert.matches("tiocsti=Inappropriate ioctl for device\n", bare.stdout, 1, true)
  end)
end)

describe("isolation: network (netns)", function()
  local server, client
  setup(function()
    server = S.cc("listener", [[
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
/* listens on 127.0.0.1 and ::1, prints both ports, accepts for at most 8 s */
int main(void) {
  int fds[2]; struct sockaddr_in a4; struct sockaddr_in6 a6; socklen_t l;
  memset(&a4, 0, sizeof a4); a4.sin_family = AF_INET; a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  memset(&a6, 0, sizeof a6); a6.sin6_family = AF_INET6; a6.sin6_addr = in6addr_loopback;
  fds[0] = socket(AF_INET, SOCK_STREAM, 0); fds[1] = socket(AF_INET6, SOCK_STREAM, 0);
  if (bind(fds[0], (void *)&a4, sizeof a4) || bind(fds[1], (void *)&a6, sizeof a6)) return 1;
  listen(fds[0], 8); listen(fds[1], 8);
  l = sizeof a4; getsockname(fds[0], (void *)&a4, &l);
  l = sizeof a6; getsockname(fds[1], (void *)&a6, &l);
  printf("%d %d\n", ntohs(a4.sin_port), ntohs(a6.sin6_port)); fflush(stdout);
  struct pollfd p[2] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 } };
  for (int i = 0; i < 16 && poll(p, 2, 8000) > 0; i++)
    for (int k = 0; k < 2; k++) if (p[k].revents) close(accept(fds[k], 0, 0));
  return 0;
}
]])
    client = S.cc("connector", [[
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
/* connector HOST PORT: prints "ok" or the error */
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int v6 = strchr(argv[1], ':') != NULL;
  int s = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  if (s < 0) { printf("%s\n", strerror(errno)); return 1; }
  int r;
  if (v6) { struct sockaddr_in6 a; memset(&a, 0, sizeof a); a.sin6_family = AF_INET6; a.sin6_port = htons(atoi(argv[2]));
            inet_pton(AF_INET6, argv[1], &a.sin6_addr); r = connect(s, (void *)&a, sizeof a); }
  else { struct sockaddr_in a; memset(&a, 0, sizeof a); a.sin_family = AF_INET; a.sin_port = htons(atoi(argv[2]));
         inet_pton(AF_INET, argv[1], &a.sin_addr); r = connect(s, (void *)&a, sizeof a); }
  printf("%s\n", r == 0 ? "ok" : strerror(errno));
  return r == 0 ? 0 : 1;
}
]])
  end)

  S.it("layer:netns", "a pack without network cannot reach a server on 127.0.0.1 or ::1; a network pack can", function()
    assert.is_string(server)
    assert.is_string(client)
    local p = assert(io.popen(q(server)))
    local ports = p:read("l")
    local p4, p6 = ports:match("^(%d+) (%d+)$")
    assert.truthy(p4)
    -- the host's network needs the operator's word (issue 14)
    local function pack(name, network)
      local root = S.pack(S.manifest(name, client, { wrap = { network = network } }))
      return assert(hcp.create({ pack_dirs = { root }, network = network and "unrestricted" or nil }))
    end
    local closed, open = pack("nonet", false), pack("net", true)
    local r4 = closed:call({ pack = "nonet", args = { "127.0.0.1", p4 } })
    local r6 = closed:call({ pack = "nonet", args = { "::1", p6 } })
    local o4 = open:call({ pack = "net", args = { "127.0.0.1", p4 } })
    local o6 = open:call({ pack = "net", args = { "::1", p6 } })
    S.sh("pkill -f " .. q(server) .. " || true")
    p:close()
    assert.is_true(layers_of(r4).netns)
    assert.is_false(r4.ok)
    assert.is_false(r6.ok)
    assert.is_nil(layers_of(o4).netns)
    assert.equal("ok\n", o4.stdout)
    assert.equal("ok\n", o6.stdout)
  end)

  it("wrap.network: true is refused without the operator's word; an http binding alone grants no network", function()
    local root = S.pack(S.manifest("wide", "true", { wrap = { network = true } }))
    local res = assert(hcp.create({ pack_dirs = { root } })):call({ pack = "wide" })
    assert.equal(126, res.exit)
    assert.matches('^sandbox: pack "wide" asks for unrestricted network %(wrap.network: true%); only the operator', res.error)
    assert.is_nil(res.stdout)
    root = S.pack(S.manifest("api", "true", { bindings = { tok = { family = "http", env = "TOK" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root }, bindings = { tok = function() return "t" end } }))
    res = rt:call({ pack = "api" })
    assert.is_true(res.ok, res.error)
    if not S.lacks("layer:netns") then assert.is_true(layers_of(res).netns) end
  end)
end)

describe("isolation: processes (pidns)", function()
  S.it("layer:pidns", "the child cannot read the runtime's /proc/<pid>/environ and sees only its own processes", function()
    local rt = sh_pack("p")
    local res = sh(rt, "p", 'cat /proc/"$1"/environ; echo "environ:$?"; ls /proc | grep -c "^[0-9]"',
      tostring(core.getpid()))
    assert.is_true(layers_of(res).pidns)
    assert.matches("environ:[1-9]", res.stdout)
    local n = tonumber(res.stdout:match("\n(%d+)\n$"))
    assert.is_true(n ~= nil and n >= 1 and n <= 4, res.stdout .. res.stderr)
  end)

  S.it("layer:pidns", "a child that setsid()s and double-forks is still killed at the timeout", function()
    local marker = "37." .. core.getpid()
    local rt = sh_pack("esc", { wrap = { timeout_ms = 2000 } })
    local call = rt:start({ pack = "esc", args = { "-c", "setsid sh -c 'sleep " .. marker .. " & sleep " .. marker
      .. "' & sleep 30", "sh" } })
    assert(S.wait_until(function() return #sleepers(marker) == 2 end, 30, "the two escapees to run"))
    local res = call:wait()
    assert.is_true(res.timed_out)
    assert(S.wait_until(function() return #sleepers(marker) == 0 end, 30, "the escapees to be killed"))
  end)

  S.it("layer:pidns", "and killed at rt:close() when the call was never waited for", function()
    local marker = "38." .. core.getpid()
    local rt = sh_pack("esc2", { wrap = { timeout_ms = 60000 } })
    -- the handle is kept, not waited for: a handle collected before its call
    -- ended kills the call itself (lua-api.md), which is not what this checks
    local handle = rt:start({ pack = "esc2", args = { "-c", "setsid sh -c 'sleep " .. marker .. "' & sleep 60", "sh" } })
    assert(S.wait_until(function() return #sleepers(marker) == 1 end, 30, "the escapee to run"))
    rt:close()
    assert.is_true(handle:wait().ok == false) -- finished by the close: killed
    assert(S.wait_until(function() return #sleepers(marker) == 0 end, 30, "the escapee to be killed"))
  end)
end)

describe("isolation: privileges (caps)", function()
  -- as another user, the runtime has no capabilities to drop
  S.it({ "root", "layer:caps" }, "a root runtime's child has no capabilities, and a setuid-root binary gives none back",
    function()
    local dir = S.tmpdir("suid-")
    assert(os.execute(string.format("cp /bin/grep %s/suid-grep && chmod 4755 %s/suid-grep", q(dir), q(dir))))
    local rt = assert(hcp.create({ allow_bins = { "grep", dir .. "/suid-grep" } }))
    for _, bin in ipairs({ "grep", dir .. "/suid-grep" }) do
      local res = rt:exec({ bin = bin, args = { "^Cap", "/proc/self/status" } })
      assert.is_true(layers_of(res).caps, res.error)
      for _, k in ipairs({ "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" }) do
        assert.matches(k .. ":%s+0000000000000000\n", res.stdout)
      end
    end
    -- and with "minimal" root's child keeps them: the layer is what drops them
    local min = assert(hcp.create({ allow_bins = { "grep" }, isolation = "minimal" }))
    assert.not_matches("CapEff:%s+0000000000000000", min:exec({ bin = "grep", args = { "^Cap", "/proc/self/status" } }).stdout)
  end)
end)

describe("isolation: limits", function()
  it("wrap.limits.file_mb stops a large write (SIGXFSZ)", function()
    local rt = sh_pack("big", { wrap = { limits = { file_mb = 1 } } })
    local res = sh(rt, "big", "head -c 3000000 /dev/zero > big")
    assert.is_false(res.ok, res.stdout)
    assert.is_true(layers_of(res).limits)
  end)

  it("a fork bomb is stopped by the pids cgroup and the runtime stays responsive", function()
    local rt = sh_pack("bomb", { wrap = { limits = { procs = 20 } } })
    local probe = rt:call({ pack = "bomb", args = { "-c", "true" } })
    if not layers_of(probe).pids_cgroup then
      pending("no writable pids cgroup on this host: the process bound is RLIMIT_NPROC, not enforced for root")
      return
    end
    local forker = S.cc("forker", [[
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) { int ok = 0; for (int i = 0; i < 200; i++) { pid_t p = fork(); if (p == 0) { sleep(2); _exit(0); } if (p > 0) ok++; }
  printf("%d\n", ok); fflush(stdout); kill(0, SIGKILL); return 0; }
]])
    local root = S.pack(S.manifest("forker", forker, { wrap = { limits = { procs = 20 } } }))
    local rt2 = assert(hcp.create({ pack_dirs = { root }, allow_bins = { "echo" } }))
    local bomb = rt2:start({ pack = "forker" })
    local quick = rt2:exec({ bin = "echo", args = { "answered" } })   -- another call of the same runtime
    assert.equal("answered\n", quick.stdout, quick.error)
    local forked = tonumber(bomb:wait().stdout:match("^(%d+)"))
    assert.is_true(forked ~= nil and forked < 25, "forked " .. tostring(forked))
  end)
end)

describe("isolation: fail closed", function()
  -- a wrapper that runs a command with the Landlock syscalls answering
  -- ENOSYS, as on a kernel without Landlock
  local nolandlock
  setup(function()
    nolandlock = S.cc("nolandlock", S.NOLANDLOCK_C)
  end)

  local function lua_under_nolandlock(code)
    local script = S.write(S.tmpdir("nl-") .. "/t.lua", code)
    local paths = "package.path=\"lua/?.lua;lua/?/init.lua;\"..package.path; package.cpath=\"" .. S.CPATH
      .. ";\"..package.cpath"
    return S.sh(string.format("cd %s && %s %s -e %s %s 2>&1", q(S.REPO), q(nolandlock), S.LUA, q(paths), q(script)))
  end

  it("asking for a layer the host lacks fails at create, naming it, and nothing runs", function()
    assert.is_string(nolandlock)
    local out = lua_under_nolandlock([[
      local hcp = require("hcp")
      local rt, err = hcp.create({ isolation = { "landlock", "seccomp" }, allow_bins = { "touch" } })
      io.write(tostring(rt), " | ", tostring(err))
    ]])
    assert.matches('^nil | sandbox: isolation "landlock" unavailable: ', out)
  end)

  it("auto applies what is left, and each result says exactly which layers it got", function()
    local out = lua_under_nolandlock([[
      local hcp = require("hcp")
      local rt = assert(hcp.create({ allow_bins = { "true" } }))
      local res = rt:exec({ bin = "true" })
      local d
      for _, l in ipairs(hcp.doctor().layers) do if l.name == "landlock" then d = l end end
      io.write(tostring(res.ok), " | ", table.concat(res.isolation, ","), " | ", tostring(d.available))
    ]])
    local ok, layers, avail = out:match("^(%a+) | ([^|]*) | (%a+)$")
    assert.equal("true", ok, out)
    assert.not_matches("landlock", layers)
    assert.equal("false", avail)
    if LAYERS.seccomp then assert.matches("seccomp", layers) end
  end)
end)
