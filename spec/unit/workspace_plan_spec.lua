-- hcp.workspace's pure functions (§10.6; issue 11, category 2): plan takes
-- no roots and recognises every argument form; bind puts the roots in;
-- check_host_refs applies the out_dir rules. Made-up paths that do not
-- exist: nothing is touched.
local core = require("hcp.core")
local workspace = require("hcp.workspace")

local J, F = "/no/such/jail", "/no/such/files"
local DEFAULT = { file_flags = { "--file", "--json-file", "--env-file" }, output_flags = { "--output", "-o" } }

local function plan(argv, flags)
  return workspace.plan(argv, flags or DEFAULT)
end

-- the bound argv, the staged rels and the output rels
local function run(argv, flags)
  local p, err = plan(argv, flags)
  if not p then return nil, err end
  local stage, outputs = {}, {}
  for _, s in ipairs(p.stage) do stage[#stage + 1] = s.rel end
  for _, s in ipairs(p.outputs) do outputs[#outputs + 1] = s.rel end
  return workspace.bind(p, { jail = J, files_dir = F }), stage, outputs, p
end

describe("workspace.plan is root-free", function()
  it("returns references, not paths: the same plan binds to any roots", function()
    local p = assert(plan({ "workspace:data/in.json", "--file", "a.txt", "-o", "out/x.png", "plain" }))
    assert.same({ before = "", root = "jail", rel = "data/in.json" }, p.argv[1])
    assert.equal("--file", p.argv[2])
    assert.same({ before = "", root = "files", rel = "a.txt" }, p.argv[3])
    assert.same({ before = "", root = "files", rel = "out/x.png" }, p.argv[5])
    assert.equal("plain", p.argv[6])
    assert.same({ { rel = "a.txt", arg = 3 } }, p.stage)
    assert.same({ { rel = "out/x.png", arg = 5 } }, p.outputs)
    assert.same({ "out" }, p.dirs)
    assert.is_true(p.uses_files)
    assert.same({ "/a/data/in.json", "--file", "/b/a.txt", "-o", "/b/out/x.png", "plain" },
      workspace.bind(p, { jail = "/a", files_dir = "/b" }))
    assert.is_false(assert(plan({ "workspace:x", "y" })).uses_files)
  end)

  it("defaults output_flags to --output and -o", function()
    local _, _, outputs = run({ "-o", "a", "--output=b" }, { file_flags = {} })
    assert.same({ "a", "b" }, outputs)
  end)

  it("workspace.flags reads today's manifests: --output/-o among file_flags are the outputs", function()
    assert.same({ file_flags = { "--file" }, output_flags = { "-o" } }, workspace.flags({ "--file", "-o" }))
    assert.same({ file_flags = { "--file" }, output_flags = {} }, workspace.flags({ "--file" }))
    assert.same({ file_flags = { "-i" }, output_flags = { "--log" } }, workspace.flags({ "-i" }, { "--log" }))
  end)
end)

describe("workspace.plan: today's forms (kept)", function()
  it("rewrites workspace:REL to the path inside the jail", function()
    assert.same({ J .. "/data/in.json", J .. "/a/b/c" }, (run({ "workspace:data/in.json", "workspace:a//b/./c" })))
    assert.is_nil(core.kind(J))
  end)

  it("keeps a workspace:/abs reference inside the jail (never the host path)", function()
    assert.same({ J .. "/etc/passwd" }, (run({ "workspace:/etc/passwd" })))
  end)

  it("refuses workspace:../x that leaves the jail, naming the argument", function()
    assert.same({ nil, "workspace: path escapes the jail: argument 2" }, { run({ "a", "workspace:../x" }) })
    assert.same({ nil, "workspace: path escapes the jail: argument 1" }, { run({ "workspace:a/../../x" }) })
    assert.same({ J .. "/b" }, (run({ "workspace:a/../b" })))
  end)

  it("rewrites and stages an input flag's value in --file value and --file=value forms", function()
    local argv, stage = run({ "--file", "in.txt", "--file=sub/in.txt", "--json-file", "a.json", "--env-file=b.env" })
    assert.same({ "--file", F .. "/in.txt", "--file=" .. F .. "/sub/in.txt", "--json-file", F .. "/a.json",
      "--env-file=" .. F .. "/b.env" }, argv)
    assert.same({ "in.txt", "sub/in.txt", "a.json", "b.env" }, stage)
  end)

  it("stages a value named twice only once", function()
    local _, stage = run({ "--file", "a", "--file=./a" })
    assert.same({ "a" }, stage)
  end)

  it("points --output and -o into files_dir, lists them as outputs and their parents as dirs", function()
    local argv, stage, outputs, p = run({ "-o", "out.png", "--output=res/deep/r.txt", "--output", "x.txt" })
    assert.same({ "-o", F .. "/out.png", "--output=" .. F .. "/res/deep/r.txt", "--output", F .. "/x.txt" }, argv)
    assert.same({ "out.png", "res/deep/r.txt", "x.txt" }, outputs)
    assert.same({ "res/deep" }, p.dirs)
    assert.same({}, stage)
  end)

  it("treats -o as an output only when it is listed", function()
    local argv, _, outputs = run({ "-o", "out.png", "--file", "in" }, { file_flags = { "--file" }, output_flags = {} })
    assert.same({ "-o", "out.png", "--file", F .. "/in" }, argv)
    assert.same({}, outputs)
  end)

  it("passes -, the empty string, absolute paths and URLs unchanged", function()
    local argv = { "--file", "-", "-o", "-", "--file=", "--file", "/data/x", "--output=/srv/y",
      "--file", "s3://bucket/key", "-o", "https://example.org/x" }
    local out, stage, outputs = run(argv)
    assert.same(argv, out)
    assert.same({}, stage)
    assert.same({}, outputs)
  end)

  it("refuses a file value whose .. leaves files_dir, and . as not a file", function()
    assert.same({ nil, "workspace: path escapes the jail: argument 2" }, { run({ "--file", "../secret" }) })
    assert.same({ nil, "workspace: path escapes the jail: argument 2" }, { run({ "x", "--output=a/../../y" }) })
    assert.same({ nil, "workspace: path escapes the jail: argument 2" }, { run({ "-o", ".." }) })
    for _, v in ipairs({ ".", "./", "sub/.." }) do
      local _, err = run({ "-o", v })
      assert.matches('^workspace: argument 2: ".-" names a directory, not a file$', err)
    end
  end)

  it("keeps argv an array: spaces and shell metacharacters stay one element", function()
    local argv = run({ "--file", "a b; rm -rf ~ $(x) `y`.txt", "plain arg with spaces", "*" })
    assert.same({ "--file", F .. "/a b; rm -rf ~ $(x) `y`.txt", "plain arg with spaces", "*" }, argv)
  end)

  it("leaves a file flag that is last, with no value, alone", function()
    assert.same({ "x", "--file" }, (run({ "x", "--file" })))
    local _, _, outputs = run({ "-o" })
    assert.same({}, outputs)
  end)

  it("rewrites --any-flag=workspace:REL into the jail, and refuses it when it escapes", function()
    assert.same({ "--db=" .. J .. "/state/db.sqlite" }, (run({ "--db=workspace:state/db.sqlite" })))
    assert.same({ nil, "workspace: path escapes the jail: argument 1" }, { run({ "--db=workspace:../x" }) })
  end)

  it("a file flag's workspace: value points into the jail and is neither staged nor written back", function()
    local argv, stage, outputs = run({ "--file", "workspace:in", "-o", "workspace:out" })
    assert.same({ "--file", J .. "/in", "-o", J .. "/out" }, argv)
    assert.same({}, stage)
    assert.same({}, outputs)
  end)

  it("leaves arguments that are not file references unchanged", function()
    local argv = { "-n", "--filter=.a", "key=workspace:x", "--fileX", "in", "workspace", "rel/path", "--json", "x",
      "--env=prod", "-json", "-version", "--monochrome-output" }
    assert.same(argv, (run(argv)))
  end)
end)

describe("workspace.plan: the forms real CLIs accept (issue 11)", function()
  it("a glued short flag: -ohcp.json, -o../x, -o/root/x, -osub/out.png", function()
    local argv, _, outputs = run({ "-ohcp.json", "-osub/out.png" })
    assert.same({ "-o" .. F .. "/hcp.json", "-o" .. F .. "/sub/out.png" }, argv)
    assert.same({ "hcp.json", "sub/out.png" }, outputs)
    assert.same({ nil, "workspace: path escapes the jail: argument 1" }, { run({ "-o../x" }) })
    -- an absolute value passes unchanged; the host-path rule is the one that refuses /root
    assert.same({ "-o/root/x" }, (run({ "-o/root/x" })))
  end)

  it("a glued short input flag is staged: -iin.txt with -i listed", function()
    local argv, stage = run({ "-iin.txt" }, { file_flags = { "-i" }, output_flags = {} })
    assert.same({ "-i" .. F .. "/in.txt" }, argv)
    assert.same({ "in.txt" }, stage)
  end)

  it("-o=x is the file \"=x\", as getopt reads it", function()
    local argv, _, outputs = run({ "-o=x" })
    assert.same({ "-o" .. F .. "/=x" }, argv)
    assert.same({ "=x" }, outputs)
  end)

  it("a single-dash long flag that is listed: -out x and -out=x", function()
    local flags = { file_flags = {}, output_flags = { "-out" } }
    local argv, _, outputs = run({ "-out", "a.pem", "-out=b.pem" }, flags)
    assert.same({ "-out", F .. "/a.pem", "-out=" .. F .. "/b.pem" }, argv)
    assert.same({ "a.pem", "b.pem" }, outputs)
  end)

  it("getopt_long abbreviations of a listed long flag are rewritten: --out=x, --outp x, --o=y, --json-f=z", function()
    local argv, stage, outputs = run({ "--out=x", "--outp", "y", "--o=z", "--json-f=j", "--env-=e" })
    assert.same({ "--out=" .. F .. "/x", "--outp", F .. "/y", "--o=" .. F .. "/z", "--json-f=" .. F .. "/j",
      "--env-=" .. F .. "/e" }, argv)
    assert.same({ "x", "y", "z" }, outputs)
    assert.same({ "j", "e" }, stage)
  end)

  it("a prefix that is a word of its own is not an abbreviation: --json, --env (of --json-file, --env-file)", function()
    assert.same({ "--json", "x", "--env=prod" }, (run({ "--json", "x", "--env=prod" })))
  end)

  it("an abbreviation of two listed flags is ambiguous and left alone", function()
    local flags = { file_flags = { "--output-log" }, output_flags = { "--output" } }
    assert.same({ "--out=x" }, (run({ "--out=x" }, flags)))
    -- the full names still work
    local _, stage, outputs = run({ "--output=a", "--output-log=b" }, flags)
    assert.same({ "a" }, outputs)
    assert.same({ "b" }, stage)
  end)

  it("file: URIs are references into the jail, any case, with query and fragment kept", function()
    local argv = run({ "file:///etc/passwd", "FILE:/a/b", "file://localhost/c", "file:data.db?mode=ro", "File:///x#f" })
    assert.same({ "file://" .. J .. "/etc/passwd", "FILE://" .. J .. "/a/b", "file://" .. J .. "/c",
      "file:" .. J .. "/data.db?mode=ro", "File://" .. J .. "/x#f" }, argv)
  end)

  it("file: URIs: percent escapes are decoded before the escape check, and re-encoded when bound", function()
    assert.same({ "file://" .. J .. "/a%20b" }, (run({ "file:///a%20b" })))
    assert.same({ nil, "workspace: path escapes the jail: argument 1" }, { run({ "file:%2e%2e/x" }) })
    assert.same({ nil, "workspace: path escapes the jail: argument 1" }, { run({ "file:///a/%2E%2E/%2e%2e/x" }) })
  end)

  it("file: URIs of another host are refused", function()
    local _, err = run({ "file://evil.example/x" })
    assert.equal('workspace: argument 1: a file: URI of another host ("evil.example") is refused', err)
  end)

  it("file: and workspace: after --any-flag=, after a glued -X, and as a listed flag's value", function()
    local argv, stage = run({ "--db=file:///d.db", "-Iworkspace:inc", "-Ifile:/inc2", "--file", "file:///in" })
    assert.same({ "--db=file://" .. J .. "/d.db", "-I" .. J .. "/inc", "-Ifile://" .. J .. "/inc2",
      "--file", "file://" .. J .. "/in" }, argv)
    assert.same({}, stage)
  end)

  it("after a bare --, options are data; workspace: and file: arguments are still references", function()
    local argv, stage, outputs = run({ "-t", "ASCII", "--", "-ok", "--file", "x", "-o", "y", "workspace:w" })
    assert.same({ "-t", "ASCII", "--", "-ok", "--file", "x", "-o", "y", J .. "/w" }, argv)
    assert.same({}, stage)
    assert.same({}, outputs)
    -- a -- that is a listed flag's value is a value, not the end of options
    local _, _, outs = run({ "-o", "--", "-o", "z" })
    assert.same({ "--", "z" }, outs)
  end)

  it("a plain argument or --x= value that spells a way out of the jail is refused; .. alone is not a path", function()
    for _, argv in ipairs({ { "../x" }, { "./../db/data.db" }, { "--db=../other/data.db" }, { "a", "../../etc" } }) do
      local _, err = run(argv)
      assert.equal("workspace: path escapes the jail: argument " .. #argv, err, argv[#argv])
    end
    local argv = { "..", "..|numbers", "[..]", "a/../b", "HEAD..main", "s/a/../../b/", "--", "../as-data" }
    assert.same(argv, (run(argv)))
  end)

  it("records the argument number of each staged and written-back file", function()
    local p = assert(plan({ "x", "--file", "a", "-ob" }))
    assert.same({ { rel = "a", arg = 3 } }, p.stage)
    assert.same({ { rel = "b", arg = 4 } }, p.outputs)
  end)
end)

describe("workspace.check_host_refs (the out_dir rules, lexically)", function()
  local function check(argv, o)
    return workspace.check_host_refs(assert(plan(argv)), o)
  end

  it("no out_dir: a reference to a host file is refused, naming the argument", function()
    local ok, err = check({ "x", "-o", "out.png" }, {})
    assert.is_nil(ok)
    assert.equal('workspace: argument 3: the output "out.png" is a file under out_dir, and this runtime has no out_dir '
      .. "(the operator sets the out_dir option)", err)
    -- jail references need none
    assert.is_true(check({ "workspace:x", "file:///y" }, {}))
  end)

  it("hidden components are refused unless allowed: .ssh/id_rsa, x/.git/config, .bashrc", function()
    for _, argv in ipairs({ { "--file", ".ssh/id_rsa" }, { "-o", "x/.git/config" }, { "-o.bashrc" } }) do
      local ok, err = check(argv, { out_dir = "/home/u" })
      assert.is_nil(ok, argv[#argv])
      assert.matches("goes through the hidden name", err)
      assert.matches("allow_hidden", err)
    end
    local _, err = check({ "--file", ".ssh/id_rsa" }, { out_dir = "/home/u" })
    assert.equal('workspace: argument 2: the input ".ssh/id_rsa" goes through the hidden name ".ssh" '
      .. "(refused unless the operator sets allow_hidden)", err)
    assert.is_true(check({ "--file", ".ssh/id_rsa" }, { out_dir = "/home/u", allow_hidden = true }))
  end)

  it("protected paths are never reached: a pack's manifest, the state dir", function()
    local o = { out_dir = "/home/u", protected = { "/home/u/packs", "/home/u/state" } }
    local ok, err = check({ "-o", "packs/jq/hcp.json" }, o)
    assert.is_nil(ok)
    assert.equal('workspace: argument 2: the output "packs/jq/hcp.json" lies in a directory the runtime protects '
      .. "(a pack, the state dir or the runtime's own files)", err)
    assert.is_nil((check({ "--file=state/workspaces/default/db/data.db" }, o)))
    assert.is_nil((check({ "-ostate" }, o)))
    assert.is_true(check({ "-o", "packsX/a", "--file", "out.png" }, o))
  end)
end)

describe("workspace.host_config and host_ref_opts", function()
  it("validates the out_dir options of hcp.create", function()
    assert.same({ nil, 'hcp.create: option "max_writeback" must be a non-negative integer of bytes' },
      { workspace.host_config({ max_writeback = 1.5 }) })
    assert.same({ nil, "hcp.create: protect[1] must be an absolute path" }, { workspace.host_config({ protect = { "rel" } }) })
    assert.same({ nil, 'hcp.create: option "protect" must be an array of absolute paths' },
      { workspace.host_config({ protect = { x = "/a" } }) })
    local cfg = assert(workspace.host_config({ replace = true }, "/o", "/s"))
    assert.is_true(cfg.replace)
    assert.is_false(cfg.allow_hidden)
  end)

  it("protects pack_dirs, the state dir, the runtime's own modules, and the per-call pack roots and private dir", function()
    local cfg = assert(workspace.host_config({ pack_dirs = { "/p/packs" }, protect = { "/extra" } }, "/o", "/s/state"))
    local o = workspace.host_ref_opts(cfg, { "/p/packs/jq", "/elsewhere/pack" }, "/tmp/hcp-rt-x")
    local set = {}
    for _, p in ipairs(o.protected) do set[p] = true end
    for _, want in ipairs({ "/p/packs", "/s/state", "/extra", "/p/packs/jq", "/elsewhere/pack", "/tmp/hcp-rt-x" }) do
      assert.is_true(set[want], want)
    end
    local here = package.searchpath("hcp.workspace", package.path):match("^(.*)/[^/]*$")
    assert.is_true(set[core.normalize(require("hcp.manifest").absolute(here))], "the Lua modules")
    assert.equal("/o", o.out_dir)
  end)
end)

describe("workspace.plan: in:REL and out:REL (issue 15)", function()
  it("in:REL is staged and out:REL written back, anywhere in argv", function()
    local argv, stage, outputs, p = run({ "-l", "in:a.txt", "x", "out:res/b.txt" })
    assert.same({ "-l", F .. "/a.txt", "x", F .. "/res/b.txt" }, argv)
    assert.same({ "a.txt" }, stage)
    assert.same({ "res/b.txt" }, outputs)
    assert.same({ "res" }, p.dirs)
    assert.same({ before = "", root = "files", rel = "a.txt", cwd = true }, p.argv[2])
  end)

  it("as a --flag= value, after a glued short flag, and as a listed flag's value (the scheme wins)", function()
    local argv, stage, outputs = run({ "--log=out:log.json", "-Iin:inc.h", "--file", "out:o", "-o", "in:i",
      "--data", "in:d" })
    assert.same({ "--log=" .. F .. "/log.json", "-I" .. F .. "/inc.h", "--file", F .. "/o", "-o", F .. "/i",
      "--data", F .. "/d" }, argv)
    assert.same({ "inc.h", "i", "d" }, stage)
    assert.same({ "log.json", "o" }, outputs)
  end)

  it("after a bare -- they are still references (files after --, as tools take them)", function()
    local argv, stage = run({ "--", "in:-x.txt", "-o", "out" })
    assert.same({ "--", F .. "/-x.txt", "-o", "out" }, argv)
    assert.same({ "-x.txt" }, stage)
  end)

  it("binds relative to the child's cwd when the files directory is it, ./ before a leading -", function()
    local p = assert(plan({ "in:a.txt", "out:-b", "--x=out:c/d", "workspace:w", "-o", "flag.png" }))
    assert.same({ "a.txt", "./-b", "--x=c/d", "/j/w", "-o", "/j/flag.png" },
      workspace.bind(p, { jail = "/j", files_dir = "/j", cwd = "/j" }))
    -- mode none: the files directory is not the cwd, so the paths are absolute
    assert.same({ "/f/a.txt", "/f/-b", "--x=/f/c/d", "/j/w", "-o", "/f/flag.png" },
      workspace.bind(p, { jail = "/j", files_dir = "/f", cwd = "/j" }))
  end)

  it("refuses in:../x, out:a/../../x, an absolute path, an empty path and a directory", function()
    assert.same({ nil, "workspace: path escapes the jail: argument 2" }, { run({ "x", "in:../x" }) })
    assert.same({ nil, "workspace: path escapes the jail: argument 1" }, { run({ "out:a/../../x" }) })
    assert.same({ nil, "workspace: path escapes the jail: argument 1" }, { run({ "--x=in:../../etc/passwd" }) })
    assert.same({ nil, 'workspace: argument 1: out: takes a path relative to out_dir, not the absolute path "/etc/x"' },
      { run({ "out:/etc/x" }) })
    assert.same({ nil, 'workspace: argument 1: in: takes a path relative to out_dir, not the absolute path "/tmp/x"' },
      { run({ "in:/tmp/x" }) })
    assert.same({ nil, "workspace: argument 2: in: needs a path relative to out_dir" }, { run({ "-n", "in:" }) })
    assert.same({ nil, 'workspace: argument 1: "sub/.." names a directory, not a file' }, { run({ "out:sub/.." }) })
  end)

  it("is case-sensitive and whole-word: IN:x, key=in:x, within:x, in.txt stay as they are", function()
    local argv = { "IN:x", "key=in:x", "within:x", "in.txt", "Out:y", "input:z" }
    assert.same(argv, (run(argv)))
  end)

  it("the out_dir rules apply: no out_dir, hidden names, protected paths", function()
    local function check(argv, o) return workspace.check_host_refs(assert(plan(argv)), o) end
    assert.equal('workspace: argument 1: the input "a.txt" is a file under out_dir, and this runtime has no out_dir '
      .. "(the operator sets the out_dir option)", select(2, check({ "in:a.txt" }, {})))
    assert.equal('workspace: argument 1: the output ".ssh/authorized_keys" goes through the hidden name ".ssh" '
      .. "(refused unless the operator sets allow_hidden)", select(2, check({ "out:.ssh/authorized_keys" }, { out_dir = "/h" })))
    assert.matches("lies in a directory the runtime protects",
      select(2, check({ "in:packs/jq/hcp.json" }, { out_dir = "/h", protected = { "/h/packs" } })))
  end)
end)

describe("workspace.plan: an op's file parameters (issue 15)", function()
  it("an argument placed by a file parameter is a reference whatever its text", function()
    local fa = { [2] = { kind = "input", param = "src", value = "-o", before = "", after = "" },
      [3] = { kind = "output", param = "dst", value = "r/out.txt", before = "--out=", after = ".bak" } }
    local p = assert(workspace.plan({ "-l", "-o", "--out=r/out.txt.bak" }, DEFAULT, fa))
    assert.same({ { rel = "-o", arg = 2, param = "src" } }, p.stage)
    assert.same({ { rel = "r/out.txt", arg = 3, param = "dst" } }, p.outputs)
    assert.same({ "-l", "./-o", "--out=r/out.txt.bak" }, workspace.bind(p, { jail = J, files_dir = J, cwd = J }))
  end)

  it("refuses a parameter that leaves out_dir or is absolute, naming it", function()
    local function one(value)
      return workspace.plan({ value }, DEFAULT, { { kind = "input", param = "src", value = value, before = "", after = "" } })
    end
    assert.same({ nil, 'workspace: path escapes the jail: argument 1 (parameter "src")' }, { one("../x") })
    assert.same({ nil, 'workspace: argument 1 (parameter "src"): the file parameter takes a path relative to out_dir, '
      .. 'not the absolute path "/etc/passwd"' }, { one("/etc/passwd") })
    assert.same({ nil, 'workspace: argument 1 (parameter "src"): the file parameter needs a path relative to out_dir' },
      { one("") })
    -- and the out_dir rules name it too
    local p = assert(one(".git/config"))
    assert.equal('workspace: argument 1 (parameter "src"): the input ".git/config" goes through the hidden name ".git" '
      .. "(refused unless the operator sets allow_hidden)", select(2, workspace.check_host_refs(p, { out_dir = "/h" })))
  end)
end)

describe("hcp.ops.expand places file parameters for the plan (issue 15)", function()
  local ops = require("hcp.ops")
  it("describes the element, the parameter, its kind and the text around it", function()
    local params = { src = { type = "file", mode = "in" }, dst = { type = "file", mode = "out" }, n = { type = "string" } }
    local argv, files, from = ops.expand({ "-n{n}", "{src}", "--out={dst}", "fixed" },
      { n = "3", src = "a b.txt", dst = "o/x" }, params)
    assert.same({ "-n3", "a b.txt", "--out=o/x", "fixed" }, argv)
    assert.same({ [2] = { kind = "input", param = "src", value = "a b.txt", before = "", after = "" },
      [3] = { kind = "output", param = "dst", value = "o/x", before = "--out=", after = "" } }, files)
    assert.same({ "n", "src", "dst" }, { from[1], from[2], from[3] })
    assert.is_nil(from[4])
  end)

  it("a value holding NUL or % is taken as it is", function()
    local params = { src = { type = "file", mode = "in" } }
    local argv, files = ops.expand({ "{src}" }, { src = "a%1\0b" }, params)
    assert.same({ "a%1\0b" }, argv)
    assert.equal("a%1\0b", files[1].value)
  end)
end)

describe("workspace.plan against what the fuzzer found (spec/fuzz/plan)", function()
  it("refuses a NUL byte in any argument with nil, err instead of raising", function()
    for _, argv in ipairs({ { "--file", "in\0.txt" }, { "workspace:a\0b" }, { "x", "--output=o\0" }, { "plain\0" },
      { "in:a\0" } }) do
      local p, err = plan(argv)
      assert.is_nil(p)
      assert.matches("^workspace: argument %d contains a NUL byte$", err)
    end
  end)

  it("refuses a URL-like file value that, read as a path, climbs out", function()
    -- a tool without URLs opens "a:/../../x": out of the jail once a: exists
    for _, v in ipairs({ "a://../../x", "s3://../../../etc/passwd", "x://y/../../../z" }) do
      local p, err = plan({ "--file", v })
      assert.is_nil(p, v)
      assert.equal("workspace: path escapes the jail: argument 2", err)
    end
    assert.same({ "--file", "https://example.org/a/../b" }, (run({ "--file", "https://example.org/a/../b" })))
  end)
end)
