-- Where packs come from when nobody names them: hcp.create() without
-- pack_dirs reads $HCP_PACK_PATH as the commands do (but never ./packs: a
-- library does not look in the cwd). What the hcp-lua REPL says when it
-- found no packs is spec/repl_pty_spec.lua's.
local S = require("support")
local q = S.q

-- A fresh lua5.4 running `code` in `cwd` with `env` (a shell prefix).
local function lua_child(env, cwd, code)
  local script = S.write(S.tmpdir("lua-") .. "/t.lua", code)
  local paths = string.format("package.path=%q..package.path; package.cpath=%q..package.cpath",
    S.REPO .. "/lua/?.lua;" .. S.REPO .. "/lua/?/init.lua;", S.CPATH_ABS .. ";")
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
