-- Issue 15: real CLIs take files as positional arguments. Each tool here —
-- wc -l, sort, tar -czf/-xzf, cp SRC DST, qrencode -o, a script with
-- --log FILE — is called through an op with file parameters and through raw
-- in:/out: arguments, under both drivers, and the files' contents are
-- checked in out_dir. Then the refusals: in:../x, out:/etc/x, in: of a link
-- that leads out or of a FIFO, out: over an existing file without replace,
-- hidden names, protected paths, no out_dir. Then what a call leaves in its
-- jail (left_in_jail) and the hint when a plain name was not found.
local hcp = require("hcp")
local core = require("hcp.core")
local S = require("support")

local LOGTOOL = [[#!/bin/sh
# logtool [--log FILE] MSG...: prints MSG, and writes a log line to FILE
log=
while [ $# -gt 0 ]; do
  case "$1" in
    --log) log=$2; shift 2 ;;
    --log=*) log=${1#--log=}; shift ;;
    *) break ;;
  esac
done
echo "$*"
if [ -n "$log" ]; then printf '{"logged":"%s"}\n' "$*" > "$log" || exit 3; fi
]]

-- The script of a mode-none pack: copies its input beside it, and writes a
-- temporary file of its own (which is not an output).
local TWIN = [[#!/bin/sh
cp "$1" "$1.copy" || exit 4
if [ -n "$TMPDIR" ]; then echo scratch > "$TMPDIR/scratch"; fi
echo done
]]

local function file_param(mode, description)
  return { type = "file", mode = mode, description = description }
end

-- Packs for the tools, each in mode ephemeral with ops that take files.
local function make_packs()
  local parent = S.tmpdir("fpacks-")
  local function pack(name, bin, wrap, ops)
    local m = S.manifest(name, bin, { wrap = wrap or {}, ops = ops })
    m.wrap.workspace = m.wrap.workspace or { mode = "ephemeral" }
    return S.pack(m, parent)
  end
  pack("wc", "wc", nil, { lines = { args = { "-l", "{file}" }, params = { file = file_param("in", "The text") } } })
  pack("sort", "sort", nil, {
    sorted = { args = { "{file}" }, params = { file = file_param("in") } },
    sort_to = { args = { "-o", "{out}", "{file}" }, params = { file = file_param("in"), out = file_param("out") } },
  })
  pack("tar", "tar", nil, {
    create = { args = { "-czf", "{archive}", "{a}", "{b}" },
      params = { archive = file_param("out"), a = file_param("in"), b = file_param("in") } },
    extract = { args = { "-xzf", "{archive}", "{member}" },
      params = { archive = file_param("in"), member = file_param("out") } },
  })
  pack("cp", "cp", nil, { copy = { args = { "{src}", "{dst}" }, params = { src = file_param("in"), dst = file_param("out") } } })
  pack("qrencode", "qrencode", nil, {
    png = { args = { "-t", "PNG", "-o", "{out}", "--", "{text}" }, params = { out = file_param("out"), text = "string" } },
  })
  local lt = pack("logtool", "./bin/logtool", { workspace = { mode = "ephemeral", output_flags = { "--log" } } },
    { run = { args = { "--log", "{log}", "{msg}" }, params = { log = file_param("out"), msg = "string" } } })
  S.mkdir(lt .. "/bin")
  S.write(lt .. "/bin/logtool", LOGTOOL, 493)
  local tw = pack("twin", "./bin/twin", { workspace = { mode = "none" } })
  S.mkdir(tw .. "/bin")
  S.write(tw .. "/bin/twin", TWIN, 493)
  local lk = pack("linker", "./bin/linker")
  S.mkdir(lk .. "/bin")
  S.write(lk .. "/bin/linker", "#!/bin/sh\nln -s /etc/hostname \"$1\" && echo linked\n", 493)
  pack("cpws", "cp", { workspace = { mode = "workspace" } })
  pack("wcs", "wc", nil, { count = { args = { "-l", "{name}" }, params = { name = "string" } } })
  pack("wcnone", "wc", { workspace = { mode = "none" } })
  pack("cpnone", "cp", { workspace = { mode = "none" } })
  return parent
end

local PACKS = make_packs()

S.each_driver("files in and out", function(driver, case)

  local out, rt
  local function runtime(extra)
    local opts = { pack_dirs = { PACKS }, driver = driver, out_dir = out, allow_bins = { "hcp" } }
    for k, v in pairs(extra or {}) do opts[k] = v end
    if opts.out_dir == false then opts.out_dir = nil end
    local r = assert(hcp.create(opts))
    assert.same({}, r:problems())
    return r
  end
  before_each(function()
    out = S.tmpdir("out-")
    S.write(out .. "/in.txt", "pear\napple\nfig\n")
    S.write(out .. "/b.txt", "second\n")
    rt = runtime()
  end)
  after_each(function() rt:close() end)

  local function ok(res)
    assert.is_true(res.ok, tostring(res.error) .. " " .. tostring(res.stderr))
    return res
  end

  case("wc -l: through an op's file parameter and through in:, relative names as given", function()
    local res = ok(rt:call({ pack = "wc", op = "lines", params = { file = "in.txt" } }))
    assert.equal("3 in.txt\n", res.stdout)
    res = ok(rt:call({ pack = "wc", args = { "-l", "in:in.txt", "in:b.txt" } }))
    assert.equal(" 3 in.txt\n 1 b.txt\n 4 total\n", res.stdout)
    assert.same({}, res.files)
    assert.is_nil(res.left_in_jail)
  end)

  case("sort: stdout and -o, through ops and raw arguments", function()
    assert.equal("apple\nfig\npear\n", ok(rt:call({ pack = "sort", op = "sorted", params = { file = "in.txt" } })).stdout)
    local res = ok(rt:call({ pack = "sort", op = "sort_to", params = { file = "in.txt", out = "sorted.txt" } }))
    assert.same({ out .. "/sorted.txt" }, res.files)
    assert.equal("apple\nfig\npear\n", S.read(out .. "/sorted.txt"))
    res = ok(rt:call({ pack = "sort", args = { "-r", "-o", "out:rev.txt", "in:in.txt" } }))
    assert.same({ out .. "/rev.txt" }, res.files)
    assert.equal("pear\nfig\napple\n", S.read(out .. "/rev.txt"))
    assert.equal("apple\nfig\npear\n", ok(rt:call({ pack = "sort", args = { "in:in.txt" } })).stdout)
    -- the input is unchanged
    assert.equal("pear\napple\nfig\n", S.read(out .. "/in.txt"))
  end)

  case("tar -czf and -xzf: member names as the agent gave them, contents round-trip", function()
    local res = ok(rt:call({ pack = "tar", op = "create", params = { archive = "a.tgz", a = "in.txt", b = "b.txt" } }))
    assert.same({ out .. "/a.tgz" }, res.files)
    assert.equal("in.txt\nb.txt\n", S.must_sh("tar -tzf " .. S.q(out .. "/a.tgz")))
    ok(rt:call({ pack = "tar", args = { "-czf", "out:raw.tgz", "in:b.txt" } }))
    assert.equal("b.txt\n", S.must_sh("tar -tzf " .. S.q(out .. "/raw.tgz")))
    -- extract into another out_dir, through the op and raw
    local out2 = S.tmpdir("out2-")
    S.must_sh(string.format("cp %s %s", S.q(out .. "/a.tgz"), S.q(out2 .. "/")))
    local rt2 <close> = runtime({ out_dir = out2 })
    res = ok(rt2:call({ pack = "tar", op = "extract", params = { archive = "a.tgz", member = "in.txt" } }))
    assert.same({ out2 .. "/in.txt" }, res.files)
    assert.equal("pear\napple\nfig\n", S.read(out2 .. "/in.txt"))
    ok(rt2:call({ pack = "tar", args = { "-xzf", "in:a.tgz", "out:b.txt" } }))
    assert.equal("second\n", S.read(out2 .. "/b.txt"))
  end)

  case("cp SRC DST: an op with two file parameters, and raw in: out:", function()
    ok(rt:call({ pack = "cp", op = "copy", params = { src = "in.txt", dst = "copy.txt" } }))
    assert.equal("pear\napple\nfig\n", S.read(out .. "/copy.txt"))
    S.mkdir(out .. "/sub")
    local res = ok(rt:call({ pack = "cp", args = { "in:b.txt", "out:sub/b2.txt" } }))
    assert.same({ out .. "/sub/b2.txt" }, res.files)
    assert.equal("second\n", S.read(out .. "/sub/b2.txt"))
  end)

  case("qrencode -o: an op's out parameter, -o out: and -oout: (the scheme in a listed flag's value)", function()
    local res = ok(rt:call({ pack = "qrencode", op = "png", params = { out = "qr.png", text = "hello" } }))
    assert.same({ out .. "/qr.png" }, res.files)
    assert.equal("\137PNG", S.read(out .. "/qr.png"):sub(1, 4))
    ok(rt:call({ pack = "qrencode", args = { "-t", "PNG", "-o", "out:raw.png", "hi" } }))
    assert.equal("\137PNG", S.read(out .. "/raw.png"):sub(1, 4))
    ok(rt:call({ pack = "qrencode", args = { "-t", "SVG", "-oout:q.svg", "x" } }))
    assert.matches("<svg", S.read(out .. "/q.svg"))
  end)

  case("a script with --log FILE: output_flags, --log=out:, and an op's out parameter", function()
    local res = ok(rt:call({ pack = "logtool", args = { "--log", "log1.json", "one" } }))
    assert.equal("one\n", res.stdout)
    assert.same({ out .. "/log1.json" }, res.files)
    assert.equal('{"logged":"one"}\n', S.read(out .. "/log1.json"))
    ok(rt:call({ pack = "logtool", args = { "--log=out:log2.json", "two" } }))
    assert.equal('{"logged":"two"}\n', S.read(out .. "/log2.json"))
    ok(rt:call({ pack = "logtool", op = "run", params = { log = "log3.json", msg = "three" } }))
    assert.equal('{"logged":"three"}\n', S.read(out .. "/log3.json"))
  end)

  -- ---- refusals: nothing spawned, nothing written -----------------------

  local function refused(res, pattern)
    assert.is_false(res.ok)
    assert.equal(126, res.exit)
    assert.is_nil(res.stdout) -- nothing was spawned
    assert.matches(pattern, res.error)
  end

  case("in:../x and out:a/../../x are refused, raw and as a file parameter", function()
    S.write(out .. "/../outside.txt", "outside\n")
    refused(rt:call({ pack = "wc", args = { "-l", "in:../outside.txt" } }), "^workspace: path escapes the jail: argument 2$")
    refused(rt:call({ pack = "cp", args = { "in:in.txt", "out:a/../../x" } }), "^workspace: path escapes the jail: argument 2$")
    refused(rt:call({ pack = "wc", op = "lines", params = { file = "../outside.txt" } }),
      '^workspace: path escapes the jail: argument 2 %(parameter "file"%)$')
    assert.is_nil(core.kind(out .. "/../x"))
  end)

  case("out:/etc/x is a host path; out:/tmp/x is not relative; as a parameter too", function()
    refused(rt:call({ pack = "cp", args = { "in:in.txt", "out:/etc/x" } }), '^sandbox: host path not allowed: argument 2 "out:/etc/x"')
    refused(rt:call({ pack = "cp", args = { "in:in.txt", "out:/tmp/hcp-x" } }),
      'out: takes a path relative to out_dir, not the absolute path "/tmp/hcp%-x"')
    refused(rt:call({ pack = "cp", op = "copy", params = { src = "in.txt", dst = "/etc/x" } }), "^sandbox: host path not allowed")
    refused(rt:call({ pack = "cp", op = "copy", params = { src = "/tmp/hcp-x", dst = "y" } }),
      'parameter "src"%): the file parameter takes a path relative to out_dir')
    assert.is_nil(core.kind("/etc/x"))
  end)

  case("in: of a link that leads out of out_dir, into a hidden name, or of a FIFO is refused", function()
    S.must_sh(string.format("cd %s && ln -s /etc/hostname host && mkdir .ssh && echo key > .ssh/id && ln -s .ssh/id innocent "
      .. "&& mkfifo pipe && ln -s in.txt alias", S.q(out)))
    refused(rt:call({ pack = "wc", args = { "-l", "in:host" } }), "^workspace: host: path escapes")
    refused(rt:call({ pack = "wc", args = { "-l", "in:innocent" } }), 'resolves through the hidden name ".ssh"')
    refused(rt:call({ pack = "wc", args = { "-l", "in:pipe" } }), "it is a FIFO, not a regular file")
    refused(rt:call({ pack = "wc", op = "lines", params = { file = "pipe" } }), "it is a FIFO, not a regular file")
    -- a link to a file beside it is that file, as for every input flag
    assert.equal("3 alias\n", ok(rt:call({ pack = "wc", args = { "-l", "in:alias" } })).stdout)
  end)

  case("in: of a directory is refused; out: through a directory link that leads out is refused", function()
    S.mkdir(out .. "/dir")
    refused(rt:call({ pack = "wc", args = { "-l", "in:dir" } }), "staging of dir refused: it is a directory, not a regular file")
    S.must_sh(string.format("cd %s && ln -s /tmp escape", S.q(out)))
    local res = rt:call({ pack = "cp", args = { "in:in.txt", "out:escape/hcp-files-spec-x" } })
    assert.is_false(res.ok)
    assert.matches("^workspace: escape/hcp%-files%-spec%-x: path escapes ", res.error)
    assert.is_nil(core.kind("/tmp/hcp-files-spec-x"))
  end)

  case("out: of a jail file the child made a symbolic link is refused, the host file never copied", function()
    local res = rt:call({ pack = "linker", args = { "out:stolen" } })
    assert.equal("linked\n", res.stdout)
    assert.is_false(res.ok)
    assert.matches("write%-back of stolen refused", res.error)
    assert.is_nil(core.kind(out .. "/stolen"))
  end)

  case("workspace mode: out: is written back and the persisted jail's change is listed", function()
    local state = S.tmpdir("state-")
    local rt2 <close> = runtime({ state_dir = state })
    local res = ok(rt2:call({ pack = "cpws", args = { "in:in.txt", "out:ws.txt" } }))
    assert.equal(out .. "/ws.txt", res.files[1])
    assert.equal("pear\napple\nfig\n", S.read(out .. "/ws.txt"))
    assert.is_nil(res.left_in_jail)
  end)

  case("out: over an existing file is refused unless the operator allows replacing", function()
    S.write(out .. "/keep.txt", "precious\n")
    local res = rt:call({ pack = "cp", args = { "in:in.txt", "out:keep.txt" } })
    assert.is_false(res.ok)
    assert.equal(0, res.exit) -- cp ran; the write-back was refused
    assert.matches("keep.txt refused: it exists in out_dir and replacing is not allowed", res.error)
    assert.equal("precious\n", S.read(out .. "/keep.txt"))
    res = rt:call({ pack = "cp", op = "copy", params = { src = "in.txt", dst = "keep.txt" } })
    assert.matches("replacing is not allowed", res.error)
    local rt2 <close> = runtime({ replace = true })
    ok(rt2:call({ pack = "cp", args = { "in:in.txt", "out:keep.txt" } }))
    assert.equal("pear\napple\nfig\n", S.read(out .. "/keep.txt"))
  end)

  case("hidden names and protected paths are refused as for every file flag", function()
    S.mkdir(out .. "/.git")
    S.write(out .. "/.git/config", "[core]\n")
    refused(rt:call({ pack = "wc", args = { "-l", "in:.git/config" } }), 'goes through the hidden name ".git"')
    refused(rt:call({ pack = "cp", args = { "in:in.txt", "out:.bashrc" } }), 'goes through the hidden name ".bashrc"')
    refused(rt:call({ pack = "cp", op = "copy", params = { src = "in.txt", dst = ".profile" } }),
      'argument 2 %(parameter "dst"%): the output ".profile" goes through the hidden name')
    -- a runtime whose out_dir holds its packs
    local rt2 <close> = runtime({ out_dir = PACKS })
    refused(rt2:call({ pack = "wc", args = { "-l", "in:wc/hcp.json" } }), "lies in a directory the runtime protects")
    refused(rt2:call({ pack = "cp", args = { "in:wc/hcp.json", "out:wc/x" } }), "lies in a directory the runtime protects")
    assert.is_nil(core.kind(PACKS .. "/wc/x"))
  end)

  case("with no out_dir, in: and out: (and file parameters) are refused", function()
    local rt2 <close> = runtime({ out_dir = false })
    refused(rt2:call({ pack = "wc", args = { "-l", "in:in.txt" } }), "this runtime has no out_dir")
    refused(rt2:call({ pack = "wc", op = "lines", params = { file = "in.txt" } }),
      '^workspace: argument 2 %(parameter "file"%): the input "in.txt" is a file under out_dir, and this runtime has no out_dir')
  end)

  -- ---- what a call leaves in its jail -----------------------------------

  case("ephemeral: files the tool made and nobody asked for are listed in left_in_jail, and can be asked for", function()
    ok(rt:call({ pack = "tar", args = { "-czf", "out:a.tgz", "in:in.txt", "in:b.txt" } }))
    local out2 = S.tmpdir("out3-")
    S.must_sh(string.format("cp %s %s", S.q(out .. "/a.tgz"), S.q(out2 .. "/")))
    local rt2 <close> = runtime({ out_dir = out2 })
    local res = ok(rt2:call({ pack = "tar", args = { "-xzf", "in:a.tgz" } }))
    assert.same({ "b.txt", "in.txt" }, res.left_in_jail)
    assert.same({}, res.files)
    assert.is_nil(core.kind(out2 .. "/in.txt"))
    -- on the wire too
    assert.matches('"left_in_jail":%["b.txt","in.txt"%]', require("hcp.envelope").encode(res))
    -- asked for with out:, it comes back and the rest is still listed
    res = ok(rt2:call({ pack = "tar", args = { "-xzf", "in:a.tgz", "out:in.txt", "b.txt" } }))
    assert.same({ out2 .. "/in.txt" }, res.files)
    assert.same({ "b.txt" }, res.left_in_jail)
    assert.equal("pear\napple\nfig\n", S.read(out2 .. "/in.txt"))
  end)

  case("ephemeral: staged inputs the tool did not change, outputs written back and .hcp-tmp are not listed", function()
    local res = ok(rt:call({ pack = "cp", args = { "in:in.txt", "out:c.txt" } }))
    assert.is_nil(res.left_in_jail)
    -- an input the tool changed in place is left in the jail
    res = ok(rt:call({ pack = "sort", args = { "-o", "in:in.txt", "in:in.txt" } }))
    assert.same({ "in.txt" }, res.left_in_jail)
    assert.equal("pear\napple\nfig\n", S.read(out .. "/in.txt"))
  end)

  case("mode none: the files directory is listed, TMPDIR and the pack root are not", function()
    local res = ok(rt:call({ pack = "twin", args = { "in:in.txt" } }))
    assert.equal("done\n", res.stdout)
    assert.same({ "in.txt.copy" }, res.left_in_jail)
    -- mode none binds references as absolute paths into the call's own files directory
    res = ok(rt:call({ pack = "wcnone", args = { "-l", "in:in.txt" } }))
    assert.matches("^3 /.*/files/in.txt\n$", res.stdout)
    assert.is_nil(res.left_in_jail)
    -- nothing of the call is left anywhere
    res = ok(rt:call({ pack = "twin", args = { "in:b.txt" } }))
    assert.same({ "b.txt.copy" }, res.left_in_jail)
    assert.is_nil(core.kind(PACKS .. "/twin/b.txt.copy"))
    assert.is_nil(core.kind(out .. "/b.txt.copy"))
  end)

  -- ---- hints --------------------------------------------------------------

  case("a plain relative name the tool did not find gets a hint naming in: and out:", function()
    local res = rt:call({ pack = "wc", args = { "-l", "in.txt" } })
    assert.is_false(res.ok)
    assert.equal('argument 2 ("in.txt") is not a file reference: the tool runs in a directory of its own, not in '
      .. "yours. Give it your file as in:in.txt, or name a file it writes as out:in.txt (written back after the call).",
      res.hint)
    res = rt:call({ pack = "sort", args = { "nope/missing.txt" } })
    assert.matches('^argument 1 %("nope/missing.txt"%) is not a file reference', res.hint)
    res = rt:call({ pack = "cp", args = { "in.txt", "x" } })
    assert.matches('^argument 1 %("in.txt"%)', res.hint)
    assert.matches('"hint":"argument 1', require("hcp.envelope").encode(res))
    -- an op's string parameter is named as the parameter
    res = rt:call({ pack = "wcs", op = "count", params = { name = "in.txt" } })
    assert.matches('^parameter "name" %("in.txt"%) is not a file reference', res.hint)
  end)

  case("mode none: a plain output name in the read-only cwd gets the out: hint", function()
    local layers = {}
    for _, l in ipairs(rt:layers()) do layers[l] = true end
    if driver == "local" and not (layers.rootfs or layers.landlock) then
      return pending("the pack root is writable without rootfs or landlock")
    end
    local res = rt:call({ pack = "cpnone", args = { "in:in.txt", "copy.txt" } })
    assert.is_false(res.ok)
    assert.equal('argument 2 ("copy.txt") is not a file reference, and the tool\'s working directory is not '
      .. "writable. Name the file it writes as out:copy.txt (written back after the call).", res.hint)
    assert.is_nil(core.kind(PACKS .. "/cpnone/copy.txt"))
    res = rt:call({ pack = "twin", args = { "notthere" } })
    assert.matches('^argument 1 %("notthere"%) is not a file reference: the tool runs', res.hint)
  end)

  case("no hint for a reference, a name the agent did not send, or a successful call", function()
    local res = rt:call({ pack = "wc", args = { "-l", "out:in.txt" } }) -- a reference: wc finds no file
    assert.is_false(res.ok)
    assert.is_nil(res.hint)
    assert.is_nil(ok(rt:call({ pack = "wc", args = { "-l", "in:in.txt" } })).hint)
    -- the hint holds only what the agent sent: no path of the runtime, no line of stderr
    res = rt:call({ pack = "wc", args = { "-l", "in.txt" } })
    assert.is_nil(res.hint:find("/", 1, true))
    assert.is_nil(res.hint:find("No such file", 1, true))
  end)
end)

describe("file parameters in tool schemas (rt:tools, hcp tools --json)", function()
  local ops = require("hcp.ops")

  it("are strings whose description says which way the file goes", function()
    local rt <close> = assert(hcp.create({ pack_dirs = { PACKS } }))
    local by = {}
    for _, t in ipairs(rt:tools()) do by[t.name] = t end
    local p = by.cp__copy.inputSchema.properties
    assert.same({ type = "string", description = ops.FILE_NOTES["in"] }, p.src)
    assert.same({ type = "string", description = ops.FILE_NOTES.out }, p.dst)
    assert.matches("^A file the tool reads: a path relative to the caller's directory", p.src.description)
    assert.matches("writes it back there after the call", p.dst.description)
    -- a description of the manifest's own comes first
    assert.equal("The text. " .. ops.FILE_NOTES["in"], by.wc__lines.inputSchema.properties.file.description)
    assert.matches("File parameters are paths relative to the caller's directory", by.cp__copy.description)
    -- the raw tool tells the agent about in: and out:
    assert.matches("in:PATH %(copied in%) or out:PATH %(written back after the call%)",
      by.cp__exec.inputSchema.properties.args.description)
    -- the runtime checks against the same schema: a file parameter must be a string
    local res = rt:call({ pack = "cp", op = "copy", params = { src = 1, dst = "x" } })
    assert.equal('envelope: parameter "src" of "cp.copy" must be a string', res.error)
  end)

  it("hcp tools --json lists them the same way", function()
    local out, code = S.sh(S.q(S.HCP) .. " tools --json --pack-dir " .. S.q(PACKS))
    assert.equal(0, code, out)
    local list = require("hcp.json").decode(out)
    local found
    for _, t in ipairs(list.tools or list) do
      if t.name == "tar__extract" then found = t end
    end
    assert.is_table(found)
    assert.equal("string", found.inputSchema.properties.archive.type)
    assert.equal(ops.FILE_NOTES["in"], found.inputSchema.properties.archive.description)
    assert.equal(ops.FILE_NOTES.out, found.inputSchema.properties.member.description)
  end)
end)
