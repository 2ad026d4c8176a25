--- The `local` driver (§10.6): jails are directories on this host, the child
--- is spawned by the C core. Its five stages are the seed's:
---
---   prepare      make (or lock and reuse) the jail for this call
---   rewriteArgv  bind the plan's file references to the jail, stage inputs
---   spawn        start the child with the jail as its cwd
---   writeback    copy --output/-o files out; list files a workspace call created
---   cleanup      remove what was per-call, release the lock
---
--- plus what it must report: `layers` (what it adds to a result's
--- `isolation`) and `result` (how it reads the child's end). Another driver
--- reuses these and replaces what differs (hcp.driver.bwrap replaces
--- `spawn`). A driver sees only its host value, never the runtime; packs
--- never name a driver.
---@class hcp.driver.Local
local Local = {}
Local.__index = Local
Local.name = "local"

local core = require("hcp.core")
local workspace = require("hcp.workspace")

---@class hcp.DriverHost
---@field state_dir string?        where workspace-mode jails persist (nil: the XDG default)
---@field private hcp.PrivateDir   the runtime's private directory (0700, removed at close)
---@field locks hcp.Locks          workspace serialisation
---@field search_path string
---@field run_as { uid: integer, gid: integer } whom a root runtime's child (and bwrap) runs as

---@class hcp.DriverCall
---@field pack hcp.Pack?   nil for a pack-less rt:exec
---@field principal string
---@field mode string       workspace mode: none | ephemeral | workspace
---@field network boolean   the pack may use the network
---@field uses_files boolean the plan has file-flag references (mode none needs a files directory)
---@field owner any         who holds the workspace lock (the call)
---@field refs hcp.HostRefOptions the out_dir rules (hcp.workspace.host_ref_opts)

---@class hcp.DriverContext
---@field mode string
---@field jail string       where workspace: references point and the child's cwd
---@field files_dir string  where file-flag values point
---@field scratch string?   the call's private directory
---@field plan hcp.Plan?
---@field before table?     scan of a persisted jail before the spawn
---@field left_before table? scan of the files directory before the spawn (modes none and ephemeral)
---@field left_in_jail string[]? files the call left in its jail, not written back (set by writeback)
---@field left_truncated boolean? that list is incomplete

--- A driver over `host`.
---@param host hcp.DriverHost
---@return hcp.driver.Local? driver, string? err
function Local.new(host)
  return setmetatable({ host = host }, Local)
end

-- The call's private directory under the runtime's own (0700), made on
-- first use: minted credential files, TMPDIR, file-flag values in mode none.
local function scratch(self, ctx)
  if ctx.scratch then return ctx.scratch end
  local base, err = self.host.private:path()
  if not base then return nil, err end
  local dir, derr = core.mkdtemp_ahead(base, "call-")
  if not dir then return nil, derr end
  ctx.scratch = dir
  return dir
end

-- workspace mode: the persisted jail of principal and pack, taken for this
-- call (nil, "busy" while another call or process holds it).
local function persisted(self, ctx, call)
  local state = self.host.state_dir or workspace.default_state_dir()
  if not state then return nil, "workspace: no state_dir (set state_dir, $XDG_STATE_HOME or $HOME)" end
  local jail, lockfile = workspace.persisted_paths(state, call.principal, call.pack.name)
  local ok, err = workspace.mkdirs(jail)
  if not ok then return nil, "workspace: " .. tostring(err) end
  local lock, lerr = self.host.locks:try(jail, lockfile, call.owner)
  if not lock then return nil, lerr end
  ctx.key, ctx.lock, ctx.jail, ctx.files_dir = jail, lock, jail, jail
  return ctx
end

--- Stage 1: the jail. `none`: the pack root (or, for a pack-less exec, a
--- fresh directory), file-flag values in the call's private directory;
--- `ephemeral`: a fresh 0700 directory per call; `workspace`: the persisted
--- jail of principal and pack, serialised by `host.locks`.
---@param call hcp.DriverCall
---@return hcp.DriverContext? ctx, string? err "busy" when the workspace is held elsewhere
function Local:prepare(call)
  local ctx = { mode = call.mode, network = call.network, pack_root = call.pack and call.pack.root, host = call.refs }
  if call.mode == "workspace" then return persisted(self, ctx, call) end
  if call.mode == "none" and call.pack then
    ctx.jail, ctx.files_dir = call.pack.root, call.pack.root
    -- the pack root is no place for a call's files: they go to a per-call
    -- directory, so concurrent calls cannot meet and nothing is left behind
    -- (a directory of its own in the private one, beside minted credential
    -- files and TMPDIR, so what the child leaves there can be listed)
    if call.uses_files then
      local dir, err = scratch(self, ctx)
      if not dir then return nil, "workspace: " .. tostring(err) end
      local ok, merr = core.mkdir(dir .. "/files")
      if not ok then return nil, "workspace: " .. tostring(merr) end
      ctx.files_dir = dir .. "/files"
    end
    return ctx
  end
  -- ephemeral, or a pack-less exec: a fresh jail, never shared
  local base, err = self.host.private:path()
  if not base then return nil, "workspace: " .. tostring(err) end
  local dir, derr = core.mkdtemp_ahead(base, "jail-")
  if not dir then return nil, "workspace: " .. tostring(derr) end
  ctx.jail, ctx.files_dir, ctx.remove_jail = dir, dir, true
  return ctx
end

--- A private directory for this call (minted credential files): removed
--- at the call's end, before its result is returned.
---@param ctx hcp.DriverContext
---@return string? dir, string? err
function Local:scratch(ctx)
  ctx.secrets = true
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
  local dir
  if ctx.mode == "none" then
    local base, serr = scratch(self, ctx)
    if not base then return nil, serr end
    dir = base .. "/tmp"
  else
    dir = ctx.jail .. "/.hcp-tmp"
    core.rmtree(dir) -- whatever an earlier call of a persisted jail left
  end
  local ok, err = core.mkdir(dir)
  if not ok then return nil, err end
  ctx.tmpdir = dir
  return dir
end

--- Stage 2: bind the plan to this call's directories and stage its inputs
--- from out_dir. The plan's refusals and the out_dir rules came first
--- (before anything was copied); here the jail's own links are checked as
--- the kernel resolves them, and core.stage checks the out_dir rules again
--- by descriptor.
---@param ctx hcp.DriverContext
---@param plan hcp.Plan
---@return string[]? argv, string? err
function Local:rewriteArgv(ctx, plan) -- luacheck: ignore 212
  local files_dir, host = ctx.files_dir, ctx.host
  ctx.plan = plan
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
  -- what is there before the child runs (the staged inputs) is not what it left
  if ctx.mode ~= "workspace" and (ctx.remove_jail or files_dir ~= ctx.jail) then
    ctx.left_before = #plan.stage > 0 and core.scan(files_dir) or {}
  end
  return workspace.bind(plan, { jail = ctx.jail, files_dir = files_dir, cwd = ctx.jail })
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

-- The files a workspace call created or changed, by a scan before and after.
local function changed_files(ctx)
  local after, cut = core.scan(ctx.jail)
  after = after or {}
  if cut then ctx.files_truncated = true end
  local created = {}
  for rel, sig in pairs(after) do
    -- the runtime's own temporaries are not the call's files
    if ctx.before[rel] ~= sig and not rel:match("^%.hcp%-tmp") then created[#created + 1] = rel end
  end
  table.sort(created)
  for i, rel in ipairs(created) do created[i] = ctx.jail .. "/" .. rel end
  return created
end

-- At most this many names in a result's left_in_jail.
Local.MAX_LEFT = 100

-- The files a mode-none or ephemeral call left in its files directory (the
-- jail, or mode none's per-call files directory) and that are not written
-- back: created or changed by the child, neither an output of the plan nor
-- the runtime's own temporaries (.hcp-tmp, TMPDIR). Relative paths, as an
-- agent names them with out:.
local function left_files(ctx)
  if not ctx.left_before then return nil end
  local after, cut = core.scan(ctx.files_dir)
  local outputs = {}
  for _, o in ipairs(ctx.plan and ctx.plan.outputs or {}) do outputs[o.rel] = true end
  local left = {}
  for rel, sig in pairs(after or {}) do
    if ctx.left_before[rel] ~= sig and not outputs[rel] and not rel:match("^%.hcp%-tmp/") then left[#left + 1] = rel end
  end
  table.sort(left)
  if #left > Local.MAX_LEFT then
    for i = #left, Local.MAX_LEFT + 1, -1 do left[i] = nil end
    cut = true
  end
  return left, cut
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
  local plan, host = ctx.plan, ctx.host
  if plan and #plan.outputs > 0 and (r.signal or r.timed_out) then
    errs[1] = "workspace: outputs not written back: the child did not exit normally"
  elseif plan then
    -- the out_dir rules again, as resolved; replace only when allowed; one
    -- byte budget for the whole call
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
  if ctx.mode == "workspace" and ctx.before then
    for _, f in ipairs(changed_files(ctx)) do files[#files + 1] = f end
  end
  ctx.left_in_jail, ctx.left_truncated = left_files(ctx)
  return files, errs[1]
end

--- Stage 5: remove per-call directories (never following a link the child
--- left there), release the workspace lock. Idempotent. The call's own
--- directories (mkdtemp names that no later call is given) are removed
--- behind it by the core's worker (core.rmtree_later; the runtime's close
--- waits for them). Removed here and now: the call's private directory when
--- it holds minted credential files (they live no longer than the call),
--- and the TMPDIR of a persisted jail, whose path the next call of that
--- workspace makes again.
---@param ctx hcp.DriverContext
function Local:cleanup(ctx)
  if ctx.cleaned then return end
  ctx.cleaned = true
  if ctx.scratch then (ctx.secrets and core.rmtree or core.rmtree_later)(ctx.scratch) end
  if ctx.tmpdir and ctx.mode == "workspace" then core.rmtree(ctx.tmpdir) end
  if ctx.remove_jail then core.rmtree_later(ctx.jail) end
  if ctx.key then self.host.locks:release(ctx.key, ctx.lock) end
end

return Local
