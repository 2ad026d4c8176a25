-- Keeps the documentation true to the commands: every option that
-- `hcp COMMAND --help` and hcp-lua's usage print is documented in
-- docs/cli.md and the man pages, the README starts with the two make
-- targets, and every relative link in the Markdown docs leads to a file.
local S = require("support")
local core = require("hcp.core")

local HCP, HCP_LUA = S.HCP, S.HCP_LUA

-- Commands of contract §6; the specs below read the real list from
-- `hcp --help` and only insist that these are in it.
local CONTRACT_COMMANDS = { "run", "call", "list", "validate", "doctor", "wrap" }
local HCP_LUA_OPTIONS = { "-e", "-l", "-i", "-v", "-E", "-W" }

local q = S.q

local function read_doc(rel)
  local text = S.read(S.REPO .. "/" .. rel)
  assert(text, rel .. " is missing")
  return text
end

-- roff source as plain text: `\-` is a hyphen, font changes and `\&` vanish.
local function roff_plain(text)
  text = text:gsub("\\%-", "-"):gsub("\\%(hy", "-")
  text = text:gsub("\\f%[[^%]]*%]", ""):gsub("\\f%(..", ""):gsub("\\f.", "")
  text = text:gsub("\\&", "")
  return text
end

-- Whether `tok` occurs in `text` as a whole word: the characters on either
-- side are not letters, digits or hyphens (so `--dir` is not found inside
-- `--pack-dir`, nor `--json` inside `--json-file`).
local function has_token(text, tok)
  local init = 1
  while true do
    local s, e = text:find(tok, init, true)
    if not s then return false end
    local before = s > 1 and text:sub(s - 1, s - 1) or ""
    local after = text:sub(e + 1, e + 1)
    if not before:match("[%w%-]") and not after:match("[%w%-]") then return true end
    init = s + 1
  end
end

local function missing_from(text, tokens)
  local out = {}
  for _, t in ipairs(tokens) do
    if not has_token(text, t) then out[#out + 1] = t end
  end
  return out
end

-- The lines of one section ("Options:", "Commands:") of an argparse help:
-- from its title to the next title or blank line (the epilog is not in it).
local function help_section(help, title)
  local lines, inside = {}, false
  for line in (help .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%S.*:$") then
      inside = line == title .. ":"
    elseif line:match("^%s*$") then
      inside = false
    elseif inside then
      lines[#lines + 1] = line
    end
  end
  return lines
end

local function help_of(args)
  local out, code = S.sh("cd " .. q(S.REPO) .. " && " .. HCP .. " " .. args .. " --help 2>&1")
  assert(code == 0, "hcp " .. args .. " --help exited " .. tostring(code) .. ": " .. out)
  return out
end

-- Every `--long-option` named in the Options section of a help text.
local function long_options(help)
  local seen, out = {}, {}
  for _, line in ipairs(help_section(help, "Options")) do
    for opt in line:gmatch("%-%-[a-z][a-z%-]*") do
      opt = opt:gsub("%-+$", "")
      if not seen[opt] then
        seen[opt] = true
        out[#out + 1] = opt
      end
    end
  end
  return out
end

local function commands()
  local out = {}
  for _, line in ipairs(help_section(help_of(""), "Commands")) do
    local name = line:match("^%s+([a-z][a-z%-]*)%s")
    if name then out[#out + 1] = name end
  end
  return out
end

local function hcp_lua_options()
  -- there is no --help: an unknown option prints the usage list on stderr
  local out = S.sh("cd " .. q(S.REPO) .. " && " .. HCP_LUA .. " -Z 2>&1")
  local opts, seen = {}, {}
  for line in out:gmatch("[^\n]+") do
    local opt = line:match("^%s+(%-%a)%s")
    if opt and not seen[opt] then
      seen[opt] = true
      opts[#opts + 1] = opt
    end
  end
  return opts
end

describe("docs: hcp commands and options", function()
  local cli_md = read_doc("docs/cli.md")
  local hcp_1 = roff_plain(read_doc("docs/man/hcp.1"))
  local cmds = commands()

  it("hcp --help lists the commands of the contract", function()
    assert.same({}, missing_from(table.concat(cmds, " "), CONTRACT_COMMANDS))
  end)

  it("every command is documented in docs/cli.md and hcp.1, and so is hcpx", function()
    for _, c in ipairs(cmds) do
      assert.is_true(has_token(cli_md, "hcp " .. c), "docs/cli.md lacks 'hcp " .. c .. "'")
      assert.is_true(has_token(hcp_1, "hcp " .. c), "docs/man/hcp.1 lacks 'hcp " .. c .. "'")
    end
    assert.is_true(has_token(cli_md, "hcpx"), "docs/cli.md lacks hcpx")
    assert.is_true(has_token(hcp_1, "hcpx"), "docs/man/hcp.1 lacks hcpx")
  end)

  it("every option of hcp --help is documented", function()
    local opts = long_options(help_of(""))
    assert.is_true(#opts >= 2, "no options parsed from hcp --help")
    assert.same({}, missing_from(cli_md, opts), "missing from docs/cli.md")
    assert.same({}, missing_from(hcp_1, opts), "missing from docs/man/hcp.1")
  end)

  for _, c in ipairs(cmds) do
    it("every long option of hcp " .. c .. " --help is in docs/cli.md and hcp.1", function()
      local opts = long_options(help_of(c))
      assert.is_true(#opts >= 1, "no options parsed from hcp " .. c .. " --help")
      assert.same({}, missing_from(cli_md, opts), "hcp " .. c .. ": missing from docs/cli.md")
      assert.same({}, missing_from(hcp_1, opts), "hcp " .. c .. ": missing from docs/man/hcp.1")
    end)
  end

  it("the long-option parser sees whole options only", function()
    assert.same({ "--pack-dir", "--json" },
      long_options("Usage: x\n\nOptions:\n   --pack-dir <dir>   a dir.\n   --json   Print JSON.\n\nepilog --not-this\n"))
    assert.is_false(has_token("use --pack-dir here", "--dir"))
    assert.is_false(has_token("the --json-file flag", "--json"))
    assert.is_true(has_token("`--json`", "--json"))
    assert.is_true(has_token(roff_plain(".BR \\fB\\-\\-json\\fR ,"), "--json"))
  end)
end)

describe("docs: hcp-lua options", function()
  it("hcp-lua's usage lists -e -l -i -v -E -W, and each is in docs/cli.md and hcp-lua.1", function()
    local opts = hcp_lua_options()
    assert.same({}, missing_from(table.concat(opts, " "), HCP_LUA_OPTIONS), "hcp-lua usage")
    assert.same({}, missing_from(read_doc("docs/cli.md"), opts), "missing from docs/cli.md")
    assert.same({}, missing_from(roff_plain(read_doc("docs/man/hcp-lua.1")), opts), "missing from docs/man/hcp-lua.1")
  end)
end)

describe("docs: man pages", function()
  for _, page in ipairs({ "docs/man/hcp.1", "docs/man/hcp-lua.1" }) do
    it(page .. " renders with groff -man -ww and no warning", function()
      if S.lacks("groff") then pending(page .. ": " .. S.lacks("groff")) return end
      local out, code = S.sh("cd " .. q(S.REPO) .. " && groff -man -Tutf8 -ww " .. page .. " 2>&1 >/dev/null")
      assert.equal(0, code)
      assert.equal("", out)
    end)
  end
end)

describe("docs: README", function()
  it("the first fenced code block installs make, then has make demo and make test", function()
    local readme = read_doc("README.md")
    local block = readme:match("\n?```[^\n]*\n(.-)\n```")
    assert.is_string(block, "README.md has no fenced code block")
    local lines = {}
    for l in (block .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
    -- a fresh Debian has no make, and apt-get install fails before apt-get update
    assert.matches("^apt%-get update && apt%-get install %-y [^#]*make", lines[1])
    assert.matches("sudo apt%-get update && sudo apt%-get install", lines[1], 1)   -- the line for a user
    assert.matches("^make demo", lines[2])
    assert.matches("^make test", lines[3])
  end)
end)

-- Markdown without fenced blocks and code spans, where `[x](y)` is code.
local function strip_code(md)
  local out, fenced = {}, false
  for line in (md .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%s*```") or line:match("^%s*~~~") then
      fenced = not fenced
    elseif not fenced then
      out[#out + 1] = (line:gsub("``.-``", ""):gsub("`[^`]*`", ""))
    end
  end
  return table.concat(out, "\n")
end

-- Relative link targets of a Markdown text, without anchors or queries.
local function relative_links(md)
  local targets = {}
  local text = strip_code(md)
  local function add(t)
    t = t:match("^<(.*)>$") or t
    if t == "" or t:match("^#") or t:match("^%a[%w+.%-]*:") then return end
    t = t:gsub("[#?].*$", "")
    if t ~= "" then targets[#targets + 1] = t end
  end
  for t in text:gmatch("%]%(%s*(<?[^%s%)]+>?)[^%)]*%)") do add(t) end
  for t in text:gmatch("\n%s*%[[^%]]+%]:%s*(%S+)") do add(t) end
  return targets
end

describe("docs: links", function()
  local files = { "README.md" }
  for _, name in ipairs(core.listdir(S.REPO .. "/docs") or {}) do
    if name:match("%.md$") then files[#files + 1] = "docs/" .. name end
  end
  table.sort(files)

  it("the link parser finds relative targets and skips code, URLs and anchors", function()
    assert.same({ "a.md", "spec/b.md", "c/" }, relative_links(
      "[a](a.md#x) [u](https://x.org/y.md) [h](#top) `[no](code.md)`\n```\n[no](fenced.md)\n```\n"
      .. "[b](<spec/b.md> \"title\")\n[ref]: c/\n"))
  end)

  it("docs/guide.md links to the sandbox and workspace specs, under 'Files in and out'", function()
    local guide = read_doc("docs/guide.md")
    assert.truthy(guide:find("\n## Files in and out\n", 1, true), "no 'Files in and out' section")
    local links = {}
    for _, t in ipairs(relative_links(guide)) do links[t] = true end
    assert.is_true(links["spec/sandbox.md"], "guide.md does not link spec/sandbox.md")
    assert.is_true(links["spec/workspace.md"], "guide.md does not link spec/workspace.md")
  end)

  for _, rel in ipairs(files) do
    it("every relative link in " .. rel .. " exists", function()
      local dir = (S.REPO .. "/" .. rel):match("^(.*)/[^/]*$")
      local broken = {}
      for _, t in ipairs(relative_links(read_doc(rel))) do
        local path = t:sub(1, 1) == "/" and S.REPO .. t or dir .. "/" .. t
        if not core.kind(path) then broken[#broken + 1] = t end
      end
      assert.same({}, broken, rel .. ": links to missing files")
    end)
  end
end)
