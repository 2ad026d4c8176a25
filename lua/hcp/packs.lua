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

--- Load every pack of `dirs`.
---@param dirs string[]
---@param lookup string where bare bin names are looked up
---@return hcp.Registry
function M.load(dirs, lookup)
  local reg = { list = {}, by_name = {}, problems = {} }
  for _, dir in ipairs(dirs) do
    local roots, dproblems = manifest.discover(dir)
    append(reg.problems, dproblems)
    for _, root in ipairs(roots) do
      local pack, problems = manifest.load(root)
      append(reg.problems, problems)
      if pack then add(reg, pack, lookup) end
    end
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
