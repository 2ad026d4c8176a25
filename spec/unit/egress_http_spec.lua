-- The proxy's HTTP parsing (src/egress_http.c through core.egress_parse and
-- core.egress_chunked): what a hostile child may send as a request head or
-- a chunked body, and what goes upstream. Strict on purpose: what a server
-- could read differently from the proxy is refused, never guessed.
local core = require("hcp.core")

local function parse(s) return core.egress_parse(s) end
local function refused(s)
  local r, status, why = parse(s)
  assert.is_nil(r, s)
  return status, why
end

describe("egress: request heads", function()
  it("reads a CONNECT and an absolute-URI request; names are lower-cased, IPv6 stays in brackets", function()
    local r = assert(parse("CONNECT API.Test:443 HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert.same({ true, "CONNECT", "api.test", 443, "", "none" }, { r.connect, r.method, r.host, r.port, r.path, r.body })
    r = assert(parse("GET http://[::1]:8080/a/b?c=d HTTP/1.1\r\n\r\n"))
    assert.same({ false, "GET", "[::1]", 8080, "/a/b?c=d" }, { r.connect, r.method, r.host, r.port, r.path })
    r = assert(parse("GET http://api.test HTTP/1.0\r\n\r\n"))
    assert.same({ 80, "/" }, { r.port, r.path })
    assert.equal("/?q", assert(parse("GET http://api.test?q HTTP/1.1\r\n\r\n")).path)
    assert.equal(#"GET http://a.test/ HTTP/1.1\r\n\r\n", assert(parse("GET http://a.test/ HTTP/1.1\r\n\r\nextra")).head_len)
  end)

  it("waits for the rest of a head, and refuses one past 16 KiB", function()
    assert.is_false(parse("GET http://a.test/ HTTP/1.1\r\nHost: a"))
    local status, why = refused("GET http://a.test/ HTTP/1.1\r\nX: " .. ("a"):rep(17000))
    assert.same({ 400, "a request head larger than 16 KiB" }, { status, why })
  end)

  it("forwards in origin form with Host from the URI, dropping Proxy-* and hop-by-hop headers", function()
    local r = assert(parse("POST http://api.test:8080/x HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: Basic eA==\r\n"
      .. "Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Gone\r\nKeep-Alive: 5\r\nTE: trailers\r\n"
      .. "Upgrade: websocket\r\nAccept: */*\r\nContent-Length: 4\r\n\r\nbody"))
    assert.equal("POST /x HTTP/1.1\r\nHost: api.test:8080\r\nAccept: */*\r\nContent-Length: 4\r\nConnection: close\r\n\r\n",
      r.upstream)
    assert.same({ "length", 4 }, { r.body, r.length })
    assert.matches("^GET / HTTP/1.0\r\nHost: api.test\r\n", assert(parse("GET http://api.test/ HTTP/1.0\r\n\r\n")).upstream)
  end)

  it("refuses what a server could read another way: bare LF, folding, space before the colon, NUL, CR", function()
    for _, head in ipairs({
      "GET http://a.test/ HTTP/1.1\nHost: a\n\n",
      "GET http://a.test/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
      "GET http://a.test/ HTTP/1.1\r\nHost : a\r\n\r\n",
      "GET http://a.test/ HTTP/1.1\r\nX: a\0b\r\n\r\n",
      "GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
      "GET http://a.test/ HTTP/1.1\r\n: empty\r\n\r\n",
    }) do
      assert.equal(400, (refused(head)), head)
    end
  end)

  it("refuses two lengths, a length beside chunked, and any other transfer coding", function()
    assert.matches("two different Content%-Length",
      select(2, refused("POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")))
    assert.equal(1, assert(parse("POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n")).length)
    assert.matches("both", select(2, refused("POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\n"
      .. "Transfer-Encoding: chunked\r\n\r\n")))
    for _, te in ipairs({ "gzip", "chunked, gzip", "gzip, chunked", "xchunked" }) do
      assert.equal(501, (refused("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: " .. te .. "\r\n\r\n")), te)
    end
    assert.equal(501, (refused("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
      .. "Transfer-Encoding: chunked\r\n\r\n")))
    for _, cl in ipairs({ "-1", "1e3", "0x10", "1 2", "", "9999999999999999" }) do
      assert.equal(400, (refused("POST http://a.test/ HTTP/1.1\r\nContent-Length: " .. cl .. "\r\n\r\n")), cl)
    end
    assert.equal("chunked", assert(parse("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n")).body)
  end)

  it("refuses targets that are not a proxy's: origin form, https://, user info, bad hosts and ports", function()
    local cases = {
      ["GET /x HTTP/1.1\r\n\r\n"] = "not a proxy request",
      ["GET https://a.test/ HTTP/1.1\r\n\r\n"] = "goes through CONNECT",
      ["GET ftp://a.test/ HTTP/1.1\r\n\r\n"] = "not a proxy request",
      ["GET http://u:p@a.test/ HTTP/1.1\r\n\r\n"] = "user info",
      ["GET http://a_b!.test/ HTTP/1.1\r\n\r\n"] = "characters no name has",
      ["GET http://a.test:0/ HTTP/1.1\r\n\r\n"] = "port out of range",
      ["GET http://a.test:65536/ HTTP/1.1\r\n\r\n"] = "port out of range",
      ["GET http://a.test:80a/ HTTP/1.1\r\n\r\n"] = "malformed port",
      ["GET http://[::1%25lo]/ HTTP/1.1\r\n\r\n"] = "IPv6",
      ["GET http:///x HTTP/1.1\r\n\r\n"] = "no host",
      ["GET http://a.test/#f HTTP/1.1\r\n\r\n"] = "characters a URL cannot have",
      ["GET http://a.test/\127 HTTP/1.1\r\n\r\n"] = "characters a URL cannot have",
      ["CONNECT a.test HTTP/1.1\r\n\r\n"] = "HOST:PORT",
      ["CONNECT a.test:443/x HTTP/1.1\r\n\r\n"] = "malformed port",
      ["get http://a.test/ HTTP/1.1\r\n\r\n"] = "request line",
      ["GET  http://a.test/ HTTP/1.1\r\n\r\n"] = "request line",
      ["GET http://a.test/ HTTP/2\r\n\r\n"] = "HTTP/1.0 or HTTP/1.1",
      ["GET http://a.test/ HTTP/1.1 x\r\n\r\n"] = "HTTP/1.0 or HTTP/1.1",
      ["GET http://" .. ("a"):rep(300) .. ".test/ HTTP/1.1\r\n\r\n"] = "longer than 255",
    }
    for head, why in pairs(cases) do
      local _, msg = refused(head)
      assert.matches(why, msg, 1, true)
    end
  end)
end)

describe("egress: chunked bodies", function()
  it("counts the bytes of the message and ends at the last chunk and its trailers", function()
    local body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
    assert.same({ #body, true }, { core.egress_chunked(body .. "GET /next HTTP/1.1\r\n\r\n") })
    -- fed a byte at a time, the same
    local bytes = {}
    for i = 1, #body do bytes[i] = body:sub(i, i) end
    assert.same({ #body, true }, { core.egress_chunked(table.unpack(bytes)) })
    assert.same({ 4, false }, { core.egress_chunked("5\r\nh") })
    assert.same({ 5, true }, { core.egress_chunked("0\r\n\r\n") })
  end)

  it("refuses a malformed body: no size, bad separators, a size past 2^56, endless extensions", function()
    for _, b in ipairs({ "x\r\n", "5\nhello\r\n", "5\r\nhelloXX", "1\r\na\r\n0\r\n\n", ";\r\n",
      ("f"):rep(16) .. "\r\n", "1;" .. ("e"):rep(5000) .. "\r\n", "0\r\nT: " .. ("t"):rep(9000) }) do
      assert.is_nil(core.egress_chunked(b), b)
    end
  end)
end)
