-- spec/core_rootfs_spec.lua — the C core's pieces of issue 10, against
-- docs/core-api.md: the constructed root (isolation.rootfs, both the
-- mount_setattr path and the legacy remount path), ipcns, run_as, Landlock
-- scopes and TCP, isolation.stage, data_fds, and core.rmtree /
-- core.chown_tree / core.getrlimits / core.filetype. Run as root here; the
-- non-root paths (user namespace, rmtree of a chmod-000 tree) again as
-- nobody at the end. What a spawn changes on the host if a layer failed is
-- confined to directories this file made.
local core = require("hcp.core")
local S = require("support")

local q = S.q
local PID = core.getpid()
local IS_ROOT = S.sh("id -u") == "0\n"
local probe = core.probe()
local ENOENT, EPERM, EINVAL = 2, 1, 22

-- everything this file makes lives here (0755: nobody reads it too)
local BASE = assert(core.mkdtemp("/tmp", "hcp-rootfs-"))
assert(os.execute("chmod 755 " .. q(BASE)))
teardown(function() core.rmtree(BASE) end)

local HELPER_C = [[
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    if (!strcmp(argv[1], "kill0")) { printf("kill=%d\n", kill(atoi(argv[2]), 0) < 0 ? errno : 0); return 0; }
    if (!strcmp(argv[1], "shmat")) { printf("shmat=%d\n", shmat(atoi(argv[2]), NULL, SHM_RDONLY) == (void *)-1 ? errno : 0); return 0; }
    if (!strcmp(argv[1], "aconnect")) {
        struct sockaddr_un a;
        memset(&a, 0, sizeof a);
        a.sun_family = AF_UNIX;
        strncpy(a.sun_path + 1, argv[2], sizeof a.sun_path - 2);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        int r = connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(argv[2])));
        printf("connect=%d\n", r < 0 ? errno : 0);
        return 0;
    }
    if (!strcmp(argv[1], "tcp")) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2])) };
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        printf("connect=%d\n", connect(fd, (struct sockaddr *)&a, sizeof a) < 0 ? errno : 0);
        return 0;
    }
    if (!strcmp(argv[1], "hold")) {   /* hold <kind> <name|file>: a server / a segment, until killed */
        if (!strcmp(argv[2], "shm")) {
            int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
            shmat(id, NULL, 0);
            shmctl(id, IPC_RMID, NULL);
            printf("id=%d\n", id);
        } else if (!strcmp(argv[2], "abstract")) {
            struct sockaddr_un a;
            memset(&a, 0, sizeof a);
            a.sun_family = AF_UNIX;
            strncpy(a.sun_path + 1, argv[3], sizeof a.sun_path - 2);
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            if (bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(argv[3]))) < 0
                || listen(fd, 4) < 0) return 1;
            printf("ok=1\n");
        } else if (!strcmp(argv[2], "tcp")) {
            struct sockaddr_in a = { .sin_family = AF_INET };
            socklen_t len = sizeof a;
            inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4) < 0) return 1;
            getsockname(fd, (struct sockaddr *)&a, &len);
            printf("port=%d\n", ntohs(a.sin_port));
        }
        fflush(stdout);
        alarm(120);
        pause();
    }
    return 2;
}
]]

local HELPER
local function helper()
  if not HELPER then
    local p, err = S.cc("rootfshelper", HELPER_C)
    assert(p, err)
    HELPER = BASE .. "/helper"
    assert(os.execute(string.format("cp %s %s && chmod 755 %s", q(p), q(HELPER), q(HELPER))))
  end
  return HELPER
end

local kv = S.kv

local function eventually(f)
  for _ = 1, 100 do
    if f() then return true end
    os.execute("sleep 0.05")
  end
  return f()
end

local function need(layer)
  if not probe[layer].available then pending(layer .. " unavailable: " .. tostring(probe[layer].reason)) return false end
  return true
end

-- A fresh directory the child may write (the rw part of a view).
local function workdir()
  local d = assert(core.mkdtemp(BASE, "work-"))
  assert(os.execute("chmod 755 " .. q(d)))
  return d
end

local SYS = { "/usr", "/bin", "/lib", "/lib64", "/etc/passwd" }

local function symlink(target, path)
  return os.execute("ln -s " .. q(target) .. " " .. q(path))
end

local function spawn(argv, iso, extra)
  local o = extra or {}
  o.path, o.argv = o.path or argv[1], argv
  o.env = o.env or { PATH = "/usr/bin:/bin" }
  o.cwd = o.cwd or "/"
  o.isolation, o.timeout_ms = iso, 20000
  return core.spawn(o)
end

local function run(argv, iso, extra)
  local p, err = spawn(argv, iso, extra)
  assert(p, err)
  return p:wait()
end

local function sh(script, iso, extra)
  return run({ "/bin/sh", "-c", script }, iso, extra)
end

local function view(rw, more, legacy)
  local iso = { rootfs = { ro = SYS, rw = rw, legacy = legacy or nil } }
  for k, v in pairs(more or {}) do iso[k] = v end
  return iso
end

describe("isolation.rootfs", function()
  it("raises on a caller's mistake, refuses a NUL byte, refuses reserved paths", function()
    for _, case in ipairs({
      { "rootfs must be a table", true },
      { "rootfs: unknown key 'proc'", { proc = true } },
      { "rootfs.ro must be an array of paths", { ro = "/usr" } },
      { "rootfs path must be an absolute path", { ro = { "usr" } } },
      { "rootfs.tmp_mb must be an integer", { tmp_mb = 0 } },
      { "rootfs.legacy must be a boolean", { legacy = 1 } },
    }) do
      local ok, err = pcall(spawn, { "/bin/true" }, { rootfs = case[2] })
      assert.is_false(ok, case[1])
      assert.matches(case[1], err, 1, true)
    end
    assert.same({ nil, "spawn: isolation: rootfs path contains a NUL byte", EINVAL },
      { spawn({ "/bin/true" }, { rootfs = { ro = { "/usr\0x" } } }) })
    if not need("rootfs") then return end
    local w = workdir()
    for _, case in ipairs({
      { { ro = { "/" } }, "spawn: isolation: rootfs: /: the host's root cannot be part of the view" },
      { { ro = { "/dev/sda" } }, "spawn: isolation: rootfs: /dev/sda: reserved: the view has its own /dev, /proc and /tmp" },
      { { ro = { "/proc/1" } }, "spawn: isolation: rootfs: /proc/1: reserved: the view has its own /dev, /proc and /tmp" },
      { { rw = { "/tmp" } }, "spawn: isolation: rootfs: /tmp: reserved: the view has its own /dev, /proc and /tmp" },
      { { ro = { w }, rw = { w } }, "spawn: isolation: rootfs: " .. w .. ": both read-only and read-write" },
      { { rw = { BASE .. "/missing" } }, "spawn: isolation: rootfs: " .. BASE .. "/missing: No such file or directory" },
    }) do
      local p, msg = spawn({ "/bin/true" }, { rootfs = case[1] })
      assert.is_nil(p)
      assert.equal(case[2], msg)
    end
  end)

  -- The lexical check above sees only the path as given; a link (or a link
  -- on the way) can lead anywhere. What is bound is the resolved path, so
  -- that is what must not be the host's /proc, /dev or /tmp: a link to
  -- /proc/self would put the runtime's own fds and environ in the view, one
  -- to /dev/shm every host process's shared memory, one to /tmp the host's
  -- unix sockets (connect works on a read-only bind).
  it("refuses a path that resolves into the host's /proc, /dev or /tmp, whatever the link", function()
    if not need("rootfs") then return end
    local w = workdir()
    local RES = ": reserved: the view has its own /dev, /proc and /tmp"
    local links = {
      { "l-proc-self", "/proc/self" },
      { "l-proc-sys", "/proc/sys/kernel" },
      { "l-proc-fd", "/proc/" .. PID .. "/fd" },
      { "l-dev", "/dev" },
      { "l-dev-shm", "/dev/shm" },
      { "l-dev-null", "/dev/null" },
      { "l-tmp", "/tmp" },
      { "l-rel", "../../../../../../../proc/self/environ" },
      { "l-root", "/proc/1/root" },
    }
    for _, l in ipairs(links) do assert(symlink(l[2], w .. "/" .. l[1])) end
    -- a link on the way rather than at the end (a rw path may not be a link itself)
    assert(symlink("/proc/self", w .. "/via"))
    local cases = {}
    for _, l in ipairs(links) do
      local src = (l[2]:gsub("^[./]*proc/self", "/proc/" .. PID))
      if l[1] == "l-root" then src = nil end
      cases[#cases + 1] = { { ro = { w .. "/" .. l[1] } }, w .. "/" .. l[1], src }
    end
    cases[#cases + 1] = { { rw = { w .. "/via/fd" } }, w .. "/via/fd", "/proc/" .. PID .. "/fd" }
    for _, c in ipairs(cases) do
      local p, msg = spawn({ "/bin/true" }, { rootfs = c[1] })
      if p then p:kill(9); p:wait() end
      assert.is_nil(p, c[2])
      if c[3] then
        assert.equal("spawn: isolation: rootfs: " .. c[2] .. ": resolves to " .. c[3] .. RES, msg)
      else
        -- /proc/1/root names the host's root, where the runtime may read
        -- the link at all (not where pid 1 is not ptrace-able by it)
        local base = "spawn: isolation: rootfs: " .. c[2] .. ": "
        assert.is_true(msg == base .. "resolves to the host's root" or msg == base .. "Permission denied", msg)
      end
    end
    -- the same host paths stay usable where they are the jail under /dev/shm
    -- (a TMPDIR=/dev/shm runtime), the case the lexical rule lets through
    local shm = assert(core.mkdtemp("/dev/shm", "hcp-spec-"))
    finally(function() core.rmtree(shm) end)
    assert(symlink(shm, w .. "/l-shm-jail"))
    local r = sh("ls " .. q(w .. "/l-shm-jail") .. " && echo ok", { rootfs = { ro = { "/usr", "/bin", "/lib",
      "/lib64", w .. "/l-shm-jail" } } })
    assert.equal("ok\n", r.stdout, r.stderr)
  end)

  it("refuses a device node outside /dev (nodev would make it inert; a view has no place for it)", function()
    if not need("rootfs") then return end
    if not IS_ROOT then return pending("mknod needs root (run as nobody here)") end
    local w = workdir()
    -- /dev/mem's numbers: the node a hostile host directory would hold
    if not os.execute("mknod " .. q(w .. "/mem") .. " c 1 1 2>/dev/null && mknod " .. q(w .. "/loop") .. " b 7 0") then
      return pending("mknod refused here (root of a user namespace has no CAP_MKNOD on the host): no node to offer")
    end
    assert(symlink(w .. "/mem", w .. "/l-mem"))
    for _, c in ipairs({ { "ro", "mem" }, { "ro", "loop" }, { "ro", "l-mem" }, { "rw", "mem" } }) do
      local p, msg = spawn({ "/bin/true" }, { rootfs = { [c[1]] = { w .. "/" .. c[2] } } })
      if p then p:kill(9); p:wait() end
      assert.is_nil(p, c[2])
      local want = c[2] == "l-mem" and ": resolves to " .. w .. "/mem" or ""
      assert.equal("spawn: isolation: rootfs: " .. w .. "/" .. c[2] .. want ..
        ": a device node cannot be part of the view (its /dev is its own)", msg)
    end
  end)

  for _, legacy in ipairs({ false, true }) do
    local tag = legacy and " (legacy remounts)" or " (mount_setattr)"

    it("holds only what it was given, at the host's paths" .. tag, function()
      if not need("rootfs") then return end
      local w = workdir()
      local r = sh("ls /; echo --; ls /etc; echo --; ls /tmp; echo --; pwd; cat /etc/passwd | head -1",
        view({ w }, { pidns = true }, legacy), { cwd = w })
      assert.equal(0, r.exit, r.stderr)
      local top, etc, tmp, cwd = r.stdout:match("^(.-)%-%-\n(.-)%-%-\n(.-)%-%-\n([^\n]+)\n")
      assert.equal("bin\ndev\netc\nlib\nlib64\nproc\ntmp\nusr\n", top)
      assert.equal("passwd\n", etc)
      -- /tmp is private: only the mount points of the view's own paths under it
      assert.equal(BASE:match("^/tmp/(.*)$") .. "\n", tmp)
      assert.equal(w, cwd)
      assert.matches("^root:", r.stdout:match("\n(root:[^\n]*)\n$") or "")
    end)

    it("read-only binds refuse writes, recursively; the rw path is written on the host" .. tag, function()
      if not need("rootfs") then return end
      if not IS_ROOT then pending("root only") return end
      local w = workdir()
      local cg = "/sys/fs/cgroup/pids/hcp-spec-ro-" .. PID
      finally(function() core.rmdir(cg) end)
      local iso = { rootfs = { ro = { "/usr", "/bin", "/lib", "/lib64", "/sys/fs/cgroup" }, rw = { w }, legacy = legacy or nil } }
      local r = sh("touch /usr/x; mkdir " .. q(cg) .. "; echo hi > " .. q(w .. "/f") .. " && echo wrote", iso)
      assert.matches("touch: cannot touch '/usr/x': Read%-only file system", r.stderr)
      assert.matches("Read%-only file system", r.stderr:match("mkdir[^\n]*") or "")
      assert.is_nil(core.kind(cg))
      assert.equal("wrote\n", r.stdout)
      assert.equal("hi\n", S.read(w .. "/f"))
    end)

    it("a minimal /dev, a private /tmp and /dev/shm of the given size" .. tag, function()
      if not need("rootfs") then return end
      local w = workdir()
      S.write("/tmp/hcp-spec-host-marker-" .. PID, "x")
      finally(function() os.remove("/tmp/hcp-spec-host-marker-" .. PID) end)
      local iso = view({ w }, nil, legacy)
      iso.rootfs.tmp_mb = 1
      local r = sh("ls /dev; readlink /dev/fd; echo x > /dev/null && echo null-ok; ls /tmp/hcp-spec-host-marker-* 2>&1; "
        .. "head -c 2000000 /dev/zero > /tmp/big; echo big=$?; echo s > /dev/shm/s && echo shm-ok; touch /dev/new", iso)
      assert.matches("^fd\nfull\nnull\nrandom\nshm\nstderr\nstdin\nstdout\nurandom\nzero\n/proc/self/fd\nnull%-ok\n", r.stdout)
      assert.matches("No such file or directory", r.stdout)
      assert.matches("big=1\n", r.stdout)   -- tmp_mb = 1
      assert.matches("shm%-ok\n", r.stdout)
      assert.matches("touch: cannot touch '/dev/new': Read%-only file system", r.stderr)
    end)

    it("/proc only with a pid namespace, and then /proc/sys read-only" .. tag, function()
      if not need("rootfs") then return end
      local none = sh("ls /proc", view({}, nil, legacy))
      assert.matches("ls: cannot access '/proc': No such file or directory", none.stderr)
      local r = sh("echo $$; ls /proc | grep -c '^[0-9]'; exec 3>>/proc/sys/kernel/core_pattern && echo opened; "
        .. "exec 3>>/proc/sysrq-trigger && echo sysrq", view({}, { pidns = true }, legacy))
      assert.matches("^2\n[1-6]\n$", r.stdout)
      -- not as root, the file's own mode refuses first
      assert.is_truthy(r.stderr:find("Read-only file system", 1, true) or
        (not IS_ROOT and r.stderr:find("Permission denied", 1, true)), r.stderr)
    end)

    it("a #! script runs, with or without /proc (then by its path, checked by identity)" .. tag, function()
      if not need("rootfs") then return end
      local w = workdir()
      local script = S.write(w .. "/s.sh", "#!/bin/sh\necho script \"$0\" \"$1\"\n", 493)
      local a = run({ script, "arg" }, view({ w }, { pidns = true }, legacy))
      assert.matches("^script /dev/fd/%d+ arg\n$", a.stdout)
      local b = run({ script, "arg" }, view({ w }, nil, legacy))
      assert.equal("script " .. script .. " arg\n", b.stdout)
    end)
  end

  it("recreates the host's links to what the view shows (merged /usr), binds the target of others", function()
    if not need("rootfs") then return end
    if core.kind("/bin") ~= "link" then pending("/bin is not a link here") return end
    local r = sh("readlink /bin; readlink /etc/localtime || echo not-a-link; test -f /etc/localtime && echo tz",
      { rootfs = { ro = { "/usr", "/bin", "/lib", "/lib64", "/etc/localtime" } } })
    assert.matches("^/usr/bin\n", r.stdout)
    if core.kind("/etc/localtime") == "link" then assert.matches("tz\n$", r.stdout) end
  end)

  -- rootfs.c resolves a path that is no link from its parent's resolved
  -- name, remembered for the next path with the same parent: each path
  -- must still show what the host shows there, through a link in a parent,
  -- a link at the end, a parent shared with the path before, or not
  it("shows each path as the host does, whatever links lie on the way, for paths that share a parent", function()
    if not need("rootfs") then return end
    local t = assert(core.mkdtemp(BASE, "links-"))
    assert(os.execute(string.format("cd %s && mkdir -p real/dir other && echo A > real/dir/a && echo B > real/dir/b"
      .. " && echo C > other/c && ln -s real L && ln -s a real/dir/alink && ln -s ../../other real/dir/up"
      .. " && chmod -R a+rX .", q(t))))
    local paths = { t .. "/L/dir/a", t .. "/L/dir/b", t .. "/L/dir/alink", t .. "/real/dir/b", t .. "/L/dir/up/c",
      t .. "/other/c" }
    local ro = { "/usr", "/bin", "/lib", "/lib64" }
    local cmd = {}
    for i, p in ipairs(paths) do
      ro[#ro + 1] = p
      cmd[i] = "cat " .. q(p) .. " || echo missing"
    end
    local r = sh(table.concat(cmd, "; "), { rootfs = { ro = ro } })
    assert.equal("A\nB\nA\nB\nC\nC\n", r.stdout, r.stderr)
    core.rmtree(t)
  end)

  it("a rw path under /dev/shm (a runtime whose TMPDIR is there) is bound into the private /dev/shm", function()
    if not need("rootfs") then return end
    local shm = assert(core.mkdtemp("/dev/shm", "hcp-spec-"))
    finally(function() core.rmtree(shm) end)
    local r = sh("pwd; echo x > f && echo wrote; ls /dev/shm", { rootfs = { ro = SYS, rw = { shm } } }, { cwd = shm })
    assert.equal(shm .. "\nwrote\n" .. shm:match("[^/]+$") .. "\n", r.stdout)
    assert.equal("x\n", S.read(shm .. "/f"))
    local p, msg = spawn({ "/bin/true" }, { rootfs = { rw = { "/dev/shm" } } })
    assert.is_nil(p)
    assert.equal("spawn: isolation: rootfs: /dev/shm: reserved: the view has its own /dev, /proc and /tmp", msg)
  end)

  it("building a view writes nothing on the host", function()
    if not need("rootfs") then return end
    local before = table.concat(core.listdir("/usr"), ",") .. "|" .. table.concat(core.listdir("/"), ",")
    local w = workdir()
    local deep = w .. "/a/b/c"
    S.mkdir(deep)
    sh("true", { rootfs = { ro = { "/usr", "/bin", "/lib", "/lib64", "/usr/share/hcp-nonexistent/x", deep }, rw = { w } } })
    assert.equal(before, table.concat(core.listdir("/usr"), ",") .. "|" .. table.concat(core.listdir("/"), ","))
  end)
end)

describe("ipcns, run_as, scopes, tcp", function()
  local holders = {}
  teardown(function() for _, p in ipairs(holders) do p:kill("KILL") p:wait() end end)
  -- reads a holder's first line without waiting for it to end
  local function first_line(kind, name)
    local file = BASE .. "/line-" .. kind .. "-" .. #holders
    local p = assert(core.spawn({ path = "/bin/sh", argv = { "sh", "-c", 'exec "$0" hold "$1" "$2" > "$3"', helper(), kind,
      name or "", file }, env = {}, cwd = "/" }))
    holders[#holders + 1] = p
    assert(eventually(function() return (S.read(file) or ""):match("\n") end))
    return kv(S.read(file))
  end

  it("ipcns: a segment of the host is not there", function()
    if not need("ipcns") then return end
    local id = first_line("shm").id
    assert.equal(0, kv(run({ helper(), "shmat", tostring(id) }).stdout).shmat)
    assert.equal(EINVAL, kv(run({ helper(), "shmat", tostring(id) }, { ipcns = true }).stdout).shmat)
  end)

  it("run_as: the ids, no groups, and with caps nothing left; refused without root", function()
    if not IS_ROOT then pending("root only") return end
    local iso = { run_as = { uid = 4321, gid = 4322 } }
    local r = sh("id -u; id -g; id -G; grep -E '^Cap(Eff|Prm)' /proc/self/status", iso)
    assert.matches("^4321\n4322\n4322\nCapPrm:%s*0+\nCapEff:%s*0+\n$", r.stdout)
    iso.caps = true
    r = sh("id -u; grep CapBnd /proc/self/status", iso)
    assert.matches("^4321\nCapBnd:%s*0+\n$", r.stdout)
    for _, bad in ipairs({ { uid = 0, gid = 1 }, { uid = 1 }, { uid = 1, gid = 1, groups = {} } }) do
      assert.is_false(pcall(spawn, { "/bin/true" }, { run_as = bad }))
    end
  end)

  it("scopes: no abstract socket and no signal outside the call; tcp: no connect", function()
    if not probe.landlock.scopes then pending("Landlock ABI " .. tostring(probe.landlock.abi) .. ": no scopes") return end
    local name = "hcp-spec-scope-" .. PID
    assert.equal(1, first_line("abstract", name).ok)
    local sleeper = holders[#holders]
    assert.equal(0, kv(run({ helper(), "aconnect", name }).stdout).connect)
    assert.equal(EPERM, kv(run({ helper(), "aconnect", name }, { landlock = { scopes = true } }).stdout).connect)
    local pid = tostring(sleeper:pid())
    assert.equal(0, kv(run({ helper(), "kill0", pid }).stdout).kill)
    assert.equal(EPERM, kv(run({ helper(), "kill0", pid }, { landlock = { scopes = true } }).stdout).kill)
    -- the filesystem is not handled by a scope-only ruleset: files stay readable
    assert.equal(0, sh("cat /etc/passwd > /dev/null", { landlock = { scopes = true } }).exit)
    if probe.landlock.tcp then
      local port = tostring(first_line("tcp").port)
      assert.equal(0, kv(run({ helper(), "tcp", port }).stdout).connect)
      assert.equal(13, kv(run({ helper(), "tcp", port }, { landlock = { tcp = true } }).stdout).connect) -- EACCES
    end
    assert.has_error(function() spawn({ "/bin/true" }, { landlock = { scopes = "yes" } }) end)
  end)
end)

describe("isolation.stage and data_fds", function()
  it("stage: each path at /tmp/<i> of a private mount namespace; a relative bin beneath its root", function()
    if not IS_ROOT then pending("root only (a mount namespace without a user namespace)") return end
    local w = workdir()
    S.write(w .. "/f", "staged\n")
    -- under a directory only root may enter: staged, it is reachable
    local private = S.mkdir(assert(core.mkdtemp(BASE, "priv-")) .. "/inner")
    S.write(private .. "/g", "private\n")
    local r = sh("cat /tmp/1/f /tmp/2/g; ls /tmp", { stage = { w, private }, run_as = { uid = 65534, gid = 65534 } })
    assert.equal("staged\nprivate\n1\n2\n", r.stdout)
    S.mkdir(w .. "/bin")
    assert(os.execute("ln -s /bin/sh " .. q(w .. "/bin/tool")))
    local p, msg = spawn({ "/bin/true" }, { stage = { { path = w .. "/bin/tool", beneath = w } } })
    assert.is_nil(p)
    assert.equal("spawn: isolation: stage: " .. w .. "/bin/tool: Invalid cross-device link", msg)
    assert.has_error(function() spawn({ "/bin/true" }, { stage = { { path = "/a/b", beneath = "/c" } } }) end)
  end)

  it("data_fds: strings on fds 3.., a checked file; nothing else open", function()
    local w = workdir()
    local bin = S.write(w .. "/tool", "#!/bin/sh\n", 493)
    local r = sh("cat <&3; echo; cat <&4; readlink /proc/self/fd/5; ls /proc/self/fd | sort -n | tr '\\n' ' '", nil,
      { data_fds = { "first", "second\0with nul", { exe = bin, beneath = w } } })
    assert.equal("first\nsecond\0with nul" .. bin .. "\n0 1 2 3 4 5 6 ", r.stdout) -- 6: ls's own directory
    assert.has_error(function() spawn({ "/bin/true" }, nil, { data_fds = { "1", "2", "3", "4", "5" } }) end)
    assert.has_error(function() spawn({ "/bin/true" }, nil, { data_fds = { 42 } }) end)
    S.write(w .. "/plain", "not executable")
    local p, msg = spawn({ "/bin/true" }, nil, { data_fds = { { exe = w .. "/plain" } } })
    assert.is_nil(p)
    assert.matches("^spawn: data_fds: exe: ", msg)
  end)
end)

describe("core.rmtree, core.chown_tree, core.getrlimits, core.filetype", function()
  local function deep_tree(root, depth)
    assert(os.execute(string.format([[cd %s && python3 -c "
import os
for i in range(%d):
    os.mkdir('d'); os.chdir('d'); open('f', 'w').close()
"]], q(root), depth)))
  end

  it("rmtree removes a 5000-deep chain, chmod 000 and 0500 directories, and never follows a link", function()
    local t = assert(core.mkdtemp(BASE, "rm-"))
    deep_tree(t, 5000)
    local outside = workdir()
    S.write(outside .. "/keep", "keep")
    assert(os.execute(string.format("cd %s && mkdir -p l/i && touch l/i/f && chmod 000 l/i l && mkdir ro && touch ro/f "
      .. "&& chmod 500 ro && ln -s %s link && mkfifo fifo && chmod 000 .", q(t), q(outside))))
    assert.is_true(core.rmtree(t))
    assert.is_nil(core.kind(t))
    assert.equal("keep", S.read(outside .. "/keep"))
  end)

  it("rmtree reports what it cannot remove (an immutable file) and removes the rest", function()
    if not IS_ROOT then pending("root only (chattr)") return end
    local t = assert(core.mkdtemp(BASE, "imm-"))
    S.mkdir(t .. "/a/b")
    S.write(t .. "/a/b/locked", "x")
    S.write(t .. "/a/other", "y")
    local _, code = S.sh("chattr +i " .. q(t .. "/a/b/locked") .. " 2>&1")
    if code ~= 0 then pending("this file system has no immutable flag") return end
    -- rmtree may have moved it (it flattens what it cannot remove at once):
    -- unlock the whole tree, or an immutable file outlives the spec
    finally(function() os.execute("chattr -R -i " .. q(t) .. " 2>/dev/null; rm -rf " .. q(t)) end)
    local ok, msg, err = core.rmtree(t)
    assert.is_nil(ok)
    assert.equal(EPERM, err)
    assert.matches("^rmtree " .. t:gsub("%p", "%%%0") .. ": Operation not permitted", msg)
    assert.is_nil(core.kind(t .. "/a/other"))
  end)

  it("chown_tree gives a tree to a uid, never through a link, never a file with other links", function()
    if not IS_ROOT then pending("root only") return end
    local t = workdir()
    S.mkdir(t .. "/d/e")
    S.write(t .. "/d/e/f", "f")
    local outside = S.write(workdir() .. "/o", "o")
    assert(os.execute(string.format("ln -s %s %s/link && ln %s %s/hard", q(outside), q(t), q(outside), q(t))))
    assert.is_true(core.chown_tree(t, 4321, 4322))
    assert.equal("4321:4322\n", S.sh("stat -c %u:%g " .. q(t .. "/d/e/f")))
    assert.equal("4321:4322\n", S.sh("stat -c %u:%g " .. q(t)))
    assert.equal("0:0\n", S.sh("stat -c %u:%g " .. q(outside)))
    assert.same({ nil, "/nonexistent-hcp: No such file or directory", ENOENT }, { core.chown_tree("/nonexistent-hcp", 1, 1) })
  end)

  it("getrlimits gives the runtime's hard limits in the option's units; unlimited is absent", function()
    local script = S.write(BASE .. "/rl.lua", 'package.cpath = "' .. S.CPATH .. ';" .. package.cpath\n'
      .. 'local l = require("hcp.core").getrlimits()\nio.write(l.nofile, " ", tostring(l.as_mb))\n')
    local out = S.sh(string.format("cd %s && sh -c 'ulimit -n 512 && exec \"$0\" \"$1\"' %s %s", q(S.REPO), q(S.LUA), q(script)))
    assert.equal("512 nil", out)
  end)

  it("filetype names what lstat sees", function()
    local t = workdir()
    assert(os.execute(string.format("cd %s && touch f && mkdir d && ln -s f l && mkfifo p", q(t))))
    for name, kind in pairs({ f = "file", d = "dir", l = "link", p = "fifo" }) do
      assert.equal(kind, core.filetype(t .. "/" .. name))
    end
    assert.equal("char", core.filetype("/dev/null"))
    assert.same({ nil, t .. "/none: No such file or directory", ENOENT }, { core.filetype(t .. "/none") })
  end)
end)

describe("core.probe for issue 10", function()
  it("answers for rootfs, ipcns, run_as, Landlock's words, and the cgroup at the runtime's own", function()
    for _, l in ipairs({ "rootfs", "ipcns", "run_as" }) do
      assert.is_boolean(probe[l].available, l)
      if not probe[l].available then assert.is_string(probe[l].reason, l) end
    end
    if probe.rootfs.available then assert.is_string(probe.rootfs.method) end
    assert.is_boolean(probe.landlock.scopes)
    assert.is_boolean(probe.landlock.tcp)
    if IS_ROOT then assert.is_true(probe.run_as.available) end
    if probe.cgroup.available then
      local own = S.read("/proc/self/cgroup"):match(probe.cgroup.version == 1 and "%d+:[^:]*pids[^:]*:([^\n]+)"
        or "0::([^\n]+)")
      assert.equal(own, probe.cgroup.own)
      if own ~= "/" then assert.equal(own, probe.cgroup.path:sub(-#own)) end
      assert.matches("^/sys/fs/cgroup", probe.cgroup.path)
    end
  end)
end)

describe("as nobody (a user namespace first)", function()
  S.it({ "nobody_runs_build", "nobody_userns" }, "rootfs, ipcns and rmtree of a chmod-000 tree work; run_as fails closed", function()
    local dir = BASE .. "/nb"
    S.mkdir(dir)
    assert(os.execute("chown nobody " .. q(dir)))
    local script = S.write(dir .. "/t.lua", [=[
      local core = require("hcp.core")
      local dir = arg[1]
      local w = dir .. "/w"
      core.mkdir(w)
      local function sh(s, iso)
        local p, err = core.spawn({ path = "/bin/sh", argv = { "sh", "-c", s }, env = { PATH = "/usr/bin:/bin" },
          cwd = w, isolation = iso, timeout_ms = 20000 })
        if not p then return { stdout = "", err = err } end
        return p:wait()
      end
      local r = sh("ls /; touch /usr/x 2>&1; echo > f && echo wrote", { rootfs = { ro = { "/usr", "/bin", "/lib", "/lib64" },
        rw = { w } }, pidns = true, ipcns = true })
      print("top=" .. r.stdout:gsub("\n", ","))
      -- the legacy remounts must keep the flags the kernel locked in the user namespace
      r = sh("ls /; touch /usr/x 2>&1", { rootfs = { ro = { "/usr", "/bin", "/lib", "/lib64", "/sys/fs/cgroup" }, rw = { w },
        legacy = true }, pidns = true })
      print("legacy=" .. r.stdout:gsub("\n", ",") .. tostring(r.err):gsub(" ", "_"))
      r = sh("true", { run_as = { uid = 4321, gid = 4321 } })
      print("run_as=" .. tostring(r.err):gsub(" ", "_"))
      local t = dir .. "/t"
      os.execute("mkdir -p " .. t .. "/a/b && touch " .. t .. "/a/b/f && chmod 000 " .. t .. "/a/b " .. t .. "/a " .. t)
      print("rmtree=" .. tostring(core.rmtree(t)) .. " left=" .. tostring(core.kind(t)))
    ]=])
    local out = S.sh(string.format("cd %s && runuser -u nobody -- %s -e %s %s %s 2>&1", q(S.REPO), S.LUA,
      q('package.cpath="' .. S.CPATH .. ';"..package.cpath'), q(script), q(dir)))
    local r = {}
    for k, v in out:gmatch("([%w_]+)=(%S+)") do r[k] = v end
    if probe.rootfs.available then
      assert.matches("^bin,dev,lib,lib64,proc,tmp,usr,", r.top or "", nil, out)
      assert.matches("Read%-only_file_system", out:gsub(" ", "_"), nil, out)
      assert.matches("wrote", out)
      assert.matches("^bin,dev,lib,lib64,proc,sys,tmp,usr,touch:", r.legacy or "", nil, out)
    end
    assert.matches("^spawn:_isolation:_run_as:_Operation_not_permitted", r.run_as or "", nil, out)
    assert.equal("true", r.rmtree, out)
    assert.equal("nil", r.left, out)
  end)
end)
