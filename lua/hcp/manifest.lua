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
local check = require("hcp.check")
local report = require("hcp.manifest.report")
local env = require("hcp.manifest.env")
local bindings_section = require("hcp.manifest.bindings")
local wrap = require("hcp.manifest.wrap")
local ws_section = require("hcp.manifest.workspace")
local limits = require("hcp.manifest.limits")
local ops_section = require("hcp.manifest.ops")

local MANIFEST = "hcp.json"

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

M.DEFAULT_TIMEOUT_MS = wrap.DEFAULT_TIMEOUT_MS
-- A manifest larger than this is a load error for that pack (a FIFO, a
-- device or /dev/zero as hcp.json is one too): loading never blocks.
M.MAX_MANIFEST_BYTES = 1024 * 1024
M.DEFAULT_FILE_FLAGS = ws_section.DEFAULT_FILE_FLAGS
M.WORKSPACE_MODES = ws_section.MODES
M.LIMIT_KEYS = limits.KEYS
M.is_env_name = check.is_env_name
M.reserved_env = env.reserved_env

-- The top-level fields this runtime reads; unknown ones are ignored (the
-- rest of the HCP specification may define more).
local function top_level(doc, r)
  if doc.hcp ~= 1 then r:bad("hcp", "must be the integer 1, got %s", tostring(doc.hcp)) end
  local name = doc.name
  if type(name) ~= "string" then
    r:bad("name", "required string")
  elseif not check.is_pack_name(name) then
    r:bad("name", "%q does not match ^[a-z0-9][a-z0-9._-]{0,63}$", name)
  end
  if doc.version ~= nil and type(doc.version) ~= "string" then r:bad("version", "must be a string") end
  if doc.description ~= nil and type(doc.description) ~= "string" then r:bad("description", "must be a string") end
  local class = doc.class == nil and "wrap" or doc.class
  if class ~= "wrap" then r:bad("class", "unsupported class %q (only \"wrap\")", tostring(class)) end
  if doc.privacy ~= nil and not check.is_object(doc.privacy) then r:bad("privacy", "must be an object") end
  return class
end

--- Validate a decoded manifest. Returns the pack (normalised, defaults
--- applied) and the list of problems; the pack is nil when there are any.
--- Each section is its own module (hcp.manifest.*); bindings come first,
--- since wrap.agent_env and ops refer to them.
---@param doc any decoded JSON
---@param file string path of the manifest, for messages
---@param root string absolute pack root
---@return hcp.Pack? pack, hcp.Problem[] problems
function M.validate(doc, file, root)
  local r = report.new(file)
  if not check.is_object(doc) or doc == json.null then
    r:bad("", "manifest must be a JSON object")
    return nil, r.problems
  end
  local class = top_level(doc, r)
  local bindings, binding_env = bindings_section.validate(doc.bindings, r)
  local w = wrap.validate(doc.wrap, r, binding_env)
  local ops = ops_section.validate(doc.ops, r, bindings, w.egress)
  -- the section's module is loaded by the manifests that have one
  local mocks = doc.mocks == nil and {} or require("hcp.manifest.mocks").validate(doc.mocks, r, doc.ops)
  if not r:ok() then return nil, r:sorted() end
  return {
    name = doc.name, root = root, file = file, version = doc.version, class = class,
    description = doc.description, wrap = w, ops = ops, bindings = bindings,
    mocks = mocks, privacy = doc.privacy,
  }, r.problems
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
  local doc, file, problems = M.read(root)
  if doc == nil then return nil, problems end
  return M.validate(doc, file, root)
end

--- Read and decode one pack root's manifest, without validating it.
---@param root string pack root (absolute)
---@return any doc decoded JSON (nil when unreadable or not JSON), string file, hcp.Problem[]? problems
function M.read(root)
  local file = root .. "/" .. MANIFEST
  local text, err = core.read_file(file, M.MAX_MANIFEST_BYTES)
  if not text then
    return nil, file, { { file = file, field = "", message = "cannot read: " .. tostring(err) } }
  end
  local doc, jerr = json.decode(text)
  if doc == nil then
    return nil, file, { { file = file, field = "", message = "invalid JSON: " .. tostring(jerr) } }
  end
  return doc, file
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
