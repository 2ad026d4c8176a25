-- spec/core_isolation_spec.lua — the isolation layers of core.spawn
-- (src/isolation*.c, src/spawn_child.c), core.probe and core.rmdir, against
-- docs/core-api.md "Isolation". Each layer is attacked for real from a child
-- and, where it says something, the same attack is shown to work without
-- the layer. A small C helper, compiled here with cc, issues the raw
-- syscalls. A layer this host lacks is reported as pending, with the reason
-- core.probe gives. CI runs this as root; the user-namespace path is run as
-- `nobody` through runuser.
local core = require("hcp.core")
local S = require("support")

local EPERM, ENOENT, EACCES, EINVAL, ENOSYS, EMFILE, ENOMEM, ENOTEMPTY = 1, 2, 13, 22, 38, 24, 12, 39
local SIGXCPU, SIGXFSZ, SIGSEGV, SIGTERM, SIGSYS, SIGKILL = 24, 25, 11, 15, 31, 9

local q = S.q

local function sh(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

local read = S.read

local write = S.write

local IS_ROOT = core.geteuid() == 0
-- root whose capabilities count on the host (not root in a user namespace)
local INIT_ROOT = not S.lacks("init_root")
local RT_PID = core.getpid()

-- The build under test (make check: its sanitized hcp-lua).
local HCP_LUA = S.HCP_LUA

local probe = core.probe()

-- One temporary root, 0755 so that `nobody` can reach the helper and the
-- files of the user-namespace test; removed after the last test.
local TMP
local function tmp()
  if not TMP then
    TMP = assert(core.mkdtemp("/tmp", "hcp-iso-"))
    assert(os.execute("chmod 755 " .. q(TMP)))
  end
  return TMP
end

local HELPER_C = [[
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void res(const char *name, long r) { printf("%s=%d\n", name, r < 0 ? errno : 0); }

static int cmd_ioctls(void)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY);
    if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) return perror("pty"), 1;
    int s = open(ptsname(m), O_RDWR | O_NOCTTY);
    if (s < 0) return perror("pts"), 1;
    char c = 'x';
    int sub = 0, n = 0;
    res("tiocsti", ioctl(s, TIOCSTI, &c));
    res("tiocsti_hi", syscall(SYS_ioctl, s, (1UL << 32) | TIOCSTI, &c));
    res("tiocsti_stdin", ioctl(0, TIOCSTI, &c));
    res("tioclinux", ioctl(s, TIOCLINUX, &sub));
    res("fionread", ioctl(m, FIONREAD, &n));
    return 0;
}

/* Each call runs in a child whose exit code carries the errno, so a call
 * that succeeds without the filter (as root) changes only that child; the
 * mount is undone at once. */
static long call(int i, const char *dir, pid_t victim)
{
    switch (i) {
    case 0: return ptrace(PTRACE_TRACEME, 0, 0, 0);
    case 1: return ptrace(PTRACE_ATTACH, victim, 0, 0);
    case 2: { long r = mount("none", dir, "tmpfs", 0, NULL); if (r == 0) umount2(dir, MNT_DETACH); return r; }
    case 3: return umount2(dir, 0);
    case 4: return syscall(SYS_bpf, 0, NULL, 0);
    case 5: return syscall(SYS_keyctl, 0, 0, 0, 0, 0);
    case 6: return syscall(SYS_add_key, "user", "k", "v", 1, -2);
    case 7: return syscall(425, 1, NULL);                    /* io_uring_setup */
    case 8: return syscall(SYS_userfaultfd, 0);
    case 9: return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
    case 10: return syscall(SYS_process_vm_readv, victim, NULL, 0, NULL, 0, 0);
    case 11: return syscall(SYS_setns, 0, 0);
    case 12: return syscall(SYS_kexec_load, 0, 0, NULL, 0x8000);   /* not a valid flag */
    case 13: return syscall(430, "tmpfs", 0);                 /* fsopen */
    case 14: return syscall(435, NULL, 0);                    /* clone3 */
    case 15: return unshare(CLONE_NEWUSER);
    case 16: { long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
               if (pid == 0) _exit(0);
               if (pid > 0) waitpid((pid_t)pid, NULL, 0);
               return pid; }
    case 17: return syscall(0x40000000 | 39);                 /* getpid through x32 */
    default: return syscall(SYS_getpid);
    }
}

static int cmd_syscalls(const char *dir)
{
    static const char *const names[] = {
        "ptrace_traceme", "ptrace_attach", "mount", "umount", "bpf", "keyctl", "add_key",
        "io_uring_setup", "userfaultfd", "perf_event_open", "process_vm_readv", "setns",
        "kexec_load", "fsopen", "clone3", "unshare_user", "clone_newuser", "x32_getpid", "getpid",
    };
    pid_t victim = fork();
    if (victim == 0) { pause(); _exit(0); }
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        pid_t pid = fork();
        if (pid < 0) { printf("fork=%d\n", errno); break; }
        if (pid == 0) { long r = call(i, dir, victim); _exit(r < 0 ? errno : 0); }
        int st = 0;
        waitpid(pid, &st, 0);
        printf("%s=%d\n", names[i], WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    kill(victim, SIGKILL);
    waitpid(victim, NULL, 0);
    printf("fork=0\n");
    return 0;
}

static int cmd_int80(void)
{
    long r;
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "r8", "r9", "r10", "r11", "memory");
    printf("int80=%ld\n", r);
    return 0;
}

static int addr(const char *host, const char *port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    if (strchr(host, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((unsigned short)atoi(port));
        *len = sizeof *a;
        return inet_pton(AF_INET6, host, &a->sin6_addr) == 1 ? AF_INET6 : -1;
    }
    struct sockaddr_in *a = (struct sockaddr_in *)ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((unsigned short)atoi(port));
    *len = sizeof *a;
    return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? AF_INET : -1;
}

static int cmd_connect(char **a)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = addr(a[0], a[1], &ss, &len);
    int fd = socket(fam, SOCK_STREAM, 0);
    if (fd < 0) return res("connect", -1), 0;
    res("connect", connect(fd, (struct sockaddr *)&ss, len));
    return 0;
}

/* serve <host> <portfile> <seconds>: accepts and closes until the alarm. */
static int cmd_serve(char **a)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = addr(a[0], "0", &ss, &len), one = 1;
    int fd = socket(fam, SOCK_STREAM, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 16) < 0)
        return res("serve", -1), 1;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    int port = ntohs(fam == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                     : ((struct sockaddr_in *)&ss)->sin_port);
    FILE *f = fopen(a[1], "w");
    fprintf(f, "%d\n", port);
    fclose(f);
    alarm((unsigned)atoi(a[2]));
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c >= 0) close(c);
    }
}

static int cmd_openmany(void)
{
    int n = 0;
    while (open("/dev/null", O_RDONLY) >= 0) n++;
    printf("opened=%d errno=%d\n", n, errno);
    return 0;
}

static int cmd_alloc(const char *mb)
{
    size_t n = (size_t)atoi(mb) << 20;
    char *p = malloc(n);
    if (p) memset(p, 1, n);
    printf("alloc=%d\n", p ? 0 : errno);
    return 0;
}

/* forkmany <n> [go]: children that sleep until killed; counts what failed;
 * then, given a file name, waits (at most 30 s) for that file before exiting. */
static int cmd_forkmany(const char *count, const char *go)
{
    int n = atoi(count), ok = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) { pause(); _exit(0); }
        if (pid < 0) failed++; else ok++;
    }
    printf("forked=%d failed=%d\n", ok, failed);
    for (int i = 0; go && i < 3000 && access(go, F_OK) != 0; i++) usleep(10000);
    return 0;
}

static int cmd_status(void)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Cap", 3) == 0 || strncmp(line, "NoNewPrivs", 10) == 0) fputs(line, stdout);
    printf("euid=%d\nsecurebits=%d\n", (int)geteuid(), prctl(PR_GET_SECUREBITS));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    const char *c = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(c, "ioctls")) return cmd_ioctls();
    if (!strcmp(c, "syscalls") && argc == 3) return cmd_syscalls(argv[2]);
    if (!strcmp(c, "int80")) return cmd_int80();
    if (!strcmp(c, "connect") && argc == 4) return cmd_connect(argv + 2);
    if (!strcmp(c, "serve") && argc == 5) return cmd_serve(argv + 2);
    if (!strcmp(c, "openmany")) return cmd_openmany();
    if (!strcmp(c, "alloc") && argc == 3) return cmd_alloc(argv[2]);
    if (!strcmp(c, "forkmany") && (argc == 3 || argc == 4)) return cmd_forkmany(argv[2], argc == 4 ? argv[3] : NULL);
    if (!strcmp(c, "status")) return cmd_status();
    if (!strcmp(c, "segv")) { *(volatile int *)0 = 1; return 0; }
    return 2;
}
]]

local HELPER
local function helper()
  if not HELPER then
    local src = write(tmp() .. "/helper.c", HELPER_C)
    HELPER = tmp() .. "/helper"
    local out, ok = sh("cc -O1 -o " .. q(HELPER) .. " " .. q(src) .. " 2>&1")
    assert(ok, "compiling the helper failed: " .. out)
  end
  return HELPER
end

--- An empty directory to try mounting on (the helper unmounts at once).
local function mnt()
  local d = tmp() .. "/mnt"
  core.mkdir(d)
  return d
end

-- What a dynamically linked program needs to start (missing ones are skipped).
local SYS_READ = { "/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc" }

local function with(list, ...)
  local t = {}
  for _, v in ipairs(list) do t[#t + 1] = v end
  for _, v in ipairs({ ... }) do t[#t + 1] = v end
  return t
end

local function spawn(argv, iso, extra)
  local opts = extra or {}
  opts.argv = argv
  opts.path = opts.path or argv[1]
  opts.env = opts.env or { PATH = "/usr/bin:/bin:/usr/sbin:/sbin" }
  opts.cwd = opts.cwd or "/"
  opts.isolation = iso
  opts.timeout_ms = opts.timeout_ms or 20000
  return core.spawn(opts)
end

local function run(argv, iso, extra)
  local p, msg = spawn(argv, iso, extra)
  assert(p, msg)
  return p:wait()
end

local function shell(script, iso, extra)
  return run({ "/bin/sh", "-c", script }, iso, extra)
end

local kv = S.kv

local function cap(out, name)
  return out:match(name .. ":%s*(%x+)")
end

--- Pids of live processes whose comm is `name`.
local function by_comm(name)
  local found = {}
  for _, pid in ipairs(core.listdir("/proc") or {}) do
    local comm = read("/proc/" .. pid .. "/comm")
    local st = read("/proc/" .. pid .. "/stat")
    if comm == name .. "\n" and st and not st:match("^%d+ %b() Z") then found[#found + 1] = tonumber(pid) end
  end
  return found
end

--- Whether f() comes true within a generous deadline (30 s).
local function eventually(f)
  return S.wait_until(f, 30) ~= nil
end

--- Runs a shell that starts a setsid + double-fork escapee (a copy of sleep
--- under a unique name) and is killed at a 2 s timeout; the spec watches for
--- the escapee while the call runs. Returns its name, the result and whether
--- it was seen running before the call ended.
local function escapee(iso)
  local name = string.format("hcpe%05d%04d", RT_PID % 100000, math.random(0, 9999))   -- comm keeps 15 bytes
  assert(os.execute("cp /bin/sleep " .. q(tmp() .. "/" .. name)))
  local p = assert(spawn({ "/bin/sh", "-c", "setsid sh -c '" .. tmp() .. "/" .. name .. " 60 &'; sleep 60" }, iso,
                         { timeout_ms = 2000 }))
  local seen = false
  while not p:done() do
    seen = seen or #by_comm(name) > 0
    p:wait(10)
  end
  return name, p:wait(), seen
end

describe("hcp.core isolation", function()
  teardown(function()
    if TMP then core.rmtree(TMP) end
  end)

  describe("core.probe", function()
    it("answers for every layer, with a reason for each one missing", function()
      for _, layer in ipairs({ "landlock", "seccomp", "netns", "pidns", "userns", "caps", "rlimits", "cgroup" }) do
        local l = probe[layer]
        assert.is_table(l, layer)
        assert.is_boolean(l.available, layer)
        if not l.available then assert.is_string(l.reason, layer) end
      end
      assert.is_number(probe.landlock.abi)
      if probe.landlock.available then assert.is_true(probe.landlock.abi >= 1) end
      if probe.cgroup.available then
        assert.matches("^/sys/fs/cgroup", probe.cgroup.path)
        assert.is_true(probe.cgroup.version == 1 or probe.cgroup.version == 2)
      end
    end)

    S.it("cc", "is computed once per process", function()
      local again = core.probe()
      assert.same(probe, again)
      assert.are_not.equal(probe, again)   -- a fresh table: callers may keep and edit theirs
      -- a fresh process, its fork() calls counted on stderr by a preloaded
      -- library: the probe forks on the first call, never on the later ones
      -- (without the per-boot cache, which would spare the first its forks)
      local lib = tmp() .. "/forkcount.so"
      write(tmp() .. "/forkcount.c", [[
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/types.h>
#include <unistd.h>
pid_t fork(void)
{
    static pid_t (*real)(void);
    if (!real) real = (pid_t (*)(void))dlsym(RTLD_NEXT, "fork");
    if (write(2, "fork\n", 5) < 0) return -1;
    return real();
}
]])
      local out, ok = sh("cc -shared -fPIC -o " .. q(lib) .. " " .. q(tmp() .. "/forkcount.c") .. " -ldl 2>&1")
      assert(ok, out)
      local code = 'local c = require("hcp.core") c.probe() io.stderr:write("mark\\n") c.probe() c.probe()'
      out = sh(string.format("HCP_PROBE_CACHE=0 LUA_CPATH=%s LD_PRELOAD=%s "
        .. "ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 %s -e %s 2>&1", q(S.CPATH), q(lib), S.LUA, q(code)))
      local first, later = out:match("^(.*)mark\n(.*)$")
      assert.is_string(first, out)
      assert.matches("^fork\n", first)
      assert.equals("", later)
    end)

    S.it("root", "finds on this host, as root, every layer a CI runner has", function()
      for _, layer in ipairs({ "seccomp", "netns", "pidns", "caps", "rlimits" }) do
        assert.is_true(probe[layer].available, layer .. ": " .. tostring(probe[layer].reason))
      end
      -- user namespaces exactly when the host allows them (a container may not)
      local max = tonumber(read("/proc/sys/user/max_user_namespaces") or "")
      if max == 0 then
        assert.is_false(probe.userns.available)
        assert.matches("user namespace", probe.userns.reason)
      else
        assert.is_true(probe.userns.available, "userns: " .. tostring(probe.userns.reason))
      end
    end)
  end)

  describe("the isolation option", function()
    local marker
    before_each(function() marker = tmp() .. "/ran-" .. math.random(1e9) end)

    it("raises on a caller's mistake", function()
      local bad = {
        { "option 'isolation' must be a table", "all" },
        { "unknown isolation layer 'selinux'", { selinux = true } },
        { "seccomp must be a boolean", { seccomp = "yes" } },
        { "landlock.read must be an array of paths", { landlock = { read = "notatable" } } },
        { "landlock: unknown key", { landlock = { exec = { "/" } } } },
        { "landlock path must be an absolute path", { landlock = { read = { "usr" } } } },
        { "landlock must be a table", { landlock = true } },
        { "rlimits: unknown limit 'cpu'", { rlimits = { cpu = 1 } } },
        { "rlimits.nofile must be an integer", { rlimits = { nofile = -1 } } },
        { "rlimits.as_mb must be an integer", { rlimits = { as_mb = 1.5 } } },
        { "cgroup must be an absolute path", { cgroup = "sys/fs/cgroup" } },
      }
      for _, case in ipairs(bad) do
        local ok, err = pcall(spawn, { "/bin/true" }, case[2])
        assert.is_false(ok, case[1])
        assert.matches(case[1], err, 1, true)
      end
    end)

    it("refuses a NUL byte in a path before anything runs", function()
      assert.same({ nil, "spawn: isolation: landlock path contains a NUL byte", EINVAL },
        { spawn({ "/bin/true" }, { landlock = { read = { "/usr\0/x" } } }) })
      assert.same({ nil, "spawn: isolation: cgroup contains a NUL byte", EINVAL },
        { spawn({ "/bin/true" }, { cgroup = "/sys\0" }) })
    end)

    it("fails closed on a cgroup that does not exist: nil, message, errno, and nothing runs", function()
      local p, msg, err = spawn({ "/bin/sh", "-c", "touch " .. marker }, { cgroup = "/nonexistent" })
      assert.is_nil(p)
      assert.equals("spawn: isolation: cgroup: /nonexistent: No such file or directory", msg)
      assert.equals(ENOENT, err)
      assert.is_nil(read(marker))
    end)

    it("refuses a directory that is not a cgroup, writing nothing into it", function()
      local dir = tmp() .. "/fakecg"
      core.mkdir(dir)
      write(dir .. "/cgroup.procs", "")
      local p, msg, err = spawn({ "/bin/sh", "-c", "touch " .. marker }, { cgroup = dir })
      assert.same({ nil, "spawn: isolation: cgroup: " .. dir .. ": not a cgroup directory", EINVAL }, { p, msg, err })
      assert.equals("", read(dir .. "/cgroup.procs"))
      assert.is_nil(read(marker))
    end)

    it("fails closed when a step fails in the child: the step is named, nothing runs", function()
      -- RLIMIT_NOFILE above fs.nr_open: setrlimit refuses (EPERM)
      local p, msg, err = spawn({ "/bin/sh", "-c", "touch " .. marker }, { rlimits = { nofile = 1 << 40 } })
      assert.is_nil(p)
      assert.equals("spawn: isolation: rlimits: Operation not permitted", msg)
      assert.equals(EPERM, err)
      assert.is_nil(read(marker))
    end)

    it("applies nothing for an empty table or a false layer", function()
      local r = shell("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status; echo $$", { seccomp = false, netns = false })
      assert.matches("Seccomp:%s*0", r.stdout)
      assert.is_not.equal("1", r.stdout:match("(%d+)\n$"))
      assert.equals(0, run({ "/bin/true" }, {}).exit)
    end)
  end)

  S.describe("landlock", "landlock", function()
    local base, allowed, secret, work
    before_each(function()
      base = assert(core.mkdtemp(tmp(), "ll-"))
      allowed, secret, work = base .. "/allowed", base .. "/secret", base .. "/work"
      for _, d in ipairs({ allowed, secret, work }) do assert(core.mkdir(d)) end
      write(allowed .. "/data", "public\n")
      write(secret .. "/key", "s3cret\n")
    end)

    local function ll(script, extra_read, extra_write, more)
      local iso = more or {}
      iso.landlock = { read = with(SYS_READ, allowed, table.unpack(extra_read or {})),
                       write = with({ "/dev/null", work }, table.unpack(extra_write or {})) }
      return shell(script, iso)
    end

    it("lets the child read an allowed directory and nothing outside the lists", function()
      local r = ll("cat " .. allowed .. "/data; ls " .. allowed .. "; cat " .. secret .. "/key; ls " .. secret .. "; echo end")
      assert.matches("^public\ndata\n", r.stdout)
      assert.not_matches("s3cret", r.stdout)
      assert.matches("Permission denied", r.stderr)
      assert.matches("end\n$", r.stdout)
      -- the same commands without the layer read the secret: the test means something
      assert.matches("s3cret", shell("cat " .. secret .. "/key").stdout)
    end)

    it("keeps /root and /home out of reach", function()
      local r = ll("ls /root >/dev/null 2>&1 && echo root-open; ls /home >/dev/null 2>&1 && echo home-open; echo end")
      assert.equals("end\n", r.stdout)
      for _, f in ipairs({ "/root/.profile", "/root/.bashrc" }) do
        if IS_ROOT and read(f) then   -- a real file under /root: readable without the layer, not with it
          assert.equals(0, shell("cat " .. f .. " >/dev/null").exit)
          local denied = ll("cat " .. f)
          assert.equals("", denied.stdout)
          assert.matches("Permission denied", denied.stderr)
          break
        end
      end
    end)

    it("lets the child write, create, remove and rename only under `write`", function()
      local r = ll(table.concat({
        "echo a > " .. work .. "/f && echo wrote",
        "mkdir " .. work .. "/sub && echo mkdir",
        "mv " .. work .. "/f " .. work .. "/sub/g && echo moved",
        ": > " .. work .. "/sub/g && echo truncated",
        "rm -r " .. work .. "/sub && echo removed",
        "echo b > " .. allowed .. "/new || echo no-write-allowed",
        "echo c >> " .. allowed .. "/data || echo no-append-allowed",
        "rm " .. allowed .. "/data || echo no-rm-allowed",
        "echo d > " .. secret .. "/x || echo no-write-secret",
        "echo e > /tmp/hcp-ll-escape-$$ || echo no-write-tmp",
      }, "; "))
      for _, w in ipairs({ "wrote", "mkdir", "moved", "truncated", "removed", "no-write-allowed",
                           "no-append-allowed", "no-rm-allowed", "no-write-secret", "no-write-tmp" }) do
        assert.matches(w .. "\n", r.stdout, 1, true)
      end
      assert.equals("public\n", read(allowed .. "/data"))
    end)

    it("does not let ../ or a symlink lead out of a write directory", function()
      local r = ll(table.concat({
        "echo x > " .. work .. "/../escaped || echo dotdot-refused",
        "ln -s ../secret " .. work .. "/link && echo linked",
        "echo y > " .. work .. "/link/planted || echo link-refused",
        "cat " .. work .. "/link/key || echo link-read-refused",
      }, "; "))
      for _, w in ipairs({ "dotdot-refused", "linked", "link-refused", "link-read-refused" }) do
        assert.matches(w .. "\n", r.stdout, 1, true)
      end
      assert.is_nil(read(base .. "/escaped"))
      assert.is_nil(read(secret .. "/planted"))
    end)

    it("skips a path that does not exist and gives a file only file rights", function()
      local r = ll("echo ok > /dev/null && echo devnull; head -c1 /dev/zero >/dev/null 2>&1 || echo no-zero",
                   { "/nonexistent/hcp" })
      assert.equals(0, r.exit)
      assert.equals("devnull\nno-zero\n", r.stdout)
    end)

    it("refuses to exec a binary outside the read paths (nothing runs)", function()
      local bin = allowed .. "/../secret/true"
      assert(os.execute("cp /bin/true " .. q(secret .. "/true")))
      local p, msg, err = spawn({ bin }, { landlock = { read = with(SYS_READ, allowed) } })
      assert.same({ nil, "spawn: execveat: Permission denied", EACCES }, { p, msg, err })
    end)

    it("anchors a /proc path in the child: /proc/self is the child's, not the runtime's", function()
      -- the shell reads with a builtin: /proc/self is its own directory (a rule
      -- on /proc/self covers that one process, not the ones it starts)
      local r = ll("read -r l < /proc/self/status && echo \"$l\"; cat /proc/" .. RT_PID
                   .. "/environ >/dev/null || echo runtime-hidden", { "/proc/self" })
      assert.matches("^Name:\t%a+\nruntime%-hidden\n$", r.stdout)
    end)

    S.it("pidns", "works with pidns: the new /proc is readable when /proc is listed", function()
      local r = ll("grep -c . /proc/self/status >/dev/null && echo proc-ok; echo $$", { "/proc" }, nil, { pidns = true })
      assert.equals("proc-ok\n2\n", r.stdout)
    end)
  end)

  S.describe("seccomp", "seccomp", function()

    it("refuses ptrace, mount, bpf, keyctl, io_uring, user namespaces... with EPERM", function()
      local r = kv(run({ helper(), "syscalls", mnt() }, { seccomp = true }).stdout)
      for _, name in ipairs({ "ptrace_traceme", "ptrace_attach", "unshare_user", "mount", "umount", "bpf",
                              "keyctl", "add_key", "io_uring_setup", "userfaultfd", "perf_event_open",
                              "process_vm_readv", "setns", "kexec_load", "fsopen", "clone_newuser" }) do
        assert.equals(EPERM, r[name], name)
      end
      assert.equals(ENOSYS, r.clone3)       -- so libc falls back to clone
      assert.equals(ENOSYS, r.x32_getpid)   -- the x32 ABI does not get around the filter
      assert.equals(0, r.fork)              -- fork (clone without CLONE_NEWUSER) still works
      assert.equals(0, r.getpid)
    end)

    S.it({ "root", "userns" }, "without the filter, root could do those (the test means something)", function()
      local r = kv(run({ helper(), "syscalls", mnt() }).stdout)
      assert.equals(0, r.ptrace_traceme)
      assert.equals(0, r.unshare_user)
      assert.equals(0, r.clone_newuser)
    end)

    it("refuses TIOCSTI and TIOCLINUX, compared on the low 32 bits, and allows other ioctls", function()
      local r = kv(run({ helper(), "ioctls" }, { seccomp = true }).stdout)
      assert.equals(EPERM, r.tiocsti)
      assert.equals(EPERM, r.tiocsti_hi)   -- TIOCSTI | 1 << 32 (CVE-2019-10063)
      assert.equals(EPERM, r.tiocsti_stdin)
      assert.equals(EPERM, r.tioclinux)
      assert.equals(0, r.fionread)
      if INIT_ROOT then   -- as root, with CAP_SYS_ADMIN on the host, the kernel itself allows TIOCSTI on a pty
        local bare = kv(run({ helper(), "ioctls" }).stdout)
        assert.equals(0, bare.tiocsti)
        assert.equals(0, bare.tiocsti_hi)
      end
    end)

    it("kills a syscall made through another architecture's entry point", function()
      local bare = run({ helper(), "int80" })
      if bare.signal then pending("no 32-bit syscall entry on this kernel") end
      assert.matches("^int80=%d+", bare.stdout)
      local r = run({ helper(), "int80" }, { seccomp = true })
      assert.equals(SIGSYS, r.signal)
      assert.equals("", r.stdout)
    end)

    it("leaves ordinary programs working (fork, exec, pipes, threads via clone)", function()
      local r = shell("x=$(echo hi | tr h H); echo $x; ls / >/dev/null && echo ls-ok", { seccomp = true })
      assert.equals("Hi\nls-ok\n", r.stdout)
      assert.matches("Seccomp:%s*2", shell("cat /proc/self/status", { seccomp = true }).stdout)
    end)
  end)

  describe("netns", function()
    local servers = {}
    after_each(function()
      for _, s in ipairs(servers) do s:kill() s:wait() end
      servers = {}
    end)

    --- Starts a listener on host (bounded: it stops by itself after 30 s);
    --- returns its port, or nil when the host cannot listen there.
    local function serve(host)
      local portfile = tmp() .. "/port-" .. math.random(1e9)
      local p = assert(spawn({ helper(), "serve", host, portfile, "30" }))
      servers[#servers + 1] = p
      local ok = eventually(function()
        local s = read(portfile)
        return (s and s:match("%d+\n")) or p:done()
      end, 5000)
      local port = ok and read(portfile)
      return port and tonumber(port:match("%d+"))
    end

    for _, host in ipairs({ "127.0.0.1", "::1" }) do
      S.it("netns", "cuts the child off a server on the host's " .. host, function()
        local port = serve(host)
        if not port then pending("this host cannot listen on " .. host) end
        local open = kv(run({ helper(), "connect", host, tostring(port) }).stdout)
        assert.equals(0, open.connect)   -- reachable without the layer
        local cut = kv(run({ helper(), "connect", host, tostring(port) }, { netns = true }).stdout)
        assert.is_not.equal(0, cut.connect)
        assert.is_number(cut.connect)
      end)
    end

    S.it("netns", "gives the child one loopback, down", function()
      local r = shell("cat /proc/net/dev", { netns = true })
      local ifaces = {}
      for name in r.stdout:gmatch("\n%s*([%w@._-]+):") do ifaces[#ifaces + 1] = name end
      assert.same({ "lo" }, ifaces)
    end)
  end)

  S.describe("pidns", "pidns", function()

    -- The call ends on hcp-init's report, before hcp-init has exited (root:
    -- it is the runtime's own child; spawn_io.c end_on_report): only once
    -- every other process of the namespace is dead and reaped. So at the
    -- return, not a moment later, none of the call's processes exists — no
    -- polling here. Each way a process could try to stay, each with its
    -- stdio closed (so EOF on the pipes comes with the program's exit; one
    -- holding them is waited for anyway): in the background, setsid()ed and
    -- double-forked, TERM ignored, stopped — and one that watches for the
    -- moment the call has returned.
    it("at the call's end, every process the program started is gone already", function()
      local mark = "1000." .. core.getpid() .. "3"
      local p = assert(spawn({ "/bin/sh", "-c", table.concat({
        "sleep " .. mark .. "1 </dev/null >/dev/null 2>&1 &",
        "setsid sh -c 'sleep " .. mark .. "2 & exit 0' </dev/null >/dev/null 2>&1 &",
        "sh -c 'trap \"\" TERM; exec sleep " .. mark .. "3' </dev/null >/dev/null 2>&1 &",
        "sh -c 'kill -STOP $$; exec sleep " .. mark .. "4' </dev/null >/dev/null 2>&1 &",
        -- until the three that run have exec'd
        S.sh_wait("[ $(ps -o args= -e | grep -c '^sleep " .. mark .. "') -ge 3 ]"),
        "ps -o args= -e | grep -c '^sleep " .. mark .. "'; exit 5" }, "\n") },
        { pidns = true, caps = true }))
      local r = p:wait()
      assert.equals(5, r.exit)
      -- the stopped one never got to exec sleep: three ran when the program ended
      assert.equals("3\n", r.stdout)
      p:close()
      assert.equals("", sh("ps -o pid=,args= -e | grep '[s]leep " .. mark .. "' || true"))
    end)

    it("no process of the call runs once the call has returned, not even for a moment", function()
      local after, seen = tmp() .. "/returned", tmp() .. "/seen-after-return"
      -- a watcher notes whether it ever runs once the call has returned: the
      -- spec makes `after` the moment it has the result (a few tries: a
      -- watcher the kernel has not scheduled in that moment sees nothing)
      local ready = tmp() .. "/watching"
      local watch = ": > " .. ready .. "; while :; do [ -e " .. after .. " ] && : > " .. seen .. "; done"
      for _ = 1, 8 do
        os.remove(after)
        os.remove(seen)
        os.remove(ready)
        local p = assert(spawn({ "/bin/sh", "-c", "setsid sh -c '" .. watch .. "' </dev/null >/dev/null 2>&1 &\n"
          .. S.sh_wait("[ -e " .. ready .. " ]") .. "; exit 0" }, { pidns = true, caps = true }))
        local r = p:wait()
        write(after, "")
        p:close()
        core.reap_late()   -- hcp-init reaped: had anything of the call been left, it is dead now
        assert.equals(0, r.exit)
        assert.is_nil(io.open(seen), "a process of the call ran after the call had returned")
      end
    end)

    -- A call that ended on the report leaves its hcp-init, still exiting,
    -- to be reaped later (spawn_io.c: never waited for in the loop): at the
    -- next drive pass, or all at once by core.reap_late (the runtime's
    -- close) — kept procs keep no zombie.
    it("leaves no hcp-init behind: reaped at a later pass, or by core.reap_late", function()
      local function our_children()
        local kids = {}
        for tid in io.popen("ls /proc/" .. RT_PID .. "/task"):lines() do
          local f = io.open("/proc/" .. RT_PID .. "/task/" .. tid .. "/children")
          for pid in (f and f:read("a") or ""):gmatch("%d+") do
            local c = io.open("/proc/" .. pid .. "/comm")
            kids[#kids + 1] = c and c:read("l") or pid
            if c then c:close() end
          end
          if f then f:close() end
        end
        return kids
      end
      local function inits()
        local n = 0
        for _, comm in ipairs(our_children()) do if comm == "hcp-init" then n = n + 1 end end
        return n
      end
      local kept = {}
      local function call()
        local p = assert(spawn({ "/bin/true" }, { pidns = true, caps = true }))
        assert.equals(0, p:wait().exit)
        kept[#kept + 1] = p   -- not closed: held for its result
      end
      for _ = 1, 20 do call() end
      -- a pass of a later wait (here: of a child without layers) reaps them
      assert(S.wait_until(function()
        local p = assert(spawn({ "/bin/true" }))
        p:wait()
        p:close()
        return inits() == 0
      end, 30, "the passes to reap every hcp-init left"))
      call()
      core.reap_late()
      assert.equals(0, inits())
    end)

    -- hcp-init's report is trusted to end the call only where the program
    -- could not have written it: its pipe is hcp-init's alone, reachable
    -- through /proc/1/fd only to a process that may trace hcp-init.
    local FORGE = table.concat({
      -- 32 bytes: exit 3 (a wait status), gone = 1, no usage
      [[fake='\000\003\000\000\001\000\000\000\000\000\000\000\000\000\000\000]]
        .. [[\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000']],
      [[for f in /proc/1/fd/*; do printf "$fake" > "$f" 2>/dev/null && echo forged; done]],
      -- the program's own run, past the 250 ms a call's pipes are drained
      -- for after its end: output after a wrongly early end would be lost
      "sleep 0.5; echo after; exit 7" }, "\n")

    it("a program without capabilities cannot write hcp-init's report: the call ends when it does", function()
      local r = shell(FORGE, { pidns = true, caps = true })
      assert.not_matches("forged", r.stdout)
      assert.equals("after\n", r.stdout)
      assert.equals(7, r.exit)
    end)

    -- What hcp-init holds from the program's first instruction on: its
    -- status pipe, and the socket the program's descriptors came through
    -- (its other end closed). Before, hcp-init kept the call's pipes, the
    -- report pipe, the binary and the runtime's own stdio until it was
    -- scheduled after the program's exec: a program quick enough, with its
    -- capabilities, found them through /proc/1/fd (seen in ~4% of calls
    -- here; 100 calls make a miss of that unlikely).
    local LISTER = [[
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(void)
{
    for (int round = 0; round < 20; round++) {
        DIR *d = opendir("/proc/1/fd");
        struct dirent *e;
        if (!d) { printf("opendir failed\n"); return 1; }
        while ((e = readdir(d))) {
            char p[64], l[256];
            if (e->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "/proc/1/fd/%s", e->d_name);
            ssize_t k = readlink(p, l, sizeof l - 1);
            l[k > 0 ? k : 0] = '\0';
            printf("%d %s %s\n", round, e->d_name, l);
        }
        closedir(d);
    }
    return 0;
}
]]

    S.it("init_root", "hcp-init holds none of the call's descriptors, nor the runtime's, once the program runs", function()
      local lister = assert(S.cc("initfds", LISTER))
      for i = 1, 100 do
        local r = run({ lister }, { pidns = true })
        assert.equals(0, r.exit, r.stdout)
        for round, fd, target in r.stdout:gmatch("(%d+) (%d+) ([^\n]*)\n") do
          assert.is_truthy(target:match("^pipe:%[%d+%]$") or target:match("^socket:%[%d+%]$"),
            string.format("call %d, round %s: hcp-init's fd %s is %s", i, round, fd, target))
        end
        local per_round = {}
        for round in r.stdout:gmatch("(%d+) %d+ [^\n]*\n") do per_round[round] = (per_round[round] or 0) + 1 end
        for round, n in pairs(per_round) do
          assert.is_true(n <= 2, string.format("call %d, round %s: %d fds in hcp-init", i, round, n))
        end
      end
    end)

    S.it("init_root", "a program that can write it (capabilities kept, same uid) does not end the call early", function()
      local r = shell(FORGE, { pidns = true })
      -- the attack is real here: root with its capabilities opens hcp-init's fds
      assert.matches("forged", r.stdout)
      -- and changes nothing but what it could anyway choose, its exit status:
      -- the call still ended with the program, its output all there
      assert.matches("after\n$", r.stdout)
      assert.is_true(r.ms >= 500, "ended after " .. r.ms .. " ms")
    end)

    it("runs the child as pid 2 under hcp-init, with its own /proc", function()
      local r = shell("echo $$; cat /proc/1/comm; ls /proc | grep -E '^[0-9]+$'", { pidns = true })
      local me, init, list = r.stdout:match("^(%d+)\n(%S+)\n(.*)$")
      assert.equals("2", me)
      assert.equals("hcp-init", init)
      local pids = {}
      for pid in list:gmatch("%d+") do pids[#pids + 1] = tonumber(pid) end
      assert.same({ 1, 2 }, { pids[1], pids[2] })
      assert.is_true(#pids <= 6)
      for _, pid in ipairs(pids) do assert.is_true(pid <= 6, "a pid from outside: " .. pid) end
    end)

    it("keeps ordinary signal semantics: the program is not pid 1, it leads its own session", function()
      local r = shell("kill -KILL $$", { pidns = true })
      assert.equals(SIGKILL, r.signal)
      local s = shell("echo $$; cut -d' ' -f6 /proc/$$/stat; tty || true", { pidns = true })
      assert.matches("^2\n2\nnot a tty\n$", s.stdout)
    end)

    it("hides the runtime: its /proc/<pid>/environ cannot be read", function()
      local cmd = "cat /proc/" .. RT_PID .. "/environ >/dev/null && echo read-environ"
      if IS_ROOT then assert.equals("read-environ\n", shell(cmd).stdout) end   -- without the layer
      local r = shell(cmd, { pidns = true })
      assert.equals("", r.stdout)
      assert.matches("No such file", r.stderr)
    end)

    it("relays the end of the program: exit code, or death by signal", function()
      local r = shell("echo out; echo err >&2; exit 7", { pidns = true })
      assert.same({ 7, nil, "out\n", "err\n" }, { r.exit, r.signal, r.stdout, r.stderr })
      local s = run({ helper(), "segv" }, { pidns = true }, { cwd = tmp() })
      assert.equals(SIGSEGV, s.signal)
      assert.equals(128 + SIGSEGV, s.exit)
    end)

    it("ends everything on kill and reports the signal", function()
      local p = assert(spawn({ "/bin/sh", "-c", "sleep 30 & sleep 30" }, { pidns = true }))
      assert.is_nil(p:wait(100))
      assert.is_true(p:kill("TERM"))
      local r = p:wait()
      assert.equals(SIGTERM, r.signal)
    end)

    it("kills a setsid + double-fork escapee at timeout", function()
      local name, r, seen = escapee({ pidns = true })
      assert.is_true(seen, "the escapee never started before the timeout")
      assert.is_true(r.timed_out)
      assert.is_true(eventually(function() return #by_comm(name) == 0 end), "the escapee survived")
    end)

    it("(without the layer, that escapee survives the timeout)", function()
      local name, r, seen = escapee(nil)
      assert.is_true(seen, "the escapee never started before the timeout")
      assert.is_true(r.timed_out)
      local left = by_comm(name)
      for _, pid in ipairs(left) do os.execute("kill -9 " .. pid) end
      assert.equals(1, #left)
    end)

    it("reports a failure of the grandchild through the error pipe", function()
      local p, msg, err = spawn({ "/bin/true" }, { pidns = true }, { cwd = "/nonexistent" })
      assert.same({ nil, "spawn: chdir: No such file or directory", ENOENT }, { p, msg, err })
    end)

    S.it({ "netns", "caps", "seccomp" }, "combines with netns, caps and seccomp", function()
      local r = shell("echo $$; grep -E '^(CapEff|Seccomp):' /proc/self/status; cat /proc/net/dev | grep -c :",
                      { pidns = true, netns = true, caps = true, seccomp = true })
      assert.matches("^2\nCapEff:%s*0+\nSeccomp:%s*2\n1\n$", r.stdout)
    end)
  end)

  S.describe("caps", "caps", function()

    it("leaves no capability in any set, for the child and what it execs", function()
      -- grep is a uid-0 program exec'd by the child
      local r = shell("grep Cap /proc/self/status", { caps = true })
      for _, set in ipairs({ "CapInh", "CapPrm", "CapEff", "CapAmb" }) do
        assert.equals("0000000000000000", cap(r.stdout, set), set)
      end
      if IS_ROOT then
        assert.equals("0000000000000000", cap(r.stdout, "CapBnd"))
        assert.is_not.equal("0000000000000000", cap(shell("grep Cap /proc/self/status").stdout, "CapEff"))
      end
    end)

    S.it("root", "locks securebits so that uid 0 cannot regain capabilities on exec", function()
      local r = kv(run({ helper(), "status" }, { caps = true }).stdout)
      -- NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, each locked; KEEP_CAPS locked off
      assert.equals(0xef, r.securebits & 0xef)
      assert.equals(0, r.securebits & 0x10)
    end)

    S.it("root", "a setuid-root binary gains nothing (the binary must belong to root)", function()
      local suid = tmp() .. "/suid-status"
      assert(os.execute("cp " .. q(helper()) .. " " .. q(suid) .. " && chmod 4755 " .. q(suid)))
      local r = run({ suid, "status" }, { caps = true })
      assert.equals("0000000000000000", cap(r.stdout, "CapEff"))
      assert.equals("0000000000000000", cap(r.stdout, "CapPrm"))
    end)
  end)

  S.describe("rlimits", "rlimits", function()

    it("fsize_mb stops a big write with SIGXFSZ", function()
      local f = tmp() .. "/big-" .. math.random(1e9)
      local r = shell("exec head -c 3000000 /dev/zero > " .. f, { rlimits = { fsize_mb = 1 } })
      assert.equals(SIGXFSZ, r.signal)
      assert.equals(1 << 20, #read(f))
      assert.equals(0, shell("head -c 3000000 /dev/zero > " .. f).exit)
    end)

    it("nofile limits open files", function()
      local r = kv(run({ helper(), "openmany" }, { rlimits = { nofile = 16 } }).stdout)
      assert.equals(13, r.opened)   -- 16 minus stdin, stdout, stderr
      assert.equals(EMFILE, r.errno)
    end)

    it("as_mb stops a big allocation", function()
      assert.equals(ENOMEM, kv(run({ helper(), "alloc", "512" }, { rlimits = { as_mb = 128 } }).stdout).alloc)
      assert.equals(0, kv(run({ helper(), "alloc", "16" }, { rlimits = { as_mb = 128 } }).stdout).alloc)
    end)

    it("cpu_s stops a busy loop with SIGXCPU", function()
      local r = shell("while :; do :; done", { rlimits = { cpu_s = 1 } }, { timeout_ms = 120000 })
      assert.is_false(r.timed_out)
      assert.is_true(r.signal == SIGXCPU or r.signal == SIGKILL, tostring(r.signal))
    end)

    -- uid 0 is exempt from RLIMIT_NPROC: as root, the nobody run below covers it
    S.it("nonroot", "nproc bounds the processes of a non-root user", function()
      local r = kv(run({ helper(), "forkmany", "50" }, { rlimits = { nproc = 10 } }).stdout)
      assert.is_true(r.failed > 0)
    end)
  end)

  describe("cgroup", function()
    S.it("cgroup", "stops a fork bomb with pids.max = 20; the runtime stays responsive; all is cleaned up", function()
      local dir = probe.cgroup.path .. "/hcp-spec-" .. RT_PID .. "-" .. math.random(1e6)
      assert(core.mkdir(dir))
      finally(function() core.rmdir(dir) end)
      write(dir .. "/pids.max", "20\n")
      local joined = shell("cat /proc/self/cgroup", { cgroup = dir }).stdout
      assert.matches(dir:sub(#probe.cgroup.path + 1), joined, 1, true)

      -- the helper keeps its cgroup full until the spec has spawned beside it
      local go = tmp() .. "/go-" .. math.random(1e9)
      local p = assert(spawn({ helper(), "forkmany", "200", go }, { cgroup = dir }))
      assert.is_true(eventually(function()
        local procs = read(dir .. "/cgroup.procs") or ""
        return select(2, procs:gsub("\n", "")) >= 20
      end), "the fork bomb never filled its cgroup")
      assert.equals(0, run({ "/bin/true" }).exit)   -- outside the cgroup, a spawn still works
      assert.is_false(p:done())
      write(go, "")
      local r = kv(p:wait().stdout)
      assert.is_true(r.forked < 20, "forked " .. tostring(r.forked))
      assert.is_true(r.failed > 180, "failed " .. tostring(r.failed))
      -- the runtime killed the group when the helper exited: the cgroup empties
      assert.is_true(eventually(function() return read(dir .. "/cgroup.procs") == "" end))
      assert.is_true(eventually(function() return core.rmdir(dir) == true end))
      assert.is_nil(core.kind(dir))
    end)
  end)

  describe("core.rmdir", function()
    it("removes an empty directory and reports the rest as OS errors", function()
      local d = tmp() .. "/rm-" .. math.random(1e9)
      assert(core.mkdir(d))
      write(d .. "/f", "x")
      assert.same({ nil, d .. ": Directory not empty", ENOTEMPTY }, { core.rmdir(d) })
      os.remove(d .. "/f")
      assert.is_true(core.rmdir(d))
      assert.same({ nil, d .. ": No such file or directory", ENOENT }, { core.rmdir(d) })
      assert.has_error(function() core.rmdir("/tmp\0x") end)
    end)
  end)

  describe("as an unprivileged user (the user-namespace path)", function()
    -- root of the host, to become nobody (in a user namespace, nobody is not
    -- mapped), and a build that nobody can run
    S.it({ "init_root", "nobody", "nobody_runs_build" }, "netns, pidns, caps, landlock, seccomp and nproc hold for nobody",
      function()
      local nb = read("/etc/passwd"):match("\nnobody:[^:]*:(%d+):(%d+):")
      local secret = tmp() .. "/nb-secret"
      assert(core.mkdir(secret))
      write(secret .. "/key", "s3cret\n")
      assert(os.execute("chmod -R a+rX " .. q(secret)))
      local suid = tmp() .. "/nb-suid"
      assert(os.execute("cp " .. q(helper()) .. " " .. q(suid) .. " && chmod 4755 " .. q(suid)))
      local script = write(tmp() .. "/nobody.lua", [=[
        local core = require("hcp.core")
        local helper, secret, suid, sysread = arg[1], arg[2], arg[3], arg[4]
        local function run(argv, iso)
          local p = assert(core.spawn({ path = argv[1], argv = argv, env = { PATH = "/usr/bin:/bin" },
                                        cwd = "/", isolation = iso, timeout_ms = 10000 }))
          return p:wait()
        end
        local function sh(s, iso) return run({ "/bin/sh", "-c", s }, iso) end
        local pr = core.probe()
        print("probe_userns=" .. tostring(pr.userns.available))
        print("probe_netns=" .. tostring(pr.netns.available))
        print("probe_pidns=" .. tostring(pr.pidns.available))
        local r = sh("echo $$; cat /proc/net/dev | grep -c :; cat /proc/" .. core.getpid() .. "/environ >/dev/null 2>&1 || echo hidden",
                     { netns = true, pidns = true })
        print("nspid=" .. r.stdout:match("^(%d+)"))
        print("ifaces=" .. r.stdout:match("^%d+\n(%d+)"))
        print("environ=" .. (r.stdout:match("hidden") or "readable"))
        r = sh("cat /proc/" .. core.getpid() .. "/environ >/dev/null && echo readable")
        print("environ_bare=" .. (r.stdout:match("readable") or "hidden"))
        r = sh("grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status", { caps = true, netns = true })
        print("bnd_ns=" .. r.stdout:match("CapBnd:%s*(%x+)"), "eff_ns=" .. r.stdout:match("CapEff:%s*(%x+)"))
        r = sh("grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status", { caps = true })
        print("eff=" .. r.stdout:match("CapEff:%s*(%x+)"), "prm=" .. r.stdout:match("CapPrm:%s*(%x+)"))
        r = run({ suid, "status" }, { caps = true })
        print("suid_euid=" .. r.stdout:match("euid=(%d+)"), "suid_eff=" .. r.stdout:match("CapEff:%s*(%x+)"))
        local rd = {}
        for p in sysread:gmatch("[^:]+") do rd[#rd + 1] = p end
        r = sh("cat " .. secret .. "/key || echo denied", { landlock = { read = rd, write = { "/dev/null" } } })
        print("landlock=" .. (r.stdout:match("s3cret") and "read" or r.stdout:match("denied") or "?"))
        r = run({ helper, "syscalls", "/nonexistent" }, { seccomp = true, netns = true })
        print("ptrace=" .. r.stdout:match("ptrace_traceme=(%d+)"), "userns_in=" .. r.stdout:match("unshare_user=(%d+)"))
        r = run({ helper, "forkmany", "50" }, { rlimits = { nproc = 10 } })
        print("nproc_failed=" .. r.stdout:match("failed=(%d+)"))
      ]=])
      local out, ok = sh("cd / && runuser -u nobody -- " .. q(HCP_LUA) .. " " .. q(script) .. " " .. q(helper()) .. " "
                         .. q(secret) .. " " .. q(suid) .. " " .. q(table.concat(SYS_READ, ":")) .. " 2>&1")
      assert(ok, out)
      local r = kv(out)
      -- decided by what nobody's probe says (the host may deny nobody user namespaces)
      if r.probe_userns ~= "true" or r.probe_netns ~= "true" or r.probe_pidns ~= "true" then
        pending("namespaces unavailable to nobody: " .. out)
      end
      assert.equals(2, r.nspid)
      assert.equals(1, r.ifaces)
      assert.equals("hidden", r.environ)
      assert.equals("readable", r.environ_bare)   -- same uid: only the pid namespace hides it
      assert.equals(0, tonumber(tostring(r.bnd_ns), 16))   -- in its user namespace, the drop is complete
      assert.equals(0, tonumber(tostring(r.eff_ns), 16))
      assert.equals(0, tonumber(tostring(r.eff), 16))
      assert.equals(0, tonumber(tostring(r.prm), 16))
      assert.equals(tonumber(nb), r.suid_euid)   -- NO_NEW_PRIVS: the setuid bit does nothing
      assert.equals(0, tonumber(tostring(r.suid_eff), 16))
      assert.equals("denied", r.landlock)
      assert.equals(EPERM, r.ptrace)
      assert.equals(EPERM, r.userns_in)
      assert.is_true(r.nproc_failed > 0)
    end)
  end)
end)
