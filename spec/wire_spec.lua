-- Everything `hcp` writes as JSON is valid JSON in valid UTF-8 (issue 11,
-- category 5): a set of nasty calls through `hcp call`, `hcp run --json`,
-- `hcp list --json` and `hcp doctor --json`, every line of their output
-- checked by Python's json module on a strict UTF-8 decode — a parser that
-- is not ours.
local S = require("support")
local json = require("hcp.json")

local HCP = S.HCP
local q = S.q

local STRICT = [[python3 -c 'import json,sys; [json.loads(l) for l in sys.stdin.buffer.read().decode("utf-8","strict").splitlines()]']]

local function have_python()
  local _, code = S.sh("python3 -c 'import json' 2>/dev/null")
  return code == 0
end

-- Run a shell command line; returns its stdout and exit status.
local function run(cmdline, env)
  local dir = S.tmpdir("wire-")
  local cmd = string.format("cd %s && env -u HCP_PACK_PATH -u HCP_CONFIG XDG_STATE_HOME=%s %s %s > %s 2>/dev/null",
    q(dir), q(S.tmpdir("state-")), env or "", cmdline, q(dir .. "/out"))
  local _, _, code = os.execute(cmd)
  return S.read(dir .. "/out"), code
end

-- Whether every line of text passes the strict parser (and its message).
local function strict_ok(text)
  local dir = S.tmpdir("strict-")
  local f = S.write(dir .. "/lines", text)
  local out, code = S.sh(STRICT .. " < " .. q(f) .. " 2>&1")
  return code == 0, out
end

local function lines(text)
  local out = {}
  for l in text:gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

describe("the wire is always valid JSON (a strict UTF-8 parser reads every line)", function()
  if not have_python() then
    it("needs python3 for the strict parser", function() pending("python3 with its json module is not installed") end)
    return
  end

  local packs
  setup(function()
    packs = S.tmpdir("wirepacks-")
    local function sh_pack(name, script, extra)
      local wrap = { args = { "-c", script } }
      for k, v in pairs(extra or {}) do wrap[k] = v end
      S.pack(S.manifest(name, "sh", { wrap = wrap }), packs)
    end
    sh_pack("bytes", [[printf '\377\376 bad\n'; printf '\300\257 ov\n' >&2]])
    sh_pack("names", [[touch "$(printf 'bad\377')".txt plain.txt]], { workspace = { mode = "workspace" } })
    sh_pack("euro", [[printf '€€€€€€€€']])
    sh_pack("ok", "echo fine")
  end)

  it("hcp call: bad bytes, cut characters, odd ids, NaN, hex, duplicate keys, a line that is not UTF-8", function()
    local conf = S.write(S.tmpdir("conf-") .. "/c.lua", "return { max_output = 10 }")
    local requests = table.concat({
      '{"id":123456789012345,"pack":"bytes"}',
      '{"id":"s-2","pack":"names"}',
      '{"id":3,"pack":"euro"}',
      '{"id":NaN,"pack":"ok"}',
      '{"id":0x10,"pack":"ok"}',
      '{"id":Infinity,"pack":"ok"}',
      '{"pack":"ok","pack":"bytes"}',
      '{"id":"\xff","pack":"ok"}',
      '{"id":9007199254740993,"pack":"ok","args":["/etc/passwd"]}',
      '{"id":1.5,"pack":"ok"}',
      'not json at all \xfe',
    }, "\n") .. "\n"
    local reqfile = S.write(S.tmpdir("req-") .. "/r.jsonl", requests)
    local out, code = run(string.format("%s call --config %s --pack-dir %s %s", HCP, q(conf), q(packs), q(reqfile)))
    assert.equal(0, code)
    local ok, why = strict_ok(out)
    assert.is_true(ok, why .. "\n" .. out)
    local l = lines(out)
    assert.equal(11, #l)
    local r = {}
    for i, line in ipairs(l) do r[i] = assert(json.decode(line)) end
    -- exact ids, as given
    assert.truthy(l[1]:find('"id":123456789012345,', 1, true))
    assert.equal(json.base64("\xff\xfe bad\n"), r[1].stdout_b64)
    assert.equal(json.base64("\xc0\xaf ov\n"), r[1].stderr_b64)
    assert.is_nil(r[1].stdout)
    -- a file name that is not UTF-8
    assert.equal(1, #r[2].files)
    assert.matches("/plain%.txt$", r[2].files[1])
    assert.equal(1, #r[2].files_b64)
    -- the cap cut a character: the wire has whole characters only
    assert.is_true(r[3].truncated)
    assert.equal("€€€", r[3].stdout)
    assert.matches('field "id": NaN is not a JSON number', r[4].error)
    assert.matches('field "id": 0x10 is not a JSON number', r[5].error)
    assert.matches('field "id": Infinity is not a JSON number', r[6].error)
    assert.matches('field "pack": duplicate key', r[7].error)
    assert.matches("invalid UTF%-8", r[8].error)
    assert.truthy(l[9]:find('"id":9007199254740993,', 1, true))
    assert.matches("^sandbox: host path not allowed", r[9].error)
    assert.equal(1.5, r[10].id)
    assert.matches("^envelope: invalid JSON", r[11].error)
  end)

  it("hcp run --json: an error naming bytes that are not UTF-8 is text and error_b64", function()
    local out = run(string.format("%s run --json --pack-dir %s ok %s", HCP, q(packs), "$(printf '/etc/\\377')"))
    local ok, why = strict_ok(out)
    assert.is_true(ok, why .. "\n" .. out)
    local r = assert(json.decode(out))
    assert.matches("^sandbox: host path not allowed", r.error)
    assert.is_string(r.error_b64)
    out = run(string.format("%s run --json --pack-dir %s bytes", HCP, q(packs)))
    assert.is_true((strict_ok(out)))
    assert.is_string(assert(json.decode(out)).stdout_b64)
  end)

  it("hcp list --json and hcp doctor --json, with a pack folder whose name is not UTF-8", function()
    local parent = S.tmpdir("badname-")
    local dir = S.mkdir(parent .. "/p\xff")
    S.pack(S.manifest("odd", "sh"), dir)
    local out = run(string.format("%s list --json --pack-dir %s", HCP, q(dir)))
    local ok, why = strict_ok(out)
    assert.is_true(ok, why .. "\n" .. out)
    assert.equal("odd", assert(json.decode(out))[1].name)
    out = run(HCP .. " doctor --json")
    ok, why = strict_ok(out)
    assert.is_true(ok, why .. "\n" .. out)
  end)
end)
