--- The runtime: a registry. It holds the configuration (hcp.options), the
--- loaded packs and their allow-list (hcp.packs), the exec-plane driver
--- and its host, the stronger layers chosen for this host, and the loop
--- that carries calls (hcp.loop). What a call does is hcp.call's: a
--- straight line of stages that sees only the read-only view this module
--- hands it.
---@class hcp.runtime
local M = {}

local core = require("hcp.core")
local options = require("hcp.options")
local packs = require("hcp.packs")
local call = require("hcp.call")
local handle = require("hcp.handle")
local loop = require("hcp.loop")
local isolation = require("hcp.isolation")
local private = require("hcp.private")
local locks = require("hcp.workspace.locks")
local manifest = require("hcp.manifest")
local workspace = require("hcp.workspace")

M.BASE_LAYERS = options.BASE_LAYERS
M.DRIVERS = options.DRIVERS
M.needs_confirm = call.needs_confirm
M.network_allowed = call.network_allowed

---@class hcp.Runtime
---@field mode "sandbox"|"native-local"
local Runtime = {}
Runtime.__index = Runtime
Runtime.__name = "hcp.Runtime"

-- The driver and the stronger layers; a layer asked for by name that this
-- host (or driver) cannot give fails here, before any call.
local function exec_plane(cfg, host)
  local drv, derr = require(M.DRIVERS[cfg.driver]).new(host)
  if not drv then return nil, string.format("hcp.create: driver %q unavailable: %s", cfg.driver, derr) end
  local layers, lerr = isolation.choose(cfg.isolation, cfg.mode, cfg.driver)
  if not layers then return nil, lerr end
  return drv, layers
end

-- The out_dir rules every call is checked against: the configured ones,
-- with the loaded pack roots and the private directory protected too —
-- worked out once, at the first call that needs them.
local function host_refs(self)
  if not self._host_refs then
    local roots = {}
    for i, p in ipairs(self._reg.list) do roots[i] = p.root end
    -- the packs not loaded (option packs) are as much out of a call's reach
    table.move(self._reg.skipped, 1, #self._reg.skipped, #roots + 1, roots)
    self._host_refs = workspace.host_ref_opts(self._cfg.host_cfg, roots, self._host.private:path())
  end
  return self._host_refs
end

--- Validate options and build a runtime. Never raises for bad input.
---@param opts table?
---@return hcp.Runtime? rt, string? err
function M.create(opts)
  local cfg, err = options.read(opts)
  if not cfg then return nil, err end
  local reg = packs.load(cfg.pack_dirs, cfg.lookup, cfg.only)
  if cfg.strict and #reg.problems > 0 then return nil, manifest.format_problem(reg.problems[1]) end
  local host = { state_dir = cfg.state_dir, private = private.new(),
    locks = locks.new(), search_path = cfg.search_path, run_as = cfg.run_as }
  local drv, layers = exec_plane(cfg, host)
  if not drv then return nil, layers end
  -- the audit module is loaded only by a runtime that keeps a log (start-up
  -- loads only what the command uses)
  local log, aerr = false, nil
  if cfg.audit ~= nil then log, aerr = require("hcp.audit").open(cfg.audit) end
  if log == nil then return nil, aerr end
  local self = setmetatable({ mode = cfg.mode, _cfg = cfg, _reg = reg, _host = host, _layers = layers,
    _allowlist = packs.allowlist(cfg.allow_bins, reg), _loop = loop.new(), _closed = false }, Runtime)
  self._env = { mode = cfg.mode, policy = cfg.policy, minters = cfg.minters, allowlist = self._allowlist,
    lookup = cfg.lookup, search_path = cfg.search_path, layers = layers, base_layers = M.BASE_LAYERS,
    driver = drv, max_output = cfg.max_output, max_timeout_ms = cfg.max_timeout_ms, by_name = reg.by_name,
    run_as = cfg.run_as, sockets = cfg.sockets, host_refs = function() return host_refs(self) end,
    egress = cfg.egress_cfg, audit = log or nil }
  return self
end

--- The loaded packs.
---@return { name: string, root: string, bin: string, path: string?, class: string, ops: string[], workspace: string }[]
function Runtime:packs()
  local out = {}
  for i, p in ipairs(self._reg.list) do
    local names = {}
    for n in pairs(p.ops) do names[#names + 1] = n end
    table.sort(names)
    out[i] = { name = p.name, root = p.root, bin = p.wrap.bin, path = p.bin_path, class = p.class,
      ops = names, workspace = p.wrap.workspace.mode, description = p.description, version = p.version }
  end
  return out
end

--- The tool list for agents (contract §8, hcp.tools): one MCP-shaped entry
--- per op the policy allows, with a JSON Schema of its params.
---@param opts { exec: boolean?, all: boolean? }?
---@return hcp.Tool[]
function Runtime:tools(opts)
  return require("hcp.tools").list(self._reg.list, self._cfg.policy, opts)
end

--- Every problem found while loading packs (a bad manifest never silently
--- disappears).
---@return hcp.Problem[]
function Runtime:problems()
  local out = {}
  for i, p in ipairs(self._reg.problems) do out[i] = { file = p.file, field = p.field, message = p.message } end
  return out
end

--- The allow-list in force.
---@return string[]
function Runtime:allowlist()
  return table.move(self._allowlist, 1, #self._allowlist, 1, {})
end

--- The layers applied to every spawn of this runtime.
---@return string[]
function Runtime:layers()
  local out = table.move(M.BASE_LAYERS, 1, #M.BASE_LAYERS, 1, {})
  for _, l in ipairs(isolation.LAYERS) do
    if self._layers[l] then out[#out + 1] = l end
  end
  return out
end

--- The name of the exec-plane driver in force ("local" or "bwrap").
---@return string
function Runtime:driver()
  return self._cfg.driver
end

local function closed_call(self, req)
  return call.refused(self._env, req, 126, "spawn: runtime is closed")
end

--- Start a call without waiting for it. Refusals come back already
--- finished; a workspace call whose jail another call holds waits for it.
---@param env_in hcp.Request|table
---@param opts hcp.CallOptions? callbacks, streaming, tees
---@return hcp.Handle
function Runtime:start(env_in, opts)
  local c = self._closed and closed_call(self, env_in) or call.from_envelope(self._env, env_in, opts)
  self._loop:add(c)
  return handle.start(c, self._loop)
end

--- Run one call and return its result envelope. Never raises for a refused
--- call: refusals are results with `ok = false`.
---@param env_in hcp.Request|table
---@param opts hcp.CallOptions?
---@return hcp.Result
function Runtime:call(env_in, opts)
  return (self:start(env_in, opts):wait())
end

--- Direct spawn for orchestrating scripts, under the same rules as a call:
--- allow-list, the named pack's jail (or a fresh private directory), a
--- clean environment, host-path rules. No op, no bindings, no policy.
---@param spec { bin: string, args: string[]?, stdin: string?, pack: string?, timeout_ms: integer?, id: any }
---@return hcp.Result
function Runtime:exec(spec)
  local c = self._closed and closed_call(self, spec) or call.from_exec(self._env, spec)
  self._loop:add(c)
  return (handle.new(c, self._loop):wait())
end

--- Run several calls concurrently, at most `concurrency` at a time
--- (default: all); results in the same order.
---@param list (hcp.Request|table)[]
---@param opts { concurrency: integer? }?
---@return hcp.Result[]
function Runtime:call_all(list, opts)
  local limit = opts and opts.concurrency
  if limit ~= nil and (math.type(limit) ~= "integer" or limit < 1) then
    error("call_all: concurrency must be a positive integer", 2)
  end
  limit = limit or math.huge
  local handles, results, started, finished = {}, {}, 0, 0
  -- leaving by an error (Ctrl-C in the REPL) kills every child of the batch
  local guard <close> = setmetatable({}, { __close = function(_, err) -- luacheck: no unused
    if err ~= nil then for _, h in pairs(handles) do h:__close() end end
  end })
  while finished < #list do
    while started < #list and started - finished < limit do
      started = started + 1
      handles[started] = self:start(list[started])
    end
    local progressed = false
    for i, h in pairs(handles) do
      if h:result() then results[i], handles[i], finished, progressed = h:result(), nil, finished + 1, true end
    end
    if not progressed then self._loop:step() end
  end
  return results
end

--- One descriptor that becomes readable when any call of this runtime
--- needs service (output, an exit, a timer): watch it in an event loop and
--- call `rt:step(0)` when it is readable.
---@return integer? fd
function Runtime:pollfd()
  return self._loop:pollfd()
end

--- Service this runtime's calls, waiting up to `timeout_s` seconds (nil:
--- until something happens) — callbacks fire, finished calls complete.
--- Returns the number of calls that finished.
---@param timeout_s number?
---@return integer
function Runtime:step(timeout_s)
  if timeout_s ~= nil and (type(timeout_s) ~= "number" or timeout_s < 0) then
    error("step: timeout must be a non-negative number of seconds", 2)
  end
  return self._loop:step(timeout_s)
end

--- Kill what is still running and remove this runtime's private
--- directories. Idempotent; also run by __gc and __close.
function Runtime:close()
  if self._closed then return end
  self._closed = true
  self._loop:close(self._collecting)
  core.reap_late() -- the hcp-inits of calls that ended on their report, if still exiting
  core.netns_prefill_cancel() -- a namespace made ahead that no call took
  self._host.private:remove()
  if self._env.audit then self._env.audit:close() end
end

function Runtime:__tostring()
  return string.format("hcp.Runtime %s, %d packs%s", self.mode, #self._reg.list, self._closed and ", closed" or "")
end

function Runtime:__gc()
  self._collecting = true
  self:close()
end
Runtime.__close = Runtime.close

M.Runtime = Runtime
return M
