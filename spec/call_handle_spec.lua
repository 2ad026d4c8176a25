-- The call handle (rt:start) and the runtime's loop (rt:step, rt:pollfd,
-- rt:call_all): every method, every callback, and the event loops a Lua
-- agent would drive it from. Nothing here is timed: each spec observes
-- what happened (markers the children leave, callbacks that ran).
local hcp = require("hcp")
local core = require("hcp.core")
local S = require("support")

local function sh_pack(name, script, extra)
  return S.pack(S.manifest(name, "sh", { wrap = { args = { "-c", script, name }, timeout_ms = 60000 } }), extra)
end

-- Poll `fn` until it returns true (at most `limit` seconds).
local function eventually(fn, limit)
  local deadline = core.monotonic_us() + (limit or 20) * 1e6
  while core.monotonic_us() < deadline do
    if fn() then return true end
    os.execute("sleep 0.01")
  end
  return fn()
end

local function runtime(root, extra)
  local opts = { pack_dirs = { root } }
  for k, v in pairs(extra or {}) do opts[k] = v end
  return assert(hcp.create(opts))
end

describe("rt:start handle", function()
  local packs = S.tmpdir("handle-packs-")
  sh_pack("sleeper", 'echo ready; exec sleep 30', packs)
  sh_pack("echo", 'printf "%s" "$1"', packs)
  sh_pack("twice", 'echo first; while [ ! -e "$1" ]; do sleep 0.01; done; echo second', packs)
  local rt = runtime(packs, { isolation = "minimal" })

  it("wait() returns the result; done(), result(), status() and pid() follow the call", function()
    local h = rt:start({ pack = "sleeper" })
    assert.equal("running", h:status())
    assert.equal("integer", math.type(h:pid()))
    assert.is_true(S.alive(h:pid()))
    assert.is_false(h:done())
    assert.is_nil(h:result())
    assert.is_true(h:kill("TERM"))
    local res = h:wait()
    assert.equal("SIGTERM", res.signal)
    assert.equal(res, h:result())
    assert.is_true(h:done())
    assert.equal("done", h:status())
    assert.is_nil(h:pid())
    assert.same({ nil, "spawn: the call has finished" }, { h:kill() })
  end)

  it("wait(0.05) on a long call returns nil, \"timeout\" and leaves it running", function()
    local h = rt:start({ pack = "sleeper" })
    local res, why = h:wait(0.05)
    assert.is_nil(res)
    assert.equal("timeout", why)
    assert.is_true(S.alive(h:pid()))
    h:kill()
    assert.equal("SIGKILL", h:wait().signal)
  end)

  it("streams output to on_stdout as the child writes it, before the child ends", function()
    local go = S.tmpdir("go-") .. "/go"
    local chunks = {}
    local h = rt:start({ pack = "twice", args = { go } }, { on_stdout = function(c)
      chunks[#chunks + 1] = c
      -- the child waits for this file: only output that arrives while it
      -- runs can release it
      if c:find("first", 1, true) then S.write(go, "") end
    end })
    local res = h:wait(30)
    assert.is_true(res.ok, res.error)
    assert.equal("first\nsecond\n", table.concat(chunks))
    assert.equal("first\nsecond\n", res.stdout)
  end)

  it("a call killed from its own on_stdout callback ends at once, its process gone", function()
    local pid
    local h
    h = rt:start({ pack = "sleeper" }, { on_stdout = function(c)
      if c:find("ready", 1, true) then pid = h:pid(); h:kill("KILL") end
    end })
    local res = h:wait(30)
    assert.equal("SIGKILL", res.signal)
    assert.equal("integer", math.type(pid))
    assert.is_true(eventually(function() return not S.alive(pid) end))
  end)

  it("streams under the bwrap driver too (the spawn options reach bubblewrap's child)", function()
    local ok_bw, r2 = pcall(runtime, packs, { driver = "bwrap" })
    if not ok_bw then pending("bwrap cannot run here: " .. tostring(r2)) return end
    local chunks, h = {}, nil
    -- the child prints, then sleeps: only output that arrives while it runs
    -- can kill it before its 30 s are up
    h = r2:start({ pack = "sleeper" }, { capture = false, on_stdout = function(c)
      chunks[#chunks + 1] = c
      h:kill("KILL")
    end })
    local res = h:wait(30)
    assert.equal("ready\n", table.concat(chunks))
    assert.equal("SIGKILL", res.signal)
    assert.equal("", res.stdout)
  end)

  it("on_stderr gets the error stream; capture = false keeps no output in the result", function()
    local root = sh_pack("both", 'echo out; echo err >&2')
    local r2 = runtime(root, { isolation = "minimal" })
    local out, err = {}, {}
    local res = r2:call({ pack = "both" }, { capture = false,
      on_stdout = function(c) out[#out + 1] = c end, on_stderr = function(c) err[#err + 1] = c end })
    assert.is_true(res.ok, res.error)
    assert.equal("out\n", table.concat(out))
    assert.equal("err\n", table.concat(err))
    assert.equal("", res.stdout)
    assert.equal("", res.stderr)
  end)

  it("on_exit is called once with the result, for refusals and mocks too", function()
    local seen = {}
    local function note(r) seen[#seen + 1] = r end
    local h1 = rt:start({ pack = "echo", args = { "x" } }, { on_exit = note })
    local h2 = rt:start({ pack = "nope" }, { on_exit = note })
    local h3 = rt:start({ pack = "echo", mode = "mock" }, { on_exit = note })
    assert.equal("x", h1:wait().stdout)
    h2:wait()
    h3:wait()
    h1:wait()
    assert.equal(3, #seen)
    local errors = {}
    for _, r in ipairs(seen) do errors[#errors + 1] = r.error or "" end
    table.sort(errors)
    assert.same({ "", 'envelope: no pack named "nope"', 'mock: no fixture for "echo.exec"' }, errors)
  end)

  it("an error raised by a callback reaches the caller of wait, and the call still completes", function()
    local h = rt:start({ pack = "echo", args = { "boom" } }, { on_stdout = function() error("callback failed", 0) end })
    local ok, err = pcall(h.wait, h)
    assert.is_false(ok)
    assert.equal("callback failed", err)
    assert.equal("boom", h:wait().stdout)
  end)

  it("a dropped handle whose call reports to on_exit is kept by the runtime until it has reported", function()
    local seen
    rt:start({ pack = "echo", args = { "kept" } }, { on_exit = function(r) seen = r end })
    collectgarbage()
    collectgarbage()
    local steps = 0
    while not seen and steps < 10000 do rt:step(1); steps = steps + 1 end
    assert.equal("kept", seen and seen.stdout)
  end)

  it("<close> kills the call's child; so does collecting an unfinished handle nobody listens to", function()
    local pid
    do
      local h <close> = rt:start({ pack = "sleeper" })
      pid = h:pid()
      assert.is_true(S.alive(pid))
    end
    assert.is_true(eventually(function() return not S.alive(pid) end))
    local h = rt:start({ pack = "sleeper" })
    pid = h:pid()
    h = nil -- luacheck: ignore 311
    collectgarbage()
    collectgarbage()
    assert.is_true(eventually(function() return not S.alive(pid) end))
  end)

  it("rt:close() kills what runs and finishes its handles", function()
    local r2 = runtime(packs, { isolation = "minimal" })
    local h = r2:start({ pack = "sleeper" })
    local pid = h:pid()
    r2:close()
    assert.equal("SIGKILL", h:result().signal)
    assert.is_true(eventually(function() return not S.alive(pid) end))
    assert.equal("spawn: runtime is closed", r2:start({ pack = "echo" }):wait().error)
  end)
end)

describe("request timeout_ms", function()
  local root = S.pack(S.manifest("nap", "sleep", { wrap = { timeout_ms = 20000 } }))

  it("ends a call at the request's own timeout", function()
    local rt = runtime(root, { isolation = "minimal" })
    local res = rt:call({ pack = "nap", args = { "30" }, timeout_ms = 200 })
    assert.is_true(res.timed_out)
    assert.equal("exit: timed out after 200 ms", res.error)
  end)

  it("refuses more than the pack's wrap.timeout_ms unless the operator allows it", function()
    local rt = runtime(root, { isolation = "minimal" })
    local res = rt:call({ pack = "nap", args = { "0" }, timeout_ms = 20001 })
    assert.equal(126, res.exit)
    assert.equal('envelope: field "timeout_ms" is 20001, more than the 20000 ms this pack allows', res.error)
    rt = runtime(root, { isolation = "minimal", max_timeout_ms = 60000 })
    assert.is_true(rt:call({ pack = "nap", args = { "0" }, timeout_ms = 60000 }).ok)
    assert.matches("must be a positive integer", rt:call({ pack = "nap", timeout_ms = 1.5 }).error)
    assert.matches("must be a positive integer", rt:call({ pack = "nap", timeout_ms = "1" }).error)
  end)
end)

describe("result usage", function()
  it("reports CPU time, peak RSS and bytes written where the kernel has them, and wall time", function()
    local root = sh_pack("work", 'head -c 300000 /dev/zero | tr "\\0" a > /dev/null; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done')
    local res = runtime(root):call({ pack = "work" })
    assert.is_true(res.ok, res.error)
    local u = res.usage
    assert.is_number(u.wall_ms)
    assert.equal(res.ms, u.wall_ms)
    assert.is_number(u.user_ms)
    assert.is_true(u.user_ms + u.sys_ms > 0, "a busy loop costs CPU time")
    assert.is_true(u.max_rss_kb > 0)
    if u.write_bytes then assert.is_true(u.write_bytes >= 300000, tostring(u.write_bytes)) end
  end)
end)

describe("rt:step and rt:pollfd", function()
  local shared = S.tmpdir("barrier-")
  -- each child waits until all 8 have started: only 8 calls in flight at
  -- once can finish
  local root = sh_pack("barrier", 'touch "$1/$2"; while [ "$(ls "$1" | wc -l)" -lt 8 ]; do sleep 0.01; done; echo "$2"')

  local function start_eight(rt, done)
    local dir = S.tmpdir("b-", shared)
    for i = 1, 8 do
      rt:start({ pack = "barrier", args = { dir, tostring(i) } }, { on_exit = function(r) done[#done + 1] = r end })
    end
  end

  it("a plain loop of step() drives 8 concurrent calls to completion", function()
    local rt = runtime(root, { isolation = "minimal" })
    local done, steps = {}, 0
    start_eight(rt, done)
    while #done < 8 and steps < 100000 do
      rt:step(1)
      steps = steps + 1
    end
    assert.equal(8, #done)
    for _, r in ipairs(done) do assert.is_true(r.ok, r.error) end
  end)

  it("drives 8 calls from a luv event loop through uv.new_poll(rt:pollfd())", function()
    local ok_uv, uv = pcall(require, "luv")
    if not ok_uv then pending("luv is not installed (Debian lua-luv)") return end
    local rt = runtime(root, { isolation = "minimal" })
    local done = {}
    start_eight(rt, done)
    local poll = uv.new_poll(rt:pollfd())
    local guard = uv.new_timer()
    guard:start(30000, 0, function() uv.stop() end)
    poll:start("r", function()
      rt:step(0)
      if #done == 8 then poll:stop() guard:stop() end
    end)
    uv.run()
    poll:close()
    guard:close()
    uv.run("nowait")
    assert.equal(8, #done)
    for _, r in ipairs(done) do assert.is_true(r.ok, r.error) end
  end)

  it("drives 8 calls from cqueues, polling rt:pollfd()", function()
    local ok_cq, cqueues = pcall(require, "cqueues")
    if not ok_cq then pending("cqueues is not installed (Debian lua-cqueues)") return end
    local rt = runtime(root, { isolation = "minimal" })
    local done = {}
    start_eight(rt, done)
    local pollable = { pollfd = function() return rt:pollfd() end, events = function() return "r" end }
    local cq = cqueues.new()
    cq:wrap(function()
      local rounds = 0
      while #done < 8 and rounds < 100000 do
        cqueues.poll(pollable, 1)
        rt:step(0)
        rounds = rounds + 1
      end
    end)
    assert(cq:loop())
    assert.equal(8, #done)
  end)
end)

describe("rt:call_all", function()
  it("keeps results in order", function()
    local root = sh_pack("echo", 'printf "%s" "$1"')
    local rt = runtime(root, { isolation = "minimal" })
    local list = {}
    for i = 1, 5 do list[i] = { pack = "echo", args = { "r" .. i } } end
    list[6] = { pack = "missing" }
    local results = rt:call_all(list, { concurrency = 2 })
    for i = 1, 5 do assert.equal("r" .. i, results[i].stdout) end
    assert.equal('envelope: no pack named "missing"', results[6].error)
  end)

  it("honours { concurrency = N }: never more than N children, and N reached", function()
    -- each child logs its start, records how many have started and not
    -- ended, then waits for a partner (or 10 s) before it ends: with a bound
    -- of 2 every child sees exactly 2; without one, more
    local log = S.tmpdir("conc-") .. "/log"
    S.write(log, "")
    local root = sh_pack("conc", [[
      echo S >> "$1"
      n=$(( $(grep -c S "$1") - $(grep -c E "$1") )); echo "N $n" >> "$1"
      i=0; while [ $(( $(grep -c S "$1") - $(grep -c E "$1") )) -lt 2 ] && [ $(grep -c S "$1") -lt 6 ] && [ $i -lt 1000 ]; do
        sleep 0.01; i=$((i+1)); done
      echo E >> "$1"]])
    local rt = runtime(root, { isolation = "minimal" })
    local list = {}
    for i = 1, 6 do list[i] = { pack = "conc", args = { log } } end
    for _, r in ipairs(rt:call_all(list, { concurrency = 2 })) do assert.is_true(r.ok, r.error) end
    local max = 0
    for n in S.read(log):gmatch("N (%d+)") do max = math.max(max, tonumber(n)) end
    assert.equal(2, max)
  end)

  it("refuses a concurrency that is not a positive integer", function()
    local rt = runtime((S.pack(S.manifest("t", "true"))))
    assert.has_error(function() rt:call_all({}, { concurrency = 0 }) end, "call_all: concurrency must be a positive integer")
  end)
end)

describe("workspace calls of one runtime", function()
  it("run one after the other: the second waits, queued, until the first is done", function()
    local go = S.tmpdir("ws-go-") .. "/go"
    local root = S.pack(S.manifest("ws", "sh", { wrap = { args = { "-c",
      'echo "$1" >> log; while [ "$1" = first ] && [ ! -e "$2" ]; do sleep 0.01; done', "sh" },
      workspace = { mode = "workspace" }, timeout_ms = 60000 } }))
    local rt = runtime(root, { isolation = "minimal", state_dir = S.tmpdir("ws-state-") })
    local h1 = rt:start({ pack = "ws", args = { "first", go } })
    local h2 = rt:start({ pack = "ws", args = { "second", go } })
    assert.equal("running", h1:status())
    assert.equal("queued", h2:status())
    assert.is_nil(h2:pid())
    S.write(go, "")
    assert.is_true(h1:wait(30).ok)
    assert.is_true(h2:wait(30).ok)
    local h3 = rt:start({ pack = "ws", args = { "first", go .. "-never" } })
    local h4 = rt:start({ pack = "ws", args = { "third", go } })
    assert.equal("queued", h4:status())
    assert.is_true(h4:kill())
    assert.equal("spawn: call killed before it started", h4:wait().error)
    h3:kill()
    h3:wait()
  end)
end)
