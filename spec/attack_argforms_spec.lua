-- Attack (issue 11, category 2): the argument forms the rules did not see.
-- Glued short flags, --flag=value of any flag, getopt_long abbreviations,
-- file: URIs, /proc/*/root and /proc/*/cwd, spellings, separators inside an
-- argument, and paths through symlinks — each is now planned into the jail
-- or refused (sandbox: host path not allowed / workspace: path escapes the
-- jail), and a refused call spawns nothing. Example packs are copied to a
-- temporary directory first (qrencode -ohcp.json used to write the pack's
-- own manifest); every case runs under both drivers.
local hcp = require("hcp")
local core = require("hcp.core")
local S = require("support")

local function refused(res, pattern)
  assert.equal(126, res.exit, tostring(res.error))
  assert.matches(pattern, res.error)
  assert.is_nil(res.stdout)
end

S.each_driver("attack: argument forms", function(driver, case)

  local packs, out, rt
  setup(function()
    packs = S.tmpdir("formpacks-")
    for _, p in ipairs({ "qrencode", "xml", "jq" }) do
      S.must_sh(string.format("cp -r %s %s", S.q(S.REPO .. "/packs-examples/" .. p), S.q(packs .. "/")))
    end
    S.pack(S.manifest("cat", "cat"), packs)
    S.pack(S.manifest("sorter", "sort", { wrap = { workspace = { mode = "ephemeral" } } }), packs)
    S.pack(S.manifest("shx", "sh", { wrap = { args = { "-c", 'eval "$1"', "sh" } } }), packs)
    S.pack(S.manifest("shws", "sh", { wrap = { args = { "-c", 'eval "$1"', "sh" }, workspace = { mode = "workspace" } } }),
      packs)
    -- a pack that ships a link to /etc inside its root
    local linked = S.pack(S.manifest("linked", "cat"), packs)
    S.must_sh("ln -s /etc " .. S.q(linked .. "/data"))
  end)
  before_each(function()
    out = S.tmpdir("out-")
    rt = assert(hcp.create({ pack_dirs = { packs }, driver = driver, out_dir = out, state_dir = S.tmpdir("state-") }))
    assert.same({}, rt:problems())
  end)
  after_each(function() rt:close() end)

  case("glued short flag: qrencode -ohcp.json goes to out_dir, never the pack's own manifest", function()
    local manifest = S.read(packs .. "/qrencode/hcp.json")
    local res = rt:call({ pack = "qrencode", args = { "-t", "PNG", "-ohcp.json", "--", "x" } })
    assert.is_true(res.ok, res.error)
    assert.equal(manifest, S.read(packs .. "/qrencode/hcp.json"))
    assert.matches("^\x89PNG", S.read(out .. "/hcp.json"))
    assert.same({ out .. "/hcp.json" }, res.files)
  end)

  case("glued short flag: -o../x escapes and -o/root/x is a host path; both refused", function()
    refused(rt:call({ pack = "qrencode", args = { "-t", "PNG", "-o../x", "--", "x" } }),
      "^workspace: path escapes the jail: argument 3$")
    refused(rt:call({ pack = "qrencode", args = { "-t", "PNG", "-o/root/x", "--", "x" } }),
      "^sandbox: host path not allowed: argument 3")
    refused(rt:call({ pack = "cat", args = { "-I/etc" } }), "^sandbox: host path not allowed")
    assert.same({}, core.listdir(out))
  end)

  case("--flag=value of any flag, and every = of an argument", function()
    for _, a in ipairs({ "--random-source=/etc/shadow", "--whatever=/home/x/.ssh/id_rsa", "x=y=/root/z", "-D=/etc" }) do
      refused(rt:call({ pack = "sorter", args = { a } }), "^sandbox: host path not allowed")
    end
  end)

  case("a getopt_long abbreviation of a listed flag: sort --out=sorted.txt is written back to out_dir", function()
    local res = rt:call({ pack = "sorter", args = { "--out=sorted.txt" }, stdin = "b\na\n" })
    assert.is_true(res.ok, res.error)
    assert.equal("a\nb\n", S.read(out .. "/sorted.txt"))
    res = rt:call({ pack = "sorter", args = { "--outp", "s2.txt" }, stdin = "d\nc\n" })
    assert.is_true(res.ok, res.error)
    assert.equal("c\nd\n", S.read(out .. "/s2.txt"))
    refused(rt:call({ pack = "sorter", args = { "--out=../escape.txt" } }), "^workspace: path escapes the jail")
  end)

  case("file: URIs: a host path is refused; any other is rewritten into the jail (xmllint never reads the host file)", function()
    local secret = S.write(S.tmpdir("xmlsecret-") .. "/s.xml", "<secret>HOSTFILE</secret>")
    for _, a in ipairs({ "file:///etc/passwd", "FILE:/etc/hosts", "file://localhost/root/x", "file:///%65tc/passwd",
      "--x=file:///etc/passwd" }) do
      refused(rt:call({ pack = "xml", args = { "--xpath", "/", a } }), "^sandbox: host path not allowed")
    end
    local res = rt:call({ pack = "xml", args = { "--xpath", "string(/)", "file://" .. secret } })
    assert.is_false(res.ok)
    assert.not_matches("HOSTFILE", (res.stdout or "") .. (res.stderr or ""))
    refused(rt:call({ pack = "xml", args = { "--xpath", "/", "file://evil.example/x" } }), "another host")
  end)

  case("/proc/self/root, /proc/<n>/cwd, /proc/thread-self, /proc/<n>/environ, /dev/fd/N", function()
    local pid = core.getpid()
    for _, a in ipairs({ "/proc/self/root/etc/passwd", "/proc/" .. pid .. "/cwd/hcp.json",
      "/proc/thread-self/root/etc/hostname", "/proc/" .. pid .. "/root/etc/passwd", "/proc/" .. pid .. "/environ",
      "/proc/self/task/1/root/etc/passwd", "/proc/self/fd/7/etc/passwd", "/dev/fd/5" }) do
      refused(rt:call({ pack = "cat", args = { a } }), "^sandbox: host path not allowed")
    end
  end)

  case("spellings: //etc, /./etc, /tmp/../etc, /ETC, ~/.ssh, ~root", function()
    for _, a in ipairs({ "//etc/passwd", "/./etc/passwd", "/tmp/../etc/passwd", "/ETC/passwd", "~/.ssh/id_rsa",
      "~root/.ssh/id_rsa", "--key=~/.ssh/id_rsa" }) do
      refused(rt:call({ pack = "cat", args = { a } }), "^sandbox: host path not allowed")
    end
  end)

  case("separators inside an argument: a path in a script, a PATH-like list, an @file", function()
    refused(rt:call({ pack = "shx", args = { "cat /etc/hostname" } }), "^sandbox: host path not allowed")
    refused(rt:call({ pack = "cat", args = { "/tmp:/etc" } }), "^sandbox: host path not allowed")
    refused(rt:call({ pack = "cat", args = { "-d@/etc/passwd" } }), "^sandbox: host path not allowed")
    -- a jq program that names no path still runs
    assert.equal("3\n", rt:call({ pack = "jq", op = "eval", params = { expr = "1+2" } }).stdout)
  end)

  case("a symlink that leads to a host root is refused by where it leads", function()
    local link = S.tmpdir("links-") .. "/e"
    S.must_sh("ln -s /etc " .. S.q(link))
    refused(rt:call({ pack = "cat", args = { link .. "/passwd" } }), "^sandbox: host path not allowed")
    refused(rt:call({ pack = "cat", args = { link .. "/does-not-exist" } }), "^sandbox: host path not allowed")
  end)

  case("a link followed by ..: the kernel's walk, not the spelling, decides (/tmp/l -> /etc/ssl: /tmp/l/../shadow)", function()
    local link = S.tmpdir("links-") .. "/l"
    S.must_sh("ln -s /etc/ssl " .. S.q(link))
    refused(rt:call({ pack = "cat", args = { link .. "/../shadow" } }), "^sandbox: host path not allowed")
    refused(rt:call({ pack = "cat", args = { link .. "/../not-there-yet" } }), "^sandbox: host path not allowed")
  end)

  case("more separators: [/etc], JSON text, a backslash-escaped /etc, ${x:-/etc}", function()
    for _, a in ipairs({ "[/etc/x]", '{"p":"/etc/passwd"}', "\\/etc/passwd", "${x:-/etc/passwd}" }) do
      refused(rt:call({ pack = "cat", args = { a } }), "^sandbox: host path not allowed")
    end
  end)

  case("a plain ../ argument cannot read another pack's persisted jail", function()
    local res = rt:call({ pack = "shws", args = { "echo mine > data.txt" } })
    assert.is_true(res.ok, res.error)
    refused(rt:call({ pack = "cat", args = { "../../workspaces/default/shws/data.txt" } }),
      "^workspace: path escapes the jail: argument 1$")
    refused(rt:call({ pack = "sorter", args = { "--random-source=../x" } }), "^workspace: path escapes the jail")
  end)

  case("a link to /etc inside a pack root: workspace:data/passwd is refused (it escapes the jail)", function()
    refused(rt:call({ pack = "linked", args = { "workspace:data/passwd" } }),
      "^workspace: path escapes the jail: argument 1 %(through a symbolic link%)$")
  end)

  case("a link a child left in a persisted jail does not take a later workspace: reference out", function()
    local res = rt:call({ pack = "shws", args = { 'ln -s "/$2" data', "etc" } })
    assert.is_true(res.ok, res.error)
    refused(rt:call({ pack = "shws", args = { 'cat "$2"', "workspace:data/passwd" } }),
      "^workspace: path escapes the jail: argument 5 %(through a symbolic link%)$")
  end)
end)
