--- The runtime: loads packs, answers envelopes, spawns through the C core.
---
--- Every call goes through the same straight line, and every refusal
--- happens before anything is copied into a jail or spawned:
---   validate envelope → find pack/op → policy → params → argv → (mock) →
---   bin resolved + allow-listed → host paths → file references planned →
---   driver: prepare jail → rewriteArgv (staging) → bindings minted →
---   environment → isolation layers → driver: spawn → wait →
---   driver: writeback → cleanup → result.
---@class hcp.runtime
local M = {}

local core = require("hcp.core")
local manifest = require("hcp.manifest")
local envelope = require("hcp.envelope")
local sandbox = require("hcp.sandbox")
local policy_mod = require("hcp.policy")
local bindings_mod = require("hcp.bindings")
local ops = require("hcp.ops")
local workspace = require("hcp.workspace")
local isolation = require("hcp.isolation")

local DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024

-- Layers every spawn gets from the C core and this module (§10.2); named in
-- each result's `isolation` field.
M.BASE_LAYERS = { "allowlist", "jail", "clean_env", "close_fds", "setsid", "no_new_privs" }

-- §10.6: the exec-plane drivers; packs never name one.
M.DRIVERS = { ["local"] = "hcp.driver.local", bwrap = "hcp.driver.bwrap" }

local OPTIONS = {
  pack_dirs = "table", sandbox = "boolean", native_local = "boolean", allow_bins = "table",
  bindings = "table", policy = "table", isolation = "any", state_dir = "string",
  search_path = "string", out_dir = "string", driver = "string", strict = "boolean",
  max_output = "number",
  -- issue 11: the out_dir rules
  replace = "boolean", allow_hidden = "boolean", max_writeback = "number", protect = "table",
}

---@class hcp.Runtime
---@field mode "sandbox"|"native-local"
local Runtime = {}
Runtime.__index = Runtime
Runtime.__name = "hcp.Runtime"

local function list_of_strings(v, what)
  if type(v) ~= "table" then return nil, what .. " must be an array of strings" end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  if n ~= #v then return nil, what .. " must be an array of strings" end
  for i, s in ipairs(v) do
    if type(s) ~= "string" then return nil, string.format("%s[%d] must be a string", what, i) end
  end
  return v
end

local function check_isolation(iso)
  if iso == nil or iso == "auto" or iso == "minimal" then return iso or "auto" end
  if type(iso) == "string" then
    return nil, string.format("hcp.create: option \"isolation\" must be \"auto\", \"minimal\" or a list of layers, got %q", iso)
  end
  local ok, err = list_of_strings(iso, "hcp.create: option \"isolation\"")
  if not ok then return nil, err end
  local known = {}
  for _, l in ipairs(M.BASE_LAYERS) do known[l] = true end
  for _, l in ipairs(isolation.LAYERS) do known[l] = true end
  for _, layer in ipairs(iso) do
    if not known[layer] then return nil, string.format("hcp.create: unknown isolation layer %q", layer) end
  end
  return iso
end

--- Validate options and build a runtime. Never raises for bad input.
---@param opts table?
---@return hcp.Runtime? rt, string? err
function M.create(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then return nil, "hcp.create: options must be a table" end
  for k, v in pairs(opts) do
    local want = OPTIONS[k]
    if not want then return nil, string.format("hcp.create: unknown option %q", tostring(k)) end
    if want ~= "any" and type(v) ~= want then
      return nil, string.format("hcp.create: option %q must be a %s, got %s", k, want, type(v))
    end
  end

  local self = setmetatable({}, Runtime)
  self.mode = sandbox.mode(opts.sandbox, opts.native_local)

  local search_path = opts.search_path or sandbox.DEFAULT_SEARCH_PATH
  local sp, sperr = sandbox.check_search_path(search_path)
  if not sp then return nil, sperr end
  self.search_path = sp
  self.lookup = sandbox.lookup_path(self.mode, sp)

  if opts.allow_bins ~= nil then
    local ok, err = list_of_strings(opts.allow_bins, "hcp.create: option \"allow_bins\"")
    if not ok then return nil, err end
    for i, e in ipairs(opts.allow_bins) do
      if not sandbox.valid_entry(e) then
        return nil, string.format("hcp.create: allow_bins[%d]: %q is neither a bare name nor an absolute path", i, e)
      end
    end
  end

  local minters, berr = bindings_mod.new(opts.bindings)
  if not minters then return nil, berr end
  self.minters = minters

  local pol, perr = policy_mod.new(opts.policy)
  if not pol then return nil, perr end
  self.policy = pol

  local iso, ierr = check_isolation(opts.isolation)
  if not iso then return nil, ierr end
  self.isolation = iso

  local driver_name = opts.driver or "local"
  if not M.DRIVERS[driver_name] then
    return nil, string.format("hcp.create: unknown driver %q (\"local\" or \"bwrap\")", driver_name)
  end

  for _, k in ipairs({ "state_dir", "out_dir" }) do
    if opts[k] ~= nil and opts[k]:sub(1, 1) ~= "/" then
      return nil, string.format("hcp.create: option %q must be an absolute path", k)
    end
  end
  self.state_dir = opts.state_dir and core.normalize(opts.state_dir)
  -- where relative --output/-o values are written back and inputs staged
  -- from: none unless the operator says (issue 11; hcp run/call use the cwd)
  self.out_dir = opts.out_dir and core.normalize(opts.out_dir)
  self._ws_busy = {}
  -- issue 11: replace, allow_hidden, max_writeback, protect
  local host, herr = workspace.host_config(opts, self.out_dir, self.state_dir)
  if not host then return nil, herr end
  self._host = host

  self.max_output = DEFAULT_MAX_OUTPUT
  if opts.max_output ~= nil then
    if opts.max_output < 1 or opts.max_output ~= math.floor(opts.max_output) then
      return nil, "hcp.create: option \"max_output\" must be a positive integer"
    end
    self.max_output = math.tointeger(opts.max_output)
  end

  -- Load packs: each problem is kept, and one bad pack never stops the others
  -- (unless strict).
  local dirs = {}
  if opts.pack_dirs ~= nil then
    local ok, err = list_of_strings(opts.pack_dirs, "hcp.create: option \"pack_dirs\"")
    if not ok then return nil, err end
    dirs = opts.pack_dirs
  end
  self._problems, self._packs, self._by_name = {}, {}, {}
  for _, dir in ipairs(dirs) do
    local roots, dproblems = manifest.discover(dir)
    for _, p in ipairs(dproblems) do self._problems[#self._problems + 1] = p end
    for _, root in ipairs(roots) do
      local pack, problems = manifest.load(root)
      for _, p in ipairs(problems) do self._problems[#self._problems + 1] = p end
      if pack then
        if self._by_name[pack.name] then
          self._problems[#self._problems + 1] = { file = pack.file, field = "name",
            message = string.format("pack %q is already loaded from %s", pack.name, self._by_name[pack.name].root) }
        else
          -- resolve once, at start-up: a bin planted later earlier in a path
          -- cannot change what an allow-listed name means
          local path, rerr = sandbox.resolve_pack_bin(pack, self.lookup)
          pack.bin_path, pack.bin_error = path, rerr
          if not path then
            self._problems[#self._problems + 1] = { file = pack.file, field = "wrap.bin", message = rerr }
          end
          self._packs[#self._packs + 1] = pack
          self._by_name[pack.name] = pack
        end
      end
    end
  end
  if opts.strict and #self._problems > 0 then
    return nil, manifest.format_problem(self._problems[1])
  end

  self._allowlist = sandbox.allowlist(opts.allow_bins, self._packs)
  self._running = setmetatable({}, { __mode = "k" })
  self._closed = false

  local drv, derr = require(M.DRIVERS[driver_name]).new(self)
  if not drv then return nil, string.format("hcp.create: driver %q unavailable: %s", driver_name, derr) end
  self.driver = drv
  -- §10.4: the stronger layers, chosen once; a layer asked for by name that
  -- this host (or driver) cannot give fails here, before any call
  local layers, lerr = isolation.choose(self.isolation, self.mode, driver_name)
  if not layers then return nil, lerr end
  self._layers = layers
  return self
end

--- The loaded packs.
---@return { name: string, root: string, bin: string, path: string?, class: string, ops: string[], workspace: string }[]
function Runtime:packs()
  local out = {}
  for i, p in ipairs(self._packs) do
    local names = {}
    for n in pairs(p.ops) do names[#names + 1] = n end
    table.sort(names)
    out[i] = { name = p.name, root = p.root, bin = p.wrap.bin, path = p.bin_path, class = p.class,
      ops = names, workspace = p.wrap.workspace.mode, description = p.description, version = p.version }
  end
  return out
end

--- Every problem found while loading packs (a bad manifest never silently
--- disappears).
---@return hcp.Problem[]
function Runtime:problems()
  local out = {}
  for i, p in ipairs(self._problems) do out[i] = { file = p.file, field = p.field, message = p.message } end
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

-- issue 11: the out_dir rules for this runtime's calls (workspace.host_ref_opts)
function Runtime:_host_ref_opts()
  local roots = {}
  for i, pack in ipairs(self._packs or {}) do roots[i] = pack.root end
  return workspace.host_ref_opts(self._host, roots, self._private)
end

-- A private directory of this runtime (0700), for minted credential files
-- and pack-less exec jails; removed by close().
function Runtime:_private_dir()
  if self._private then return self._private end
  local tmp = os.getenv("TMPDIR")
  if not tmp or tmp:sub(1, 1) ~= "/" or core.kind(tmp) ~= "dir" then tmp = "/tmp" end
  local dir, err = core.mkdtemp(tmp, "hcp-rt-")
  if not dir then return nil, err end
  self._private = dir
  return dir
end

-- A pending call: already finished (a refusal or a mock) or a running child
-- with its driver context.
local Pending = {}
Pending.__index = Pending

local function finished(result)
  return setmetatable({ result = result }, Pending)
end

--- Wait for the call's result: the child's end, then the driver's write-back
--- and cleanup.
---@return hcp.Result
function Pending:wait()
  if self.result then return self.result end
  -- leaving by an error (Ctrl-C in the REPL raises from a hook) kills the
  -- child at once rather than at garbage collection
  local guard <close> = setmetatable({}, { __close = function(_, err) -- luacheck: no unused
    if err ~= nil and not self.result then
      self.proc:kill("KILL")
      self.proc:wait()
      self:_cleanup()
    end
  end })
  local r, why = self.proc:wait()
  while not r and why == "interrupted" do r, why = self.proc:wait() end
  if not r then error("hcp: wait failed: " .. tostring(why)) end
  r = self.driver:result(self.ctx, r)
  local files, werr = self.driver:writeback(self.ctx, r)
  local res = envelope.from_run(self.req, r, self.mode, self.layers, files, self.timeout_ms, core.signame)
  if self.ctx.files_truncated then res.files_truncated = true end -- issue 11
  if werr then
    res.ok = false
    res.error = res.error and (res.error .. "; " .. werr) or werr
  end
  self.result = res
  self:_cleanup()
  return res
end

function Pending:_cleanup()
  if self.ctx then self.driver:cleanup(self.ctx) end
  if self.rt then self.rt._running[self] = nil end
end

local function count_nul(argv)
  for i, a in ipairs(argv) do
    if a:find("\0", 1, true) then return i end
  end
  return nil
end

--- Whether a call needs `policy.confirm`: an op with `confirm: true`; and a
--- raw-args call (`pack.exec`) of a pack any of whose ops needs it — the
--- raw call is the whole CLI and mints every binding, so it must not be the
--- way around a confirmation.
---@param pack hcp.Pack
---@param op table?
---@return boolean
function M.needs_confirm(pack, op)
  if op then return op.confirm end
  for _, o in pairs(pack.ops) do
    if o.confirm then return true end
  end
  return false
end

--- §10.4 per-family egress: a pack may reach the network when it says
--- `wrap.network: true` or has a binding of family http.
---@param pack hcp.Pack?
---@return boolean
function M.network_allowed(pack)
  if not pack then return false end
  if pack.wrap.network then return true end
  for _, b in pairs(pack.bindings) do
    if b.family == "http" then return true end
  end
  return false
end

---@class hcp.Launch
---@field req table         the request (for its id)
---@field pack hcp.Pack?
---@field ws_mode string    workspace mode
---@field file_flags string[]
---@field argv0 string
---@field argv string[]     arguments after argv[0], before any rewriting
---@field bin_path string
---@field beneath string?
---@field agent_env table<string, string>
---@field home_env string[]
---@field bindings string[] binding names to mint
---@field opname string
---@field stdin string?
---@field timeout_ms integer
---@field copts hcp.CallOptions

-- What call and exec share once the bin is allowed: the argument rules,
-- the driver's stages, bindings, the environment, the spawn. Every refusal
-- happens before the driver copies anything in or anything is spawned.
function Runtime:_launch(L)
  local mode, req = self.mode, L.req
  local function refuse(exit, msg) return finished(envelope.refusal(req, exit, msg, mode)) end
  local nul = count_nul(L.argv)
  if nul then return refuse(126, string.format("envelope: argument %d contains a NUL byte", nul)) end
  -- the agent's own arguments, before the runtime puts its jail paths in
  if mode == "sandbox" then
    local ok, herr = sandbox.check_host_paths(L.argv)
    if not ok then return refuse(126, herr) end
  end
  -- the plan (pure) and the out_dir rules: a reference that would leave the
  -- jail, or reach what out_dir may not give, is refused before any jail
  -- is made (issue 11: workspace.plan takes no roots; the driver binds)
  local dry, derr = workspace.plan(L.argv, workspace.flags(L.file_flags))
  if not dry then return refuse(126, derr) end
  local hok, herr = workspace.check_host_refs(dry, self:_host_ref_opts())
  if not hok then return refuse(126, herr) end

  local drv = self.driver
  local ctx, perr = drv:prepare({ pack = L.pack, principal = req.principal or "default", mode = L.ws_mode,
    network = M.network_allowed(L.pack) })
  if not ctx then return refuse(126, perr) end
  local function fail(exit, msg)
    drv:cleanup(ctx)
    return refuse(exit, msg)
  end
  local argv, werr = drv:rewriteArgv(ctx, L.argv, L.file_flags)
  if not argv then return fail(126, werr) end

  local minted, merr = bindings_mod.mint(self.minters, L.pack, L.opname, L.bindings, function()
    return drv:scratch(ctx)
  end)
  if not minted then return fail(126, merr) end

  local extra = {}
  for _, k in ipairs(L.home_env) do extra[k] = ctx.jail end
  if self._layers.landlock then
    -- Landlock keeps the child out of /tmp: it gets a private one
    local tmp, terr = drv:tmpdir(ctx)
    if not tmp then return fail(126, "workspace: " .. tostring(terr)) end
    extra.TMPDIR = tmp
  end
  local child_argv = { L.argv0 }
  for _, a in ipairs(argv) do child_argv[#child_argv + 1] = a end

  -- §10.4: this call's layers
  local iso_spec, applied, iso_cleanup = isolation.for_call(self._layers, {
    jail = ctx.jail, scratch = ctx.scratch, pack_root = L.pack and L.pack.root, bin_path = L.bin_path,
    network = ctx.network, limits = L.pack and L.pack.wrap.limits,
  })
  ctx.iso_cleanup = iso_cleanup
  local layers = table.move(M.BASE_LAYERS, 1, #M.BASE_LAYERS, 1, {})
  for _, l in ipairs(applied) do layers[#layers + 1] = l end
  for _, l in ipairs(drv:layers(ctx)) do layers[#layers + 1] = l end
  local proc, err, errno = drv:spawn(ctx, {
    path = L.bin_path, beneath = L.beneath, argv = child_argv,
    env = sandbox.child_env(mode, self.search_path, L.agent_env, minted, extra),
    stdin = L.stdin, timeout_ms = L.timeout_ms, max_output = self.max_output,
    tee_stdout = L.copts.tee_stdout, tee_stderr = L.copts.tee_stderr,
    isolation = next(iso_spec) and iso_spec or nil,
  })
  if not proc then
    return fail(errno == 2 and 127 or 126, tostring(err)) -- ENOENT: not found, like a shell
  end
  local pending = setmetatable({ proc = proc, req = req, mode = mode, layers = layers, ctx = ctx,
    driver = drv, timeout_ms = L.timeout_ms, rt = self }, Pending)
  self._running[pending] = true
  if ctx.key then self._ws_busy[ctx.key] = pending end
  return pending
end

local function mock_result(req, pack, mode)
  local key = req.op or "exec"
  local m = pack.mocks[key] or pack.mocks["*"]
  if not m then
    return envelope.refusal(req, 126, string.format("mock: no fixture for %q", envelope.call_name(req)), mode)
  end
  return envelope.from_run(req, { exit = m.exit, stdout = m.stdout, stderr = m.stderr, ms = 0 },
    mode, {}, {}, nil, core.signame)
end

---@class hcp.CallOptions
---@field tee_stdout integer? an fd of the caller that receives the child's stdout as it comes
---@field tee_stderr integer? the same for stderr

local function check_call_options(copts)
  if copts == nil then return {} end
  if type(copts) ~= "table" then return nil, "envelope: call options must be a table" end
  for k, v in pairs(copts) do
    if k ~= "tee_stdout" and k ~= "tee_stderr" then
      return nil, string.format("envelope: unknown call option %q", tostring(k))
    end
    if math.type(v) ~= "integer" or v < 0 then
      return nil, string.format("envelope: call option %q must be a file descriptor", k)
    end
  end
  return copts
end

--- Start a call without waiting for it. Refusals come back already finished.
---@param env_in hcp.Request|table
---@param copts hcp.CallOptions? how the caller wants the output delivered
---@return table pending with :wait() -> hcp.Result
function Runtime:start(env_in, copts)
  local mode = self.mode
  if self._closed then return finished(envelope.refusal(env_in, 126, "spawn: runtime is closed", mode)) end
  local req, verr = envelope.validate(env_in)
  if not req then return finished(envelope.refusal(env_in, 126, verr, mode)) end
  local cerr
  copts, cerr = check_call_options(copts)
  if not copts then return finished(envelope.refusal(req, 126, cerr, mode)) end
  local function refuse(exit, msg) return finished(envelope.refusal(req, exit, msg, mode)) end

  local pack = self._by_name[req.pack]
  if not pack then return refuse(126, string.format("envelope: no pack named %q", req.pack)) end
  local op
  if req.op then
    op = pack.ops[req.op]
    if not op then return refuse(126, string.format("envelope: pack %q has no op %q", pack.name, req.op)) end
  end
  local name = envelope.call_name(req)

  -- §4: policy, in every mode
  local call = { pack = pack.name, op = req.op or "exec", name = name, params = req.params,
    args = req.args, principal = req.principal, id = req.id, mode = req.mode }
  -- an op with raw args is also pack.exec, unless the op takes extra_args (issue 11)
  local allowed, perr = policy_mod.check_call(self.policy, { pack = pack.name, op = req.op,
    has_args = req.args ~= nil and #req.args > 0, op_extra_args = op and op.extra_args,
    needs_confirm_op = op and op.confirm or false, needs_confirm_exec = M.needs_confirm(pack, nil) }, call)
  if not allowed then return refuse(126, perr) end

  -- argv: wrap.args, then the op's template, then raw args
  local argv = {}
  for _, a in ipairs(pack.wrap.args) do argv[#argv + 1] = a end
  if op then
    local rendered, oerr = ops.check_params(pack.name, op, req.params)
    if not rendered then return refuse(126, oerr) end
    for _, a in ipairs(ops.expand(op.args, rendered)) do argv[#argv + 1] = a end
  end
  for _, a in ipairs(req.args or {}) do argv[#argv + 1] = a end
  local nul = count_nul(argv)
  if nul then return refuse(126, string.format("envelope: argument %d contains a NUL byte", nul)) end

  -- §8.2 / §10.2.5: mock only by the envelope's own mode
  if req.mode == "mock" then return finished(mock_result(req, pack, mode)) end

  -- §10.2.1: the bin, resolved at load time, must be on the allow-list
  if not pack.bin_path then return refuse(127, pack.bin_error) end
  local ok, aerr = sandbox.check_allowed(pack.bin_path, self._allowlist, pack.wrap.bin)
  if not ok then return refuse(127, aerr) end

  local ws = pack.wrap.workspace
  local relative = pack.wrap.bin_kind == "relative"
  return self:_launch({
    req = req, pack = pack, ws_mode = ws.mode, file_flags = ws.file_flags, home_env = ws.home_env,
    argv0 = relative and pack.bin_path or pack.wrap.bin, argv = argv,
    bin_path = pack.bin_path, beneath = relative and pack.root or nil,
    agent_env = pack.wrap.agent_env, bindings = bindings_mod.needed(pack, op), opname = req.op or "exec",
    stdin = req.stdin, timeout_ms = pack.wrap.timeout_ms, copts = copts,
  })
end

--- Run one call and return its result envelope. Never raises for a refused
--- call: refusals are results with `ok = false`.
---@param env_in hcp.Request|table
---@param copts hcp.CallOptions?
---@return hcp.Result
function Runtime:call(env_in, copts)
  return self:start(env_in, copts):wait()
end

--- Run several calls concurrently; results in the same order.
---@param list (hcp.Request|table)[]
---@return hcp.Result[]
function Runtime:call_all(list)
  local pendings = {}
  for i, e in ipairs(list) do pendings[i] = self:start(e) end
  local procs = {}
  for _, p in ipairs(pendings) do
    if p.proc and not p.result then procs[#procs + 1] = p.proc end
  end
  -- leaving by an error (Ctrl-C in the REPL) kills every child of the batch
  local guard <close> = setmetatable({}, { __close = function(_, err) -- luacheck: no unused
    if err == nil then return end
    for _, p in ipairs(pendings) do
      if p.proc and not p.result then p.proc:kill("KILL") end
    end
  end })
  while #procs > 0 do
    local done = core.wait_any(procs)
    local still = {}
    local is_done = {}
    for _, d in ipairs(done) do is_done[d] = true end
    for _, pr in ipairs(procs) do
      if not is_done[pr] then still[#still + 1] = pr end
    end
    procs = still
  end
  local results = {}
  for i, p in ipairs(pendings) do results[i] = p:wait() end
  return results
end

local EXEC_FIELDS = { bin = true, args = true, stdin = true, pack = true, timeout_ms = true, id = true }

-- Whether any allow-list entry could match a bare name, decided before the
-- filesystem is touched (§10.2.1: never resolve an unlisted bare name).
local function could_match(name, list)
  for _, e in ipairs(list) do
    if e == name or (e:sub(1, 1) == "/" and e:sub(-(#name + 1)) == "/" .. name) then return true end
  end
  return false
end

--- Direct spawn for orchestrating scripts, under the same rules as a call:
--- allow-list, the named pack's jail (or a fresh private directory), a
--- clean environment, host-path rules. No op, no bindings, no policy.
---@param spec { bin: string, args: string[]?, stdin: string?, pack: string?, timeout_ms: integer?, id: any }
---@return hcp.Result
function Runtime:exec(spec)
  local mode = self.mode
  if type(spec) ~= "table" then return envelope.refusal(nil, 126, "envelope: exec needs a table", mode) end
  if self._closed then return envelope.refusal(spec, 126, "spawn: runtime is closed", mode) end
  for k in pairs(spec) do
    if not EXEC_FIELDS[k] then return envelope.refusal(spec, 126, string.format("envelope: unknown field %q", tostring(k)), mode) end
  end
  local function refuse(exit, msg) return envelope.refusal(spec, exit, msg, mode) end
  local bin = spec.bin
  if type(bin) ~= "string" or bin == "" or bin:find("\0", 1, true) then
    return refuse(126, "envelope: field \"bin\" must be a non-empty string")
  end
  local args = spec.args or {}
  local lok, lerr = list_of_strings(args, "envelope: field \"args\"")
  if not lok then return refuse(126, lerr) end
  if spec.stdin ~= nil and type(spec.stdin) ~= "string" then return refuse(126, "envelope: field \"stdin\" must be a string") end
  local timeout_ms = spec.timeout_ms
  if timeout_ms ~= nil and (type(timeout_ms) ~= "number" or timeout_ms <= 0) then
    return refuse(126, "envelope: field \"timeout_ms\" must be a positive number")
  end

  local pack
  if spec.pack ~= nil then
    pack = self._by_name[spec.pack]
    if not pack then return refuse(126, string.format("envelope: no pack named %q", tostring(spec.pack))) end
  end

  -- resolve and allow-list
  local path, beneath
  if bin:sub(1, 2) == "./" then
    if not pack then return refuse(127, string.format("sandbox: bin %q not allowlisted", bin)) end
    local p, e = core.resolve_beneath(pack.root, bin:sub(3))
    if not p then return refuse(127, "spawn: bin " .. string.format("%q", bin) .. ": " .. tostring(e)) end
    path, beneath = p, pack.root
  elseif bin:sub(1, 1) == "/" then
    if not core.allow_match(core.normalize(bin), self._allowlist) then
      return refuse(127, string.format("sandbox: bin %q not allowlisted", bin))
    end
    local p, e = core.resolve(bin, self.lookup)
    if not p then return refuse(127, "spawn: bin " .. string.format("%q", bin) .. ": " .. tostring(e)) end
    path = p
  elseif bin:find("/", 1, true) or bin == "." or bin == ".." then
    return refuse(127, string.format("sandbox: bin %q not allowlisted", bin))
  else
    if not could_match(bin, self._allowlist) then
      return refuse(127, string.format("sandbox: bin %q not allowlisted", bin))
    end
    local p, e = core.resolve(bin, self.lookup)
    if not p then return refuse(127, "spawn: bin " .. string.format("%q", bin) .. ": " .. tostring(e)) end
    path = p
  end
  local ok, aerr = sandbox.check_allowed(path, self._allowlist, bin)
  if not ok then return refuse(127, aerr) end

  local argv = {}
  for i, a in ipairs(args) do argv[i] = a end
  local ws = pack and pack.wrap.workspace
  return self:_launch({
    req = { id = spec.id, principal = "default" }, pack = pack,
    -- with no pack: a fresh private jail, removed afterwards
    ws_mode = ws and ws.mode or "ephemeral", file_flags = ws and ws.file_flags or manifest.DEFAULT_FILE_FLAGS,
    home_env = ws and ws.home_env or {}, argv0 = bin, argv = argv, bin_path = path, beneath = beneath,
    agent_env = pack and pack.wrap.agent_env or {}, bindings = {}, opname = "exec", stdin = spec.stdin,
    timeout_ms = timeout_ms or (pack and pack.wrap.timeout_ms) or manifest.DEFAULT_TIMEOUT_MS, copts = {},
  }):wait()
end

--- Kill what is still running and remove this runtime's private
--- directories. Idempotent; also run by __gc and __close.
function Runtime:close()
  if self._closed then return end
  self._closed = true
  for pending in pairs(self._running or {}) do
    if pending.proc then pending.proc:kill("KILL") end
    pending:wait()
  end
  if self._private then
    core.rmtree(self._private)
    self._private = nil
  end
end

function Runtime:__tostring()
  return string.format("hcp.Runtime %s, %d packs%s", self.mode, #self._packs, self._closed and ", closed" or "")
end

Runtime.__gc = Runtime.close
Runtime.__close = Runtime.close

M.Runtime = Runtime
return M
