--- The `hcp` and `hcpx` commands (contract §6). `hcp-lua` dispatches here
--- when it is invoked under either name.
---@class hcp.cli
local M = {}

local argparse = require("argparse")
local hcp = require("hcp")
local envelope = require("hcp.envelope")
local manifest = require("hcp.manifest")
local json = require("hcp.json")

local stdout, stderr = io.stdout, io.stderr

-- Options that take a value: needed to find where `run`'s PACK starts, after
-- which every argument belongs to the child verbatim (even `--json` or `-n`).
local VALUE_OPTIONS = { ["--pack-dir"] = true, ["--allow-bin"] = true, ["--config"] = true }

local function common_options(cmd)
  cmd:option("--pack-dir", "Directory of packs, or a pack root (repeatable; default $HCP_PACK_PATH, then ./packs).")
    :count("*"):argname("<dir>")
  cmd:option("--allow-bin", "Add a bin to the allow-list (repeatable; bare name or absolute path).")
    :count("*"):argname("<bin>")
  cmd:option("--config", "Lua file returning the options table for hcp.create."):argname("<file.lua>")
  cmd:flag("--no-sandbox", "With --native-local: leave sandbox mode.")
  cmd:flag("--native-local", "With --no-sandbox: run bins from the host PATH (a trust decision).")
end

local function build_parser(prog)
  local p = argparse(prog, "Run HCP packs in a sandbox.")
    :epilog("Sandbox mode is the default; only --no-sandbox --native-local together leave it.")
  p:flag("--version", "Print the version and exit."):action(function()
    stdout:write(string.format("%s (hcp-lua) %s\n", prog, hcp.version))
    os.exit(0)
  end)
  p:command_target("command")
  p:require_command(false)
  local run = p:command("run", "One live call: the child's output passes through; exit status is the child's.")
  common_options(run)
  run:flag("--json", "Print the result envelope instead of passing output through.")
  run:argument("pack", "Pack name.")
  local call = p:command("call", "Request envelopes in (one JSON per line), result envelopes out.")
  common_options(call)
  call:argument("file", "File of request envelopes, or - for stdin."):args("?")
  local list = p:command("list", "The loaded packs, their bins, modes and source dirs.")
  common_options(list)
  list:flag("--json", "Print JSON.")
  local validate = p:command("validate", "Check manifests; exit 1 listing every problem.")
  validate:argument("dir", "Pack roots or folders of packs."):args("+")
  local doctor = p:command("doctor", "What isolation this host supports and what is used.")
  doctor:flag("--json", "Print JSON.")
  return p
end

local function default_pack_dirs()
  local env = os.getenv("HCP_PACK_PATH")
  if env and env ~= "" then
    local dirs = {}
    for d in env:gmatch("[^:]+") do dirs[#dirs + 1] = d end
    return dirs
  end
  return { "packs" }
end

-- Options for hcp.create from the command line and --config.
local function runtime_options(a)
  local opts = {}
  if a.config then
    local chunk, err = loadfile(a.config, "t")
    if not chunk then return nil, "config: " .. tostring(err) end
    local ok, t = pcall(chunk)
    if not ok then return nil, "config: " .. a.config .. ": " .. tostring(t) end
    if type(t) ~= "table" then return nil, "config: " .. a.config .. ": must return a table" end
    for k, v in pairs(t) do opts[k] = v end
  end
  if a.pack_dir and #a.pack_dir > 0 then
    opts.pack_dirs = a.pack_dir
  elseif opts.pack_dirs == nil then
    opts.pack_dirs = default_pack_dirs()
  end
  if a.allow_bin and #a.allow_bin > 0 then
    local list = {}
    for _, b in ipairs(opts.allow_bins or { "hcpx", "hcp" }) do list[#list + 1] = b end
    for _, b in ipairs(a.allow_bin) do list[#list + 1] = b end
    opts.allow_bins = list
  end
  if a.no_sandbox then opts.sandbox = false end
  if a.native_local then opts.native_local = true end
  return opts
end

local function open_runtime(a)
  local opts, err = runtime_options(a)
  if not opts then return nil, err end
  local rt, cerr = hcp.create(opts)
  if not rt then return nil, cerr end
  if a.no_sandbox and a.native_local then
    stderr:write("hcp: native-local mode: bins run from the host PATH (sandbox off)\n")
  elseif a.no_sandbox or a.native_local then
    stderr:write("hcp: sandbox mode stays on: --no-sandbox and --native-local are needed together\n")
  end
  for _, p in ipairs(rt:problems()) do
    stderr:write(manifest.format_problem(p), "\n")
  end
  return rt
end

local function cmd_run(a, rest)
  local rt, err = open_runtime(a)
  if not rt then stderr:write(err, "\n"); return 126 end
  local res = rt:call({ pack = a.pack, args = rest })
  rt:close()
  if a.json then
    stdout:write(envelope.encode(res), "\n")
  else
    if res.stdout then stdout:write(res.stdout) end
    if res.stderr then stderr:write(res.stderr) end
    if res.error and res.stdout == nil then stderr:write(res.error, "\n") end
  end
  return res.exit or 126
end

local function cmd_call(a)
  local rt, err = open_runtime(a)
  if not rt then stderr:write(err, "\n"); return 126 end
  local fh = io.stdin
  if a.file and a.file ~= "-" then
    local f, ferr = io.open(a.file, "rb")
    if not f then stderr:write("hcp call: ", tostring(ferr), "\n"); rt:close(); return 1 end
    fh = f
  end
  for line in fh:lines() do
    if line:match("%S") then
      local v, derr = envelope.decode(line)
      local res
      if v == nil then
        res = envelope.refusal(nil, 126, derr, rt.mode)
      else
        res = rt:call(v)
      end
      stdout:write(envelope.encode(res), "\n")
      stdout:flush()
    end
  end
  if fh ~= io.stdin then fh:close() end
  rt:close()
  return 0
end

local function cmd_list(a)
  local rt, err = open_runtime(a)
  if not rt then stderr:write(err, "\n"); return 126 end
  local packs = rt:packs()
  if a.json then
    local out = json.array()
    for _, p in ipairs(packs) do
      out[#out + 1] = { name = p.name, bin = p.bin, path = p.path or json.null, root = p.root,
        workspace = p.workspace, ops = json.array(p.ops), sandbox = rt.mode }
    end
    stdout:write(json.encode(out), "\n")
  else
    for _, p in ipairs(packs) do
      stdout:write(string.format("%-16s %-28s %-10s %s\n", p.name, p.path or ("(unresolved) " .. p.bin),
        p.workspace, p.root))
    end
  end
  rt:close()
  return 0
end

local function cmd_validate(a)
  local failed = false
  for _, dir in ipairs(a.dir) do
    local roots, problems = manifest.discover(dir)
    for _, p in ipairs(problems) do stderr:write(manifest.format_problem(p), "\n"); failed = true end
    for _, root in ipairs(roots) do
      local pack, probs = manifest.load(root)
      for _, p in ipairs(probs) do stderr:write(manifest.format_problem(p), "\n"); failed = true end
      if pack then stdout:write(string.format("ok %s (%s)\n", pack.name, pack.file)) end
    end
  end
  return failed and 1 or 0
end

local function cmd_doctor(a)
  local d = hcp.doctor()
  if a.json then
    stdout:write(json.encode(d), "\n")
  else
    for _, l in ipairs(d.layers) do
      stdout:write(string.format("%-14s %-10s %s\n", l.name, l.used and "used" or "not used", l.reason or ""))
    end
  end
  return 0
end

-- Split `run`'s arguments at PACK: what follows goes to the child verbatim.
local function split_run(args, start)
  local i = start
  while i <= #args do
    local a = args[i]
    if a == "--" then return i + 1 end
    if a:sub(1, 1) ~= "-" or a == "-" then return i end
    if VALUE_OPTIONS[a] then i = i + 1 end
    i = i + 1
  end
  return i
end

--- Entry point: `prog` is "hcp" or "hcpx", `args` the command-line words.
---@param prog string
---@param args string[]
---@return integer status
function M.main(prog, args)
  args = args or {}
  local words = {}
  for i, a in ipairs(args) do words[i] = a end
  if prog == "hcpx" then table.insert(words, 1, "run") end
  local parser = build_parser(prog == "hcpx" and "hcpx" or "hcp")
  local rest = {}
  if words[1] == "run" then
    local pack_at = split_run(words, 2)
    if pack_at <= #words then
      local head = table.move(words, 1, pack_at, 1, {})
      if words[pack_at - 1] == "--" then table.remove(head, pack_at - 1) end
      rest = table.move(words, pack_at + 1, #words, 1, {})
      words = head
    end
  end
  local ok, a = parser:pparse(words)
  if not ok then
    stderr:write(prog, ": ", a, "\n", "Try '", prog, " --help'.\n")
    return 2
  end
  if a.command == "run" then return cmd_run(a, rest) end
  if a.command == "call" then return cmd_call(a) end
  if a.command == "list" then return cmd_list(a) end
  if a.command == "validate" then return cmd_validate(a) end
  if a.command == "doctor" then return cmd_doctor(a) end
  stdout:write(parser:get_help(), "\n")
  return 0
end

return M
