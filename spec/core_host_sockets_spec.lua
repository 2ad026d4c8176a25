-- spec/core_host_sockets_spec.lua — core.host_sockets (src/hostsock.c):
-- the host's listening pathname unix sockets that a view would have to
-- cover, by their real paths. What a view does with them is attacked in
-- spec/view_spec.lua (under both drivers) and spec/unit/view_hidden_sockets_spec.lua.
local core = require("hcp.core")
local S = require("support")

local q = S.q

-- A listening socket bound at `path` (as given: through a link, say), in a
-- process of its own; stopped when the case ends.
local function listen_at(path)
  local py = "import socket,sys,time\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen(1)\n"
    .. "print('up',flush=True)\ntime.sleep(60)\n"
  local p = assert(core.spawn({ path = "/usr/bin/python3", argv = { "python3", "-c", py, path }, env = {}, cwd = "/",
    capture = false }))
  finally(function() p:kill("KILL") p:wait() end)
  assert(S.wait_until(function() return core.filetype(path) == "socket" end, 10, "a socket at " .. path))
  return p
end

local function has(list, p)
  for _, x in ipairs(list) do if x == p then return true end end
  return false
end

describe("core.host_sockets", function()
  it("lists a listening socket by its real path, bound through a linked directory", function()
    local dir = S.tmpdir("hs-")
    assert(os.execute("mkdir " .. q(dir .. "/real") .. " && ln -s real " .. q(dir .. "/lnk")))
    listen_at(dir .. "/lnk/s.sock")
    local real = core.realpath(dir .. "/real/s.sock")
    assert.is_true(has(core.host_sockets(), real), real)
    assert.is_false(has(core.host_sockets(), dir .. "/lnk/s.sock"))
  end)

  it("lists a path once, though each accepted connection shows it again in /proc/net/unix", function()
    local dir = S.tmpdir("hs-")
    local path = dir .. "/srv.sock"
    local py = "import socket,sys,time\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen(8)\n"
      .. "cs=[socket.socket(socket.AF_UNIX) for _ in range(3)]\n[c.connect(sys.argv[1]) for c in cs]\n"
      .. "a=[s.accept()[0] for _ in range(3)]\nopen(sys.argv[1]+'.up','w').close()\ntime.sleep(60)\n"
    local p = assert(core.spawn({ path = "/usr/bin/python3", argv = { "python3", "-c", py, path }, env = {}, cwd = "/",
      capture = false }))
    finally(function() p:kill("KILL") p:wait() end)
    assert(S.wait_until(function() return core.filetype(path .. ".up") == "file" end, 10, "the server's connections"))
    local real, lines = core.realpath(path), 0
    for line in io.lines("/proc/net/unix") do
      if line:sub(-#real - 1) == " " .. real then lines = lines + 1 end
    end
    assert.is_true(lines >= 4, "lines naming it: " .. lines) -- the case means something
    local n = 0
    for _, x in ipairs(core.host_sockets()) do if x == real then n = n + 1 end end
    assert.equal(1, n)
  end)

  it("with `within`, lists only the sockets strictly inside one of those directories", function()
    local dir = core.realpath(S.tmpdir("hs-"))
    assert(os.execute("mkdir " .. S.q(dir .. "/in") .. " " .. S.q(dir .. "/inx")))
    listen_at(dir .. "/in/a.sock")
    listen_at(dir .. "/inx/b.sock") -- a look-alike of "in"
    listen_at(dir .. "/c.sock")     -- above it
    local l = core.host_sockets({ dir .. "/in" })
    assert.is_true(has(l, dir .. "/in/a.sock"))
    assert.is_false(has(l, dir .. "/inx/b.sock"))
    assert.is_false(has(l, dir .. "/c.sock"))
    assert.same({}, core.host_sockets({ dir .. "/in/a.sock" })) -- a path is not inside itself
    assert.is_true(has(core.host_sockets({ dir }), dir .. "/inx/b.sock"))
    assert.has_error(function() core.host_sockets({ "relative" }) end)
  end)

  it("leaves out a name that is no longer a socket (removed, or replaced by a file)", function()
    local dir = S.tmpdir("hs-")
    listen_at(dir .. "/a.sock")
    listen_at(dir .. "/b.sock")
    local a, b = core.realpath(dir .. "/a.sock"), core.realpath(dir .. "/b.sock")
    assert.is_true(has(core.host_sockets(), a))
    assert(os.remove(a))
    assert(os.remove(b)) -- both still bound and listening: only their names are gone
    S.write(b, "now a file\n")
    local l = core.host_sockets()
    assert.is_false(has(l, a))
    assert.is_false(has(l, b))
  end)
end)
