-- make bench: a 1 MiB download through a call's egress proxy against the
-- same download straight from the loopback server (a wrap.network pack
-- the operator lets have the host's network), in the same run, with the
-- same client (curl inside the sandbox), for plain HTTP (forwarded; a small
-- C server) and HTTPS (a CONNECT tunnel, spliced; Python's TLS server). Each call downloads the file N times
-- on fresh connections; the figure is curl's own time per transfer
-- (median), so the spawn of the call is not in it. Prints throughputs and
-- their ratio; figures mean something only as ratios on the machine that
-- produced them.
--
-- usage: hcp-lua bench/egress_bench.lua [N] (from the checkout)
package.path = "spec/?.lua;" .. package.path
local hcp = require("hcp")
local core = require("hcp.core")
local S = require("support")
local F = require("egress_fixture")

local n = tonumber(arg[1]) or 40
local SIZE = 1 << 20

local missing = F.missing(S)
if missing then
  print("egress bench skipped: " .. missing)
  return
end
if not (core.probe().netns or {}).available then
  print("egress bench skipped: this host cannot make a network namespace")
  return
end

local function median(t)
  table.sort(t)
  local m = #t // 2
  if #t % 2 == 1 then return t[m + 1] end
  return (t[m] + t[m + 1]) / 2
end

-- A plain HTTP server in C for the http case, so the figure is the proxy's
-- and not Python's: each connection gets its head read and 1 MiB back.
local SERVER_C = [[
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(void) {
  static char body[1 << 20], buf[65536];
  memset(body, 'x', sizeof body);
  struct sockaddr_in a; socklen_t l = sizeof a; memset(&a, 0, sizeof a);
  a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, (void *)&a, sizeof a) || listen(s, 64) || getsockname(s, (void *)&a, &l)) return 1;
  printf("%d\n", ntohs(a.sin_port)); fflush(stdout);
  alarm(600);
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) continue;
    size_t got = 0; ssize_t r;
    while (got < sizeof buf && (r = read(c, buf + got, sizeof buf - got)) > 0) {
      got += (size_t)r;
      if (got >= 4 && memmem(buf, got, "\r\n\r\n", 4)) break;
    }
    const char *h = "HTTP/1.0 200 OK\r\nContent-Length: 1048576\r\n\r\n";
    if (write(c, h, strlen(h)) > 0)
      for (size_t off = 0; off < sizeof body && (r = write(c, body + off, sizeof body - off)) > 0; off += (size_t)r) {}
    close(c);
  }
}
]]

local w = F.start(S, SIZE)
local https4 = w.ports[3]
local server_bin = assert(S.cc("egress_bench_server", SERVER_C))
local server = assert(core.spawn({ path = server_bin, argv = { "server" }, env = {}, cwd = "/", stream = true }))
local line = ""
while not line:find("\n") do
  core.drive({ server }, 200)
  line = line .. (server:take() or "")
end
local http4 = math.tointeger(tonumber(line:match("%d+")))

local function pack(parent, name, wrap)
  wrap.timeout_ms = 300000
  local root = S.pack(S.manifest(name, "curl", { wrap = wrap }), parent)
  assert(os.execute(string.format("cp %s %s/cert.pem", S.q(w.cert), S.q(root))))
end

local parent = S.tmpdir("bench-packs-")
pack(parent, "proxied", { egress = { "api.test:" .. http4, "api.test:" .. https4 } })
pack(parent, "direct", { network = true })
local rt = assert(hcp.create({ pack_dirs = { parent }, network = "unrestricted",
  resolve = { ["api.test"] = "127.0.0.1" } }))

-- curl's times per transfer (seconds) of n downloads of url in one call,
-- appended to `into`; the call's result
local function transfers(name, url, into)
  local args = { "-sS", "--cacert", "cert.pem", "-w", "%{time_total} %{size_download}\n" }
  if name == "direct" then args[#args + 1] = "--noproxy" args[#args + 1] = "*" end
  if name == "direct" then
    for _, p in ipairs({ http4, https4 }) do
      args[#args + 1] = "--resolve"
      args[#args + 1] = "api.test:" .. p .. ":127.0.0.1"
    end
  end
  for _ = 1, n do
    args[#args + 1] = "-o"
    args[#args + 1] = "/dev/null"
    args[#args + 1] = url
  end
  local res = rt:call({ pack = name, args = args })
  assert(res.ok, tostring(res.error) .. " " .. tostring(res.stderr))
  local got = 0
  for secs, size in res.stdout:gmatch("([%d.]+) (%d+)") do
    assert(tonumber(size) == SIZE, "a transfer was short: " .. size)
    into[#into + 1] = tonumber(secs)
    got = got + 1
  end
  assert(got == n, "expected " .. n .. " transfers")
  return res
end

local function mibs(secs) return SIZE / secs / (1 << 20) end

local ROUNDS = 3
print(string.format("egress bench: 1 MiB downloads, %d rounds of %d per case (direct and proxied interleaved), "
  .. "curl inside the sandbox, median per transfer", ROUNDS, n))
for _, case in ipairs({ { "http", "http://api.test:" .. http4 .. "/big.bin" },
  { "https", "https://api.test:" .. https4 .. "/big.bin" } }) do
  local direct, proxied, res = {}, {}, nil
  for _ = 1, ROUNDS do
    transfers("direct", case[2], direct)
    res = transfers("proxied", case[2], proxied)
  end
  local d, p = median(direct), median(proxied)
  local e = res.egress[1]
  print(string.format("  %-5s direct  %8.1f MiB/s  (%.2f ms per transfer)", case[1], mibs(d), d * 1e3))
  print(string.format("  %-5s proxied %8.1f MiB/s  (%.2f ms per transfer)  ratio proxied/direct %.2f  "
    .. "[%s: %d connections, %d bytes in, in the last call]", case[1], mibs(p), p * 1e3, mibs(p) / mibs(d), e.host,
    e.count or 1, e.bytes_in))
end
rt:close()
server:kill("KILL")
server:wait()
w.stop()
