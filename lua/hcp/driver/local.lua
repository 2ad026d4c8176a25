--- The `local` driver (§10.6): jails are directories on this host, the child
--- is spawned by the C core. Its five stages are the ones every driver has:
---
---   prepare      make (or lock and reuse) the jail for this call
---   rewriteArgv  plan file references, stage inputs into the jail
---   spawn        start the child with the jail as its cwd
---   writeback    copy --output/-o files out; list files a workspace call created
---   cleanup      remove what was per-call, release the lock
---
--- Another driver reuses these and replaces what differs (hcp.driver.bwrap
--- replaces `spawn`). Packs never name a driver.
---@class hcp.driver.Local
local Local = {}
Local.__index = Local
Local.name = "local"

local core = require("hcp.core")
local workspace = require("hcp.workspace")

---@class hcp.DriverCall
---@field pack hcp.Pack?   nil for a pack-less rt:exec
---@field principal string
---@field mode string       workspace mode: none | ephemeral | workspace
---@field network boolean   the pack may use the network (wrap.network, or a binding of family http)

---@class hcp.DriverContext
---@field mode string
---@field jail string       where workspace: references point and the child's cwd
---@field files_dir string? where file-flag values point
---@field plan hcp.Plan?
---@field before table?     scan of a persisted jail before the spawn

--- A driver for a runtime.
---@param rt hcp.Runtime
---@return hcp.driver.Local? driver, string? err
function Local.new(rt)
  return setmetatable({ rt = rt }, Local)
end

-- A per-call private directory under the runtime's own (0700), made on
-- first use: minted credential files, and file-flag values in mode none.
local function scratch(self, ctx)
  if ctx.scratch then return ctx.scratch end
  local base, err = self.rt:_private_dir()
  if not base then return nil, err end
  local dir, derr = core.mkdtemp(base, "call-")
  if not dir then return nil, derr end
  ctx.scratch = dir
  return dir
end

--- Stage 1: the jail. `none`: the pack root (or, for a pack-less exec, a
--- fresh directory); `ephemeral`: a fresh 0700 directory per call;
--- `workspace`: the persisted jail of principal and pack, serialised by a
--- lock within this runtime and between processes.
---@param call hcp.DriverCall
---@return hcp.DriverContext? ctx, string? err
function Local:prepare(call)
  local rt = self.rt
  local ctx = { mode = call.mode, driver = self, network = call.network,
    pack_root = call.pack and call.pack.root }
  if call.mode == "none" and call.pack then
    ctx.jail = call.pack.root
  elseif call.mode == "workspace" then
    local state = rt.state_dir or workspace.default_state_dir()
    if not state then return nil, "workspace: no state_dir (set state_dir, $XDG_STATE_HOME or $HOME)" end
    local jail, lockfile = workspace.persisted_paths(state, call.principal, call.pack.name)
    ctx.key = jail
    -- calls of this runtime on the same workspace run one after the other
    local busy = rt._ws_busy[jail]
    if busy then busy:wait() end
    local ok, err = workspace.mkdirs(jail)
    if not ok then return nil, "workspace: " .. tostring(err) end
    local lock, lerr = core.lock(lockfile, call.pack.wrap.timeout_ms)
    if not lock then return nil, lerr end
    ctx.lock = lock
    ctx.jail = jail
  else
    -- ephemeral, or a pack-less exec: a fresh jail, never shared
    local base, err = rt:_private_dir()
    if not base then return nil, "workspace: " .. tostring(err) end
    local dir, derr = core.mkdtemp(base, "jail-")
    if not dir then return nil, "workspace: " .. tostring(derr) end
    ctx.jail, ctx.remove_jail = dir, true
  end
  return ctx
end

--- A private directory for this call (minted credential files).
---@param ctx hcp.DriverContext
---@return string? dir, string? err
function Local:scratch(ctx)
  return scratch(self, ctx)
end

--- A private temporary directory for the call, exported as TMPDIR when
--- Landlock keeps the child out of /tmp: inside the jail (removed in
--- cleanup), or in the call's private directory when the jail is the pack
--- root (mode none).
---@param ctx hcp.DriverContext
---@return string? dir, string? err
function Local:tmpdir(ctx)
  if ctx.tmpdir then return ctx.tmpdir end
  local dir, err
  if ctx.mode == "none" then
    local base, serr = scratch(self, ctx)
    if not base then return nil, serr end
    dir = base .. "/tmp"
  else
    dir = ctx.jail .. "/.hcp-tmp"
    core.rmtree(dir) -- whatever an earlier call of a persisted jail left
  end
  local ok
  ok, err = core.mkdir(dir)
  if not ok then return nil, err end
  ctx.tmpdir = dir
  return dir
end

--- Stage 2: rewrite file references and stage inputs. Refusals come from
--- the plan and the out_dir rules, before anything is copied.
---@param ctx hcp.DriverContext
---@param argv string[]
---@param file_flags string[]
---@return string[]? argv, string? err
function Local:rewriteArgv(ctx, argv, file_flags)
  -- issue 11: plan (pure, no roots), check the out_dir rules, stage, bind
  local plan, err = workspace.plan(argv, workspace.flags(file_flags))
  if not plan then return nil, err end
  local host = self.rt:_host_ref_opts()
  local hok, herr = workspace.check_host_refs(plan, host)
  if not hok then return nil, herr end
  local files_dir = ctx.jail
  if ctx.mode == "none" and plan.uses_files then
    -- the pack root is no place for a call's files: they go to a per-call
    -- directory, so concurrent calls cannot meet and nothing is left behind
    local dir, serr = scratch(self, ctx)
    if not dir then return nil, "workspace: " .. tostring(serr) end
    files_dir = dir
  end
  ctx.plan, ctx.files_dir, ctx.host = plan, files_dir, host
  local jok, jerr = workspace.check_jail_refs(plan, ctx.jail)
  if not jok then return nil, jerr end
  for _, s in ipairs(plan.stage) do
    local ok, serr = core.stage(host.out_dir, s.rel, files_dir, s.rel,
      { allow_hidden = host.allow_hidden, protected = host.protected })
    if not ok then return nil, serr end
  end
  for _, d in ipairs(plan.dirs) do
    -- beneath the jail, never through a link a child left there
    local ok, derr = core.mkdirs_beneath(files_dir, d)
    if not ok then return nil, derr end
  end
  if ctx.mode == "workspace" then ctx.before, ctx.files_truncated = core.scan(ctx.jail) end
  return workspace.bind(plan, { jail = ctx.jail, files_dir = files_dir })
end

--- Stage 3: spawn with the jail as cwd.
---@param ctx hcp.DriverContext
---@param spec table core.spawn options without cwd
---@return userdata? proc, string? err, integer? errno
function Local:spawn(ctx, spec) -- luacheck: ignore 212
  spec.cwd = ctx.jail
  return core.spawn(spec)
end

--- The layers this driver adds to a call's `isolation` field.
---@param ctx hcp.DriverContext
---@return string[]
function Local:layers(ctx) -- luacheck: ignore 212
  return {}
end

--- How the driver reads the child's end (the local driver sees it as is).
---@param ctx hcp.DriverContext
---@param r table the core's result
---@return table r
function Local:result(ctx, r) -- luacheck: ignore 212
  return r
end

--- Stage 4: write --output/-o files back under out_dir (also after a
--- non-zero exit, as the tool would have left them; not after a signal or a
--- timeout, when a half-written file would replace a good one), and list the
--- files a workspace call created or changed.
---@param ctx hcp.DriverContext
---@param r table the core's result
---@return string[] files, string? err
function Local:writeback(ctx, r) -- luacheck: ignore 212
  local files, errs = {}, {}
  local plan = ctx.plan
  if plan and #plan.outputs > 0 then
    if r.signal or r.timed_out then
      errs[#errs + 1] = "workspace: outputs not written back: the child did not exit normally"
    else
      -- issue 11: the out_dir rules again, as resolved; replace only when
      -- allowed; one byte budget for the whole call
      local host = ctx.host
      local budget = host.max_writeback
      for _, o in ipairs(plan.outputs) do
        local ok, res = core.writeback(ctx.files_dir, o.rel, host.out_dir, o.rel, { allow_hidden = host.allow_hidden,
          protected = host.protected, replace = host.replace, max_bytes = budget })
        if ok then
          budget = budget - res -- res: the bytes copied
          files[#files + 1] = host.out_dir .. "/" .. o.rel
        elseif ok == nil then
          errs[#errs + 1] = res -- res: why not
        end
      end
    end
  end
  if ctx.mode == "workspace" and ctx.before then
    local after, cut = core.scan(ctx.jail)
    after = after or {}
    if cut then ctx.files_truncated = true end
    local created = {}
    for rel, sig in pairs(after) do
      -- the runtime's own temporaries are not the call's files
      if ctx.before[rel] ~= sig and not rel:match("^%.hcp%-tmp") then created[#created + 1] = rel end
    end
    table.sort(created)
    for _, rel in ipairs(created) do files[#files + 1] = ctx.jail .. "/" .. rel end
  end
  return files, errs[1]
end

--- Stage 5: remove per-call directories (never following a link the child
--- left there), release the workspace lock.
---@param ctx hcp.DriverContext
function Local:cleanup(ctx)
  if ctx.cleaned then return end
  ctx.cleaned = true
  if ctx.scratch then core.rmtree(ctx.scratch) end
  if ctx.tmpdir and not ctx.remove_jail then core.rmtree(ctx.tmpdir) end
  if ctx.remove_jail then core.rmtree(ctx.jail) end
  if ctx.iso_cleanup then ctx.iso_cleanup() end
  if ctx.lock then ctx.lock:unlock() end
  if ctx.key then self.rt._ws_busy[ctx.key] = nil end
end

return Local
