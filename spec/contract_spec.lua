-- The public surface of ../shared/design/contract.md §1–§5: manifests,
-- envelopes, bindings, policy and hcp.create. One or more `it` per rule.
local hcp = require("hcp")
local manifest = require("hcp.manifest")
local envelope = require("hcp.envelope")
local json = require("hcp.json")
local S = require("support")

local function problems_of(m)
  local _, problems = manifest.validate(m, "/x/hcp.json", "/x")
  local fields = {}
  for _, p in ipairs(problems) do fields[#fields + 1] = p.field .. ": " .. p.message end
  return fields, problems
end

describe("contract §1 manifests", function()
  it("accepts the contract's own example manifest", function()
    local pack, problems = manifest.load(S.REPO .. "/packs-examples/jq")
    assert.same({}, problems)
    assert.equal("jq", pack.name)
    assert.equal(10000, pack.wrap.timeout_ms)
  end)

  it("requires hcp = 1, a valid name and wrap.bin, naming each field", function()
    local fields = problems_of({ hcp = 2, name = "Bad Name", wrap = {} })
    assert.same({ "hcp: must be the integer 1, got 2",
      'name: "Bad Name" does not match ^[a-z0-9][a-z0-9._-]{0,63}$', "wrap: required object" }, fields)
  end)

  it("rejects any class but wrap, naming it", function()
    local fields = problems_of({ hcp = 1, name = "a", class = "agent", wrap = { bin = "jq" } })
    assert.same({ 'class: unsupported class "agent" (only "wrap")' }, fields)
  end)

  it("rejects a wrap.bin that is neither bare, absolute nor ./relative", function()
    local fields = problems_of({ hcp = 1, name = "a", wrap = { bin = "bin/jq" } })
    assert.matches("^wrap.bin: ", fields[1])
  end)

  it("rejects LD_* , HCP_SANDBOX, PATH and a binding's variable in agent_env (load error)", function()
    local fields = problems_of({ hcp = 1, name = "a",
      bindings = { gh = { family = "token", env = "GH_TOKEN" } },
      wrap = { bin = "jq", agent_env = { LD_PRELOAD = "/tmp/evil.so", HCP_SANDBOX = "x", PATH = "/tmp", GH_TOKEN = "x" } } })
    table.sort(fields)
    assert.equal(4, #fields)
    assert.matches("^wrap.agent_env.GH_TOKEN: GH_TOKEN is the variable of binding", fields[1])
    assert.matches("^wrap.agent_env.HCP_SANDBOX: ", fields[2])
    assert.matches("^wrap.agent_env.LD_PRELOAD: .*loader injection", fields[3])
    assert.matches("^wrap.agent_env.PATH: ", fields[4])
  end)

  it("rejects unknown fields inside wrap, ops, bindings and mocks (a typo must not change what runs)", function()
    local fields = problems_of({ hcp = 1, name = "a", wrap = { bin = "jq", agentenv = {} },
      ops = { q = { argz = {} } } })
    assert.same({ "ops.q.argz: unknown field", "wrap.agentenv: unknown field" }, fields)
  end)

  it("rejects an op placeholder that is not a declared parameter", function()
    local fields = problems_of({ hcp = 1, name = "a", wrap = { bin = "jq" },
      ops = { q = { args = { "{expr}" }, params = {} } } })
    assert.same({ "ops.q.args[1]: placeholder {expr} is not a declared parameter" }, fields)
  end)

  it("applies the defaults: timeout 30000, workspace none, the seed's file_flags", function()
    local pack = manifest.validate({ hcp = 1, name = "a", wrap = { bin = "jq" } }, "/x/hcp.json", "/x")
    assert.equal(30000, pack.wrap.timeout_ms)
    assert.equal("none", pack.wrap.workspace.mode)
    assert.same({ "--file", "--json-file", "--output", "-o", "--env-file" }, pack.wrap.workspace.file_flags)
    assert.same({}, pack.wrap.workspace.home_env)
    local ws = manifest.validate({ hcp = 1, name = "a", wrap = { bin = "jq", workspace = { mode = "workspace" } } }, "/x/hcp.json", "/x")
    assert.same({ "HOME" }, ws.wrap.workspace.home_env)
  end)

  it("reports a bad pack with its path and field, and still loads the others", function()
    local parent = S.tmpdir("mixed-")
    S.pack(S.manifest("good", "env"), parent)
    S.pack('{"hcp":1,"name":"broken","wrap":{"bin":"env","timeout_ms":-5}}', parent, "broken")
    S.pack("{not json", parent, "garbage")
    local rt = assert(hcp.create({ pack_dirs = { parent } }))
    assert.equal(1, #rt:packs())
    assert.equal("good", rt:packs()[1].name)
    local problems = rt:problems()
    assert.equal(2, #problems)
    assert.equal(parent .. "/broken/hcp.json", problems[1].file)
    assert.equal("wrap.timeout_ms", problems[1].field)
    assert.equal(parent .. "/garbage/hcp.json", problems[2].file)
    assert.matches("invalid JSON", problems[2].message)
  end)

  it("strict = true makes one bad pack fail create, naming the file and field", function()
    local parent = S.tmpdir("strict-")
    S.pack('{"hcp":1,"name":"broken","wrap":{"bin":"env","network":"yes"}}', parent, "broken")
    local rt, err = hcp.create({ pack_dirs = { parent }, strict = true })
    assert.is_nil(rt)
    assert.equal("manifest: " .. parent .. "/broken/hcp.json: wrap.network: must be a boolean", err)
  end)

  it("a pack_dirs entry may be a pack root or a folder of pack roots; a missing one is reported", function()
    local parent = S.tmpdir("roots-")
    local root = S.pack(S.manifest("one", "env"), parent)
    assert.equal(1, #assert(hcp.create({ pack_dirs = { root } })):packs())
    assert.equal(1, #assert(hcp.create({ pack_dirs = { parent } })):packs())
    local rt = assert(hcp.create({ pack_dirs = { parent .. "/nope" } }))
    assert.matches("does not exist", rt:problems()[1].message)
  end)

  it("refuses a second pack with the same name", function()
    local a, b = S.tmpdir("a-"), S.tmpdir("b-")
    S.pack(S.manifest("dup", "env"), a)
    S.pack(S.manifest("dup", "pwd"), b)
    local rt = assert(hcp.create({ pack_dirs = { a, b } }))
    assert.equal(1, #rt:packs())
    assert.equal("name", rt:problems()[1].field)
  end)

  it("option packs loads only the packs it names; a manifest that could be one of them keeps its problem", function()
    local parent = S.tmpdir("only-")
    S.pack(S.manifest("want", "env"), parent)
    S.pack(S.manifest("other", "pwd"), parent)
    S.pack('{"hcp":1,"name":"broken","wrap":{"bin":"env","timeout_ms":-5}}', parent, "broken")
    S.pack("{not json", parent, "garbage")
    S.pack('{"hcp":1,"wrap":{"bin":"env"}}', parent, "nameless")
    local rt = assert(hcp.create({ pack_dirs = { parent }, packs = { "want" } }))
    assert.same({ "want" }, { rt:packs()[1].name, rt:packs()[2] })
    local allowed = table.concat(rt:allowlist(), " ")
    assert.matches("env", allowed)
    assert.not_matches("pwd", allowed) -- the other pack's bin is not allowed
    local files = {}
    for _, p in ipairs(rt:problems()) do files[#files + 1] = p.file:match("([^/]+)/hcp%.json$") end
    table.sort(files)
    -- the unreadable one and the nameless one could have been "want"; the
    -- broken one is another pack's, not validated
    assert.same({ "garbage", "nameless" }, files)
    assert.equal('envelope: no pack named "other"', rt:call({ pack = "other" }).error)
    assert.is_true(rt:call({ pack = "want" }).ok)
    assert.same({ nil, 'hcp.create: option "packs" must be a table, got string' }, { hcp.create({ packs = "want" }) })
    assert.matches('option "packs"', select(2, hcp.create({ packs = { 1 } })))
  end)

  it("option packs: the first valid pack of a name wins, as when all are loaded", function()
    local a, b, c = S.tmpdir("a-"), S.tmpdir("b-"), S.tmpdir("c-")
    S.pack('{"hcp":1,"name":"x","wrap":{"bin":"env","timeout_ms":-5}}', a, "x")
    S.pack(S.manifest("x", "pwd"), b)
    S.pack(S.manifest("x", "env"), c)
    local all = assert(hcp.create({ pack_dirs = { a, b, c } }))
    local only = assert(hcp.create({ pack_dirs = { a, b, c }, packs = { "x" } }))
    assert.equal("/usr/bin/pwd", all:packs()[1].path)
    assert.equal(all:packs()[1].root, only:packs()[1].root)
    assert.equal(1, #only:packs())
  end)
end)

describe("contract §1 ops", function()
  local rt
  setup(function()
    local root = S.pack(S.manifest("argv", "./bin/argv", {
      ops = {
        greet = { args = { "--name={who}", "{who}" }, params = { who = "string" } },
        num = { args = { "{n}", "{flag}" }, params = { n = "number", flag = "boolean" } },
      },
    }))
    S.mkdir(root .. "/bin")
    S.write(root .. "/bin/argv", "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n", 493)
    rt = assert(hcp.create({ pack_dirs = { root } }))
  end)

  it("replaces {param} inside exactly one argv element, never splitting it", function()
    local res = rt:call({ pack = "argv", op = "greet", params = { who = "a b; rm -rf / $(id) `id` \n*" } })
    assert.is_true(res.ok, res.error)
    assert.equal("[--name=a b; rm -rf / $(id) `id` \n*]\n[a b; rm -rf / $(id) `id` \n*]\n", res.stdout)
  end)

  it("renders numbers and booleans, and checks parameter types", function()
    assert.equal("[3]\n[true]\n", rt:call({ pack = "argv", op = "num", params = { n = 3, flag = true } }).stdout)
    local res = rt:call({ pack = "argv", op = "num", params = { n = "3", flag = true } })
    assert.equal(126, res.exit)
    assert.equal('envelope: parameter "n" of "argv.num" must be a number', res.error)
  end)

  it("refuses a missing or unknown parameter and an unknown op", function()
    assert.equal('envelope: op "argv.greet" is missing parameter "who"', rt:call({ pack = "argv", op = "greet" }).error)
    assert.equal('envelope: op "argv.greet" has no parameter "x"',
      rt:call({ pack = "argv", op = "greet", params = { who = "a", x = 1 } }).error)
    assert.equal('envelope: pack "argv" has no op "nope"', rt:call({ pack = "argv", op = "nope" }).error)
  end)

  it("puts op args first, then raw args", function()
    local res = rt:call({ pack = "argv", op = "greet", params = { who = "w" }, args = { "raw" } })
    assert.equal("[--name=w]\n[w]\n[raw]\n", res.stdout)
  end)
end)

describe("contract §2 envelopes", function()
  it("refuses unknown top-level fields", function()
    local rt = assert(hcp.create({}))
    local res = rt:call({ pack = "jq", x = 1 })
    assert.equal('envelope: unknown field "x"', res.error)
    assert.equal(126, res.exit)
  end)

  it("validates pack, mode, principal, args and stdin", function()
    assert.matches("pack", select(2, envelope.validate({})))
    assert.matches("mode", select(2, envelope.validate({ pack = "a", mode = "dry" })))
    assert.matches("principal", select(2, envelope.validate({ pack = "a", principal = "a/b" })))
    assert.matches("principal", select(2, envelope.validate({ pack = "a", principal = string.rep("p", 65) })))
    assert.matches("principal", select(2, envelope.validate({ pack = "a", principal = ".." })))
    assert.matches("principal", select(2, envelope.validate({ pack = "a", principal = "." })))
    assert.equal("a.b", envelope.validate({ pack = "a", principal = "a.b" }).principal)
    assert.matches("args", select(2, envelope.validate({ pack = "a", args = { 1 } })))
    assert.matches("stdin", select(2, envelope.validate({ pack = "a", stdin = 5 })))
    assert.equal("default", envelope.validate({ pack = "a" }).principal)
    assert.equal("live", envelope.validate({ pack = "a" }).mode)
  end)

  it("the result of a live call has the contract's shape and round-trips through JSON", function()
    local rt = assert(hcp.create({ pack_dirs = { "packs-examples/jq" } }))
    local res = rt:call({ hcp = 1, id = "c-17", pack = "jq", op = "eval", params = { expr = "1+1" } })
    assert.is_true(res.ok)
    assert.equal("c-17", res.id)
    assert.equal(0, res.exit)
    assert.equal("2\n", res.stdout)
    assert.equal("", res.stderr)
    assert.same({}, res.files)
    assert.equal("sandbox", res.sandbox)
    assert.is_false(res.timed_out)
    assert.is_false(res.truncated)
    assert.is_number(res.ms)
    local wire = envelope.encode(res)
    assert.matches('^{"hcp":1,"id":"c%-17","ok":true,"exit":0,"signal":null,', wire)
    assert.matches('"files":%[%]', wire)
    local back = json.decode(wire)
    assert.equal("2\n", back.stdout)
    assert.equal(json.null, back.signal)
  end)

  it("a JSON request with nulls and \\u0000 is decoded without raising", function()
    local rt = assert(hcp.create({ pack_dirs = { "packs-examples/jq" } }))
    local req = assert(envelope.decode('{"pack":"jq","op":null,"args":["-n","\\"a\\u0000b\\""]}'))
    local res = rt:call(req)
    assert.equal(126, res.exit)
    assert.equal("envelope: argument 3 contains a NUL byte", res.error)
    assert.is_nil(envelope.decode("{bad"))
  end)

  it("a request's numeric id comes back exactly, to the last digit (found by spec/fuzz/envelope)", function()
    for _, text in ipairs({ "1.6666666666666666e69", "12345678901234567", "0.1", "3.141592653589793", "-0.5" }) do
      local req = assert(envelope.validate(assert(envelope.decode('{"pack":"nope","id":' .. text .. '}'))))
      local back = json.decode(envelope.encode(envelope.refusal(req, 126, "x", "sandbox")))
      assert.equal(req.id, back.id, text)
    end
    assert.equal('{"a":0.1}', json.encode({ a = 0.1 }))   -- and short where short is exact
  end)

  it("numbers outside JSON's grammar (nan, inf, hex) are invalid JSON (found by spec/fuzz/envelope)", function()
    for _, text in ipairs({ "nan", "-inf", "Infinity", "0x10" }) do
      local v, err = envelope.decode('{"pack":"jq","id":' .. text .. '}')
      assert.is_nil(v, text)
      assert.matches("^envelope: invalid JSON", err)
    end
  end)

  it("a non-zero exit is ok = false with \"exit: status N\" and keeps the output", function()
    local rt = assert(hcp.create({ pack_dirs = { "packs-examples/jq" } }))
    local res = rt:call({ pack = "jq", args = { "-n", "error(\"boom\")" } })
    assert.is_false(res.ok)
    assert.equal(5, res.exit)
    assert.equal("exit: status 5", res.error)
    assert.matches("boom", res.stderr)
  end)

  it("a child killed by a signal reports \"exit: signal NAME\" and 128+N", function()
    local root = S.pack(S.manifest("selfkill", "sh", { wrap = { args = { "-c", "kill -KILL $$" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    local res = rt:call({ pack = "selfkill" })
    assert.equal("SIGKILL", res.signal)
    assert.equal(137, res.exit)
    assert.equal("exit: signal SIGKILL", res.error)
  end)

  it("mock mode returns the op's fixture, or \"*\", or refuses with mock:", function()
    local rt = assert(hcp.create({ pack_dirs = { "packs-examples/jq" } }))
    assert.equal("null\n", rt:call({ pack = "jq", op = "eval", params = { expr = "1" }, mode = "mock" }).stdout)
    local root = S.pack(S.manifest("nomock", "env"))
    rt = assert(hcp.create({ pack_dirs = { root } }))
    local res = rt:call({ pack = "nomock", mode = "mock" })
    assert.equal('mock: no fixture for "nomock.exec"', res.error)
    assert.equal(126, res.exit)
  end)

  it("an unknown pack is refused with envelope:", function()
    local res = assert(hcp.create({})):call({ pack = "nope" })
    assert.equal('envelope: no pack named "nope"', res.error)
  end)
end)

describe("contract §3 bindings", function()
  local function pack_with(as)
    return S.pack(S.manifest("b", "sh", {
      wrap = { args = { "-c", 'echo "$TOK"; if [ -f "$TOK" ]; then stat -c %a "$TOK"; cat "$TOK"; echo; fi' } },
      bindings = { tok = { family = "token", env = "TOK", as = as } },
    }))
  end

  it("fails closed when the minter errors, returns nil, or returns an empty token", function()
    local root = pack_with("env")
    for _, minter in ipairs({ function() return nil end, function() return "" end, function() return 42 end }) do
      local rt = assert(hcp.create({ pack_dirs = { root }, bindings = { tok = minter } }))
      local res = rt:call({ pack = "b" })
      assert.equal('binding: mint failed for "tok"', res.error)
      assert.is_nil(res.stdout)
    end
    -- what a minter raises is kept, after the fixed prefix (never swallowed)
    local rt = assert(hcp.create({ pack_dirs = { root }, bindings = { tok = function() error("vault sealed", 0) end } }))
    local res = rt:call({ pack = "b" })
    assert.equal('binding: mint failed for "tok": vault sealed', res.error)
    assert.is_nil(res.stdout)
  end)

  it("as = \"file\" puts the token in a 0600 file whose path is the variable, removed after the call", function()
    local root = pack_with("file")
    local rt = assert(hcp.create({ pack_dirs = { root }, bindings = { tok = function() return "s3cret" end } }))
    local res = rt:call({ pack = "b" })
    assert.is_true(res.ok, res.error)
    local path, mode, content = res.stdout:match("^(.-)\n(%d+)\n(.-)\n$")
    assert.equal("600", mode)
    assert.equal("s3cret", content)
    assert.is_nil(require("hcp.core").kind(path))
  end)

  it("hcp.create refuses a minter that is not a function", function()
    local rt, err = hcp.create({ bindings = { tok = "abc" } })
    assert.is_nil(rt)
    assert.equal("hcp.create: bindings.tok must be a function (the minter)", err)
  end)
end)

describe("contract §4 policy", function()
  local root
  setup(function()
    root = S.pack(S.manifest("p", "true", { ops = { read = { args = {} }, write = { args = {} },
      danger = { args = {}, confirm = true } } }))
  end)

  it("with no policy every op is allowed", function()
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.is_true(rt:call({ pack = "p", op = "read" }).ok)
    assert.is_true(rt:call({ pack = "p", op = "write" }).ok)
  end)

  it("matches pack.op, pack.* and *, deny wins, uncovered calls are refused", function()
    local rt = assert(hcp.create({ pack_dirs = { root }, policy = { allow = { "p.read" } } }))
    assert.is_true(rt:call({ pack = "p", op = "read" }).ok)
    local res = rt:call({ pack = "p", op = "write" })
    assert.equal('policy: "p.write" not covered', res.error)
    assert.equal(126, res.exit)
    rt = assert(hcp.create({ pack_dirs = { root }, policy = { allow = { "p.*" }, deny = { "p.write" } } }))
    assert.is_true(rt:call({ pack = "p", op = "read" }).ok)
    assert.equal('policy: "p.write" not covered', rt:call({ pack = "p", op = "write" }).error)
    rt = assert(hcp.create({ pack_dirs = { root }, policy = { allow = { "*" }, deny = { "*" } } }))
    assert.is_false(rt:call({ pack = "p", op = "read" }).ok)
    rt = assert(hcp.create({ pack_dirs = { root }, policy = { allow = {} } }))
    assert.is_false(rt:call({ pack = "p", op = "read" }).ok)
  end)

  it("a raw-args call is named pack.exec", function()
    local rt = assert(hcp.create({ pack_dirs = { root }, policy = { allow = { "p.read" } } }))
    assert.equal('policy: "p.exec" not covered', rt:call({ pack = "p" }).error)
    rt = assert(hcp.create({ pack_dirs = { root }, policy = { allow = { "p.exec" }, confirm = function() return true end } }))
    assert.is_true(rt:call({ pack = "p" }).ok)
  end)

  it("confirm: true needs policy.confirm to answer true; none, false or an error refuses", function()
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.equal('policy: "p.danger" not confirmed', rt:call({ pack = "p", op = "danger" }).error)
    local asked
    rt = assert(hcp.create({ pack_dirs = { root }, policy = { confirm = function(c) asked = c; return true end } }))
    assert.is_true(rt:call({ pack = "p", op = "danger", id = "x" }).ok)
    assert.equal("p.danger", asked.name)
    assert.equal("x", asked.id)
    for _, answer in ipairs({ function() return false end, function() return "yes" end }) do
      rt = assert(hcp.create({ pack_dirs = { root }, policy = { confirm = answer } }))
      assert.equal('policy: "p.danger" not confirmed', rt:call({ pack = "p", op = "danger" }).error)
    end
    -- an error in the callback refuses, and says what it raised
    rt = assert(hcp.create({ pack_dirs = { root }, policy = { confirm = function() error("no terminal", 0) end } }))
    assert.equal('policy: "p.danger" not confirmed: confirm raised: no terminal',
      rt:call({ pack = "p", op = "danger" }).error)
  end)

  it("a raw-args call of a pack with a confirm op needs the confirmation too (it is the whole CLI)", function()
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.equal('policy: "p.exec" not confirmed', rt:call({ pack = "p" }).error)
    rt = assert(hcp.create({ pack_dirs = { root }, policy = { confirm = function(c) return c.name == "p.exec" end } }))
    assert.is_true(rt:call({ pack = "p" }).ok)
    local plain = S.pack(S.manifest("q", "true", { ops = { read = { args = {} } } }))
    assert.is_true(assert(hcp.create({ pack_dirs = { plain } })):call({ pack = "q" }).ok)
  end)

  it("policy applies to mock calls too", function()
    local rt = assert(hcp.create({ pack_dirs = { "packs-examples/jq" }, policy = { deny = { "jq.filter" } } }))
    assert.equal('policy: "jq.filter" not covered',
      rt:call({ pack = "jq", op = "filter", params = { expr = "." }, mode = "mock" }).error)
  end)

  it("hcp.create refuses a malformed policy", function()
    assert.matches("policy: unknown field", select(2, hcp.create({ policy = { allw = {} } })))
    assert.matches("policy.allow%[1%]", select(2, hcp.create({ policy = { allow = { "jq" } } })))
    assert.matches("policy.confirm", select(2, hcp.create({ policy = { confirm = true } })))
  end)
end)

describe("contract §5 hcp.create", function()
  it("returns nil, message for unknown options and wrong types, never raising", function()
    assert.same({ nil, 'hcp.create: unknown option "pack_dir"' }, { hcp.create({ pack_dir = {} }) })
    assert.same({ nil, 'hcp.create: option "pack_dirs" must be a table, got string' }, { hcp.create({ pack_dirs = "x" }) })
    assert.same({ nil, "hcp.create: options must be a table" }, { hcp.create(42) })
    assert.matches("allow_bins%[1%]", select(2, hcp.create({ allow_bins = { "bin/jq" } })))
    assert.matches("search_path", select(2, hcp.create({ search_path = "relative:/usr/bin" })))
    assert.matches("isolation", select(2, hcp.create({ isolation = "maximal" })))
    assert.matches("driver", select(2, hcp.create({ driver = "docker" })))
    assert.matches("state_dir", select(2, hcp.create({ state_dir = "rel" })))
  end)

  it("exposes version, mode, packs, allowlist and close", function()
    assert.matches("^0%.%d+%.%d+$", hcp.version)
    local rt = assert(hcp.create({ pack_dirs = { "packs-examples/jq" } }))
    local p = rt:packs()[1]
    assert.equal("jq", p.name)
    assert.equal("/usr/bin/jq", p.path)
    assert.equal("wrap", p.class)
    assert.same({ "eval", "filter", "filter_file" }, p.ops)
    rt:close()
    assert.equal("spawn: runtime is closed", rt:call({ pack = "jq" }).error)
  end)

  it("rt:call_all runs calls concurrently and returns results in order", function()
    -- a barrier in a directory both calls share (isolation "minimal": the
    -- child may write there): each child marks its arrival and waits for the
    -- other, so each sees two marks only if both ran at the same time
    local script = 'cd "$1"; touch "arrived-$2"; ' .. S.sh_wait('[ $(ls arrived-* | wc -l) -ge 2 ]', 20)
      .. '; echo "$2 saw $(ls arrived-* | wc -l)"'
    local root = S.pack(S.manifest("nap", "sh", { wrap = { args = { "-c", script, "sh" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root }, isolation = "minimal" }))
    local dir = S.tmpdir("barrier-")
    local results = rt:call_all({ { pack = "nap", id = 1, args = { dir, "a" } }, { pack = "nope", id = 2 },
      { pack = "nap", id = 3, args = { dir, "c" } } })
    assert.equal(1, results[1].id)
    assert.is_true(results[1].ok, results[1].error)
    assert.equal("a saw 2\n", results[1].stdout)
    assert.equal(2, results[2].id)
    assert.equal(126, results[2].exit)
    assert.equal(3, results[3].id)
    assert.is_true(results[3].ok, results[3].error)
    assert.equal("c saw 2\n", results[3].stdout)
  end)
end)
