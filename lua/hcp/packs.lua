--- The pack registry of a runtime: every `pack_dirs` entry discovered and
--- loaded, each pack's bin resolved once (§10.2.1), and every problem kept —
--- a manifest that fails to load never silently disappears, and never stops
--- the other packs from loading (contract §1).
---@class hcp.packs
local M = {}

local manifest = require("hcp.manifest")
local sandbox = require("hcp.sandbox")

---@class hcp.Registry
---@field list hcp.Pack[]           in load order
---@field by_name table<string, hcp.Pack>
---@field problems hcp.Problem[]
---@field skipped string[]          roots of packs not asked for (option packs): protected all the same

-- Resolve once, at load: a bin planted later earlier in a path cannot
-- change what an allow-listed name means.
local function resolve_bin(pack, lookup)
  local r, _, err = sandbox.resolve(pack.wrap.bin, { lookup = lookup, root = pack.root })
  if r then
    pack.bin_path, pack.beneath, pack.argv0 = r.path, r.beneath, r.argv0
  else
    pack.bin_error = err
  end
  return err
end

local function add(reg, pack, lookup)
  local other = reg.by_name[pack.name]
  if other then
    reg.problems[#reg.problems + 1] = { file = pack.file, field = "name",
      message = string.format("pack %q is already loaded from %s", pack.name, other.root) }
    return
  end
  local err = resolve_bin(pack, lookup)
  if err then reg.problems[#reg.problems + 1] = { file = pack.file, field = "wrap.bin", message = err } end
  reg.list[#reg.list + 1] = pack
  reg.by_name[pack.name] = pack
end

local function append(list, items)
  for _, p in ipairs(items) do list[#list + 1] = p end
end

-- One root: validated and added, unless `only` names packs and the
-- manifest's name is not one of them (or is taken already: the first valid
-- pack of a name wins, as when all are loaded). A manifest that cannot be
-- read or decoded could be any pack's: its problem is kept either way.
local function load_root(reg, root, lookup, only)
  local doc, file, problems = manifest.read(root)
  if doc == nil then
    append(reg.problems, problems)
    return
  end
  -- a manifest without a name of its own could be the one asked for: it is
  -- validated, and its problems kept
  local named = type(doc) == "table" and type(doc.name) == "string"
  if only and named and (not only[doc.name] or reg.by_name[doc.name]) then
    reg.skipped[#reg.skipped + 1] = root
    return
  end
  local pack
  pack, problems = manifest.validate(doc, file, root)
  append(reg.problems, problems)
  if pack then add(reg, pack, lookup) end
end

--- Load the packs of `dirs`: every one, or those `only` names.
---@param dirs string[]
---@param lookup string where bare bin names are looked up
---@param only table<string, true>? the names to load (nil: all)
---@return hcp.Registry
function M.load(dirs, lookup, only)
  local reg = { list = {}, by_name = {}, problems = {}, skipped = {} }
  for _, dir in ipairs(dirs) do
    local roots, dproblems = manifest.discover(dir)
    append(reg.problems, dproblems)
    for _, root in ipairs(roots) do load_root(reg, root, lookup, only) end
  end
  return reg
end

--- The allow-list: the seed (or `allow_bins`), plus every loaded pack's bin
--- (its resolved absolute path when the bin is `./rel`).
---@param allow_bins string[]?
---@param reg hcp.Registry
---@return string[]
function M.allowlist(allow_bins, reg)
  return sandbox.allowlist(allow_bins, reg.list)
end

return M
