-- The hcp-lua launcher (src/hcp_lua.c): lua.c's options and `arg` table,
-- errors with tracebacks, hcp.core built in, the install tree's Lua
-- directories first, the REPL's line handling, and hcp/hcpx dispatch.
-- Every case runs the built binary as a child process.

local S = require("support")

-- The build under test (make check: its sanitized hcp-lua).
local BUILD_DIR = S.BUILD
local HCP_LUA = S.HCP_LUA

local q = S.q

local read = S.read

local write = S.write

local T

-- run(args, opts) -> exit code, stdout, stderr. args is a shell fragment
-- (already quoted); opts.stdin feeds stdin (default /dev/null, so nothing
-- ever reads the terminal), opts.env is a prefix like "LUA_PATH=...",
-- opts.exe replaces the binary.
local function run(args, opts)
  opts = opts or {}
  local out, err, inp = T .. "/out", T .. "/err", T .. "/in"
  local stdin = "/dev/null"
  if opts.stdin then
    write(inp, opts.stdin)
    stdin = inp
  end
  local cmd = string.format("%s %s %s <%s >%s 2>%s", opts.env or "", q(opts.exe or HCP_LUA),
    args or "", q(stdin), q(out), q(err))
  local _, _, code = os.execute(cmd)
  return code, read(out), read(err)
end

describe("hcp-lua", function()
  setup(function()
    local p = assert(io.popen("mktemp -d /tmp/hcp-lua-spec.XXXXXX"))
    T = p:read("l")
    p:close()
    assert(os.execute("mkdir -p " .. q(T .. "/mods")))
    write(T .. "/mods/greet.lua", "return { hello = function(n) return 'hello ' .. n end }\n")
    write(T .. "/mods/bad.lua", "error('module exploded')\n")
  end)
  teardown(function()
    if T then os.execute("rm -rf " .. q(T)) end
  end)

  describe("options", function()
    it("-e runs a statement", function()
      local code, out = run("-e 'print(1 + 1)'")
      assert.equal(0, code)
      assert.equal("2\n", out)
    end)

    it("-e accepts an attached argument and runs several in order", function()
      local code, out = run("-e 'x = 40' '-ex = x + 2' -e 'print(x)'")
      assert.equal(0, code)
      assert.equal("42\n", out)
    end)

    it("-v prints the version", function()
      local f = assert(io.open("src/hcp_core.h"))
      local version = f:read("a"):match('HCP_CORE_VERSION "([^"]+)"')
      f:close()
      local code, out = run("-v")
      assert.equal(0, code)
      assert.equal("hcp-lua " .. version .. " (Lua 5.4)\n", out)
    end)

    it("-l mod sets the global mod", function()
      local code, out = run("-l greet -e 'print(greet.hello(\"w\"))'",
        { env = "LUA_PATH=" .. q(T .. "/mods/?.lua;;") })
      assert.equal(0, code)
      assert.equal("hello w\n", out)
    end)

    it("-l g=mod sets the global g", function()
      local code, out = run("-l g=greet -e 'print(g.hello(\"x\"), greet)'",
        { env = "LUA_PATH=" .. q(T .. "/mods/?.lua;;") })
      assert.equal(0, code)
      assert.equal("hello x\tnil\n", out)
    end)

    it("-l reports a failing module and exits 1", function()
      local code, out, err = run("-l bad -e 'print(1)'", { env = "LUA_PATH=" .. q(T .. "/mods/?.lua;;") })
      assert.equal(1, code)
      assert.equal("", out)
      assert.matches("^hcp%-lua: .*module exploded", err)
    end)

    it("-E ignores LUA_PATH and LUA_INIT", function()
      local env = "LUA_INIT='print(\"init ran\")' LUA_PATH=" .. q(T .. "/mods/?.lua;;")
      local code, out = run("-e 'print(pcall(require, \"greet\"))'", { env = env })
      assert.equal(0, code)
      assert.matches("^init ran\ntrue\t", out)
      code, out = run("-E -e 'print((pcall(require, \"greet\")))'", { env = env })
      assert.equal(0, code)
      assert.equal("false\n", out)
    end)

    it("LUA_INIT=@file runs the file first", function()
      write(T .. "/init.lua", "INIT = 'yes'\n")
      local code, out = run("-e 'print(INIT)'", { env = "LUA_INIT=@" .. q(T .. "/init.lua") })
      assert.equal(0, code)
      assert.equal("yes\n", out)
    end)

    it("-W turns warnings on", function()
      local code, _, err = run("-e 'warn(\"quiet\")'")
      assert.equal(0, code)
      assert.equal("", err)
      code, _, err = run("-W -e 'warn(\"loud\")'")
      assert.equal(0, code)
      assert.matches("loud", err)
    end)

    it("rejects an unknown option or a missing argument with usage", function()
      local code, out, err = run("-x")
      assert.equal(1, code)
      assert.equal("", out)
      assert.matches("unrecognized option '%-x'", err)
      assert.matches("usage: hcp%-lua", err)
      code, out, err = run("-e")
      assert.equal(1, code)
      assert.equal("", out)
      assert.matches("'%-e' needs argument", err)
    end)
  end)

  describe("scripts", function()
    it("builds arg as lua.c does", function()
      local script = write(T .. "/args.lua", [[
        local t = {}
        for i = -3, #arg do t[#t + 1] = i .. "=" .. tostring(arg[i]) end
        print(table.concat(t, " "))
        print(select("#", ...), ...)
      ]])
      local code, out = run("-e 'x=1' " .. q(script) .. " a 'b c'")
      assert.equal(0, code)
      assert.equal(string.format("-3=%s -2=-e -1=x=1 0=%s 1=a 2=b c\n2\ta\tb c\n", HCP_LUA, script), out)
    end)

    it("builds arg with the interpreter at 0 when there is no script", function()
      local code, out = run("-e 'print(#arg, arg[0], arg[1], arg[-1])'")
      assert.equal(0, code)
      assert.equal(string.format("2\t%s\t-e\tnil\n", HCP_LUA), out)
    end)

    it("runs a script from stdin with -", function()
      local code, out = run("- x y", { stdin = "print(arg[0], ...)\n" })
      assert.equal(0, code)
      assert.equal("-\tx\ty\n", out)
    end)

    it("runs stdin as a script without a prompt when it is not a terminal", function()
      local code, out, err = run("", { stdin = "local x = 20\nprint(x + 1)\n" })
      assert.equal(0, code)
      assert.equal("21\n", out)
      assert.equal("", err)
    end)

    it("treats - after -- as a file name", function()
      local code, _, err = run("-- -", { stdin = "print('from stdin')\n" })
      assert.equal(1, code)
      assert.matches("cannot open %-", err)
    end)

    it("stops options at --", function()
      local script = write(T .. "/dash.lua", "print(...)\n")
      local code, out = run("-- " .. q(script) .. " -e x")
      assert.equal(0, code)
      assert.equal("-e\tx\n", out)
    end)

    it("exits 1 with the message and a traceback on stderr", function()
      local script = write(T .. "/fail.lua", "local function f() error('boom') end\nf()\n")
      local code, out, err = run(q(script))
      assert.equal(1, code)
      assert.equal("", out)
      assert.matches("^hcp%-lua: [^\n]*fail%.lua:1: boom\nstack traceback:\n", err)
      assert.matches("in local 'f'", err)
    end)

    it("describes a non-string error object", function()
      local code, _, err = run("-e 'error({})'")
      assert.equal(1, code)
      assert.matches("^hcp%-lua: %(error object is a table value%)", err)
      code, _, err = run("-e 'error(setmetatable({}, {__tostring = function() return \"custom\" end}))'")
      assert.equal(1, code)
      assert.equal("hcp-lua: custom\n", err)
    end)

    it("exits 1 on a syntax error", function()
      local code, _, err = run("-e 'x ='")
      assert.equal(1, code)
      assert.matches("^hcp%-lua: %(command line%):1:", err)
    end)

    it("keeps os.exit's status", function()
      assert.equal(7, (run("-e 'os.exit(7)'")))
    end)

    it("turns SIGINT into an 'interrupted!' error", function()
      local out, ready = T .. "/int.err", T .. "/int.ready"
      os.remove(ready)
      -- the chunk marks that it runs (its SIGINT handler is set) before the loop
      local chunk = string.format("io.open(%q, 'w'):close() while true do end", ready)
      local p = assert(io.popen(string.format(
        "%s -e %s </dev/null 2>%s & pid=$!; %s; kill -INT $pid; wait $pid; echo $?",
        q(HCP_LUA), q(chunk), q(out), S.sh_wait("[ -e " .. q(ready) .. " ]"))))
      local status = p:read("a")
      p:close()
      assert.equal("1\n", status)
      -- the signal may land while io.open is still returning (the file is
      -- there before it returns): the error then carries the chunk's line
      assert.matches("^hcp%-lua: [^\n]*interrupted!\nstack traceback:", read(out))
    end)
  end)

  describe("modules", function()
    it("has hcp.core built in and preloaded", function()
      local code, out = run("-e 'local c = require(\"hcp.core\"); " ..
        "print(type(package.preload[\"hcp.core\"]), type(c.normalize), c.normalize(\"/a/../b\"))'")
      assert.equal(0, code)
      assert.equal("function\tfunction\t/b\n", out)
    end)

    it("gives a C module a script requires the whole Lua API (hcp-lua holds liblua itself)", function()
      -- Debian's Lua modules are not linked to liblua: they find the API in
      -- the interpreter. Every function lua.h, lauxlib.h and lualib.h
      -- declare must be there to find, not only those the core calls.
      local inc = S.sh("pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4"):gsub("%s+$", "")
      local names = {}
      for _, h in ipairs({ "lua.h", "lauxlib.h", "lualib.h" }) do
        local dir = inc:match("%-I(%S+)") or "/usr/include/lua5.4"
        for name in read(dir .. "/" .. h):gmatch("LUA%u*_API[^;(]-%((lua[L%w]*_[%w_]+)%)") do names[#names + 1] = name end
      end
      assert.is_true(#names > 140, #names .. " names found in the headers")
      write(T .. "/apimod.c", [[
#define _GNU_SOURCE
#include <dlfcn.h>
#include <lua.h>
#include <lauxlib.h>
/* missing(names...) -> the names the process does not define; hello(s) uses the API */
static int missing(lua_State *L) {
  int n = lua_gettop(L);   /* before the buffer's own slot */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++)
    if (!dlsym(RTLD_DEFAULT, luaL_checkstring(L, i))) { luaL_addstring(&b, lua_tostring(L, i)); luaL_addchar(&b, ' '); }
  luaL_pushresult(&b);
  return 1;
}
static int hello(lua_State *L) {
  luaL_checkversion(L);
  lua_pushfstring(L, "hello, %s: %d", luaL_checkstring(L, 1), (int)luaL_len(L, 2));
  return 1;
}
int luaopen_apimod(lua_State *L) {
  luaL_Reg f[] = { { "missing", missing }, { "hello", hello }, { NULL, NULL } };
  luaL_newlib(L, f);
  return 1;
}
]])
      assert(os.execute(string.format("cc -shared -fPIC %s -o %s %s", inc, q(T .. "/apimod.so"), q(T .. "/apimod.c"))))
      local code, out, err = run(string.format("-e 'local m = require(\"apimod\"); print(m.hello(\"api\", {1, 2, 3})); "
        .. "print(\"[\" .. m.missing(%s) .. \"]\")'", "\"" .. table.concat(names, "\", \"") .. "\""),
        { env = "LUA_CPATH=" .. q(T .. "/?.so") })
      assert.equal("", err)
      assert.equal(0, code)
      assert.equal("hello, api: 3\n[]\n", out)
    end)

    it("searches the build share and lib directories first", function()
      local code, out = run("-e 'print(package.path); print(package.cpath)'",
        { env = "LUA_PATH='/x/?.lua;;'" })
      assert.equal(0, code)
      local path, cpath = out:match("^([^\n]*)\n([^\n]*)\n$")
      local share = BUILD_DIR .. "/share/lua/5.4"
      local want = share .. "/?.lua;" .. share .. "/?/init.lua;/x/?.lua;"
      assert.equal(want, path:sub(1, #want))
      want = BUILD_DIR .. "/lib/lua/5.4/?.so;"
      assert.equal(want, cpath:sub(1, #want))
    end)

    it("keeps the build share directory first under -E", function()
      local code, out = run("-E -e 'print(package.path)'", { env = "LUA_PATH='/x/?.lua'" })
      assert.equal(0, code)
      assert.equal(1, out:find(BUILD_DIR .. "/share/lua/5.4/?.lua;", 1, true))
      assert.is_nil(out:find("/x/?.lua", 1, true))
    end)

    it("finds the modules of an install tree next to the binary", function()
      local prefix = T .. "/prefix"
      assert(os.execute(string.format("mkdir -p %s/bin %s/share/lua/5.4/hcp && cp %s %s/bin/hcp-lua",
        q(prefix), q(prefix), q(HCP_LUA), q(prefix))))
      write(prefix .. "/share/lua/5.4/hcp/probe.lua", "return 'installed probe'\n")
      local code, out = run("-e 'print((require(\"hcp.probe\")))'", { exe = prefix .. "/bin/hcp-lua" })
      assert.equal(0, code)
      assert.equal("installed probe\n", out)
    end)
  end)

  describe("REPL on a non-terminal stdin (-i)", function()
    it("evaluates expressions first, statements otherwise, over several lines", function()
      local code, out = run("-i", { stdin = "x = 20\nx + 1\nfor i = 1, 2 do\nprint(i)\nend\n" })
      assert.equal(0, code)
      -- the prompts are printed as lua.c does; results follow them
      assert.matches("^hcp%-lua [^\n]+\nhcp> hcp> 21\nhcp> >> >> 1\n2\nhcp> \n$", out)
    end)

    it("reports an error and carries on", function()
      local code, out, err = run("-i", { stdin = "error('oops')\nprint('after')\n" })
      assert.equal(0, code)
      assert.matches("after", out)
      assert.matches("^stdin:1: oops\nstack traceback:", err)
    end)

    it("prints several results tab-separated, through tostring", function()
      local code, out = run("-i", { stdin = "1, 'a', nil, setmetatable({}, {__tostring = function() return 'T' end})\n" })
      assert.equal(0, code)
      assert.matches("hcp> 1\ta\tnil\tT\n", out, 1, true)
    end)

    it("prints through hcp_repl_print when it is defined", function()
      local code, out = run("-e 'function hcp_repl_print(...) print(\"custom\", select(\"#\", ...)) end' -i",
        { stdin = "1, 2, 3\n" })
      assert.equal(0, code)
      assert.matches("hcp> custom\t3\n", out, 1, true)
    end)

    it("sets hcp and rt from the hcp module, warning in one line when it fails", function()
      local prefix = T .. "/repl"
      local init = prefix .. "/share/lua/5.4/hcp/init.lua"
      assert(os.execute(string.format("mkdir -p %s/bin %s/share/lua/5.4/hcp && cp %s %s/bin/hcp-lua",
        q(prefix), q(prefix), q(HCP_LUA), q(prefix))))
      local exe = prefix .. "/bin/hcp-lua"
      write(init, "return { name = 'fake', repl_runtime = function() return 'RT' end }\n")
      local code, out, err = run("-i", { exe = exe, stdin = "hcp.name, rt\n" })
      assert.equal(0, code)
      assert.matches("hcp> fake\tRT\n", out, 1, true)
      assert.equal("", err)
      write(init, "return { repl_runtime = function() error('no runtime\\nmore') end }\n")
      code, out, err = run("-i", { exe = exe, stdin = "type(hcp), rt\n" })
      assert.equal(0, code)
      assert.matches("hcp> table\tnil\n", out, 1, true)
      assert.matches("^hcp%-lua: warning: hcp%.repl_runtime%(%) failed: [^\n]*no runtime\n$", err)
      write(init, "return {}\n")
      code, out, err = run("-i", { exe = exe, stdin = "type(hcp), rt\n" })
      assert.equal(0, code)
      assert.matches("hcp> table\tnil\n", out, 1, true)
      assert.equal("", err)
    end)

    it("reports an unfinished statement at end of input", function()
      local code, _, err = run("-i", { stdin = "if true then\n" })
      assert.equal(0, code)
      assert.matches("'end' expected", err)
    end)
  end)

  describe("REPL on a terminal", function()
    -- Drives the REPL through a pseudo-terminal; python3 provides the pty.
    local DRIVER = [==[
import os, pty, select, sys, time
exe, state = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    os.environ["XDG_STATE_HOME"] = state
    os.environ["TERM"] = "dumb"
    os.execv(exe, [exe])
buf = b""
def expect(what, timeout=30.0):
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
    return seen.decode(errors="replace")
def send(s):
    os.write(fd, s.encode())
expect("hcp> ")
send("1 + 41\n"); expect("42"); expect("hcp> ")
send("half typed"); expect("half typed"); send("\x03"); expect("hcp> ")
send("'after ctrl-c'\n"); print("LINE1", expect("hcp> ").replace("\r", "").strip().splitlines()[-2])
send("for i = 1, 2 do\n"); expect(">> ")
send("\x03"); expect("hcp> ")
send("end_ok = 1\n"); expect("hcp> ")
send("io.write('loop' .. '-started', '\\n') io.flush() while true do end\n"); expect("loop-started\r\n"); send("\x03")
print("INTR", "interrupted!" in expect("hcp> "))
send("'still alive'\n"); print("LINE2", expect("hcp> ").replace("\r", "").strip().splitlines()[-2])
send("\x04")
_, st = os.waitpid(pid, 0)
print("EXIT", os.WEXITSTATUS(st) if os.WIFEXITED(st) else -st)
]==]

    S.it("python3", "handles Ctrl-C at the prompt and in a chunk, Ctrl-D, and keeps history", function()
      local driver = write(T .. "/pty_driver.py", DRIVER)
      local state = T .. "/state"
      local p = assert(io.popen(string.format("python3 %s %s %s 2>&1", q(driver), q(HCP_LUA), q(state))))
      local out = p:read("a")
      p:close()
      assert.matches("LINE1 after ctrl%-c\n", out)
      assert.matches("INTR True\n", out)
      assert.matches("LINE2 still alive\n", out)
      assert.matches("EXIT 0\n", out)
      local hist = read(state .. "/hcp/history")
      assert.is_string(hist)
      assert.matches("1 %+ 41\n", hist)
      assert.is_nil(hist:find("half typed", 1, true))
      local mode = io.popen("stat -c %a " .. q(state .. "/hcp")):read("l")
      assert.equal("700", mode)
    end)
  end)

  describe("hcp and hcpx", function()
    local prefix

    setup(function()
      -- A private install tree whose hcp.cli echoes its arguments; the
      -- binary is copied so that it finds this tree, not the checkout's.
      prefix = T .. "/cli"
      assert(os.execute(string.format(
        "mkdir -p %s/bin %s/share/lua/5.4/hcp && cp %s %s/bin/hcp-lua && ln -s hcp-lua %s/bin/hcp && ln -s hcp-lua %s/bin/hcpx",
        q(prefix), q(prefix), q(HCP_LUA), q(prefix), q(prefix), q(prefix))))
      write(prefix .. "/share/lua/5.4/hcp/cli.lua", [[
        local M = {}
        function M.main(name, args)
          io.write(name, "|", table.concat(args, "|"), "\n")
          if args[1] == "code" then return tonumber(args[2]) end
          if args[1] == "false" then return false end
          if args[1] == "true" then return true end
          if args[1] == "error" then error("cli failed") end
          if args[1] == "path" then print(package.path) print(package.cpath) end
        end
        return M
      ]])
    end)

    it("hcp runs hcp.cli.main('hcp', args) and exits 0 when it returns nothing", function()
      local code, out = run("run 'a b' c", { exe = prefix .. "/bin/hcp" })
      assert.equal(0, code)
      assert.equal("hcp|run|a b|c\n", out)
    end)

    it("hcpx passes its own name", function()
      local code, out = run("x", { exe = prefix .. "/bin/hcpx" })
      assert.equal(0, code)
      assert.equal("hcpx|x\n", out)
    end)

    it("exits with main's integer, 1 for false, 0 for true", function()
      assert.equal(3, (run("code 3", { exe = prefix .. "/bin/hcp" })))
      assert.equal(1, (run("false", { exe = prefix .. "/bin/hcp" })))
      assert.equal(0, (run("true", { exe = prefix .. "/bin/hcp" })))
    end)

    it("takes no hcp-lua options", function()
      local code, out = run("-v -e x", { exe = prefix .. "/bin/hcp" })
      assert.equal(0, code)
      assert.equal("hcp|-v|-e|x\n", out)
    end)

    it("exits 1 with a traceback when main raises", function()
      local code, _, err = run("error", { exe = prefix .. "/bin/hcp" })
      assert.equal(1, code)
      assert.matches("^hcp: [^\n]*cli failed\nstack traceback:", err)
    end)

    it("never loads modules relative to the cwd", function()
      local code, out = run("path", { exe = prefix .. "/bin/hcp", env = "LUA_PATH='rel/?.lua;/abs/?.lua;;'" })
      assert.equal(0, code)
      local paths = out:match("^hcp|path\n(.*)$")
      assert.is_string(paths)
      for entry in paths:gmatch("[^;\n]+") do
        assert.equal("/", entry:sub(1, 1), entry)
      end
      assert.truthy(out:find(";/abs/?.lua;", 1, true))
    end)

    it("exits 1 when hcp.cli cannot be loaded", function()
      local bare = T .. "/bare"
      assert(os.execute(string.format("mkdir -p %s/bin && cp %s %s/bin/hcp-lua && ln -s hcp-lua %s/bin/hcp",
        q(bare), q(HCP_LUA), q(bare), q(bare))))
      local code, out, err = run("x", { exe = bare .. "/bin/hcp", env = "LUA_PATH='/nonexistent/?.lua'" })
      assert.equal(1, code)
      assert.equal("", out)
      assert.matches("^hcp: module 'hcp.cli' not found", err)
    end)
  end)
end)
