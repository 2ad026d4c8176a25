-- The LuaRocks package: the rockspec agrees with the tree (its version),
-- builds through the Makefile (which globs every module and C source), and
-- `luarocks make` into a temporary tree gives a stock lua5.4 a working
-- require("hcp") that runs a real sandboxed call.
local S = require("support")
local core = require("hcp.core")
local hcp = require("hcp")

local q = S.q

-- The rockspec(s) at the top of the checkout.
local function rockspecs()
  local out = {}
  for _, name in ipairs(core.listdir(S.REPO) or {}) do
    if name:match("%.rockspec$") then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- A rockspec is a Lua chunk that sets globals: load it into a table.
local function load_rockspec(file)
  local env = {}
  local chunk, err = loadfile(file, "t", env)
  assert(chunk, err)
  chunk()
  return env
end

describe("rockspec", function()
  local specs = rockspecs()

  it("is one file named hcp-lua-VERSION-REV.rockspec after lua/hcp/init.lua's version", function()
    assert.equal(1, #specs, "rockspecs: " .. table.concat(specs, " "))
    local version, rev = specs[1]:match("^hcp%-lua%-(.+)%-(%d+)%.rockspec$")
    assert.equal(hcp.version, version)
    local rs = load_rockspec(S.REPO .. "/" .. specs[1])
    assert.equal("hcp-lua", rs.package)
    assert.equal(hcp.version .. "-" .. rev, rs.version)
  end)

  it("builds through the Makefile, which knows every module and C source", function()
    local rs = load_rockspec(S.REPO .. "/" .. specs[1])
    assert.equal("make", rs.build.type)
    assert.equal("rock", rs.build.build_target)
    assert.equal("rock-install", rs.build.install_target)
  end)

  it("needs Lua 5.4 and argparse, and no longer lua-cjson (hcp.json decodes JSON itself)", function()
    local rs = load_rockspec(S.REPO .. "/" .. specs[1])
    local deps = table.concat(rs.dependencies, "\n")
    assert.matches("lua >= 5.4, < 5.5", deps, 1, true)
    assert.matches("argparse", deps, 1, true)
    assert.is_nil(deps:find("cjson", 1, true))
  end)
end)

describe("luarocks make", function()
  local _, has = S.sh("command -v luarocks >/dev/null 2>&1")
  if has ~= 0 then
    pending("luarocks is not installed (make deps installs it)")
    return
  end

  local T, tree
  setup(function()
    T = S.tmpdir("rock-")
    tree = T .. "/tree"
    -- a copy of what the rockspec names: the build writes its objects next
    -- to the sources, and must need nothing else of the checkout
    local spec = rockspecs()[1]
    assert(os.execute(string.format("mkdir %s/src && cd %s && cp -r %s Makefile lua src docs %s/src/",
      q(T), q(S.REPO), q(spec), q(T))))
    -- HOME: luarocks keeps caches and config there; the Debian
    -- lua-argparse is not a rock, so no dependency is fetched
    local out, code = S.sh(string.format(
      "cd %s/src && HOME=%s luarocks --lua-version=5.4 make --deps-mode=none --tree=%s %s 2>&1",
      q(T), q(T), q(tree), q(spec)))
    assert(code == 0, "luarocks make failed:\n" .. out)
  end)

  it("installs the modules and the C module into the tree, and registers the rock", function()
    for _, f in ipairs({ "/share/lua/5.4/hcp/init.lua", "/share/lua/5.4/hcp/runtime.lua",
      "/share/lua/5.4/hcp/driver/local.lua", "/lib/lua/5.4/hcp/core.so" }) do
      assert.equal("file", core.kind(tree .. f), f)
    end
    local out, code = S.sh(string.format("HOME=%s luarocks --lua-version=5.4 --tree=%s list --porcelain 2>&1",
      q(T), q(tree)))
    assert.equal(0, code, out)
    assert.matches("hcp%-lua\t" .. hcp.version:gsub("%.", "%%.") .. "%-1\tinstalled\t", out)
  end)

  it("a stock lua5.4 requires hcp from the tree and runs a real jq call", function()
    local probe = S.write(T .. "/probe.lua", string.format([[
      local tree = %q
      package.path = tree .. "/share/lua/5.4/?.lua;" .. tree .. "/share/lua/5.4/?/init.lua;" .. package.path
      package.cpath = tree .. "/lib/lua/5.4/?.so;" .. package.cpath
      local hcp = require("hcp")
      local rt = assert(hcp.create{ pack_dirs = { %q } })
      local res = rt:call{ pack = "jq", op = "eval", params = { expr = "[1,2]|add" } }
      rt:close()
      print(package.searchpath("hcp", package.path))
      print(package.searchpath("hcp.core", package.cpath))
      print(debug.getinfo(hcp.create, "S").source)
      print(res.ok, res.exit, res.sandbox, (res.stdout:gsub("\n", "")))
      print(type(require("hcp.cli").main), require("hcp.core").version)
    ]], tree, S.REPO .. "/packs-examples"))
    -- from an unrelated directory, and with no LUA_PATH that could reach the checkout
    local out, code = S.sh(string.format("cd %s && env -u LUA_PATH -u LUA_CPATH -u LUA_PATH_5_4 -u LUA_CPATH_5_4 "
      .. "lua5.4 %s 2>&1", q(T), q(probe)))
    assert.equal(0, code, out)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal(tree .. "/share/lua/5.4/hcp/init.lua", lines[1])
    assert.equal(tree .. "/lib/lua/5.4/hcp/core.so", lines[2])
    assert.equal("@" .. tree .. "/share/lua/5.4/hcp/init.lua", lines[3])
    assert.equal("true\t0\tsandbox\t3", lines[4])
    assert.equal("function\t" .. core.version, lines[5])
  end)

  it("luarocks remove takes it out of the tree again", function()
    local out, code = S.sh(string.format("HOME=%s luarocks --lua-version=5.4 --tree=%s remove hcp-lua 2>&1",
      q(T), q(tree)))
    assert.equal(0, code, out)
    assert.is_nil(core.kind(tree .. "/share/lua/5.4/hcp/init.lua"))
    assert.is_nil(core.kind(tree .. "/lib/lua/5.4/hcp/core.so"))
  end)
end)
