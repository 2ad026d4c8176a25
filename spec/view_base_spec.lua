-- spec/view_base_spec.lua — the base view (issue 12, src/rootfs_base.c):
-- the system part of every call's constructed root built once in a mount
-- namespace of its own, which each call copies and completes with its own
-- paths. A call on the base must see exactly what a view built from
-- nothing shows; two calls on it share nothing writable; a base whose host
-- files changed is rebuilt before the next call; a call whose paths the
-- base cannot take is built from nothing.
local core = require("hcp.core")
local hcp = require("hcp")
local isolation = require("hcp.isolation")
local S = require("spec.support")

local probe = core.probe()
local ROOT = core.geteuid() == 0
local CAN = ROOT and probe.rootfs.available and probe.pidns.available and core.spawn_helper()
local WHY = not ROOT and "the base view is for a root runtime" or "no rootfs, pidns or spawn helper here"
-- root of a user namespace in a mount namespace it does not own has none
-- (spec/without-userns.sh): the base's refusal is the reason
local OWN_MNT = true
if CAN then
  local b, err = core.view_base({ ro = isolation.SYSTEM_READ, tmp_mb = 64 })
  if b then b:close() elseif tostring(err):match("belongs to another user namespace") then
    CAN, OWN_MNT, WHY = false, false, tostring(err)
  end
end
local PID = core.getpid()

local base
local function the_base()
  base = base or assert(core.view_base({ ro = isolation.SYSTEM_READ, tmp_mb = 64 }))
  return base
end

-- What a shell in the view reports of it: the root's and /etc's entries,
-- modes, links; /dev; what can be written; the mount points with their
-- flags (the base's own tmpfs of /etc and /sys left out: the one mount
-- that differs, invisible but in mountinfo).
local DESCRIBE = [[
cd / && for f in .* * ; do printf '%s %s %s\n' "$f" "$(stat -c '%F %a' "$f")" "$(readlink "$f")"; done
echo ETC; ls -a /etc; echo DEV; ls -a /dev; echo MODES; stat -c '%n %a' /tmp /dev/shm /proc
for t in / /etc/passwd /usr/x /tmp/x /dev/shm/x "$1/x"; do (: > "$t") 2>/dev/null && echo "w $t" || echo "ro $t"; done
echo MOUNTS; awk '$5 != "/etc" && $5 != "/sys" { split($6, o, ","); print $5, o[1] }' /proc/self/mountinfo | sort
]]

local function view_of(rootfs, jail, extra)
  local iso = { pidns = true, caps = true, ipcns = true, rootfs = rootfs }
  for k, v in pairs(extra or {}) do iso[k] = v end
  local p = assert(core.spawn({ path = "/bin/sh", argv = { "sh", "-c", DESCRIBE, "sh", jail }, env = {},
    cwd = jail, isolation = iso }))
  local r = p:wait()
  assert.equals(0, r.exit, r.stderr)
  return r.stdout
end

local function mounts_of(out)
  return out:match("\nMOUNTS\n(.*)$")
end

describe("the base view", function()
  it("is refused where it cannot serve, with the reason", function()
    if ROOT and OWN_MNT then
      local ok, err = core.view_base({ ro = { S.tmpdir("under-tmp-") } })
      assert.is_nil(ok)
      assert.matches("/tmp and /dev/shm are each call's own", err)
    else
      local ok, err = core.view_base({ ro = isolation.SYSTEM_READ })
      assert.is_nil(ok)
      assert.matches(ROOT and "belongs to another user namespace" or "needs root", err)
    end
  end)

  -- root of a user namespace that still runs in the host's mount namespace
  -- (a container sharing it; spec/without-userns.sh): a call's paths cannot
  -- be cloned there, so there is no base, and every call still runs
  S.it({ "init_root", "unshare" }, "is refused to root of a user namespace in the host's mount namespace; "
    .. "its calls are built from nothing, each of them runs", function()
    if not CAN then pending(WHY) return end
    local code = [[local core = require("hcp.core") local hcp = require("hcp")
      local b, err = core.view_base({ ro = require("hcp.isolation").SYSTEM_READ })
      local rt = assert(hcp.create({ allow_bins = { "/bin/true" } }))
      local n = 0
      for _ = 1, 3 do if rt:exec({ bin = "/bin/true" }).ok then n = n + 1 end end
      io.write(tostring(b), " ", tostring(err), " ", n)]]
    local out = S.sh(string.format("unshare --user --map-root-user %s -e %s 2>&1", S.q(S.HCP_LUA), S.q(code)))
    assert.equals("nil view base: the runtime's mount namespace belongs to another user namespace "
      .. "(a call's paths cannot be cloned from it) 3", out)
  end)

  it("a call on it sees exactly what a view built from nothing shows", function()
    if not CAN then pending(WHY) return end
    local jail = S.tmpdir("bj-")
    local on = view_of({ base = the_base(), ro = {}, rw = { jail }, tmp_mb = 64 }, jail)
    local fresh = view_of({ ro = isolation.SYSTEM_READ, rw = { jail }, tmp_mb = 64 }, jail)
    assert.equals(fresh, on)
    assert.matches("w " .. jail .. "/x", on, 1, true)
    assert.matches("ro /etc/passwd", on, 1, true)
    assert.matches("\n/tmp rw\n", mounts_of(on))
  end)

  -- a runtime whose TMPDIR is /dev/shm has its jails there: the call's
  -- bind goes into its private /dev/shm, which the base's read-only /dev
  -- holds (found by the bench: every call after the first was refused)
  it("a call on it whose jail is under /dev/shm sees what a view built from nothing shows, and no other of"
    .. " the host's /dev/shm", function()
    if not CAN then pending(WHY) return end
    local top = assert(core.mkdtemp("/dev/shm", "hcp-spec-bshm-"))
    local other = assert(core.mkdtemp("/dev/shm", "hcp-spec-bother-"))
    finally(function() core.rmtree(top); core.rmtree(other) end)
    local jail = assert(core.mkdtemp(top, "jail-"))
    local on = view_of({ base = the_base(), ro = {}, rw = { jail }, tmp_mb = 64 }, jail)
    local fresh = view_of({ ro = isolation.SYSTEM_READ, rw = { jail }, tmp_mb = 64 }, jail)
    assert.equals(fresh, on)
    assert.matches("w " .. jail .. "/x", on, 1, true)
    assert.equals("", S.read(jail .. "/x"))
    local p = assert(core.spawn({ path = "/bin/ls", argv = { "ls", "-a", "/dev/shm", top }, env = {}, cwd = jail,
      isolation = { pidns = true, caps = true, rootfs = { base = the_base(), ro = {}, rw = { jail } } } }))
    local r = p:wait()
    assert.equals(0, r.exit, r.stderr)
    local name, jname = top:match("[^/]+$"), jail:match("[^/]+$")
    assert.equals("/dev/shm:\n.\n..\n" .. name .. "\n\n" .. top .. ":\n.\n..\n" .. jname .. "\n", r.stdout)
  end)

  it("10.2.2 a runtime whose TMPDIR is /dev/shm jails every call in a private directory there, on the base"
    .. " from its second call on", function()
    if not CAN then pending(WHY) return end
    local script = S.write(S.tmpdir("bshm-") .. "/run.lua", [[
      local rt = assert(require("hcp").create({ allow_bins = { "/bin/sh" } }))
      for i = 1, 3 do
        local res = rt:exec({ bin = "/bin/sh", args = { "-c", "pwd; cat /proc/self/mountinfo" } })
        local jailed = res.ok and res.stdout:match("^/dev/shm/hcp%-rt%-[^\n]+\n") and "jailed" or "not jailed"
        io.write(i, " ", tostring(res.ok), " ", res.ok and (res.stdout:match(" / /etc ro,") and "base" or "fresh")
          or tostring(res.error), " ", jailed, "\n")
      end
      rt:close()]])
    -- S.LUA: stock lua5.4 with the build's core, or make check's hcp-lua
    -- (the sanitized core built in)
    local out = S.must_sh(S.LUA_ENV .. string.format("env TMPDIR=/dev/shm %s %s 2>&1", S.q(S.LUA), S.q(script)))
    assert.equals("1 true fresh jailed\n2 true base jailed\n3 true base jailed\n", out)
  end)

  it("is what auto uses for a root runtime from its second view on (its /etc is a mount of its own)", function()
    if not CAN then pending(WHY) return end
    local rt = assert(hcp.create({ allow_bins = { "/bin/cat" } }))
    -- a process's first view is built from nothing (one call: the base would cost more)
    rt:exec({ bin = "/bin/cat", args = { "/proc/self/mountinfo" } })
    local res = rt:exec({ bin = "/bin/cat", args = { "/proc/self/mountinfo" } })
    assert.is_true(res.ok, res.error)
    assert.matches(" / /etc ro,", res.stdout, 1, true)
    rt:close()
  end)

  it("two calls on it at once share nothing writable: not /tmp, /dev/shm, their jails or the root", function()
    if not CAN then pending(WHY) return end
    local b = the_base()
    local procs, jails = {}, {}
    for i = 1, 2 do
      jails[i] = S.tmpdir("bc" .. i .. "-")
      -- write a mark, wait for the other's, report what it sees of the other
      local script = string.format([[
        echo %d > /tmp/mark; echo %d > /dev/shm/mark; echo %d > "$1/mark"
        sleep 1
        echo tmp=$(cat /tmp/mark) shm=$(cat /dev/shm/mark) other=$(cat "$2/mark" 2>&1 | head -c 40)
        (mkdir /x) 2>/dev/null && echo rootw || echo rootro]], i, i, i)
      procs[i] = assert(core.spawn({ path = "/bin/sh", argv = { "sh", "-c", script, "sh", jails[i], "" }, env = {},
        cwd = jails[i], isolation = { pidns = true, caps = true, rootfs = { base = b, ro = {}, rw = { jails[i] } } } }))
    end
    for i = 1, 2 do
      local r = procs[i]:wait()
      assert.matches(string.format("tmp=%d shm=%d", i, i), r.stdout, 1, true)
      assert.matches("rootro", r.stdout, 1, true)
    end
    -- and each jail was reached through the call's own bind only
    assert.equals("1\n", S.read(jails[1] .. "/mark"))
    assert.equals("2\n", S.read(jails[2] .. "/mark"))
  end)

  it("a call's jail of another call is not in its view", function()
    if not CAN then pending(WHY) return end
    local mine, other = S.tmpdir("bm-"), S.tmpdir("bo-")
    S.write(other .. "/secret", "s")
    local p = assert(core.spawn({ path = "/bin/cat", argv = { "cat", other .. "/secret" }, env = {}, cwd = mine,
      isolation = { pidns = true, caps = true, rootfs = { base = the_base(), ro = {}, rw = { mine } } } }))
    local r = p:wait()
    assert.not_equals(0, r.exit)
    assert.matches("No such file", r.stderr)
  end)

  describe("kept true to the host", function()
    -- a base of our own, outside /tmp: a file the spec replaces
    local dir = "/var/tmp/hcp-spec-base-" .. PID
    teardown(function() core.rmtree(dir) end)

    it("a file it binds replaced on the host (a rename) rebuilds it before the next call", function()
      if not CAN then pending(WHY) return end
      assert(core.mkdir(dir) and core.mkdir(dir .. "/etc"))
      S.write(dir .. "/etc/conf", "one\n")
      local ro = { dir .. "/etc/conf" }
      for _, p in ipairs(isolation.SYSTEM_READ) do ro[#ro + 1] = p end
      local b = assert(core.view_base({ ro = ro }))
      local jail = S.tmpdir("bs-")
      local function read_conf()
        local p = assert(core.spawn({ path = "/bin/cat", argv = { "cat", dir .. "/etc/conf" }, env = {}, cwd = jail,
          isolation = { pidns = true, caps = true, rootfs = { base = b, ro = {}, rw = { jail } } } }))
        return p:wait().stdout
      end
      assert.equals("one\n", read_conf())
      assert.equals(1, b:builds())
      S.write(dir .. "/etc/conf.new", "two\n")
      assert(os.rename(dir .. "/etc/conf.new", dir .. "/etc/conf"))
      assert.equals("two\n", read_conf())
      assert.equals(2, b:builds())
      assert.equals("two\n", read_conf())
      assert.equals(2, b:builds())
      -- written in place: the same file, seen at once, nothing rebuilt
      S.write(dir .. "/etc/conf", "three\n")
      assert.equals("three\n", read_conf())
      assert.equals(2, b:builds())
    end)

    it("a call's path inside one of its shared directories is built from nothing, and still works", function()
      if not CAN then pending(WHY) return end
      local ro = { dir .. "/etc/conf" }
      for _, p in ipairs(isolation.SYSTEM_READ) do ro[#ro + 1] = p end
      local b = assert(core.view_base({ ro = ro }))
      local jail = dir .. "/etc/jail-" .. PID
      assert(core.mkdir(jail))
      local script = "echo ok > x && cat x && grep -c ' /var ' /proc/self/mountinfo || true"
      local p = assert(core.spawn({ path = "/bin/sh", argv = { "sh", "-c", script }, env = {}, cwd = jail,
        isolation = { pidns = true, caps = true, rootfs = { base = b, ro = {}, rw = { jail } } } }))
      local r = p:wait()
      assert.equals(0, r.exit, r.stderr)
      -- built fresh: /var is a directory of the call's own root, not the base's tmpfs
      assert.equals("ok\n0\n", r.stdout)
    end)
  end)
end)
