-- Shell completion for hcp and hcpx: generated from the argparse definition
-- by `hcp completion bash|zsh`, built into build/ by make, installed by make
-- install. The bash script is run for real: sourced in bash, its completion
-- function called with COMP_WORDS/COMP_CWORD as bash sets them on TAB.
local S = require("support")
local core = require("hcp.core")

local HCP = S.HCP
local BASH_FILE = S.BUILD .. "/share/bash-completion/completions/hcp"
local ZSH_FILE = S.BUILD .. "/share/zsh/site-functions/_hcp"
local q = S.q

local function has(cmd)
  local _, code = S.sh("command -v " .. cmd .. " >/dev/null 2>&1")
  return code == 0
end

local function set_of(words)
  local t = {}
  for _, w in ipairs(words) do t[w] = true end
  return t
end

local function words_of(s)
  local t = {}
  for w in s:gmatch("%S+") do t[#t + 1] = w end
  return t
end

-- The candidates bash offers for the command line `words` (the last word is
-- the one being completed), from the completion file `file`.
local function bash_complete(file, words)
  local quoted = {}
  for i, w in ipairs(words) do quoted[i] = q(w) end
  local script = string.format([[
source %s || exit 97
COMP_WORDS=(%s); COMP_CWORD=%d
fn=$(complete -p %s | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
"$fn" %s "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%%s\n' "${COMPREPLY[@]}"
]], q(file), table.concat(quoted, " "), #words - 1, q(words[1]), q(words[1]))
  local out, code = S.sh("bash --norc --noprofile -c " .. q(script) .. " 2>&1")
  assert.equal(0, code, out)
  return words_of(out)
end

-- The commands and long options `hcp [CMD] --help` prints.
local function help_commands()
  local out = S.sh(q(HCP) .. " --help")
  local cmds, inside = {}, false
  for line in out:gmatch("[^\n]*") do
    if line == "Commands:" then inside = true
    elseif inside and line:match("^%s*$") then inside = false
    elseif inside then cmds[#cmds + 1] = line:match("^%s+([a-z]+)") end
  end
  return cmds
end

local function help_options(cmd)
  local out = S.sh(q(HCP) .. " " .. cmd .. " --help")
  local opts, seen = {}, {}
  for opt in (out:match("\nOptions:\n(.*)$") or ""):gmatch("%-%-[a-z][a-z%-]*") do
    if not seen[opt] then seen[opt] = true; opts[#opts + 1] = opt end
  end
  return opts
end

describe("hcp completion", function()
  it("is a command of hcp --help, next to those of the contract", function()
    local cmds = set_of(help_commands())
    for _, c in ipairs({ "run", "call", "list", "validate", "doctor", "wrap", "completion" }) do
      assert.is_true(cmds[c], c)
    end
  end)

  it("make builds the bash and zsh scripts that hcp completion prints", function()
    assert.equal(S.sh(q(HCP) .. " completion bash"), S.read(BASH_FILE))
    assert.equal(S.sh(q(HCP) .. " completion zsh"), S.read(ZSH_FILE))
  end)

  it("refuses another shell or no shell as a usage error", function()
    local out, code = S.sh(q(HCP) .. " completion fish 2>&1")
    assert.equal(2, code)
    assert.matches("argument 'shell' must be one of 'bash', 'zsh'", out)
    out, code = S.sh(q(HCP) .. " completion 2>&1")
    assert.equal(2, code)
    assert.matches("missing argument 'shell'", out)
  end)
end)

describe("bash completion", function()
  if not has("bash") then
    pending("bash is not installed")
    return
  end

  it("is valid bash and registers hcp and hcpx", function()
    local out, code = S.sh("bash --norc -c " .. q("source " .. q(BASH_FILE) .. " && complete -p hcp hcpx") .. " 2>&1")
    assert.equal(0, code, out)
    assert.matches("%-F _hcp hcp\n", out)
    assert.matches("%-F _hcpx hcpx\n", out)
  end)

  it("offers every command of hcp --help after hcp, and only matching ones for a prefix", function()
    local offered = bash_complete(BASH_FILE, { "hcp", "" })
    assert.same(help_commands(), offered)
    assert.same({ "run" }, bash_complete(BASH_FILE, { "hcp", "ru" }))
    assert.same({ "validate" }, bash_complete(BASH_FILE, { "hcp", "va" }))
  end)

  it("offers the options of run, and of each command, as its --help lists them", function()
    local offered = set_of(bash_complete(BASH_FILE, { "hcp", "run", "--" }))
    for _, o in ipairs({ "--json", "--pack-dir", "--allow-bin", "--config", "--no-sandbox", "--native-local", "--help" }) do
      assert.is_true(offered[o], o)
    end
    for _, c in ipairs(help_commands()) do
      offered = set_of(bash_complete(BASH_FILE, { "hcp", c, "--" }))
      for _, o in ipairs(help_options(c)) do assert.is_true(offered[o], "hcp " .. c .. " " .. o) end
    end
    assert.same({ "--json" }, bash_complete(BASH_FILE, { "hcp", "validate", "--j" }))
  end)

  it("offers the shells after hcp completion, and files after --config", function()
    assert.same({ "bash", "zsh" }, bash_complete(BASH_FILE, { "hcp", "completion", "" }))
    local dir = S.tmpdir("compl-")
    S.write(dir .. "/site-config.lua", "return {}\n")
    assert.same({ dir .. "/site-config.lua" }, bash_complete(BASH_FILE, { "hcp", "list", "--config", dir .. "/site" }))
  end)

  it("completes hcpx's options too", function()
    local offered = set_of(bash_complete(BASH_FILE, { "hcpx", "--" }))
    for _, o in ipairs({ "--json", "--pack-dir", "--version" }) do assert.is_true(offered[o], o) end
  end)
end)

describe("zsh completion", function()
  if not has("zsh") then
    pending("zsh is not installed")
    return
  end

  -- The completion functions run with zsh's completion builtins replaced by
  -- stubs that print what they were given: _describe the command list,
  -- _arguments its specs.
  local function zsh_run(service, words)
    local script = string.format([[
_arguments() { print -rl -- "ARGS" "$@"; return 1 }
_describe() { print -rl -- "DESCRIBE" "${(@P)2}"; return 0 }
_files() { : }
service=%s; words=(%s)
source %s
_hcp_cmds 2>/dev/null
]], service, words, q(ZSH_FILE))
    local out, code = S.sh("zsh -f -c " .. q(script) .. " 2>&1")
    assert.equal(0, code, out)
    return out
  end

  it("is valid zsh, autoloadable as _hcp for hcp and hcpx", function()
    local out, code = S.sh("zsh -n " .. q(ZSH_FILE) .. " 2>&1")
    assert.equal(0, code, out)
    assert.equal("#compdef hcp hcpx\n", S.read(ZSH_FILE):match("^[^\n]*\n"))
  end)

  it("describes every command of hcp --help, and gives run its options", function()
    local out = zsh_run("hcp", "run")
    for _, c in ipairs(help_commands()) do assert.matches("\n" .. c .. ":", out, 1, true) end
    for _, o in ipairs(help_options("run")) do
      assert.truthy(out:find('\n' .. o .. "[", 1, true) or out:find("\n*" .. o .. "[", 1, true), o)
    end
  end)

  it("dispatches on the command name: hcpx gets hcpx's options", function()
    local out = zsh_run("hcpx", "")
    assert.truthy(out:find("\n--version[", 1, true))
    assert.truthy(out:find("\n--json[Print the result envelope", 1, true))
  end)
end)

describe("make install", function()
  it("puts the completion where bash-completion and zsh look, and uninstall removes it", function()
    local prefix = S.tmpdir("prefix-")
    local out, code = S.sh(string.format("cd %s && make -s install PREFIX=%s 2>&1", q(S.REPO), q(prefix)))
    assert.equal(0, code, out)
    local bash = prefix .. "/share/bash-completion/completions/hcp"
    assert.equal(S.read(BASH_FILE), S.read(bash))
    assert.equal("link", core.kind(prefix .. "/share/bash-completion/completions/hcpx"))
    assert.equal(S.read(BASH_FILE), S.read(prefix .. "/share/bash-completion/completions/hcpx"))
    assert.equal(S.read(ZSH_FILE), S.read(prefix .. "/share/zsh/site-functions/_hcp"))
    out, code = S.sh(string.format("cd %s && make -s uninstall PREFIX=%s 2>&1", q(S.REPO), q(prefix)))
    assert.equal(0, code, out)
    assert.is_nil(core.kind(bash))
    assert.is_nil(core.kind(prefix .. "/share/bash-completion/completions/hcpx"))
    assert.is_nil(core.kind(prefix .. "/share/zsh/site-functions/_hcp"))
  end)
end)
