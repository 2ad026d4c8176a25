-- Attack (issue 11, category 1): write-back and staging under out_dir. With
-- out_dir at a home-like directory, `-o .ssh/authorized_keys` replaced the
-- key file, `-o packs/jq/hcp.json` replaced a loaded pack's manifest, and the
-- jq example read .ssh/id_rsa through --file. Now out_dir is a deliberate
-- choice (the library has none), and under it staging and write-back never
-- reach a pack, the state dir or the runtime's files, never go through a
-- hidden name — as spelled and as the kernel resolves it — and replace an
-- existing file only when the operator allows it. Against the example packs
-- as shipped (copied into the home, so a failure cannot touch the checkout),
-- under both drivers.
local hcp = require("hcp")
local core = require("hcp.core")
local S = require("support")

-- A home-like directory: .ssh with a key, the example packs under packs/,
-- a state dir, a link "innocent" to .ssh and one "s" to the state dir.
local function make_home()
  local home = S.tmpdir("home-")
  S.mkdir(home .. "/.ssh")
  S.write(home .. "/.ssh/id_rsa", "-----BEGIN PRIVATE KEY-----\nSECRET\n")
  S.write(home .. "/.ssh/authorized_keys", "ssh-ed25519 AAAA owner\n")
  S.mkdir(home .. "/.config")
  S.mkdir(home .. "/packs")
  for _, p in ipairs({ "jq", "qrencode", "db" }) do
    S.must_sh(string.format("cp -r %s %s", S.q(S.REPO .. "/packs-examples/" .. p), S.q(home .. "/packs/")))
  end
  S.mkdir(home .. "/state")
  S.must_sh(string.format("cd %s && ln -s .ssh innocent && ln -s state s", S.q(home)))
  return home
end

local function png(rt, file)
  return rt:call({ pack = "qrencode", op = "png", params = { file = file, text = "hello" } })
end

S.each_driver("attack: out_dir at a home directory", function(driver, case)

  local home, rt
  local function runtime(extra)
    local opts = { pack_dirs = { home .. "/packs" }, driver = driver, out_dir = home, state_dir = home .. "/state" }
    for k, v in pairs(extra or {}) do opts[k] = v end
    local r = assert(hcp.create(opts))
    assert.same({}, r:problems())
    return r
  end
  before_each(function()
    home = make_home()
    rt = runtime()
  end)
  after_each(function() rt:close() end)

  case("-o .ssh/authorized_keys is refused and the key file is untouched", function()
    local res = png(rt, ".ssh/authorized_keys")
    assert.equal(126, res.exit)
    assert.equal('workspace: argument 4: the output ".ssh/authorized_keys" goes through the hidden name ".ssh" '
      .. "(refused unless the operator sets allow_hidden)", res.error)
    assert.is_nil(res.stdout)
    assert.equal("ssh-ed25519 AAAA owner\n", S.read(home .. "/.ssh/authorized_keys"))
  end)

  case("-o innocent/authorized_keys (a link to .ssh) is refused as the kernel resolves it", function()
    local res = png(rt, "innocent/authorized_keys")
    assert.is_false(res.ok)
    assert.equal('workspace: write-back of innocent/authorized_keys refused: it resolves through the hidden name ".ssh" '
      .. "(allow_hidden is off)", res.error)
    assert.equal("ssh-ed25519 AAAA owner\n", S.read(home .. "/.ssh/authorized_keys"))
  end)

  case("-o packs/jq/hcp.json (a loaded pack's manifest) is refused; the next call of jq is jq", function()
    local before = S.read(home .. "/packs/jq/hcp.json")
    local res = png(rt, "packs/jq/hcp.json")
    assert.equal(126, res.exit)
    assert.matches("lies in a directory the runtime protects", res.error)
    res = rt:call({ pack = "qrencode", args = { "-t", "PNG", "-opacks/hcp.json", "--", "x" } })
    assert.matches("lies in a directory the runtime protects", res.error)
    assert.equal(before, S.read(home .. "/packs/jq/hcp.json"))
    assert.is_nil(core.kind(home .. "/packs/hcp.json"))
    local rt2 = runtime()
    assert.equal("3\n", rt2:call({ pack = "jq", op = "eval", params = { expr = "1+2" } }).stdout)
    rt2:close()
  end)

  case("with option packs (hcp run), a pack not loaded is protected too, also one reached through a link", function()
    -- jq's root lies outside the pack dir, reached through a link: only its
    -- own root (not the pack dir) covers it
    S.mkdir(home .. "/elsewhere")
    S.must_sh(string.format("mv %s %s && ln -s ../elsewhere/jq %s", S.q(home .. "/packs/jq"),
      S.q(home .. "/elsewhere/jq"), S.q(home .. "/packs/jq")))
    local before = S.read(home .. "/elsewhere/jq/hcp.json")
    local only = runtime({ packs = { "qrencode" } })
    assert.equal(1, #only:packs())
    local res = png(only, "elsewhere/jq/hcp.json")
    assert.equal(126, res.exit)
    assert.matches("lies in a directory the runtime protects", res.error)
    assert.equal(before, S.read(home .. "/elsewhere/jq/hcp.json"))
    only:close()
  end)

  case("the state dir is never reached, not even through a link to it", function()
    local res = png(rt, "state/x.png")
    assert.matches("lies in a directory the runtime protects", res.error)
    res = png(rt, "s/x.png")
    assert.equal("workspace: write-back of s/x.png refused: it lies in a directory the runtime protects "
      .. "(a pack, the state dir or the runtime's own files)", res.error)
    assert.is_nil(core.kind(home .. "/state/x.png"))
  end)

  case("jq cannot read .ssh/id_rsa: --file is refused, and after -- it is data, not staged", function()
    local res = rt:call({ pack = "jq", op = "filter", params = { expr = "." }, args = { "-R", "--file", ".ssh/id_rsa" } })
    assert.equal(126, res.exit)
    assert.matches('the input ".ssh/id_rsa" goes through the hidden name ".ssh"', res.error)
    res = rt:call({ pack = "jq", op = "filter", params = { expr = "." }, args = { "-R", "--", "--file", ".ssh/id_rsa" } })
    assert.not_matches("SECRET", (res.stdout or "") .. (res.stderr or ""))
    res = rt:call({ pack = "jq", op = "filter", params = { expr = "." }, args = { "-R", "--file", "innocent/id_rsa" } })
    assert.equal('workspace: staging of innocent/id_rsa refused: it resolves through the hidden name ".ssh" '
      .. "(allow_hidden is off)", res.error)
    assert.not_matches("SECRET", (res.stdout or "") .. (res.stderr or ""))
  end)

  case("an existing file is replaced only with replace = true (a rerun then works as the tool would)", function()
    local res = png(rt, "qr.png")
    assert.is_true(res.ok, res.error)
    local first = S.read(home .. "/qr.png")
    assert.matches("^\x89PNG", first)
    res = rt:call({ pack = "qrencode", op = "png", params = { file = "qr.png", text = "other" } })
    assert.is_false(res.ok)
    assert.equal("workspace: write-back of qr.png refused: it exists in out_dir and replacing is not allowed "
      .. "(replace is off)", res.error)
    assert.equal(first, S.read(home .. "/qr.png"))
    local rt2 = runtime({ replace = true })
    res = rt2:call({ pack = "qrencode", op = "png", params = { file = "qr.png", text = "other" } })
    assert.is_true(res.ok, res.error)
    assert.are_not.equal(first, S.read(home .. "/qr.png"))
    rt2:close()
  end)

  case("allow_hidden = true lets the operator write under a hidden name", function()
    local rt2 = runtime({ allow_hidden = true })
    local res = png(rt2, ".config/qr.png")
    assert.is_true(res.ok, res.error)
    assert.matches("^\x89PNG", S.read(home .. "/.config/qr.png"))
    rt2:close()
  end)

  case("with no out_dir (the library's default) a host file reference is refused and nothing is written", function()
    local rt2 = assert(hcp.create({ pack_dirs = { home .. "/packs" }, driver = driver, state_dir = home .. "/state" }))
    local res = png(rt2, "qr.png")
    assert.equal(126, res.exit)
    assert.equal('workspace: argument 4: the output "qr.png" is a file under out_dir, and this runtime has no '
      .. "out_dir (the operator sets the out_dir option)", res.error)
    assert.is_nil(core.kind(home .. "/qr.png"))
    -- what needs no host file still works
    assert.is_true(rt2:call({ pack = "qrencode", op = "svg", params = { text = "hi" } }).ok)
    rt2:close()
  end)

  case("the runtime's own files are protected: its Lua modules (out_dir at the checkout)", function()
    local name = "lua/hcp/zz-spec-" .. core.getpid() .. ".png"
    local rt2 = assert(hcp.create({ pack_dirs = { home .. "/packs" }, driver = driver, out_dir = S.REPO,
      state_dir = home .. "/state" }))
    local res = png(rt2, name)
    rt2:close()
    local made = core.kind(S.REPO .. "/" .. name)
    if made then os.remove(S.REPO .. "/" .. name) end
    assert.is_nil(made)
    assert.matches("lies in a directory the runtime protects", res.error)
  end)

  case("protect names more paths for the operator", function()
    S.mkdir(home .. "/keep")
    local rt2 = runtime({ protect = { home .. "/keep" } })
    assert.matches("protects", png(rt2, "keep/qr.png").error)
    rt2:close()
  end)
end)

describe("attack: out_dir through the commands", function()
  local HCP = S.HCP
  local function run(home, cmdline, stdin)
    local dir = S.tmpdir("cmd-")
    local cmd = string.format("cd %s && env -u HCP_PACK_PATH -u HCP_CONFIG XDG_STATE_HOME=%s %s > %s 2> %s < %s",
      S.q(home), S.q(home .. "/state"), cmdline, S.q(dir .. "/out"), S.q(dir .. "/err"),
      S.q(S.write(dir .. "/in", stdin or "")))
    local _, _, code = os.execute(cmd)
    return S.read(dir .. "/out"), S.read(dir .. "/err"), code
  end

  it("hcp run in a home directory: .ssh and packs are refused; a rerun of -o out.png replaces it", function()
    local home = make_home()
    local _, err, code = run(home, HCP .. " run --pack-dir packs qrencode -t PNG -o .ssh/authorized_keys x")
    assert.equal(126, code)
    assert.matches("hidden name", err)
    _, err, code = run(home, HCP .. " run --pack-dir packs qrencode -t PNG -o packs/jq/hcp.json x")
    assert.equal(126, code)
    assert.matches("protects", err)
    assert.equal("ssh-ed25519 AAAA owner\n", S.read(home .. "/.ssh/authorized_keys"))
    for _, text in ipairs({ "one", "two" }) do
      _, err, code = run(home, HCP .. " run --pack-dir packs qrencode -t PNG -o out.png " .. text)
      assert.equal(0, code, err)
    end
    assert.matches("^\x89PNG", S.read(home .. "/out.png"))
    _, err, code = run(home, HCP .. " run --no-replace --pack-dir packs qrencode -t PNG -o out.png three")
    assert.equal(1, code)
    assert.matches("replacing is not allowed", err)
    local elsewhere = S.tmpdir("elsewhere-")
    _, err, code = run(home, HCP .. " run --out-dir " .. S.q(elsewhere) .. " --pack-dir packs qrencode -t PNG -o o.png x")
    assert.equal(0, code, err)
    assert.matches("^\x89PNG", S.read(elsewhere .. "/o.png"))
    assert.is_nil(core.kind(home .. "/o.png"))
  end)

  it("hcp call does not replace by default; --replace does; --out-dir moves the files", function()
    local home = make_home()
    S.write(home .. "/out.png", "mine")
    local req = '{"pack":"qrencode","op":"png","params":{"file":"out.png","text":"x"}}\n'
    local out, _, code = run(home, HCP .. " call --pack-dir packs", req)
    assert.equal(0, code)
    assert.matches("replacing is not allowed", out)
    assert.equal("mine", S.read(home .. "/out.png"))
    out = run(home, HCP .. " call --replace --pack-dir packs", req)
    assert.matches('"ok":true', out)
    assert.matches("^\x89PNG", S.read(home .. "/out.png"))
    local elsewhere = S.tmpdir("elsewhere-")
    out = run(home, HCP .. " call --out-dir " .. S.q(elsewhere) .. " --pack-dir packs", req)
    assert.matches('"ok":true', out)
    assert.matches("^\x89PNG", S.read(elsewhere .. "/out.png"))
  end)

  it("the --config file is protected: an output never replaces it", function()
    local home = make_home()
    S.write(home .. "/conf.lua", "return {}\n")
    local _, err, code = run(home, HCP .. " run --config conf.lua --pack-dir packs qrencode -t PNG -o conf.lua x")
    assert.equal(126, code)
    assert.matches("protects", err)
    assert.equal("return {}\n", S.read(home .. "/conf.lua"))
  end)
end)
