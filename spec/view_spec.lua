-- spec/view_spec.lua — issue 10, attacked through the runtime as an agent
-- (who only sends envelopes) or a hostile child would: what the child can
-- reach of the host. One describe per category of the issue, each case run
-- under both drivers (bwrap cases pending, with the reason, where
-- bubblewrap cannot run), as root here; the cases that matter for a
-- non-root runtime are run again as `nobody` at the end. Every server and
-- IPC object a case aims at is started by this spec, with a pid-based
-- name, and stopped by it; a case that would change the host if the
-- sandbox failed runs in a child process (the runtime's child), never in
-- this one.
local hcp = require("hcp")
local core = require("hcp.core")
local S = require("support")

local q = S.q
local PID = core.getpid()
local IS_ROOT = S.sh("id -u") == "0\n"

local TOOL_C = [[
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static socklen_t addr(struct sockaddr_un *a, const char *name, int abstract)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n + 2 > sizeof a->sun_path) exit(3);
    memcpy(a->sun_path + (abstract ? 1 : 0), name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (abstract ? 1 : 1));
}

/* serve <name> <flagfile> <abstract 0|1>: accept, say "pwned", note it */
static int serve(char **a)
{
    struct sockaddr_un sa;
    int abstract = atoi(a[2]);
    socklen_t len = addr(&sa, a[0], abstract);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 8) < 0) { perror("serve"); return 1; }
    if (!abstract) chmod(a[0], 0777);
    printf("listening\n");
    fflush(stdout);
    alarm(120);
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        (void)!write(c, "pwned\n", 6);
        int f = open(a[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (f >= 0) { (void)!write(f, "connected\n", 10); close(f); }
        close(c);
    }
}

/* connect <name> <abstract 0|1>: connect=<errno>, and what the server said */
static int conn(char **a)
{
    struct sockaddr_un sa;
    socklen_t len = addr(&sa, a[0], atoi(a[1]));
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) { printf("connect=%d\n", errno); return 0; }
    if (connect(fd, (struct sockaddr *)&sa, len) < 0) { printf("connect=%d\n", errno); return 0; }
    char buf[32] = { 0 };
    (void)!read(fd, buf, sizeof buf - 1);
    printf("connect=0 said=%s", buf);
    return 0;
}

/* shmhold <idfile>: a 0600 segment holding a secret, kept until killed */
static int shmhold(char **a)
{
    int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    if (id < 0) { perror("shmget"); return 1; }
    char *p = shmat(id, NULL, 0);
    if (p == (void *)-1) { perror("shmat"); return 1; }
    strcpy(p, "s3cret-shm");
    shmctl(id, IPC_RMID, NULL);   /* gone when we detach: nothing left behind */
    FILE *f = fopen(a[0], "w");
    fprintf(f, "%d\n", id);
    fclose(f);
    alarm(120);
    pause();
    return 0;
}

/* shmpeek <id>: attach and read, or the errno */
static int shmpeek(char **a)
{
    char *p = shmat(atoi(a[0]), NULL, 0);
    if (p == (void *)-1) { printf("shmat=%d\n", errno); return 0; }
    printf("shmat=0 read=%s\n", p);
    return 0;
}

/* shmmake <key>: a segment left behind on purpose */
static int shmmake(char **a)
{
    int id = shmget((key_t)atoi(a[0]), 4096, IPC_CREAT | 0600);
    printf("shmget=%d\n", id < 0 ? errno : 0);
    return 0;
}

/* forkmany <n>: children that sleep until killed; counts what failed */
static int forkmany(char **a)
{
    int n = atoi(a[0]), ok = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) { pause(); _exit(0); }
        if (pid < 0) failed++; else ok++;
    }
    printf("forked=%d failed=%d\n", ok, failed);
    return 0;
}

/* openw <path>: open for writing without truncating or writing a byte */
static int openw(char **a)
{
    int fd = open(a[0], O_WRONLY | O_APPEND);
    printf("open=%d\n", fd < 0 ? errno : 0);
    if (fd >= 0) close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) return 2;
    const char *c = argv[1];
    if (!strcmp(c, "serve") && argc == 5) return serve(argv + 2);
    if (!strcmp(c, "connect") && argc == 4) return conn(argv + 2);
    if (!strcmp(c, "shmhold") && argc == 3) return shmhold(argv + 2);
    if (!strcmp(c, "shmpeek") && argc == 3) return shmpeek(argv + 2);
    if (!strcmp(c, "shmmake") && argc == 3) return shmmake(argv + 2);
    if (!strcmp(c, "forkmany") && argc == 3) return forkmany(argv + 2);
    if (!strcmp(c, "openw") && argc == 3) return openw(argv + 2);
    return 2;
}
]]

-- A directory everyone may enter (nobody runs the tool from it too; in
-- /var/tmp, which the old bwrap view showed, so its attacks could run),
-- removed when this file's Lua state closes.
local SHARED = assert(core.mkdtemp("/var/tmp", "hcp-view-"))
assert(os.execute("chmod 755 " .. q(SHARED)))
teardown(function() core.rmtree(SHARED) end)

-- How this file starts a second Lua process (in a cgroup, under ulimit, as
-- nobody): from the checkout, with the build under test.
local LUA_ENV = S.LUA_ENV
local TOOL
local function tool()
  if not TOOL then
    local path, err = S.cc("viewtool", TOOL_C)
    assert(path, err)
    TOOL = SHARED .. "/viewtool"
    assert(os.execute(string.format("cp %s %s && chmod 755 %s", q(path), q(TOOL), q(TOOL))))
  end
  return TOOL
end

local kv = S.kv

local function eventually(f, ms)
  for _ = 1, (ms or 5000) / 50 do
    if f() then return true end
    os.execute("sleep 0.05")
  end
  return f()
end

local ENOENT = 2

local BWRAP_ERR
do
  local rt, err = hcp.create({ driver = "bwrap" })
  if rt then rt:close() else BWRAP_ERR = tostring(err) end
end
local DRIVERS = { "local", "bwrap" }

local rts = {}
teardown(function() for _, rt in ipairs(rts) do rt:close() end end)

-- A runtime over packs written into a fresh 0755 directory.
local function runtime(driver, manifests, opts)
  local parent = S.tmpdir("vpacks-")
  assert(os.execute("chmod 755 " .. q(parent)))
  for _, m in ipairs(manifests) do S.pack(m, parent) end
  local o = { pack_dirs = { parent }, driver = driver, state_dir = S.tmpdir("vstate-"), out_dir = S.tmpdir("vout-") }
  for k, v in pairs(opts or {}) do o[k] = v end
  local rt = assert(hcp.create(o))
  rts[#rts + 1] = rt
  return rt, parent
end

-- Runs `fn(driver)` as one case per driver. What these specs check is the
-- view: under the local driver, the constructed root and the IPC namespace
-- of the default runtime (a non-root runtime without user namespaces has
-- neither: docs/security.md says what it keeps).
local function each_driver(name, fn)
  for _, driver in ipairs(DRIVERS) do
    local lacks = driver == "local" and S.lacks({ "layer:rootfs", "layer:ipcns" }) or nil
    it(name .. " [" .. driver .. "]", function()
      if driver == "bwrap" and BWRAP_ERR then pending("bwrap unavailable: " .. BWRAP_ERR) return end
      if lacks then pending(lacks) return end
      fn(driver)
    end)
  end
end

local function sh_pack(name, wrap)
  local w = { args = { "-c", 'eval "$1"', "sh" }, timeout_ms = 20000 }
  for k, v in pairs(wrap or {}) do w[k] = v end
  return S.manifest(name, "sh", { wrap = w })
end

local function tool_pack(name, wrap)
  local w = { timeout_ms = 20000 }
  for k, v in pairs(wrap or {}) do w[k] = v end
  return S.manifest(name, tool(), { wrap = w })
end

-- ---------------------------------------------------------------------------
-- 1. Host services through unix sockets
-- ---------------------------------------------------------------------------

describe("view: host unix sockets", function()
  local servers, dirs = {}, {}
  -- A pathname server in `dir` (made for it, removed after); its socket path
  -- and the file it notes connections in.
  -- A pathname server at `sock`, noting connections in `flag` (default
  -- sock .. ".connected"); returns the flag.
  local function serve_at(sock, flag)
    flag = flag or sock .. ".connected"
    local p = assert(core.spawn({ path = tool(), argv = { tool(), "serve", sock, flag, "0" }, env = {}, cwd = "/" }))
    servers[#servers + 1] = p
    assert(eventually(function() return select(2, S.sh("test -S " .. q(sock))) == 0 end), "server did not start: " .. sock)
    return flag
  end
  local function serve_path(dir)
    if not core.mkdir(dir) then return nil end -- /run, not as root: the root run covers it
    dirs[#dirs + 1] = dir
    assert(os.execute("chmod 755 " .. q(dir)))
    local sock = dir .. "/s.sock"
    return sock, serve_at(sock, dir .. "/connected")
  end
  local function serve_abstract(name, flagdir)
    local flag = flagdir .. "/connected-abstract"
    local p = assert(core.spawn({ path = tool(), argv = { tool(), "serve", name, flag, "1" }, env = {}, cwd = "/" }))
    servers[#servers + 1] = p
    assert(eventually(function() return S.read("/proc/net/unix"):find("@" .. name, 1, true) ~= nil end))
    return flag
  end
  teardown(function()
    for _, p in ipairs(servers) do p:kill("KILL") p:wait() end
    for _, d in ipairs(dirs) do core.rmtree(d) end
  end)

  local socks
  setup(function()
    socks = {}
    for _, d in ipairs({ "/tmp", "/var/tmp", "/run" }) do
      socks[#socks + 1] = serve_path(d .. "/hcp-spec-sock-" .. PID)
    end
    assert.is_true(#socks >= 2)
  end)

  it("(the servers answer a client that is not sandboxed)", function()
    local r = kv(S.sh(q(tool()) .. " connect " .. q(socks[1]) .. " 0"))
    assert.equal(0, r.connect)
    assert.equal("pwned", r.said)
    assert.truthy(eventually(function() return S.read(socks[1]:gsub("s%.sock$", "connected")) end))
    os.remove((socks[1]:gsub("s%.sock$", "connected")))
  end)

  for _, network in ipairs({ false, true }) do
    each_driver("no pathname socket in /tmp, /var/tmp, /run is reachable (network " .. tostring(network) .. ")", function(driver)
      -- the host's network needs the operator's word (issue 14)
      local rt = runtime(driver, { tool_pack("uc", { network = network }) }, { network = "unrestricted" })
      for _, sock in ipairs(socks) do
        local res = rt:call({ pack = "uc", args = { "connect", sock, "0" } })
        assert.is_true(res.ok, res.error)
        local r = kv(res.stdout)
        assert.equal(ENOENT, r.connect, sock .. ": " .. res.stdout)
        assert.is_nil(S.read(sock:gsub("s%.sock$", "connected")), sock)
      end
    end)
  end

  each_driver("no abstract socket of the host is reachable, even with network", function(driver)
    local name = "hcp-spec-abstract-" .. PID .. "-" .. driver
    local flag = serve_abstract(name, SHARED)
    local open = kv(S.sh(q(tool()) .. " connect " .. q(name) .. " 1"))
    assert.equal(0, open.connect) -- reachable from outside: the case means something
    -- the server notes the connection after it answered: wait for the note
    assert.truthy(eventually(function() return S.read(flag) end))
    os.remove(flag)
    for _, network in ipairs({ false, true }) do
      local rt = runtime(driver, { tool_pack("ac", { network = network }) }, { network = "unrestricted" })
      local res = rt:call({ pack = "ac", args = { "connect", name, "1" } })
      local r = kv(res.stdout)
      assert.is_number(r.connect, res.stdout .. (res.stderr or ""))
      assert.not_equal(0, r.connect, "network " .. tostring(network))
      assert.is_nil(S.read(flag))
    end
  end)

  each_driver("an operator's grant makes exactly that socket reachable; a pack cannot grant one", function(driver)
    local rt = runtime(driver, { tool_pack("granted"), tool_pack("other") },
      { sockets = { granted = { socks[2] } } })
    local r = kv(rt:call({ pack = "granted", args = { "connect", socks[2], "0" } }).stdout)
    assert.equal(0, r.connect)
    assert.equal("pwned", r.said)
    os.remove(socks[2]:gsub("s%.sock$", "connected"))
    assert.equal(ENOENT, kv(rt:call({ pack = "granted", args = { "connect", socks[1], "0" } }).stdout).connect)
    assert.equal(ENOENT, kv(rt:call({ pack = "other", args = { "connect", socks[2], "0" } }).stdout).connect)
    -- a manifest that names sockets does not load: only the operator grants
    local m = tool_pack("selfgrant")
    m.wrap.sockets = { socks[1] }
    local _, parent = runtime(driver, {})
    S.pack(m, parent)
    local rt2 = assert(hcp.create({ pack_dirs = { parent }, driver = driver }))
    rts[#rts + 1] = rt2
    local problems = rt2:problems()
    assert.equal(1, #problems)
    assert.equal("wrap.sockets", problems[1].field)
  end)

  -- A host service's socket inside a directory the view shows: a pack root
  -- (the operator's), a system directory (a service built under /usr/local
  -- or installed in /opt keeps its socket there), a socket bound through a
  -- link. connect(2) works through a read-only bind, so each must be
  -- covered; a granted one beside them stays reachable.
  each_driver("no listening host socket inside a directory of the view is reachable (pack root, system dir, via a link)",
    function(driver)
      local rt, parent = runtime(driver, { tool_pack("inpack") })
      local root = parent .. "/inpack"
      assert(os.execute("mkdir -m 755 " .. q(root .. "/sub") .. " && ln -s " .. q(root .. "/sub") .. " " .. q(parent .. "/lnk")))
      local targets = { root .. "/s.sock", root .. "/sub/s.sock" }
      local flags = { serve_at(targets[1]), serve_at(parent .. "/lnk/s.sock") } -- the second bound through the link
      -- as root: in /opt, and in /etc/ssl (a directory bound inside the
      -- view's own /etc, which a call cannot add a mount to on the base view)
      for _, sys in ipairs(IS_ROOT and { "/opt", "/etc/ssl" } or {}) do
        if core.filetype(sys) == "dir" then
          local sysdir = sys .. "/hcp-spec-sock-" .. PID .. "-" .. driver
          assert(core.mkdir(sysdir))
          dirs[#dirs + 1] = sysdir
          assert(os.execute("chmod 755 " .. q(sysdir)))
          targets[#targets + 1] = sysdir .. "/s.sock"
          flags[#flags + 1] = serve_at(targets[#targets])
        end
      end
      -- reachable from outside: the cases mean something
      for i, sock in ipairs(targets) do
        assert.equal("pwned", kv(S.sh(q(tool()) .. " connect " .. q(sock) .. " 0")).said, sock)
        assert.truthy(eventually(function() return S.read(flags[i]) end))
        os.remove(flags[i])
      end
      for i, sock in ipairs(targets) do
        -- a path under /etc is one no argument may name (the host-path
        -- rule): there the pack's program has it written in, as a hostile
        -- one would
        local res
        if sock:find("^/etc/") then
          local fparent = S.tmpdir("vpacks-")
          local bin = S.pack(S.manifest("fixed", "./bin/run", { wrap = { timeout_ms = 20000 } }), fparent) .. "/bin"
          assert(os.execute(string.format("chmod 755 %s && mkdir -m 755 %s && cp %s %s/viewtool"
            .. " && printf '%%s\n' '#!/bin/sh' %s > %s/run && chmod 755 %s/run", q(fparent), q(bin), q(tool()), q(bin),
            q("exec " .. q(bin .. "/viewtool") .. " connect " .. q(sock) .. " 0"), q(bin), q(bin))))
          local frt = assert(hcp.create({ pack_dirs = { fparent }, driver = driver, state_dir = S.tmpdir("vstate-") }))
          rts[#rts + 1] = frt
          res = frt:call({ pack = "fixed" })
        else
          res = rt:call({ pack = "inpack", args = { "connect", sock, "0" } })
        end
        assert.is_true(res.ok, res.error)
        local r = kv(res.stdout)
        assert.is_number(r.connect, sock .. ": " .. res.stdout)
        assert.not_equal(0, r.connect, sock .. ": " .. res.stdout)
        assert.is_nil(S.read(flags[i]), sock)
      end
      -- granted: that one only, though the pack root shows both
      local rt2 = assert(hcp.create({ pack_dirs = { parent }, driver = driver, state_dir = S.tmpdir("vstate-"),
        sockets = { inpack = { targets[1] } } }))
      rts[#rts + 1] = rt2
      local granted = kv(rt2:call({ pack = "inpack", args = { "connect", targets[1], "0" } }).stdout)
      assert.equal("pwned", granted.said)
      os.remove(flags[1])
      local other = kv(rt2:call({ pack = "inpack", args = { "connect", targets[2], "0" } }).stdout)
      assert.is_number(other.connect)
      assert.not_equal(0, other.connect)
      assert.is_nil(S.read(flags[2]))
    end)

  -- The grant's path is checked lexically at create, and must be a socket
  -- itself (no final link); but a directory on the way may be a link, and
  -- what is bound is where it leads when the call runs. Into the host's
  -- /dev (a service's socket there) it is refused, as /dev itself is.
  each_driver("a grant that leads into the host's /dev through a link on the way is refused, nothing spawned", function(driver)
    if not IS_ROOT then pending("making a socket in the host's /dev needs root") return end
    local devdir = "/dev/hcp-spec-dir-" .. PID .. "-" .. driver
    local flag = SHARED .. "/connected-dev-" .. driver
    assert(core.mkdir(devdir))
    local p = assert(core.spawn({ path = tool(), argv = { tool(), "serve", devdir .. "/s.sock", flag, "0" }, env = {}, cwd = "/" }))
    finally(function() p:kill("KILL") p:wait() core.rmtree(devdir) os.remove(flag) end)
    assert(eventually(function() return select(2, S.sh("test -S " .. q(devdir .. "/s.sock"))) == 0 end),
      "server did not start")
    local linkdir = S.tmpdir("vlink-")
    assert(os.execute("chmod 755 " .. q(linkdir) .. " && ln -s " .. q(devdir) .. " " .. q(linkdir .. "/d")))
    local granted = linkdir .. "/d/s.sock"
    local rt = runtime(driver, { tool_pack("g") }, { sockets = { g = { granted } } })
    local res = rt:call({ pack = "g", args = { "connect", granted, "0" } })
    assert.equal(126, res.exit, res.stdout)
    assert.is_truthy(tostring(res.error):find(granted .. ": resolves to " .. devdir .. "/s.sock" ..
      ": reserved: the view has its own /dev, /proc and /tmp", 1, true), res.error)
    assert.is_nil(res.stdout) -- refused before the spawn: no output at all
    assert.is_nil(S.read(flag))
  end)

  it("a granted path that is not a socket is refused at the call; a bad grant at create", function()
    local rt = runtime("local", { tool_pack("g") }, { sockets = { g = { SHARED } } })
    local res = rt:call({ pack = "g", args = { "connect", SHARED, "0" } })
    assert.equal(126, res.exit)
    assert.equal("sandbox: granted socket " .. SHARED .. " is a dir, not a socket", res.error)
    assert.same({ nil, 'hcp.create: option "sockets": sockets["g"][1] must be an absolute path' },
      { hcp.create({ sockets = { g = { "run/x" } } }) })
    assert.matches('key "Bad Name" is not a pack name', select(2, hcp.create({ sockets = { ["Bad Name"] = { "/x" } } })))
  end)
end)

-- ---------------------------------------------------------------------------
-- 2. The pack root is never writable by the child, nor through the agent
-- ---------------------------------------------------------------------------

describe("view: the pack root is read-only", function()
  local function pack_state(root)
    return (S.read(root .. "/hcp.json") or "") .. "|" .. (S.read(root .. "/bin/tool") or "")
      .. "|" .. table.concat(core.listdir(root) or {}, ",") .. "|" .. table.concat(core.listdir(root .. "/bin") or {}, ",")
  end
  local function with_bin(root)
    S.mkdir(root .. "/bin")
    S.write(root .. "/bin/tool", "#!/bin/sh\necho tool\n", 493)
  end

  each_driver("the agent alone: sort -ohcp.json, --output=hcp.json, --out=hcp.json, -obin/tool change nothing", function(driver)
    local rt, parent = runtime(driver, { S.manifest("srt", "sort") })
    local root = parent .. "/srt"
    with_bin(root)
    local before = pack_state(root)
    for _, args in ipairs({
      { "-ohcp.json", "hcp.json" }, { "--output=hcp.json", "hcp.json" }, { "--out=hcp.json", "hcp.json" },
      { "-o", "hcp.json", "hcp.json" }, { "-obin/tool", "hcp.json" }, { "--ou=bin/tool", "hcp.json" },
    }) do
      rt:call({ pack = "srt", args = args, stdin = "" })
      assert.equal(before, pack_state(root), table.concat(args, " "))
    end
    -- and the next runtime loads the same pack
    local rt2 = assert(hcp.create({ pack_dirs = { parent } }))
    rts[#rts + 1] = rt2
    assert.equal("sort", rt2:packs()[1].bin)
  end)

  each_driver("the child in mode none cannot write, replace, chmod or remove a file of its pack", function(driver)
    local rt, parent = runtime(driver, { sh_pack("rw") })
    local root = parent .. "/rw"
    with_bin(root)
    local before = pack_state(root)
    local res = rt:call({ pack = "rw", args = { table.concat({
      'echo \'{"hcp":1,"name":"rw","wrap":{"bin":"/bin/sh","network":true}}\' > hcp.json',
      "echo pwned > bin/tool", "cp /bin/sh bin/tool", "chmod 777 bin/tool", "rm -f bin/tool",
      "mv hcp.json x", "touch new", "mkdir d", "ln -s /bin/sh bin/link",
      "echo done" }, "; ") } })
    assert.equal("done\n", res.stdout)
    assert.matches("Read%-only file system", res.stderr)
    assert.equal(before, pack_state(root))
  end)

  each_driver("mode none still writes: TMPDIR (or the private /tmp) and file-flag outputs", function(driver)
    local rt, parent = runtime(driver, { sh_pack("tmpw") })
    local res = rt:call({ pack = "tmpw", args = { 'd=${TMPDIR:-/tmp}; echo t > "$d/x" && cat "$d/x" && echo o > "$3"', "-o", "made.txt" } })
    assert.is_true(res.ok, tostring(res.error) .. (res.stderr or ""))
    assert.equal("t\n", res.stdout)
    assert.equal(1, #res.files)
    assert.equal("o\n", S.read(res.files[1]))
    assert.is_nil(core.kind(parent .. "/tmpw/made.txt"))
  end)
end)

-- ---------------------------------------------------------------------------
-- 3. SysV IPC is not shared with the host, and does not outlive the call
-- ---------------------------------------------------------------------------

describe("view: IPC", function()
  local holder, shmid
  setup(function()
    local idfile = SHARED .. "/shmid"
    holder = assert(core.spawn({ path = tool(), argv = { tool(), "shmhold", idfile }, env = {}, cwd = "/" }))
    assert(eventually(function() return (S.read(idfile) or ""):match("%d+\n") end))
    shmid = tonumber(S.read(idfile):match("%d+"))
  end)
  teardown(function() holder:kill("KILL") holder:wait() end)

  it("(without the layers, a root child attaches the host's 0600 segment)", function()
    if not IS_ROOT then pending("root only") return end
    local rt = runtime("local", { tool_pack("peek0") }, { isolation = "minimal" })
    local r = kv(rt:call({ pack = "peek0", args = { "shmpeek", tostring(shmid) } }).stdout)
    assert.equal(0, r.shmat)
    assert.equal("s3cret-shm", r.read)
  end)

  each_driver("the child cannot attach a segment the host holds", function(driver)
    local rt = runtime(driver, { tool_pack("peek") })
    local res = rt:call({ pack = "peek", args = { "shmpeek", tostring(shmid) } })
    local r = kv(res.stdout)
    assert.is_number(r.shmat, res.stdout .. (res.stderr or ""))
    assert.not_equal(0, r.shmat)
    local again = kv(S.sh(q(tool()) .. " shmpeek " .. shmid))   -- the host's copy is untouched
    assert.equal("s3cret-shm", again.read)
  end)

  each_driver("a segment the child makes and leaves is gone with the call", function(driver)
    local key = 0x4c000000 + (PID % 0x100000) * 2 + (driver == "bwrap" and 1 or 0)
    local rt = runtime(driver, { tool_pack("mk") })
    assert.equal(0, kv(rt:call({ pack = "mk", args = { "shmmake", tostring(key) } }).stdout).shmget)
    local listed = S.read("/proc/sysvipc/shm") or ""
    local found = false
    for line in listed:gmatch("[^\n]+") do
      if tonumber(line:match("^%s*(%-?%d+)")) == key then found = true end
    end
    if found then os.execute("ipcrm -M " .. key) end
    assert.is_false(found, "the child's segment outlived the call")
  end)
end)

-- ---------------------------------------------------------------------------
-- 4. A root runtime's child is not root, sees no root secret, no sysctl
-- ---------------------------------------------------------------------------

describe("view: no host root in the child", function()
  each_driver("the child runs as nobody, not uid 0", function(driver)
    if not IS_ROOT then pending("root only") return end
    local rt = runtime(driver, { sh_pack("who") })
    local res = rt:call({ pack = "who", args = { "id -u; id -g; id -G" } })
    assert.equal("65534\n65534\n65534\n", res.stdout)
    assert.truthy(table.concat(res.isolation, ","):find("run_as", 1, true))
  end)

  each_driver("a configured run_as is the child's uid and gid", function(driver)
    if not IS_ROOT then pending("root only") return end
    local rt = runtime(driver, { sh_pack("who2", { workspace = { mode = "ephemeral" } }) },
      { run_as = { uid = 4321, gid = 4322 } })
    local res = rt:call({ pack = "who2", args = { "id -u; id -g; touch mine && stat -c %u:%g mine" } })
    assert.equal("4321\n4322\n4321:4322\n", res.stdout)
  end)

  each_driver("kernel.core_pattern cannot be opened for writing; /etc/shadow is not there", function(driver)
    local rt = runtime(driver, { tool_pack("cp"), sh_pack("shadow") })
    local r = kv(rt:call({ pack = "cp", args = { "openw", "/proc/sys/kernel/core_pattern" } }).stdout)
    assert.is_number(r.open)
    assert.not_equal(0, r.open)
    -- the paths are put together inside the script: the host-path rule
    -- (issue 11) would refuse the call before the view could be tested
    local res = rt:call({ pack = "shadow", args = { "e=/e; cat ${e}tc/shadow; ls ${e}tc" } })
    assert.is_string(res.stderr, res.error)
    assert.equal("", res.stderr:match("root:") and "leaked" or "")
    assert.matches("No such file or directory", res.stderr)
    assert.not_matches("shadow", res.stdout)
  end)

  each_driver("other principals' jails, the state dir, the runtime's private dir, /home, /root are absent", function(driver)
    local state = "/var/tmp/hcp-spec-state-" .. PID .. "-" .. driver
    finally(function() core.rmtree(state) end)
    local rt = runtime(driver, { sh_pack("ws", { workspace = { mode = "workspace" } }),
      sh_pack("eph", { workspace = { mode = "ephemeral" } }) }, { state_dir = state })
    local other = rt:call({ pack = "ws", principal = "alice", args = { "echo alice-secret > secret; pwd" } })
    assert.is_true(other.ok, other.error)
    local alice = other.stdout:match("[^\n]+")
    local res = rt:call({ pack = "eph", principal = "bob", args = { table.concat({
      "cat " .. q(alice .. "/secret"), "ls " .. q(state), "r=/; ls ${r}home ${r}root /var /run /var/tmp " .. q(SHARED),
      "echo PRIV; ls -A \"$(dirname \"$PWD\")\"; echo MINE; basename \"$PWD\"", "echo end" }, "; ") } })
    assert.equal("end\n", res.stdout:match("end\n$"))
    assert.not_matches("alice%-secret", res.stdout)
    -- the runtime's private directory shows only this call's own jail and private dir
    local priv, mine = res.stdout:match("PRIV\n(.-)MINE\n([^\n]+)\n")
    for name in (priv or ""):gmatch("[^\n]+") do
      assert.is_truthy(name == mine or name:match("^call%-"), "another call's directory is visible: " .. name)
    end
    for _, p in ipairs({ alice .. "/secret", state, "/home", "/root", "/var", "/run", SHARED }) do
      assert.truthy(res.stderr:find(p .. "': No such file or directory", 1, true)
        or res.stderr:find(p .. ": No such file or directory", 1, true), p .. " in " .. res.stderr)
    end
  end)

  S.it("rootfs", "a list cannot ask for a view the child could undo, nor run_as without the view", function()
    assert.same({ nil, 'sandbox: isolation "rootfs" needs "caps" (a child with capabilities could remount its view)' },
      { hcp.create({ isolation = { "rootfs", "pidns" } }) })
    if IS_ROOT then
      assert.same({ nil, 'sandbox: isolation "run_as" needs "rootfs" (the child reaches its jail through the constructed root)' },
        { hcp.create({ isolation = { "run_as", "caps" } }) })
    end
    assert.is_table((hcp.create({ isolation = { "rootfs", "caps" } })))
  end)

  it("hcp doctor says what a root child can do under \"minimal\", and results list only what was applied", function()
    if not IS_ROOT then pending("root only") return end
    local d = hcp.doctor({ isolation = "minimal" })
    local run_as
    for _, l in ipairs(d.layers) do if l.name == "run_as" then run_as = l end end
    assert.is_false(run_as.used)
    assert.matches("NOT USED: the child runs as host uid 0", run_as.detail)
    local rt = runtime("local", { sh_pack("min") }, { isolation = "minimal" })
    local res = rt:call({ pack = "min", args = { "id -u" } })
    assert.equal("0\n", res.stdout)
    assert.same({ "allowlist", "jail", "clean_env", "close_fds", "setsid", "no_new_privs" }, res.isolation)
  end)
end)

-- ---------------------------------------------------------------------------
-- 5. The per-call cgroup sits under the runtime's own: its limit holds
-- ---------------------------------------------------------------------------

describe("view: a cgroup-limited runtime", function()
  local probe = core.probe().cgroup
  local function limited_dir()
    if not IS_ROOT then return nil, "root only (makes a cgroup)" end
    if not probe.available then return nil, "no writable pids cgroup: " .. tostring(probe.reason) end
    local own = probe.own or "/"
    if probe.version ~= 1 and own ~= "/" then return nil, "v2 below the root: not set up here" end
    local mnt = probe.path:sub(1, #probe.path - (own == "/" and 0 or #own))
    return mnt .. "/hcp-spec-limited-" .. PID
  end

  each_driver("a call forks no further than the runtime's own pids.max", function(driver)
    local dir, why = limited_dir()
    if not dir then pending(why) return end
    local suffix = driver == "bwrap" and "-b" or "-l"
    dir = dir .. suffix
    assert(core.mkdir(dir))
    finally(function()
      eventually(function() return core.rmdir(dir .. "/hcp") or not core.kind(dir .. "/hcp") end)
      eventually(function() return core.rmdir(dir) end)
    end)
    S.write(dir .. "/pids.max", "40\n")
    local parent = S.tmpdir("cgpacks-")
    S.pack(tool_pack("bomb"), parent)
    local script = S.write(S.tmpdir("cg-") .. "/run.lua", string.format([[
      local hcp = require("hcp")
      local rt = assert(hcp.create({ pack_dirs = { %q }, driver = %q }))
      local res = rt:call({ pack = "bomb", args = { "forkmany", "200" } })
      io.write(res.stdout or "", " cgroup=", tostring(require("hcp.core").probe().cgroup.path), "\n")
      rt:close()
    ]], parent, driver))
    local out = S.sh(LUA_ENV .. string.format("sh -c 'echo $$ > \"$0\"/cgroup.procs && exec \"$1\" \"$2\"' %s %s %s 2>&1",
      q(dir), q(S.LUA), q(script)))
    local r = kv(out)
    assert.is_number(r.forked, out)
    assert.is_true(r.forked < 40, out)
    assert.is_true(r.failed > 150, out)
    assert.matches(dir, out, 1, true)
  end)

  it("hcp doctor names the cgroup calls nest under", function()
    local d = hcp.doctor()
    for _, l in ipairs(d.layers) do
      if l.name == "limits" and probe.available then
        assert.matches("under the runtime's own cgroup (" .. probe.path .. "/hcp)", l.detail, 1, true)
      end
    end
  end)
end)

-- ---------------------------------------------------------------------------
-- 6. Cleanup removes whatever the child made
-- ---------------------------------------------------------------------------

describe("view: cleanup", function()
  local TREE = table.concat({
    "mkdir -p deep && cd deep && i=0; while [ $i -lt 1500 ]; do mkdir d && cd d || break; i=$((i+1)); done; echo depth=$i",
    "cd \"$PWD0\" && mkdir -p locked/inner && echo x > locked/inner/f && chmod 000 locked/inner locked",
    "mkdir ro && echo y > ro/f && chmod 500 ro", "ln -s / rootlink", "mkfifo fifo", "echo made",
  }, "; ")

  each_driver("an ephemeral jail with a 1500-deep chain, chmod 000 and 0500 subtrees is removed", function(driver)
    local rt = runtime(driver, { sh_pack("mess", { workspace = { mode = "ephemeral" } }) })
    local res = rt:call({ pack = "mess", args = { "PWD0=$PWD; " .. TREE .. "; pwd" } })
    assert.matches("depth=1500", res.stdout)
    assert.matches("made\n", res.stdout)
    local jail = res.stdout:match("\n(/[^\n]+)\n$")
    assert.is_string(jail, res.stdout)
    assert.is_nil(S.kind_settled(jail), "left behind: " .. jail)
  end)
end)

-- ---------------------------------------------------------------------------
-- 7. Limits are clamped to the runtime's own hard limits
-- ---------------------------------------------------------------------------

describe("view: a runtime with lower hard limits", function()
  it("ulimit -n 512: calls run, the child gets at most 512, doctor says it was clamped", function()
    local parent = S.tmpdir("ulpacks-")
    assert(os.execute("chmod 755 " .. q(parent)))
    S.pack(sh_pack("ul"), parent)
    local script = S.write(SHARED .. "/ulimit-" .. PID .. ".lua", string.format([[
      local hcp = require("hcp")
      local rt = assert(hcp.create({ pack_dirs = { %q } }))
      local res = rt:call({ pack = "ul", args = { "ulimit -n; ulimit -Hn" } })
      io.write("ok=", tostring(res.ok), " out=", (res.stdout or ""):gsub("\n", ","), " err=", tostring(res.error), "\n")
      for _, l in ipairs(hcp.doctor().layers) do
        if l.name == "limits" then io.write("detail=", l.detail:gsub(" ", "_"), "\n") end
      end
      rt:close()
    ]], parent))
    local out = S.sh(LUA_ENV .. string.format("sh -c 'ulimit -n 512 && exec \"$0\" \"$1\"' %s %s 2>&1", q(S.LUA), q(script)))
    local r = kv(out)
    assert.equal("true", r.ok, out)
    assert.equal("512,512,", r.out, out)
    assert.matches("nofile_512_%(the_runtime's_hard_limit;_default_1024%)", r.detail, nil, out)
  end)
end)

-- ---------------------------------------------------------------------------
-- 8. bwrap at parity with local
-- ---------------------------------------------------------------------------

describe("view: drivers at parity", function()
  each_driver("more than 9000 arguments reach the child intact", function(driver)
    local rt = runtime(driver, { sh_pack("many") })
    local args = { 'printf "%s\\n" "$#" "$2" "${10000}"' }
    for i = 1, 10000 do args[#args + 1] = "a" .. i .. (i == 10000 and " with space" or "") end
    local res = rt:call({ pack = "many", args = args })
    assert.is_true(res.ok, tostring(res.error) .. (res.stderr or ""))
    assert.equal("10001\na1\na9999\n", res.stdout) -- $1 is the script itself
  end)

  each_driver("many arguments keep the environment exactly", function(driver)
    local rt = runtime(driver, { sh_pack("manyenv", { agent_env = { PACK_VAR = "v a=l" } }) })
    local args = { 'env | sort | grep -v "^PWD=\\|^SHLVL=\\|^_=\\|^TMPDIR="' }
    for _ = 1, 9500 do args[#args + 1] = "x" end
    local few = rt:call({ pack = "manyenv", args = { args[1] } })
    local lots = rt:call({ pack = "manyenv", args = args })
    assert.is_true(lots.ok, tostring(lots.error) .. (lots.stderr or ""))
    assert.equal(few.stdout, lots.stdout)
    assert.matches("PACK_VAR=v a=l\n", lots.stdout, 1, true)
  end)

  each_driver("a ./bin replaced after load by a link out of the pack is not followed", function(driver)
    local parent = S.tmpdir("swap-")
    assert(os.execute("chmod 755 " .. q(parent)))
    local root = S.pack(S.manifest("swap", "./bin/tool"), parent)
    S.mkdir(root .. "/bin")
    S.write(root .. "/bin/tool", "#!/bin/sh\necho checked-tool\n", 493)
    local rt = assert(hcp.create({ pack_dirs = { parent }, driver = driver }))
    rts[#rts + 1] = rt
    assert.equal("checked-tool\n", rt:call({ pack = "swap" }).stdout)
    os.remove(root .. "/bin/tool")
    assert(os.execute("ln -s /bin/echo " .. q(root .. "/bin/tool")))
    local res = rt:call({ pack = "swap", args = { "followed" } })
    assert.is_false(res.ok)
    assert.is_nil((res.stdout or ""):match("followed"))
  end)
end)

-- ---------------------------------------------------------------------------
-- The same attacks from an unprivileged runtime
-- ---------------------------------------------------------------------------

describe("view: as an unprivileged user (nobody)", function()
  S.it({ "nobody_runs_build", "nobody_userns" },
    "sockets, the pack root, IPC, cleanup, limits and argument counts hold for a non-root runtime", function()
    local dir = SHARED .. "/nobody"
    S.mkdir(dir)
    assert(os.execute("chown nobody " .. q(dir)))
    local sockdir = "/tmp/hcp-spec-nbsock-" .. PID
    core.mkdir(sockdir)
    assert(os.execute("chmod 755 " .. q(sockdir)))
    local server = assert(core.spawn({ path = tool(), argv = { tool(), "serve", sockdir .. "/s.sock", sockdir .. "/flag", "0" },
      env = {}, cwd = "/" }))
    local aname = "hcp-spec-nb-abstract-" .. PID
    local aserver = assert(core.spawn({ path = tool(), argv = { tool(), "serve", aname, sockdir .. "/aflag", "1" }, env = {}, cwd = "/" }))
    finally(function()
      server:kill("KILL") server:wait() aserver:kill("KILL") aserver:wait()
      core.rmtree(sockdir)
      core.rmtree(dir)
    end)
    assert(eventually(function() return select(2, S.sh("test -S " .. q(sockdir .. "/s.sock"))) == 0 end))
    assert(eventually(function() return S.read("/proc/net/unix"):find("@" .. aname, 1, true) ~= nil end))
    local script = S.write(dir .. "/run.lua", [=[
      local hcp = require("hcp")
      local core = require("hcp.core")
      local dir, tool, sock, aname = arg[1], arg[2], arg[3], arg[4]
      local function kv(s) local t = {} for k, v in (s or ""):gmatch("([%w_]+)=(%S+)") do t[k] = v end return t end
      local function pack(name, m)
        core.mkdir(dir .. "/" .. name)
        local f = io.open(dir .. "/" .. name .. "/hcp.json", "w") f:write(m) f:close()
      end
      pack("uc", '{"hcp":1,"name":"uc","wrap":{"bin":"' .. tool .. '","network":true}}')
      pack("sh", '{"hcp":1,"name":"sh","wrap":{"bin":"sh","args":["-c","eval \\"$1\\"","sh"],"timeout_ms":20000}}')
      pack("eph", '{"hcp":1,"name":"eph","wrap":{"bin":"sh","args":["-c","eval \\"$1\\"","sh"],"workspace":{"mode":"ephemeral"}}}')
      for _, driver in ipairs({ "local", "bwrap" }) do
        local rt, err = hcp.create({ pack_dirs = { dir }, driver = driver, state_dir = dir .. "/state", out_dir = dir,
          network = "unrestricted" })
        if not rt then print(driver .. "_skip=" .. tostring(err):gsub("%s", "_")) goto next end
        print(driver .. "_path=" .. (kv(rt:call({ pack = "uc", args = { "connect", sock, "0" } }).stdout).connect or "?"))
        print(driver .. "_abstract=" .. (kv(rt:call({ pack = "uc", args = { "connect", aname, "1" } }).stdout).connect or "?"))
        local r = rt:call({ pack = "sh", args = { "echo x > hcp.json; echo done" } })
        print(driver .. "_packroot=" .. (r.stderr:match("Read%-only") and "ro" or "rw"))
        r = rt:call({ pack = "eph", args = { "i=0; while [ $i -lt 1200 ]; do mkdir d && cd d || break; i=$((i+1)); done; echo $i" } })
        local jr = rt:call({ pack = "eph", args = { "mkdir -p a/b && chmod 000 a/b a && pwd" } })
        local jail = (jr.stdout or ""):match("[^\n]+")
        print(driver .. "_deep=" .. (r.stdout or ""):gsub("\n", ""))
        core.calldirs_settle() -- removed behind the call, by the core's worker
        print(driver .. "_locked_left=" .. tostring(jail and core.kind(jail) ~= nil))
        local args = { 'echo $#' }
        for i = 1, 9500 do args[#args + 1] = "a" end
        print(driver .. "_many=" .. (rt:call({ pack = "sh", args = args }).stdout or ""):gsub("\n", ""))
        print(driver .. "_uid=" .. (rt:call({ pack = "sh", args = { "id -u" } }).stdout or ""):gsub("\n", ""))
        rt:close()
        ::next::
      end
    ]=])
    local out, code = S.sh(LUA_ENV .. string.format("runuser -u nobody -w LUA_PATH,LUA_CPATH -- sh -c "
      .. "'ulimit -n 512 && exec \"$0\" \"$@\"' %s %s %s %s %s %s 2>&1",
      q(S.LUA), q(script), q(dir), q(tool()), q(sockdir .. "/s.sock"), q(aname)))
    assert.equal(0, code, out)
    local r = {}
    for k, v in out:gmatch("([%w_]+)=(%S+)") do r[k] = v end
    local nb = (S.sh("id -u nobody")):match("%d+")
    for _, driver in ipairs({ "local", "bwrap" }) do
      if r[driver .. "_skip"] then
        assert.equal("bwrap", driver, out)
      else
        assert.equal(tostring(ENOENT), r[driver .. "_path"], driver .. ": " .. out)
        assert.is_truthy(r[driver .. "_abstract"] ~= "0" and r[driver .. "_abstract"] ~= "?", driver .. ": " .. out)
        assert.equal("ro", r[driver .. "_packroot"], driver .. ": " .. out)
        assert.equal("1200", r[driver .. "_deep"], driver .. ": " .. out)
        assert.equal("false", r[driver .. "_locked_left"], driver .. ": " .. out)
        assert.equal("9501", r[driver .. "_many"], driver .. ": " .. out) -- with the script
        assert.equal(nb, r[driver .. "_uid"], driver .. ": " .. out)
      end
    end
    assert.is_nil(S.read(sockdir .. "/flag"))
    assert.is_nil(S.read(sockdir .. "/aflag"))
  end)
end)
