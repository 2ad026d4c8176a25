-- The agent-facing half of a pack (contract §8, issue 13): typed params in
-- the manifest (description, required, default, enum; stdin, output,
-- read_only), the one check every call's params go through (hcp.ops), and
-- the tool list built from them (rt:tools, hcp tools).
local hcp = require("hcp")
local json = require("hcp.json")
local ops = require("hcp.ops")
local tools = require("hcp.tools")
local manifest = require("hcp.manifest")
local S = require("support")

local HCP = S.HCP
local EXAMPLES = S.REPO .. "/packs-examples"

local function problems_of(m)
  local _, probs = manifest.validate(json.decode(json.encode(m)), "/p/hcp.json", "/p")
  local out = {}
  for i, p in ipairs(probs) do out[i] = p.field .. ": " .. p.message end
  return out
end

local function op_manifest(op, extra)
  local m = S.manifest("t", "/bin/echo", { ops = { o = op } })
  for k, v in pairs(extra or {}) do m[k] = v end
  return m
end

-- A pack whose bin prints each argument as [arg], to see the argv.
local function argv_pack(ops_table, extra)
  local root = S.pack(S.manifest("argv", "./bin/argv", { ops = ops_table }))
  S.mkdir(root .. "/bin")
  S.write(root .. "/bin/argv", "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]' \"$a\"; done\necho\n", 493)
  local opts = { pack_dirs = { root } }
  for k, v in pairs(extra or {}) do opts[k] = v end
  return assert(hcp.create(opts)), root
end

describe("manifest ops: parameters as objects", function()
  it("normalises both forms to { type, required, ... } and keeps old manifests valid", function()
    local pack = assert(manifest.validate(json.decode(json.encode(op_manifest({ args = { "{a}", "--b={b}", "{c}" },
      params = { a = "string", b = { type = "integer", required = false, description = "bee" },
        c = { type = "string", default = "x", enum = { "x", "y" } } } }))), "/p/hcp.json", "/p"))
    local p = pack.ops.o.params
    assert.same({ type = "string", required = true }, p.a)
    assert.same({ type = "integer", required = false, description = "bee" }, p.b)
    assert.same({ type = "string", required = false, default = "x", enum = { "x", "y" } }, p.c)
    assert.same({}, problems_of(S.manifest("old", "/bin/echo", { ops = { o = { args = { "{n}" }, params = { n = "number" } } } })))
  end)

  it("names the field of each problem in a parameter object", function()
    assert.same({}, problems_of(op_manifest({ args = { "{a}" }, params = { a = { type = "file", mode = "in" } } })))
    local cases = {
      { { type = "date" }, "ops.o.params.a.type: type must be string, number, integer, boolean or file, got date" },
      { { type = "string", mode = "in" }, "ops.o.params.a.mode: only a parameter of type file has a mode" },
      { { type = "string", format = "uri" }, "ops.o.params.a.format: unknown field" },
      { { type = "integer", default = 1.5 }, "ops.o.params.a.default: must be an integer" },
      { { type = "string", required = true, default = "x" }, "ops.o.params.a.default: a required parameter has no default" },
      { { type = "string", enum = {} }, "ops.o.params.a.enum: must be a non-empty array of string values" },
      { { type = "string", enum = { "x", 1 } }, "ops.o.params.a.enum[2]: must be a string" },
      { { type = "number", enum = { 1, 1 } }, "ops.o.params.a.enum[2]: repeats 1" },
      { { type = "string", enum = { "x" }, default = "y" }, "ops.o.params.a.default: is not one of the enum values" },
      { { type = "string", description = 5 }, "ops.o.params.a.description: must be a string" },
      { { type = "string", required = "no" }, "ops.o.params.a.required: must be a boolean" },
      { { description = "no type" }, "ops.o.params.a.type: type must be string, number, integer, boolean or file, got nil" },
      { {}, 'ops.o.params.a: must be a type name or an object with a "type"' },
      { "file", 'ops.o.params.a: type file needs a mode: write { "type": "file", "mode": "in" } (or "out")' },
      { { type = "file" }, 'ops.o.params.a.mode: a parameter of type file needs a mode: "in" (a file it reads) or "out" '
        .. '(a file it writes)' },
      { { type = "file", mode = "inout" }, 'ops.o.params.a.mode: must be "in" or "out", got inout' },
      { { type = "file", mode = "in", enum = { "a" } }, "ops.o.params.a.enum: a parameter of type file has no enum" },
      { { type = "file", mode = "out", default = 3 }, "ops.o.params.a.default: must be a string" },
      { { type = "file", mode = "out", default = "../x" },
        "ops.o.params.a.default: must be a path relative to out_dir that stays inside it" },
      { { type = "file", mode = "out", default = "/tmp/x" },
        "ops.o.params.a.default: must be a path relative to out_dir that stays inside it" },
    }
    for _, c in ipairs(cases) do
      assert.same({ c[2] }, problems_of(op_manifest({ args = { "{a}" }, params = { a = c[1] } })), json.encode(c[1]))
    end
  end)

  it("places a file parameter where a path begins, one per argument, nothing after it (issue 15)", function()
    local f = { type = "file", mode = "in" }
    for _, ok in ipairs({ "{a}", "--in={a}", "if={a}", "-i{a}", "-in={a}" }) do
      assert.same({}, problems_of(op_manifest({ args = { ok }, params = { a = f } })), ok)
    end
    assert.same({ 'ops.o.args[1]: text after the file parameter {a} (".bak"): the file is the parameter\'s value, whole' },
      problems_of(op_manifest({ args = { "{a}.bak" }, params = { a = f } })))
    assert.same({ 'ops.o.args[1]: the file parameter {a} must stand alone, after "--flag=" or "key=", or glued to a short '
      .. 'flag ("-o{a}"), not after "prefix-"' }, problems_of(op_manifest({ args = { "prefix-{a}" }, params = { a = f } })))
    assert.same({ "ops.o.args[1]: holds two file parameters ({a}, {b}): give each file its own argument" },
      problems_of(op_manifest({ args = { "{a}={b}" }, params = { a = f, b = f } })))
  end)

  it("checks stdin, output, read_only and description on an op", function()
    assert.same({}, problems_of(op_manifest({ args = {}, stdin = { description = "the text" }, output = "json", read_only = true })))
    assert.same({}, problems_of(op_manifest({ args = {}, stdin = true, output = "file" })))
    assert.same({ 'ops.o.output: must be "text", "json" or "file", got png', "ops.o.read_only: must be a boolean",
      'ops.o.stdin: must be true, false or { "description": … }' },
      problems_of(op_manifest({ args = {}, stdin = "yes", output = "png", read_only = 1 })))
    assert.same({ "ops.o.stdin.description: must be a string", "ops.o.stdin.mode: unknown field" },
      problems_of(op_manifest({ args = {}, stdin = { description = 1, mode = "x" } })))
    assert.same({ 'ops.o.params.stdin: "stdin" names the op\'s stdin (ops.o.stdin); give the parameter another name' },
      problems_of(op_manifest({ args = { "{stdin}" }, params = { stdin = "string" }, stdin = true })))
  end)

  it("reserves the op name exec, which names the raw-args call in policy", function()
    assert.same({ 'ops.exec: "exec" is reserved: "<pack>.exec" names the raw-args call for policy and mocks' },
      problems_of(S.manifest("t", "/bin/echo", { ops = { exec = { args = {} } } })))
  end)

  it("refuses an optional parameter alone after a flag, which would strand the flag", function()
    local probs = problems_of(op_manifest({ args = { "-o", "{out}", "{in}" },
      params = { out = { type = "string", required = false }, ["in"] = "string" } }))
    assert.equal(1, #probs)
    assert.matches('^ops%.o%.args%[2%]: {out} is optional: when absent this element is dropped and "%-o" is left', probs[1])
    -- with a default, joined to the flag, or after "--" it is fine
    for _, args in ipairs({ { "-o{out}" }, { "--out={out}" }, { "--", "{out}" } }) do
      assert.same({}, problems_of(op_manifest({ args = args, params = { out = { type = "string", required = false } } })))
    end
    assert.same({}, problems_of(op_manifest({ args = { "-o", "{out}" }, params = { out = { type = "string", default = "-" } } })))
  end)

  it("hcp validate lists the new fields' problems with file and field", function()
    local root = S.pack(op_manifest({ args = { "{n}" }, params = { n = { type = "integer", default = "ten" } }, output = "xml" }))
    local out, code = S.sh(HCP .. " validate " .. S.q(root) .. " 2>&1")
    assert.equal(1, code)
    assert.truthy(out:find("manifest: " .. root .. "/hcp.json: ops.o.output: must be", 1, true), out)
    assert.truthy(out:find("manifest: " .. root .. "/hcp.json: ops.o.params.n.default: must be an integer", 1, true), out)
  end)
end)

describe("hcp.ops: the params check and the template", function()
  local op = assert(manifest.validate(json.decode(json.encode(op_manifest({
    args = { "{s}", "--n={n}", "{e}", "{f}" },
    params = { s = "string", n = { type = "integer", required = false }, e = { type = "string", enum = { "a", "b" }, default = "a" },
      f = { type = "number", required = false } } }))), "/p/hcp.json", "/p")).ops.o

  it("accepts integers as JSON gives them (3 and 3.0) and refuses fractions and unsafe sizes", function()
    assert.same({ s = "x", n = "3", e = "a" }, ops.check_params("t", op, { s = "x", n = 3.0 }))
    for _, bad in ipairs({ 3.5, 2 ^ 60, "3", 0 / 0, math.huge }) do
      assert.same({ nil, 'envelope: parameter "n" of "t.o" must be an integer' },
        { ops.check_params("t", op, { s = "x", n = bad }) }, tostring(bad))
    end
    for _, bad in ipairs({ 0 / 0, math.huge, -math.huge, "1" }) do
      assert.same({ nil, 'envelope: parameter "f" of "t.o" must be a number' }, { ops.check_params("t", op, { s = "x", f = bad }) })
    end
  end)

  it("refuses a value outside the enum, naming the values", function()
    assert.same({ nil, 'envelope: parameter "e" of "t.o" must be one of "a", "b"' },
      { ops.check_params("t", op, { s = "x", e = "c" }) })
  end)

  it("reports unknown before missing, in sorted order", function()
    assert.same({ nil, 'envelope: op "t.o" has no parameter "zz"' }, { ops.check_params("t", op, { zz = 1 }) })
    assert.same({ nil, 'envelope: op "t.o" is missing parameter "s"' }, { ops.check_params("t", op, {}) })
    assert.same({ nil, 'envelope: op "t.o" has no parameter "1"' }, { ops.check_params("t", op, { s = "x", [1] = "y" }) })
  end)

  it("drops an element whose optional parameter is absent; a default fills in", function()
    assert.same({ "x", "a" }, ops.expand(op.args, assert(ops.check_params("t", op, { s = "x" }))))
    assert.same({ "x", "--n=7", "b", "0.5" }, ops.expand(op.args, assert(ops.check_params("t", op, { s = "x", n = 7, e = "b", f = 0.5 }))))
    assert.same({ "100%d" }, ops.expand({ "{a}" }, { a = "100%d" }))
    assert.same({}, ops.expand({ "{a}-{b}" }, { a = "1" }))
  end)

  it("on the call path: no {x} is left in argv and nothing is spawned for a bad value", function()
    local rt = argv_pack({ o = { args = { "{s}", "--n={n}", "{e}" },
      params = { s = "string", n = { type = "integer", required = false },
        e = { type = "string", enum = { "a", "b" }, default = "a" } } } })
    assert.equal("[x][a]\n", rt:call({ pack = "argv", op = "o", params = { s = "x" } }).stdout)
    assert.equal("[x][--n=2][b]\n", rt:call({ pack = "argv", op = "o", params = { s = "x", n = 2, e = "b" } }).stdout)
    local res = rt:call({ pack = "argv", op = "o", params = { s = "x", e = "zz" } })
    assert.equal(126, res.exit)
    assert.is_nil(res.stdout)
    assert.equal('envelope: parameter "e" of "argv.o" must be one of "a", "b"', res.error)
    -- JSON null counts as absent
    assert.equal("[x][a]\n", rt:call({ pack = "argv", op = "o", params = { s = "x", n = json.null } }).stdout)
  end)
end)

describe("rt:tools", function()
  local function rt_of(m, opts)
    local root = S.pack(m)
    local o = { pack_dirs = { root } }
    for k, v in pairs(opts or {}) do o[k] = v end
    return assert(hcp.create(o))
  end

  local function keys(t)
    local ks = {}
    for k in pairs(t) do ks[#ks + 1] = k end
    table.sort(ks)
    return ks
  end

  local function by_name(list)
    local out = {}
    for _, t in ipairs(list) do out[t.name] = t end
    return out
  end

  local M = S.manifest("p", "/bin/echo", {
    description = "A pack",
    bindings = { api = { family = "http", env = "API_TOKEN", hosts = { "api.example.com:443" } } },
    ops = {
      look = { description = "Look", args = { "{what}" }, read_only = true, stdin = { description = "the text" },
        params = { what = { type = "string", description = "what to look at", enum = { "a", "b" } },
          n = { type = "integer", default = 3 } } },
      drop = { args = { "drop" }, confirm = true },
    },
  })

  it("lists one tool per allowed op and a raw-args tool, named <pack>__<op>", function()
    local t = by_name(rt_of(M):tools())
    assert.same({ "p__drop", "p__exec", "p__look" }, keys(t))
    local look = t.p__look
    assert.equal("p.look", look.title)
    assert.equal("p.look", look.call)
    assert.equal("p", look.pack)
    assert.equal("look", look.op)
    assert.equal("Look\n\nReads the stdin argument.", look.description)
    assert.same({ type = "object", additionalProperties = false, required = { "what" }, properties = {
      what = { type = "string", description = "what to look at", enum = { "a", "b" } },
      n = { type = "integer", default = 3 }, stdin = { type = "string", description = "the text" } } }, look.inputSchema)
    assert.same({ title = "p.look", readOnlyHint = true, destructiveHint = false, openWorldHint = true }, look.annotations)
    assert.is_false(look.confirm)
    assert.is_true(t.p__drop.confirm)
    assert.is_true(t.p__drop.annotations.destructiveHint)
    assert.is_false(t.p__drop.annotations.readOnlyHint)
    assert.matches("confirms", t.p__drop.description)
    assert.is_true(t.p__exec.raw)
    assert.same({ "args" }, t.p__exec.inputSchema.required)
    assert.is_true(t.p__exec.confirm, "a raw call of a pack with a confirm op needs the confirmation too")
  end)

  it("leaves out what the policy denies, and the raw tool unless <pack>.exec is allowed", function()
    local t = by_name(rt_of(M, { policy = { allow = { "p.look", "p.drop" }, deny = { "p.drop" } } }):tools())
    assert.same({ "p__look" }, keys(t))
    local all = rt_of(M, { policy = { deny = { "p.drop" } } }):tools({ all = true })
    local flags = {}
    for _, x in ipairs(all) do flags[x.name] = x.allowed end
    assert.same({ p__look = true, p__drop = false, p__exec = true }, flags)
    assert.equal(2, #rt_of(M):tools({ exec = false }))
  end)

  it("openWorldHint follows network use: wrap.network or an http binding", function()
    local plain = S.manifest("q", "/bin/echo", { ops = { a = { args = {} } } })
    assert.is_false(rt_of(plain):tools()[1].annotations.openWorldHint)
    local net = S.manifest("q", "/bin/echo", { wrap = { network = true }, ops = { a = { args = {} } } })
    assert.is_true(rt_of(net):tools()[1].annotations.openWorldHint)
  end)

  it("raises for an unknown option (a caller's mistake)", function()
    local rt = rt_of(M)
    assert.has_error(function() rt:tools({ exec = "no" }) end, 'tools: option "exec" must be a boolean')
    assert.has_error(function() rt:tools({ pages = 2 }) end, 'tools: unknown option "pages"')
  end)

  it("names two tools that meet on one name apart", function()
    local parent = S.tmpdir("collide-")
    S.pack(S.manifest("a__b", "/bin/echo", { ops = { c = { args = {} } } }), parent)
    S.pack(S.manifest("a", "/bin/echo", { ops = { ["b__c"] = { args = {} } } }), parent)
    local names = {}
    for _, t in ipairs(assert(hcp.create({ pack_dirs = { parent } })):tools({ exec = false })) do names[#names + 1] = t.name end
    assert.same({ "a__b__c", "a__b.c" }, names)
  end)

  it("validates a call's arguments with the tool's schema, in the runtime's words", function()
    local rt, root = argv_pack({ o = { args = { "{s}", "--n={n}" }, stdin = true,
      params = { s = { type = "string", enum = { "x", "y" } }, n = { type = "integer", required = false } } } })
    assert.truthy(root)
    local t = by_name(rt:tools()).argv__o
    local cases = {
      { s = "z" }, { s = "x", n = 1.5 }, {}, { s = "x", q = 1 }, { s = "x", stdin = 5 }, { s = 1 },
    }
    for _, args in ipairs(cases) do
      local req, err = tools.request(t, args, { id = "i" })
      local params = {}
      for k, v in pairs(args) do if k ~= "stdin" then params[k] = v end end
      local res = rt:call({ pack = "argv", op = "o", params = params, stdin = args.stdin })
      if args.stdin ~= 5 then
        assert.is_nil(req)
        assert.equal(res.error, err, json.encode(args))
      else
        assert.equal('envelope: parameter "stdin" of "argv.o" must be a string', err)
      end
    end
    local req = assert(tools.request(t, { s = "x", n = 4, stdin = "in" }, { id = "i" }))
    assert.same({ id = "i", pack = "argv", op = "o", params = { s = "x", n = 4 }, stdin = "in" }, req)
    assert.equal("[x][--n=4]\n", rt:call(req).stdout)
    local raw = assert(tools.request(by_name(rt:tools()).argv__exec, { args = { "a", "b" } }))
    assert.same({ pack = "argv", args = { "a", "b" } }, raw)
    assert.same({ nil, 'envelope: parameter "args" of "argv.exec" must be an array of strings' },
      { tools.request(by_name(rt:tools()).argv__exec, { args = { "a", 1 } }) })
    assert.same({ nil, 'envelope: the arguments of "argv.o" must be an object' }, { tools.request(t, { 1, 2 }) })
    -- the envelope's own fields are not arguments: an agent cannot set the id (which a
    -- confirmation is bound to), the principal, the mode or raw args through them
    for _, field in ipairs({ "id", "principal", "mode", "args", "pack", "op", "timeout_ms" }) do
      assert.same({ nil, string.format('envelope: op "argv.o" has no parameter %q', field) },
        { tools.request(t, { s = "x", [field] = "v" }, { id = "i" }) })
    end
    assert.same({ nil, 'envelope: op "argv.exec" has no parameter "id"' },
      { tools.request(by_name(rt:tools()).argv__exec, { args = {}, id = "mcp-1" }) })
    -- JSON null for a required parameter is a missing one, never an empty argument
    assert.same({ nil, 'envelope: op "argv.o" is missing parameter "s"' }, { tools.request(t, { s = json.null }) })
  end)

  it("lists every example op, each with a description on the op and on every param", function()
    local rt = assert(hcp.create({ pack_dirs = { EXAMPLES } }))
    local t = by_name(rt:tools())
    local count = 0
    for _, p in ipairs(rt:packs()) do
      for _, o in ipairs(p.ops) do
        local tool = t[p.name .. "__" .. o]
        assert.is_table(tool, p.name .. "." .. o)
        count = count + 1
        local raw = json.decode(S.read(p.root .. "/hcp.json")).ops[o]
        assert.is_string(raw.description, p.name .. "." .. o .. " has no description")
        for name, prop in pairs(tool.inputSchema.properties) do
          assert.is_string(prop.description, p.name .. "." .. o .. "." .. name .. " has no description")
        end
      end
    end
    assert.is_true(count >= 25)
    assert.is_true(t.jq__filter.stdin)
    assert.equal("file", t.qrencode__png.output)
    assert.is_false(t.db__sql.annotations.readOnlyHint)
    assert.is_true(t.jq__eval.annotations.readOnlyHint)
  end)
end)

describe("hcp tools", function()
  local cfg
  setup(function()
    cfg = S.write(S.tmpdir("cfg-") .. "/deny.lua", 'return { policy = { deny = { "jq.eval", "jq.exec" } } }')
  end)

  it("prints each tool with its marks and params", function()
    local root = S.pack(S.manifest("m", "/bin/echo", { ops = {
      rm = { args = { "{path}" }, confirm = true, description = "Remove", params = { path = { type = "string", description = "what" } } },
      ls = { args = {}, read_only = true } } }))
    local out, code = S.sh(HCP .. " tools --pack-dir " .. S.q(root) .. " 2>&1")
    assert.equal(0, code, out)
    local rm = "m__rm [confirm]\n  Remove Runs only after the user confirms it.\n    path         string  what\n"
    assert.truthy(out:find(rm, 1, true), out)
    assert.truthy(out:find("m__ls [read-only]\n", 1, true), out)
    assert.truthy(out:find("m__exec [confirm, raw args]\n", 1, true), out)
  end)

  it("--json is the tools/list result, and the config's policy applies", function()
    local out, code = S.sh(HCP .. " tools --json --pack-dir " .. S.q(EXAMPLES) .. " --config " .. S.q(cfg))
    assert.equal(0, code, out)
    local doc = assert(json.decode(out))
    local names = {}
    for _, t in ipairs(doc.tools) do
      names[t.name] = true
      assert.is_string(t.description)
      assert.equal("object", t.inputSchema.type)
      assert.is_table(t.annotations)
      assert.equal(t.title, t._meta["hcp/call"])
    end
    assert.is_true(names.jq__filter)
    assert.is_nil(names.jq__eval)
    assert.is_nil(names.jq__exec)
    assert.is_true(names.sqlite__exec)
  end)
end)
