--- `hcp wrap` (§10.6): a pack scaffolded from a CLI's --help. Apart from
--- hcp.cli so that the commands that run packs do not load it (issue 12:
--- it is a seventh of the command line's bytecode).
---@class hcp.cli_wrap
local M = {}

local hcp = require("hcp")
local core = require("hcp.core")
local config = require("hcp.config")
local manifest = require("hcp.manifest")
local sandbox = require("hcp.sandbox")
local json = require("hcp.json")

local stdout = io.stdout
local prog = "hcp" -- the program's name in the next step the report suggests

-- Metavariables that name a file in help texts: FILE, <file>, PATH, FILENAME,
-- OUTFILE, [=FILE] …
local function names_file(metavar)
  local m = metavar:upper()
  return m:find("FILE", 1, true) ~= nil or m == "PATH" or m:sub(-5) == "_PATH"
end

-- Words of a flag's name, or metavariables, that say its file is written:
-- -o, --output, --out-file, --log, --logfile, -write, --save, --dump, --dest
local OUTPUT_WORDS = { "out", "write", "log", "save", "dump", "dest", "report", "export" }

local function output_word(word)
  word = word:lower()
  if word == "o" then return true end
  for _, w in ipairs(OUTPUT_WORDS) do
    if word:sub(1, #w) == w then return true end
  end
  return false
end

-- Whether a help line's option (its flags and metavariables) names an
-- output: a word of a flag's name, or the file's metavariable (OUTFILE).
local function names_output(flags, metavars)
  for _, flag in ipairs(flags) do
    for word in flag:gmatch("[%w]+") do
      if output_word(word) then return true end
    end
  end
  for _, m in ipairs(metavars) do
    if m:upper():find("^OUT") or m:upper():find("^DEST") then return true end
  end
  return false
end

--- The flags of a help text whose value is a file, split into inputs and
--- outputs: on each option line, the option part (before the description
--- column) is scanned for a file-like metavariable; every flag of that line
--- then takes a file — an output when a word of a flag's name says so
--- (`-o`, `--output`, `--out-file`, `--log`, `-write`, `--save`, `--dump`,
--- `--dest`, …) or the metavariable does (`OUTFILE`), else an input. A
--- heuristic, said as such by `hcp wrap`. Pure; exposed for the specs.
---@param help string
---@return string[] inputs sorted, unique
---@return string[] outputs sorted, unique
function M.flags_from_help(help)
  local found, inputs, outputs = {}, {}, {}
  for line in help:gmatch("[^\n]+") do
    local spec = line:match("^%s*(%-.-)%s%s") or line:match("^%s*(%-.*)$")
    if spec then
      local metavars, takes_file = {}, false
      for metavar in spec:gmatch("[ =<%[]+([%a_]+)") do
        if names_file(metavar) then takes_file = true end
        metavars[#metavars + 1] = metavar
      end
      local flags = {}
      for flag in spec:gmatch("(%-%-?[%w][%w%-]*)") do flags[#flags + 1] = flag end
      if takes_file then
        local list = names_output(flags, metavars) and outputs or inputs
        for _, flag in ipairs(flags) do
          if not found[flag] then
            found[flag] = true
            list[#list + 1] = flag
          end
        end
      end
    end
  end
  table.sort(inputs)
  table.sort(outputs)
  return inputs, outputs
end

--- Every flag of a help text whose value is a file, inputs and outputs
--- together (sorted, unique).
---@param help string
---@return string[]
function M.file_flags_from_help(help)
  local inputs, outputs = M.flags_from_help(help)
  local all = table.move(outputs, 1, #outputs, #inputs + 1, table.move(inputs, 1, #inputs, 1, {}))
  table.sort(all)
  return all
end

local function pack_name_for(bin)
  local base = bin:match("([^/]+)$"):lower():gsub("[^a-z0-9._-]", "-"):gsub("^[^a-z0-9]+", "")
  if base == "" then base = "pack" end
  return base:sub(1, 64)
end

local function first_line(s)
  for line in (s or ""):gmatch("[^\n]+") do
    local t = line:match("^%s*(.-)%s*$")
    if t ~= "" then return t end
  end
  return nil
end

-- Where and what `hcp wrap` scaffolds: the resolved bin, the pack name and
-- its directory. Returns nil, message, exit status when it cannot.
local function wrap_target(a, opts)
  local bin = a.bin
  if not sandbox.valid_entry(bin) then
    return nil, string.format("wrap: %q must be a bare name or an absolute path", bin), 2
  end
  local mode = sandbox.mode(opts.sandbox, opts.native_local)
  local lookup = sandbox.lookup_path(mode, opts.search_path or sandbox.DEFAULT_SEARCH_PATH)
  -- resolved as a pack's wrap.bin will be (§10.2.1), before anything runs
  local resolved, rexit, rerr = sandbox.resolve(bin, { lookup = lookup })
  if not resolved then return nil, "wrap: " .. tostring(rerr), rexit end
  local path = resolved.path
  local name = a.name or pack_name_for(bin)
  if #name > 64 or not name:match("^[a-z0-9][a-z0-9._-]*$") then
    return nil, string.format("wrap: pack name %q does not match ^[a-z0-9][a-z0-9._-]{0,63}$ (use --name)", name), 2
  end
  local dir = manifest.absolute(a.dir or ((opts.pack_dirs and opts.pack_dirs[1] or "packs") .. "/" .. name))
  local file = dir .. "/hcp.json"
  if core.kind(file) then
    return nil, string.format("wrap: %s already exists; not overwriting an existing pack", file), 1
  end
  return { path = path, name = name, dir = dir, file = file }
end

-- The manifest of the scaffold: the tool is asked about itself under the
-- same sandbox a call would get. Returns the document and the flags found
-- ({ inputs, outputs }). The scaffold's jail is ephemeral: a fresh writable
-- directory per call, where in:/out: files land beside each other and
-- where what a tool leaves is listed (left_in_jail).
local function wrap_manifest(t, opts)
  local rt, cerr = hcp.create({ allow_bins = { t.path }, sandbox = opts.sandbox,
    native_local = opts.native_local, search_path = opts.search_path })
  if not rt then return nil, "wrap: " .. tostring(cerr), 1 end
  local help = rt:exec({ bin = t.path, args = { "--help" }, timeout_ms = 5000 })
  local version = rt:exec({ bin = t.path, args = { "--version" }, timeout_ms = 5000 })
  rt:close()
  local inputs, outputs = M.flags_from_help((help.stdout or "") .. "\n" .. (help.stderr or ""))
  local flags = { inputs = inputs, outputs = outputs }
  local vline = version.ok and first_line(version.stdout) or nil
  local doc = {
    hcp = 1, name = t.name, version = "0.1.0", class = "wrap",
    description = "Wraps " .. t.path .. (vline and (" (" .. vline .. ")") or ""),
    wrap = { bin = t.path, args = json.array(), agent_env = {}, timeout_ms = manifest.DEFAULT_TIMEOUT_MS },
    ops = {}, mocks = { ["*"] = { exit = 0, stdout = "" } }, privacy = { land = "local" },
  }
  doc.wrap.workspace = { mode = "ephemeral" }
  -- none found: the defaults apply (--file --json-file --env-file in, --output -o out)
  if #inputs + #outputs > 0 then
    doc.wrap.workspace.file_flags = json.array(inputs)
    doc.wrap.workspace.output_flags = json.array(outputs)
  end
  -- what we write must load: check it before touching the disk
  local _, problems = manifest.validate(json.decode(json.encode(doc)), t.file, t.dir)
  if #problems > 0 then
    return nil, "wrap: internal error, the scaffold does not validate: " .. manifest.format_problem(problems[1]), 1
  end
  return doc, flags
end

local function wrap_write(t, doc)
  local ok_dir = core.kind(t.dir) == "dir" or os.execute("mkdir -p '" .. t.dir:gsub("'", "'\\''") .. "'")
  if not ok_dir then return nil, "wrap: cannot create " .. t.dir, 1 end
  local wok, werr = core.write_private(t.file, json.encode(doc, { indent = 2 }) .. "\n")
  if not wok then return nil, "wrap: " .. tostring(werr), 1 end
  os.execute("chmod 0644 '" .. t.file:gsub("'", "'\\''") .. "'")
  return true
end

local function wrap_report(t, doc, flags)
  local next_step = string.format("%s validate %s && %s run --pack-dir %s %s --help",
    prog, t.dir, prog, t.dir:match("^(.*)/[^/]+$") or ".", t.name)
  local found = #flags.inputs + #flags.outputs > 0
  stdout:write(string.format("wrote %s\n", t.file))
  stdout:write(string.format("  name         %s\n  wrap.bin     %s\n  description  %s\n", t.name, t.path,
    doc.description))
  stdout:write("  mode         ephemeral (a fresh directory per call)\n")
  if found then
    stdout:write(string.format("  file_flags   %s   (guessed from --help: inputs, staged in)\n",
      #flags.inputs > 0 and table.concat(flags.inputs, " ") or "(none)"))
    stdout:write(string.format("  output_flags %s   (guessed from --help: outputs, written back)\n",
      #flags.outputs > 0 and table.concat(flags.outputs, " ") or "(none)"))
  else
    stdout:write("  file_flags   (none found in --help; the defaults apply: --file --json-file --env-file in, "
      .. "--output -o out)\n")
  end
  stdout:write("check before use:\n")
  stdout:write("  - file_flags and output_flags: a guess from the help text; remove the wrong ones, add the missing\n")
  stdout:write("  - files given positionally are named in:PATH (read) and out:PATH (written back)\n")
  stdout:write("  - add ops with {param} templates (a file is { \"type\": \"file\", \"mode\": \"in\" } or \"out\"),"
    .. " and mocks that look like real output\n")
  stdout:write("  - agent_env, timeout_ms, and wrap.workspace.mode\n")
  stdout:write("then: ", next_step, "\n")
end

local function wrap_steps(a)
  local opts, err = config.options(a)
  if not opts then return nil, err, 126 end
  local t, terr, tcode = wrap_target(a, opts)
  if not t then return nil, terr, tcode end
  local doc, flags, dcode = wrap_manifest(t, opts)
  if not doc then return nil, flags, dcode end
  local ok, werr, wcode = wrap_write(t, doc)
  if not ok then return nil, werr, wcode end
  return t, doc, flags
end

--- The command: its exit status.
---@param a table parsed arguments
---@param name string the program's name
---@param say fun(fmt: string, ...) hcp.cli's one-line message on stderr
---@return integer
function M.run(a, name, say)
  prog = name
  local t, doc, flags = wrap_steps(a)
  if not t then
    local err, code = doc, flags -- wrap_steps failed: nil, message, status
    if a.json then stdout:write(json.encode({ ok = false, error = err }), "\n") else say("%s", err) end
    return code
  end
  if a.json then
    stdout:write(json.encode({ ok = true, file = t.file, dir = t.dir, name = t.name, bin = t.path,
      description = doc.description, mode = doc.wrap.workspace.mode, file_flags = json.array(flags.inputs),
      output_flags = json.array(flags.outputs) }), "\n")
  else
    wrap_report(t, doc, flags)
  end
  return 0
end

return M
