-- Issue 15, "done when": a user wraps wc, sort, tar and cp with `hcp wrap`,
-- calls them on files in their directory positionally, and gets the outputs
-- back where they asked — through raw arguments (`hcp run`) and through ops
-- they add to the scaffold (`hcp call`), under both drivers. Everything
-- through the `hcp` command, as the user types it.
local hcp = require("hcp")
local json = require("hcp.json")
local S = require("support")

local HCP = S.HCP
local q = S.q

local BWRAP_ERR
do
  local rt, err = hcp.create({ driver = "bwrap" })
  if rt then rt:close() else BWRAP_ERR = tostring(err) end
end

-- Run a shell command in `dir`; stdout, stderr, status.
local function run(dir, cmd, stdin)
  local errf = os.tmpname()
  local full = string.format("cd %s && %s 2>%s", q(dir), cmd, q(errf))
  if stdin then full = string.format("printf '%%s\\n' %s | (%s)", q(stdin), full) else full = full .. " </dev/null" end
  local out, code = S.sh(full)
  local err = S.read(errf) or ""
  os.remove(errf)
  return out, err, code
end

local function must(dir, cmd, stdin)
  local out, err, code = run(dir, cmd, stdin)
  assert(code == 0, cmd .. " exited " .. tostring(code) .. ": " .. err .. out)
  return out, err
end

-- Add ops to a scaffolded manifest, as the user edits hcp.json.
local function add_ops(file, ops)
  local m = assert(json.decode(assert(S.read(file))))
  m.ops = ops
  S.write(file, assert(json.encode(m)))
end

local function file_param(mode) return { type = "file", mode = mode } end

for _, driver in ipairs({ "local", "bwrap" }) do
  describe("hcp wrap, then files of the user's directory in and out (driver " .. driver .. ")", function()
    if driver == "bwrap" and BWRAP_ERR then
      pending("bwrap unavailable: " .. BWRAP_ERR)
      return
    end
    local home, opts

    setup(function()
      home = S.tmpdir("user-")
      S.write(home .. "/notes.txt", "pear\napple\nfig\n")
      S.write(home .. "/todo.txt", "call mum\n")
      local cfg = S.write(S.tmpdir("cfg-") .. "/hcp.lua", string.format("return { driver = %q }", driver))
      opts = " --config " .. q(cfg)
      for _, tool in ipairs({ "wc", "sort", "tar", "cp" }) do
        local out = must(home, HCP .. " wrap " .. tool)
        assert.matches("wrote " .. home:gsub("%p", "%%%0") .. "/packs/" .. tool .. "/hcp.json", out)
        assert.matches("mode +ephemeral", out)
      end
      must(home, HCP .. " validate packs")
    end)

    it("says what it guessed: sort's -o/--output are outputs", function()
      local m = json.decode(S.read(home .. "/packs/sort/hcp.json"))
      assert.same({ "--output", "-o" }, m.wrap.workspace.output_flags)
      assert.equal("ephemeral", m.wrap.workspace.mode)
    end)

    it("wc -l and sort read the user's files named positionally with in:", function()
      assert.equal("3 notes.txt\n", (must(home, HCP .. " run" .. opts .. " wc -l in:notes.txt")))
      assert.equal("apple\nfig\npear\n", (must(home, HCP .. " run" .. opts .. " sort in:notes.txt")))
    end)

    it("sort -o writes where the user asked, with the guessed output flag and with out:", function()
      must(home, HCP .. " run" .. opts .. " sort -o sorted.txt in:notes.txt")
      assert.equal("apple\nfig\npear\n", S.read(home .. "/sorted.txt"))
      must(home, HCP .. " run" .. opts .. " sort -r -o out:rev.txt in:notes.txt")
      assert.equal("pear\nfig\napple\n", S.read(home .. "/rev.txt"))
    end)

    it("tar -czf packs the user's files under their own names; -xzf brings one back", function()
      must(home, HCP .. " run" .. opts .. " tar -czf out:notes.tgz in:notes.txt in:todo.txt")
      assert.equal("notes.txt\ntodo.txt\n", (must(home, "tar -tzf notes.tgz")))
      S.mkdir(home .. "/restore")
      must(home .. "/restore", "cp ../notes.tgz . && " .. HCP .. " run --pack-dir ../packs" .. opts
        .. " tar -xzf in:notes.tgz out:todo.txt")
      assert.equal("call mum\n", S.read(home .. "/restore/todo.txt"))
      -- what it extracted and nobody asked for is named on stderr
      local _, err = must(home .. "/restore", HCP .. " run --pack-dir ../packs" .. opts .. " tar -xzf in:notes.tgz")
      assert.matches("left in the jail, not written back: notes.txt todo.txt", err)
    end)

    it("cp SRC DST copies within the user's directory", function()
      S.mkdir(home .. "/backup")
      must(home, HCP .. " run" .. opts .. " cp in:notes.txt out:backup/notes.txt")
      assert.equal("pear\napple\nfig\n", S.read(home .. "/backup/notes.txt"))
    end)

    it("a plain name gets the hint on stderr, and nothing is written", function()
      local _, err, code = run(home, HCP .. " run" .. opts .. " wc -l notes.txt")
      assert.equal(1, code)
      assert.matches('hcp: hint: argument 2 %("notes.txt"%) is not a file reference', err)
    end)

    it("ops with file parameters, added to the scaffolds, through hcp call", function()
      add_ops(home .. "/packs/wc/hcp.json", { lines = { args = { "-l", "{file}" }, params = { file = file_param("in") } } })
      add_ops(home .. "/packs/sort/hcp.json",
        { sort = { args = { "-o", "{out}", "{file}" }, params = { file = file_param("in"), out = file_param("out") } } })
      add_ops(home .. "/packs/tar/hcp.json", { pack = { args = { "-czf", "{archive}", "{file}" },
        params = { archive = file_param("out"), file = file_param("in") } } })
      add_ops(home .. "/packs/cp/hcp.json", { copy = { args = { "{src}", "{dst}" },
        params = { src = file_param("in"), dst = file_param("out") } } })
      must(home, HCP .. " validate packs")
      S.mkdir(home .. "/ops")
      local lines = table.concat({
        '{"id":1,"pack":"wc","op":"lines","params":{"file":"notes.txt"}}',
        '{"id":2,"pack":"sort","op":"sort","params":{"file":"notes.txt","out":"ops/sorted.txt"}}',
        '{"id":3,"pack":"tar","op":"pack","params":{"archive":"ops/n.tgz","file":"todo.txt"}}',
        '{"id":4,"pack":"cp","op":"copy","params":{"src":"todo.txt","dst":"ops/todo.txt"}}',
        '{"id":5,"pack":"cp","op":"copy","params":{"src":"todo.txt","dst":"ops/todo.txt"}}',
      }, "\n")
      local out = must(home, HCP .. " call" .. opts, lines)
      local res = {}
      for line in out:gmatch("[^\n]+") do
        local r = json.decode(line)
        res[r.id] = r
      end
      assert.equal("3 notes.txt\n", res[1].stdout)
      for i = 1, 4 do assert.is_true(res[i].ok, tostring(res[i].error)) end
      assert.same({ home .. "/ops/sorted.txt" }, res[2].files)
      assert.equal("apple\nfig\npear\n", S.read(home .. "/ops/sorted.txt"))
      assert.equal("todo.txt\n", (must(home, "tar -tzf ops/n.tgz")))
      assert.equal("call mum\n", S.read(home .. "/ops/todo.txt"))
      -- hcp call does not replace by default: the second copy is refused
      assert.is_false(res[5].ok)
      assert.matches("replacing is not allowed", res[5].error)
    end)
  end)
end
