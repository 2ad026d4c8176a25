-- hcp mcp (contract §8, issue 13): the MCP server on stdio. First the
-- framing on its own (hcp.mcp_rpc), then the server driven over a pipe by
-- this spec (every line checked), then by clients no one here wrote: the
-- official TypeScript SDK client (spec/mcp/sdk_client.mjs) and the MCP
-- inspector's CLI mode, both from build/mcp-clients (make mcp-clients).
local core = require("hcp.core")
local json = require("hcp.json")
local rpc = require("hcp.mcp_rpc")
local S = require("support")

local HCP = S.HCP
local EXAMPLES = S.REPO .. "/packs-examples"
local CLIENTS = S.REPO .. "/build/mcp-clients"
local q = S.q

local _, no_node = S.sh("command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1")
local HAVE_NODE = no_node == 0
local MARK = tostring(core.getpid()) .. tostring(os.time() % 100000)

-- A pack whose script sleeps, chatters, needs a confirmation, or writes
-- bytes that are not text.
local SLOW = [[#!/bin/sh
case "$1" in
  careful) echo "confirmed and ran"; exit 0 ;;
  chatter) echo start; sleep "$2"; echo end; exit 0 ;;
  binary) printf '\377\376abc\n'; exit 0 ;;
  png) printf '\211PNG\r\n\032\nrest'; exit 0 ;;
  nap) sleep "$2" & sleep "$2"; echo "done $3"; exit 0 ;;
  wait) sleep "$2"; echo "done $3"; exit 0 ;;
  inject) printf '{"jsonrpc":"2.0","id":99,"result":{}}\n'; printf '\n{"jsonrpc":"2.0","id":98,"result":{}}\n' >&2; exit 0 ;;
esac
exit 2
]]

local function slow_pack(parent)
  local secs = { type = "string", description = "seconds" }
  local tag = { type = "string", description = "echoed back" }
  local root = S.pack(S.manifest("slow", "./bin/slow", { wrap = { timeout_ms = 120000 }, ops = {
    nap = { description = "Sleep twice", args = { "nap", "{secs}", "{tag}" }, params = { secs = secs, tag = tag } },
    wait = { description = "Sleep", args = { "wait", "{secs}", "{tag}" }, params = { secs = secs, tag = tag } },
    careful = { description = "Needs a yes", args = { "careful" }, confirm = true },
    chatter = { description = "Talks, sleeps, talks", args = { "chatter", "{secs}" }, params = { secs = secs } },
    binary = { description = "Not text", args = { "binary" } },
    png = { description = "A PNG on stdout", args = { "png" } },
    inject = { description = "Prints JSON-RPC", args = { "inject" } },
  } }), parent)
  S.mkdir(root .. "/bin")
  S.write(root .. "/bin/slow", SLOW, 493)
  return root
end

local PACKS = S.tmpdir("mcp-packs-")
slow_pack(PACKS)

local function init(id, version, caps)
  return json.encode({ jsonrpc = "2.0", id = id or 0, method = "initialize", params = {
    protocolVersion = version or "2025-06-18", capabilities = caps or {}, clientInfo = { name = "spec", version = "1" } } })
end
local INITIALIZED = '{"jsonrpc":"2.0","method":"notifications/initialized"}'

local function call_line(id, name, args, meta)
  return json.encode({ jsonrpc = "2.0", id = id, method = "tools/call",
    params = { name = name, arguments = args or {}, _meta = meta } })
end

-- Run `hcp mcp` with `lines` on stdin (then end of input); every line of its
-- stdout must be valid UTF-8 and a JSON-RPC 2.0 message.
local function session(lines, extra_args)
  local dir = S.tmpdir("mcp-raw-")
  S.write(dir .. "/in", table.concat(lines, "\n") .. "\n")
  local cmd = string.format("cd %s && %s mcp --pack-dir %s --pack-dir %s %s < %s 2>%s; echo \"rc=$?\"", q(dir), HCP,
    q(EXAMPLES), q(PACKS), extra_args or "", q(dir .. "/in"), q(dir .. "/err"))
  local out = S.sh(cmd)
  local msgs, raw = {}, {}
  local rc = tonumber(out:match("rc=(%d+)\n$"))
  out = out:gsub("rc=%d+\n$", "")
  for line in out:gmatch("([^\n]*)\n") do
    raw[#raw + 1] = line
    assert(utf8.len(line), "stdout line is not UTF-8: " .. line)
    local m = assert(json.decode(line), "stdout line is not JSON: " .. line)
    assert.equal("2.0", m.jsonrpc)
    msgs[#msgs + 1] = m
  end
  return msgs, rc, S.read(dir .. "/err"), raw, dir
end

local function by_id(msgs, id)
  for _, m in ipairs(msgs) do
    if m.id == id and m.method == nil then return m end
  end
  return nil
end

local function with_method(msgs, method)
  local out = {}
  for _, m in ipairs(msgs) do
    if m.method == method then out[#out + 1] = m end
  end
  return out
end

local function pgrep(pattern)
  local out = S.sh("pgrep -f " .. q(pattern) .. " || true")
  local pids = {}
  for pid in out:gmatch("%d+") do pids[#pids + 1] = tonumber(pid) end
  return pids
end

describe("hcp.mcp_rpc", function()
  it("base64 is RFC 4648's", function()
    local vectors = { [""] = "", f = "Zg==", fo = "Zm8=", foo = "Zm9v", foob = "Zm9vYg==", fooba = "Zm9vYmE=",
      foobar = "Zm9vYmFy", ["\255\254\0"] = "//4A" }
    for plain, enc in pairs(vectors) do assert.equal(enc, rpc.base64(plain)) end
  end)

  it("repairs what is not UTF-8, byte by byte, and leaves UTF-8 alone", function()
    assert.equal("é😀", rpc.repair("é😀"))
    assert.equal("a\u{FFFD}b", rpc.repair("a\255b"))
    -- overlong, surrogate, past U+10FFFF, truncated
    for _, bad in ipairs({ "\192\128", "\237\160\128", "\244\144\128\128", "\226\130" }) do
      assert.is_false(rpc.is_utf8(bad))
      assert.truthy(utf8.len(rpc.repair(bad)))
    end
    local line = rpc.encode({ jsonrpc = "2.0", id = 1, result = { ["k\255"] = "\255\0" } })
    assert.truthy(utf8.len(line))
    assert.same({ ["k\u{FFFD}"] = "\u{FFFD}\0" }, json.decode(line).result)
  end)

  it("cuts input into lines across chunks, drops a \\r, and skips an over-long line", function()
    local r = rpc.lines()
    assert.same({}, r:feed('{"a":'))
    assert.same({ '{"a":1}', "x" }, r:feed('1}\r\nx\n'))
    assert.equal("tail", (r:feed("tail") and r:rest()))
    local saved = rpc.MAX_LINE
    rpc.MAX_LINE = 8
    local r2 = rpc.lines()
    assert.same({ false }, r2:feed("0123456789"))
    assert.same({ "ok" }, r2:feed("more\nok\n"))
    rpc.MAX_LINE = saved
  end)

  it("tells requests, notifications and responses apart, and answers the rest with JSON-RPC errors", function()
    assert.equal("request", (rpc.decode('{"jsonrpc":"2.0","id":1,"method":"ping"}')))
    assert.equal("notification", (rpc.decode('{"jsonrpc":"2.0","method":"x"}')))
    assert.equal("response", (rpc.decode('{"jsonrpc":"2.0","id":"a","result":{}}')))
    local _, m = rpc.decode('{"jsonrpc":"2.0","id":7,"method":"ping"}')
    assert.equal("integer", math.type(m.id))
    local cases = {
      { "nope", rpc.PARSE_ERROR }, { "[1,2]", rpc.INVALID_REQUEST }, { '{"id":1,"method":"ping"}', rpc.INVALID_REQUEST },
      { '{"jsonrpc":"2.0","id":null,"method":"ping"}', rpc.INVALID_REQUEST },
      { '{"jsonrpc":"2.0","id":1.5,"method":"ping"}', rpc.INVALID_REQUEST },
      { '{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', rpc.INVALID_PARAMS },
      { '{"jsonrpc":"2.0","id":1}', rpc.INVALID_REQUEST }, { '{"jsonrpc":"2.0","id":1,"method":5}', rpc.INVALID_REQUEST },
    }
    for _, c in ipairs(cases) do
      local kind, err = rpc.decode(c[1])
      assert.is_nil(kind, c[1])
      assert.equal(c[2], err.error.code, c[1])
    end
  end)
end)

describe("hcp.core stdio (poll_in, read_fd, write_fd)", function()
  it("raises for a caller's mistake and returns nil, message, errno for the OS's refusal", function()
    assert.has_error(function() core.poll_in({}) end)
    assert.has_error(function() core.poll_in({ "0" }) end)
    assert.has_error(function() core.poll_in({ 0 }, -1) end)
    assert.has_error(function() core.read_fd(-1) end)
    assert.has_error(function() core.read_fd(0, 0) end)
    assert.has_error(function() core.write_fd(1, nil) end)
    local bad = 1000000
    assert.same({ bad }, core.poll_in({ bad }, 0))      -- POLLNVAL: a read says why
    local r = { core.read_fd(bad) }
    assert.is_nil(r[1])
    assert.equal(9, r[3])                               -- EBADF
    local w = { core.write_fd(bad, "x") }
    assert.is_nil(w[1])
    assert.equal(9, w[3])
  end)
end)

describe("hcp.mcp.with_confirm", function()
  local mcp = require("hcp.mcp")

  it("approves one call, once, by its envelope id, and keeps the rest of the policy", function()
    local approvals = {}
    local opts = mcp.with_confirm({ pack_dirs = { "x" }, policy = { deny = { "a.b" } } }, approvals)
    assert.same({ "x" }, opts.pack_dirs)
    assert.same({ "a.b" }, opts.policy.deny)
    local confirm = opts.policy.confirm
    assert.is_false(confirm({ id = "mcp-1" }))
    approvals["mcp-1"] = true
    assert.is_false(confirm({ id = "mcp-2" }))
    assert.is_true(confirm({ id = "mcp-1" }))
    assert.is_false(confirm({ id = "mcp-1" }), "an approval is used once")
    local asked
    local theirs = mcp.with_confirm({ policy = { confirm = function(c) asked = c.id; return false end } }, approvals)
    approvals["mcp-3"] = true
    assert.is_false(theirs.policy.confirm({ id = "mcp-3" }))
    assert.equal("mcp-3", asked)
    assert.is_nil(approvals["mcp-3"])
  end)
end)

describe("hcp.mcp_session", function()
  local session_mod = require("hcp.mcp_session")

  local function fixture(opts)
    local rt = assert(require("hcp").create({ pack_dirs = { PACKS } }))
    local sent = {}
    local function send(m)
      sent[#sent + 1] = type(m) == "string" and json.decode(m) or json.decode(rpc.encode(m))
      return true
    end
    opts.approvals = {}
    local sess = session_mod.new(rt, send, opts)
    sess:receive(init(0))
    return sess, rt, sent
  end

  local function drive(rt, sess, cond)
    local deadline = core.monotonic_us() + 30e6
    while not cond() and core.monotonic_us() < deadline do
      rt:step(0.05)
      sess:tick()
    end
    return cond()
  end

  it("runs at most max_calls at once; the others wait their turn, in order", function()
    local sess, rt, sent = fixture({ max_calls = 1 })
    sess:receive(call_line(1, "slow__wait", { secs = "0.3", tag = "a" }))
    sess:receive(call_line(2, "slow__wait", { secs = "0", tag = "b" }))
    assert.equal(1, sess.running)
    assert.equal(1, #sess.waiting)
    assert.is_true(drive(rt, sess, function() return by_id(sent, 1) ~= nil end))
    assert.is_nil(by_id(sent, 2), "the second call ran before the first ended")
    assert.is_true(drive(rt, sess, function() return by_id(sent, 2) ~= nil end))
    assert.equal("done a\n", by_id(sent, 1).result.structuredContent.stdout)
    assert.equal("done b\n", by_id(sent, 2).result.structuredContent.stdout)
    assert.equal(0, sess.running)
    rt:close()
  end)

  it("refuses a call when too many wait, and a cancelled waiting call never starts", function()
    local sess, rt, sent = fixture({ max_calls = 1, max_waiting = 1 })
    sess:receive(call_line(1, "slow__wait", { secs = "0.2", tag = "a" }))
    sess:receive(call_line(2, "slow__wait", { secs = "0", tag = "b" }))
    sess:receive(call_line(3, "slow__wait", { secs = "0", tag = "c" }))
    assert.is_true(by_id(sent, 3).result.isError)
    assert.matches("^spawn: hcp mcp has 1 calls running and 1 waiting", by_id(sent, 3).result.content[1].text)
    sess:receive('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}')
    assert.is_true(drive(rt, sess, function() return not sess:busy() end))
    assert.is_table(by_id(sent, 1))
    assert.is_nil(by_id(sent, 2))
    rt:close()
  end)
end)

describe("hcp.mcp_result", function()
  local mres = require("hcp.mcp_result")

  it("keeps every message under MAX_MESSAGE, cutting output and saying so", function()
    local big = string.rep("\1", 3 * 1024 * 1024)   -- 6 bytes each once escaped
    local line = mres.fit(1, { ok = true, exit = 0, stdout = big, stderr = big }, nil)
    assert.is_true(#line <= mres.MAX_MESSAGE)
    local r = json.decode(line).result
    assert.is_true(r.structuredContent.truncated)
    assert.matches("more bytes: hcp mcp sends the first", r.content[1].text)
    local bin = string.rep("\255", 3 * 1024 * 1024)
    r = json.decode(mres.fit(2, { ok = true, exit = 0, stdout = bin }, nil)).result
    assert.is_true(r.structuredContent.truncated)
    assert.equal(rpc.base64(string.rep("\255", mres.LIMITS[1].text)), r.structuredContent.stdout_b64)
    assert.matches("the first 1048576 of them", r.content[1].text)
  end)
end)

describe("hcp mcp over a pipe", function()
  it("negotiates the version and declares tools and logging", function()
    for requested, answered in pairs({ ["2025-06-18"] = "2025-06-18", ["2025-11-25"] = "2025-11-25",
      ["2024-11-05"] = "2025-11-25", ["1.0"] = "2025-11-25" }) do
      local msgs, rc = session({ init(1, requested) })
      assert.equal(0, rc)
      local r = by_id(msgs, 1).result
      assert.equal(answered, r.protocolVersion, requested)
      assert.same({ tools = { listChanged = false }, logging = {} }, r.capabilities)
      assert.equal("hcp", r.serverInfo.name)
      assert.equal(require("hcp").version, r.serverInfo.version)
    end
  end)

  it("answers malformed input with JSON-RPC errors and goes on", function()
    local msgs, rc, err = session({ '{"jsonrpc":"2.0","id":1,"method":"tools/list"}', '{"jsonrpc":"2.0","id":2,"method":"ping"}',
      init(3), "not json", "[" .. init(4) .. "]", '{"id":5,"method":"ping"}', init(6),
      '{"jsonrpc":"2.0","id":7,"method":"resources/list"}',
      '{"jsonrpc":"2.0","id":8,"method":"logging/setLevel","params":{"level":"loud"}}',
      '{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"cursor":"zz"}}', '{"jsonrpc":"2.0","method":"no/such/notification"}',
      call_line(10, "no__such"), call_line(11, "jq__eval", { 1, 2 }),
      '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"arguments":{}}}', '{"jsonrpc":"2.0","id":13,"method":"ping"}' })
    assert.equal(0, rc, err)
    assert.equal(rpc.INVALID_REQUEST, by_id(msgs, 1).error.code)   -- before initialize
    assert.same({}, by_id(msgs, 2).result)                         -- ping is fine before it
    assert.equal("2025-06-18", by_id(msgs, 3).result.protocolVersion)
    local nulls = {}
    for _, m in ipairs(msgs) do
      if m.id == json.null then nulls[#nulls + 1] = m.error.code end
    end
    assert.same({ rpc.PARSE_ERROR, rpc.INVALID_REQUEST }, nulls)
    assert.equal(rpc.INVALID_REQUEST, by_id(msgs, 5).error.code) -- no "jsonrpc": its id is still echoed
    assert.equal(rpc.INVALID_REQUEST, by_id(msgs, 6).error.code)   -- initialize twice
    assert.equal(rpc.METHOD_NOT_FOUND, by_id(msgs, 7).error.code)
    assert.equal(rpc.INVALID_PARAMS, by_id(msgs, 8).error.code)
    assert.equal(rpc.INVALID_PARAMS, by_id(msgs, 9).error.code)
    assert.equal("Unknown tool: no__such", by_id(msgs, 10).error.message)
    assert.is_true(by_id(msgs, 11).result.isError)
    assert.equal('envelope: the arguments of "jq.eval" must be an object', by_id(msgs, 11).result.content[1].text)
    assert.equal(rpc.INVALID_PARAMS, by_id(msgs, 12).error.code)
    assert.same({}, by_id(msgs, 13).result)
  end)

  it("pages a long tool list with an opaque cursor", function()
    local many = {}
    for i = 1, 150 do many[string.format("op%03d", i)] = { args = { tostring(i) } } end
    local root = S.pack(S.manifest("many", "/bin/echo", { ops = many }))
    local msgs = session({ init(1), '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
      '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"p101"}}' }, "--pack-dir " .. q(root))
    local first, second = by_id(msgs, 2).result, by_id(msgs, 3).result
    assert.equal(100, #first.tools)
    assert.equal("p101", first.nextCursor)
    assert.is_nil(second.nextCursor)
    local total = #first.tools + #second.tools
    local names = {}
    for _, t in ipairs(first.tools) do names[t.name] = true end
    for _, t in ipairs(second.tools) do names[t.name] = true end
    assert.is_true(names.many__op150 and names.many__op001 and names.many__exec and names.jq__eval)
    assert.is_true(total > 150)
  end)

  it("answers a call still running when stdin closes, and progress comes before the answer", function()
    local msgs, rc = session({ init(1), INITIALIZED, call_line(2, "slow__chatter", { secs = "0.5" }, { progressToken = "tok" }) })
    assert.equal(0, rc)
    local res = by_id(msgs, 2).result
    assert.is_false(res.isError)
    assert.equal("start\nend\n", res.structuredContent.stdout)
    local prog = with_method(msgs, "notifications/progress")
    assert.is_true(#prog >= 1)
    assert.equal("tok", prog[1].params.progressToken)
    assert.equal(1, prog[1].params.progress)
    for i = 2, #prog do assert.is_true(prog[i].params.progress > prog[i - 1].params.progress) end
    local last_progress = 0
    for i, m in ipairs(msgs) do
      if m.method == "notifications/progress" then last_progress = i end
    end
    local answer_at
    for i, m in ipairs(msgs) do if m.id == 2 then answer_at = i end end
    assert.is_true(last_progress < answer_at)
  end)

  it("sends bytes that are not UTF-8 as base64, never as invalid JSON", function()
    local msgs, _, _, raw = session({ init(1), call_line(2, "slow__binary"), call_line(3, "slow__png") })
    for _, line in ipairs(raw) do assert.truthy(utf8.len(line)) end
    local b = by_id(msgs, 2).result
    assert.is_nil(b.structuredContent.stdout)
    assert.equal(rpc.base64("\255\254abc\n"), b.structuredContent.stdout_b64)
    assert.equal("resource", b.content[2].type)
    assert.equal(rpc.base64("\255\254abc\n"), b.content[2].resource.blob)
    local p = by_id(msgs, 3).result
    assert.equal("image", p.content[1].type)
    assert.equal("image/png", p.content[1].mimeType)
    assert.equal(rpc.base64("\137PNG\r\n\26\nrest"), p.content[1].data)
  end)

  it("keeps a child's output inside the result: it cannot speak the protocol", function()
    local msgs = session({ init(1), call_line(2, "slow__inject") })
    assert.is_nil(by_id(msgs, 99))
    assert.is_nil(by_id(msgs, 98))
    assert.equal('{"jsonrpc":"2.0","id":99,"result":{}}\n', by_id(msgs, 2).result.structuredContent.stdout)
    assert.equal(2, #msgs)
  end)

  it("stops, killing its calls, when the client stops reading", function()
    local pattern = "sleep 1000[.]" .. MARK .. "4"
    local dir = S.tmpdir("mcp-pipe-")
    S.write(dir .. "/in", table.concat({ init(1), INITIALIZED,
      call_line(2, "slow__nap", { secs = "1000." .. MARK .. "4", tag = "x" }, { progressToken = 1 }) }, "\n") .. "\n")
    -- head reads the initialize answer and goes: the next progress write breaks
    S.sh(string.format("{ %s mcp --pack-dir %s < %s 2>/dev/null; echo $? > %s; } | head -c 10 > /dev/null", HCP, q(PACKS),
      q(dir .. "/in"), q(dir .. "/rc")))
    assert.equal("1\n", S.read(dir .. "/rc"))
    assert.same({}, pgrep(pattern))
  end)

  it("confirms through elicitation: one yes runs one call; anything else is the runtime's refusal", function()
    local yes = '{"jsonrpc":"2.0","id":"hcp-confirm-1","result":{"action":"accept","content":{"confirm":true}}}'
    local msgs = session({ init(1, "2025-11-25", { elicitation = {} }), INITIALIZED,
      yes, -- an answer before anything was asked approves nothing
      call_line(2, "slow__careful"), yes, call_line(3, "slow__careful"),
      '{"jsonrpc":"2.0","id":"hcp-confirm-2","result":{"action":"accept","content":{"confirm":false}}}',
      call_line(4, "slow__careful"), '{"jsonrpc":"2.0","id":"hcp-confirm-3","result":{"action":"decline"}}',
      call_line(5, "slow__careful") })
    local asks = with_method(msgs, "elicitation/create")
    assert.equal(4, #asks)
    assert.equal("hcp-confirm-1", asks[1].id)
    assert.matches("Run slow%.careful%?", asks[1].params.message)
    assert.equal("boolean", asks[1].params.requestedSchema.properties.confirm.type)
    assert.equal("confirmed and ran\n", by_id(msgs, 2).result.structuredContent.stdout)
    for id, why in pairs({ [3] = "did not tick", [4] = "decline", [5] = "closed the connection" }) do
      local r = by_id(msgs, id).result
      assert.is_true(r.isError, tostring(id))
      assert.equal('policy: "slow.careful" not confirmed', r.content[1].text)
      assert.matches(why, r.content[2].text)
    end
    -- without the capability nobody is asked
    local plain = session({ init(1), call_line(2, "slow__careful") })
    assert.same({}, with_method(plain, "elicitation/create"))
    assert.equal('policy: "slow.careful" not confirmed', by_id(plain, 2).result.content[1].text)
    assert.matches("no elicitation capability", by_id(plain, 2).result.content[2].text)
  end)

  it("asks the config's own policy.confirm too, after the user's yes", function()
    local cfg = S.write(S.tmpdir("mcp-cfg-") .. "/c.lua",
      "return { policy = { confirm = function(call) return call.principal == 'nobody' end } }")
    local yes = '{"jsonrpc":"2.0","id":"hcp-confirm-1","result":{"action":"accept","content":{"confirm":true}}}'
    local msgs = session({ init(1, "2025-06-18", { elicitation = {} }), INITIALIZED, call_line(2, "slow__careful"), yes },
      "--config " .. q(cfg))
    assert.equal(1, #with_method(msgs, "elicitation/create"))
    assert.equal('policy: "slow.careful" not confirmed', by_id(msgs, 2).result.content[1].text)
  end)

  it("kills a cancelled call and sends no answer for it", function()
    local pattern = "sleep 1000[.]" .. MARK .. "1"
    local msgs, rc = session({ init(1), INITIALIZED, call_line(2, "slow__nap", { secs = "1000." .. MARK .. "1", tag = "x" }),
      '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"spec"}}',
      '{"jsonrpc":"2.0","id":3,"method":"ping"}' })
    assert.equal(0, rc)
    assert.is_nil(by_id(msgs, 2))
    assert.same({}, by_id(msgs, 3).result)
    assert.same({}, pgrep(pattern))
  end)

  it("logs to the client at the level it set", function()
    local msgs = session({ init(1), INITIALIZED, '{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}',
      call_line(3, "jq__eval", { expr = "1" }) })
    assert.same({}, by_id(msgs, 2).result)
    local logs = with_method(msgs, "notifications/message")
    assert.is_true(#logs >= 1)
    assert.equal("debug", logs[1].params.level)
    assert.matches("jq%.eval started, pid %d+", logs[1].params.data)
  end)

  it("takes the policy from --config: denied ops are absent, and calling one is the runtime's refusal", function()
    local cfg = S.write(S.tmpdir("mcp-cfg-") .. "/p.lua", 'return { policy = { deny = { "jq.eval" } } }')
    local msgs, _, err = session({ init(1), '{"jsonrpc":"2.0","id":2,"method":"tools/list"}',
      call_line(3, "jq__eval", { expr = "1" }) }, "--config " .. q(cfg))
    for _, t in ipairs(by_id(msgs, 2).result.tools) do assert.not_equal("jq__eval", t.name) end
    local r = by_id(msgs, 3).result
    assert.is_true(r.isError, err)
    assert.equal('policy: "jq.eval" not covered', r.content[1].text)
    assert.same({ ok = false, exit = 126, error = 'policy: "jq.eval" not covered', sandbox = "sandbox" }, r.structuredContent)
  end)

  it("exits 126 with the reason for a bad configuration, writing nothing on stdout", function()
    local cfg = S.write(S.tmpdir("mcp-cfg-") .. "/bad.lua", "return { colour = 1 }")
    local msgs, rc, err = session({ init(1) }, "--config " .. q(cfg))
    assert.equal(126, rc)
    assert.same({}, msgs)
    assert.matches('unknown option "colour"', err)
  end)
end)

-- ---- real clients ------------------------------------------------------------

local function clients_installed()
  return core.kind(CLIENTS .. "/node_modules/@modelcontextprotocol/sdk/package.json") == "file"
    and core.kind(CLIENTS .. "/node_modules/@modelcontextprotocol/inspector-cli/package.json") == "file"
end

-- Run the SDK client script with `cfg` (JSON); its one line of output, decoded.
local function sdk(cfg, server_args)
  cfg.command = HCP
  cfg.args = { "mcp", "--pack-dir", EXAMPLES, "--pack-dir", PACKS }
  for _, a in ipairs(server_args or {}) do cfg.args[#cfg.args + 1] = a end
  local dir = S.tmpdir("mcp-node-")
  cfg.cwd = cfg.cwd or dir
  local out = S.sh(string.format("HCP_MCP_CLIENTS=%s node %s %s 2>%s", q(CLIENTS), q(S.REPO .. "/spec/mcp/sdk_client.mjs"),
    q(json.encode(cfg)), q(dir .. "/node.err")))
  local doc = json.decode(out:match("([^\n]*)\n?$") or "")
  assert(type(doc) == "table", "no JSON from the SDK client: " .. out .. (S.read(dir .. "/node.err") or ""))
  assert(doc.fatal == nil, tostring(doc.fatal))
  return doc
end

local function text_of(result)
  local parts = {}
  for _, c in ipairs(result.content) do
    if c.type == "text" then parts[#parts + 1] = c.text end
  end
  return table.concat(parts, "\n")
end

describe("hcp mcp with the official TypeScript SDK client", function()
  if not HAVE_NODE then
    pending("node and npm are not installed: the MCP client specs need them (make deps installs them)")
    return
  end

  setup(function()
    assert(clients_installed(), "the MCP clients are not in build/mcp-clients: run make mcp-clients")
  end)

  it("lists every example op with a schema Ajv compiles (draft 2020-12), in one page", function()
    local samples = { { tool = "jq__filter", arguments = { expr = 5 } }, { tool = "jq__filter", arguments = { expr = "." } },
      { tool = "jq__filter", arguments = {} }, { tool = "jq__filter", arguments = { expr = ".", x = 1 } },
      { tool = "wordfreq__top", arguments = { n = "3" } }, { tool = "jq__exec", arguments = { args = { "-n", 1 } } } }
    local d = sdk({ scenario = "list", samples = samples })
    assert.same({}, d.schemaErrors)
    assert.same({}, d.errors)
    assert.equal(1, d.pages)
    assert.equal("2025-11-25", d.protocolVersion or "2025-11-25")
    local names = {}
    for _, t in ipairs(d.tools) do names[t.name] = t end
    local rt = assert(require("hcp").create({ pack_dirs = { EXAMPLES } }))
    for _, p in ipairs(rt:packs()) do
      for _, o in ipairs(p.ops) do
        local t = names[p.name .. "__" .. o]
        assert.is_table(t, p.name .. "." .. o .. " is not listed")
        assert.is_string(t.description)
        assert.equal(p.name .. "." .. o, t.title)
        assert.equal(p.name .. "." .. o, t._meta["hcp/call"])
      end
    end
    assert.is_true(names.jq__eval.annotations.readOnlyHint)
    assert.is_true(names.slow__careful.annotations.destructiveHint)
    assert.is_true(names.slow__careful._meta["hcp/confirm"])
    -- what Ajv says of the samples is what the runtime says (tools.request)
    local tools = require("hcp.tools")
    local by = {}
    for _, t in ipairs(rt:tools()) do by[t.name] = t end
    for i, s in ipairs(samples) do
      local ours = tools.request(by[s.tool], s.arguments) ~= nil
      assert.equal(ours, d.verdicts[i], json.encode(s))
    end
  end)

  it("calls ops, with stdin, and gets the output as text and the result as structuredContent", function()
    local d = sdk({ scenario = "calls", calls = {
      { name = "jq__filter", arguments = { expr = ".a", stdin = '{"a":42}' } },
      { name = "sqlite__query", arguments = { sql = "select 6*7 as x" } },
      { name = "wordfreq__top", arguments = { n = 2, stdin = "b a b" } },
      { name = "jq__exec", arguments = { args = { "-n", "[1,2]|add" } } },
    } })
    assert.same({}, d.errors)
    local r = d.results
    assert.equal("42\n", text_of(r[1].result))
    assert.is_false(r[1].result.isError)
    assert.equal(0, r[1].result.structuredContent.exit)
    assert.is_true(r[1].result.structuredContent.ok)
    assert.is_table(r[1].result.structuredContent.isolation)
    assert.equal('[{"x":42}]\n', text_of(r[2].result))
    assert.equal("2 b\n1 a\n", text_of(r[3].result))
    assert.equal("3\n", text_of(r[4].result))
  end)

  it("refuses an invalid param, a denied op and an unknown tool, in the runtime's words", function()
    local cfg = S.write(S.tmpdir("mcp-cfg-") .. "/deny.lua", 'return { policy = { deny = { "jq.eval" } } }')
    local d = sdk({ scenario = "calls", calls = {
      { name = "jq__filter", arguments = { expr = 5 } },
      { name = "jq__eval", arguments = { expr = "1" } },
      { name = "no__such", arguments = {} },
      { name = "xml__check", arguments = { stdin = "<a><b></a>" } },
    } }, { "--config", cfg })
    local r = d.results
    assert.is_true(r[1].result.isError)
    assert.equal('envelope: parameter "expr" of "jq.filter" must be a string', text_of(r[1].result))
    assert.is_true(r[2].result.isError)
    assert.equal('policy: "jq.eval" not covered', r[2].result.content[1].text)
    assert.equal(126, r[2].result.structuredContent.exit)
    assert.matches("Unknown tool: no__such", r[3].error)
    assert.equal(-32602, r[3].code)
    assert.is_true(r[4].result.isError)
    assert.equal("exit: status 1", r[4].result.content[1].text)
    assert.matches("parser error", r[4].result.structuredContent.stderr)
  end)

  it("cancels a long call and leaves no process behind", function()
    local d = sdk({ scenario = "cancel", marker = { "sleep 1000[.]", MARK .. "2" }, expect = 2,
      call = { name = "slow__nap", arguments = { secs = "1000." .. MARK .. "2", tag = "c" } },
      after = { name = "jq__eval", arguments = { expr = "7" } } })
    assert.is_true(d.seen, "the call's processes never showed up")
    assert.equal(2, d.before)
    assert.is_string(d.first.error) -- the client gave up on it
    assert.is_nil(d.first.result)
    assert.is_true(d.gone, "processes left: " .. json.encode(d.left))
    assert.same({}, pgrep("sleep 1000[.]" .. MARK .. "2"))
    assert.equal("7\n", text_of(d.after.result))
    assert.same({}, d.errors) -- no response came for the cancelled request
  end)

  it("runs 8 calls at once", function()
    local calls = {}
    for i = 1, 8 do calls[i] = { name = "slow__wait", arguments = { secs = "1000." .. MARK .. "3", tag = tostring(i) } } end
    local d = sdk({ scenario = "concurrent", calls = calls, marker = { "sleep 1000[.]", MARK .. "3" }, expect = 8 })
    assert.is_true(d.together, "never 8 in flight together; at most " .. tostring(d.max))
    assert.equal(8, d.killed)
    for i = 1, 8 do
      assert.is_false(d.results[i].result.isError, json.encode(d.results[i]))
      assert.equal("done " .. i .. "\n", d.results[i].result.structuredContent.stdout)
    end
  end)

  it("asks the user to confirm through elicitation, and runs only on a yes", function()
    local call = { name = "slow__careful", arguments = {} }
    local yes = sdk({ scenario = "confirm", call = call, capabilities = { elicitation = {} },
      answer = { action = "accept", content = { confirm = true } } })
    assert.equal(1, #yes.asked)
    assert.matches("slow%.careful", yes.asked[1].message)
    assert.is_false(yes.result.isError)
    assert.equal("confirmed and ran\n", text_of(yes.result))
    local no = sdk({ scenario = "confirm", call = call, capabilities = { elicitation = {} }, answer = { action = "decline" } })
    assert.equal(1, #no.asked)
    assert.is_true(no.result.isError)
    assert.equal('policy: "slow.careful" not confirmed', no.result.content[1].text)
    local none = sdk({ scenario = "confirm", call = call })
    assert.equal(0, #none.asked)
    assert.is_true(none.result.isError)
    assert.equal('policy: "slow.careful" not confirmed', none.result.content[1].text)
  end)

  it("sends progress to a client that asked for it", function()
    local d = sdk({ scenario = "progress", call = { name = "slow__chatter", arguments = { secs = "1.5" } } })
    assert.is_true(#d.progress >= 1)
    assert.equal(1, d.progress[1].progress)
    assert.matches("slow%.chatter running", d.progress[1].message)
    assert.equal("start\nend\n", text_of(d.result))
  end)

  it("returns written-back files, and a PNG among them as an image", function()
    local out = S.tmpdir("mcp-out-")
    local d = sdk({ scenario = "calls", cwd = out, calls = { { name = "qrencode__png", arguments = { text = "hi", file = "qr.png" } } } })
    local r = d.results[1].result
    assert.is_false(r.isError, json.encode(r))
    assert.same({ out .. "/qr.png" }, r.structuredContent.files)
    local img
    for _, c in ipairs(r.content) do if c.type == "image" then img = c end end
    assert.is_table(img)
    assert.equal("image/png", img.mimeType)
    assert.equal(rpc.base64(S.read(out .. "/qr.png")), img.data)
  end)
end)

describe("hcp mcp with the MCP inspector's CLI mode", function()
  if not HAVE_NODE then
    pending("node and npm are not installed: the MCP client specs need them (make deps installs them)")
    return
  end

  -- The inspector reads its own package.json through a path it checks
  -- relative to the cwd: run it from a directory whose parent has one.
  local function inspector(args)
    assert(clients_installed(), "the MCP clients are not in build/mcp-clients: run make mcp-clients")
    local cmd = string.format("cd %s && node %s %s mcp --pack-dir %s --pack-dir %s %s 2>/dev/null", q(CLIENTS .. "/node_modules"),
      q(CLIENTS .. "/node_modules/@modelcontextprotocol/inspector-cli/build/index.js"), HCP, q(EXAMPLES), q(PACKS), args)
    local out, code = S.sh(cmd)
    return json.decode(out), code, out
  end

  it("lists every example op", function()
    local doc, code, out = inspector("--method tools/list")
    assert.equal(0, code, out)
    local names = {}
    for _, t in ipairs(doc.tools) do names[t.name] = true end
    local rt = assert(require("hcp").create({ pack_dirs = { EXAMPLES } }))
    for _, p in ipairs(rt:packs()) do
      for _, o in ipairs(p.ops) do assert.is_true(names[p.name .. "__" .. o], p.name .. "." .. o) end
    end
  end)

  it("calls an op, and a refused call comes back as an error result with the runtime's words", function()
    local doc, code, out = inspector("--method tools/call --tool-name jq__eval --tool-arg 'expr=[1,2]|add'")
    assert.equal(0, code, out)
    assert.equal("3\n", doc.content[1].text)
    doc = inspector("--method tools/call --tool-name slow__careful")
    assert.is_true(doc.isError)
    assert.equal('policy: "slow.careful" not confirmed', doc.content[1].text)
    doc = inspector("--method tools/call --tool-name jq__filter --tool-arg expr=5")
    assert.is_true(doc.isError)
    assert.equal('envelope: parameter "expr" of "jq.filter" must be a string', doc.content[1].text)
  end)
end)
