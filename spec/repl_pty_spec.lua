-- The hcp-lua REPL on a real terminal: TAB completion through readline, a
-- multi-line chunk kept as one history entry, and results laid out in the
-- terminal's width. python3 drives hcp-lua through a pseudo-terminal.
local S = require("support")

local BUILD = (os.getenv("HCP_SPEC_LUA") or ""):match("^(.*)/bin/hcp%-lua$") or S.REPO .. "/build"
local HCP_LUA = BUILD .. "/bin/hcp-lua"
local q = S.q

-- start(cols) runs hcp-lua on a new pty (cols: its width, else none set);
-- expect(text) waits for text in the output and returns what came before
-- and with it; send(text) types; quit() sends Ctrl-D and returns the status.
local PRELUDE = [==[
import fcntl, os, pty, select, struct, sys, termios, time
exe, state, packs = sys.argv[1], sys.argv[2], sys.argv[3]
fd, pid, buf = None, None, b""
def start(cols=None, columns=None, pack_path=None, env=None):
    global fd, pid, buf
    buf = b""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["XDG_STATE_HOME"] = state
        os.environ["TERM"] = "dumb"
        os.environ["HCP_PACK_PATH"] = packs if pack_path is None else pack_path
        os.environ.pop("HCP_CONFIG", None)
        os.environ.pop("COLUMNS", None)
        if columns: os.environ["COLUMNS"] = columns
        if env: os.environ.update(env)
        os.execv(exe, [exe])
    if cols:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
def expect(what, timeout=20.0):
    global buf
    end = time.time() + timeout
    while what.encode() not in buf:
        if time.time() > end:
            print("TIMEOUT waiting for %r in %r" % (what, buf)); sys.exit(1)
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try: buf += os.read(fd, 4096)
            except OSError: break
    i = buf.index(what.encode()) + len(what)
    seen, buf = buf[:i], buf[i:]
    return seen.decode(errors="replace").replace("\r", "")
def send(s):
    os.write(fd, s.encode())
def quit():
    send("\x04")
    _, st = os.waitpid(pid, 0)
    return os.WEXITSTATUS(st) if os.WIFEXITED(st) else -st
]==]

local T

-- Runs PRELUDE + body; returns what it printed.
local function drive(body)
  local driver = S.write(T .. "/driver.py", PRELUDE .. body)
  local out = S.sh(string.format("python3 %s %s %s %s 2>&1", q(driver), q(HCP_LUA), q(T .. "/state"),
    q(S.REPO .. "/packs-examples")))
  return out
end

local function history()
  return S.read(T .. "/state/hcp/history")
end

describe("hcp-lua REPL on a terminal", function()
  local _, has_python = S.sh("command -v python3 >/dev/null 2>&1")
  if has_python ~= 0 then
    pending("python3 is needed to drive a pseudo-terminal")
    return
  end

  before_each(function()
    T = S.tmpdir("pty-")
  end)

  it("completes a global's field and pack and op names with TAB", function()
    local out = drive([[
start()
expect("hcp> ")
send("string.upp\t('abc')\n")
print("UPPER", expect("hcp> ").strip().splitlines()[-2])
send('rt:call{pack="j\t, op="ev\t, params = { expr = "6*7" } }.stdout\n')
seen = expect("hcp> ")
print("LINE", [l for l in seen.splitlines() if "params" in l][-1])
print("CALL", "42" in seen.splitlines())
print("EXIT", quit())
]])
    assert.matches("UPPER ABC\n", out)
    -- what readline put on the line: the completed names, the strings closed
    assert.matches('LINE [^\n]*rt:call{pack="jq", op="eval", params = { expr = "6%*7" } }%.stdout\n', out)
    assert.matches("CALL True\n", out)
    assert.matches("EXIT 0\n", out)
    assert.matches('\nrt:call{pack="jq", op="eval", params', history(), 1, true)
  end)

  -- readline is loaded when the REPL starts on a terminal, not linked
  -- (src/readline_dl.c): no start of hcp-lua, hcp or hcpx pays for it
  it("is not linked to readline: hcp-lua loads it only for a REPL on a terminal", function()
    local needed = S.sh("LC_ALL=C readelf -d " .. q(HCP_LUA) .. " 2>&1")
    assert.matches("NEEDED", needed)
    assert.not_matches("readline", needed)
    assert.not_matches("tinfo", needed)
  end)

  it("HCP_READLINE=none: a plain prompt on the terminal, no editing and no history, and no warning", function()
    local out = drive([[
start(env={"HCP_READLINE": "none"})
expect("hcp> ")
send("string.upp\t('abc')\n")
seen = expect("hcp> ")
print("TAB", "attempt to call a nil value" in seen or "unexpected symbol" in seen or "upp\t" in seen)
send("print(6*7)\n")
print("CALL", "42" in expect("hcp> ").splitlines())
print("EXIT", quit())
]])
    -- without readline TAB is a character of the line, not a completion
    assert.matches("TAB True\n", out)
    assert.matches("CALL True\n", out)
    assert.matches("EXIT 0\n", out)
    assert.not_matches("no line editing", out)
    assert.is_nil(io.open(T .. "/state/hcp/history"))
  end)

  it("keeps a multi-line chunk as one history entry, recalled whole in the next session", function()
    local out = drive([[
start()
expect("hcp> ")
send("for i = 1, 2 do\n"); expect(">> ")
send("print('it', i * 10)\n"); expect(">> ")
send("end\n"); expect("it\t20"); expect("hcp> ")
print("EXIT1", quit())
start()
expect("hcp> ")
send("\x10\n")
expect("it\t10"); expect("it\t20"); expect("hcp> ")
print("EXIT2", quit())
]])
    assert.matches("EXIT1 0\n", out)
    assert.matches("EXIT2 0\n", out)
    local hist = history()
    -- one entry: a timestamp line, then the chunk's three lines
    assert.matches("^#%d+\nfor i = 1, 2 do\nprint%('it', i %* 10%)\nend\n#%d+\nfor i = 1, 2 do\n", hist)
  end)

  it("rewrites an older history file with timestamps, and trims to 1000 whole entries", function()
    S.mkdir(T .. "/state/hcp")
    local old = {}
    for i = 1, 1000 do old[i] = "x = " .. i end
    S.write(T .. "/state/hcp/history", table.concat(old, "\n") .. "\n")
    local out = drive([[
start()
expect("hcp> ")
send("local t = {\n"); expect(">> ")
send("1 }\n"); expect("hcp> ")
print("EXIT", quit())
]])
    assert.matches("EXIT 0\n", out)
    local hist = history()
    local stamps, lines = 0, 0
    for line in hist:gmatch("[^\n]*\n") do
      lines = lines + 1
      if line:match("^#%d+\n$") then stamps = stamps + 1 end
    end
    assert.equal(1000, stamps)
    assert.equal(2001, lines)
    assert.matches("^#%d+\nx = 2\n", hist)
    assert.matches("\n#%d+\nx = 1000\n#%d+\nlocal t = {\n1 }\n$", hist)
  end)

  it("says where it looked when rt has no packs, and is quiet when it has some", function()
    local empty = S.tmpdir("nopacks-")
    local out = drive(string.format([[
start(pack_path=%q)
print("FIRST", repr(expect("hcp> ")))
print("EXIT1", quit())
start()
print("SECOND", repr(expect("hcp> ")))
print("EXIT2", quit())
]], empty))
    assert.matches("EXIT1 0\n", out)
    local first = out:match("FIRST '(.-)'\n")
    assert.truthy(first:find("hcp-lua: rt has no packs: looked in " .. empty .. " (HCP_CONFIG unset, HCP_PACK_PATH="
      .. empty .. ")", 1, true), out)
    assert.is_nil(out:match("SECOND '(.-)'\n"):find("no packs", 1, true))
  end)

  it("spreads a wide result over lines as wide as the terminal, whatever $COLUMNS says", function()
    local out = drive([[
start(cols=40, columns="200")
expect("hcp> ")
send("{ alpha = string.rep('a', 20), beta = string.rep('b', 20), list = { 1, 2, 3 } }\n")
print("RESULT", repr(expect("hcp> ")))
print("EXIT", quit())
]])
    assert.matches("EXIT 0\n", out)
    local result = out:match("RESULT '(.-)'\n")
    assert.is_string(result, out)
    assert.truthy(result:find([[\n  alpha = "aaaaaaaaaaaaaaaaaaaa",\n  beta = "bbbbbbbbbbbbbbbbbbbb",\n]]
      .. [[  list = { 1, 2, 3 }\n}\n]], 1, true), result)
  end)
end)
