--- Pack manifests (`hcp.json`, contract §1): reading, validation, discovery.
---
--- Validation collects every problem rather than stopping at the first, so
--- `hcp validate` can list them all. Each problem names the file and the
--- field at fault. Unknown top-level fields are ignored (the rest of the HCP
--- specification may define more), but unknown fields inside the parts this
--- runtime executes (`wrap`, `wrap.workspace`, `wrap.limits`, ops, bindings,
--- mocks) are errors: a typo there would silently change what runs.
---@class hcp.manifest
local M = {}

local core = require("hcp.core")
local json = require("hcp.json")

local MANIFEST = "hcp.json"

---@class hcp.Problem
---@field file string   path of the manifest (or pack dir) at fault
---@field field string  dotted field name, "" for the whole file
---@field message string

---@class hcp.Pack
---@field name string
---@field root string          absolute pack root
---@field file string          absolute path of hcp.json
---@field version string?
---@field class string
---@field description string?
---@field wrap table
---@field ops table<string, table>
---@field bindings table<string, table>
---@field mocks table<string, table>
---@field privacy table?

local NAME_PAT = "^[a-z0-9][a-z0-9._%-]*$"
local OP_PAT = "^[A-Za-z0-9][A-Za-z0-9_%-]*$"
local ENV_PAT = "^[A-Za-z_][A-Za-z0-9_]*$"
local PARAM_TYPES = { string = true, number = true, boolean = true }

M.DEFAULT_TIMEOUT_MS = 30000
-- A manifest larger than this is a load error for that pack (a FIFO, a
-- device or /dev/zero as hcp.json is one too): loading never blocks.
M.MAX_MANIFEST_BYTES = 1024 * 1024
M.DEFAULT_FILE_FLAGS = { "--file", "--json-file", "--output", "-o", "--env-file" }
M.WORKSPACE_MODES = { none = true, ephemeral = true, workspace = true }
M.LIMIT_KEYS = { cpu_s = true, memory_mb = true, file_mb = true, nofile = true, procs = true }

--- Whether `name` is a valid environment variable name.
---@param name any
---@return boolean
function M.is_env_name(name)
  return type(name) == "string" and name:match(ENV_PAT) ~= nil
end

--- Variables no manifest may set through agent_env or a binding: the sandbox
--- marker, the fixed PATH, and every variable that makes a program load code
--- (LD_PRELOAD, GCONV_PATH, BASH_ENV, …: hcp.envrules has the list).
---@param name string
---@param value string? the value agent_env gives it ("" and "/dev/null" turn a loader off)
---@return string? reason
function M.reserved_env(name, value)
  if name == "HCP_SANDBOX" then return "is set by the runtime" end
  if name == "PATH" then return "is fixed by the runtime (search_path)" end
  return require("hcp.envrules").reason(name, value)
end

local function is_array(t)
  if type(t) ~= "table" then return false end
  local n = #t
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

local function is_object(t)
  if type(t) ~= "table" then return false end
  if next(t) == nil then return true end -- {} is both; accept as object
  return not is_array(t)
end

local function has_nul(s)
  return s:find("\0", 1, true) ~= nil
end

--- Validate a decoded manifest. Returns the pack (normalised, defaults
--- applied) and the list of problems; the pack is nil when there are any.
---@param doc any decoded JSON
---@param file string path of the manifest, for messages
---@param root string absolute pack root
---@return hcp.Pack? pack, hcp.Problem[] problems
function M.validate(doc, file, root)
  local problems = {}
  local function bad(field, fmt, ...)
    problems[#problems + 1] = { file = file, field = field, message = string.format(fmt, ...) }
  end
  local function check_fields(t, field, allowed)
    for k in pairs(t) do
      if not allowed[k] then bad(field == "" and tostring(k) or field .. "." .. tostring(k), "unknown field") end
    end
  end

  if not is_object(doc) or doc == json.null then
    bad("", "manifest must be a JSON object")
    return nil, problems
  end

  if doc.hcp ~= 1 then bad("hcp", "must be the integer 1, got %s", tostring(doc.hcp)) end

  local name = doc.name
  if type(name) ~= "string" then
    bad("name", "required string")
  elseif #name > 64 or not name:match(NAME_PAT) then
    bad("name", "%q does not match ^[a-z0-9][a-z0-9._-]{0,63}$", name)
  end

  if doc.version ~= nil and type(doc.version) ~= "string" then bad("version", "must be a string") end
  if doc.description ~= nil and type(doc.description) ~= "string" then bad("description", "must be a string") end
  local class = doc.class
  if class == nil then class = "wrap" end
  if class ~= "wrap" then bad("class", "unsupported class %q (only \"wrap\")", tostring(class)) end
  if doc.privacy ~= nil and not is_object(doc.privacy) then bad("privacy", "must be an object") end

  -- bindings first: agent_env and ops refer to them
  local bindings = {}
  local binding_env = {}
  if doc.bindings ~= nil then
    if not is_object(doc.bindings) then
      bad("bindings", "must be an object")
    else
      for bname, b in pairs(doc.bindings) do
        local f = "bindings." .. tostring(bname)
        if not is_object(b) then
          bad(f, "must be an object")
        else
          check_fields(b, f, { family = true, env = true, as = true, description = true })
          if type(b.family) ~= "string" or b.family == "" then bad(f .. ".family", "required string") end
          local as = b.as == nil and "env" or b.as
          if as ~= "env" and as ~= "file" then bad(f .. ".as", "must be \"env\" or \"file\", got %s", tostring(b.as)) end
          if not M.is_env_name(b.env) then
            bad(f .. ".env", "required environment variable name")
          else
            local why = M.reserved_env(b.env)
            if why then bad(f .. ".env", "%s %s", b.env, why) end
            if binding_env[b.env] then bad(f .. ".env", "%s is already used by binding %q", b.env, binding_env[b.env]) end
            binding_env[b.env] = bname
          end
          bindings[bname] = { name = bname, family = b.family, env = b.env, as = as }
        end
      end
    end
  end

  local wrap = doc.wrap
  local w = {}
  if not is_object(wrap) or next(wrap) == nil then
    bad("wrap", "required object")
  else
    check_fields(wrap, "wrap", { bin = true, args = true, agent_env = true, timeout_ms = true,
      workspace = true, network = true, limits = true })
    local bin = wrap.bin
    if type(bin) ~= "string" or bin == "" or has_nul(bin) then
      bad("wrap.bin", "required non-empty string")
    elseif bin:sub(1, 1) == "/" then
      w.bin_kind = "absolute"
    elseif bin:sub(1, 2) == "./" then
      if #bin == 2 then bad("wrap.bin", "\"./\" names no file") end
      w.bin_kind = "relative"
    elseif bin:find("/", 1, true) or bin == "." or bin == ".." then
      bad("wrap.bin", "%q must be a bare name, an absolute path, or start with ./", bin)
    else
      w.bin_kind = "bare"
    end
    w.bin = bin

    w.args = {}
    if wrap.args ~= nil then
      if not is_array(wrap.args) then
        bad("wrap.args", "must be an array of strings")
      else
        for i, a in ipairs(wrap.args) do
          if type(a) ~= "string" or has_nul(a) then bad("wrap.args[" .. i .. "]", "must be a string without NUL")
          else w.args[i] = a end
        end
      end
    end

    w.agent_env = {}
    if wrap.agent_env ~= nil then
      if not is_object(wrap.agent_env) then
        bad("wrap.agent_env", "must be an object of strings")
      else
        for k, v in pairs(wrap.agent_env) do
          local f = "wrap.agent_env." .. tostring(k)
          if not M.is_env_name(k) then
            bad(f, "not a valid environment variable name")
          elseif type(v) ~= "string" or has_nul(v) then
            bad(f, "value must be a string without NUL")
          else
            local why = M.reserved_env(k, v)
            if why then bad(f, "%s %s", k, why)
            elseif binding_env[k] then bad(f, "%s is the variable of binding %q", k, binding_env[k])
            else w.agent_env[k] = v end
          end
        end
      end
    end

    w.timeout_ms = M.DEFAULT_TIMEOUT_MS
    if wrap.timeout_ms ~= nil then
      local t = wrap.timeout_ms
      if type(t) ~= "number" or t <= 0 or t ~= math.floor(t) or t > 86400000 then
        bad("wrap.timeout_ms", "must be a positive integer of milliseconds (at most 86400000)")
      else
        w.timeout_ms = math.tointeger(t)
      end
    end

    w.network = false
    if wrap.network ~= nil then
      if type(wrap.network) ~= "boolean" then bad("wrap.network", "must be a boolean")
      else w.network = wrap.network end
    end

    w.limits = {}
    if wrap.limits ~= nil then
      if not is_object(wrap.limits) then
        bad("wrap.limits", "must be an object")
      else
        check_fields(wrap.limits, "wrap.limits", M.LIMIT_KEYS)
        for k, v in pairs(wrap.limits) do
          if M.LIMIT_KEYS[k] then
            if type(v) ~= "number" or v <= 0 or v ~= math.floor(v) then
              bad("wrap.limits." .. k, "must be a positive integer")
            else
              w.limits[k] = math.tointeger(v)
            end
          end
        end
      end
    end

    local ws = { mode = "none", file_flags = M.DEFAULT_FILE_FLAGS }
    if wrap.workspace ~= nil then
      local f = "wrap.workspace"
      if not is_object(wrap.workspace) then
        bad(f, "must be an object")
      else
        check_fields(wrap.workspace, f, { mode = true, home_env = true, file_flags = true })
        local wsd = wrap.workspace
        if wsd.mode ~= nil then
          if not M.WORKSPACE_MODES[wsd.mode] then
            bad(f .. ".mode", "must be none, ephemeral or workspace, got %s", tostring(wsd.mode))
          else
            ws.mode = wsd.mode
          end
        end
        if wsd.home_env ~= nil then
          if not is_array(wsd.home_env) then
            bad(f .. ".home_env", "must be an array of variable names")
          else
            ws.home_env = {}
            for i, k in ipairs(wsd.home_env) do
              if not M.is_env_name(k) then bad(f .. ".home_env[" .. i .. "]", "not a variable name")
              elseif M.reserved_env(k) then bad(f .. ".home_env[" .. i .. "]", "%s %s", k, M.reserved_env(k))
              else ws.home_env[i] = k end
            end
          end
        end
        if wsd.file_flags ~= nil then
          if not is_array(wsd.file_flags) then
            bad(f .. ".file_flags", "must be an array of flags")
          else
            ws.file_flags = {}
            for i, fl in ipairs(wsd.file_flags) do
              if type(fl) ~= "string" or not fl:match("^%-%-?[%w][%w_.%-]*$") then
                bad(f .. ".file_flags[" .. i .. "]", "must be a flag such as --file or -o")
              else
                ws.file_flags[i] = fl
              end
            end
          end
        end
      end
    end
    if ws.home_env == nil then
      ws.home_env = ws.mode == "workspace" and { "HOME" } or {}
    end
    w.workspace = ws
  end

  local ops = {}
  if doc.ops ~= nil then
    if not is_object(doc.ops) then
      bad("ops", "must be an object")
    else
      for opname, op in pairs(doc.ops) do
        local f = "ops." .. tostring(opname)
        if type(opname) ~= "string" or #opname > 64 or not opname:match(OP_PAT) then
          bad(f, "op name must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
        elseif not is_object(op) then
          bad(f, "must be an object")
        else
          check_fields(op, f, { args = true, params = true, confirm = true, bindings = true, description = true,
            extra_args = true })
          local o = { name = opname, args = {}, params = {}, confirm = false, bindings = {} }
          if op.extra_args ~= nil and type(op.extra_args) ~= "boolean" then bad(f .. ".extra_args", "must be a boolean") end
          o.extra_args = op.extra_args == true
          if op.params ~= nil then
            if not is_object(op.params) then
              bad(f .. ".params", "must be an object of parameter types")
            else
              for p, ty in pairs(op.params) do
                if type(p) ~= "string" or not p:match("^[%a_][%w_]*$") then
                  bad(f .. ".params." .. tostring(p), "parameter name must match ^[A-Za-z_][A-Za-z0-9_]*$")
                elseif not PARAM_TYPES[ty] then
                  bad(f .. ".params." .. p, "type must be string, number or boolean, got %s", tostring(ty))
                else
                  o.params[p] = ty
                end
              end
            end
          end
          if op.args ~= nil then
            if not is_array(op.args) then
              bad(f .. ".args", "must be an array of strings")
            else
              for i, a in ipairs(op.args) do
                if type(a) ~= "string" or has_nul(a) then
                  bad(f .. ".args[" .. i .. "]", "must be a string without NUL")
                else
                  for p in a:gmatch("{([%a_][%w_]*)}") do
                    if not o.params[p] and not (is_object(op.params) and op.params[p]) then
                      bad(f .. ".args[" .. i .. "]", "placeholder {%s} is not a declared parameter", p)
                    end
                  end
                  o.args[i] = a
                end
              end
            end
          end
          if op.confirm ~= nil then
            if type(op.confirm) ~= "boolean" then bad(f .. ".confirm", "must be a boolean")
            else o.confirm = op.confirm end
          end
          if op.bindings ~= nil then
            if not is_array(op.bindings) then
              bad(f .. ".bindings", "must be an array of binding names")
            else
              for i, bname in ipairs(op.bindings) do
                if type(bname) ~= "string" or not bindings[bname] then
                  bad(f .. ".bindings[" .. i .. "]", "%s is not a binding of this pack", tostring(bname))
                else
                  o.bindings[#o.bindings + 1] = bname
                end
              end
            end
          end
          if op.description ~= nil and type(op.description) ~= "string" then
            bad(f .. ".description", "must be a string")
          end
          o.description = op.description
          ops[opname] = o
        end
      end
    end
  end

  local mocks = {}
  if doc.mocks ~= nil then
    if not is_object(doc.mocks) then
      bad("mocks", "must be an object")
    else
      for key, m in pairs(doc.mocks) do
        local f = "mocks." .. tostring(key)
        if key ~= "*" and key ~= "exec" and not (is_object(doc.ops) and doc.ops[key]) then
          bad(f, "names no op of this pack (use an op name, \"exec\" or \"*\")")
        elseif not is_object(m) then
          bad(f, "must be an object")
        else
          check_fields(m, f, { exit = true, stdout = true, stderr = true })
          local e = m.exit == nil and 0 or m.exit
          if type(e) ~= "number" or e ~= math.floor(e) or e < 0 or e > 255 then
            bad(f .. ".exit", "must be an integer 0..255")
          end
          for _, s in ipairs({ "stdout", "stderr" }) do
            if m[s] ~= nil and type(m[s]) ~= "string" then bad(f .. "." .. s, "must be a string") end
          end
          mocks[key] = { exit = math.tointeger(e) or 0, stdout = m.stdout or "", stderr = m.stderr or "" }
        end
      end
    end
  end

  if #problems > 0 then
    table.sort(problems, function(a, b) return a.field < b.field end)
    return nil, problems
  end
  return {
    name = name, root = root, file = file, version = doc.version, class = class,
    description = doc.description, wrap = w, ops = ops, bindings = bindings,
    mocks = mocks, privacy = doc.privacy,
  }, problems
end

--- Make a path absolute against the process's cwd, lexically.
---@param path string
---@return string
function M.absolute(path)
  if path:sub(1, 1) ~= "/" then
    local cwd = os.getenv("PWD")
    local kind = cwd and core.kind(cwd)
    if kind ~= "dir" then cwd = core.getcwd() end
    path = cwd .. "/" .. path
  end
  return core.normalize(path)
end

--- Load one pack root.
---@param root string pack root (absolute)
---@return hcp.Pack? pack, hcp.Problem[] problems
function M.load(root)
  local file = root .. "/" .. MANIFEST
  local text, err = core.read_file(file, M.MAX_MANIFEST_BYTES)
  if not text then
    return nil, { { file = file, field = "", message = "cannot read: " .. tostring(err) } }
  end
  local doc, jerr = json.decode(text)
  if doc == nil then
    return nil, { { file = file, field = "", message = "invalid JSON: " .. tostring(jerr) } }
  end
  return M.validate(doc, file, root)
end

--- Discover pack roots in one `pack_dirs` entry: the entry itself when it
--- holds hcp.json, else its direct children that do.
---@param dir string
---@return string[] roots, hcp.Problem[] problems
function M.discover(dir)
  local abs = M.absolute(dir)
  local kind = core.kind(abs)
  if kind == "link" then
    -- a link to a pack folder is the operator's choice; follow it once
    kind = core.kind(abs .. "/.") and "dir" or nil
  end
  if kind ~= "dir" then
    return {}, { { file = abs, field = "", message = "pack dir does not exist or is not a directory" } }
  end
  -- a root reached through a symlink is resolved once, here: every later
  -- path check (./bin beneath the root, isolation rules) sees the real one
  abs = core.realpath(abs) or abs
  if core.kind(abs .. "/" .. MANIFEST) then
    return { abs }, {}
  end
  local names, lerr = core.listdir(abs)
  if not names then
    return {}, { { file = abs, field = "", message = "cannot list: " .. tostring(lerr) } }
  end
  local roots = {}
  for _, n in ipairs(names) do
    local sub = abs .. "/" .. n
    if n:sub(1, 1) ~= "." and core.kind(sub .. "/" .. MANIFEST) then
      roots[#roots + 1] = core.realpath(sub) or sub
    end
  end
  return roots, {}
end

--- Format a problem as one line: `manifest: <file>: <field>: <message>`.
---@param p hcp.Problem
---@return string
function M.format_problem(p)
  if p.field == "" then
    return string.format("manifest: %s: %s", p.file, p.message)
  end
  return string.format("manifest: %s: %s: %s", p.file, p.field, p.message)
end

return M
