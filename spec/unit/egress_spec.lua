-- hcp.egress: the declarations (wrap.egress, bindings.<b>.hosts,
-- ops.<o>.egress), what one call may reach, and each decision the proxy
-- asks for — pure, before any address is looked up.
local egress = require("hcp.egress")
local manifest = require("hcp.manifest")

local function rule(s, src) return assert(egress.parse(s, src or "wrap.egress")) end
local function rules(list)
  local out = {}
  for i, s in ipairs(list) do out[i] = rule(s) end
  return out
end
local CONNECT = function(host, port) return { host = host, port = port } end
local GET = function(host, port, path) return { host = host, port = port, method = "GET", path = path or "/" } end

describe("hcp.egress", function()
  it("parses HOST:PORT, wildcards, IP literals, a method and a path", function()
    local r = rule("api.GitHub.com:443")
    assert.same({ "api.github.com", 443, false, false }, { r.host, r.port, r.wildcard, r.literal })
    r = rule("*.example.com:443")
    assert.is_true(r.wildcard)
    assert.is_true(rule("127.0.0.1:8080").literal)
    assert.is_true(rule("[::1]:8080").literal)
    r = rule("GET api.github.com:443/repos/*")
    assert.same({ "GET", "/repos/*" }, { r.method, r.path })
    assert.is_nil(rule("* api.test:80").method)
  end)

  it("refuses what is not a host entry, saying why", function()
    for s, why in pairs({ ["api.test"] = "port is required", ["api.test:0"] = "port must be 1 to 65535",
      ["api.test:99999"] = "port must be 1 to 65535", ["*.com:443"] = "wildcard", ["*:443"] = "not a host name",
      ["a b:443"] = "HOST:PORT", ["get api.test:80"] = "HOST:PORT", [""] = "must be a string",
      ["-x.test:1"] = "not a host", ["x..y:1"] = "not a host" }) do
      local r, err = egress.parse(s, "t")
      assert.is_nil(r, s)
      assert.matches(why, err, 1, true)
    end
  end)

  it("a wildcard covers the names under the domain, not the domain itself", function()
    local w = rule("*.example.com:443")
    assert.is_true(egress.covers(w, CONNECT("a.example.com", 443)))
    assert.is_true(egress.covers(w, CONNECT("a.b.example.com", 443)))
    assert.is_false(egress.covers(w, CONNECT("example.com", 443)))
    assert.is_false(egress.covers(w, CONNECT("evilexample.com", 443)))
    assert.is_false(egress.covers(w, CONNECT("a.example.com", 80)))
  end)

  it("a method or path rule covers plain HTTP only; HTTPS needs host:port alone", function()
    local r = rule("GET api.test:80/repos/*")
    assert.is_true(egress.covers(r, GET("api.test", 80, "/repos/x/y")))
    assert.is_false(egress.covers(r, GET("api.test", 80, "/users")))
    assert.is_false(egress.covers(r, { host = "api.test", port = 80, method = "POST", path = "/repos/x" }))
    assert.is_false(egress.covers(r, CONNECT("api.test", 80)))
  end)

  it("decides: deny wins, the operator's allow narrows, else the call's rules; reasons name who", function()
    local plan = { rules = rules({ "api.test:443", "GET web.test:80/ok" }), deny = rules({ "api.test:443" }),
      resolve = {}, who = 'pack "gh"' }
    assert.same({ nil, 'denied by the operator (egress.deny "api.test:443")' }, { egress.decide(plan, CONNECT("api.test", 443)) })
    plan.deny = {}
    assert.equal("api.test:443", egress.decide(plan, CONNECT("api.test", 443)).text)
    assert.same({ nil, 'not declared by pack "gh"' }, { egress.decide(plan, CONNECT("evil.example", 443)) })
    assert.matches('for plain HTTP only', select(2, egress.decide(plan, CONNECT("web.test", 80))))
    plan.allow = rules({ "web.test:80" })
    assert.same({ nil, "not in the operator's egress.allow" }, { egress.decide(plan, CONNECT("api.test", 443)) })
  end)

  it("knows private and loopback addresses, v4 and v6", function()
    for _, a in ipairs({ "127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.1.1",
      "100.64.0.1", "0.0.0.0", "224.0.0.1", "::1", "::", "fd00::1", "fe80::1", "ff02::1", "::ffff:127.0.0.1" }) do
      assert.is_true(egress.private_address(a), a)
    end
    for _, a in ipairs({ "8.8.8.8", "172.32.0.1", "192.169.0.1", "100.128.0.1", "2001:db8::1", "::ffff:8.8.8.8" }) do
      assert.is_false(egress.private_address(a), a)
    end
  end)

  it("a name may not resolve to a private address unless declared literally or pinned by the operator", function()
    local plan = { rules = {}, resolve = { ["pinned.test"] = "127.0.0.1" } }
    local named, literal = rule("api.test:443"), rule("127.0.0.1:443")
    assert.is_false((egress.address_ok(plan, named, CONNECT("api.test", 443), "127.0.0.1")))
    assert.matches("private or loopback", select(2, egress.address_ok(plan, named, CONNECT("api.test", 443), "::1")))
    assert.is_true(egress.address_ok(plan, named, CONNECT("api.test", 443), "93.184.216.34"))
    assert.is_true(egress.address_ok(plan, literal, CONNECT("127.0.0.1", 443), "127.0.0.1"))
    assert.is_true(egress.address_ok(plan, rule("pinned.test:443"), CONNECT("pinned.test", 443), "127.0.0.1"))
  end)

  it("an op narrows its pack: its entries must lie within wrap.egress", function()
    local pack = rules({ "*.example.com:443", "api.test:80" })
    assert.is_true(egress.within(rule("a.example.com:443"), pack))
    assert.is_true(egress.within(rule("GET api.test:80/x"), pack))
    assert.is_false(egress.within(rule("example.com:443"), pack))
    assert.is_false(egress.within(rule("api.test:443"), pack))
  end)

  it("for_call: the op's list (else the pack's) and the hosts of the bindings the call mints", function()
    local doc = { hcp = 1, name = "gh", wrap = { bin = "true", egress = { "raw.test:443", "api.test:443" } },
      bindings = { tok = { family = "http", env = "TOK", hosts = { "auth.test:443" } },
        other = { family = "http", env = "O", hosts = { "other.test:443" } } },
      ops = { issues = { args = {}, bindings = { "tok" }, egress = { "api.test:443" } }, plain = { args = {} } } }
    local pack = assert(manifest.validate(doc, "/p/hcp.json", "/p"))
    local cfg = assert(egress.options({}))
    local function texts(plan)
      local out = {}
      for _, r in ipairs(plan.rules) do out[#out + 1] = r.text end
      table.sort(out)
      return out
    end
    assert.same({ "api.test:443", "auth.test:443" }, texts(egress.for_call(pack, pack.ops.issues, cfg, { "tok" })))
    assert.same({ "api.test:443", "raw.test:443" }, texts(egress.for_call(pack, pack.ops.plain, cfg, {})))
    assert.same({ "api.test:443", "auth.test:443", "other.test:443", "raw.test:443" },
      texts(egress.for_call(pack, nil, cfg, { "other", "tok" })))
    assert.equal('pack "gh"', egress.for_call(pack, nil, cfg, {}).who)
  end)

  it("wrap.network: true needs the operator's network = \"unrestricted\"", function()
    local pack = assert(manifest.validate({ hcp = 1, name = "w", wrap = { bin = "true", network = true } }, "/p", "/p"))
    local plan, err = egress.for_call(pack, nil, assert(egress.options({})), {})
    assert.is_nil(plan)
    assert.matches('hcp.create{ network = "unrestricted" }', err, 1, true)
    plan = assert(egress.for_call(pack, nil, assert(egress.options({ network = "unrestricted" })), {}))
    assert.is_true(plan.unrestricted)
  end)

  it("validates the operator's options", function()
    assert.same({ nil, 'hcp.create: option "network" must be "egress" (the default) or "unrestricted"' },
      { egress.options({ network = "open" }) })
    assert.matches("egress.allow%[1%]: must be HOST:PORT", select(2, egress.options({ egress = { allow = { "x" } } })))
    assert.matches('unknown key "block"', select(2, egress.options({ egress = { block = {} } })))
    assert.matches('resolve%["api.test"%] must map', select(2, egress.options({ resolve = { ["api.test"] = "localhost" } })))
    assert.equal("::1", assert(egress.options({ resolve = { ["API.test"] = "[::1]" } })).resolve["api.test"])
  end)

  it("manifest: bad entries, hosts on a non-http binding, an op that widens its pack", function()
    local _, problems = manifest.validate({ hcp = 1, name = "x", wrap = { bin = "true", egress = { "api.test:443", "nope" } },
      bindings = { t = { family = "token", env = "T", hosts = { "a.test:443" } } },
      ops = { o = { args = {}, egress = { "b.test:443" } } } }, "/p/hcp.json", "/p")
    local got = {}
    for i, p in ipairs(problems) do got[i] = p.field .. ": " .. p.message end
    assert.same({ 'bindings.t.hosts: only a binding of family "http" lists hosts',
      'ops.o.egress[1]: "b.test:443" is not within the pack\'s wrap.egress (an op may only narrow it)',
      "wrap.egress[2]: must be HOST:PORT (the port is required)" }, got)
    _, problems = manifest.validate({ hcp = 1, name = "x", wrap = { bin = "true", network = true, egress = { "a.test:1" } } },
      "/p/hcp.json", "/p")
    assert.equal("wrap.egress", problems[1].field)
  end)

  -- issue 14: what the proxy asks, answered here (a fake engine records the answers)
  local function fake(pending)
    local e = { answers = {} }
    function e.pending() return pending end
    function e:answer(id, addrs, why) self.answers[id] = { addrs = addrs, why = why } end
    function e:resolve(id) self.answers[id] = "resolve" end
    return e
  end

  it("serve: refuses by decide, connects pinned names and literals, looks names up, keeps only allowed addresses", function()
    local plan = { rules = rules({ "api.test:443", "pin.test:80", "[::1]:8080", "GET web.test:80/ok/*" }), deny = {},
      resolve = { ["pin.test"] = "127.0.0.1" }, who = 'pack "p"' }
    local e = fake({ { id = 1, host = "evil.test", port = 443 }, { id = 2, host = "pin.test", port = 80, method = "GET",
      path = "/" }, { id = 3, host = "[::1]", port = 8080 }, { id = 4, host = "api.test", port = 443 },
      { id = 5, host = "api.test", port = 443, addrs = { "10.0.0.1", "93.184.216.34", "::1", "2001:db8::1" } },
      { id = 6, host = "api.test", port = 443, addrs = { "127.0.0.1" } },
      { id = 7, host = "web.test", port = 80, method = "GET", path = "/ok/../admin" } })
    egress.serve(e, plan)
    assert.same({ why = 'not declared by pack "p"' }, e.answers[1])
    assert.same({ addrs = "127.0.0.1" }, e.answers[2])
    assert.same({ addrs = "::1" }, e.answers[3])
    assert.equal("resolve", e.answers[4])
    assert.same({ addrs = { "93.184.216.34", "2001:db8::1" } }, e.answers[5]) -- a rebinding answer loses its private half
    assert.matches("resolves to 127.0.0.1, a private or loopback address", e.answers[6].why, 1, true)
    assert.matches("dot segments or encoded separators", e.answers[7].why, 1, true)
  end)

  it("decide: a path only matters where a rule (the operator's too) has one for that host and port", function()
    local plan = { rules = rules({ "api.test:80" }), deny = rules({ "GET api.test:80/admin/*" }), resolve = {}, who = "x" }
    assert.truthy(egress.decide(plan, GET("api.test", 80, "/projects/group%2Fname")) == nil)
    plan.deny = rules({ "GET other.test:80/admin/*" })
    assert.truthy(egress.decide(plan, GET("api.test", 80, "/projects/group%2Fname")))
    for _, p in ipairs({ "/a/../admin/x", "/a/./b", "/a/..", "/%2e%2E/admin", "/a%2fb", "/a%5Cb", "/a\\b" }) do
      plan.deny = rules({ "GET api.test:80/admin/*" })
      assert.is_nil(egress.decide(plan, GET("api.test", 80, p)), p)
    end
    assert.truthy(egress.decide(plan, GET("api.test", 80, "/ok?q=/../x"))) -- the query is not the path
    assert.is_nil(egress.decide(plan, GET("api.test.", 80, "/"))) -- a trailing dot is another name
  end)

  it("pinned: the operator's pins and IP literals need no lookup; names do", function()
    local plan = { resolve = { ["api.test"] = "::1" } }
    assert.same({ "::1", "10.1.2.3", "fe80::1" }, { egress.pinned(plan, "api.test"), egress.pinned(plan, "10.1.2.3"),
      egress.pinned(plan, "[fe80::1]") })
    assert.is_nil(egress.pinned(plan, "other.test"))
    assert.is_nil(egress.pinned(plan, "127.1")) -- not a literal: looked up, then judged as a name's answer
  end)

  it("a call gets a proxy when its pack declares hosts anywhere, even if its own list is empty", function()
    local doc = { hcp = 1, name = "b", wrap = { bin = "true" },
      bindings = { tok = { family = "http", env = "T", hosts = { "a.test:443" } }, bare = { family = "http", env = "B" } },
      ops = { none = { args = {} } } }
    local pack = assert(manifest.validate(doc, "/p/hcp.json", "/p"))
    local cfg = assert(egress.options({}))
    local plan = assert(egress.for_call(pack, pack.ops.none, cfg, {}))
    assert.same({ 0, true, true }, { #plan.rules, plan.declared, egress.proxied(plan) })
    doc.bindings.tok = nil
    pack = assert(manifest.validate(doc, "/p/hcp.json", "/p"))
    assert.is_false(egress.proxied(egress.for_call(pack, nil, cfg, { "bare" })))
    assert.is_false(egress.proxied(nil))
    assert.is_false(egress.proxied({ unrestricted = true, rules = {}, declared = true }))
  end)

  it("proxy_env points every common client at the proxy and exempts nothing", function()
    local env = egress.proxy_env(3128)
    for _, k in ipairs({ "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy" }) do
      assert.equal("http://127.0.0.1:3128", env[k], k)
    end
    assert.same({ "", "" }, { env.NO_PROXY, env.no_proxy })
  end)

  it("report merges identical attempts (count, bytes summed) and caps the list", function()
    local log = {
      { host = "a.test:80", allowed = true, method = "GET", path = "/", bytes_in = 10, bytes_out = 1 },
      { host = "a.test:80", allowed = true, method = "GET", path = "/", bytes_in = 5, bytes_out = 2 },
      { host = "e.test:443", allowed = false, method = "CONNECT", reason = "no" },
      { host = "e.test:443", allowed = false, method = "CONNECT", reason = "no" },
      { host = "a.test:80", allowed = true, method = "GET", path = "/x", bytes_in = 1, bytes_out = 1 },
    }
    local out, cut = egress.report(log, 0)
    assert.is_false(cut)
    assert.same({ host = "a.test:80", allowed = true, method = "GET", path = "/", bytes_in = 15, bytes_out = 3, count = 2 },
      out[1])
    assert.same({ host = "e.test:443", allowed = false, method = "CONNECT", reason = "no", count = 2 }, out[2])
    assert.is_nil(out[3].count)
    local many = {}
    for i = 1, egress.REPORT_MAX + 5 do many[i] = { host = "h" .. i .. ".test:1", allowed = false, reason = "no" } end
    out, cut = egress.report(many, 0)
    assert.same({ egress.REPORT_MAX, true }, { #out, cut })
    assert.is_true(select(2, egress.report({}, 3)))
  end)

  it("an MCP client's model is told which hosts were refused, and why; structuredContent has the list", function()
    local mcp_result = require("hcp.mcp_result")
    local json = require("hcp.json")
    local res = { ok = false, exit = 56, error = "exit: status 56", stdout = "", stderr = "curl: (56) CONNECT tunnel failed",
      egress = json.array({ { host = "api.test:443", allowed = true, bytes_in = 1, bytes_out = 1 },
        { host = "evil.example:443", allowed = false, reason = 'not declared by pack "gh"' } }) }
    local out = mcp_result.from_result(res)
    local texts = {}
    for _, c in ipairs(out.content) do texts[#texts + 1] = c.text end
    assert.truthy(table.concat(texts, "\n"):find('egress refused: evil.example:443: not declared by pack "gh"', 1, true))
    assert.is_nil(table.concat(texts, "\n"):find("api.test", 1, true))
    assert.equal(2, #out.structuredContent.egress)
  end)
end)
