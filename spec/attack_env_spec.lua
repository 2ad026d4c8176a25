-- Attack (issue 11, category 6): agent_env loading code into an
-- allow-listed bin. LD_* was refused; GCONV_PATH does what LD_PRELOAD does,
-- BASH_ENV runs a script, and so on for every interpreter. Each is now a
-- load error naming the variable, in any case, and `hcp validate` says so.
local hcp = require("hcp")
local S = require("support")

local function have(cmd)
  local _, code = S.sh("command -v " .. cmd .. " >/dev/null 2>&1")
  return code == 0
end

-- Loads a pack with these agent_env entries; returns the runtime.
local function load(name, bin, agent_env, wrap)
  local w = { agent_env = agent_env }
  for k, v in pairs(wrap or {}) do w[k] = v end
  local root = S.pack(S.manifest(name, bin, { wrap = w }))
  return assert(hcp.create({ pack_dirs = { root }, out_dir = S.tmpdir("out-") })), root
end

describe("attack: code-loading variables in agent_env", function()
  it("GCONV_PATH (a gconv module is a shared object iconv loads) is a load error; the module never runs", function()
    if not (have("cc") and have("iconv")) then pending("needs cc and iconv") return end
    local dir = S.tmpdir("gconv-")
    local marker = dir .. "/loaded"
    S.write(dir .. "/evil.c", string.format([[
#include <stdio.h>
__attribute__((constructor)) static void hit(void) { FILE *f = fopen("%s", "w"); if (f) fclose(f); }
int gconv_init(void *s) { (void)s; return 0; }
]], marker))
    local out, code = S.sh(string.format("cc -shared -fPIC -o %s/evil.so %s/evil.c 2>&1", dir, dir))
    assert.equal(0, code, out)
    S.write(dir .. "/gconv-modules", "module EVIL// INTERNAL evil 1\nmodule INTERNAL EVIL// evil 1\n")
    -- the attack works outside: iconv loads the module
    S.sh(string.format("GCONV_PATH=%s iconv -f EVIL -t UTF-8 </dev/null >/dev/null 2>&1", S.q(dir)))
    assert.truthy(S.read(marker), "control: GCONV_PATH did not load the module on this host")
    os.remove(marker)
    local rt = load("gc", "iconv", { GCONV_PATH = dir }, { args = { "-f", "EVIL", "-t", "UTF-8" } })
    local p = rt:problems()[1]
    assert.equal("wrap.agent_env.GCONV_PATH", p.field)
    assert.matches("^GCONV_PATH is refused: it makes the dynamic loader or libc load code", p.message)
    local res = rt:call({ pack = "gc", stdin = "x" })
    assert.equal('envelope: no pack named "gc"', res.error)
    assert.is_nil(S.read(marker))
  end)

  it("BASH_ENV (bash runs the file before its -c script) is a load error; the file never runs", function()
    if not have("bash") then pending("needs bash") return end
    local dir = S.tmpdir("bashenv-")
    local marker = dir .. "/ran"
    local script = S.write(dir .. "/evil.sh", "touch " .. S.q(marker) .. "\n")
    S.sh(string.format("BASH_ENV=%s bash -c true", S.q(script)))
    assert.truthy(S.read(marker), "control: BASH_ENV did not run on this host")
    os.remove(marker)
    local rt = load("be", "bash", { BASH_ENV = script }, { args = { "-c", "true" } })
    assert.equal("wrap.agent_env.BASH_ENV", rt:problems()[1].field)
    assert.equal('envelope: no pack named "be"', rt:call({ pack = "be" }).error)
    assert.is_nil(S.read(marker))
  end)

  it("every variable of the issue, in upper, lower and mixed case, is a load error naming it", function()
    for _, var in ipairs({ "GCONV_PATH", "BASH_ENV", "ENV", "GIT_SSH_COMMAND", "GIT_CONFIG_GLOBAL",
      "GIT_CONFIG_COUNT", "PYTHONPATH", "PYTHONSTARTUP", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT",
      "LUA_INIT", "LUA_INIT_5_4", "GLIBC_TUNABLES" }) do
      for _, spelled in ipairs({ var, var:lower(), var:sub(1, 1) .. var:sub(2):lower() }) do
        local rt = load("v", "true", { [spelled] = "x" })
        local p = rt:problems()[1]
        assert.is_table(p, spelled)
        assert.equal("wrap.agent_env." .. spelled, p.field)
        assert.matches("^" .. spelled:gsub("%p", "%%%0") .. " is refused: ", p.message)
        assert.same({}, rt:packs())
      end
    end
  end)

  it("a binding's env and home_env are held to the same list", function()
    local root = S.pack(S.manifest("b", "true", { bindings = { t = { family = "token", env = "NODE_OPTIONS" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.equal("bindings.t.env", rt:problems()[1].field)
    root = S.pack(S.manifest("h", "true", { wrap = { workspace = { mode = "ephemeral", home_env = { "LD_LIBRARY_PATH" } } } }))
    rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.equal("wrap.workspace.home_env[1]", rt:problems()[1].field)
  end)

  it("harmless variables still work (PYTHONUNBUFFERED, NODE_ENV, JQ_COLORS)", function()
    local rt = load("fine", "sh", { PYTHONUNBUFFERED = "1", NODE_ENV = "production", JQ_COLORS = "" },
      { args = { "-c", 'echo "$PYTHONUNBUFFERED $NODE_ENV"' } })
    assert.same({}, rt:problems())
    assert.equal("1 production\n", rt:call({ pack = "fine" }).stdout)
  end)

  it("hcp validate reports the variable and exits 1", function()
    local root = S.pack(S.manifest("val", "true", { wrap = { agent_env = { Gconv_Path = "/tmp" } } }))
    local dir = S.tmpdir("validate-")
    local _, _, code = os.execute(string.format("%s validate %s > %s/out 2> %s/err",
      S.q(S.HCP), S.q(root), dir, dir))
    assert.equal(1, code)
    assert.matches("manifest: .*/val/hcp%.json: wrap%.agent_env%.Gconv_Path: Gconv_Path is refused: ", S.read(dir .. "/err"))
    assert.equal("", S.read(dir .. "/out"))
  end)
end)
