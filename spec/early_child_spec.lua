-- spec/early_child_spec.lua — `hcp run`'s early child (src/early.c, issue
-- 12): started at the process's first instruction, pid 1 of a pid namespace
-- of its own, it makes the IPC and mount namespaces and begins the view with
-- the system paths while the modules load, then takes the call's plan and
-- descriptors over a socketpair. What must hold: the call it runs is the one
-- a fresh child would run (the same view, the same descriptors, the same
-- CPUs), a call it does not suit runs as before, and nothing is left when no
-- call takes it.
local core = require("hcp.core")
local S = require("spec.support")

local q = S.q

local probe = core.probe()
local HAS = core.geteuid() == 0 and probe.pidns and probe.pidns.available and probe.rootfs
  and probe.rootfs.available and core.kind(S.BUILD .. "/libexec/hcp-spawn") ~= nil
local WHY = "the early child needs root, pid namespaces, a constructed root and the spawn helper"

-- A pack that runs /bin/sh, the script on its stdin (an argument naming a
-- host path would be refused, rightly).
local function sh_pack(wrap)
  local dir, parent = S.pack(S.manifest("shx", "/bin/sh", wrap and { wrap = wrap }))
  return parent, dir
end

-- what the call's pid 1 is: its command line, spaced, on a line of its own
local PID1 = "tr '\\0' ' ' < /proc/1/cmdline; echo"

local function run(parent, script, env, opts)
  local input = S.write(S.tmpdir("early-") .. "/script.sh", script .. "\n")
  return S.sh(string.format("cd / && env %s %s run %s --pack-dir %s shx < %s 2>&1", env or "", q(S.HCP), opts or "",
    q(parent), q(input)))
end

-- The helpers of `hcp run` started early and never given a call.
local function early_children()
  local out = {}
  for _, pid in ipairs(core.listdir("/proc") or {}) do
    if pid:match("^%d+$") then
      local f = io.open("/proc/" .. pid .. "/cmdline", "rb")
      local cmd = f and f:read("a") or ""
      if f then f:close() end
      if cmd:match("^hcp%-spawn%zearly%z") then out[#out + 1] = pid end
    end
  end
  return out
end

local function none_left()
  return assert(S.wait_until(function() return #early_children() == 0 end, 10, "no early child left"))
end

describe("the early child of hcp run", function()
  it("runs the call: the program's pid 1 is the helper started early", function()
    if not HAS then pending(WHY) return end
    local parent = sh_pack()
    local out = run(parent, PID1)
    assert.matches("^hcp%-spawn early %d+ %d+ \n$", out)
    -- and with HCP_EARLY=0 the call's own helper is pid 1, as before
    assert.matches("^hcp%-spawn %d+ \n$", run(parent, PID1, "HCP_EARLY=0"))
  end)

  it("gives the program the same view as a fresh child: the same mounts with the same options, /tmp and /proc", function()
    if not HAS then pending(WHY) return end
    local parent = sh_pack()
    -- mount point, options, fs type and source of each mount (sorted: the
    -- early child mounts the call's own paths after the system's), the
    -- call's private directory named alike; what / and /tmp show
    local script = "(cut -d' ' -f5,6,9- /proc/self/mountinfo | sort; ls -1A / /tmp; df -k /tmp | tail -1;"
      .. " ls /proc/self/ns) 2>&1 | sed 's,/call-[^ ]*,/call-X,; s,hcp-rt-[^/ ]*,hcp-rt-X,'"
    local early, fresh = run(parent, script), run(parent, script, "HCP_EARLY=0")
    assert.matches("\n/usr ro,", early)
    assert.matches("\n/tmp/hcp%-rt%-X/call%-X rw,", early)
    assert.matches("\n/proc/sys ro,", early)
    assert.equals(fresh, early)
  end)

  it("§10.2.2–4: gives the program a fresh child's working directory (the pack root), environment (agent_env, no "
    .. "ambient credential) and HCP_SANDBOX=sandbox", function()
    if not HAS then pending(WHY) return end
    local parent, dir = sh_pack({ agent_env = { SPEC_AGENT = "given" } })
    local script = "pwd; env | sort | sed 's,/call-[^/]*,/call-X,; s,hcp-rt-[^/]*,hcp-rt-X,'"
    local env = "SPEC_AMBIENT_TOKEN=host-secret"
    local early, fresh = run(parent, script, env), run(parent, script, env .. " HCP_EARLY=0")
    assert.equals(fresh, early)
    assert.matches("^" .. dir:gsub("%p", "%%%0") .. "\n", early)
    assert.matches("\nHCP_SANDBOX=sandbox\n", early)
    assert.matches("\nSPEC_AGENT=given\n", early)
    assert.not_matches("host%-secret", early)
  end)

  it("gives the program the same descriptors as a fresh child: no socket, nothing of the helper's", function()
    if not HAS then pending(WHY) return end
    local parent = sh_pack()
    local script = "for f in /proc/self/fd/*; do printf '%s ' \"${f##*/}\"; done; echo; ls -l /proc/self/fd | grep -c socket"
    local early, fresh = run(parent, script), run(parent, script, "HCP_EARLY=0")
    assert.equals(fresh, early)
    assert.matches("\n0\n$", early)
  end)

  it("gives the program every CPU the runtime may use, though the helper ran on the others while it waited", function()
    if not HAS then pending(WHY) return end
    local mine = S.sh("grep Cpus_allowed_list /proc/self/status")
    if S.sh("nproc"):match("^1\n") then pending("one CPU: the early child is not moved") return end
    local parent = sh_pack()
    assert.equals(mine, run(parent, "grep Cpus_allowed_list /proc/self/status"))
    assert.equals(mine, run(parent, "grep Cpus_allowed_list /proc/1/status"))
  end)

  it("is ended when no call comes: a pack that does not exist, a refused argument", function()
    if not HAS then pending(WHY) return end
    none_left()
    local parent = sh_pack()
    local out = S.sh(string.format("%s run --pack-dir %s no-such-pack 2>&1; echo rc=$?", q(S.HCP), q(parent)))
    assert.matches("rc=[1-9]", out)
    none_left()
    out = S.sh(string.format("%s run --pack-dir %s shx /etc/shadow 2>&1; echo rc=$?", q(S.HCP), q(parent)))
    assert.matches("rc=[1-9]", out)
    none_left()
  end)

  it("is not used for a call it does not suit (no constructed root): that call runs as before, and it is ended",
    function()
      if not HAS then pending(WHY) return end
      local parent = sh_pack()
      local config = S.write(S.tmpdir("early-") .. "/c.lua", 'return { isolation = "minimal" }')
      local out = run(parent, "test -e /proc/1/cmdline && " .. PID1 .. "; ls /; echo rc=$?", nil,
        "--config " .. q(config))
      assert.matches("rc=0", out)
      assert.not_matches("hcp%-spawn early", out)
      assert.matches("\nhome\n", out) -- the host's root: no view was built
      none_left()
    end)

  it("is not used for a call through the bwrap driver (it stages paths first, and bwrap builds its own view)",
    function()
      if not HAS then pending(WHY) return end
      if not core.kind("/usr/bin/bwrap") then pending("no bwrap on this host") return end
      local parent = sh_pack()
      local config = S.write(S.tmpdir("early-") .. "/c.lua", 'return { driver = "bwrap" }')
      local out = run(parent, PID1 .. "; echo rc=$?", nil, "--config " .. q(config))
      if out:match("unavailable") then pending("bwrap unavailable here: " .. out) return end
      assert.matches("^bwrap .*\nrc=0\n$", out)
      none_left()
    end)

  it("sets the call's pid_max in its own namespace, through the descriptor opened before the view hid /proc/sys",
    function()
      if not HAS then pending(WHY) return end
      if not probe.pidns.pid_max then pending("no per-namespace pid_max on this kernel") return end
      local host = S.read("/proc/sys/kernel/pid_max")
      local parent = sh_pack({ limits = { procs = 400 } })
      local script = "cat /proc/sys/kernel/pid_max; " .. PID1
      local early, fresh = run(parent, script), run(parent, script, "HCP_EARLY=0")
      local bound = early:match("^(%d+)\nhcp%-spawn early ")
      assert(bound and tonumber(bound) >= 400 and tonumber(bound) <= 401, early)
      assert.equals(bound .. "\n", fresh:match("^%d+\n"))
      assert.matches("^%d+\nhcp%-spawn %d+ \n$", fresh)
      assert.not_equals(host, bound .. "\n")
      assert.equals(host, S.read("/proc/sys/kernel/pid_max"))
    end)

  it("is not used for a call whose processes are bounded by a cgroup (joined before any namespace)", function()
    if not HAS then pending(WHY) return end
    local parent = sh_pack({ limits = { procs = 20 } })
    local out = run(parent, PID1 .. "; echo rc=$?")
    assert.matches("rc=0", out)
    assert.not_matches("early", out)
    none_left()
  end)

  it("is not used once a mount was made on the host after it copied the host's mounts: the pack is on that mount",
    function()
      if not HAS then pending(WHY) return end
      local dir = S.tmpdir("early-")
      local mnt = S.mkdir(dir .. "/mnt")
      -- root of a user namespace in the host's mount namespace may not mount
      -- there (setting (c) of docs/testing.md)
      local try = S.sh(string.format("mount -t tmpfs hcp-spec %s 2>&1 && umount %s 2>&1 && echo mounted", q(mnt),
        q(mnt)))
      if not try:match("mounted\n$") then pending("cannot mount here: " .. try) return end
      S.write(dir .. "/hcp.json", S.sh("cat " .. q(select(2, sh_pack()) .. "/hcp.json")))
      -- the config file runs after the early child started, before the runtime
      local config = S.write(dir .. "/c.lua", string.format([[
assert(os.execute("mount -t tmpfs hcp-spec %s && mkdir %s/shx && cp %s/hcp.json %s/shx/"))
return {}]], mnt, mnt, dir, mnt))
      local input = S.write(dir .. "/script.sh", PID1 .. "; echo rc=$?\n")
      local out = S.sh(string.format("cd / && %s run --config %s --pack-dir %s shx < %s 2>&1; umount %s",
        q(S.HCP), q(config), q(mnt), q(input), q(mnt)))
      assert.matches("rc=0", out)
      assert.matches("^hcp%-spawn %d+ \n", out) -- a fresh child's helper
      none_left()
    end)

  it("makes the call's network namespace itself: no netns holder runs beside it, and the call's is not the host's",
    function()
      if not HAS then pending(WHY) return end
      local dir = S.tmpdir("early-")
      -- the config file runs before the runtime: it lists the helpers started
      local config = S.write(dir .. "/c.lua", string.format([[
local core = require("hcp.core")
local me = core.getpid()
local f = assert(io.open("/proc/" .. me .. "/task/" .. me .. "/children"))
local out = assert(io.open(%q, "w"))
-- A vfork parent runs on once the child's exec swapped its memory, before
-- the kernel set the new argv: cmdline reads empty until then (10 s deadline)
local function cmdline(pid)
  local deadline, s = core.monotonic_us() + 10e6, nil
  repeat
    local c = io.open("/proc/" .. pid .. "/cmdline")
    s = c and c:read("a") or "?"
    if c then c:close() end
  until s ~= "" or core.monotonic_us() > deadline
  return s
end
for pid in f:read("a"):gmatch("%%d+") do
  out:write((cmdline(pid):gsub("%%z", " ")), "\n")
end
out:close() f:close()
return {}]], dir .. "/helpers"))
      local parent = sh_pack()
      local out = run(parent, "readlink /proc/self/ns/net", nil, "--config " .. q(config))
      assert.matches("^hcp%-spawn early %d+ %d+ \n$", S.read(dir .. "/helpers"))
      assert.matches("^net:%[%d+%]\n$", out)
      assert.not_equals(S.sh("readlink /proc/self/ns/net"), out)
      none_left()
    end)

  it("is not used for a call with the host's network (its own namespace would hide it): that call has the host's",
    function()
      if not HAS then pending(WHY) return end
      local dir = S.tmpdir("early-")
      local parent = select(2, S.pack(S.manifest("shx", "/bin/sh", { wrap = { network = true } }), dir .. "/packs"))
      local config = S.write(dir .. "/c.lua", 'return { network = "unrestricted" }')
      local out = run(parent, "readlink /proc/self/ns/net; " .. PID1, nil,
        "--config " .. q(config))
      assert.equals(S.sh("readlink /proc/self/ns/net"), out:match("^[^\n]*\n"))
      assert.matches("\nhcp%-spawn %d+ \n$", out)
      none_left()
    end)

  it("ends with the runtime that started it, while it still waits for a plan", function()
    if not HAS then pending(WHY) return end
    none_left()
    local dir = S.tmpdir("early-")
    local fifo = dir .. "/hold"
    S.must_sh("mkfifo " .. q(fifo))
    -- the config file runs before the runtime: it blocks on the FIFO
    local config = S.write(dir .. "/c.lua", string.format("io.open(%q):read('a') return {}", fifo))
    local parent = sh_pack()
    local pidfile = dir .. "/pid"
    S.must_sh(string.format("cd / && { %s run --config %s --pack-dir %s shx < /dev/null > /dev/null 2>&1 & echo $! > %s; }",
      q(S.HCP), q(config), q(parent), q(pidfile)))
    local pid = assert(tonumber(S.read(pidfile)))
    assert(S.wait_until(function() return #early_children() == 1 end, 10, "the early child"))
    S.must_sh("kill -KILL " .. pid)
    none_left()
  end)

  it("is killed with its call at the call's timeout, with every process of the call", function()
    if not HAS then pending(WHY) return end
    local parent = sh_pack({ timeout_ms = 300 })
    local input = S.write(S.tmpdir("early-") .. "/script.sh", "sleep 31.25 & exec sleep 31.5\n")
    local out = S.sh(string.format("cd / && %s run --pack-dir %s shx < %s 2>&1; echo rc=$?", q(S.HCP), q(parent),
      q(input)))
    assert.matches("rc=143\n$", out) -- ended by SIGTERM at the timeout
    assert(S.wait_until(function() return #S.pids_of({ "sleep", "31.25" }) + #S.pids_of({ "sleep", "31.5" }) == 0 end,
      10, "the call's processes gone"))
    none_left()
  end)
end)

describe("hcp run as a user who is not root", function()
  it("starts no early child: the call's own helper builds the view", function()
    if core.geteuid() == 0 then pending("runs as root: the cases above cover the early child") return end
    if not (probe.pidns and probe.pidns.available) then pending("no pid namespaces") return end
    local parent = sh_pack()
    assert.not_matches("early", run(parent, PID1))
  end)
end)
