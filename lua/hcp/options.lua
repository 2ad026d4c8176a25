--- The options of `hcp.create` (contract §5): each read once, type-checked,
--- and turned into the runtime's configuration. An unknown option or a
--- wrong type is an error naming the option, never silently ignored.
---@class hcp.options
local M = {}

local core = require("hcp.core")
local check = require("hcp.check")
local sandbox = require("hcp.sandbox")
local policy = require("hcp.policy")
local bindings = require("hcp.bindings")
local isolation = require("hcp.isolation")
local workspace = require("hcp.workspace")
local egress = require("hcp.egress")

M.DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024
-- Layers every spawn gets from the C core and the runtime (§10.2); named
-- in each result's `isolation` field.
M.BASE_LAYERS = { "allowlist", "jail", "clean_env", "close_fds", "setsid", "no_new_privs" }
-- §10.6: the exec-plane drivers; packs never name one.
M.DRIVERS = { ["local"] = "hcp.driver.local", bwrap = "hcp.driver.bwrap" }

local TYPES = {
  pack_dirs = "table", packs = "table", sandbox = "boolean", native_local = "boolean", allow_bins = "table",
  bindings = "table", policy = "table", isolation = "any", state_dir = "string",
  search_path = "string", out_dir = "string", driver = "string", strict = "boolean",
  max_output = "number", max_timeout_ms = "number", run_as = "table", sockets = "table",
  -- the out_dir rules (hcp.workspace.host_config)
  replace = "boolean", allow_hidden = "boolean", max_writeback = "number", protect = "table",
  -- egress per binding (hcp.egress) and the audit log (hcp.audit)
  network = "string", egress = "table", resolve = "table", audit = "string",
}

local function fail(fmt, ...)
  return nil, "hcp.create: " .. string.format(fmt, ...)
end

local function check_types(opts)
  for _, k in ipairs(check.sorted_keys(opts)) do
    local want = TYPES[k]
    if not want then return fail("unknown option %q", k) end
    if want ~= "any" and type(opts[k]) ~= want then
      return fail("option %q must be a %s, got %s", k, want, type(opts[k]))
    end
  end
  return true
end

local function check_isolation(iso)
  if iso == nil or iso == "auto" or iso == "minimal" then return iso or "auto" end
  if type(iso) == "string" then
    return fail("option \"isolation\" must be \"auto\", \"minimal\" or a list of layers, got %q", iso)
  end
  local ok, err = check.string_list(iso, "hcp.create: option \"isolation\"")
  if not ok then return nil, err end
  local known = {}
  for _, l in ipairs(M.BASE_LAYERS) do known[l] = true end
  for _, l in ipairs(isolation.LAYERS) do known[l] = true end
  for _, layer in ipairs(iso) do
    if not known[layer] then return fail("unknown isolation layer %q", layer) end
  end
  return iso
end

local function check_allow_bins(list)
  if list == nil then return true end
  local ok, err = check.string_list(list, "hcp.create: option \"allow_bins\"")
  if not ok then return nil, err end
  for i, e in ipairs(list) do
    if not sandbox.valid_entry(e) then return fail("allow_bins[%d]: %q is neither a bare name nor an absolute path", i, e) end
  end
  return true
end

local function check_paths(opts)
  for _, k in ipairs({ "state_dir", "out_dir" }) do
    if opts[k] ~= nil and opts[k]:sub(1, 1) ~= "/" then return fail("option %q must be an absolute path", k) end
  end
  return true
end

local function positive(opts, k, dflt)
  if opts[k] == nil then return dflt end
  return check.positive_integer(opts[k]) or fail("option %q must be a positive integer", k)
end

---@class hcp.Config
---@field mode "sandbox"|"native-local"
---@field search_path string
---@field lookup string         where bare bin names are looked up
---@field allow_bins string[]?
---@field minters table<string, function>
---@field policy table
---@field isolation "auto"|"minimal"|string[]
---@field driver string
---@field state_dir string?
---@field out_dir string?     where host file references are staged from and written back to (none: refused)
---@field host_cfg hcp.HostConfig the out_dir rules: replace, allow_hidden, max_writeback, protected paths
---@field egress_cfg table the operator's network word: network, egress.allow/deny, resolve (hcp.egress.options)
---@field audit string? where the audit log is appended
---@field max_output integer
---@field max_timeout_ms integer? the most a request's timeout_ms may ask for (default: the pack's own)
---@field pack_dirs string[]
---@field only table<string, true>? option packs: the names to load, nil for all
---@field strict boolean
---@field run_as { uid: integer, gid: integer } whom a root runtime's child runs as
---@field sockets table<string, string[]> unix socket paths the operator grants, per pack or "*"

--- Validate `opts` into a configuration. Never raises for bad input.
---@param opts any
---@return hcp.Config? cfg, string? err
function M.read(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then return fail("options must be a table") end
  local steps = { check_types, check_paths, function(o) return check_allow_bins(o.allow_bins) end }
  for _, step in ipairs(steps) do
    local ok, err = step(opts)
    if not ok then return nil, err end
  end
  local cfg = { mode = sandbox.mode(opts.sandbox, opts.native_local), allow_bins = opts.allow_bins,
    strict = opts.strict == true, driver = opts.driver or "local" }
  local err
  cfg.search_path, err = sandbox.check_search_path(opts.search_path or sandbox.DEFAULT_SEARCH_PATH)
  if not cfg.search_path then return nil, err end
  cfg.lookup = sandbox.lookup_path(cfg.mode, cfg.search_path)
  cfg.minters, err = bindings.new(opts.bindings)
  if not cfg.minters then return nil, err end
  cfg.policy, err = policy.new(opts.policy)
  if not cfg.policy then return nil, err end
  cfg.isolation, err = check_isolation(opts.isolation)
  if not cfg.isolation then return nil, err end
  -- whom a root runtime's child runs as; the unix sockets packs may reach
  cfg.run_as, cfg.sockets = isolation.check_options(opts)
  if not cfg.run_as then return nil, cfg.sockets end
  if not M.DRIVERS[cfg.driver] then return fail("unknown driver %q (\"local\" or \"bwrap\")", cfg.driver) end
  cfg.max_output, err = positive(opts, "max_output", M.DEFAULT_MAX_OUTPUT)
  if not cfg.max_output then return nil, err end
  cfg.max_timeout_ms, err = positive(opts, "max_timeout_ms", false)
  if cfg.max_timeout_ms == nil then return nil, err end
  cfg.max_timeout_ms = cfg.max_timeout_ms or nil
  -- like the commands, but without their ./packs fallback: a library does not look in the cwd
  cfg.pack_dirs = opts.pack_dirs or require("hcp.config").env_pack_dirs() or {}
  local ok, perr = check.string_list(cfg.pack_dirs, "hcp.create: option \"pack_dirs\"")
  if not ok then return nil, perr end
  -- only these packs of pack_dirs (hcp run loads the one it calls)
  if opts.packs then
    ok, perr = check.string_list(opts.packs, "hcp.create: option \"packs\"")
    if not ok then return nil, perr end
    cfg.only = {}
    for _, name in ipairs(opts.packs) do cfg.only[name] = true end
  end
  cfg.state_dir = opts.state_dir and core.normalize(opts.state_dir)
  -- where relative --output/-o values are written back and inputs staged
  -- from: none unless the operator says (hcp run/call use the cwd)
  cfg.out_dir = opts.out_dir and core.normalize(opts.out_dir)
  cfg.host_cfg, err = workspace.host_config(opts, cfg.out_dir, cfg.state_dir)
  if not cfg.host_cfg then return nil, err end
  cfg.egress_cfg, err = egress.options(opts)
  if not cfg.egress_cfg then return nil, err end
  cfg.audit = opts.audit
  -- an output must never replace the audit log
  if cfg.audit then cfg.host_cfg.protected[#cfg.host_cfg.protected + 1] = cfg.audit end
  return cfg
end

return M
