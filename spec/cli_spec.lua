-- The commands of contract §6, driven end to end as a user types them:
-- exit statuses, what reaches stdout and stderr, and the files written.
local S = require("support")
local json = require("hcp.json")
local core = require("hcp.core")

local HCP, HCPX, HCP_LUA = S.HCP, S.HCPX, S.HCP_LUA

local q = S.q

-- Run a command line in the repo; returns stdout, stderr, exit status.
local function run(cmdline, opts)
  opts = opts or {}
  local dir = S.tmpdir("cli-")
  local env = opts.env or ""
  local stdin = opts.stdin and (" < " .. q(S.write(dir .. "/in", opts.stdin))) or " < /dev/null"
  local cmd = string.format("cd %s && env -u HCP_PACK_PATH -u HCP_CONFIG %s %s > %s 2> %s%s",
    q(opts.cwd or S.REPO), env, cmdline, q(dir .. "/out"), q(dir .. "/err"), stdin)
  local _, _, code = os.execute(cmd)
  return S.read(dir .. "/out"), S.read(dir .. "/err"), code
end

local EX = "--pack-dir packs-examples"

describe("hcp run / hcpx", function()
  it("passes the child's stdout and stderr through and exits with its status", function()
    local out, err, code = run(HCP .. " run " .. EX .. " jq -n '1+2'")
    assert.equal("3\n", out)
    assert.equal("", err)
    assert.equal(0, code)
    out, err, code = run(HCP .. " run " .. EX .. " jq -n 'error(\"boom\")'")
    assert.equal("", out)
    assert.matches("boom", err)
    assert.equal(5, code)
  end)

  it("gives a piped stdin to the child", function()
    local out, _, code = run(HCP .. " run " .. EX .. " jq .a+1", { stdin = '{"a":41}' })
    assert.equal("42\n", out)
    assert.equal(0, code)
  end)

  it("streams output as it comes: the first line arrives before the child ends", function()
    -- the child prints a line and then waits until the reader has seen it
    -- (a file the reader makes in the pack root, the child's cwd); output
    -- held back until the end would leave it waiting until it gives up
    local root = S.pack(S.manifest("slow", "sh", { wrap = { timeout_ms = 60000, args = { "-c",
      "echo first; " .. S.sh_wait("[ -e seen ]") .. "; [ -e seen ] && echo second || echo unseen" } } }))
    local dir = S.tmpdir("stream-")
    local reader = string.format('while read -r l; do echo "$l"; if [ "$l" = first ]; then touch %s; fi; done', q(root .. "/seen"))
    local cmd = string.format("%s run --pack-dir %s slow | %s > %s", HCP, q(root), reader, q(dir .. "/o"))
    assert(os.execute(cmd))
    assert.equal("first\nsecond\n", S.read(dir .. "/o"))
  end)

  it("refusals exit 127/126 with one line on stderr, and print nothing on stdout", function()
    local out, err, code = run(HCP .. " run " .. EX .. " nope")
    assert.equal("", out)
    assert.equal('hcp: envelope: no pack named "nope"\n', err)
    assert.equal(126, code)
    local root = S.pack(S.manifest("ghost", "hcp-not-a-real-binary"))
    out, err, code = run(HCP .. " run --pack-dir " .. q(root) .. " ghost")
    assert.equal("", out)
    assert.equal(127, code)
    assert.matches('hcp: spawn: bin "hcp%-not%-a%-real%-binary".*not found', err)
  end)

  it("arguments after PACK go to the child verbatim, even ones that look like hcp options", function()
    local out = run(HCP .. " run " .. EX .. " jq -n --arg x --pack-dir '$x'")
    assert.equal('"--pack-dir"\n', out)
  end)

  it("--json prints the result envelope", function()
    local out, _, code = run(HCP .. " run --json " .. EX .. " jq -n 6*7")
    assert.equal(0, code)
    local res = json.decode(out)
    assert.is_true(res.ok)
    assert.equal("42\n", res.stdout)
    assert.equal("sandbox", res.sandbox)
  end)

  it("ends without collecting its Lua state only once all is closed: every byte out, nothing left in TMPDIR",
    function()
      -- hcp run skips lua_close after its runtime closed (src/hcp_lua.c,
      -- may_skip_close): what is buffered must still arrive, and the
      -- private directory must be gone, for a child's success and failure
      local tmp = S.tmpdir("cli-tmp-")
      local env = { env = "TMPDIR=" .. q(tmp) }
      local out, _, code = run(HCP .. " run " .. EX .. " jq -n 'range(200000)'", env)
      assert.equal(0, code)
      assert.equal(200000, select(2, out:gsub("\n", "")))
      assert.truthy(out:find("\n199999\n$"))
      out, _, code = run(HCP .. " run --json " .. EX .. " jq -n 'range(50000)'", env)
      assert.equal(0, code)
      local res = assert(json.decode(out))
      assert.equal(50000, select(2, res.stdout:gsub("\n", "")))
      local _, err
      _, err, code = run(HCP .. " run " .. EX .. " jq -n 'error(\"boom\")'", env)
      assert.equal(5, code)
      assert.matches("boom", err)
      assert.same({}, core.listdir(tmp))
    end)

  it("loads only the pack it calls: another pack's bad manifest is not validated (hcp list still says)", function()
    local dir = S.tmpdir("cli-only-")
    S.must_sh(string.format("cp -r %s %s", q(S.REPO .. "/packs-examples/jq"), q(dir .. "/")))
    S.pack('{"hcp":1,"name":"broken","wrap":{"bin":"env","timeout_ms":-5}}', dir, "broken")
    local out, err, code = run(HCP .. " run --pack-dir " .. q(dir) .. " jq -n 1")
    assert.equal("1\n", out)
    assert.equal("", err)
    assert.equal(0, code)
    local _, lerr = run(HCP .. " list --pack-dir " .. q(dir))
    assert.matches("broken/hcp.json: wrap.timeout_ms", lerr)
    _, err, code = run(HCP .. " run --pack-dir " .. q(dir) .. " broken")
    assert.equal(126, code)
    assert.matches("broken/hcp.json: wrap.timeout_ms", err)
  end)

  it("hcpx PACK ARGS is hcp run", function()
    local out, _, code = run(HCPX .. " " .. EX .. " jq -n '\"x\"'")
    assert.equal('"x"\n', out)
    assert.equal(0, code)
  end)
end)

describe("hcp call", function()
  it("answers one result line per request line; a malformed line gets an error envelope and the stream goes on", function()
    local input = table.concat({
      '{"id":"a","pack":"jq","op":"eval","params":{"expr":"[1,2]|add"}}',
      "not json",
      "",
      '{"id":"c","pack":"jq","x":1}',
      '{"id":"d","pack":"jq","op":"filter","params":{"expr":".a"},"stdin":"{\\"a\\":5}"}',
    }, "\n") .. "\n"
    local out, _, code = run(HCP .. " call " .. EX, { stdin = input })
    assert.equal(0, code)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = json.decode(l) end
    assert.equal(4, #lines)
    assert.equal("a", lines[1].id)
    assert.equal("3\n", lines[1].stdout)
    assert.matches("^envelope: invalid JSON", lines[2].error)
    assert.equal(126, lines[2].exit)
    assert.equal('envelope: unknown field "x"', lines[3].error)
    assert.equal("c", lines[3].id)
    assert.equal("5\n", lines[4].stdout)
  end)

  it("collects its garbage: 20 times the requests do not take 20 times the memory", function()
    -- every answered request leaves ~3 KB of garbage (its decoded table,
    -- its result, its line); a collector that never runs (the state's set-up
    -- stopped it, and the command never restarted it) lets a server grow
    -- ~30 MB here, and without bound over hours. Requests for an unknown
    -- pack are answered without a spawn, so 10 000 take a fraction of a second.
    local function peak_kb(n)
      local lines = {}
      for i = 1, n do lines[i] = string.format('{"id":%d,"pack":"nope%d"}', i, i) end
      local env = { PATH = "/usr/bin:/bin", HOME = os.getenv("HOME") or "/",
        -- under make check: ASan keeps freed memory in quarantine, which
        -- would grow with the requests whether collected or not
        ASAN_OPTIONS = "detect_leaks=0:quarantine_size_mb=0:" .. (os.getenv("ASAN_OPTIONS") or "") }
      local p = assert(core.spawn({ path = HCP, argv = { "hcp", "call", "--pack-dir", S.REPO .. "/packs-examples" },
        env = env, cwd = S.REPO, stdin = table.concat(lines, "\n") .. "\n", capture = false, timeout_ms = 120000 }))
      local res = assert(p:wait())
      assert.equal(0, res.exit)
      return res.usage.max_rss_kb
    end
    local few, many = peak_kb(500), peak_kb(10000)
    assert.is_true(many - few < 8 * 1024, string.format("500 requests: %d KB peak; 10000: %d KB", few, many))
  end)

  it("reads a file as well as -", function()
    local f = S.write(S.tmpdir("req-") .. "/reqs.jsonl", '{"pack":"jq","args":["-n","7"]}\n')
    local out = run(HCP .. " call " .. EX .. " " .. q(f))
    assert.equal("7\n", json.decode(out).stdout)
  end)

  it("answers each line before the next is read (an agent keeps the pipe open)", function()
    local dir = S.tmpdir("pipe-")
    local fifo = dir .. "/in"
    assert(os.execute("mkfifo " .. q(fifo)))
    -- writer: one request, then waits to see the answer before sending the next
    local cmd = string.format([[
      cd %s && ( exec 3>%s; echo '{"id":1,"pack":"jq","args":["-n","1"]}' >&3;
        _i=0; until grep -q '"id":1' %s/out 2>/dev/null || [ $_i -ge 3000 ]; do _i=$((_i+1)); sleep 0.01; done;
        grep -c '"id":1' %s/out > %s/seen-before-second; echo '{"id":2,"pack":"jq","args":["-n","2"]}' >&3 ) &
      %s call %s < %s > %s/out; wait]], q(S.REPO), q(fifo), q(dir), q(dir), q(dir), HCP, EX, q(fifo), q(dir))
    assert(os.execute(cmd))
    assert.equal("1\n", S.read(dir .. "/seen-before-second"))
    assert.equal(2, select(2, S.read(dir .. "/out"):gsub("\n", "")))
  end)
end)

describe("hcp list", function()
  it("lists packs with resolved bins, modes and source dirs", function()
    local out, _, code = run(HCP .. " list " .. EX)
    assert.equal(0, code)
    assert.matches("^mode: sandbox\n", out)
    assert.matches("jq%s+/usr/bin/jq%s+none%s+" .. S.REPO:gsub("%-", "%%-") .. "/packs%-examples/jq\n", out)
  end)

  it("--json gives an array with the same facts", function()
    local out = run(HCP .. " list --json " .. EX)
    local packs = json.decode(out)
    local jq
    for _, p in ipairs(packs) do if p.name == "jq" then jq = p end end
    assert.equal("/usr/bin/jq", jq.path)
    assert.equal("none", jq.workspace)
    assert.equal("sandbox", jq.sandbox)
  end)

  it("reports a bad manifest on stderr and lists the rest", function()
    local parent = S.tmpdir("badlist-")
    S.pack(S.manifest("good", "env"), parent)
    S.pack('{"hcp":1,"name":"bad","wrap":{"bin":"env","agent_env":{"LD_PRELOAD":"x"}}}', parent, "bad")
    local out, err = run(HCP .. " list --pack-dir " .. q(parent))
    assert.matches("good", out)
    assert.not_matches("\nbad ", out)
    assert.matches("manifest: .*/bad/hcp.json: wrap.agent_env.LD_PRELOAD: ", err)
  end)
end)

describe("hcp validate", function()
  it("prints ok for good manifests and exits 0", function()
    local out, _, code = run(HCP .. " validate packs-examples")
    assert.equal(0, code)
    assert.matches("ok jq %(", out)
  end)

  it("lists every problem of every manifest with file and field, and exits 1", function()
    local parent = S.tmpdir("invalid-")
    S.pack('{"hcp":2,"name":"Bad","wrap":{"bin":"x/y","timeout_ms":0}}', parent, "one")
    S.pack("{oops", parent, "two")
    local _, err, code = run(HCP .. " validate " .. q(parent) .. " " .. q(parent .. "/missing"))
    assert.equal(1, code)
    local lines = {}
    for l in err:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal(6, #lines)
    assert.matches("missing: pack dir does not exist", err)
    assert.matches("one/hcp.json: hcp: must be the integer 1", err)
    assert.matches("one/hcp.json: name: ", err)
    assert.matches("one/hcp.json: wrap.bin: ", err)
    assert.matches("one/hcp.json: wrap.timeout_ms: ", err)
    assert.matches("two/hcp.json: invalid JSON", err)
  end)
end)

describe("hcp doctor", function()
  it("lists each isolation layer, whether it is used, and why not", function()
    local out, _, code = run(HCP .. " doctor")
    assert.equal(0, code)
    assert.matches("allowlist%s+used", out)
    local d = json.decode((run(HCP .. " doctor --json")))
    local names = {}
    for _, l in ipairs(d.layers) do names[l.name] = l end
    assert.is_true(names.no_new_privs.used)
    assert.is_string(d.version)
    for _, l in ipairs({ "landlock", "seccomp", "netns", "pidns", "caps", "limits" }) do
      assert.is_table(names[l], l)
      -- a layer is either used, or its line says why it is not
      assert.is_true(names[l].used or names[l].reason ~= nil or names[l].available, l)
    end
  end)

  it("reports what a configured runtime would use: native-local adds nothing, bwrap brings its own", function()
    local d = json.decode((run(HCP .. " doctor --json --no-sandbox --native-local")))
    assert.equal("native-local", d.mode)
    for _, l in ipairs(d.layers) do
      if l.name == "landlock" or l.name == "seccomp" then assert.is_false(l.used, l.name) end
    end
    local cfg = S.write(S.tmpdir("doc-") .. "/bw.lua", 'return { driver = "bwrap", isolation = "auto" }')
    d = json.decode((run(HCP .. " doctor --json --config " .. q(cfg))))
    assert.equal("bwrap", d.driver)
    for _, l in ipairs(d.layers) do
      if l.name == "netns" then assert.equal("by bubblewrap", l.detail) end
      if l.name == "landlock" then assert.is_false(l.used) end
    end
  end)
end)

describe("hcp wrap", function()
  local cli = require("hcp.cli")

  it("finds file-taking flags in help texts, in both --flag=FILE and -o FILE forms", function()
    local help = [[
Usage: tool [OPTIONS] INPUT
  -o, --output=FILE      write here
  -c, --config <path>    read settings
      --json-file FILE   json input
  -v, --verbose          more output
  -n NUM                 a number
      --level=LEVEL      not a file
  -i INFILE              input file]]
    assert.same({ "--config", "--json-file", "--output", "-c", "-i", "-o" }, cli.file_flags_from_help(help))
  end)

  it("splits them into inputs and outputs by the flag's words or the metavariable (issue 15)", function()
    local help = [[
  -o, --output=FILE      write here
  -c, --config <path>    read settings
      --log=FILE         write a log
      --out-file FILE    the result
  -write filename        write images to this file
      --save-as PATH     save
  -d DESTFILE            where
      --layout-file FILE a layout, read
      --timeout=SECS     not a file
  -i INFILE              input file]]
    local inputs, outputs = cli.flags_from_help(help)
    assert.same({ "--config", "--layout-file", "-c", "-i" }, inputs)
    assert.same({ "--log", "--out-file", "--output", "--save-as", "-d", "-o", "-write" }, outputs)
  end)

  it("scaffolds a pack that loads: name, resolved wrap.bin, description, mode ephemeral, file and output flags", function()
    local dir = S.tmpdir("wrap-")
    local out, err, code = run(HCP .. " wrap qrencode", { cwd = dir })
    assert.equal(0, code, err)
    local file = dir .. "/packs/qrencode/hcp.json"
    assert.matches("wrote " .. file:gsub("%-", "%%-"), out)
    assert.matches("check before use", out)
    local m = json.decode(S.read(file))
    assert.equal("qrencode", m.name)
    assert.equal("/usr/bin/qrencode", m.wrap.bin)
    assert.matches("qrencode version", m.description)
    assert.equal("ephemeral", m.wrap.workspace.mode)
    assert.same({ "--output", "-o" }, m.wrap.workspace.output_flags)
    assert.same({ "--read-from", "-r" }, m.wrap.workspace.file_flags)
    assert.matches("output_flags %-%-output %-o +%(guessed from %-%-help", out)
    assert.matches("file_flags +%-%-read%-from %-r +%(guessed from %-%-help", out)
    -- the scaffold loads and runs
    out, err, code = run(HCP .. " run --pack-dir packs qrencode -t UTF8 -o - hi", { cwd = dir })
    assert.equal(0, code, err)
    assert.is_true(#out > 50)
  end)

  it("refuses to overwrite an existing pack and leaves it unchanged", function()
    local dir = S.tmpdir("wrap2-")
    S.mkdir(dir .. "/packs/jq")
    S.write(dir .. "/packs/jq/hcp.json", "precious")
    local _, err, code = run(HCP .. " wrap jq", { cwd = dir })
    assert.equal(1, code)
    assert.matches("already exists", err)
    assert.equal("precious", S.read(dir .. "/packs/jq/hcp.json"))
  end)

  it("resolves the bin like sandbox mode: never from $PATH, 127 when not found", function()
    local dir = S.tmpdir("wrap3-")
    S.write(dir .. "/hcp-path-only", "#!/bin/sh\necho planted\n", 493)
    local _, err, code = run(HCP .. " wrap hcp-path-only", { cwd = dir, env = "PATH=" .. q(dir) .. ":/usr/bin:/bin" })
    assert.equal(127, code)
    assert.matches("not found in /usr/local/bin:/usr/bin:/bin", err)
    assert.is_nil(core.kind(dir .. "/packs"))
  end)

  it("--name and --dir choose where the pack goes", function()
    local dir = S.tmpdir("wrap4-")
    local _, _, code = run(HCP .. " wrap --name my-sort --dir " .. q(dir .. "/x") .. " sort", { cwd = dir })
    assert.equal(0, code)
    assert.equal("my-sort", json.decode(S.read(dir .. "/x/hcp.json")).name)
  end)
end)

describe("common options", function()
  it("--pack-dir is repeatable; $HCP_PACK_PATH is the default, then ./packs", function()
    local a, b = S.tmpdir("pa-"), S.tmpdir("pb-")
    S.pack(S.manifest("one", "true"), a)
    S.pack(S.manifest("two", "true"), b)
    local out = run(HCP .. " list --pack-dir " .. q(a) .. " --pack-dir " .. q(b))
    assert.matches("one", out)
    assert.matches("two", out)
    out = run(HCP .. " list", { env = "HCP_PACK_PATH=" .. q(a .. ":" .. b) })
    assert.matches("one", out)
    assert.matches("two", out)
    local cwd = S.tmpdir("cwd-")
    S.pack(S.manifest("three", "true"), S.mkdir(cwd .. "/packs"))
    out = run(HCP .. " list", { cwd = cwd })
    assert.matches("three", out)
  end)

  it("--allow-bin adds to the allow-list; --config loads options from a Lua file", function()
    local cfg = S.write(S.tmpdir("cfg-") .. "/hcp.lua",
      'return { pack_dirs = { "packs-examples" }, policy = { deny = { "jq.exec" } } }')
    local _, err, code = run(HCP .. " run --config " .. q(cfg) .. " jq -n 1")
    assert.equal(126, code)
    assert.equal('hcp: policy: "jq.exec" not covered\n', err)
    local bad = S.write(S.tmpdir("cfg-") .. "/bad.lua", "return 42")
    _, err, code = run(HCP .. " list --config " .. q(bad))
    assert.equal(126, code)
    assert.matches("must return a table", err)
  end)

  it("--no-sandbox alone stays in sandbox and says so; with --native-local it leaves, and says so", function()
    local root = S.pack(S.manifest("envdump", "env"))
    local out, err = run(HCP .. " run --no-sandbox --pack-dir " .. q(root) .. " envdump")
    assert.matches("HCP_SANDBOX=sandbox", out)
    assert.matches("sandbox mode stays on", err)
    out, err = run(HCP .. " run --no-sandbox --native-local --pack-dir " .. q(root) .. " envdump")
    assert.matches("HCP_SANDBOX=native%-local", out)
    assert.matches("native%-local mode", err)
  end)

  -- §10.3: native-local takes both flags, whichever parser reads them (the
  -- plain spelling goes through cli.lua's fast_run, `--pack-dir=` through
  -- argparse), for hcp run and hcpx alike
  it("§10.3 --native-local alone stays in sandbox, through either parser of hcp run and hcpx", function()
    local root = S.pack(S.manifest("envdump", "env"))
    for _, line in ipairs({ HCP .. " run --native-local --pack-dir " .. q(root) .. " envdump",
        HCP .. " run --native-local --pack-dir=" .. q(root) .. " envdump",
        HCPX .. " --native-local --pack-dir " .. q(root) .. " envdump",
        HCPX .. " --no-sandbox --pack-dir=" .. q(root) .. " envdump" }) do
      local out, err = run(line)
      assert.is_truthy(out:find("HCP_SANDBOX=sandbox\n", 1, true), line .. "\n" .. out)
      assert.is_truthy(err:find("sandbox mode stays on", 1, true), line .. "\n" .. err)
    end
    for _, line in ipairs({ HCPX .. " --no-sandbox --native-local --pack-dir " .. q(root) .. " envdump",
        HCP .. " run --native-local --no-sandbox --pack-dir=" .. q(root) .. " envdump" }) do
      local out = run(line)
      assert.is_truthy(out:find("HCP_SANDBOX=native-local\n", 1, true), line .. "\n" .. out)
    end
  end)

  for _, cmd in ipairs({ "run", "call", "list", "validate", "doctor", "wrap" }) do
    it("hcp " .. cmd .. " --help prints its usage and exits 0", function()
      local out, _, code = run(HCP .. " " .. cmd .. " --help")
      assert.equal(0, code)
      assert.matches("^Usage: hcp " .. cmd, out)
    end)
  end

  it("--version and --help of hcp itself; an unknown command is a usage error (2)", function()
    local out, _, code = run(HCP .. " --version")
    assert.equal(0, code)
    assert.matches("^hcp %(hcp%-lua%) 0%.%d+%.%d+\n$", out)
    out = run(HCP .. " --help")
    for _, cmd in ipairs({ "run", "call", "list", "validate", "doctor", "wrap" }) do
      assert.matches("\n   " .. cmd .. " ", out)
    end
    local _, err
    _, err, code = run(HCP .. " frobnicate")
    assert.equal(2, code)
    assert.matches("Try 'hcp %-%-help'", err)
  end)
end)

describe("hcp-lua REPL", function()
  it("with piped stdin and -i: rt is a runtime over the configured packs; results print readably", function()
    -- COLUMNS: wide enough for a result on one line (repl_spec.lua covers the spread form)
    local out, _, code = run(HCP_LUA .. " -i", { env = "HCP_PACK_PATH=packs-examples COLUMNS=1000",
      stdin = 'rt:call{pack="jq", args={"-n","1+1"}}\nrt.mode\n{a={}, b={1,2}}\n' })
    assert.equal(0, code)
    assert.matches('hcp> { hcp = 1, ok = true, exit = 0, stdout = "2\\n", stderr = "", files = {},', out, 1, true)
    assert.matches('hcp> sandbox\n', out, 1, true)
    assert.matches("hcp> { a = {}, b = { 1, 2 } }\n", out, 1, true)
  end)

  it("keeps an rt that a script run before the REPL (-i script) set", function()
    local script = S.write(S.tmpdir("pre-") .. "/pre.lua", 'rt = "mine"\n')
    local out = run(HCP_LUA .. " -i " .. q(script), { env = "HCP_PACK_PATH=packs-examples", stdin = "rt\n" })
    assert.matches("hcp> mine\n", out, 1, true)
  end)

  -- SIGINT that lands while the runtime handles the child's events (not
  -- while it waits) was lost: the handler only arms a hook, and the loop
  -- went back to waiting; with a child that writes without end, the call
  -- ran to its timeout. The loop now takes signals only while it waits
  -- (ppoll), so the hook runs at once, whenever SIGINT comes.
  it("SIGINT ends a call whose child never stops writing, and kills the child", function()
    local packs = S.tmpdir("chatty-")
    local marker = "chatty-" .. tostring(core.getpid())
    S.pack(S.manifest("chatty", "yes", { wrap = { timeout_ms = 60000 } }), packs)
    local script = string.format([[
      local rt = assert(require("hcp").create({ pack_dirs = { %q }, max_output = 4096 }))
      local res = rt:call({ pack = "chatty", args = { %q } })
      print("returned", res.ok, res.error)
    ]], packs, marker)
    local p = assert(core.spawn({ path = HCP_LUA, argv = { HCP_LUA, "-e", script }, env = {}, cwd = S.REPO,
      timeout_ms = 90000 }))
    assert(S.wait_until(function() return #S.pids_of({ "yes", marker }) == 1 end, 30, "the call's yes"))
    -- one SIGINT (a second one kills hcp-lua: SA_RESETHAND, as lua.c)
    assert(p:kill("INT"))   -- its own process group: hcp-lua alone
    local res = p:wait(30000)
    if not res then p:kill("KILL") end
    assert(res, "hcp-lua still running 30 s after SIGINT: the signal was lost")
    assert.matches("interrupted!", res.stderr, 1, true)
    assert.equal("", res.stdout)
    assert(S.wait_until(function() return #S.pids_of({ "yes", marker }) == 0 end, 30, "the yes to end"))
  end)

  S.it("script", "under a terminal, Ctrl-C interrupts a running call (its child is killed), not the REPL", function()
    local packs = S.tmpdir("repl-")
    S.pack(S.manifest("sleeper", "sleep", { wrap = { timeout_ms = 60000 } }), packs)
    local dir = S.tmpdir("pty-")
    local screen = dir .. "/screen"
    local naptime = "31." .. tostring(core.getpid())   -- this run's sleep, no other
    local p = assert(io.popen(string.format(
      "cd %s && HCP_PACK_PATH=%s HOME=%s script -qfec %s /dev/null > %s 2>&1",
      q(S.REPO), q(packs), q(dir), q(HCP_LUA), q(screen)), "w"))
    local function send(s)
      p:write(s)
      p:flush()
    end
    local function shows(pattern, what)
      return S.wait_until(function() return (S.read(screen) or ""):find(pattern) end, 30, what)
    end
    assert(shows("hcp> ", "the first prompt"))
    send('r = rt:call{pack="sleeper", args={"' .. naptime .. '"}}\n')
    local running = S.wait_until(function() return #S.pids_of({ "sleep", naptime }) == 1 end, 30, "the call's sleep")
    send("\3")
    local killed = S.wait_until(function() return #S.pids_of({ "sleep", naptime }) == 0 end, 30, "Ctrl-C to end it")
    local interrupted = shows("interrupted", "the REPL to report the interruption")
    send("print(40 + 2)\n")
    local alive = shows("[^%d]42\r?\n", "the REPL to answer after Ctrl-C")
    send("\4")
    p:close()
    local seen = S.read(screen)
    assert(running, seen)
    assert(killed, seen)
    assert(interrupted, seen)
    assert(alive, seen)
  end)
end)
