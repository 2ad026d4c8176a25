-- Every pack under packs-examples/: it loads, its bin resolves, every op has
-- a live example whose real output is checked, every op answers in mock mode
-- with exactly its fixture, and its README exists. Packs are discovered by
-- listing the directory, so a new pack (or a new op) is covered, and must
-- bring an example request below, or this file fails.
local hcp = require("hcp")
local core = require("hcp.core")
local json = require("hcp.json")
local S = require("support")

local DIR = S.REPO .. "/packs-examples"

-- The pack roots under DIR (direct children holding hcp.json), sorted.
local function pack_dirs()
  local out = {}
  for _, name in ipairs(assert(core.listdir(DIR))) do
    if name:sub(1, 1) ~= "." and core.kind(DIR .. "/" .. name .. "/hcp.json") == "file" then
      out[#out + 1] = name
    end
  end
  return out
end

local DIRS = pack_dirs()

-- The raw manifest of a pack dir, as JSON decoded (not normalised).
-- A manifest that cannot be read gives a stub, so that its "loads" test fails
-- with the runtime's own message instead of this file failing to load.
local function manifest_of(dir)
  local doc = json.decode(S.read(DIR .. "/" .. dir .. "/hcp.json") or "")
  if type(doc) ~= "table" or type(doc.wrap) ~= "table" then
    return { name = dir, wrap = { bin = "" }, ops = {}, unreadable = true }
  end
  return doc
end

-- Example requests, keyed by pack and op. `stdout` is the exact expected
-- output; `like` is a list of Lua patterns the output must all match.
local UTF8_HI = table.concat({
  "█████████████████████████████",
  "█████████████████████████████",
  "████ ▄▄▄▄▄ ███▄█ █ ▄▄▄▄▄ ████",
  "████ █   █ █▄█▄█▀█ █   █ ████",
  "████ █▄▄▄█ ██ ▀ ▄█ █▄▄▄█ ████",
  "████▄▄▄▄▄▄▄█ █ █▄█▄▄▄▄▄▄▄████",
  "████▄  █▄▄▄ ▄█ ▀▄ ▄▀█▀ ▀▀████",
  "█████▄  ▄▄▄▄▄▄█ ▀ ▄ ▀ ▄ ▄████",
  "████▄██▄█▄▄█ █ ▄█▄ ▄██ ▀▀████",
  "████ ▄▄▄▄▄ █   █▄█▀█▄█▀  ████",
  "████ █   █ █▄ █▀▄▀▄▀▄▀▄▀▄████",
  "████ █▄▄▄█ █  ▄ ▀ ▄ ▀ ▄▀▄████",
  "████▄▄▄▄▄▄▄█▄██▄█▄▄▄█▄▄▄▄████",
  "█████████████████████████████",
  "█████████████████████████████",
}, "\n") .. "\n"

local EXAMPLES = {
  jq = {
    filter = { req = { params = { expr = ".a" }, stdin = '{"a":42}' }, stdout = "42\n" },
    filter_file = { req = { params = { expr = ".name", file = "hcp.json" } }, stdout = '"jq"\n' },
    eval = { req = { params = { expr = "1+1" } }, stdout = "2\n" },
  },
  sqlite = {
    query = { req = { params = { sql = "select 1+1 as x" } }, stdout = '[{"x":2}]\n' },
    csv = {
      req = { stdin = "create table t(a,b); insert into t values (1,'x'),(2,'y'); select * from t;" },
      stdout = "a,b\n1,x\n2,y\n",
    },
    version = { req = {}, like = { "^3%.%d+%.%d+ %d%d%d%d%-%d%d%-%d%d " } },
  },
  bc = {
    calc = { req = { stdin = "scale=10; 4*a(1)\n" }, stdout = "3.1415926532\n" },
    calc_int = { req = { stdin = "7/2\n2^100\n" }, stdout = "3\n1267650600228229401496703205376\n" },
    version = { req = {}, like = { "^bc 1%.%d" } },
  },
  xml = {
    xpath = { req = { params = { expr = "//b/text()" }, stdin = "<a><b>hi</b><b>yo</b></a>" }, stdout = "hi\nyo\n" },
    xpath_file = {
      req = { params = { expr = "string(//book[year>2004]/title)", file = "sample.xml" } },
      stdout = "Programando em Lua\n",
    },
    format = { req = { stdin = "<a><b>hi</b></a>" }, stdout = '<?xml version="1.0"?>\n<a>\n  <b>hi</b>\n</a>\n' },
    check = { req = { stdin = "<a><b>hi</b></a>" }, stdout = "" },
  },
  git = {
    hash = { req = { stdin = "hello\n" }, stdout = "ce013625030ba8dba906f756967f9e9ca394464a\n" },
    ["check-ref"] = { req = { params = { name = "feature/x" } }, stdout = "feature/x\n" },
    stripspace = { req = { stdin = "subject   \n\n\n\nbody  \n\n" }, stdout = "subject\n\nbody\n" },
    version = { req = {}, like = { "^git version 2%.%d+" } },
  },
  qrencode = {
    svg = {
      req = { params = { text = "hello" } },
      like = { "^<%?xml ", "\n<svg [^\n]*xmlns=\"http://www%.w3%.org/2000/svg\"", "</svg>\n$" },
    },
    utf8 = { req = { params = { text = "hi" } }, stdout = UTF8_HI },
    ascii = { req = { params = { text = "hi" } }, like = { "^ +\n", "\n        ##############      ##" } },
    png = { req = { params = { text = "hi", file = "qr.png" } }, stdout = "", files = { "qr.png" } },
  },
  db = {
    sql = {
      req = { params = { sql = "create table if not exists t(x); insert into t values(1); select count(*) as n from t" } },
      like = { '^%[{"n":%d+}%]\n$' },
      files = { "data.db" },
    },
    tables = { req = {}, like = { "^t?\n?$" } },
    dump = { req = {}, like = { "^PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n" } },
  },
  wordfreq = {
    top = { req = { params = { n = 3 }, stdin = "The cat sat. The cat in a hat -- THE end?" }, stdout = "3 the\n2 cat\n1 a\n" },
  },
}

-- The request of an example, with pack and op filled in.
local function request(pack, op, extra)
  local ex = EXAMPLES[pack][op]
  local req = { pack = pack, op = op }
  for k, v in pairs(ex.req) do req[k] = v end
  for k, v in pairs(extra or {}) do req[k] = v end
  return req
end

local function check_output(pack, op, res)
  local ex = EXAMPLES[pack][op]
  local what = pack .. "." .. op
  assert.is_true(res.ok, what .. ": " .. tostring(res.error) .. " " .. tostring(res.stderr))
  assert.equal(0, res.exit)
  if ex.stdout ~= nil then
    assert.equal(ex.stdout, res.stdout, what)
  end
  for _, pat in ipairs(ex.like or {}) do
    assert.matches(pat, res.stdout)
  end
  assert.is_true(ex.stdout ~= nil or ex.like ~= nil, what .. ": the example checks no output")
  -- files written back (or, in workspace mode, created in the jail) end in these names
  for _, name in ipairs(ex.files or {}) do
    local found = false
    for _, f in ipairs(res.files) do
      if f:sub(-(#name + 1)) == "/" .. name and require("hcp.core").kind(f) == "file" then found = true end
    end
    assert.is_true(found, what .. ": no file " .. name .. " in " .. table.concat(res.files, ", "))
  end
end

local function pack_info(rt, dir)
  for _, p in ipairs(rt:packs()) do
    if p.root == DIR .. "/" .. dir then return p end
  end
  return nil
end

local rts = {}
local function runtime(isolation, driver)
  local key = (isolation or "default") .. "/" .. (driver or "local")
  if not rts[key] then
    -- workspace-mode packs keep their jails here, never in the real $HOME;
    -- --output files are written back here, never in the checkout
    -- (two directories: write-back never reaches the state dir)
    rts[key] = assert(hcp.create({ pack_dirs = { DIR }, isolation = isolation, driver = driver,
      state_dir = S.tmpdir("examples-state-"), out_dir = S.tmpdir("examples-out-") }))
  end
  return rts[key]
end

local BWRAP_ERR
do
  local rt, err = hcp.create({ driver = "bwrap" })
  if rt then rt:close() else BWRAP_ERR = tostring(err) end
end

teardown(function()
  for _, rt in pairs(rts) do rt:close() end
end)

describe("packs-examples", function()
  it("holds at least 7 packs, found by listing the directory", function()
    assert.is_true(#DIRS >= 7, "only " .. #DIRS .. " packs: " .. table.concat(DIRS, ", "))
    for _, want in ipairs({ "bc", "git", "jq", "qrencode", "sqlite", "wordfreq", "xml" }) do
      assert.is_truthy(core.kind(DIR .. "/" .. want .. "/hcp.json"), want)
    end
  end)

  it("every op of every pack has an example request, and every example names a real op", function()
    local rt = runtime()
    local missing, stale = {}, {}
    local seen = {}
    for _, dir in ipairs(DIRS) do
      local p = pack_info(rt, dir)
      assert.is_not_nil(p, dir .. " did not load")
      seen[p.name] = {}
      for _, op in ipairs(p.ops) do
        seen[p.name][op] = true
        if not (EXAMPLES[p.name] and EXAMPLES[p.name][op]) then missing[#missing + 1] = p.name .. "." .. op end
      end
    end
    for pack, ops in pairs(EXAMPLES) do
      for op in pairs(ops) do
        if not (seen[pack] and seen[pack][op]) then stale[#stale + 1] = pack .. "." .. op end
      end
    end
    table.sort(missing)
    table.sort(stale)
    assert.same({}, missing, "ops without an example request in spec/examples_spec.lua")
    assert.same({}, stale, "examples for ops that no pack has")
  end)
end)

for _, dir in ipairs(DIRS) do
  describe("packs-examples/" .. dir, function()
    local m = manifest_of(dir)
    local ops = {}
    for op in pairs(m.ops or {}) do ops[#ops + 1] = op end
    table.sort(ops)

    it("loads with no problems and its bin resolves", function()
      local rt = runtime()
      local problems = {}
      for _, pr in ipairs(rt:problems()) do
        if pr.file:sub(1, #DIR + #dir + 2) == DIR .. "/" .. dir .. "/" or pr.file == DIR .. "/" .. dir then
          problems[#problems + 1] = pr.file .. ": " .. pr.field .. ": " .. pr.message
        end
      end
      assert.same({}, problems)
      local p = pack_info(rt, dir)
      assert.is_not_nil(p)
      assert.equal(m.name, p.name)
      assert.is_string(p.version)
      assert.equal("wrap", p.class)
      assert.is_string(p.description)
      assert.is_string(p.path, "bin " .. tostring(p.bin) .. " did not resolve")
      assert.same(ops, p.ops)
      if m.wrap.bin:sub(1, 2) == "./" then
        assert.equal(p.path, DIR .. "/" .. dir .. "/" .. m.wrap.bin:sub(3))
        local _, code = S.sh("test -x '" .. p.path .. "'")
        assert.equal(0, code, p.path .. " is not executable")
      end
    end)

    it("has a README.md that names the pack and each op", function()
      local text = S.read(DIR .. "/" .. dir .. "/README.md")
      assert.is_string(text, dir .. "/README.md is missing")
      assert.is_truthy(text:find(m.name, 1, true), "README does not mention " .. m.name)
      for _, op in ipairs(ops) do
        assert.is_truthy(text:find("`" .. op .. "`", 1, true), "README does not mention op `" .. op .. "`")
      end
    end)

    it("every op has a description and a mock (its own or \"*\")", function()
      for _, op in ipairs(ops) do
        assert.is_string(m.ops[op].description, op)
        assert.is_table(m.mocks and (m.mocks[op] or m.mocks["*"]), op .. " has no mock")
      end
    end)

    for _, op in ipairs(ops) do
      it("op " .. op .. ": a live call gives the real output", function()
        assert.is_table(EXAMPLES[m.name] and EXAMPLES[m.name][op], "no example request for " .. m.name .. "." .. op)
        local res = runtime():call(request(m.name, op, { id = m.name .. "." .. op }))
        assert.equal(m.name .. "." .. op, res.id)
        assert.equal("sandbox", res.sandbox)
        check_output(m.name, op, res)
      end)

      it("op " .. op .. ": mock mode returns exactly the fixture and spawns nothing", function()
        assert.is_table(EXAMPLES[m.name] and EXAMPLES[m.name][op], "no example request for " .. m.name .. "." .. op)
        local fixture = assert(m.mocks and (m.mocks[op] or m.mocks["*"]), "no mock for " .. op)
        local res = runtime():call(request(m.name, op, { mode = "mock" }))
        local exit = fixture.exit or 0
        assert.equal(exit, res.exit)
        assert.equal(exit == 0, res.ok)
        assert.equal(fixture.stdout or "", res.stdout)
        assert.equal(fixture.stderr or "", res.stderr)
        assert.equal(0, res.ms)
        assert.same({}, res.isolation)
      end)
    end
  end)
end

describe("packs-examples with isolation = \"auto\" given explicitly", function()
  for _, driver in ipairs({ "local", "bwrap" }) do
    it("every example runs unchanged [" .. driver .. "]", function()
      if driver == "bwrap" and BWRAP_ERR then pending("bwrap unavailable: " .. BWRAP_ERR) return end
      local rt = runtime("auto", driver)
      assert.same({}, rt:problems())
      local n = 0
      for _, dir in ipairs(DIRS) do
        local m = manifest_of(dir)
        for op in pairs(m.ops or {}) do
          if EXAMPLES[m.name] and EXAMPLES[m.name][op] then
            local res = rt:call(request(m.name, op))
            check_output(m.name, op, res)
            -- every layer the runtime applies is applied to this call (none of
            -- the examples declares network access, so netns is among them)
            local got = {}
            for _, l in ipairs(res.isolation) do got[l] = true end
            for _, l in ipairs(rt:layers()) do assert.is_true(got[l], m.name .. "." .. op .. ": no " .. l) end
            -- the constructed view, by the core or by bubblewrap
            assert.is_true(got.rootfs == true or not core.probe().rootfs.available, m.name .. "." .. op .. ": no rootfs")
            assert.equal(driver == "bwrap", got.bwrap == true, m.name .. "." .. op)
            n = n + 1
          end
        end
      end
      assert.is_true(n >= 20, "only " .. n .. " examples ran")
    end)
  end
end)

describe("packs-examples hardening", function()
  it("git finds no repository, not even the checkout the pack lies in", function()
    local res = runtime():call({ pack = "git", args = { "rev-parse", "--show-toplevel" } })
    assert.is_false(res.ok)
    assert.equal(128, res.exit)
    assert.matches("not a git repository", res.stderr)
    res = runtime():call({ pack = "git", args = { "config", "--list" } })
    assert.equal("", res.stdout)
  end)

  it("sqlite runs in safe mode, and query's sql never becomes an option", function()
    local res = runtime():call({ pack = "sqlite", op = "query", params = { sql = ".shell echo pwned" } })
    assert.is_false(res.ok)
    assert.equal("", res.stdout)
    assert.matches("safe mode", res.stderr)
    res = runtime():call({ pack = "sqlite", op = "query", params = { sql = "select readfile('hcp.json')" } })
    assert.is_false(res.ok)
    assert.matches("safe mode", res.stderr)
    res = runtime():call({ pack = "sqlite", op = "query", params = { sql = "-version" } })
    assert.is_false(res.ok)
    assert.matches("syntax error", res.stderr)
  end)

  it("qrencode's text is data after --: an option-like text writes no file", function()
    local before = assert(core.listdir(DIR .. "/qrencode"))
    local res = runtime():call({ pack = "qrencode", op = "ascii", params = { text = "-oinjected.png" }, stdin = "x" })
    assert.is_true(res.ok, res.error)
    assert.matches("##", res.stdout)
    assert.same(before, assert(core.listdir(DIR .. "/qrencode")))
    assert.is_nil(core.kind(DIR .. "/qrencode/injected.png"))
  end)

  it("xml's xpath_file cannot leave the pack root, and the document is parsed without network", function()
    local res = runtime():call({ pack = "xml", op = "xpath_file", params = { expr = "1", file = "../jq/hcp.json" } })
    assert.equal(126, res.exit)
    assert.equal("workspace: path escapes the jail: argument 4", res.error)
    res = runtime():call({ pack = "xml", op = "check", stdin = "<a><b>hi</a>" })
    assert.is_false(res.ok)
    assert.equal(1, res.exit)
    assert.matches("parser error", res.stderr)
  end)

  it("wordfreq refuses an n that is not a positive integer", function()
    for _, n in ipairs({ 0, -1, 2.5 }) do
      local res = runtime():call({ pack = "wordfreq", op = "top", params = { n = n }, stdin = "a b" })
      assert.equal(2, res.exit, tostring(n))
      assert.matches("positive integer", res.stderr)
    end
  end)
end)
