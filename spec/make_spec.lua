-- The build's promises: make deps as root and as another user, make with
-- missing dependencies, make demo's printed command, make install for a
-- stock lua5.4, and the done-when line of the README.
local S = require("support")

local q = S.q

-- make in the checkout; returns its output (stdout and stderr) and status.
local function make(args, prefix)
  return S.sh(string.format("cd %s && %s make -s %s 2>&1", q(S.REPO), prefix or "", args))
end

describe("make deps", function()
  -- root of the host, to become nobody
  S.it({ "init_root", "runuser", "nobody" },
    "as a user who is not root, prints the exact apt-get line for what is missing and fails", function()
      local install = "apt-get install -y --no-install-recommends hcp-no-such-package"
      local out, code = make("deps DEB_PKGS='lua5.4 hcp-no-such-package' SUDO=/usr/bin/sudo", "runuser -u nobody --")
      assert.is_not.equal(0, code)
      assert.matches("deps: missing Debian packages: hcp%-no%-such%-package\n", out)
      assert.matches("\ndeps: run: sudo apt%-get update && sudo " .. install:gsub("%-", "%%-") .. "\n", out)
      -- without sudo on the machine: su -c, one quoted command
      out, code = make("deps DEB_PKGS='lua5.4 hcp-no-such-package' SUDO=", "runuser -u nobody --")
      assert.is_not.equal(0, code)
      assert.matches("\ndeps: run: su %-c 'apt%-get update && " .. install:gsub("%-", "%%-") .. "'\n", out)
    end)

  -- a stand-in apt-get that logs its arguments, so the spec installs nothing
  local function fake_apt()
    local dir = S.tmpdir("apt-")
    local log = dir .. "/log"
    local apt = S.write(dir .. "/apt-get", "#!/bin/sh\necho \"$*\" >> " .. q(log) .. "\n", 493)
    S.mkdir(dir .. "/empty-lists")
    S.mkdir(dir .. "/lists")
    S.write(dir .. "/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages.lz4", "")
    return apt, log, dir
  end

  S.it("root", "as root, runs apt-get update first when apt has no package lists, and installs no recommends", function()
    local apt, log, dir = fake_apt()
    local out, code = make(string.format("deps DEB_PKGS='lua5.4 hcp-no-such-package' APT_GET=%s APT_LISTS=%s",
      q(apt), q(dir .. "/empty-lists")))
    assert.equal(0, code, out)
    assert.equal("update -qq\ninstall -y --no-install-recommends hcp-no-such-package -qq\n", S.read(log))
  end)

  S.it("root", "as root, with package lists present, installs without updating first", function()
    local apt, log, dir = fake_apt()
    local out, code = make(string.format("deps DEB_PKGS='lua5.4 hcp-no-such-package' APT_GET=%s APT_LISTS=%s",
      q(apt), q(dir .. "/lists")))
    assert.equal(0, code, out)
    assert.equal("install -y --no-install-recommends hcp-no-such-package -qq\n", S.read(log))
  end)

  it("reports nothing to do when every package is present", function()
    local out, code = make("deps DEB_PKGS='lua5.4'")
    assert.equal(0, code)
    assert.equal("deps: all Debian packages present\n", out)
  end)

  it("lists python3 (the REPL's terminal spec) and man-db (man hcp) among the packages", function()
    local out = make("-p -n deps 2>/dev/null | grep '^DEB_PKGS :='")
    for _, p in ipairs({ "python3", "man-db", "make", "gcc", "liblua5.4-dev", "bubblewrap" }) do
      assert.matches("[ =]" .. p:gsub("%-", "%%-"):gsub("%.", "%%.") .. "[ \n]", out .. "\n", 1)
    end
  end)
end)

describe("make without its dependencies", function()
  it("says to run make deps instead of failing in the compiler", function()
    local build = S.tmpdir("nobuild-")
    local out, code = make(string.format("BUILD=%s LUA_CFLAGS=-I/nonexistent", q(build)))
    assert.is_not.equal(0, code)
    assert.matches("missing: liblua5.4%-dev", out)
    assert.matches("run make deps", out)
    assert.not_matches("No such file or directory", out)
    assert.same({}, require("hcp.core").listdir(build .. "/obj") or {})   -- nothing was compiled
  end)
end)

describe("make demo", function()
  it("prints a command that, pasted in the checkout, gives what the demo gave", function()
    local out, code = make("demo BUILD=" .. q(S.BUILD))
    assert.equal(0, code, out)
    local cmd, result = out:match("\n%$ ([^\n]+)\n(.*)$")
    assert.is_string(cmd, out)
    assert.matches('"ok":true', result)
    assert.matches("%-%-pack%-dir packs%-examples", cmd)
    local again, status = S.sh("cd " .. q(S.REPO) .. " && " .. cmd .. " 2>&1")
    assert.equal(0, status, again)
    -- what varies from one run to the next: the times and the usage figures
    local function stable(s) return (s:gsub('"ms":[%d.]+', '"ms":_'):gsub('"usage":%b{}', '"usage":_')) end
    assert.equal(stable(result), stable(again))
  end)
end)

describe("make install", function()
  it("installs commands, Lua modules and the C module where a stock lua5.4 finds them", function()
    local prefix = S.tmpdir("prefix-")
    local out, code = make(string.format("install BUILD=%s PREFIX=%s", q(S.BUILD), q(prefix)))
    assert.equal(0, code, out)
    for _, f in ipairs({ "/bin/hcp-lua", "/bin/hcp", "/bin/hcpx", "/share/lua/5.4/hcp/init.lua",
      "/share/lua/5.4/hcp/runtime.lua", "/lib/lua/5.4/hcp/core.so", "/share/man/man1/hcp.1" }) do
      assert.truthy(require("hcp.core").kind(prefix .. f), f)
    end
    -- a stock interpreter, pointed at the prefix the way /usr/local is by
    -- default (a sanitized core.so needs its runtime preloaded)
    local lua_env = string.format("LUA_PATH='%s/share/lua/5.4/?.lua;%s/share/lua/5.4/?/init.lua;;' LUA_CPATH='%s/lib/lua/5.4/?.so;;'",
      prefix, prefix, prefix)
    if S.PRELOAD ~= "" then lua_env = lua_env .. " LD_PRELOAD=" .. q(S.PRELOAD) end
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
      "cd %s && %s -e 'local rt=require(\"hcp\").create{pack_dirs={\"packs-examples\"}} print(rt.mode)'", q(S.REPO), q(S.HCP_LUA)))
    assert.equal("sandbox\n", out)
  end)
end)
