-- hcp.envrules: the code-loading variables a manifest may not set (issue
-- 11, category 6), as a pure function.
local envrules = require("hcp.envrules")

describe("envrules.reason", function()
  it("refuses every variable of the issue, in any case", function()
    for _, name in ipairs({ "LD_PRELOAD", "GCONV_PATH", "BASH_ENV", "ENV", "GIT_SSH_COMMAND", "GIT_SSH",
      "GIT_CONFIG_GLOBAL", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_PARAMETERS", "GIT_EXEC_PATH",
      "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONWARNINGS", "PYTHONBREAKPOINT", "NODE_OPTIONS",
      "NODE_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "LUA_INIT",
      "LUA_INIT_5_4", "LUA_PATH", "LUA_PATH_5_4", "LUA_CPATH", "LUA_CPATH_5_4", "GLIBC_TUNABLES",
      "HOSTALIASES", "RESOLV_HOST_CONF", "LOCPATH", "NLSPATH", "MALLOC_TRACE", "BASH_FUNC_ls%%",
      "JAVA_TOOL_OPTIONS", "OPENSSL_CONF", "PAGER", "EDITOR", "LESSOPEN", "SHELL", "DYLD_INSERT_LIBRARIES" }) do
      for _, spelled in ipairs({ name, name:lower(), name:sub(1, 1):lower() .. name:sub(2) }) do
        assert.is_string(envrules.reason(spelled), spelled)
        assert.matches("^is refused: ", envrules.reason(spelled))
      end
    end
  end)

  it("allows ordinary variables and the harmless members of a family", function()
    for _, name in ipairs({ "LANG", "LC_ALL", "TZ", "HOME", "TMPDIR", "JQ_COLORS", "NODE_ENV", "PYTHONUNBUFFERED",
      "PYTHONIOENCODING", "pythondontwritebytecode", "PERL_UNICODE", "GIT_AUTHOR_NAME", "GIT_TERMINAL_PROMPT",
      "SQLITE_TMPDIR", "ENVIRONMENT", "LDFLAGS_X", "MALLOC_ARENA_MAX" }) do
      assert.is_nil(envrules.reason(name), name)
    end
  end)

  it("lists what it refuses, for the docs", function()
    local l = envrules.list()
    assert.is_true(#l.names > 40)
    local prefixes = {}
    for _, f in ipairs(l.families) do prefixes[f.prefix] = f end
    assert.is_table(prefixes.LD_)
    assert.is_table(prefixes.PYTHON)
    assert.is_true(#prefixes.PYTHON.except > 5)
  end)
end)

describe("envrules.reason with a value", function()
  it("allows any of them set to \"\" or /dev/null (they then load nothing), and GIT_CONFIG_NOSYSTEM", function()
    assert.is_nil(envrules.reason("GIT_CONFIG_GLOBAL", "/dev/null"))
    assert.is_nil(envrules.reason("LD_PRELOAD", ""))
    assert.is_nil(envrules.reason("GIT_CONFIG_NOSYSTEM", "1"))
    assert.is_string(envrules.reason("GIT_CONFIG_GLOBAL", "/tmp/evil.gitconfig"))
    assert.is_string(envrules.reason("GIT_CONFIG_GLOBAL", "/dev/null/../tmp/x"))
    assert.is_string(envrules.reason("BASH_ENV", " "))
  end)
end)

describe("envrules: the documented list", function()
  it("docs/security.md names every refused variable and family", function()
    local fh = assert(io.open("docs/security.md", "rb"))
    local doc = fh:read("a")
    fh:close()
    local l = envrules.list()
    for _, name in ipairs(l.names) do
      assert.truthy(doc:find("`" .. name .. "`", 1, true), name .. " is not in docs/security.md")
    end
    for _, f in ipairs(l.families) do
      assert.truthy(doc:find("`" .. f.prefix .. "*`", 1, true), f.prefix .. "* is not in docs/security.md")
      for _, name in ipairs(f.except) do
        assert.truthy(doc:find("`" .. name .. "`", 1, true), name .. " (an exception) is not in docs/security.md")
      end
    end
  end)
end)
