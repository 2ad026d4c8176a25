-- spec/core_spawn_spec.lua — hcp.core's spawning half (src/spawn.c,
-- src/spawn_child.c): core.spawn, the proc handle, core.wait_any, core.signame.
local core = require("hcp.core")
local S = require("support")

local EINVAL, ENOENT, EACCES, ESRCH, EXDEV = 22, 2, 13, 3, 18

local now = S.now

local function spawn(opts)
  opts.env = opts.env or {}
  opts.cwd = opts.cwd or "/"
  opts.path = opts.path or opts.argv[1]
  return core.spawn(opts)
end

local function run(opts)
  local p, msg, err = spawn(opts)
  assert(p, msg, err)
  return p:wait()
end

local function sh(script, opts)
  opts = opts or {}
  opts.argv = { "/bin/sh", "-c", script }
  return opts
end

-- Fields of /proc/<pid>/stat after the command name: state, ppid, pgrp, session.
local function stat(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  local state, ppid, pgrp, session = s:match("%) (%S) (%d+) (%d+) (%d+)")
  if not state then return nil end
  return { state = state, ppid = tonumber(ppid), pgrp = tonumber(pgrp), session = tonumber(session) }
end

local group_members = S.group_members

-- The group may take a moment to finish dying after SIGKILL.
local function group_gone(pgid)
  return S.wait_until(function() return #group_members(pgid) == 0 end, 30, "process group " .. pgid .. " to end")
end

-- A shell fragment that waits for `file` to exist (at most 30 s).
local function until_exists(file)
  return S.sh_wait("[ -e " .. S.q(file) .. " ]")
end

-- A fresh name for a file that does not exist yet, in this run's temp dir.
local seq = 0
local function fresh_name(what)
  seq = seq + 1
  return S.tmpdir("spawn-") .. "/" .. what .. "-" .. seq
end

local function tmpfile(content, mode)
  local name = os.tmpname()
  local f = assert(io.open(name, "wb"))
  f:write(content)
  f:close()
  if mode then assert(os.execute("chmod " .. mode .. " " .. name)) end
  return name
end

describe("hcp.core spawning", function()
  describe("spawn", function()
    it("runs a binary with the given argv", function()
      local r = run{ argv = { "/bin/echo", "hello", "two words" } }
      assert.same("hello two words\n", r.stdout)
      assert.same("", r.stderr)
      assert.same(0, r.exit)
      assert.is_nil(r.signal)
      assert.is_false(r.stdout_truncated)
      assert.is_false(r.stderr_truncated)
      assert.is_false(r.timed_out)
      assert.is_number(r.ms)
    end)

    it("uses argv[1] as the child's argv[0], not the path", function()
      local r = run{ path = "/bin/sh", argv = { "not-sh", "-c", 'echo "$0"' } }
      assert.same("not-sh\n", r.stdout)
    end)

    it("gives the child exactly the env it was given", function()
      assert.is_not_nil(os.getenv("PATH"))   -- the test process has one ...
      local r = run{ argv = { "/usr/bin/env" }, env = { A = "1" } }
      assert.same("A=1\n", r.stdout)         -- ... the child does not
      assert.same("", run{ argv = { "/usr/bin/env" } }.stdout)
    end)

    it("runs the child in cwd", function()
      assert.same("/tmp\n", run{ argv = { "/bin/pwd" }, cwd = "/tmp" }.stdout)
    end)

    it("captures stderr apart from stdout", function()
      local r = run(sh("echo out; echo err >&2"))
      assert.same("out\n", r.stdout)
      assert.same("err\n", r.stderr)
    end)

    it("passes a stdin string through", function()
      assert.same("some input", run{ argv = { "/bin/cat" }, stdin = "some input" }.stdout)
    end)

    it("passes 5 MiB of binary stdin with NUL bytes through unchanged", function()
      local chunk = {}
      for i = 0, 255 do chunk[#chunk + 1] = string.char(i) end
      local data = string.rep(table.concat(chunk), 5 * 1024 * 1024 // 256)
      local r = run{ argv = { "/bin/cat" }, stdin = data }
      assert.same(#data, #r.stdout)
      assert.is_true(r.stdout == data)
    end)

    it("gives an empty stdin string as immediate EOF", function()
      local r = run{ argv = { "/bin/cat" }, stdin = "" }
      assert.same("", r.stdout)
      assert.same(0, r.exit)
    end)

    it("uses /dev/null as stdin when none is given", function()
      local r = run(sh("cat; readlink /proc/self/fd/0"))
      assert.same("/dev/null\n", r.stdout)
    end)

    it("survives a child that closes stdin early (EPIPE, no SIGPIPE)", function()
      local r = run{ argv = { "/usr/bin/head", "-c", "3" }, stdin = string.rep("x", 8 * 1024 * 1024) }
      assert.same("xxx", r.stdout)
      assert.same(0, r.exit)
    end)

    it("reports the exit code", function()
      local r = run(sh("exit 3"))
      assert.same(3, r.exit)
      assert.is_nil(r.signal)
    end)

    it("reports death by signal as 128+N", function()
      local r = run(sh("kill -TERM $$"))
      assert.same(15, r.signal)
      assert.same(143, r.exit)
    end)

    it("runs a #! script through the descriptor that was checked", function()
      local script = tmpfile('#!/bin/sh\necho "script $0 $1"\n', "755")
      local r = run{ path = script, argv = { "ignored", "arg" } }
      os.remove(script)
      assert.same(0, r.exit)
      -- the kernel hands the interpreter /dev/fd/N: the open file, not the path
      assert.matches("^script /dev/fd/%d+ arg\n$", r.stdout)
    end)

    it("runs the opened file even when the path is replaced afterwards", function()
      -- the child cannot be paused between open and exec from Lua, but a
      -- script that renames another file over its own path shows that the
      -- interpreter keeps reading the descriptor, not the path
      local dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir " .. dir))
      local f = assert(io.open(dir .. "/evil", "w"))
      f:write("#!/bin/sh\necho evil\n")
      f:close()
      f = assert(io.open(dir .. "/run", "w"))
      f:write("#!/bin/sh\nmv " .. dir .. "/evil " .. dir .. "/run\necho good\n")
      f:close()
      assert(os.execute("chmod 755 " .. dir .. "/run " .. dir .. "/evil"))
      local r = run{ argv = { dir .. "/run" } }
      os.execute("rm -rf " .. dir)
      assert.same("good\n", r.stdout)
    end)

    it("leaves no descriptor of the runtime open in the child", function()
      local name = tmpfile("x")
      local f = assert(io.open(name))
      local r = run{ argv = { "/bin/ls", "-l", "/proc/self/fd" } }
      f:close()
      os.remove(name)
      assert.is_nil(r.stdout:find(name, 1, true))
      local fds = {}
      for fd in r.stdout:gmatch(" (%d+) %-> ") do fds[#fds + 1] = tonumber(fd) end
      table.sort(fds)
      -- 0, 1, 2 and the directory ls itself opened to list /proc/self/fd
      assert.same({ 0, 1, 2, 3 }, fds)
      assert.matches("3 %-> /proc/%d+/fd", r.stdout)
    end)

    it("starts the child in a session and process group of its own", function()
      local p = assert(spawn(sh("cat /proc/$$/stat")))
      local r = p:wait()
      local pid, rest = r.stdout:match("^(%d+) %(.-%) (.*)$")
      assert.same(p:pid(), tonumber(pid))
      local pgrp, session = rest:match("^%S %d+ (%d+) (%d+)")
      assert.same(p:pid(), tonumber(pgrp))
      assert.same(p:pid(), tonumber(session))
    end)

    it("sets NoNewPrivs in the child", function()
      local r = run{ argv = { "/bin/cat", "/proc/self/status" } }
      assert.matches("\nNoNewPrivs:\t1\n", r.stdout)
    end)

    it("resets ignored signals and the signal mask in the child", function()
      local r = run{ argv = { "/bin/cat", "/proc/self/status" } }
      assert.matches("\nSigBlk:\t0+\n", r.stdout)
      assert.matches("\nSigIgn:\t0+\n", r.stdout)
    end)

    -- the child resets what its own copy of the table says is ignored or
    -- caught (/proc/self/status), not every signal one by one: a runtime
    -- that ignores standard and real-time signals and catches SIGINT (lua.c
    -- does while a chunk runs) still starts its children with none of it,
    -- with no layer (the direct child) and with layers (the spawn helper)
    it("resets what a runtime ignores or catches, standard and real-time signals alike", function()
      local code = [[
        local c = require("hcp.core")
        local function masks(text) return text:match("\nSigIgn:\t(%x+)\n.-SigCgt:\t(%x+)\n") end
        local fh = io.open("/proc/self/status")
        print(masks(fh:read("a")))
        fh:close()
        for _, iso in ipairs({ false, true }) do
          local o = { path = "/bin/cat", argv = { "cat", "/proc/self/status" }, env = {}, cwd = "/" }
          if iso then o.isolation = { seccomp = c.probe().seccomp.available or nil } end
          local r = assert(assert(c.spawn(o)):wait())
          print(masks(r.stdout))
        end
      ]]
      local out = S.must_sh(string.format("LUA_CPATH=%s bash -c %s", S.q(S.CPATH),
        S.q("trap '' PIPE USR1 SIGRTMIN+5 SIGRTMAX; exec " .. S.LUA .. " -e " .. S.q(code) .. " 2>&1")))
      local ign, cgt = out:match("^(%x+)\t(%x+)\n")
      assert.is_string(ign, out)
      local function has(mask, sig) return math.tointeger(tonumber(mask, 16)) >> (sig - 1) & 1 == 1 end
      -- the runtime's own: SIGPIPE (13), SIGUSR1 (10), SIGRTMAX (64) ignored, SIGINT (2) caught
      assert.is_true(has(ign, 13) and has(ign, 10) and has(ign, 64), out)
      assert.is_true(has(cgt, 2), out)
      assert.equal("0000000000000000\t0000000000000000\n0000000000000000\t0000000000000000\n",
        out:gsub("^[^\n]*\n", ""), out)
    end)

    it("kills the child when its parent dies (PDEATHSIG)", function()
      -- stock lua5.4 with build/'s core, or (make check) the ASan hcp-lua
      local interp = S.LUA:sub(1, 1) == "/" and S.LUA or "/usr/bin/" .. S.LUA
      local cpath = S.CPATH_ABS
      local env = { LUA_CPATH = cpath }
      env.LD_PRELOAD = os.getenv("LD_PRELOAD")       -- sanitizer runs
      env.ASAN_OPTIONS = os.getenv("ASAN_OPTIONS")
      local lua = [[
        local core = require("hcp.core")
        local p = assert(core.spawn{ path = "/bin/sleep", argv = { "sleep", "30" }, env = {}, cwd = "/" })
        io.stdout:write(p:pid(), "\n")
        io.stdout:flush()
        os.exit(0, false)   -- no __gc: only PDEATHSIG can end the sleep
      ]]
      local r = run{ argv = { interp, "-e", lua }, env = env }
      assert.same(0, r.exit, r.stderr)
      local pid = assert(tonumber(r.stdout:match("^(%d+)\n$")))
      assert(S.wait_until(function()
        local st = stat(pid)
        return st == nil or st.state == "Z"
      end, 30, "the orphaned sleep " .. pid .. " to die"))
    end)
  end)

  describe("spawn refusals", function()
    local marker = "/tmp/hcp-spawn-spec-marker"

    before_each(function() os.remove(marker) end)

    local function not_spawned()
      local f = io.open(marker)
      if f then f:close() end
      return f == nil
    end

    it("refuses a NUL byte in argv and spawns nothing", function()
      local opts = sh("touch " .. marker)
      opts.argv[4] = "a\0b"
      assert.same({ nil, "spawn: argv[4] contains a NUL byte", EINVAL }, { spawn(opts) })
      assert.is_true(not_spawned())
    end)

    it("refuses a NUL byte in an env key or value", function()
      local opts = sh("touch " .. marker, { env = { ["A\0B"] = "x" } })
      local p, msg, err = spawn(opts)
      assert.is_nil(p)
      assert.matches("^spawn: env key \"A\" contains a NUL byte", msg)
      assert.same(EINVAL, err)
      opts = sh("touch " .. marker, { env = { A = "x\0y" } })
      assert.same({ nil, 'spawn: env value of "A" contains a NUL byte', EINVAL }, { spawn(opts) })
      assert.is_true(not_spawned())
    end)

    it("refuses '=' in an env key and an empty key", function()
      assert.same({ nil, "spawn: env key \"A=B\" contains '='", EINVAL },
        { spawn(sh("touch " .. marker, { env = { ["A=B"] = "x" } })) })
      assert.same({ nil, 'spawn: env key "" is empty', EINVAL },
        { spawn(sh("touch " .. marker, { env = { [""] = "x" } })) })
      assert.is_true(not_spawned())
    end)

    it("raises for a relative path or cwd", function()
      assert.has_error(function() core.spawn{ path = "bin/echo", argv = { "echo" }, env = {}, cwd = "/" } end)
      assert.has_error(function() core.spawn{ path = "/bin/echo", argv = { "echo" }, env = {}, cwd = "tmp" } end)
    end)

    it("raises for missing or mistyped options", function()
      assert.has_error(function() core.spawn() end)
      assert.has_error(function() core.spawn{ argv = { "echo" }, env = {}, cwd = "/" } end)
      assert.has_error(function() core.spawn{ path = "/bin/echo", env = {}, cwd = "/" } end)
      assert.has_error(function() core.spawn{ path = "/bin/echo", argv = {}, env = {}, cwd = "/" } end)
      assert.has_error(function() core.spawn{ path = "/bin/echo", argv = { 1 }, env = {}, cwd = "/" } end)
      assert.has_error(function() core.spawn{ path = "/bin/echo", argv = { "echo" }, cwd = "/" } end)
      assert.has_error(function() spawn{ argv = { "/bin/echo" }, env = { A = 1 } } end)
      assert.has_error(function() spawn{ argv = { "/bin/echo" }, stdin = 5 } end)
      assert.has_error(function() spawn{ argv = { "/bin/echo" }, max_output = 1.5 } end)
      assert.has_error(function() spawn{ argv = { "/bin/echo" }, timeout_ms = -1 } end)
    end)

    it("raises for an unknown option rather than ignoring it", function()
      assert.has_error(function() spawn{ argv = { "/bin/echo" }, timeout = 5 } end,
        "spawn: unknown option 'timeout'")
    end)

    it("reports a cwd that does not exist", function()
      assert.same({ nil, "spawn: chdir: No such file or directory", ENOENT },
        { spawn{ argv = { "/bin/pwd" }, cwd = "/nonexistent-hcp-dir" } })
    end)

    it("reports a path that does not exist", function()
      assert.same({ nil, "spawn: /nonexistent-hcp-bin: No such file or directory", ENOENT },
        { spawn{ argv = { "/nonexistent-hcp-bin" } } })
    end)

    it("refuses a file without an execute bit", function()
      local name = tmpfile("#!/bin/sh\necho no\n", "644")
      local res = { spawn{ argv = { name } } }
      os.remove(name)
      assert.same({ nil, "spawn: " .. name .. ": not a regular executable file", EACCES }, res)
    end)

    it("refuses a directory", function()
      assert.same({ nil, "spawn: /tmp: not a regular executable file", EACCES },
        { spawn{ argv = { "/tmp" } } })
    end)
  end)

  describe("spawn beneath", function()
    local dir

    before_each(function()
      dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir -p " .. dir .. "/bin && cp /bin/echo " .. dir .. "/bin/echo"
        .. " && ln -s /bin/echo " .. dir .. "/bin/out && ln -s echo " .. dir .. "/bin/in"))
    end)

    after_each(function() os.execute("rm -rf " .. dir) end)

    it("runs a binary beneath the directory", function()
      local r = run{ path = dir .. "/bin/echo", beneath = dir, argv = { "echo", "hi" } }
      assert.same("hi\n", r.stdout)
    end)

    it("follows a symlink that stays beneath", function()
      local r = run{ path = dir .. "/bin/in", beneath = dir, argv = { "echo", "in" } }
      assert.same("in\n", r.stdout)
    end)

    it("refuses a symlink that escapes", function()
      assert.same({ nil, "spawn: " .. dir .. "/bin/out: escapes " .. dir, EXDEV },
        { spawn{ path = dir .. "/bin/out", beneath = dir, argv = { "echo" } } })
    end)

    it("refuses a path outside the directory", function()
      local p, msg, err = spawn{ path = "/bin/echo", beneath = dir, argv = { "echo" } }
      assert.is_nil(p)
      assert.matches("escapes", msg)
      assert.same(EXDEV, err)
    end)
  end)

  describe("timeouts and process groups", function()
    -- The children would sleep 120 s: returning within 60 s is a generous
    -- deadline that only a hang misses, not a measurement.
    it("kills a child at timeout_ms with SIGTERM", function()
      local t0 = now()
      local r = run{ argv = { "/bin/sleep", "120" }, timeout_ms = 200 }
      assert.is_true(now() - t0 < 60)
      assert.is_true(r.timed_out)
      assert.same(15, r.signal)
      assert.same(143, r.exit)
    end)

    it("escalates to SIGKILL for a group that ignores SIGTERM", function()
      local t0 = now()
      -- 1.5 s: time for the shell to set its trap before the TERM, even on a loaded machine
      local p = assert(spawn(sh('trap "" TERM; (trap "" TERM; sleep 120) & sleep 120',
        { timeout_ms = 1500, kill_grace_ms = 500 })))
      local r = p:wait()
      assert.is_true(now() - t0 < 60)
      assert.is_true(r.timed_out)
      assert.same(9, r.signal)
      assert.same(137, r.exit)
      assert.is_true(group_gone(p:pid()))
    end)

    it("does not hang on a grandchild that holds stdout, and kills it", function()
      local t0 = now()
      local p = assert(spawn(sh("sleep 120 & echo hi")))
      local r = p:wait()
      assert.is_true(now() - t0 < 60)
      assert.same("hi\n", r.stdout)
      assert.same(0, r.exit)
      assert.is_false(r.timed_out)
      assert.is_true(group_gone(p:pid()))
    end)
  end)

  describe("output cap", function()
    it("keeps max_output bytes, drains the rest and marks truncation", function()
      local r = run(sh("yes | head -c 50000000", { max_output = 1024 * 1024 }))
      assert.same(1024 * 1024, #r.stdout)
      assert.is_true(r.stdout_truncated)
      assert.is_false(r.stderr_truncated)
      assert.same(0, r.exit)
      assert.same(string.rep("y\n", 8), r.stdout:sub(1, 16))
    end)

    it("does not mark output that fits exactly as truncated", function()
      local r = run(sh("printf 12345", { max_output = 5 }))
      assert.same("12345", r.stdout)
      assert.is_false(r.stdout_truncated)
    end)

    -- A capture is read into a buffer that becomes the result's string
    -- (src/strbuf.c): the bytes are held once, never copied into a second.
    it("holds a large capture once: peak memory grows by the bytes, not by twice them", function()
      if S.PRELOAD ~= "" then
        -- pending, not run: the figure would be ASan's, not ours
        pending("make check: ASan's realloc copies the buffer at every growth, so the peak is 1.5x the bytes "
          .. "whatever the result does")
        return
      end
      local bytes = 64 << 20
      local code = string.format([[
        local c = require("hcp.core")
        local function kb(field)
          for l in io.lines("/proc/self/status") do
            local v = l:match("^" .. field .. ":%%s+(%%d+)")
            if v then return tonumber(v) end
          end
        end
        collectgarbage()
        local before = kb("VmRSS")
        local p = assert(c.spawn({ path = "/usr/bin/head", argv = { "head", "-c", "%d", "/dev/zero" },
          env = {}, cwd = "/", max_output = %d }))
        local r = assert(p:wait())
        assert(#r.stdout == %d and r.stdout:sub(-1) == "\0" and not r.stdout_truncated)
        io.write(before, " ", kb("VmHWM"))
      ]], bytes, bytes, bytes)
      local out = S.sh(string.format("LUA_CPATH=%s %s -e %s 2>&1", S.q(S.CPATH), S.LUA, S.q(code)))
      local before, peak = out:match("^(%d+) (%d+)$")
      assert.is_string(before, out)
      local grew = (tonumber(peak) - tonumber(before)) * 1024
      assert.is_true(grew <= 1.1 * bytes, string.format("peak grew by %.2fx the %d bytes captured", grew / bytes, bytes))
    end)

    it("keeps the captured strings whole after the proc is closed and collected", function()
      local p = assert(spawn(sh("seq 1 300000; seq 300000 -1 1 >&2")))
      local r = p:wait()
      p:close()
      p = nil -- luacheck: ignore
      collectgarbage()
      collectgarbage()
      local up, down = {}, {}
      for i = 1, 300000 do up[i], down[i] = i, 300001 - i end
      local want_out, want_err = table.concat(up, "\n") .. "\n", table.concat(down, "\n") .. "\n"
      assert.equal(#want_out, #r.stdout)
      assert.is_true(want_out == r.stdout, "stdout differs")
      assert.is_true(want_err == r.stderr, "stderr differs")
      assert.equal(r.stdout, (r.stdout:gsub("x", "x")))   -- a usable string: hashed, compared, copied
    end)

    it("caps stderr on its own", function()
      local r = run(sh("printf 123456 >&2; printf ok", { max_output = 4 }))
      assert.same("1234", r.stderr)
      assert.is_true(r.stderr_truncated)
      assert.same("ok", r.stdout)
      assert.is_false(r.stdout_truncated)
    end)
  end)

  describe("proc", function()
    it("wait(timeout) returns nil, 'timeout' while running, then the result", function()
      local go = fresh_name("go")
      local p = assert(spawn(sh(until_exists(go) .. "; [ -e " .. S.q(go) .. " ]")))
      assert.same({ nil, "timeout" }, { p:wait(20) })
      assert.is_false(p:done())
      S.write(go, "")
      local r = p:wait()
      assert.same(0, r.exit)   -- it saw the file: it was still running when wait(20) gave up
      assert.is_true(p:done())
    end)

    it("wait returns the same table after completion", function()
      local p = assert(spawn{ argv = { "/bin/echo", "x" } })
      local r1 = p:wait()
      assert.equal(r1, p:wait())
      assert.equal(r1, p:wait(0))
    end)

    it("pid is the child's pid", function()
      local p = assert(spawn(sh("echo $$")))
      assert.same(tostring(p:pid()) .. "\n", p:wait().stdout)
    end)

    it("kill sends a named signal to the group", function()
      -- Two subshells log the TERM they receive; the leader passes no signal
      -- on, and on its own TERM waits for their two lines before dying of
      -- TERM itself (the core ends the rest of the group once it is gone).
      local logfile = fresh_name("log")
      local log = S.q(logfile)
      local member = string.format([[(trap 'echo term >> %s; exit 0' TERM; echo ready >> %s; sleep 120 & wait) & ]],
        log, log)
      local leader = string.format([[trap '%s; trap - TERM; kill -TERM $$' TERM; echo ready >> %s; wait]],
        S.sh_wait("[ $(grep -c term " .. log .. ") -ge 2 ]"), log)
      local p = assert(spawn(sh(member .. member .. leader)))
      local function count(word) return select(2, (S.read(logfile) or ""):gsub(word, "")) end
      assert(S.wait_until(function() return count("ready") == 3 end, 30, "the three traps to be set"))
      assert(S.wait_until(function() return #group_members(p:pid()) >= 5 end, 30,
        "sh, two subshells and their sleeps in the group"))
      assert.is_true(p:kill("TERM"))
      local r = p:wait()
      assert.same(15, r.signal)
      assert.is_false(r.timed_out)
      assert.equal(2, count("term"))
      assert.is_true(group_gone(p:pid()))
    end)

    it("kill accepts SIG-prefixed names and numbers, default KILL", function()
      local p = assert(spawn{ argv = { "/bin/sleep", "30" } })
      assert.is_true(p:kill("SIGINT"))
      assert.same(2, p:wait().signal)
      p = assert(spawn{ argv = { "/bin/sleep", "30" } })
      assert.is_true(p:kill(1))
      assert.same(1, p:wait().signal)
      p = assert(spawn{ argv = { "/bin/sleep", "30" } })
      assert.is_true(p:kill())
      assert.same(9, p:wait().signal)
    end)

    it("kill raises for an unknown signal", function()
      local p <close> = assert(spawn{ argv = { "/bin/sleep", "30" } })
      assert.has_error(function() p:kill("NOPE") end)
      assert.has_error(function() p:kill(1000) end)
    end)

    it("kill after the end reports ESRCH", function()
      local p = assert(spawn{ argv = { "/bin/true" } })
      p:wait()
      assert.same({ nil, "spawn: process already reaped", ESRCH }, { p:kill("TERM") })
    end)

    it("__close kills a running child and its group", function()
      local pid, members
      do
        -- sh, two sleeps, a subshell and its sleep (a grandchild of sh)
        local p <close> = assert(spawn(sh("sleep 120 & sleep 120 & (sleep 120 & wait) & wait")))
        pid = p:pid()
        members = assert(S.wait_until(function()
          local m = group_members(pid)
          return #m >= 5 and m
        end, 30, "five members in the group"))
        local grandchild = false
        for _, m in ipairs(members) do
          local st = stat(m)
          if st and st.ppid ~= pid and m ~= pid then grandchild = true end
        end
        assert.is_true(grandchild, "no member of the group is a grandchild")
      end
      assert.is_true(group_gone(pid))
      for _, m in ipairs(members) do assert.is_false(S.alive(m), "member " .. m .. " survived") end
    end)

    it("__close is idempotent and keeps a finished result", function()
      local p = assert(spawn{ argv = { "/bin/echo", "kept" } })
      local r = p:wait()
      local close = getmetatable(p).__close
      close(p)
      close(p)
      getmetatable(p).__gc(p)
      assert.equal(r, p:wait())
      assert.is_true(p:done())
    end)

    it("wait on a handle closed before the end raises", function()
      local p = assert(spawn{ argv = { "/bin/sleep", "30" } })
      getmetatable(p).__close(p)
      assert.has_error(function() p:wait() end)
      assert.same({ nil, "spawn: process already reaped", ESRCH }, { p:kill() })
    end)
  end)

  describe("wait_any", function()
    it("returns the one of concurrent procs that ended first, and only it", function()
      -- each child ends when its file appears; the spec decides the order
      local fa, fb, fc = fresh_name("a"), fresh_name("b"), fresh_name("c")
      local a = assert(spawn(sh(until_exists(fa))))
      local b = assert(spawn(sh(until_exists(fb))))
      local c = assert(spawn(sh(until_exists(fc))))
      assert.same({}, core.wait_any({ a, b, c }, 50))
      S.write(fb, "")
      local first = core.wait_any({ a, b, c })
      assert.same(1, #first)
      assert.equal(b, first[1])
      assert.is_true(b:done())
      assert.is_false(a:done())
      S.write(fc, "")
      local rest = core.wait_any({ a, c })
      assert.equal(c, rest[1])
      assert.same(1, #rest)
      S.write(fa, "")
      assert.equal(a, core.wait_any({ a })[1])
    end)

    it("drives concurrent procs in one loop", function()
      -- a barrier: each child marks its arrival and waits for all three, so
      -- each prints 3 only if the three ran at the same time
      local dir = S.tmpdir("barrier-")
      local script = string.format("touch %s/$$; %s; ls %s | wc -l", S.q(dir),
        S.sh_wait("[ $(ls " .. S.q(dir) .. " | wc -l) -ge 3 ]"), S.q(dir))
      local pending = {}
      for i = 1, 3 do pending[i] = assert(spawn(sh(script))) end
      local all = { table.unpack(pending) }
      local finished = 0
      while #pending > 0 do
        local returned = {}
        for _, p in ipairs(core.wait_any(pending)) do returned[p] = true end
        local still = {}
        for _, p in ipairs(pending) do
          if returned[p] then finished = finished + 1 else still[#still + 1] = p end
        end
        pending = still
      end
      assert.same(3, finished)
      for _, p in ipairs(all) do assert.equal("3", (p:wait().stdout:gsub("%s+", ""))) end
    end)

    it("drives the output of every proc while waiting", function()
      local a = assert(spawn(sh("yes a | head -c 3000000")))
      local b = assert(spawn(sh("yes b | head -c 3000000")))
      local left = { a, b }
      while #left > 0 do
        core.wait_any(left)
        local still = {}
        for _, p in ipairs(left) do if not p:done() then still[#still + 1] = p end end
        left = still
      end
      assert.same(3000000, #a:wait().stdout)
      assert.same(3000000, #b:wait().stdout)
    end)

    it("returns an empty array when timeout_ms runs out", function()
      local p <close> = assert(spawn{ argv = { "/bin/sleep", "30" } })
      assert.same({}, core.wait_any({ p }, 20))
    end)

    it("returns an empty array for no procs", function()
      assert.same({}, core.wait_any({}))
    end)

    it("raises for something that is not a proc", function()
      assert.has_error(function() core.wait_any({ {} }) end)
    end)
  end)

  describe("resources", function()
    -- Counted in-process (a popen'ed ls would see popen's pipe end too,
    -- some of the time), once the worker of the call directories is idle.
    local open_fds = S.open_fds

    it("leaks no descriptor on any path", function()
      collectgarbage()
      local before = open_fds()
      for _ = 1, 5 do
        run{ argv = { "/bin/cat" }, stdin = "x" }
        run(sh("sleep 30 & echo hi"))
        spawn{ argv = { "/bin/pwd" }, cwd = "/nonexistent-hcp-dir" }
        spawn{ argv = { "/tmp" } }
        spawn{ argv = { "/bin/echo", "a\0b" } }
        pcall(spawn, { argv = { "/bin/echo" }, env = { A = 1 } })
        do   -- abandoned while running: __gc cleans up
          local p = spawn{ argv = { "/bin/sleep", "30" }, stdin = string.rep("x", 1 << 20) }
          assert.same({ nil, "timeout" }, { p:wait(5) })
        end
        local q <close> = spawn(sh("yes"))
        core.wait_any({ q }, 5)
      end
      collectgarbage()
      collectgarbage()
      assert.same(before, open_fds())
    end)
  end)

  describe("signame", function()
    it("names the common signals", function()
      assert.same("SIGKILL", core.signame(9))
      assert.same("SIGTERM", core.signame(15))
      assert.same("SIGHUP", core.signame(1))
      assert.same("SIGCHLD", core.signame(17))
    end)

    it("falls back to SIG<n>", function()
      assert.same("SIG99", core.signame(99))
    end)
  end)
end)
