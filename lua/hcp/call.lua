--- A call: one request on its way through the runtime, as a straight line
--- of checked stages, in the order every call takes them:
---
---   check        the request is well-formed, the pack and op exist, the
---                policy covers it, the params fit, the bin is allowed
---   plan         file references planned, root-free (hcp.workspace.plan)
---   prepare      the driver makes (or takes) the jail           ┐ launch: may wait
---   stage        the plan bound to the jail, inputs copied in    │ for a workspace
---   mint         credentials from the operator's minters         │ another call
---   environment  the child's whole environment, built from none  │ holds
---   isolate      this call's isolation layers (§10.4)            │
---   spawn        the child starts                                ┘
---   (running)    output streamed and captured, timeout enforced
---   writeback    outputs copied out to out_dir
---   cleanup      everything the stages made, undone in reverse
---
--- Every stage returns true, or nil, exit, message; the first failure
--- becomes the call's refusal and runs the cleanups collected so far, so a
--- refused call has spawned nothing and left nothing behind. No stage
--- reaches back into the runtime: a call sees only the read-only `CallEnv`
--- it was built with.
---@class hcp.call
local M = {}

local core = require("hcp.core")
local envelope = require("hcp.envelope")
local sandbox = require("hcp.sandbox")
local policy = require("hcp.policy")
local bindings = require("hcp.bindings")
local ops = require("hcp.ops")
local workspace = require("hcp.workspace")
local isolation = require("hcp.isolation")
local manifest = require("hcp.manifest")
local check = require("hcp.check")
local egress = require("hcp.egress")
local json = require("hcp.json")

---@class hcp.CallEnv
---@field mode string
---@field policy table
---@field minters table<string, function>
---@field allowlist string[]
---@field lookup string
---@field search_path string
---@field layers table<string, boolean>  the runtime's stronger layers (isolation.choose)
---@field base_layers string[]
---@field driver table
---@field max_output integer
---@field max_timeout_ms integer?
---@field by_name table<string, hcp.Pack>
---@field run_as { uid: integer, gid: integer }
---@field sockets table<string, string[]>
---@field host_refs fun(): hcp.HostRefOptions the out_dir rules, with what they protect
---@field egress table the operator's network word (hcp.egress.options)
---@field audit hcp.Audit? the audit log, when one is configured

---@class hcp.CallOptions
---@field tee_stdout integer? an fd of the caller that receives the child's stdout as it comes
---@field tee_stderr integer? the same for stderr
---@field on_stdout fun(chunk: string)? called from the runtime's loop with each chunk as read
---@field on_stderr fun(chunk: string)?
---@field on_exit fun(result: hcp.Result)? called from the runtime's loop once the result is ready
---@field capture boolean? false: keep no output in the result (stream it instead)

---@class hcp.Call
---@field state "refused"|"queued"|"running"|"done"
---@field result hcp.Result?
local Call = {}
Call.__index = Call

local OPTION_TYPES = { tee_stdout = "fd", tee_stderr = "fd", on_stdout = "function", on_stderr = "function",
  on_exit = "function", capture = "boolean" }

local function check_options(o)
  if o == nil then return {} end
  if type(o) ~= "table" then return nil, "envelope: call options must be a table" end
  for _, k in ipairs(check.sorted_keys(o)) do
    local want, v = OPTION_TYPES[k], o[k]
    if not want then return nil, string.format("envelope: unknown call option %q", k) end
    if want == "fd" and (math.type(v) ~= "integer" or v < 0) then
      return nil, string.format("envelope: call option %q must be a file descriptor", k)
    elseif want ~= "fd" and type(v) ~= want then
      return nil, string.format("envelope: call option %q must be a %s", k, want)
    end
  end
  return o
end

local function new(env, req, opts)
  return setmetatable({ env = env, req = req, opts = opts or {}, state = "queued", cleanups = {} }, Call)
end

--- A call that ends here: `ok = false`, an error naming the layer, nothing
--- spawned. Runs the cleanups collected so far.
---@param exit integer
---@param msg string
---@return hcp.Call self
function Call:refuse(exit, msg)
  self:cleanup()
  self.result = envelope.refusal(self.req, exit, msg, self.env.mode)
  self.state = "refused"
  if self.env.audit then self.env.audit:record(self.req, self.result) end
  return self
end

--- A call refused before it was looked at (the runtime is closed).
---@param env hcp.CallEnv
---@param req any
---@param exit integer
---@param msg string
---@return hcp.Call
function M.refused(env, req, exit, msg)
  return new(env, req):refuse(exit, msg)
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

--- Whether a pack may reach any network at all: the host's whole network
--- (`wrap.network: true`, which the operator must allow), or the hosts it
--- or one of its bindings declares (hcp.egress).
---@param pack hcp.Pack?
---@return boolean
function M.network_allowed(pack)
  if not pack then return false end
  if pack.wrap.network or (pack.wrap.egress and #pack.wrap.egress > 0) then return true end
  for _, b in pairs(pack.bindings) do
    if b.hosts and #b.hosts > 0 then return true end
  end
  return false
end

-- The request's timeout: the pack's own, or less; more only when the
-- operator allows it (max_timeout_ms).
local function timeout_for(env, req, pack_ms)
  local asked = req.timeout_ms
  if not asked then return pack_ms end
  local limit = math.max(pack_ms, env.max_timeout_ms or 0)
  if asked > limit then
    return nil, string.format("envelope: field \"timeout_ms\" is %d, more than the %d ms this pack allows", asked, limit)
  end
  return asked
end

local function mock_result(req, pack, mode)
  local m = pack.mocks[req.op or "exec"] or pack.mocks["*"]
  if not m then
    return envelope.refusal(req, 126, string.format("mock: no fixture for %q", envelope.call_name(req)), mode)
  end
  return envelope.from_run(req, { exit = m.exit, stdout = m.stdout, stderr = m.stderr, ms = 0 },
    mode, {}, {}, nil, core.signame)
end

-- Stage "check" of an envelope call: pack, op, policy, params, argv, mock,
-- allow-list. Returns true, or nil, exit, msg (or "done" for a mock).
local function check_envelope(self, pack, req)
  local op = req.op and pack.ops[req.op]
  if req.op and not op then return nil, 126, string.format("envelope: pack %q has no op %q", pack.name, req.op) end
  local name = envelope.call_name(req)
  -- §4: policy, in every mode; an op call with raw args is also
  -- <pack>.exec, unless the op takes extra_args
  local ok, perr = policy.check_call(self.env.policy, { pack = pack.name, op = req.op,
    has_args = req.args ~= nil and #req.args > 0, op_extra_args = op and op.extra_args,
    needs_confirm_op = op and op.confirm or false, needs_confirm_exec = M.needs_confirm(pack, nil) },
    { pack = pack.name, op = req.op or "exec", name = name, params = req.params, args = req.args,
      principal = req.principal, id = req.id, mode = req.mode })
  if not ok then return nil, 126, perr end
  local argv = table.move(pack.wrap.args, 1, #pack.wrap.args, 1, {})
  -- issue 15: the op's file parameters (plan references), and which
  -- arguments the agent sent (for hints): "param" names, true for raw args
  local file_args, sent = {}, {}
  if op then
    local rendered, oerr = ops.check_params(pack.name, op, req.params)
    if not rendered then return nil, 126, oerr end
    local expanded, files, from = ops.expand(op.args, rendered, op.params)
    for j, fa in pairs(files) do file_args[#argv + j] = fa end
    -- an element that is a parameter's value, whole (not the template's text)
    for j, pname in pairs(from) do
      if expanded[j] == rendered[pname] then sent[#argv + j] = pname end
    end
    table.move(expanded, 1, #expanded, #argv + 1, argv)
  end
  for j = 1, #(req.args or {}) do sent[#argv + j] = true end
  table.move(req.args or {}, 1, #(req.args or {}), #argv + 1, argv)
  self.argv, self.op, self.file_args, self.sent = argv, op, file_args, sent
  return true
end

--- A call built from a request envelope (rt:start, rt:call).
---@param env hcp.CallEnv
---@param env_in any the request (a table, possibly decoded JSON)
---@param opts_in any call options
---@return hcp.Call
function M.from_envelope(env, env_in, opts_in)
  local req, verr = envelope.validate(env_in)
  if not req then return new(env, env_in):refuse(126, verr) end
  -- no call runs unaccounted for once the audit log cannot be written
  local broken = env.audit and env.audit:refusal()
  if broken then return new(env, req):refuse(126, broken) end
  local opts, oerr = check_options(opts_in)
  local self = new(env, req, opts)
  if not opts then return self:refuse(126, oerr) end
  local pack = env.by_name[req.pack]
  if not pack then return self:refuse(126, string.format("envelope: no pack named %q", req.pack)) end
  local ok, exit, msg = check_envelope(self, pack, req)
  if not ok then return self:refuse(exit, msg) end
  local nul = count_nul(self.argv)
  if nul then return self:refuse(126, string.format("envelope: argument %d contains a NUL byte", nul)) end
  -- §8.2 / §10.2.5: mock only by the envelope's own mode
  if req.mode == "mock" then
    self.result, self.state = mock_result(req, pack, env.mode), "done"
    return self
  end
  -- §10.2.1: the bin, resolved at load time, must be on the allow-list
  if not pack.bin_path then return self:refuse(127, pack.bin_error) end
  if not core.allow_match(pack.bin_path, env.allowlist) then
    return self:refuse(127, string.format("sandbox: bin %q not allowlisted", pack.wrap.bin))
  end
  local timeout, terr = timeout_for(env, req, pack.wrap.timeout_ms)
  if not timeout then return self:refuse(126, terr) end
  self.pack, self.opname, self.timeout_ms = pack, req.op or "exec", timeout
  self.bin = { path = pack.bin_path, beneath = pack.beneath, argv0 = pack.argv0 }
  self.binding_names = bindings.needed(pack, self.op)
  -- what it may reach: its op's (or pack's) hosts and its bindings' (§10.4)
  local eplan, eerr = egress.for_call(pack, self.op, env.egress, self.binding_names)
  if not eplan then return self:refuse(126, eerr) end
  self.egress = eplan
  return self:plan()
end

local EXEC_FIELDS = { bin = true, args = true, stdin = true, pack = true, timeout_ms = true, id = true }

-- Stage "check" of an exec: the fields, the pack, the bin (§10.2.1).
local function check_exec(self, spec)
  local unknown = check.unknown_key(spec, EXEC_FIELDS)
  if unknown then return nil, 126, string.format("envelope: unknown field %q", unknown) end
  local args, lerr = check.string_list(spec.args or {}, "envelope: field \"args\"")
  if not args then return nil, 126, lerr end
  if spec.stdin ~= nil and type(spec.stdin) ~= "string" then return nil, 126, "envelope: field \"stdin\" must be a string" end
  local t = spec.timeout_ms
  if t ~= nil and (type(t) ~= "number" or t <= 0) then
    return nil, 126, "envelope: field \"timeout_ms\" must be a positive number"
  end
  local pack
  if spec.pack ~= nil then
    pack = self.env.by_name[spec.pack]
    if not pack then return nil, 126, string.format("envelope: no pack named %q", tostring(spec.pack)) end
  end
  local bin, exit, err = sandbox.resolve(spec.bin, { lookup = self.env.lookup, root = pack and pack.root,
    allowlist = self.env.allowlist })
  if not bin then return nil, exit, err end
  self.pack, self.bin, self.argv = pack, bin, table.move(args, 1, #args, 1, {})
  self.sent = {}
  for i = 1, #args do self.sent[i] = true end
  self.timeout_ms = t or (pack and pack.wrap.timeout_ms) or manifest.DEFAULT_TIMEOUT_MS
  return true
end

--- A call built from an exec spec (rt:exec): the same rules as a call —
--- allow-list, the named pack's jail or a fresh one, a clean environment,
--- host-path rules — but no op, no bindings, no policy.
---@param env hcp.CallEnv
---@param spec any
---@return hcp.Call
function M.from_exec(env, spec)
  if type(spec) ~= "table" then return new(env, nil):refuse(126, "envelope: exec needs a table") end
  local broken = env.audit and env.audit:refusal()
  if broken then return new(env, { id = spec.id }):refuse(126, broken) end
  local self = new(env, { id = spec.id, principal = "default", stdin = spec.stdin })
  local ok, exit, msg = check_exec(self, spec)
  if not ok then return self:refuse(exit, msg) end
  self.opname, self.binding_names = "exec", {}
  -- the named pack's own hosts; an exec mints no binding, so none of theirs
  if self.pack then
    local eplan, eerr = egress.for_call(self.pack, nil, env.egress, {})
    if not eplan then return self:refuse(126, eerr) end
    self.egress = eplan
  end
  return self:plan()
end

-- The workspace settings of the call: its pack's, or for a pack-less exec
-- a fresh private jail with the default file flags.
local function workspace_of(pack)
  if pack then return pack.wrap.workspace end
  return { mode = "ephemeral", file_flags = manifest.DEFAULT_FILE_FLAGS, home_env = {} }
end

--- Stage "plan": the argument rules that need no jail — NUL bytes, the
--- host-path rule (§10.6), and the file references, planned root-free so
--- a reference that would leave the jail is refused before any jail exists.
---@return hcp.Call self
function Call:plan()
  local nul = count_nul(self.argv)
  if nul then return self:refuse(126, string.format("envelope: argument %d contains a NUL byte", nul)) end
  -- the agent's own arguments, before the runtime puts its jail paths in
  if self.env.mode == "sandbox" then
    local ok, herr = sandbox.check_host_paths(self.argv)
    if not ok then return self:refuse(126, herr) end
  end
  self.ws = workspace_of(self.pack)
  local plan, err = workspace.plan(self.argv, workspace.flags(self.ws.file_flags, self.ws.output_flags), self.file_args)
  if not plan then return self:refuse(126, err) end
  -- the out_dir rules, lexically; the core checks them again by descriptor
  local ok, herr = workspace.check_host_refs(plan, self.env.host_refs())
  if not ok then return self:refuse(126, herr) end
  self.plan_ = plan
  return self
end

--- Register an undo for cleanup, run in reverse order.
---@param fn fun()
function Call:on_cleanup(fn)
  self.cleanups[#self.cleanups + 1] = fn
end

--- Run (once) every cleanup collected so far.
function Call:cleanup()
  local list = self.cleanups
  self.cleanups = {}
  for i = #list, 1, -1 do list[i]() end
end

-- ---- launch: prepare → stage → mint → environment → isolate → spawn -----

-- issue 12: a call the pool will serve has its network namespace made
-- ahead, by a process of its own on another CPU, while these stages run
-- (src/netns_pool.c; nothing when one is pooled already). (The base view
-- made ahead the same way was measured too: it costs a one-call process
-- 1.4 ms more than a view built from nothing in the call.)
local function ahead(self, ctx)
  local env = self.env
  if env.driver.name ~= "local" or not env.layers.caps then return end
  local sockets = isolation.sockets_for(env.sockets, self.pack and self.pack.name)
  if sockets and isolation.pools_netns(env.layers, { network = ctx.network, sockets = sockets, egress = self.egress }) then
    core.netns_prefill()
  end
end

--- Stage "prepare": the driver's jail for this call. Returns nil, "busy"
--- while another call or process holds the workspace (the call waits).
function Call:prepare()
  local drv = self.env.driver
  local ctx, err = drv:prepare({ pack = self.pack, principal = self.req.principal or "default", mode = self.ws.mode,
    network = self.egress ~= nil and self.egress.unrestricted, uses_files = self.plan_.uses_files, owner = self,
    refs = self.env.host_refs() })
  if not ctx then
    if err == "busy" then return nil, "busy" end
    return nil, 126, err
  end
  self.ctx = ctx
  self:on_cleanup(function() drv:cleanup(ctx) end)
  ahead(self, ctx) -- with the call's own network decision (ctx.network), not a copy of it
  return true
end

--- Stage "stage": the plan bound to the jail, inputs copied in.
function Call:stage()
  local argv, err = self.env.driver:rewriteArgv(self.ctx, self.plan_)
  if not argv then return nil, 126, err end
  self.child_argv = { self.bin.argv0 }
  table.move(argv, 1, #argv, 2, self.child_argv)
  return true
end

--- Stage "mint": the credentials the call needs, from the operator's
--- minters only (§10.2.3).
function Call:mint()
  local drv, ctx = self.env.driver, self.ctx
  local minted, err = bindings.mint(self.env.minters, { pack = self.pack, op = self.opname,
    principal = self.req.principal or "default", names = self.binding_names,
    secret_dir = function() return drv:scratch(ctx) end })
  if not minted then return nil, 126, err end
  self.minted = minted
  return true
end

--- Stage "environment": agent_env, home_env, TMPDIR, the minted
--- credentials, PATH and HCP_SANDBOX — nothing from the runtime's own.
function Call:environment()
  local extra = {}
  for _, k in ipairs(self.ws.home_env) do extra[k] = self.ctx.jail end
  if self.env.layers.landlock then
    -- Landlock keeps the child out of /tmp: it gets a private one
    local tmp, err = self.env.driver:tmpdir(self.ctx)
    if not tmp then return nil, 126, "workspace: " .. tostring(err) end
    extra.TMPDIR = tmp
  end
  -- issue 14: a call with declared hosts reaches them through its proxy
  if egress.proxied(self.egress) then
    for k, v in pairs(egress.proxy_env(core.EGRESS_PORT)) do extra[k] = v end
  end
  local agent_env = self.pack and self.pack.wrap.agent_env or {}
  self.child_env = sandbox.child_env(self.env.mode, self.env.search_path, agent_env, self.minted, extra)
  return true
end

--- Stage "isolate": this call's layers (§10.4) and the child's view, and
--- the names a result reports.
function Call:isolate()
  local ctx, env = self.ctx, self.env
  local sockets, serr = isolation.sockets_for(env.sockets, self.pack and self.pack.name)
  if not sockets then return nil, 126, serr end
  local spec, applied, undo, view = isolation.for_call(env.layers, { jail = ctx.jail, scratch = ctx.scratch,
    pack_root = self.pack and self.pack.root, bin_path = self.bin.path, bin_beneath = self.bin.beneath,
    network = ctx.network, limits = self.pack and self.pack.wrap.limits, run_as = env.run_as,
    sockets = sockets, driver = env.driver.name, egress = self.egress })
  if not spec then return nil, 126, applied end
  self:on_cleanup(undo)
  ctx.view = view
  local names = table.move(env.base_layers, 1, #env.base_layers, 1, {})
  table.move(applied, 1, #applied, #names + 1, names)
  local extra = env.driver:layers(ctx)
  table.move(extra, 1, #extra, #names + 1, names)
  self.iso_spec, self.layer_names = next(spec) and spec or nil, names
  self.proxy = spec.egress -- issue 14: its decisions are the loop's to make (hcp.egress.serve)
  return true
end

--- Stage "spawn": the child starts, with output captured and/or streamed
--- as the caller asked.
function Call:spawn()
  local o = self.opts
  local proc, err, errno = self.env.driver:spawn(self.ctx, {
    path = self.bin.path, beneath = self.bin.beneath, argv = self.child_argv, env = self.child_env,
    stdin = self.req.stdin, timeout_ms = self.timeout_ms, max_output = self.env.max_output,
    tee_stdout = o.tee_stdout, tee_stderr = o.tee_stderr, isolation = self.iso_spec,
    capture = o.capture ~= false, stream = (o.on_stdout or o.on_stderr) and true or false,
    -- the runtime goes on while the child starts; a step that fails before
    -- the exec comes back in the result (spawn_error), see Call:finish
    async = true,
  })
  -- ENOENT: not found, like a shell
  if not proc then return nil, errno == 2 and 127 or 126, tostring(err) end
  self.proc = proc
  return true
end

local LAUNCH = { "prepare", "stage", "mint", "environment", "isolate", "spawn" }

--- Run the launch stages: "running" when the child started, "busy" when
--- the call must wait for its workspace (nothing was done), or "done" (a
--- refusal; cleanups ran).
---@return "running"|"busy"|"done"
function Call:launch()
  if self.state ~= "queued" then return "done" end
  for _, stage in ipairs(LAUNCH) do
    local ok, exit, msg = self[stage](self)
    if not ok then
      if exit == "busy" then return "busy" end
      self:refuse(exit, msg)
      return "done"
    end
  end
  self.state = "running"
  return "running"
end

--- Give up waiting for a workspace: refused with why.
---@param msg string
function Call:abandon(msg)
  if self.state == "queued" then self:refuse(126, msg) end
end

-- ---- the end: writeback → cleanup → result --------------------------------

--- Stages "writeback" and "cleanup", once the core has the child's end:
--- outputs copied out, the result built, everything the stages made undone.
---@param r table the core's result
---@return hcp.Result
function Call:finish(r)
  if self.state ~= "running" then return self.result end
  -- the child failed before exec (an async spawn): refused, as a spawn
  -- that failed at once would have been (ENOENT: not found, like a shell)
  if r.spawn_error then return self:refuse(r.errno == 2 and 127 or 126, r.spawn_error).result end
  local drv = self.env.driver
  r = drv:result(self.ctx, r)
  local files, werr = drv:writeback(self.ctx, r)
  local res = envelope.from_run(self.req, r, self.env.mode, self.layer_names, files, self.timeout_ms, core.signame)
  if werr then
    res.ok = false
    res.error = res.error and (res.error .. "; " .. werr) or werr
  end
  if self.ctx.files_truncated then res.files_truncated = true end
  -- issue 15: what the call left in its jail, and why a name was not found
  local left = self.ctx.left_in_jail
  if left and #left > 0 then res.left_in_jail = json.array(left) end
  if self.ctx.left_truncated then res.left_in_jail_truncated = true end
  -- a hint reads the child's stderr: none, no hint (and no module loaded)
  if type(r.stderr) == "string" and r.stderr ~= "" then
    res.hint = require("hcp.workspace.hint").for_run(self.plan_, self.sent, r.stderr)
  end
  -- issue 14: every host:port the call's proxy was asked for
  if self.proxy then
    local list, cut = egress.report(self.proxy:log())
    res.egress, res.egress_truncated = json.array(list), cut or nil
  end
  self.result, self.state = res, "done"
  self:cleanup()
  -- done with the child: its descriptors and buffers go now, not at a
  -- collection (an hcp-init still exiting is reaped later, spawn_io.c)
  self.proc:close()
  if self.env.audit then self.env.audit:record(self.req, res) end
  return res
end

--- Take what a streaming child wrote since the last take, and hand it to
--- the caller's callbacks. Returns the first error a callback raised.
---@return string? err
function Call:deliver()
  if self.state ~= "running" then return nil end
  local out, err = self.proc:take()
  local o, first = self.opts, nil
  for _, pair in ipairs({ { out, o.on_stdout }, { err, o.on_stderr } }) do
    if pair[1] and pair[2] then
      local ok, e = pcall(pair[2], pair[1])
      if not ok and not first then first = e end
    end
  end
  return first
end

M.Call = Call
return M
