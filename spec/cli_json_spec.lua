-- `--json` on `hcp validate` and `hcp wrap`: exactly one JSON document on
-- stdout, whatever the outcome past argument parsing, nothing on stderr, and
-- the same exit status as without --json.
local S = require("support")
local json = require("hcp.json")
local core = require("hcp.core")

local HCP = S.HCP
local q = S.q

-- Run a command line; returns stdout, stderr, exit status.
local function run(cmdline, opts)
  opts = opts or {}
  local dir = S.tmpdir("cli-json-")
  local cmd = string.format("cd %s && env -u HCP_PACK_PATH -u HCP_CONFIG %s %s > %s 2> %s < /dev/null",
    q(opts.cwd or S.REPO), opts.env or "", cmdline, q(dir .. "/out"), q(dir .. "/err"))
  local _, _, code = os.execute(cmd)
  return S.read(dir .. "/out"), S.read(dir .. "/err"), code
end

-- The one JSON document of `out`: a single line, decoded.
local function one_document(out)
  assert.is_string(out)
  assert.matches("^[^\n]+\n$", out, nil, "stdout is not exactly one line: " .. out)
  local doc, err = json.decode(out)
  assert.is_table(doc, err)
  return doc
end

describe("hcp validate --json", function()
  it("prints {ok, packs, problems} with an empty problems array for good manifests, exit 0", function()
    local out, err, code = run(HCP .. " validate --json packs-examples")
    assert.equal(0, code)
    assert.equal("", err)
    assert.matches('"problems":%[%]', out)
    local doc = one_document(out)
    assert.is_true(doc.ok)
    local names = {}
    for _, p in ipairs(doc.packs) do names[p.name] = p end
    assert.is_table(names.jq)
    assert.equal(S.REPO .. "/packs-examples/jq/hcp.json", names.jq.file)
    assert.equal(S.REPO .. "/packs-examples/jq", names.jq.root)
  end)

  it("lists every problem as {file, field, message}, exit 1, nothing on stderr", function()
    local parent = S.tmpdir("invalid-")
    S.pack('{"hcp":2,"name":"Bad","wrap":{"bin":"x/y","timeout_ms":0}}', parent, "one")
    S.pack("{oops", parent, "two")
    S.pack(S.manifest("fine", "true"), parent)
    local empty = S.tmpdir("empty-")
    local out, err, code = run(HCP .. " validate --json " .. q(parent) .. " " .. q(parent .. "/missing")
      .. " " .. q(empty))
    assert.equal(1, code)
    assert.equal("", err)
    local doc = one_document(out)
    assert.is_false(doc.ok)
    assert.equal(1, #doc.packs)
    assert.equal("fine", doc.packs[1].name)
    local by = {}
    for _, p in ipairs(doc.problems) do
      assert.is_string(p.file)
      assert.is_string(p.field)
      assert.is_string(p.message)
      by[p.file:match("[^/]+/[^/]+$") .. " " .. p.field] = p.message
    end
    assert.equal(7, #doc.problems)
    assert.matches("must be the integer 1", by["one/hcp.json hcp"])
    assert.is_string(by["one/hcp.json name"])
    assert.is_string(by["one/hcp.json wrap.bin"])
    assert.is_string(by["one/hcp.json wrap.timeout_ms"])
    assert.matches("invalid JSON", by["two/hcp.json "])
    assert.matches("does not exist", by[(parent .. "/missing"):match("[^/]+/[^/]+$") .. " "])
    assert.matches("no hcp.json here", by[empty:match("[^/]+/[^/]+$") .. " "])
  end)

  it("gives the same problems as the text output, one per line", function()
    local parent = S.tmpdir("same-")
    S.pack('{"hcp":1,"name":"x","wrap":{"bin":"true","agent_env":{"LD_PRELOAD":"/x.so"}}}', parent, "x")
    local _, text_err, text_code = run(HCP .. " validate " .. q(parent))
    local out, _, code = run(HCP .. " validate --json " .. q(parent))
    assert.equal(text_code, code)
    local lines = {}
    for _, p in ipairs(one_document(out).problems) do
      lines[#lines + 1] = string.format("manifest: %s: %s: %s", p.file, p.field, p.message)
    end
    assert.equal(text_err, table.concat(lines, "\n") .. "\n")
  end)

  it("keeps one line when a directory name holds a newline, a quote or a control byte", function()
    local parent = S.tmpdir("odd-")
    local name = 'a\nb"c\027d'
    S.pack("{oops", parent, name)
    local out, _, code = run(HCP .. " validate --json " .. q(parent))
    assert.equal(1, code)
    local doc = one_document(out)
    assert.equal(parent .. "/" .. name .. "/hcp.json", doc.problems[1].file)
  end)
end)

describe("hcp wrap --json", function()
  it("prints {ok, file, dir, name, bin, description, mode, file_flags, output_flags} and writes a pack that validates", function()
    local dir = S.tmpdir("wrapj-")
    local out, err, code = run(HCP .. " wrap --json qrencode", { cwd = dir })
    assert.equal(0, code, err)
    assert.equal("", err)
    local doc = one_document(out)
    assert.is_true(doc.ok)
    assert.equal(dir .. "/packs/qrencode/hcp.json", doc.file)
    assert.equal(dir .. "/packs/qrencode", doc.dir)
    assert.equal("qrencode", doc.name)
    assert.equal("/usr/bin/qrencode", doc.bin)
    assert.matches("qrencode version", doc.description)
    assert.same({ "--output", "-o" }, doc.output_flags)
    assert.same({ "--read-from", "-r" }, doc.file_flags)
    assert.equal("ephemeral", doc.mode)
    assert.equal("qrencode", json.decode(S.read(doc.file)).name)
    local _, _, vcode = run(HCP .. " validate " .. q(doc.dir))
    assert.equal(0, vcode)
  end)

  it("has an empty file_flags array when --help names no file flag", function()
    local dir = S.tmpdir("wrapj0-")
    local bin = S.write(dir .. "/quiet", "#!/bin/sh\necho 'usage: quiet'\n", 493)
    local out, err, code = run(HCP .. " wrap --json " .. q(bin), { cwd = dir })
    assert.equal(0, code, err)
    assert.matches('"file_flags":%[%]', out)
    assert.is_true(one_document(out).ok)
  end)

  it("puts a failure in {ok = false, error} with the usual exit status, nothing on stderr", function()
    local dir = S.tmpdir("wrapj2-")
    S.mkdir(dir .. "/packs/jq")
    S.write(dir .. "/packs/jq/hcp.json", "precious")
    local cases = {
      { "jq", 1, "already exists" },
      { "hcp-no-such-bin-" .. tostring(os.time()), 127, "not found" },
      { "./rel", 2, "must be a bare name or an absolute path" },
      { "--name Bad jq", 2, "does not match" },
      { "--config /nonexistent/cfg.lua jq", 126, "config" },
    }
    for _, c in ipairs(cases) do
      local out, err, code = run(HCP .. " wrap --json " .. c[1], { cwd = dir })
      assert.equal(c[2], code, c[1])
      assert.equal("", err, c[1])
      local doc = one_document(out)
      assert.is_false(doc.ok, c[1])
      assert.matches(c[3], doc.error, 1, true)
    end
    assert.equal("precious", S.read(dir .. "/packs/jq/hcp.json"))
    assert.is_nil(core.kind(dir .. "/packs/hcp-no-such-bin"))
  end)

  it("without --json, a failure is one line on stderr and nothing on stdout", function()
    local dir = S.tmpdir("wrapj3-")
    local out, err, code = run(HCP .. " wrap ./rel", { cwd = dir })
    assert.equal(2, code)
    assert.equal("", out)
    assert.equal('hcp: wrap: "./rel" must be a bare name or an absolute path\n', err)
  end)
end)
