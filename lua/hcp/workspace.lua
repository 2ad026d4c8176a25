--- The workspace / exec plane (§10.6): file references in argv, and where
--- jails live.
---
--- `plan` is a pure function of argv and the pack's flags: no path of this
--- host goes in, nothing is touched, so a refused reference has written
--- nothing and spawned nothing; `bind` puts the roots in. `check_host_refs`
--- applies the out_dir rules to a plan. The driver (hcp.driver.local)
--- carries the plan out: staging, spawn, write-back.
---@class hcp.workspace
local M = {}

local core = require("hcp.core")

M.PREFIX = "workspace:"
-- §10.6 "more URI schemes" (contract §8): a file of out_dir staged into
-- the jail (in:REL), or a jail file written back to out_dir (out:REL)
M.SCHEMES = { ["in:"] = "input", ["out:"] = "output" }
-- §10.6 and contract §8: flags whose value is written back after the call
-- (wrap.workspace.output_flags); the file_flags are inputs.
M.DEFAULT_OUTPUT_FLAGS = { "--output", "-o" }
local LEGACY_OUTPUTS = { ["--output"] = true, ["-o"] = true }

---@class hcp.PlanRef
---@field before string  text kept before the path: "--output=", "-o", "file://", ""
---@field root "jail"|"files" where the path points: the jail (workspace:, file:) or the files directory (file-flag values)
---@field rel string     normalised relative path ("." for the root itself)
---@field after string?  text kept after the path (a file: URI's ?query#fragment, a template's text)
---@field encode "uri"?  the path is percent-encoded when bound (inside a file: URI)
---@field cwd boolean?   bound relative to the child's cwd when the files directory is it (in:, out:, file params)

---@class hcp.Plan
---@field argv (string|hcp.PlanRef)[]  one entry per argument: unchanged, or a reference to bind
---@field stage hcp.HostRef[]   inputs: out_dir/rel is copied to files_dir/rel before spawn
---@field outputs hcp.HostRef[] outputs: files_dir/rel is written back to out_dir/rel after the call
---@field dirs string[]        directories to create in files_dir so the tool can write its outputs
---@field uses_files boolean   some reference points into the files directory

---@class hcp.HostRef
---@field rel string      normalised, relative to out_dir (and to the files directory)
---@field arg integer     the argument it came from
---@field param string?   the op parameter of type file it came from

---@class hcp.FileArg  an op's file parameter, placed by hcp.ops.expand
---@field kind "input"|"output"
---@field param string   the parameter's name
---@field value string   what the agent gave: a path relative to out_dir
---@field before string  the template's text before the placeholder
---@field after string   the template's text after it

---@class hcp.PlanFlags
---@field file_flags string[]?    input flags (default none)
---@field output_flags string[]?  output flags (default --output, -o)

-- A pack's flags are worked out once per pair of lists (a pack's lists do
-- not change once loaded), not at every call: weak keys, the lists' own
-- tables (output_flags, or false), so flag_kinds' own cache hits too.
local flags_of = setmetatable({}, { __mode = "k" })

--- The plan's flags for a manifest's `wrap.workspace` as loaded today, where
--- `file_flags` lists outputs too: `--output`/`-o` among the file_flags are
--- the outputs (§10.6), unless `output_flags` is given.
---@param file_flags string[]
---@param output_flags string[]?
---@return hcp.PlanFlags
function M.flags(file_flags, output_flags)
  local by_out = flags_of[file_flags]
  if not by_out then
    by_out = setmetatable({}, { __mode = "k" })
    flags_of[file_flags] = by_out
  end
  local got = by_out[output_flags or false]
  if got then return got end
  if output_flags then
    got = { file_flags = file_flags, output_flags = output_flags }
  else
    local inputs, outputs = {}, {}
    for _, f in ipairs(file_flags) do
      if LEGACY_OUTPUTS[f] then outputs[#outputs + 1] = f else inputs[#inputs + 1] = f end
    end
    got = { file_flags = inputs, output_flags = outputs }
  end
  by_out[output_flags or false] = got
  return got
end

-- flag -> "input" | "output", and the listed long flags (for abbreviations);
-- read only, so kept per flags table
local kinds_of = setmetatable({}, { __mode = "k" })
local function flag_kinds(flags)
  local got = kinds_of[flags]
  if got then return got[1], got[2] end
  local kind, long = {}, {}
  for _, f in ipairs(flags.file_flags or {}) do kind[f] = "input" end
  for _, f in ipairs(flags.output_flags or M.DEFAULT_OUTPUT_FLAGS) do kind[f] = "output" end
  for f in pairs(kind) do
    if f:sub(1, 2) == "--" then long[#long + 1] = f end
  end
  table.sort(long)
  kinds_of[flags] = { kind, long }
  return kind, long
end

-- The kind of a long flag as spelled: listed, or an unambiguous getopt_long
-- abbreviation of exactly one listed long flag (--out for --output). A
-- prefix that ends where the listed flag has a "-" is a word of its own, not
-- an abbreviation (--json is not --json-file, --env is not --env-file).
local function long_kind(name, kind, long)
  if kind[name] then return kind[name] end
  if #name < 3 or name:sub(1, 2) ~= "--" then return nil end
  local found
  for _, f in ipairs(long) do
    if #name < #f and f:sub(1, #name) == name and f:sub(#name + 1, #name + 1) ~= "-" then
      if found then return nil end -- ambiguous among the listed flags
      found = f
    end
  end
  return found and kind[found]
end

local function escapes(norm)
  return norm == ".." or norm:sub(1, 3) == "../"
end

-- A plain argument (or --x= value) that spells a path out of its cwd, the
-- jail: "../x", "./../x". ".." alone (jq's recursive descent) is not one.
local function leaves(v)
  local first = v:match("^[^/]*")
  if (first ~= "." and first ~= "..") or not v:find("/", 1, true) then return false end
  return escapes(core.normalize(v))
end

local function escape_error(i)
  return nil, string.format("workspace: path escapes the jail: argument %d", i)
end

local function percent_decode(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- A planner for one argv: collects stage/outputs/dirs as references are made.
local P = {}
P.__index = P

local function jail_ref(before, rel, i, after, encode)
  local norm = core.normalize((rel:gsub("^/+", "")))
  if escapes(norm) then return escape_error(i) end
  return { before = before, root = "jail", rel = norm, after = after, encode = encode }
end

-- file:REL, file:/p, file://localhost/p, file:///p (any case): a reference
-- into the jail like workspace: (§10.6 "more URI schemes ... MUST rewrite
-- them into the jail"); its ?query and #fragment are kept.
local function file_uri(before, uri, i)
  local scheme = uri:sub(1, 5)
  local rest = uri:sub(6)
  local path, after = rest:match("^([^?#]*)(.*)$")
  local prefix = scheme .. "//"
  if path:sub(1, 2) == "//" then
    local host, p = path:match("^//([^/]*)(.*)$")
    if host ~= "" and host:lower() ~= "localhost" then
      return nil, string.format("workspace: argument %d: a file: URI of another host (%q) is refused", i, host)
    end
    path = p
  elseif path:sub(1, 1) ~= "/" then
    prefix = scheme -- file:REL (sqlite's file:data.db): bound as file:/jail/REL
  end
  return jail_ref(before .. prefix, percent_decode(path), i, after ~= "" and after or nil, "uri")
end

-- The scheme of an explicit host reference (in:REL, out:REL) and what
-- follows it, or nil.
local function scheme_of(value)
  for prefix, kind in pairs(M.SCHEMES) do
    if value:sub(1, #prefix) == prefix then return kind, value:sub(#prefix + 1) end
  end
  return nil
end

local function label(i, param)
  if param then return string.format("argument %d (parameter %q)", i, param) end
  return string.format("argument %d", i)
end

-- A reference into the files directory: staged from out_dir (input) or
-- written back to it (output). `norm` is already normalised and inside.
function P:files_ref(kind, before, norm, i, extra)
  local plan = self.plan
  local ref = { rel = norm, arg = i, param = extra.param }
  if kind == "output" then
    if not self.seen_out[norm] then
      self.seen_out[norm] = true
      plan.outputs[#plan.outputs + 1] = ref
      local parent = norm:match("^(.*)/[^/]+$")
      if parent then plan.dirs[#plan.dirs + 1] = parent end
    end
  elseif not self.seen_stage[norm] then
    self.seen_stage[norm] = true
    plan.stage[#plan.stage + 1] = ref
  end
  plan.uses_files = true
  return { before = before, root = "files", rel = norm, after = extra.after, cwd = extra.cwd }
end

-- An explicit host reference: `in:REL`/`out:REL`, or the value of an op's
-- file parameter. The path must be relative (to out_dir) and stay inside.
function P:host_value(kind, before, value, i, extra)
  local what = extra.param and "the file parameter" or (kind == "input" and "in:" or "out:")
  if value == "" then
    return nil, string.format("workspace: %s: %s needs a path relative to out_dir", label(i, extra.param), what)
  end
  if value:sub(1, 1) == "/" then
    return nil, string.format("workspace: %s: %s takes a path relative to out_dir, not the absolute path %q",
      label(i, extra.param), what, value)
  end
  local norm = core.normalize(value)
  if escapes(norm) then
    return nil, string.format("workspace: path escapes the jail: %s", label(i, extra.param))
  end
  if norm == "." then
    return nil, string.format("workspace: %s: %q names a directory, not a file", label(i, extra.param), value)
  end
  extra.cwd = true
  return self:files_ref(kind, before, norm, i, extra)
end

-- A value naming a file: a jail reference, an explicit host reference, an
-- unchanged string, or a reference into the files directory (staged or
-- written back, as the flag's kind says).
function P:file_value(kind, before, value, i)
  if value:sub(1, #M.PREFIX) == M.PREFIX then return jail_ref(before, value:sub(#M.PREFIX + 1), i) end
  if value:sub(1, 5):lower() == "file:" then return file_uri(before, value, i) end
  local skind, rest = scheme_of(value)
  if skind then return self:host_value(skind, before, rest, i, {}) end
  -- "-" (stdin/stdout), absolute paths (checked by the host-path rule) and
  -- other URI schemes pass through unchanged — but not a "URL" that, read as
  -- the path a tool without URLs sees, climbs out ("a://../../x"; found by
  -- spec/fuzz/plan)
  if value == "" or value == "-" or value:sub(1, 1) == "/" then return before .. value end
  local norm = core.normalize(value)
  if escapes(norm) then return escape_error(i) end
  if value:find("://", 1, true) then return before .. value end
  if norm == "." then
    return nil, string.format("workspace: argument %d: %q names a directory, not a file", i, value)
  end
  return self:files_ref(kind, before, norm, i, {})
end

-- A value that is not a listed flag's: workspace:, file:, in: and out:
-- references only (after --any-flag= or a glued -X).
function P:any_value(before, value, i)
  if value:sub(1, #M.PREFIX) == M.PREFIX then return jail_ref(before, value:sub(#M.PREFIX + 1), i) end
  if value:sub(1, 5):lower() == "file:" then return file_uri(before, value, i) end
  local skind, rest = scheme_of(value)
  if skind then return self:host_value(skind, before, rest, i, {}) end
  return nil
end

-- One argument that is not the value of the flag before it. Returns its
-- plan entry (or nil, err), and the kind of file value the next argument
-- is when this one is a listed flag given alone.
function P:argument(a, i, last)
  local whole, werr = self:any_value("", a, i)
  if whole or werr then return whole, werr end
  if a == "--" then self.dashdash = true end
  -- after a bare --, options are data (getopt): qrencode's text "-ok" stays "-ok"
  if self.dashdash then return a end
  if a:sub(1, 1) ~= "-" or a == "-" then
    if leaves(a) then return escape_error(i) end
    return a
  end
  local double = a:sub(2, 2) == "-"
  local eq = a:find("=", 1, true)
  local name = eq and a:sub(1, eq - 1) or a
  local k
  if double then
    k = long_kind(name, self.kind, self.long)
  elseif #name > 2 or not eq then
    k = self.kind[name] -- -o alone, or a single-dash long flag (-out, -out=x); -o=x is glued
  end
  if k and eq then return self:file_value(k, name .. "=", a:sub(eq + 1), i) end
  if k then
    if last then return a end -- a file flag with no value: left alone
    return a, nil, k
  end
  if not double and #a > 2 then
    -- a glued short flag, as getopt reads it: -oVALUE (so -o=x is the file "=x")
    local short = a:sub(1, 2)
    if self.kind[short] then return self:file_value(self.kind[short], short, a:sub(3), i) end
    local ref, err = self:any_value(short, a:sub(3), i)
    if ref or err then return ref, err end
  end
  if eq then
    local ref, err = self:any_value(name .. "=", a:sub(eq + 1), i)
    if ref or err then return ref, err end
    if leaves(a:sub(eq + 1)) then return escape_error(i) end
  end
  return a
end

--- Plan the file references of argv, touching nothing: no root path goes
--- in, so the plan is the same whatever jail it is later bound to. Forms
--- recognised (docs/spec/workspace.md): `workspace:REL` (the whole
--- argument, after `--any-flag=`, after a glued `-X`); `file:` URIs in the
--- same places (into the jail); `in:REL` and `out:REL` in the same places
--- (a file of out_dir staged in, a file written back to it); the value of a
--- listed flag as `--flag value`, `--flag=value`, a glued short `-oVALUE`,
--- and an unambiguous abbreviation of a listed long flag (`--out=x`,
--- `--outp x`) — up to a bare `--`, after which only the scheme references
--- are (the rest is data, as getopt reads it). `file_args` are the op's
--- file parameters by argument number (hcp.ops.expand): those arguments
--- are references whatever their text.
---@param argv string[] arguments after argv[0]
---@param flags hcp.PlanFlags
---@param file_args table<integer, hcp.FileArg>?
---@return hcp.Plan? plan, string? err
function M.plan(argv, flags, file_args)
  for i, a in ipairs(argv) do -- (the path functions below raise for one)
    if a:find("\0", 1, true) then return nil, string.format("workspace: argument %d contains a NUL byte", i) end
  end
  local kind, long = flag_kinds(flags or {})
  local self = setmetatable({ kind = kind, long = long, seen_stage = {}, seen_out = {},
    plan = { argv = {}, stage = {}, outputs = {}, dirs = {}, uses_files = false } }, P)
  local out, pending = self.plan.argv, nil
  file_args = file_args or {}
  for i, a in ipairs(argv) do
    local entry, err
    local fa = file_args[i]
    if fa then
      entry, err = self:host_value(fa.kind, fa.before, fa.value, i, { param = fa.param, after = fa.after })
      pending = nil
    elseif pending then
      entry, err = self:file_value(pending, "", a, i)
      pending = nil
    else
      entry, err, pending = self:argument(a, i, i == #argv)
    end
    if entry == nil then return nil, err end
    out[i] = entry
  end
  return self.plan
end

local function uri_encode(path)
  return (path:gsub("[^%w%-._~/]", function(c) return string.format("%%%02X", c:byte()) end))
end

-- A path relative to the child's cwd, as a tool reads an argument: one
-- that starts with "-" would be an option.
local function relative(rel)
  if rel:sub(1, 1) == "-" then return "./" .. rel end
  return rel
end

--- Bind a plan to its roots: the argv strings the child gets. A scheme
--- reference (`in:`, `out:`, a file parameter) whose files directory is the
--- child's cwd (`roots.cwd`: the jail of modes ephemeral and workspace) is
--- bound relative to it — `wc -l in:a.txt` prints `a.txt`, `tar -czf
--- out:x.tgz in:a.txt` stores `a.txt` — else absolute.
---@param plan hcp.Plan
---@param roots { jail: string, files_dir: string?, cwd: string? }
---@return string[]
function M.bind(plan, roots)
  local out = {}
  for i, e in ipairs(plan.argv) do
    if type(e) == "string" then
      out[i] = e
    else
      local base = e.root == "jail" and roots.jail or roots.files_dir
      assert(base, "workspace.bind: no " .. e.root .. " root")
      local path
      if e.cwd and base == roots.cwd then
        path = relative(e.rel)
      else
        path = e.rel == "." and base or base .. "/" .. e.rel
      end
      if e.encode == "uri" then path = uri_encode(path) end
      out[i] = e.before .. path .. (e.after or "")
    end
  end
  return out
end

---@class hcp.HostRefOptions
---@field out_dir string?        where inputs come from and outputs go; nil: none (host references refused)
---@field protected string[]?    absolute paths no reference may reach (pack roots, the state dir, the runtime's files)
---@field allow_hidden boolean?  allow dot-named components (.ssh, .git, .config) in a reference
---@field replace boolean?       write-back may replace existing files (checked by core.writeback; carried here)
---@field max_writeback integer? data bytes one call may write back (carried here for the driver)

local function hidden_component(rel)
  for part in rel:gmatch("[^/]+") do
    if part:sub(1, 1) == "." then return part end
  end
  return nil
end

-- Bytes one call may write back under out_dir (data; holes are free).
M.DEFAULT_MAX_WRITEBACK = 1024 * 1024 * 1024

-- This module's directory: the runtime's own Lua files.
local HERE = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")

---@class hcp.HostConfig
---@field out_dir string?
---@field replace boolean
---@field allow_hidden boolean
---@field max_writeback integer
---@field protected string[] the paths always protected (pack roots and the private dir come per call)

--- The out_dir options of `hcp.create`, validated (`replace`,
--- `allow_hidden`, `max_writeback`, `protect`), and the paths that are
--- always protected: the operator's `protect`, every `pack_dirs` entry,
--- the state dir, the runtime's Lua modules, its C module and its
--- interpreter. Returns nil and an `hcp.create: …` message for a bad option.
---@param opts table the options of hcp.create (types already checked)
---@param out_dir string? normalised absolute out_dir, or nil for none
---@param state_dir string?
---@return hcp.HostConfig? cfg, string? err
function M.host_config(opts, out_dir, state_dir)
  local absolute = require("hcp.manifest").absolute
  local cfg = { out_dir = out_dir, replace = opts.replace == true, allow_hidden = opts.allow_hidden == true,
    max_writeback = M.DEFAULT_MAX_WRITEBACK, protected = {} }
  local mw = opts.max_writeback
  if mw ~= nil then
    if type(mw) ~= "number" or mw < 0 or mw ~= math.floor(mw) then
      return nil, "hcp.create: option \"max_writeback\" must be a non-negative integer of bytes"
    end
    cfg.max_writeback = math.tointeger(mw)
  end
  local prot = cfg.protected
  local n = 0
  for _ in pairs(opts.protect or {}) do n = n + 1 end
  if n ~= #(opts.protect or {}) then return nil, "hcp.create: option \"protect\" must be an array of absolute paths" end
  for i, p in ipairs(opts.protect or {}) do
    if type(p) ~= "string" or p:sub(1, 1) ~= "/" then
      return nil, string.format("hcp.create: protect[%d] must be an absolute path", i)
    end
    prot[#prot + 1] = p
  end
  for _, d in ipairs(opts.pack_dirs or {}) do prot[#prot + 1] = absolute(d) end
  prot[#prot + 1] = state_dir or M.default_state_dir()
  if HERE then prot[#prot + 1] = absolute(HERE) end
  local so = package.searchpath("hcp.core", package.cpath)
  if so then prot[#prot + 1] = absolute(so) end
  prot[#prot + 1] = core.realpath("/proc/self/exe")
  return cfg
end

--- What one call's checks take (check_host_refs, core.stage,
--- core.writeback): the config's, with the protected paths completed by
--- the loaded pack roots and the runtime's private directory — each path
--- as given and as it resolves now.
---@param cfg hcp.HostConfig
---@param pack_roots string[]
---@param private_dir string?
---@return hcp.HostRefOptions
function M.host_ref_opts(cfg, pack_roots, private_dir)
  local list, seen = {}, {}
  local function add(p)
    if p and not seen[p] then seen[p] = true; list[#list + 1] = p end
  end
  local function both(p)
    if not p then return end
    add(core.normalize(p))
    add(core.realpath(p))
  end
  for _, p in ipairs(cfg.protected) do both(p) end
  for _, r in ipairs(pack_roots) do both(r) end
  both(private_dir)
  return { out_dir = cfg.out_dir, protected = list, allow_hidden = cfg.allow_hidden, replace = cfg.replace,
    max_writeback = cfg.max_writeback }
end

--- The out_dir rules on a plan, lexically (core.stage/core.writeback check
--- the same again on the paths as the kernel resolves them): a reference to
--- a host file needs an out_dir; no hidden component unless allowed; never
--- into a protected path. Refusals name the argument and why.
---@param plan hcp.Plan
---@param o hcp.HostRefOptions
---@return boolean? ok, string? err
function M.check_host_refs(plan, o)
  local refs = {}
  for _, s in ipairs(plan.stage) do refs[#refs + 1] = { s, "input" } end
  for _, s in ipairs(plan.outputs) do refs[#refs + 1] = { s, "output" } end
  table.sort(refs, function(a, b) return a[1].arg < b[1].arg end)
  for _, r in ipairs(refs) do
    local ref, what = r[1], r[2]
    local arg = label(ref.arg, ref.param)
    if not o.out_dir then
      return nil, string.format("workspace: %s: the %s %q is a file under out_dir, and this runtime has "
        .. "no out_dir (the operator sets the out_dir option)", arg, what, ref.rel)
    end
    local hidden = not o.allow_hidden and hidden_component(ref.rel)
    if hidden then
      return nil, string.format("workspace: %s: the %s %q goes through the hidden name %q "
        .. "(refused unless the operator sets allow_hidden)", arg, what, ref.rel, hidden)
    end
    local path = core.normalize(o.out_dir .. "/" .. ref.rel)
    for _, p in ipairs(o.protected or {}) do
      if core.contains(core.normalize(p), path) then
        return nil, string.format("workspace: %s: the %s %q lies in a directory the runtime protects "
          .. "(a pack, the state dir or the runtime's own files)", arg, what, ref.rel)
      end
    end
  end
  return true
end

--- The jail references of a plan as the kernel resolves them now (this one
--- touches the file system): a link inside the jail — a pack's own in mode
--- none, or one a child left in a persisted jail — must not lead out of it.
--- The longest existing prefix of each reference is resolved; a dangling
--- link is refused too.
---@param plan hcp.Plan
---@param jail string
---@return boolean? ok, string? err
function M.check_jail_refs(plan, jail)
  local real_jail
  for i, e in ipairs(plan.argv) do
    if type(e) == "table" and e.root == "jail" and e.rel ~= "." then
      real_jail = real_jail or core.realpath(jail) or jail
      local cur = e.rel
      while cur do
        local path = jail .. "/" .. cur
        local real = core.realpath(path)
        if (real and not core.contains(real_jail, real)) or (not real and core.kind(path) == "link") then
          return nil, string.format("workspace: path escapes the jail: argument %d (through a symbolic link)", i)
        end
        if real then break end
        cur = cur:match("^(.*)/[^/]+$")
      end
    end
  end
  return true
end

--- The default state directory: $XDG_STATE_HOME/hcp, else ~/.local/state/hcp.
---@return string? dir
function M.default_state_dir()
  local xdg = os.getenv("XDG_STATE_HOME")
  if xdg and xdg:sub(1, 1) == "/" then return xdg .. "/hcp" end
  local home = os.getenv("HOME")
  if home and home:sub(1, 1) == "/" then return core.normalize(home .. "/.local/state/hcp") end
  return nil
end

--- Where the persisted jail of a principal and pack lives, and its lock.
--- The lock's name starts with a dot, which no pack name can: packs `x`
--- and `x.lock` cannot meet.
---@param state_dir string
---@param principal string
---@param pack string
---@return string jail, string lockfile
function M.persisted_paths(state_dir, principal, pack)
  local base = state_dir .. "/workspaces/" .. principal
  return base .. "/" .. pack, base .. "/." .. pack .. ".lock"
end

--- mkdir -p with mode 0700 for each component created.
---@param path string absolute
---@return boolean? ok, string? err
function M.mkdirs(path)
  local cur = ""
  for part in path:gmatch("[^/]+") do
    cur = cur .. "/" .. part
    local kind = core.kind(cur)
    -- a link to a directory is followed: these are paths the operator
    -- configured (a symlinked $HOME, say), not paths a child controls
    local is_dir = kind == "dir" or (kind == "link" and core.kind(cur .. "/.") == "dir")
    if kind == nil then
      local ok, err = core.mkdir(cur)
      if not ok and core.kind(cur) ~= "dir" then return nil, err end
    elseif not is_dir then
      return nil, cur .. ": not a directory"
    end
  end
  return true
end

return M
