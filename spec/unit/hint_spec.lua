-- hcp.workspace.hint (issue 15): a hint only for a plain relative argument
-- the agent sent, named in a "not found" (or "not writable") line of the
-- child's stderr, and holding nothing but that argument and fixed text.
local hint = require("hcp.workspace.hint")

local function plan(argv) return { argv = argv } end

describe("workspace.hint.for_run", function()
  it("names the argument and says in: and out:", function()
    local h = hint.for_run(plan({ "-l", "notes.txt" }), { [2] = true }, "wc: notes.txt: No such file or directory\n")
    assert.equal('argument 2 ("notes.txt") is not a file reference: the tool runs in a directory of its own, not in '
      .. "yours. Give it your file as in:notes.txt, or name a file it writes as out:notes.txt (written back after the "
      .. "call).", h)
  end)

  it("reads the phrasings of common tools, in any case, with the name quoted or not", function()
    local lines = { "sort: cannot read: a.txt: No such file or directory", "tar: a.txt: Cannot stat: No such file",
      "cp: cannot stat 'a.txt': No such file or directory", "jq: error: Could not open a.txt: No such file",
      "convert: unable to open image `a.txt': No such file", "ERROR: a.txt does not exist", "a.txt: not found" }
    for _, l in ipairs(lines) do
      assert.is_string(hint.for_run(plan({ "a.txt" }), { true }, l .. "\n"), l)
    end
    assert.matches("not writable%. Name the file it writes as out:o%.tgz",
      hint.for_run(plan({ "-czf", "o.tgz" }), { true, true }, "tar: o.tgz: Cannot open: Read-only file system\n"))
  end)

  it("stays silent for what the agent did not send, a reference, an option, or a name only inside a word", function()
    local err = "x: data.txt: No such file or directory\n"
    assert.is_nil(hint.for_run(plan({ "data.txt" }), {}, err)) -- wrap.args or an op's own text
    assert.is_nil(hint.for_run(plan({ { before = "", root = "files", rel = "data.txt" } }), { true }, err))
    assert.is_nil(hint.for_run(plan({ "-data.txt" }), { true }, "x: -data.txt: No such file\n"))
    assert.is_nil(hint.for_run(plan({ "/abs/data.txt" }), { true }, "x: /abs/data.txt: No such file\n"))
    assert.is_nil(hint.for_run(plan({ "a" }), { true }, "x: data.txt: No such file\n"))
    assert.is_nil(hint.for_run(plan({ "data.txt" }), { true }, "x: data.txt: is fine\n"))
    assert.is_nil(hint.for_run(plan({ "data.txt" }), { true }, ""))
    assert.is_nil(hint.for_run(nil, { true }, err))
  end)

  it("names an op's parameter, and never puts stderr or a path of the runtime in", function()
    local h = hint.for_run(plan({ "-l", "in.txt" }), { [2] = "file" },
      "wc: /tmp/hcp-rt-x/jail/in.txt: secret stuff; in.txt: No such file or directory\n")
    assert.matches('^parameter "file" %("in.txt"%)', h)
    assert.is_nil(h:find("/", 1, true))
    assert.is_nil(h:find("secret", 1, true))
  end)
end)
