-- Issue 15: the docs are executed. Every `sh` and `lua` block of README.md,
-- docs/guide.md, docs/lua-api.md and docs/agents.md runs here, and every
-- block marked as the expected output of one is compared with what it
-- printed. The marking (docs/testing.md):
--
--   <!-- not run -->   on the line before a block: illustrative (it would
--                      install, recurse into make test, or needs a service);
--                      skipped, and counted
--   <!-- output -->    on the line before a block: what the nearest run block
--                      before it prints (stdout and stderr, in order). In it,
--                      `…` stands for any text within a line, and a line that
--                      is only `…` for any number of lines (none too)
--
-- The blocks of one document run in order in one bash (so `cd`, `export`
-- and the files a block writes carry over to the next), in a temporary
-- copy: a fresh directory holding `packs-examples/` (copied) and links to
-- the checkout's `build/` and `lua/`, with HOME a fresh directory,
-- `build/bin` first on PATH, stdin /dev/null and no controlling terminal.
-- `/tmp/hcp-guide` (the guide's scratch directory) is rewritten to a private
-- directory, and back in what the blocks print. Nothing outside temporary
-- directories is touched.
local S = require("support")

local DOCS = { "README.md", "docs/guide.md", "docs/lua-api.md", "docs/agents.md" }
local RUN = { sh = "sh", lua = "lua" }
local GUIDE_TMP = "/tmp/hcp-guide"

-- The fenced blocks of a Markdown text: { lang, body, line, mark }, where
-- mark is "not run" or "output" when the line before the fence (blank lines
-- between allowed) is that comment.
local function blocks(text)
  local out, cur, last_mark = {}, nil, nil
  local n = 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if cur then
      if line:match("^%s*" .. cur.fence:gsub("%p", "%%%0") .. "%s*$") then
        cur.body = table.concat(cur.lines, "\n")
        out[#out + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line
      end
    else
      local fence, info = line:match("^%s*(```+)%s*([^%s`]*)")
      if fence then
        cur = { fence = fence, lang = info, line = n, lines = {}, mark = last_mark }
        last_mark = nil
      elseif line:match("^%s*<!%-%- not run %-%->%s*$") then
        last_mark = "not run"
      elseif line:match("^%s*<!%-%- output %-%->%s*$") then
        last_mark = "output"
      elseif line:match("%S") then
        last_mark = nil
      end
    end
  end
  assert(not cur, "an unclosed fence at line " .. tostring(cur and cur.line))
  return out
end

-- The runnable blocks, the skipped ones, and each output block attached to
-- the run block it follows.
local function plan(text, doc)
  local run, skipped = {}, {}
  for _, b in ipairs(blocks(text)) do
    if b.mark == "output" then
      local prev = run[#run]
      assert(prev and not prev.expected, string.format("%s:%d: an output block follows no run block of its own",
        doc, b.line))
      prev.expected, prev.expected_line = b.body, b.line
    elseif RUN[b.lang] and b.mark == "not run" then
      skipped[#skipped + 1] = b
    elseif RUN[b.lang] then
      run[#run + 1] = b
    else
      assert(b.mark == nil, string.format("%s:%d: <!-- %s --> marks a block that is not sh or lua", doc, b.line,
        tostring(b.mark)))
    end
  end
  return run, skipped
end

local function escape(s)
  return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0"))
end

local function lines_of(s)
  local out = {}
  for line in (s .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = (line:gsub("%s+$", "")) end
  while #out > 0 and out[#out] == "" do out[#out] = nil end
  return out
end

-- Whether the actual lines match the expected ones (`…` as described above).
local function matches(want, got)
  local pats = {}
  for i, w in ipairs(want) do
    pats[i] = w == "…" and true or ("^" .. escape(w):gsub("…", ".-") .. "$")
  end
  local memo = {}
  local function m(i, j)
    local key = i * 100000 + j
    if memo[key] ~= nil then return memo[key] end
    local r
    if i > #pats then
      r = j > #got
    elseif pats[i] == true then
      r = m(i + 1, j) or (j <= #got and m(i, j + 1))
    else
      r = j <= #got and got[j]:find(pats[i]) ~= nil and m(i + 1, j + 1)
    end
    memo[key] = r
    return r
  end
  return m(1, 1)
end

local function sh(cmd)
  local out, code = S.sh(cmd)
  assert(code == 0, cmd .. ": " .. out)
  return out
end

-- The bash script that runs every block of a document, each block's output
-- and status into $OUT/<k> and $OUT/<k>.rc.
local function script(run, dirs)
  local parts = { "cd " .. S.q(dirs.work) }
  for k, b in ipairs(run) do
    local body = b.body:gsub(escape(GUIDE_TMP), (dirs.guide:gsub("%%", "%%%%")))
    local out = S.q(dirs.out .. "/" .. k)
    if b.lang == "lua" then
      local file = S.write(dirs.out .. "/" .. k .. ".lua", body .. "\n")
      parts[#parts + 1] = string.format("{ %s %s; } >%s 2>&1 </dev/null", S.q(S.HCP_LUA),
        S.q(file), out)
    else
      parts[#parts + 1] = string.format("{\n%s\n} >%s 2>&1 </dev/null", body, out)
    end
    parts[#parts + 1] = string.format("echo $? >%s.rc", out)
  end
  return table.concat(parts, "\n") .. "\n"
end

local function workspace()
  local work = S.tmpdir("docs-")
  local dirs = { work = work .. "/checkout", out = work .. "/out", guide = work .. "/hcp-guide", home = work .. "/home" }
  for _, d in ipairs({ dirs.work, dirs.out, dirs.home }) do S.mkdir(d) end
  sh(string.format("cp -r %s %s && ln -s %s %s && ln -s %s %s", S.q(S.REPO .. "/packs-examples"), S.q(dirs.work),
    S.q(S.REPO .. "/build"), S.q(dirs.work .. "/build"), S.q(S.REPO .. "/lua"), S.q(dirs.work .. "/lua")))
  return dirs
end

local function execute(run, dirs)
  local file = S.write(dirs.out .. "/all.sh", script(run, dirs))
  local env = table.concat({ "HOME=" .. S.q(dirs.home), "PATH=" .. S.q(S.BUILD .. "/bin:/usr/local/bin:/usr/bin:/bin"),
    "LANG=C.UTF-8", "TERM=dumb", "TMPDIR=" .. S.q(dirs.out) }, " ")
  -- no controlling terminal (setsid): a block that would ask on /dev/tty is refused, never waits
  local out, code = S.sh(string.format("env -i %s timeout 300 setsid -w bash --noprofile --norc %s </dev/null 2>&1",
    env, S.q(file)))
  assert(code == 0, "the blocks' script failed (" .. tostring(code) .. "): " .. out)
end

local function result(dirs, k)
  local out = assert(S.read(dirs.out .. "/" .. k), "block " .. k .. " did not run")
  local rc = tonumber((S.read(dirs.out .. "/" .. k .. ".rc") or ""):match("%d+"))
  -- what the blocks print names the private directories as the docs do
  out = out:gsub(escape(dirs.guide), (GUIDE_TMP:gsub("%%", "%%%%"))):gsub(escape(dirs.work), "…")
  return out, rc
end

for _, doc in ipairs(DOCS) do
  local text = assert(S.read(S.REPO .. "/" .. doc), doc)
  local run, skipped = plan(text, doc)
  describe("docs that run: " .. doc, function()
    local dirs
    setup(function()
      dirs = workspace()
      execute(run, dirs)
    end)

    it(string.format("has %d blocks that run and %d marked <!-- not run -->", #run, #skipped), function()
      assert.is_true(#run > 0)
      for _, b in ipairs(skipped) do assert.is_truthy(RUN[b.lang]) end
    end)

    for k, b in ipairs(run) do
      local name = string.format("%s block at line %d%s", b.lang, b.line,
        b.expected and string.format(" prints the output at line %d", b.expected_line) or " runs")
      it(name, function()
        local out, rc = result(dirs, k)
        assert(rc == 0, string.format("%s:%d exited %s:\n%s", doc, b.line, tostring(rc), out))
        -- bash's own complaints (a command not found, a syntax error) are failures too
        assert(not out:find("all%.sh: line %d+: "), string.format("%s:%d: bash said:\n%s", doc, b.line, out))
        if b.expected then
          local want, got = lines_of(b.expected), lines_of(out)
          assert(matches(want, got), string.format("%s:%d printed:\n%s\n-- but line %d expects:\n%s", doc, b.line,
            table.concat(got, "\n"), b.expected_line, table.concat(want, "\n")))
        end
      end)
    end
  end)
end

describe("docs that run: the matcher", function()
  it("… matches text within a line, a line of … any number of lines", function()
    assert.is_true(matches({ "a … c" }, { "a bb c" }))
    assert.is_false(matches({ "a … c" }, { "a bb d" }))
    assert.is_true(matches({ "x", "…", "y" }, { "x", "y" }))
    assert.is_true(matches({ "x", "…", "y" }, { "x", "1", "2", "y" }))
    assert.is_false(matches({ "x", "y" }, { "x", "1", "y" }))
    assert.is_true(matches({ '{"ms":…}' }, { '{"ms":3.2}' }))
    assert.is_false(matches({ "50%" }, { "5" }))
  end)

  it("attaches an output block to the run block before it and counts the skipped", function()
    local text = table.concat({ "<!-- not run -->", "```sh", "make install", "```", "```sh", "echo hi", "```",
      "text", "<!-- output -->", "```", "hi", "```", "```json", "{}", "```" }, "\n")
    local run, skipped = plan(text, "t.md")
    assert.equal(1, #skipped)
    assert.equal(1, #run)
    assert.equal("hi", run[1].expected)
    assert.has_error(function() plan("<!-- output -->\n```\nx\n```\n", "t.md") end)
  end)
end)

describe("hcp --help points at the docs as installed", function()
  it("from the checkout: its docs/", function()
    local out = sh(S.q(S.HCP) .. " --help")
    assert.matches("Docs: man hcp; guide.md, cli.md, lua%-api.md, agents.md and spec/ in " .. escape(S.REPO .. "/docs")
      .. "%.\n", out)
  end)

  it("after make install: PREFIX/share/doc/hcp-lua, which holds README.md and docs/ (spec/ too)", function()
    local prefix = S.tmpdir("prefix-")
    sh(string.format("cd %s && make -s install PREFIX=%s 2>&1", S.q(S.REPO), S.q(prefix)))
    local doc = prefix .. "/share/doc/hcp-lua"
    for _, f in ipairs({ "README.md", "guide.md", "cli.md", "lua-api.md", "agents.md", "testing.md", "spec/workspace.md" }) do
      assert.equal(S.read(S.REPO .. "/" .. (f == "README.md" and f or "docs/" .. f)), S.read(doc .. "/" .. f), f)
    end
    local out = sh("cd / && " .. S.q(prefix .. "/bin/hcp") .. " --help")
    assert.matches("Docs: man hcp; guide.md, cli.md, lua%-api.md, agents.md and spec/ in " .. escape(doc) .. "%.\n", out)
    assert.is_nil(out:find(S.REPO, 1, true))
  end)
end)
