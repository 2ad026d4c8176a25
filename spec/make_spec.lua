-- The build's promises: make deps on a machine without root, make install
-- for a stock lua5.4, and the done-when line of the README.
local S = require("support")

describe("make deps", function()
  it("as a user who is not root, prints the exact apt-get line for what is missing and fails", function()
    local _, has_runuser = S.sh("command -v runuser >/dev/null 2>&1")
    if S.sh("id -u") ~= "0\n" or has_runuser ~= 0 then
      pending("needs root and runuser to act as another user")
      return
    end
    local out, code = S.sh(string.format(
      "cd '%s' && runuser -u nobody -- make -s deps DEB_PKGS='lua5.4 hcp-no-such-package' 2>&1", S.REPO))
    assert.is_not.equal(0, code)
    assert.matches("deps: missing Debian packages: hcp%-no%-such%-package", out)
    assert.matches("deps: run: sudo apt%-get install %-y hcp%-no%-such%-package", out)
  end)

  it("reports nothing to do when every package is present", function()
    local out, code = S.sh(string.format("cd '%s' && make -s deps DEB_PKGS='lua5.4' 2>&1", S.REPO))
    assert.equal(0, code)
    assert.equal("deps: all Debian packages present\n", out)
  end)
end)

describe("make install", function()
  it("installs commands, Lua modules and the C module where a stock lua5.4 finds them", function()
    local prefix = S.tmpdir("prefix-")
    local out, code = S.sh(string.format("cd '%s' && make -s install PREFIX='%s' 2>&1", S.REPO, prefix))
    assert.equal(0, code, out)
    for _, f in ipairs({ "/bin/hcp-lua", "/bin/hcp", "/bin/hcpx", "/share/lua/5.4/hcp/init.lua",
      "/share/lua/5.4/hcp/runtime.lua", "/lib/lua/5.4/hcp/core.so" }) do
      assert.truthy(require("hcp.core").kind(prefix .. f), f)
    end
    -- a stock interpreter, pointed at the prefix the way /usr/local is by default
    local lua_env = string.format("LUA_PATH='%s/share/lua/5.4/?.lua;%s/share/lua/5.4/?/init.lua;;' LUA_CPATH='%s/lib/lua/5.4/?.so;;'",
      prefix, prefix, prefix)
    local script = S.write(prefix .. "/probe.lua", [[
      local hcp = require("hcp")
      local rt = assert(hcp.create{ pack_dirs = { "packs-examples" } })
      io.write(package.searchpath("hcp.core", package.cpath), " ", rt:call{ pack = "jq", args = { "-n", "6*7" } }.stdout)
    ]])
    out = S.sh(string.format("cd '%s' && %s lua5.4 '%s' 2>&1", S.REPO, lua_env, script))
    assert.equal(prefix .. "/lib/lua/5.4/hcp/core.so 42\n", out)
    -- the installed hcp-lua finds its own modules without any LUA_PATH
    out = S.sh(string.format("cd / && '%s/bin/hcp-lua' -e 'print(package.searchpath(\"hcp\", package.path))'", prefix))
    assert.equal(prefix .. "/share/lua/5.4/hcp/init.lua\n", out)
  end)
end)

describe("done when (issue 2)", function()
  it("hcp-lua prints the runtime's mode: sandbox", function()
    local out = S.sh(string.format(
      "cd '%s' && build/bin/hcp-lua -e 'local rt=require(\"hcp\").create{pack_dirs={\"packs-examples\"}} print(rt.mode)'", S.REPO))
    assert.equal("sandbox\n", out)
  end)
end)
