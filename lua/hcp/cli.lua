--- The `hcp` and `hcpx` commands (contract §6). `hcp-lua` dispatches here
--- when it is invoked under either name; `main` returns the exit status.
---
--- Exit statuses: a call's own status for `run`/`hcpx` (127 or 126 with a
--- one-line message for refusals; 1 when the child exited 0 but its outputs
--- could not be written back), 126 for a bad configuration, 1 for problems
--- found (`validate`) or a failed command, 2 for a usage error.
---@class hcp.cli
local M = {}

local hcp = require("hcp")
local core = require("hcp.core")
local config = require("hcp.config")
local envelope = require("hcp.envelope")
local manifest = require("hcp.manifest")
local json = require("hcp.json")

local stdout, stderr = io.stdout, io.stderr
local prog = "hcp"

local function say(fmt, ...)
  stderr:write(prog, ": ", string.format(fmt, ...), "\n")
end

-- `run`'s options before PACK, by kind: "list" (a value, repeatable),
-- "value" (a value, once), "flag" (once). Those with a value are what finds
-- where PACK starts, after which every argument belongs to the child
-- verbatim (even `--json` or `-n`); all of them, what fast_run parses.
local RUN_OPTIONS = { ["--pack-dir"] = "list", ["--allow-bin"] = "list", ["--config"] = "value",
  ["--audit"] = "value", ["--out-dir"] = "value", ["--no-sandbox"] = "flag", ["--native-local"] = "flag",
  ["--replace"] = "flag", ["--no-replace"] = "flag", ["--allow-hidden"] = "flag", ["--json"] = "flag" }

local function common_options(cmd, no_allow_bin)
  cmd:option("--pack-dir", "Directory of packs, or one pack root (repeatable; default $HCP_PACK_PATH, then ./packs).")
    :count("*"):argname("<dir>")
  if not no_allow_bin then
    cmd:option("--allow-bin", "Add a bin to the allow-list (repeatable; a bare name or an absolute path).")
      :count("*"):argname("<bin>")
  end
  cmd:option("--config", "A Lua file returning the options table of hcp.create (default $HCP_CONFIG).")
    :argname("<file.lua>")
  cmd:option("--audit", "Append one JSON line per call to this file (the audit log; no arguments or output in it).")
    :argname("<file>")
  cmd:flag("--no-sandbox", "Together with --native-local: leave sandbox mode.")
  cmd:flag("--native-local", "Together with --no-sandbox: run bins from the host PATH (a trust decision).")
end

-- issue 11: where a call's file references go (run, hcpx, call)
local function file_options(cmd, replacing)
  cmd:option("--out-dir", "Where relative file-flag values are staged from and outputs written back "
    .. "(default: the current directory).")
    :argname("<dir>")
  cmd:flag("--replace", "Let write-back replace existing files under the out dir"
    .. (replacing and " (the default for run)." or "."))
  cmd:flag("--no-replace", "Refuse to replace existing files under the out dir"
    .. (replacing and "." or " (the default for call)."))
  cmd:flag("--allow-hidden", "Let file references go through hidden names such as .ssh or .git.")
end

-- hcpx is `hcp run`: its own parser, so its usage reads "hcpx PACK …"
local function build_hcpx_parser()
  local p = require("argparse")("hcpx", "Short for `hcp run`: one live call of PACK with ARGS.")
  p:flag("--version", "Print the version and exit."):action(function()
    stdout:write(string.format("hcpx (hcp-lua) %s\n", hcp.version))
    os.exit(0)
  end)
  common_options(p)
  file_options(p, true)
  p:flag("--json", "Print the result envelope instead of passing output through.")
  p:argument("pack", "The pack to call.")
  p:argument("args", "Arguments for the pack's bin, after its wrap.args (taken verbatim)."):args("*")
  return p
end

--- Where the documentation is: PREFIX/share/doc/hcp-lua after `make
--- install` (the modules are in PREFIX/share/lua/5.4/hcp), else the docs/
--- of the checkout these modules are in; nil when neither is found.
---@return string?
function M.docs_dir()
  local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
  if not here then return nil end
  local prefix = here:match("^(.*)/share/lua/5%.4/hcp$")
  if prefix and core.kind(prefix .. "/share/doc/hcp-lua/guide.md") == "file" then
    return manifest.absolute(prefix .. "/share/doc/hcp-lua")
  end
  local real = core.realpath(manifest.absolute(here)) -- a module found through a relative package.path
  local repo = real and real:match("^(.*)/lua/hcp$")
  if repo and core.kind(repo .. "/docs/guide.md") == "file" then return repo .. "/docs" end
  return nil
end

-- The commands, in the order --help lists them: each adds itself to p.
local COMMANDS = {
  { "run", function(p)
    local run = p:command("run", "One live call; a piped stdin goes to the child, its output passes through, "
      .. "and its exit status is hcp's.")
    common_options(run)
    file_options(run, true)
    run:flag("--json", "Print the result envelope instead of passing output through.")
    run:argument("pack", "The pack to call.")
    run:argument("args", "Arguments for the pack's bin, after its wrap.args (taken verbatim).")
      :args("*")
  end },
  { "call", function(p)
    local call = p:command("call", "Envelopes in, envelopes out: one JSON document per line.")
    common_options(call)
    file_options(call, false)
    call:argument("file", "File of request envelopes, or - for stdin (the default)."):args("?")
  end },
  { "list", function(p)
    local list = p:command("list", "The loaded packs: bins as resolved, workspace modes, source dirs.")
    common_options(list)
    list:flag("--json", "Print a JSON array.")
  end },
  { "validate", function(p)
    local validate = p:command("validate", "Check manifests and list every problem; exit 1 if any.")
    validate:flag("--json", "Print one JSON object: {ok, packs, problems}.")
    validate:argument("dir", "Pack roots, or folders of packs."):args("+")
  end },
  { "doctor", function(p)
    local doctor = p:command("doctor", "What isolation this host supports and what the runtime uses.")
    common_options(doctor)
    doctor:flag("--json", "Print JSON.")
  end },
  { "tools", function(p)
    local tools = p:command("tools", "The tools an agent gets: one per op the policy allows, with its JSON Schema.")
    common_options(tools)
    tools:flag("--json", "Print the tool list as MCP's tools/list returns it.")
  end },
  { "mcp", function(p)
    local mcp = p:command("mcp", "An MCP server on stdin/stdout: every allowed op as a typed, sandboxed tool.")
    common_options(mcp)
  end },
  { "wrap", function(p)
    local wrap = p:command("wrap", "Scaffold a pack for an existing CLI (§10.6).")
    common_options(wrap, true) -- the bin being wrapped is allowed for its --help alone
    wrap:argument("bin", "The binary: a bare name (resolved like sandbox mode would) or an absolute path.")
    wrap:option("--name", "Pack name (default: derived from the bin).")
    wrap:option("--dir", "Directory of the new pack (default: <first pack dir>/<name>).")
    wrap:flag("--json", "Print one JSON object: {ok, file, dir, name, bin, description, mode, file_flags, "
      .. "output_flags} or {ok, error}.")
  end },
  { "completion", function(p)
    local completion = p:command("completion", "Print the shell completion script of hcp and hcpx.")
    completion:argument("shell", "The shell: bash or zsh."):choices({ "bash", "zsh" })
  end },
}

-- The parser of hcp; with `only` (the command the words start with), that
-- command alone: a command's usage and errors do not name the others, and
-- `hcp run` then does not build eight parsers it never uses (~0.4 ms).
local function build_parser(only)
  local docs = M.docs_dir()
  local p = require("argparse")(prog, "Run HCP packs: real command-line tools behind a sandbox.")
    :epilog("Sandbox mode is the default; only --no-sandbox and --native-local together leave it.\n"
      .. "Docs: man hcp" .. (docs and ("; guide.md, cli.md, lua-api.md, agents.md and spec/ in " .. docs) or "")
      .. ".")
  p:flag("--version", "Print the version and exit."):action(function()
    stdout:write(string.format("%s (hcp-lua) %s\n", prog, hcp.version))
    os.exit(0)
  end)
  p:command_target("command")
  p:require_command(false)
  local known = false
  for _, c in ipairs(COMMANDS) do known = known or c[1] == only end
  for _, c in ipairs(COMMANDS) do
    if not known or c[1] == only then c[2](p) end
  end
  return p
end

-- `adjust` (optional) changes the options before the runtime is made.
local function open_runtime(a, adjust)
  local opts, err = config.options(a)
  if not opts then return nil, err end
  local rt, cerr = hcp.create(adjust and adjust(opts) or opts)
  if not rt then return nil, cerr end
  -- said from the mode in force, whichever of the flags and the config file asked
  if rt.mode == "native-local" then
    say("native-local mode: bins resolve on the host PATH and the host-path rule is off")
  elseif a.no_sandbox or a.native_local or opts.sandbox == false or opts.native_local then
    say("sandbox mode stays on: sandbox = false and native_local = true are only honoured together")
  end
  for _, p in ipairs(rt:problems()) do
    stderr:write(manifest.format_problem(p), "\n")
  end
  return rt
end

local function cmd_run(a)
  a.replace_default = true -- a rerun of `qrencode -o out.png` replaces out.png, as the tool itself would
  -- only the pack called is loaded: the other manifests are not validated
  -- (start-up stays flat in their number), their roots still protected
  local rt, err = open_runtime(a, function(opts)
    opts.packs = { a.pack }
    return opts
  end)
  if not rt then say("%s", err); return 126 end
  local req = { pack = a.pack, args = a.args }
  -- a piped stdin goes to the child; a terminal does not (the call would
  -- wait on the user, and the child must never hold our terminal)
  if not core.isatty(0) then req.stdin = io.stdin:read("a") end
  local res
  if a.json then
    res = rt:call(req)
    stdout:write(envelope.encode(res), "\n")
  else
    -- the child's output passes through as it comes, by way of our pipes:
    -- the child never holds this process's terminal
    stdout:flush()
    res = rt:call(req, { tee_stdout = 1, tee_stderr = 2 })
    -- a refusal, or a child that exited 0 but whose outputs could not be
    -- written back: say why (a child's own failure speaks for itself)
    if res.stdout == nil or (not res.ok and res.exit == 0) then say("%s", res.error) end
    -- issue 15: why a name was not found, and what stayed in the jail
    if res.hint then say("hint: %s", res.hint) end
    if res.left_in_jail then
      say("left in the jail, not written back: %s (name a file with out:PATH to get it)",
        table.concat(res.left_in_jail, " "))
    end
  end
  rt:close()
  -- everything this command opened is closed: the process may end without
  -- collecting its Lua state (see hcp_lua.c, pcli), unless a cgroup is
  -- still to be removed
  M.closed_all = not require("hcp.isolation").cleanup_pending()
  if not res.ok and res.exit == 0 then return 1 end
  return res.exit or 126
end

local function cmd_call(a)
  local rt, err = open_runtime(a)
  if not rt then say("%s", err); return 126 end
  local fh = io.stdin
  if a.file and a.file ~= "-" then
    local f, ferr = io.open(a.file, "rb")
    if not f then say("%s", ferr); rt:close(); return 1 end
    fh = f
  end
  for line in fh:lines() do
    if line:match("%S") then
      local v, derr = envelope.decode(line)
      local res = v == nil and envelope.refusal(nil, 126, derr, rt.mode) or rt:call(v)
      stdout:write(envelope.encode(res), "\n")
      stdout:flush() -- an agent keeps the pipe open and waits for each line
    end
  end
  if fh ~= io.stdin then fh:close() end
  rt:close()
  return 0
end

local function cmd_list(a)
  local rt, err = open_runtime(a)
  if not rt then say("%s", err); return 126 end
  local packs = rt:packs()
  if a.json then
    local out = json.array()
    for _, p in ipairs(packs) do
      out[#out + 1] = { name = p.name, bin = p.bin, path = p.path or json.null, root = p.root,
        workspace = p.workspace, ops = json.array(p.ops), sandbox = rt.mode }
    end
    stdout:write(json.encode(out), "\n")
  else
    stdout:write(string.format("mode: %s\n", rt.mode))
    for _, p in ipairs(packs) do
      stdout:write(string.format("%-14s %-26s %-10s %s\n", p.name, p.path or ("(not found) " .. p.bin),
        p.workspace, p.root))
    end
  end
  rt:close()
  return 0
end

-- What `hcp validate` found under `dirs`: the manifests that loaded and
-- every problem, in the order they were met.
local function validate_dirs(dirs)
  local packs, problems = {}, {}
  local function add(list) for _, p in ipairs(list) do problems[#problems + 1] = p end end
  for _, dir in ipairs(dirs) do
    local roots, dprobs = manifest.discover(dir)
    add(dprobs)
    if #roots == 0 and #dprobs == 0 then
      add({ { file = dir, field = "", message = "no hcp.json here or in its direct subdirectories" } })
    end
    for _, root in ipairs(roots) do
      local pack, probs = manifest.load(root)
      add(probs)
      if pack then packs[#packs + 1] = { name = pack.name, file = pack.file, root = root } end
    end
  end
  return packs, problems
end

local function cmd_validate(a)
  local packs, problems = validate_dirs(a.dir)
  if a.json then
    local jp = json.array()
    for i, p in ipairs(problems) do jp[i] = { file = p.file, field = p.field, message = p.message } end
    stdout:write(json.encode({ ok = #problems == 0, packs = json.array(packs), problems = jp }), "\n")
  else
    for _, p in ipairs(problems) do stderr:write(manifest.format_problem(p), "\n") end
    for _, p in ipairs(packs) do stdout:write(string.format("ok %s (%s)\n", p.name, p.file)) end
  end
  return #problems == 0 and 0 or 1
end

local function cmd_doctor(a)
  local opts, err = config.options(a)
  if not opts then say("%s", err); return 126 end
  local d = hcp.doctor(opts)
  if a.json then
    local layers = json.array()
    for i, l in ipairs(d.layers) do
      layers[i] = { name = l.name, available = l.available, used = l.used, reason = l.reason, detail = l.detail }
    end
    stdout:write(json.encode({ version = d.version, core = d.core, mode = d.mode, driver = d.driver,
      layers = layers }), "\n")
  else
    stdout:write(string.format("hcp-lua %s (core %s): mode %s, driver %s\n", d.version, d.core, d.mode, d.driver))
    for _, l in ipairs(d.layers) do
      local state = l.used and "used" or (l.available and "available" or "unavailable")
      stdout:write(string.format("  %-13s %-12s %s\n", l.name, state, l.reason or l.detail or ""))
    end
  end
  return 0
end

-- ---- hcp tools, hcp mcp -------------------------------------------------

local function param_line(name, prop, required)
  local ty = prop.type == "array" and "array of strings" or prop.type
  local extra = {}
  if not required then extra[#extra + 1] = "optional" end
  if prop.default ~= nil then extra[#extra + 1] = "default " .. json.encode(prop.default) end
  if prop.enum then extra[#extra + 1] = "one of " .. json.encode(prop.enum) end
  return string.format("    %-12s %s%s%s\n", name, ty, #extra > 0 and (", " .. table.concat(extra, ", ")) or "",
    prop.description and ("  " .. prop.description) or "")
end

local function cmd_tools(a)
  local rt, err = open_runtime(a)
  if not rt then say("%s", err); return 126 end
  local list = rt:tools()
  local tools = require("hcp.tools")
  if a.json then
    local out = json.array()
    for i, t in ipairs(list) do out[i] = tools.wire(t) end
    stdout:write(json.encode({ tools = out }), "\n")
  else
    for _, t in ipairs(list) do
      local marks = {}
      if t.confirm then marks[#marks + 1] = "confirm" end
      if t.annotations.readOnlyHint then marks[#marks + 1] = "read-only" end
      if t.annotations.openWorldHint then marks[#marks + 1] = "network" end
      if t.raw then marks[#marks + 1] = "raw args" end
      stdout:write(string.format("%s%s\n  %s\n", t.name, #marks > 0 and (" [" .. table.concat(marks, ", ") .. "]") or "",
        (t.description:gsub("\n+", " "))))
      local req = {}
      for _, n in ipairs(t.inputSchema.required or {}) do req[n] = true end
      local names = {}
      for n in pairs(t.inputSchema.properties) do names[#names + 1] = n end
      table.sort(names)
      for _, n in ipairs(names) do stdout:write(param_line(n, t.inputSchema.properties[n], req[n])) end
    end
  end
  rt:close()
  return 0
end

local function cmd_mcp(a)
  local mcp = require("hcp.mcp")
  local approvals = {}
  local rt, err = open_runtime(a, function(opts) return mcp.with_confirm(opts, approvals) end)
  if not rt then say("%s", err); return 126 end
  return mcp.serve(rt, approvals, { version = hcp.version })
end

-- ---- hcp wrap (hcp.cli_wrap, loaded when used) ---------------------------

--- The file flags a --help text names (hcp.cli_wrap).
---@param help string
---@return string[]
function M.file_flags_from_help(help) return require("hcp.cli_wrap").file_flags_from_help(help) end

--- The input and output file flags a --help text names (hcp.cli_wrap).
---@param help string
---@return string[] inputs, string[] outputs
function M.flags_from_help(help) return require("hcp.cli_wrap").flags_from_help(help) end

local function cmd_wrap(a) return require("hcp.cli_wrap").run(a, prog, say) end

-- ---- hcp completion ---------------------------------------------------

-- zsh autoloads the file `_hcp` as the body of the function _hcp, for both
-- names of #compdef: that body defines the real functions, replaces _hcp by
-- a dispatcher on $service, and calls it.
local function zsh_completion(hcp_script, hcpx_script)
  local function body(script, name)
    script = script:gsub("^#compdef [^\n]*\n", "")
    local stripped = script:gsub("\n_" .. name .. "\n$", "\n")
    return stripped
  end
  local main = body(hcp_script, "hcp"):gsub("\n_hcp%(%) {", "\n_hcp_main() {", 1)
  return table.concat({ "#compdef hcp hcpx", main, body(hcpx_script, "hcpx"),
    "_hcp() {\n  case $service in\n    hcpx) _hcpx \"$@\" ;;\n    *) _hcp_main \"$@\" ;;\n  esac\n}\n",
    '_hcp "$@"\n' }, "\n")
end

--- The completion script of hcp and hcpx for `shell` ("bash" or "zsh"),
--- generated from the argparse definitions of the commands. bash: one file
--- that completes both names (install it as completions/hcp, and hcpx as a
--- link to it); zsh: the autoloaded function file `_hcp`.
---@param shell "bash"|"zsh"
---@return string
function M.completion(shell)
  local saved = prog
  prog = "hcp"
  local hcp_parser, hcpx_parser = build_parser(), build_hcpx_parser()
  prog = saved
  local head = string.format("# %s completion for hcp and hcpx (hcp-lua %s), generated by `hcp completion %s`.\n",
    shell, hcp.version, shell)
  if shell == "bash" then
    -- argparse completes the choices of options, not of arguments: add the shells
    local script = hcp_parser:get_bash_complete():gsub("\n        ''%)\n",
      "\n        'completion')\n            COMPREPLY=($(compgen -W \"bash zsh\" -- \"$cur\"))\n            ;;%0", 1)
    return head .. script .. "\n" .. hcpx_parser:get_bash_complete()
  elseif shell == "zsh" then
    local script = zsh_completion(hcp_parser:get_zsh_complete(), hcpx_parser:get_zsh_complete())
    return (script:gsub("\n", "\n" .. head, 1))
  end
  error(string.format("completion: unknown shell %q (bash or zsh)", tostring(shell)), 2)
end

local function cmd_completion(a)
  stdout:write(M.completion(a.shell))
  return 0
end

-- ---- entry point --------------------------------------------------------

-- The words of `hcp run`/`hcpx` up to PACK (the rest went to the child), in
-- their plain spellings only, into the table argparse would give: `hcp run`
-- then neither loads argparse nor builds a parser (~0.5 ms). Anything else
-- (help, a repeated or unknown option, `--opt=value`, a value or PACK that
-- starts with "-", no PACK) gives nil: argparse parses it, and speaks.
-- spec/cli_fastpath_spec.lua holds the two to the same results.
local function fast_run(words, first, command)
  local a = { pack_dir = {}, allow_bin = {}, args = {} }
  if command then a.command, a[command] = command, true end
  local i = first
  while i < #words do
    local w, kind = words[i], RUN_OPTIONS[words[i]]
    if w == "--" and i == #words - 1 then break end
    local key = kind and w:sub(3):gsub("-", "_")
    if not kind or (kind ~= "list" and a[key] ~= nil) then return nil end
    if kind == "flag" then
      a[key] = true
    else
      local v = words[i + 1]
      if i + 1 >= #words or v:sub(1, 1) == "-" then return nil end
      if kind == "list" then table.insert(a[key], v) else a[key] = v end
      i = i + 1
    end
    i = i + 1
  end
  local pack = words[#words]
  if #words < first or pack:sub(1, 1) == "-" then return nil end
  a.pack = pack
  return a
end

-- `run`'s PACK: the first word after `run` that is neither an option nor an
-- option's value. Everything after it goes to the child verbatim.
local function split_run(words, start)
  local i = start
  while i <= #words do
    local w = words[i]
    if w == "--" then return i + 1 end
    if w:sub(1, 1) ~= "-" or w == "-" then return i end
    local kind = RUN_OPTIONS[w]
    if kind and kind ~= "flag" then i = i + 1 end
    i = i + 1
  end
  return nil
end

-- Where `run`'s words start: after `run`, or at once for hcpx.
local function first_word()
  return prog == "hcpx" and 1 or 2
end

-- The words of a command line, and for `run`/`hcpx` the child's arguments
-- split off after PACK (nil for other commands, or when PACK is missing).
local function split_words(args)
  local words = table.move(args or {}, 1, #(args or {}), 1, {})
  if prog == "hcpx" or words[1] == "run" then
    local at = split_run(words, first_word())
    if at and at <= #words then
      return table.move(words, 1, at, 1, {}), table.move(words, at + 1, #words, 1, {})
    end
  end
  return words, nil
end

-- A command line into the options table: `run`/`hcpx` by fast_run where it
-- can, else by argparse. Returns a, or nil, the message, and the parser.
local function parse(args, no_fast)
  local words, rest = split_words(args)
  local a = rest and not no_fast and fast_run(words, first_word(), prog ~= "hcpx" and "run" or nil)
  local parser
  if not a then
    local ok
    parser = prog == "hcpx" and build_hcpx_parser() or build_parser(words[1])
    ok, a = parser:pparse(words)
    if not ok then return nil, a end
  end
  if rest then a.args = rest end
  return a, nil, parser
end

--- A command line parsed both ways, for spec/cli_fastpath_spec.lua: the
--- fast path's table (nil where it leaves the words to argparse), then
--- argparse's table or nil and its message.
---@param name "hcp"|"hcpx"
---@param args string[]
---@return table? fast, table? a, string? err
function M.parse_both(name, args)
  prog = name
  local words, rest = split_words(args)
  local fast = rest and fast_run(words, first_word(), name ~= "hcpx" and "run" or nil)
  if fast then fast.args = rest end
  return fast, parse(args, true)
end

--- Entry point: `name` is "hcp" or "hcpx", `args` the command-line words.
---@param name string
---@param args string[]
---@return integer status
function M.main(name, args)
  M.closed_all = false -- until a command says so (cmd_run)
  prog = name == "hcpx" and "hcpx" or "hcp"
  -- what --version's action prints, without argparse (the bench's measure
  -- of hcp's modules, which `hcp run` loads without argparse too)
  if args and #args == 1 and args[1] == "--version" then
    stdout:write(string.format("%s (hcp-lua) %s\n", prog, hcp.version))
    return 0
  end
  local a, err, parser = parse(args)
  if not a then
    say("%s", err)
    stderr:write(string.format("Try '%s --help'.\n", prog))
    return 2
  end
  if prog == "hcpx" then return cmd_run(a) end
  local handlers = { run = cmd_run, call = cmd_call, list = cmd_list, validate = cmd_validate,
    doctor = cmd_doctor, wrap = cmd_wrap, completion = cmd_completion, tools = cmd_tools, mcp = cmd_mcp }
  local handler = handlers[a.command]
  if not handler then
    stdout:write(parser:get_help(), "\n")
    return 0
  end
  return handler(a)
end

return M
