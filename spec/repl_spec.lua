-- hcp.repl, the Lua side of the hcp-lua REPL: what TAB completes
-- (repl.complete, pure: a line and an environment in, candidates out) and how
-- results print (repl.view, one line or spread over indented lines).
local S = require("support")
local repl = require("hcp.repl")
local hcp = require("hcp")

local q = S.q

-- A stand-in runtime: recognised by its metatable's name, as the real one is.
local function fake_runtime(packs, counter)
  local methods = {
    packs = function()
      if counter then counter.n = counter.n + 1 end
      return packs
    end,
    call = function() end,
    start = function() end,
    _private = function() end,
  }
  return setmetatable({ mode = "sandbox" }, { __name = "hcp.Runtime", __index = methods })
end

local PACKS = {
  { name = "jq", ops = { "eval", "filter", "filter_file" } },
  { name = "jv", ops = {} },
  { name = "sqlite", ops = { "query" } },
}

local function complete(line, env)
  return repl.complete(line, env)
end

describe("repl.complete", function()
  describe("globals", function()
    local env = { print = print, pairs = pairs, string = string, _VERSION = "x", _hidden = 1, ["not ident"] = 1 }

    it("offers the globals and keywords that start with the word before the cursor", function()
      assert.same({ "pairs", "print" }, (complete("p", env)))
      assert.same({ "while" }, (complete("wh", env)))
      local c, start = complete("x = pri", env)
      assert.same({ "print" }, c)
      assert.equal(5, start)
    end)

    it("hides names starting with _ unless the word does, and never offers non-identifiers", function()
      local all = complete("", env)
      for _, name in ipairs(all) do
        assert.is_nil(name:match("^_"), name)
        assert.is_not.equal("not ident", name)
      end
      assert.same({ "_VERSION", "_hidden" }, (complete("_", env)))
    end)

    it("works on the real globals", function()
      assert.same({ "string" }, (complete("stri", _G)))
    end)
  end)

  describe("fields and methods", function()
    it("offers a table's fields after a dot, through nested tables", function()
      local env = { a = { b = { cde = 1, cdf = {}, x = 2 } } }
      local c, start = complete("print(a.b.cd", env)
      assert.same({ "cde", "cdf" }, c)
      assert.equal(#"print(a.b." + 1, start)
      assert.same({ "format" }, (complete("string.form", _G)))
    end)

    it("offers methods only after a colon, own and inherited through __index tables", function()
      local base = { greet = function() end, kind = "base" }
      local mid = setmetatable({ run = function() end }, { __index = base })
      local obj = setmetatable({ own = function() end, data = 1 }, { __index = mid })
      local env = { obj = obj }
      assert.same({ "greet", "own", "run" }, (complete("obj:", env)))
      assert.same({ "data", "greet", "kind", "own", "run" }, (complete("obj.", env)))
    end)

    it("an own field hides an inherited method of the same name", function()
      local obj = setmetatable({ run = 42 }, { __index = { run = function() end, go = function() end } })
      assert.same({ "go" }, (complete("obj:", { obj = obj })))
    end)

    it("offers string methods after a string variable and a colon", function()
      local c = complete("s:up", { s = "abc" })
      assert.same({ "upper" }, c)
    end)

    it("never calls an __index function, __pairs, or any other code", function()
      local calls = 0
      local function trap() calls = calls + 1 end
      local obj = setmetatable({ a = 1 }, { __index = function() trap() return {} end, __pairs = trap, __len = trap })
      local env = { obj = obj }
      assert.same({ "a" }, (complete("obj.", env)))
      assert.same({}, (complete("obj.missing.", env)))
      assert.same({}, (complete("obj:", env)))
      assert.equal(0, calls)
    end)

    it("copes with protected metatables and cycles of __index tables", function()
      local locked = setmetatable({ f = 1 }, { __metatable = false, __index = { hidden = 1 } })
      local loop = {}
      setmetatable(loop, { __index = loop })
      loop.x = 1
      assert.same({ "f" }, (complete("locked.", { locked = locked })))
      assert.same({ "x" }, (complete("loop.", { loop = loop })))
    end)

    it("offers nothing for what is not a name: numbers, invalid chains, unknown roots", function()
      local env = { a = { b = 1 }, tab = { x = 1 } }
      assert.same({}, (complete("1.", env)))
      assert.same({}, (complete("x = 3e", env)))
      assert.same({}, (complete("a:b.", env)))
      assert.same({}, (complete("nope.", env)))
      assert.same({}, (complete("a.b.", env))) -- a number has no fields
      assert.same({ "tab" }, (complete("'x' .. ta", env)))
      assert.same({ "x" }, (complete("'x'..tab.", env)))
    end)
  end)

  describe("strings and comments", function()
    it("offers nothing inside an ordinary string or a comment", function()
      assert.same({}, (complete("print('str", _G)))
      assert.same({}, (complete('x = "a.b', _G)))
      assert.same({}, (complete("x = 1 -- str", _G)))
      assert.same({}, (complete("x = [[str", _G)))
      assert.same({}, (complete("--[[ str", _G)))
    end)

    it("completes again after a string or a long comment has closed", function()
      assert.same({ "string" }, (complete([[x = "a\"b" .. stri]], _G)))
      assert.same({ "string" }, (complete("--[==[ c ]==] stri", _G)))
      assert.same({ "string" }, (complete("x = [[a]] .. stri", _G)))
    end)
  end)

  describe("pack and op names", function()
    it("offers the runtime's pack names inside pack = \"…\", and closes a single one", function()
      local env = { rt = fake_runtime(PACKS) }
      local c, start = complete('rt:call{pack="', env)
      assert.same({ "jq", "jv", "sqlite" }, c)
      assert.equal(#'rt:call{pack="' + 1, start)
      assert.same({ "jq", "jv" }, (complete('rt:call{ pack = "j', env)))
      assert.same({ 'sqlite"' }, (complete('rt:call{pack="s', env)))
      assert.same({ "sqlite'" }, (complete("rt:call({ id = 1, pack = 'sq", env)))
    end)

    it("offers the ops of the pack named before op = \"…\", or every op when none is", function()
      local env = { rt = fake_runtime(PACKS) }
      assert.same({ "eval", "filter", "filter_file" }, (complete('rt:call{pack="jq", op="', env)))
      assert.same({ "filter", "filter_file" }, (complete('rt:call{pack="jq", op="fi', env)))
      assert.same({ 'query"' }, (complete('rt:start{pack="sqlite", op="', env)))
      assert.same({ "eval", "filter", "filter_file", "query" }, (complete('rt:call{op="', env)))
    end)

    it("asks the receiver of the call when it is a runtime, else rt", function()
      local other = fake_runtime({ { name = "bc", ops = { "calc" } } })
      local env = { rt = fake_runtime(PACKS), mine = { r = other }, obj = {} }
      assert.same({ 'bc"' }, (complete('mine.r:call{pack="', env)))
      assert.same({ "jq", "jv", "sqlite" }, (complete('obj:call{pack="', env)))
    end)

    it("calls packs() only on a value whose metatable is named hcp.Runtime", function()
      local counter = { n = 0 }
      local impostor = setmetatable({}, { __index = { packs = function() counter.n = counter.n + 1 return PACKS end } })
      assert.same({}, (complete('impostor:call{pack="', { impostor = impostor, rt = impostor })))
      assert.equal(0, counter.n)
      local real = { n = 0 }
      assert.same({ "jq", "jv", "sqlite" }, (complete('rt:call{pack="', { rt = fake_runtime(PACKS, real) })))
      assert.equal(1, real.n)
    end)

    it("survives a runtime whose packs() raises, and offers nothing without a runtime", function()
      local broken = setmetatable({}, { __name = "hcp.Runtime", __index = { packs = function() error("boom") end } })
      assert.same({}, (complete('rt:call{pack="', { rt = broken })))
      assert.same({}, (complete('rt:call{pack="', {})))
      assert.same({}, (complete('x = { name = "', { rt = fake_runtime(PACKS) })))
    end)

    it("never offers a name with control bytes or spaces, and skips malformed pack entries", function()
      local env = { rt = fake_runtime({ { name = "ok" }, { name = "evil\27]0;x\7" }, { name = "two words" },
        "not a table", { name = 42 }, { name = "withops", ops = { "fine", "bad\nop", 7 } }, { ops = "x" } }) }
      assert.same({ "ok", "withops" }, (complete('rt:call{pack="', env)))
      assert.same({ 'fine"' }, (complete('rt:call{pack="withops", op="', env)))
    end)

    it("works on a real runtime over packs-examples: rt: methods, pack and op names", function()
      local rt = assert(hcp.create({ pack_dirs = { S.REPO .. "/packs-examples" } }))
      local env = { rt = rt }
      local methods = {}
      for _, m in ipairs((complete("rt:", env))) do methods[m] = true end
      for _, m in ipairs({ "call", "call_all", "start", "exec", "packs", "close" }) do
        assert.is_true(methods[m], m)
      end
      assert.is_nil(methods.__index)
      assert.same({ 'jq"' }, (complete('rt:call{pack="j', env)))
      assert.same({ "eval", "filter", "filter_file" }, (complete('rt:call{pack="jq", op="', env)))
      rt:close()
    end)
  end)
end)

describe("repl.view", function()
  local result = {
    hcp = 1, ok = true, exit = 0, stdout = "42\n", stderr = "", files = {},
    isolation = { "allowlist", "jail", "clean_env", "close_fds", "setsid", "no_new_privs", "landlock",
      "seccomp", "netns", "pidns", "caps", "limits" },
    nested = { deeper = { list = { 1, 2, 3 }, name = string.rep("n", 12) }, flag = false },
    ["not ident"] = "k",
  }

  local function lines_of(s)
    local t = {}
    for l in (s .. "\n"):gmatch("([^\n]*)\n") do t[#t + 1] = l end
    return t
  end

  it("without a width is one line, as before", function()
    assert.equal('{ 1, 2, a = "x", b = { c = true } }', repl.view({ 1, 2, a = "x", b = { c = true } }))
    assert.equal('"a\\nb"', repl.view("a\nb"))
  end)

  it("keeps a table that fits on one line", function()
    local t = { 1, 2, a = "x" }
    assert.equal(repl.view(t), repl.view(t, 80))
    assert.equal(repl.view(t), repl.view(t, #repl.view(t)))
  end)

  it("spreads a wider table over lines no wider than the width, two spaces per level", function()
    for _, width in ipairs({ 30, 50, 80 }) do
      local out = repl.view(result, width)
      local lines = lines_of(out)
      assert.is_true(#lines > 3, out)
      assert.equal("{", lines[1])
      assert.equal("}", lines[#lines])
      for _, l in ipairs(lines) do
        assert.is_true(utf8.len(l) <= width, width .. ": " .. l)
        assert.equal(0, #l:match("^ *") % 2, l)
      end
      assert.truthy(out:find('\n  stdout = "42\\n",\n', 1, true), out)
    end
  end)

  it("prints several atoms of an array on each line", function()
    local out = repl.view({ list = result.isolation }, 40)
    local lines = lines_of(out)
    assert.equal("  list = {", lines[2])
    assert.matches('^    "allowlist", "jail", ', lines[3])
    assert.is_true(#lines < #result.isolation, out)
  end)

  it("reads back as the same data, on one line and on several", function()
    for _, width in ipairs({ 0, 20, 60 }) do
      local text = width == 0 and repl.view(result) or repl.view(result, width)
      local back = assert(load("return " .. text, "=view", "t", {}))()
      assert.same(result, back)
    end
  end)

  it("never splits a string or a value with __tostring, even past the width", function()
    local long = string.rep("x", 100)
    local obj = setmetatable({}, { __tostring = function() return "OBJ" end })
    local out = repl.view({ long, obj }, 20)
    assert.equal('{\n  "' .. long .. '",\n  <OBJ>\n}', out)
  end)

  it("shows cycles and the depth limit in the spread form too", function()
    local t = { name = string.rep("c", 30) }
    t.self = t
    local out = repl.view(t, 20)
    assert.matches("self = <cycle>", out)
    local deep = {}
    local cur = deep
    for _ = 1, 10 do
      cur.next = { pad = string.rep("p", 20) }
      cur = cur.next
    end
    assert.matches("{…}", repl.view(deep, 20), 1, true)
  end)
end)

describe("repl.no_packs_message", function()
  it("names the dirs looked in and the variables that chose them", function()
    local env = { HCP_PACK_PATH = "/a:/b" }
    assert.equal("hcp-lua: rt has no packs: looked in /a, /b (HCP_CONFIG unset, HCP_PACK_PATH=/a:/b)",
      repl.no_packs_message({ "/a", "/b" }, function(k) return env[k] end))
    assert.equal("hcp-lua: rt has no packs: no pack dir to look in (./packs does not exist) "
      .. "(HCP_CONFIG unset, HCP_PACK_PATH unset)", repl.no_packs_message({}, function() return nil end))
    assert.matches("HCP_CONFIG=/etc/x.lua", repl.no_packs_message({}, function(k)
      return k == "HCP_CONFIG" and "/etc/x.lua" or "" end), 1, true)
  end)
end)

describe("repl.width", function()
  local function width_with(env)
    local out = S.sh(string.format("cd %s && env -u COLUMNS %s %s -e %s </dev/null 2>&1", q(S.REPO), env, S.LUA,
      q("package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path; package.cpath = 'build/lib/lua/5.4/?.so;' "
        .. ".. package.cpath; print(require('hcp.repl').width())")))
    return out
  end

  it("is $COLUMNS when there is no terminal to ask, else 80", function()
    assert.equal("33\n", width_with("COLUMNS=33"))
    assert.equal("80\n", width_with(""))
    assert.equal("80\n", width_with("COLUMNS=junk"))
    assert.equal("80\n", width_with("COLUMNS=-5"))
  end)

  it("lays out the REPL's results in it (hcp-lua -i, stdout not a terminal)", function()
    local dir = S.tmpdir("width-")
    S.write(dir .. "/in", "{ alpha = string.rep('a', 20), beta = { 1, 2, 3 } }\nrequire('hcp.repl').width()\n")
    local out = S.sh(string.format("cd %s && COLUMNS=30 %s -i < %s 2>&1", q(S.REPO),
      q(S.HCP_LUA), q(dir .. "/in")))
    assert.truthy(out:find('hcp> {\n  alpha = "aaaaaaaaaaaaaaaaaaaa",\n  beta = { 1, 2, 3 }\n}\n', 1, true), out)
    assert.truthy(out:find("hcp> 30\n", 1, true), out)
  end)
end)
