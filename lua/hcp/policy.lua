--- Policy (contract §4): which `pack.op` calls may run, and which need a
--- confirmation. Deny wins over allow; no policy allows every op; a policy
--- without `allow` allows `*` (a deny-only policy is a common, clear intent),
--- while `allow = {}` refuses everything.
---@class hcp.policy
local M = {}

---@class hcp.PolicyConfig
---@field allow string[]?
---@field deny string[]?
---@field confirm (fun(call: table): boolean)?

local PATTERN = "^[a-z0-9][a-z0-9._%-]*%.[%w_*%-]+$"

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function valid_pattern(p)
  return type(p) == "string" and (p == "*" or p:match(PATTERN) ~= nil)
end

--- Validate a policy table from `hcp.create`.
---@param cfg any
---@return table? policy, string? err
function M.new(cfg)
  if cfg == nil then return { allow = { "*" }, deny = {}, confirm = nil, given = false } end
  if type(cfg) ~= "table" then return nil, "hcp.create: option \"policy\" must be a table" end
  for k in pairs(cfg) do
    if k ~= "allow" and k ~= "deny" and k ~= "confirm" then
      return nil, string.format("hcp.create: policy: unknown field %q", tostring(k))
    end
  end
  local p = { allow = { "*" }, deny = {}, confirm = cfg.confirm, given = true }
  for _, key in ipairs({ "allow", "deny" }) do
    local list = cfg[key]
    if list ~= nil then
      if type(list) ~= "table" then
        return nil, string.format("hcp.create: policy.%s must be an array of patterns", key)
      end
      local copy = {}
      for i, pat in ipairs(list) do
        if not valid_pattern(pat) then
          return nil, string.format("hcp.create: policy.%s[%d]: %s is not pack.op, pack.* or *", key, i, tostring(pat))
        end
        copy[i] = pat
      end
      if #copy ~= count(list) then
        return nil, string.format("hcp.create: policy.%s must be an array of patterns", key)
      end
      p[key] = copy
    end
  end
  if p.confirm ~= nil and type(p.confirm) ~= "function" then
    return nil, "hcp.create: policy.confirm must be a function"
  end
  return p
end

--- Whether `pattern` covers the call name `pack.op`.
---@param pattern string
---@param name string
---@return boolean
function M.matches(pattern, name)
  if pattern == "*" then return true end
  if pattern:sub(-2) == ".*" then
    local prefix = pattern:sub(1, -2) -- keeps the dot
    return name:sub(1, #prefix) == prefix
  end
  return pattern == name
end

local function any(list, name)
  for _, pat in ipairs(list) do
    if M.matches(pat, name) then return true end
  end
  return false
end

--- Decide a call. Returns true, or nil and the refusal message.
---@param p table policy from new()
---@param name string `pack.op`
---@param needs_confirm boolean
---@param call table the call given to policy.confirm
---@return boolean? ok, string? err
function M.check(p, name, needs_confirm, call)
  if any(p.deny, name) or not any(p.allow, name) then
    return nil, string.format("policy: %q not covered", name)
  end
  if needs_confirm then
    if not p.confirm then return nil, string.format("policy: %q not confirmed", name) end
    -- a confirm callback that raises refuses the call (never run on an
    -- error), and its message is kept for whoever asked
    local ok, answer = pcall(p.confirm, call)
    if not ok then
      return nil, string.format("policy: %q not confirmed: confirm raised: %s", name, tostring(answer))
    end
    if answer ~= true then
      return nil, string.format("policy: %q not confirmed", name)
    end
  end
  return true
end

---@class hcp.PolicyCall
---@field pack string
---@field op string?              nil for a raw-args call (pack.exec)
---@field has_args boolean        the request carries raw args (a non-empty array)
---@field op_extra_args boolean?  the op declares "extra_args": true
---@field needs_confirm_op boolean   the op has confirm: true
---@field needs_confirm_exec boolean the raw call needs confirming (any op of the pack has confirm: true)

--- Decide a call by what runs (contract §4): `pack.op`, or `pack.exec` for
--- raw args; an op call that also carries raw args runs the op's template
--- AND arbitrary arguments, so it must be covered as `pack.exec` too (and
--- confirmed if either name needs it), unless the op declares
--- `extra_args: true`, which makes trailing args part of the op. Deny wins.
---@param p table policy from new()
---@param c hcp.PolicyCall
---@param call table the call given to policy.confirm
---@return boolean? ok, string? err
function M.check_call(p, c, call)
  local name = c.pack .. "." .. (c.op or "exec")
  local confirm = c.op and c.needs_confirm_op or (not c.op and c.needs_confirm_exec)
  local also
  if c.op and c.has_args and not c.op_extra_args then
    also = c.pack .. ".exec"
    confirm = confirm or c.needs_confirm_exec
  end
  if any(p.deny, name) or not any(p.allow, name) then
    return nil, string.format("policy: %q not covered", name)
  end
  if also and (any(p.deny, also) or not any(p.allow, also)) then
    return nil, string.format("policy: %q not covered (op %q was given raw args, which run as %s)", also, c.op, also)
  end
  return M.check(p, name, confirm and true or false, call)
end

return M
