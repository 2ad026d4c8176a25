-- The loopback world spec/egress_spec.lua and bench/egress_bench.lua reach
-- through the egress proxy: a self-signed certificate (openssl), a served
-- directory with a file, a bare git repository for git's dumb HTTP, and
-- the servers of spec/egress_server.py (HTTP and HTTPS on 127.0.0.1 and
-- ::1). Nothing here listens anywhere but loopback, and nothing a spec
-- does through it reaches any other address.
local core = require("hcp.core")

local F = {}

F.CONTENT = "hello from the loopback server\n"
-- Where the tools are looked for: the system's, as the sandbox sees them
-- (a user's pyenv or nvm shims are not).
F.PATH = "/usr/bin:/bin"

--- What is missing for the fixture on this host, or nil.
---@param S table spec/support
---@return string? reason
function F.missing(S)
  for _, tool in ipairs({ "python3", "openssl", "curl", "git" }) do
    if not core.resolve(tool, F.PATH) then return tool .. " is not installed in " .. F.PATH end
  end
  if not (S.read("/proc/net/if_inet6") or ""):find("lo") then return "no IPv6 loopback" end
  return nil
end

local function sh(S, cmd)
  local out, code = S.sh(cmd .. " 2>&1")
  assert(code == 0, cmd .. ": " .. out)
  return out
end

-- A bare repository with one commit, prepared for dumb HTTP.
local function git_repo(S, dir, www)
  local q = S.q
  local g = "git -c init.defaultBranch=main -c user.name=spec -c user.email=spec@example.test"
  sh(S, string.format("%s init -q %s && cd %s && echo egress > f && git add f && %s commit -q -m %s",
    g, q(dir .. "/work"), q(dir .. "/work"), g, q("the commit egress_spec clones")))
  sh(S, string.format("git clone -q --bare %s %s && git -C %s update-server-info",
    q(dir .. "/work"), q(www .. "/repo.git"), q(www .. "/repo.git")))
end

--- Starts the world. Returns { ports = { http4, http6, https4, https6 },
--- dir, www, cert, log, stop }.
---@param S table spec/support
---@param big integer? bytes of www/big.bin (the bench's download)
function F.start(S, big)
  local q = S.q
  local dir = S.tmpdir("egress-")
  local www = S.mkdir(dir .. "/www")
  S.write(www .. "/index.html", F.CONTENT)
  if big then sh(S, string.format("head -c %d /dev/urandom > %s", big, q(www .. "/big.bin"))) end
  local cert, key = dir .. "/cert.pem", dir .. "/key.pem"
  sh(S, string.format("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=api.test -keyout %s -out %s "
    .. "-addext subjectAltName=DNS:api.test,DNS:api6.test,DNS:localhost,IP:127.0.0.1,IP:::1", q(key), q(cert)))
  assert(os.execute("chmod 644 " .. q(cert)))
  git_repo(S, dir, www)
  local log = dir .. "/requests.log"
  S.write(log, "")
  local python = core.resolve("python3", F.PATH)
  local proc = assert(core.spawn({ path = python, argv = { "python3", S.REPO .. "/spec/egress_server.py", www, cert,
    key, log }, env = { PATH = F.PATH }, cwd = dir, stream = true, capture = true,
    max_output = 65536 }))
  local line, t0 = "", core.monotonic_us()
  while not line:find("\n") and core.monotonic_us() - t0 < 20e6 do
    local done = core.drive({ proc }, 200)
    line = line .. (proc:take() or "")
    if #done > 0 then break end
  end
  local ports = {}
  for p in line:gmatch("%d+") do ports[#ports + 1] = math.tointeger(tonumber(p)) end
  if #ports ~= 4 then
    proc:kill("KILL")
    error("the servers did not start: " .. line .. proc:wait().stderr)
  end
  return { ports = ports, dir = dir, www = www, cert = cert, log = log,
    stop = function() proc:kill("KILL") proc:wait() end }
end

--- The requests the servers have seen, as "METHOD PATH HOST" lines.
function F.requests(S, w)
  return S.read(w.log) or ""
end

return F
