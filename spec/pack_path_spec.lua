-- Where packs come from when nobody names them: hcp.create() without
-- pack_dirs reads $HCP_PACK_PATH as the commands do (but never ./packs: a
-- library does not look in the cwd), and the hcp-lua REPL says where it
-- looked when it found no packs.
local S = require("support")
local q = S.q

-- A fresh lua5.4 running `code` in `cwd` with `env` (a shell prefix).
local function lua_child(env, cwd, code)
  local script = S.write(S.tmpdir("lua-") .. "/t.lua", code)
  local paths = string.format("package.path=%q..package.path; package.cpath=%q..package.cpath",
    S.REPO .. "/lua/?.lua;" .. S.REPO .. "/lua/?/init.lua;", S.REPO .. "/" .. S.CPATH .. ";")
  return S.sh(string.format("cd %s && env -u HCP_PACK_PATH -u HCP_CONFIG %s %s -e %s %s 2>&1", q(cwd), env, S.LUA,
    q(paths), q(script)))
end

local COUNT = 'local rt = assert(require("hcp").create(%s)); local n = {}; '
  .. 'for _, p in ipairs(rt:packs()) do n[#n + 1] = p.name end; print(table.concat(n, ","))'

describe("hcp.create and $HCP_PACK_PATH", function()
  local a, b
  setup(function()
    a = S.tmpdir("pp-a-")
    b = S.tmpdir("pp-b-")
    S.pack(S.manifest("one", "/bin/echo"), a)
    S.pack(S.manifest("two", "/bin/echo"), b)
    S.pack(S.manifest("cwdpack", "/bin/echo"), S.mkdir(b .. "/packs"))
  end)

  it("loads the dirs of $HCP_PACK_PATH when pack_dirs is not given", function()
    assert.equal("one,two\n", lua_child("HCP_PACK_PATH=" .. q(a .. ":" .. b), "/", COUNT:format("")))
    assert.equal("one\n", lua_child("HCP_PACK_PATH=" .. q(a), "/", COUNT:format("{ strict = false }")))
  end)

  it("lets pack_dirs win, even an empty one, and never reads ./packs", function()
    assert.equal("\n", lua_child("HCP_PACK_PATH=" .. q(a), "/", COUNT:format("{ pack_dirs = {} }")))
    assert.equal("two\n", lua_child("HCP_PACK_PATH=" .. q(a), "/", COUNT:format(string.format("{ pack_dirs = { %q } }", b))))
    assert.equal("\n", lua_child("", b, COUNT:format("")))
  end)
end)

describe("the hcp-lua REPL with no packs", function()
  local HCP_LUA = S.REPO .. "/build/bin/hcp-lua"

  local function repl(env, cwd)
    return S.sh(string.format("cd %s && echo 'print(#rt:packs())' | env -u HCP_PACK_PATH -u HCP_CONFIG %s %s -i 2>&1",
      q(cwd), env, HCP_LUA))
  end

  it("says where it looked and what set it", function()
    local out = repl("HCP_PACK_PATH=/nonexistent-hcp-dir", "/")
    assert.truthy(out:find("hcp-lua: no packs loaded; looked in /nonexistent-hcp-dir "
      .. "(HCP_PACK_PATH=/nonexistent-hcp-dir, HCP_CONFIG is not set)", 1, true), out)
    out = repl("", S.tmpdir("empty-"))
    assert.truthy(out:find("hcp-lua: no packs loaded; looked nowhere: there is no ./packs here "
      .. "(HCP_PACK_PATH is not set, HCP_CONFIG is not set)", 1, true), out)
  end)

  it("says nothing of the kind when it found packs", function()
    local out = repl("HCP_PACK_PATH=" .. q(S.REPO .. "/packs-examples"), "/")
    assert.is_nil(out:find("no packs loaded", 1, true), out)
    assert.matches("hcp> [1-9]%d*\n", out)
  end)
end)
