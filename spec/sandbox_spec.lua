-- §10.1–10.5 of the HCP specification and the Sandbox guide, one `it` per
-- requirement, named by clause. Each runs real children through the runtime.
local hcp = require("hcp")
local S = require("support")

local ENV_PACK = S.manifest("envdump", "env", { wrap = { agent_env = { PACK_VAR = "from-manifest" } } })
local PWD_PACK = S.manifest("where", "pwd")

-- Run a Lua chunk in a fresh lua5.4 with a given environment prefix (for
-- specs about the runtime's own environment and $PATH).
local function lua_child(env_prefix, code)
  local script = S.write(S.tmpdir("lua-") .. "/t.lua", code)
  local paths = "package.path=\"lua/?.lua;lua/?/init.lua;spec/?.lua;\"..package.path;"
    .. " package.cpath=\"" .. S.CPATH .. ";\"..package.cpath"
  local cmd = string.format("cd '%s' && %s %s -e '%s' '%s' 2>&1", S.REPO, env_prefix, S.LUA, paths, script)
  return S.sh(cmd)
end

local function env_lines(text)
  local t = {}
  for line in text:gmatch("[^\n]+") do
    local k, v = line:match("^([^=]+)=(.*)$")
    if k then t[k] = v end
  end
  return t
end

describe("§10.1 Default", function()
  it("10.1.1 executes in sandbox mode when nothing is configured", function()
    local rt = assert(hcp.create({}))
    assert.equal("sandbox", rt.mode)
    local _, dir = S.pack(ENV_PACK)
    rt = assert(hcp.create({ pack_dirs = { dir } }))
    local res = rt:call({ pack = "envdump" })
    assert.is_true(res.ok, res.error)
    assert.equal("sandbox", env_lines(res.stdout).HCP_SANDBOX)
    assert.equal("sandbox", res.sandbox)
  end)

  it("10.1.2 sandbox = false alone still yields sandbox (an explicit, positive opt-in is needed)", function()
    assert.equal("sandbox", assert(hcp.create({ sandbox = false })).mode)
    assert.equal("sandbox", assert(hcp.create({ native_local = true })).mode)
    assert.equal("sandbox", assert(hcp.create({ sandbox = true, native_local = true })).mode)
    assert.equal("native-local", assert(hcp.create({ sandbox = false, native_local = true })).mode)
  end)

  it("10.1.2 a truthy non-boolean is not an opt-in: it is a configuration error", function()
    local rt, err = hcp.create({ sandbox = "false", native_local = "yes" })
    assert.is_nil(rt)
    assert.matches("option \"[a-z_]+\" must be a boolean", err)
  end)
end)

describe("§10.2.1 Allow-list binaries", function()
  it("10.2.1 refuses an unlisted bin with exit 127 and the seed's error, spawning nothing", function()
    local rt = assert(hcp.create({}))
    local marker = S.tmpdir("marker-") .. "/ran"
    local res = rt:exec({ bin = "touch", args = { marker } })
    assert.is_false(res.ok)
    assert.equal(127, res.exit)
    assert.equal('sandbox: bin "touch" not allowlisted', res.error)
    assert.is_nil(S.read(marker))
    assert.is_nil(res.stdout)
  end)

  it("10.2.1 seeds the allow-list with hcpx and hcp, or allow_bins instead, plus every pack's wrap.bin", function()
    local _, dir = S.pack(ENV_PACK)
    S.pack(PWD_PACK, dir)
    local rt = assert(hcp.create({ pack_dirs = { dir } }))
    assert.same({ "hcpx", "hcp", "env", "pwd" }, rt:allowlist())
    rt = assert(hcp.create({ pack_dirs = { dir }, allow_bins = { "sort", "/usr/bin/tr" } }))
    assert.same({ "sort", "/usr/bin/tr", "env", "pwd" }, rt:allowlist())
  end)

  it("10.2.1 spawns a bin that allow_bins lists (bare name)", function()
    local rt = assert(hcp.create({ allow_bins = { "sort" } }))
    local res = rt:exec({ bin = "sort", args = { "-r" }, stdin = "a\nb\nc\n" })
    assert.is_true(res.ok, res.error)
    assert.equal("c\nb\na\n", res.stdout)
  end)

  it("10.5 a bare entry matches a path ending in /<name>, an absolute entry matches exactly", function()
    local rt = assert(hcp.create({ allow_bins = { "/usr/bin/tr" } }))
    assert.is_true(rt:exec({ bin = "/usr/bin/tr", args = { "a", "b" }, stdin = "a" }).ok)
    -- the same file by another absolute path is not the entry
    local res = rt:exec({ bin = "/usr/bin/../bin/sort" })
    assert.equal(127, res.exit)
    -- a bare name whose resolved path is the entry matches it
    assert.equal("b", rt:exec({ bin = "tr", args = { "a", "b" }, stdin = "a" }).stdout)
    -- a bare entry does not match a longer name ending in it
    rt = assert(hcp.create({ allow_bins = { "r" } }))
    assert.equal(127, rt:exec({ bin = "/usr/bin/tr" }).exit)
  end)

  it("10.2.1 never resolves an unlisted bare name via $PATH or the cwd", function()
    local planted = S.tmpdir("planted-")
    local marker = planted .. "/ran"
    S.write(planted .. "/hcp-planted-tool", "#!/bin/sh\ntouch " .. marker .. "\n", 493)
    local out = lua_child("PATH=" .. planted .. ":/usr/bin:/bin", [[
      local rt = assert(require("hcp").create({}))
      local res = rt:exec({ bin = "hcp-planted-tool" })
      io.write(res.exit, " ", res.error or "")
    ]])
    assert.equal('127 sandbox: bin "hcp-planted-tool" not allowlisted', out)
    assert.is_nil(S.read(marker))
  end)

  it("10.2.1 an allow-listed bare name resolves only in search_path, never in $PATH (planted binary attack)", function()
    local planted = S.tmpdir("planted-")
    local marker = planted .. "/ran"
    S.write(planted .. "/jq", "#!/bin/sh\ntouch " .. marker .. "\necho planted\n", 493)
    local out = lua_child("PATH=" .. planted .. ":/usr/bin:/bin", [[
      local rt = assert(require("hcp").create({ pack_dirs = { "packs-examples/jq" } }))
      local res = rt:call({ pack = "jq", args = { "-n", "40+2" } })
      io.write(res.stdout or res.error)
    ]])
    assert.equal("42\n", out)
    assert.is_nil(S.read(marker))
  end)

  it("10.2.1 a bin of the same name planted in the pack root is never run (cwd is not searched)", function()
    local root = S.pack(S.manifest("jqp", "jq"))
    local marker = root .. "/ran"
    S.write(root .. "/jq", "#!/bin/sh\ntouch " .. marker .. "\necho planted\n", 493)
    local rt = assert(hcp.create({ pack_dirs = { root }, search_path = "/usr/bin" }))
    local res = rt:call({ pack = "jqp", args = { "-n", "1+1" } })
    assert.equal("2\n", res.stdout)
    assert.is_nil(S.read(marker))
  end)

  it("10.2.1 a bin is resolved once at load: a binary planted later earlier in search_path is not run", function()
    local early = S.tmpdir("early-")
    local root = S.pack(S.manifest("jql", "jq"))
    local rt = assert(hcp.create({ pack_dirs = { root }, search_path = early .. ":/usr/bin" }))
    S.write(early .. "/jq", "#!/bin/sh\necho planted\n", 493)
    assert.equal("3\n", rt:call({ pack = "jql", args = { "-n", "1+2" } }).stdout)
  end)

  it("10.2.1 a pack whose bin cannot be found is reported, and its call fails with 127", function()
    local root = S.pack(S.manifest("ghost", "hcp-no-such-binary-anywhere"))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    local problems = rt:problems()
    assert.equal(1, #problems)
    assert.equal("wrap.bin", problems[1].field)
    local res = rt:call({ pack = "ghost" })
    assert.equal(127, res.exit)
    assert.matches("^spawn: bin \"hcp%-no%-such%-binary%-anywhere\": .*not found", res.error)
  end)

  it("10.2.1 a ./rel bin runs from inside the pack root and is allow-listed by its resolved path", function()
    local root = S.pack(S.manifest("local-tool", "./bin/argv"))
    S.mkdir(root .. "/bin")
    S.write(root .. "/bin/argv", "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n", 493)
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    local list = rt:allowlist()
    assert.equal(root .. "/bin/argv", list[#list])
    local res = rt:call({ pack = "local-tool", args = { "x y" } })
    assert.is_true(res.ok, res.error)
    assert.equal("[x y]\n", res.stdout)
  end)

  it("10.2.1 a ./rel bin that leaves the pack root (by .. or by symlink) is refused", function()
    local root = S.pack(S.manifest("escape", "./bin/tool"))
    S.mkdir(root .. "/bin")
    assert(os.execute("ln -s /usr/bin/id '" .. root .. "/bin/tool'"))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    local res = rt:call({ pack = "escape" })
    assert.equal(127, res.exit)
    assert.matches("escapes", res.error)
    local root2 = S.pack(S.manifest("escape2", "./../escape/bin/tool"))
    rt = assert(hcp.create({ pack_dirs = { root2 } }))
    assert.equal(127, rt:call({ pack = "escape2" }).exit)
  end)
end)

describe("§10.2.2 Jail the working directory", function()
  it("10.2.2 the child's cwd is the pack root when wrap.workspace is omitted (10.5)", function()
    local root = S.pack(PWD_PACK)
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    local res = rt:call({ pack = "where" })
    assert.is_true(res.ok, res.error)
    assert.equal(root .. "\n", res.stdout)
    assert.truthy(res.isolation)
    assert.truthy(table.concat(res.isolation, ","):find("jail", 1, true))
  end)

  it("10.2.2 rt:exec without a pack runs in a fresh private directory that is removed afterwards", function()
    local rt = assert(hcp.create({ allow_bins = { "pwd" } }))
    local res = rt:exec({ bin = "pwd" })
    local dir = res.stdout:gsub("\n$", "")
    assert.matches("/hcp%-rt%-", dir)
    assert.is_nil(S.kind_settled(dir))
    rt:close()
  end)
end)

describe("§10.2.3 Inherit no ambient credentials", function()
  it("10.2.3 the child's environment is exactly agent_env, HCP_SANDBOX and PATH", function()
    local root = S.pack(ENV_PACK)
    local rt = assert(hcp.create({ pack_dirs = { root }, isolation = "minimal" }))
    local env = env_lines(rt:call({ pack = "envdump" }).stdout)
    assert.same({ PACK_VAR = "from-manifest", HCP_SANDBOX = "sandbox", PATH = "/usr/local/bin:/usr/bin:/bin" }, env)
  end)

  it("10.2.3 under Landlock it also gets TMPDIR: a private directory of this call, gone afterwards", function()
    local root = S.pack(ENV_PACK)
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    local res = rt:call({ pack = "envdump" })
    local env = env_lines(res.stdout)
    if not table.concat(res.isolation, ","):find("landlock", 1, true) then
      assert.is_nil(env.TMPDIR)
      return
    end
    assert.matches("^/tmp/hcp%-rt%-[^/]+/call%-[^/]+/tmp$", env.TMPDIR)
    assert.is_nil(S.kind_settled(env.TMPDIR))
    env.TMPDIR = nil
    assert.same({ PACK_VAR = "from-manifest", HCP_SANDBOX = "sandbox", PATH = "/usr/local/bin:/usr/bin:/bin" }, env)
  end)

  it("10.2.3 host secrets in the runtime's environment never reach the child", function()
    local root = S.pack(ENV_PACK)
    local out = lua_child("GITHUB_TOKEN=ghp_secret AWS_SECRET_ACCESS_KEY=aws_secret HOME=/root", string.format([[
      local rt = assert(require("hcp").create({ pack_dirs = { %q } }))
      io.write(rt:call({ pack = "envdump" }).stdout)
    ]], root))
    assert.not_matches("secret", out)
    assert.not_matches("HOME", out)
    assert.matches("PACK_VAR=from%-manifest", out)
  end)

  it("10.2.3 a binding is satisfied only by a minter, never by the runtime's environment", function()
    local root = S.pack(S.manifest("gh", "env", { bindings = { github = { family = "token", env = "GITHUB_TOKEN" } } }))
    local out = lua_child("GITHUB_TOKEN=ghp_from_env", string.format([[
      local rt = assert(require("hcp").create({ pack_dirs = { %q } }))
      local res = rt:call({ pack = "gh" })
      io.write(res.exit, " ", res.error or res.stdout)
    ]], root))
    assert.equal('126 binding: mint failed for "github"', out)
  end)

  it("10.2.3 a minted credential reaches the child as its binding's variable", function()
    local root = S.pack(S.manifest("gh", "env", { bindings = { github = { family = "token", env = "GITHUB_TOKEN" } } }))
    local seen
    local rt = assert(hcp.create({ pack_dirs = { root }, bindings = {
      github = function(ctx) seen = ctx; return "minted-123", 60 end } }))
    local res = rt:call({ pack = "gh" })
    assert.is_true(res.ok, res.error)
    assert.equal("minted-123", env_lines(res.stdout).GITHUB_TOKEN)
    assert.same({ pack = "gh", op = "exec", binding = "github", family = "token", principal = "default" }, seen)
  end)
end)

describe("§10.2.4 Mark the environment", function()
  it("10.2.4 sets HCP_SANDBOX=sandbox in the child", function()
    local root = S.pack(ENV_PACK)
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.equal("sandbox", env_lines(rt:call({ pack = "envdump" }).stdout).HCP_SANDBOX)
  end)

  it("10.2.4 a manifest cannot set HCP_SANDBOX itself", function()
    local root = S.pack(S.manifest("liar", "env", { wrap = { agent_env = { HCP_SANDBOX = "native-local" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.same({}, rt:packs())
    assert.equal("wrap.agent_env.HCP_SANDBOX", rt:problems()[1].field)
  end)
end)

describe("§10.2.5 Ignore env-flag mocks", function()
  it("10.2.5 PACK_MOCK=1 and friends in the runtime's environment do not switch a call to mock", function()
    local out = lua_child("PACK_MOCK=1 HCP_MOCK=1 MOCK=1", [[
      local rt = assert(require("hcp").create({ pack_dirs = { "packs-examples/jq" } }))
      local res = rt:call({ pack = "jq", op = "filter", params = { expr = ".a" }, stdin = '{"a":7}' })
      io.write(res.stdout)
    ]])
    assert.equal("7\n", out)
  end)

  it("10.2.5 a mock is mode = \"mock\" in the envelope, and spawns nothing", function()
    local rt = assert(hcp.create({ pack_dirs = { "packs-examples/jq" } }))
    local res = rt:call({ pack = "jq", op = "filter", params = { expr = ".a" }, mode = "mock" })
    assert.is_true(res.ok)
    assert.equal('{"mocked":true}\n', res.stdout)
    assert.equal(0, res.ms)
  end)
end)

describe("§10.3 Native-local", function()
  it("10.3.1 resolves a bare wrap.bin on the host PATH", function()
    local hostbin = S.tmpdir("hostbin-")
    S.write(hostbin .. "/hcp-host-tool", "#!/bin/sh\necho host-tool \"$HCP_SANDBOX\"\n", 493)
    local root = S.pack(S.manifest("host", "hcp-host-tool"))
    local code = string.format([[
      local rt = assert(require("hcp").create({ pack_dirs = { %q }, sandbox = %%s, native_local = true }))
      local res = rt:call({ pack = "host" })
      io.write(res.stdout or res.error)
    ]], root)
    local out = lua_child("PATH=" .. hostbin .. ":/usr/bin:/bin", code:format("false"))
    assert.equal("host-tool native-local\n", out)
    -- the same configuration without the opt-in never looks there
    out = lua_child("PATH=" .. hostbin .. ":/usr/bin:/bin", code:format("true"))
    assert.matches("not found", out)
  end)

  it("10.3.2 sets HCP_SANDBOX=native-local", function()
    local root = S.pack(ENV_PACK)
    local rt = assert(hcp.create({ pack_dirs = { root }, sandbox = false, native_local = true }))
    local res = rt:call({ pack = "envdump" })
    assert.equal("native-local", env_lines(res.stdout).HCP_SANDBOX)
    assert.equal("native-local", res.sandbox)
  end)

  it("10.3.3 policy, confirm and mint fail-closed apply unchanged in native-local", function()
    local root = S.pack(S.manifest("ops", "env", {
      bindings = { tok = { family = "token", env = "TOK" } },
      ops = { show = { args = {} }, risky = { args = {}, confirm = true }, authed = { args = {}, bindings = { "tok" } } },
    }))
    local rt = assert(hcp.create({ pack_dirs = { root }, sandbox = false, native_local = true,
      policy = { allow = { "ops.*" }, deny = { "ops.show" } } }))
    assert.equal('policy: "ops.show" not covered', rt:call({ pack = "ops", op = "show" }).error)
    assert.equal('policy: "ops.risky" not confirmed', rt:call({ pack = "ops", op = "risky" }).error)
    assert.equal('binding: mint failed for "tok"', rt:call({ pack = "ops", op = "authed" }).error)
    assert.equal(127, rt:exec({ bin = "touch", args = { "/tmp/x" } }).exit)
  end)
end)

describe("§10.4 Stronger isolation", function()
  S.it("bwrap", "10.4.2 asking for a layer the driver cannot give fails closed at create, naming it", function()
    local rt, err = hcp.create({ isolation = { "landlock" }, driver = "bwrap" })
    assert.is_nil(rt)
    assert.matches('^sandbox: isolation "landlock" unavailable', err)
  end)
end)

describe("Sandbox guide", function()
  it("guide: the refusal is the JSON error envelope { ok = false, error = ... }", function()
    local rt = assert(hcp.create({}))
    local res = rt:exec({ bin = "transit" })
    assert.equal('{"hcp":1,"id":null,"ok":false,"exit":127,"error":"sandbox: bin \\"transit\\" not allowlisted","sandbox":"sandbox"}',
      require("hcp.envelope").encode(res))
  end)

  it("guide: agent_env is merged and nothing else is special-cased per bin", function()
    local root = S.pack(S.manifest("envdump", "env", { wrap = { agent_env = { A = "1", B = "two words" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    local env = env_lines(rt:call({ pack = "envdump" }).stdout)
    assert.equal("1", env.A)
    assert.equal("two words", env.B)
  end)
end)

describe("§10.6 Workspace / exec plane", function()
  local workspace = require("hcp.workspace")

  it("10.6 packs MUST NOT name a driver: wrap.driver (or any unknown wrap field) is a load error", function()
    local root = S.pack(S.manifest("named", "true", { wrap = { driver = "bwrap" } }))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    assert.same({}, rt:packs())
    assert.equal("wrap.driver", rt:problems()[1].field)
  end)

  it("10.6 the runtime MUST rewrite workspace: prefixes into the jail", function()
    local plan = assert(workspace.plan({ "workspace:data/in.json" }, { file_flags = {} }))
    assert.same({ "/j/data/in.json" }, workspace.bind(plan, { jail = "/j", files_dir = "/f" }))
    -- and a live call sees the file there
    local root = S.pack(S.manifest("ws", "sh", { wrap = { workspace = { mode = "ephemeral" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    local res = rt:call({ pack = "ws", args = { "-c", 'echo hi > f; cat "$1"; echo "$1"', "sh", "workspace:f" } })
    assert.is_true(res.ok, res.error)
    local shown = res.stdout:match("^hi\n(.*)\n$")
    assert.matches("/jail%-[^/]+/f$", shown)
  end)

  it("10.6 the runtime MUST reject host-absolute paths under /etc, /home, /root, /Users", function()
    local root = S.pack(S.manifest("cat", "cat"))
    local rt = assert(hcp.create({ pack_dirs = { root } }))
    for _, p in ipairs({ "/etc/passwd", "/home/x", "/root/.ssh/id_rsa", "/Users/x", "--file=/etc/shadow" }) do
      local res = rt:call({ pack = "cat", args = { p } })
      assert.equal(126, res.exit)
      assert.matches("^sandbox: host path not allowed", res.error)
    end
  end)

  it("10.6 the runtime MUST spawn argv as an array (no shell, no splitting)", function()
    local plan = assert(workspace.plan({ "--file", "a b;c", "$(x)" }, { file_flags = { "--file" } }))
    assert.same({ "--file", "/f/a b;c", "$(x)" }, workspace.bind(plan, { jail = "/j", files_dir = "/f" }))
  end)

  it("10.6 the runtime MUST write back --output / -o, and list new jail files in workspace mode", function()
    local out = S.tmpdir("wb-")
    local root = S.pack(S.manifest("w", "sh", { wrap = { args = { "-c", 'echo made > "$2"; echo new > created', "sh" },
      workspace = { mode = "workspace" } } }))
    local rt = assert(hcp.create({ pack_dirs = { root }, out_dir = out, state_dir = S.tmpdir("state-") }))
    local res = rt:call({ pack = "w", args = { "-o", "result.txt" } })
    assert.is_true(res.ok, res.error)
    assert.equal("made\n", S.read(out .. "/result.txt"))
    assert.equal(out .. "/result.txt", res.files[1])
    local listed = {}
    for _, f in ipairs(res.files) do listed[f:match("[^/]+$")] = f end
    assert.matches("/workspaces/default/w/created$", listed.created)
  end)

  it("10.6 a runtime MUST implement a local driver; drivers have prepare, rewriteArgv, spawn, writeback, cleanup", function()
    for _, name in ipairs({ "local", "bwrap" }) do
      local d = require("hcp.driver." .. name)
      for _, stage in ipairs({ "prepare", "rewriteArgv", "spawn", "writeback", "cleanup" }) do
        assert.is_function(d[stage], name .. "." .. stage)
      end
    end
    assert.equal("local", assert(hcp.create({})):driver())
    if not S.lacks("bwrap") then assert.equal("bwrap", assert(hcp.create({ driver = "bwrap" })):driver()) end
  end)
end)
