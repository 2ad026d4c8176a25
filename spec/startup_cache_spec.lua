-- spec/startup_cache_spec.lua — what `hcp run` no longer redoes at every
-- start (issue 12): core.probe()'s answer, kept per boot (src/probe_cache.c),
-- and hcp's Lua modules, compiled once (src/luac_cache.c). Both live in a
-- directory only the runtime's uid may write (here HCP_RUNTIME_DIR, a fresh
-- one per case) and are trusted only from files that are ours alone.
local core = require("hcp.core")
local S = require("spec.support")

local HCP = S.HCP
local q = S.q

-- A process with the C module from build/, in `dir` as its runtime dir.
local function lua_in(dir, code, env)
  local script = S.write(S.tmpdir("sc-") .. "/run.lua", code)
  return S.sh(string.format("env HCP_RUNTIME_DIR=%s %s LUA_CPATH=%s %s %s 2>&1", q(dir), env or "",
    q(S.CPATH_ABS .. ";;"), q(S.LUA), q(script)))
end

local SOURCE = [[local c = require("hcp.core"); local p = c.probe()
  io.write(c.probe_source(), " abi=", p.landlock.abi, " pidns=", tostring(p.pidns.available))]]

local function private_dir()
  local d = S.tmpdir("rt-")
  assert(os.execute("chmod 700 " .. q(d)))
  return d
end

local function cache_files(dir, pattern)
  local out = {}
  for _, n in ipairs(core.listdir(dir) or {}) do
    if n:match(pattern) then out[#out + 1] = dir .. "/" .. n end
  end
  return out
end

describe("the probe cache", function()
  it("the first process probes and keeps the answer; the next one reads the same answer back", function()
    local dir = private_dir()
    local first = lua_in(dir, SOURCE)
    local second = lua_in(dir, SOURCE)
    assert.matches("^probed, cached ", first)
    assert.matches("^cache ", second)
    assert.equals(first:gsub("^probed, cached", ""), second:gsub("^cache", ""))
    local files = cache_files(dir, "^probe%-")
    assert.equals(1, #files)
    assert.equals("file", core.filetype(files[1]))
    assert.matches("^%-rw%-%-%-%-%-%-%- ", S.sh("ls -l " .. q(files[1])))
  end)

  it("is not trusted from a file others may read or write, nor from one with another key: it probes again", function()
    local dir = private_dir()
    lua_in(dir, SOURCE)
    local file = cache_files(dir, "^probe%-")[1]
    assert(os.execute("chmod 644 " .. q(file)))
    assert.matches("^probed, cached ", lua_in(dir, SOURCE))
    assert.matches("^cache ", lua_in(dir, SOURCE))
    -- the same name, another content: a key that does not match is no answer
    local data = S.read(file)
    S.write(file, "hcp-probe forged" .. data:sub(17))
    assert(os.execute("chmod 600 " .. q(file)))
    assert.matches("^probed, cached ", lua_in(dir, SOURCE))
  end)

  -- src/isolation_probe.c: a cached answer may claim more than the host has
  -- (the spawn fails closed), never less: a forged "unavailable" must not
  -- switch a layer off for "auto"
  it("is never believed when it calls a layer unavailable: that layer is probed again", function()
    if not core.probe().pidns.available then pending("this host has no pid namespaces to forge away") return end
    local dir = private_dir()
    lua_in(dir, SOURCE)
    local file = cache_files(dir, "^probe%-")[1]
    local data = S.read(file)
    local blob = data:find("\n", 1, true) + 1
    -- the blob: int done, then per layer { int ok; char why[512]; char note[512] };
    -- pidns is the fourth layer (P_PIDNS = 3)
    local at = blob + 4 + 3 * 1028
    assert.equals("\1\0\0\0", data:sub(at, at + 3), "pidns is marked available in the real answer")
    S.write(file, data:sub(1, at - 1) .. "\0\0\0\0" .. data:sub(at + 4))
    assert(os.execute("chmod 600 " .. q(file)))
    assert.matches("^cache .* pidns=true$", lua_in(dir, SOURCE))
  end)

  it("is not kept in a directory others may write; nor with HCP_PROBE_CACHE=0", function()
    local dir = S.tmpdir("rt-open-")
    assert(os.execute("chmod 777 " .. q(dir)))
    assert.matches("^probed ", lua_in(dir, SOURCE))
    assert.same({}, cache_files(dir, "^probe%-"))
    local mine = private_dir()
    assert.matches("^probed ", lua_in(mine, SOURCE, "HCP_PROBE_CACHE=0"))
    assert.same({}, cache_files(mine, "^probe%-"))
  end)

  it("a Landlock ABI other than the one it holds probes again (checked at every start)", function()
    -- under a filter that answers ENOSYS to Landlock, the cached ABI no longer holds
    local nolandlock = assert(S.cc("nolandlock", S.NOLANDLOCK_C))
    local dir = private_dir()
    local plain = lua_in(dir, SOURCE)
    if plain:match("abi=0") then pending("no Landlock on this host") return end
    local script = S.write(S.tmpdir("sc-") .. "/run.lua", SOURCE)
    local out = S.sh(string.format("env HCP_RUNTIME_DIR=%s LUA_CPATH=%s %s %s %s 2>&1", q(dir),
      q(S.CPATH_ABS .. ";;"), q(nolandlock), q(S.LUA), q(script)))
    assert.matches("abi=0", out)
    assert.not_matches("^cache", out)
  end)
end)

describe("the compiled-module cache of hcp", function()
  -- `hcp args` (or another hcp: exe) with `dir` as its runtime directory
  local function hcp_in(dir, args, env, exe)
    return S.sh(string.format("env HCP_RUNTIME_DIR=%s %s %s %s 2>&1", q(dir), env or "", q(exe or HCP), args))
  end

  -- The cache file compiled from hcp/json.lua, its chunk, and the source's path.
  local function json_cache(dir)
    for _, f in ipairs(cache_files(dir .. "/luac", "%.luac$")) do
      local chunk = assert(load(S.read(f), "=cache", "b"))
      local from = debug.getinfo(chunk, "S").source
      if from:match("/hcp/json%.lua$") then return f, chunk, from:sub(2) end
    end
  end

  it("hcp compiles its modules once, into files that are ours alone, and runs the same from them", function()
    local dir = private_dir()
    local first, c1 = hcp_in(dir, "--version")
    local files = cache_files(dir .. "/luac", "%.luac$")
    assert.is_true(#files >= 5, #files .. " files")
    for _, f in ipairs(files) do assert.matches("^%-rw%-%-%-%-%-%-%- ", S.sh("ls -l " .. q(f))) end
    local second, c2 = hcp_in(dir, "--version")
    assert.equals(first, second)
    assert.equals(0, c1)
    assert.equals(0, c2)
  end)

  it("keeps each module's source name and lines, and drops only the names of its locals", function()
    local dir = private_dir()
    hcp_in(dir, "--version")
    local file, chunk, from = json_cache(dir)
    assert.is_string(file, "hcp/json.lua is among the files")
    local cached, source = chunk(), assert(loadfile(from))()
    for _, name in ipairs({ "array", "is_utf8", "sanitize", "base64" }) do
      local a, b = debug.getinfo(cached[name], "S"), debug.getinfo(source[name], "S")
      assert.equals(b.source, a.source)
      assert.equals(b.linedefined, a.linedefined)
      assert.equals(b.lastlinedefined, a.lastlinedefined)
      assert.is_string(debug.getlocal(source[name], 1))
      assert.is_nil(debug.getlocal(cached[name], 1), name .. "'s parameter still has its name")
    end
    -- and it works the same
    assert.equals(source.base64("hcp-lua"), cached.base64("hcp-lua"))
    assert.same(source.sanitize("a\0b"), cached.sanitize("a\0b"))
  end)

  -- An install tree of our own (hcp-lua and a copy of hcp's modules), so
  -- that a case may change a module's file.
  local function tree()
    local prefix = S.tmpdir("tree-")
    assert(os.execute(string.format("mkdir -p %s/bin %s/share/lua/5.4 && cp %s %s/bin/hcp-lua && "
      .. "ln -s hcp-lua %s/bin/hcp && cp -r %s %s/share/lua/5.4/hcp", q(prefix), q(prefix), q(S.HCP_LUA), q(prefix),
      q(prefix), q(S.REPO .. "/lua/hcp"), q(prefix))))
    return prefix, prefix .. "/share/lua/5.4/hcp/json.lua"
  end
  local function tree_hcp(prefix, dir, env)
    return hcp_in(dir, "--version", env, prefix .. "/bin/hcp")
  end

  it("compiles a source again after its mode changed: its change time is in the cache file's name", function()
    local prefix, json = tree()
    local dir = private_dir()
    local out, code = tree_hcp(prefix, dir)
    assert.equals(0, code, out)
    local before = assert(json_cache(dir))
    local n = #cache_files(dir .. "/luac", "%.luac$")
    assert(os.execute("chmod 600 " .. q(json)))
    out, code = tree_hcp(prefix, dir)
    assert.equals(0, code, out)
    local after = assert(json_cache(dir))
    assert.are_not.equals(before, after)
    assert.is_nil(core.kind(before), "the file of the source's earlier state was left")
    assert.equals(n, #cache_files(dir .. "/luac", "%.luac$"))
  end)

  it("skips a source it cannot read, as Lua's own searcher does, though the cache has its chunk", function()
    if core.geteuid() == 0 then pending("needs a user who is not root: root reads a file of mode 000") return end
    local prefix, json = tree()
    local dir = private_dir()
    tree_hcp(prefix, dir)
    assert.is_string(json_cache(dir))
    -- the next template on package.path has a json.lua that says so
    local later = S.tmpdir("later-")
    assert(os.execute("mkdir -p " .. q(later .. "/hcp")))
    S.write(later .. "/hcp/json.lua", "io.stderr:write('the later json.lua\\n')\n" .. S.read(json))
    assert(os.execute("chmod 000 " .. q(json)))
    local out, code = tree_hcp(prefix, dir, "LUA_PATH=" .. q(later .. "/?.lua;;"))
    assert(os.execute("chmod 644 " .. q(json)))
    assert.equals(0, code, out)
    assert.matches("^the later json.lua\nhcp %(hcp%-lua%)", out)
  end)

  it("a cache file that is damaged, or not ours alone, is not loaded: the source is", function()
    local dir = private_dir()
    local want = hcp_in(dir, "--version")
    local files = cache_files(dir .. "/luac", "%.luac$")
    for i, f in ipairs(files) do
      if i % 2 == 0 then
        S.write(f, "\27Lua garbage")
        assert(os.execute("chmod 600 " .. q(f)))
      else
        S.write(f, "error('loaded a file others may write')")
        assert(os.execute("chmod 666 " .. q(f)))
      end
    end
    local out, code = hcp_in(dir, "--version")
    assert.equals(0, code, out)
    assert.equals(want, out)
  end)

  it("keeps one file per source: compiling a changed source removes what its earlier versions left", function()
    local dir = private_dir()
    hcp_in(dir, "--version")
    local files = cache_files(dir .. "/luac", "%.luac$")
    table.sort(files)
    local victim = files[1]
    local prefix = victim:match("([^/]+)$"):sub(1, 17)
    -- what an earlier version of the same source left (another inode, size, mtime)
    local stale = dir .. "/luac/" .. prefix .. "1-2-3.4.luac"
    S.write(stale, S.read(victim))
    assert(os.execute("chmod 600 " .. q(stale)))
    -- a file of another source stays
    local other = files[2]
    os.remove(victim) -- the source is compiled again, as after an edit
    local out, code = hcp_in(dir, "--version")
    assert.equals(0, code, out)
    assert.is_nil(core.kind(stale), "a file of an earlier version was left")
    assert.equals("file", core.filetype(victim))
    assert.equals("file", core.filetype(other))
    assert.equals(#files, #cache_files(dir .. "/luac", "%.luac$"))
  end)

  it("is not used with HCP_LUAC_CACHE=0, nor in a directory others may write", function()
    local dir = private_dir()
    hcp_in(dir, "--version", "HCP_LUAC_CACHE=0")
    assert.is_nil(core.kind(dir .. "/luac"))
    local open = S.tmpdir("rt-open-")
    assert(os.execute("chmod 777 " .. q(open)))
    local out, code = hcp_in(open, "--version")
    assert.equals(0, code, out)
    assert.same({}, cache_files(open .. "/luac", "%.luac$"))
  end)
end)
