--- Egress per binding (§10.4 "network egress policy per Binding"; the
--- guide's hardening table: Network inherited → egress per Binding family).
---
--- A pack declares the hosts it reaches without a credential
--- (`wrap.egress`); a binding of family `http` lists the hosts its
--- credential is for (`bindings.<b>.hosts`); an op may narrow its pack's
--- list (`ops.<o>.egress`, each entry within the pack's). A call may reach
--- the union of the op's list (else the pack's) and the hosts of the
--- bindings the op uses — a raw-args call (`<pack>.exec`) mints every
--- binding, so it gets every binding's hosts. The operator's
--- `egress = { allow, deny }` narrows every call; deny wins.
---
--- A host entry is `[METHOD ]HOST:PORT[/PATH]`: HOST a name (`api.github.com`),
--- a wildcard for the names under a domain (`*.example.com`, not the domain
--- itself), an IPv4 literal or a bracketed IPv6 literal; PORT required;
--- METHOD (`GET`, or `*`) and PATH (a glob where `*` is any run of
--- characters) are seen by the proxy in plain HTTP only, so an entry with
--- either allows plain HTTP alone — HTTPS (CONNECT) needs an entry without
--- them. Everything here is pure: the decisions the proxy asks for are made
--- by `decide`, with the address resolution done by the caller.
---@class hcp.egress
local M = {}

local check = require("hcp.check")

---@class hcp.EgressRule
---@field text string      as declared
---@field method string?   nil: any
---@field host string      lower case; "*.d" for a wildcard
---@field wildcard boolean
---@field literal boolean  an IP literal
---@field port integer
---@field path string?     nil: any
---@field source string    who declared it: `pack "p"`, `op "p.o"`, `binding "b"`, `operator`

local function valid_name(h)
  if #h > 253 or h == "" then return false end
  for label in (h .. "."):gmatch("([^.]*)%.") do
    if #label == 0 or #label > 63 or not label:match("^[%w]$") and not label:match("^[%w][%w%-]*[%w]$") then
      return false
    end
  end
  return true
end

local function ipv4(h)
  local a, b, c, d = h:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return nil end
  for _, n in ipairs({ a, b, c, d }) do
    if tonumber(n) > 255 or (#n > 1 and n:sub(1, 1) == "0") then return nil end
  end
  return true
end

local function ipv6(h)
  return h:match("^%[[%x:.]+%]$") ~= nil and h:find(":", 1, true) ~= nil
end

-- HOST:PORT into its parts; nil and why.
local function host_port(s)
  local host, port = s:match("^(%[[^%]]*%]):(%d+)$")
  if not host then host, port = s:match("^([^:/%s]+):(%d+)$") end
  if not host then return nil, "must be HOST:PORT (the port is required)" end
  local p = tonumber(port)
  if p < 1 or p > 65535 then return nil, "port must be 1 to 65535" end
  host = host:lower()
  local wildcard = host:sub(1, 2) == "*."
  local name = wildcard and host:sub(3) or host
  local literal = ipv4(name) or ipv6(name)
  if wildcard and (literal or not valid_name(name) or not name:find(".", 1, true)) then
    return nil, "a wildcard must be *.DOMAIN with at least two labels"
  end
  if not literal and not valid_name(name) then return nil, string.format("%q is not a host name or an IP literal", host) end
  return { host = host, port = math.tointeger(p), wildcard = wildcard, literal = literal and true or false }
end

--- Parse one entry.
---@param s any
---@param source string
---@return hcp.EgressRule? rule, string? err
function M.parse(s, source)
  if type(s) ~= "string" or s == "" or check.has_nul(s) then return nil, "must be a string such as \"api.example.com:443\"" end
  local method, rest = s:match("^([%u*]+)%s+(.+)$")
  rest = rest or s
  if method and method ~= "*" and not method:match("^%u+$") then return nil, "method must be upper case, or *" end
  local hp, path = rest:match("^([^/]+)(/.*)$")
  hp = hp or rest
  local r, err = host_port(hp)
  if not r then return nil, err end
  r.text, r.source = s, source
  r.method = method ~= "*" and method or nil
  r.path = path
  return r
end

--- Validate a manifest list of entries (wrap.egress, bindings.b.hosts,
--- ops.o.egress), reporting each bad one at its index.
---@param v any
---@param r hcp.Report
---@param field string
---@param source string
---@return hcp.EgressRule[]?
function M.validate_list(v, r, field, source)
  if v == nil then return nil end
  if not check.is_array(v) then
    r:bad(field, "must be an array of hosts such as \"api.example.com:443\"")
    return {}
  end
  local out = {}
  for i, s in ipairs(v) do
    local rule, err = M.parse(s, source)
    if rule then out[#out + 1] = rule else r:bad(field .. "[" .. i .. "]", "%s", err) end
  end
  return out
end

local function glob(pattern, s)
  local lua = "^" .. pattern:gsub("[%^%$%(%)%%%.%[%]%+%-%?]", "%%%0"):gsub("%*", ".*") .. "$"
  return s:match(lua) ~= nil
end

local function host_matches(rule, host)
  host = host:lower()
  if rule.wildcard then
    local suffix = rule.host:sub(2) -- ".example.com"
    return #host > #suffix and host:sub(-#suffix) == suffix
  end
  return rule.host == host
end

---@class hcp.EgressRequest
---@field host string      as the client named it (lower case)
---@field port integer
---@field method string?   nil for CONNECT (HTTPS: only host:port is seen)
---@field path string?

--- Whether `rule` covers the request: host and port, and method and path
--- where the rule has them (a rule with either never covers a CONNECT).
---@param rule hcp.EgressRule
---@param req hcp.EgressRequest
---@return boolean
function M.covers(rule, req)
  if rule.port ~= req.port or not host_matches(rule, req.host) then return false end
  if not req.method then return rule.method == nil and rule.path == nil end
  if rule.method and rule.method ~= req.method then return false end
  if rule.path and not glob(rule.path, req.path or "/") then return false end
  return true
end

local function first(rules, req)
  for _, rule in ipairs(rules or {}) do
    if M.covers(rule, req) then return rule end
  end
  return nil
end

--- Whether an entry of an op's `egress` lies within the pack's list: some
--- pack entry covers every request the op entry would.
---@param op_rule hcp.EgressRule
---@param pack_rules hcp.EgressRule[]
---@return boolean
function M.within(op_rule, pack_rules)
  for _, p in ipairs(pack_rules) do
    local host_ok = p.host == op_rule.host or (p.wildcard and op_rule.host:sub(-(#p.host - 1)) == p.host:sub(2)
      and #op_rule.host > #p.host - 1)
    if host_ok and p.port == op_rule.port and (p.method == nil or p.method == op_rule.method)
      and (p.path == nil or (op_rule.path ~= nil and glob(p.path, op_rule.path))) then
      return true
    end
  end
  return false
end

---@class hcp.EgressPlan
---@field unrestricted boolean  the host's network as it is (wrap.network, allowed by the operator)
---@field rules hcp.EgressRule[] what the call may reach
---@field allow hcp.EgressRule[]? the operator's allow list (nil: no narrowing)
---@field deny hcp.EgressRule[]  the operator's deny list
---@field resolve table<string, string> names the operator pins to addresses
---@field who string             how refusals name the declarer (`pack "gh"`)
---@field declared boolean       the pack declares hosts somewhere (its own, an op's, a binding's)

--- What one call may reach. `opts` is the operator's configuration
--- (hcp.options: network, egress, resolve); `names` the bindings the call
--- mints (hcp.bindings.needed: an op's own, every one for raw args, none
--- for rt:exec).
---@param pack hcp.Pack
---@param op table? the op, nil for a raw-args call
---@param opts { network: string?, egress: { allow: hcp.EgressRule[]?, deny: hcp.EgressRule[] }, resolve: table }
---@param names string[]
---@return hcp.EgressPlan? plan, string? err
function M.for_call(pack, op, opts, names)
  local plan = { unrestricted = false, rules = {}, allow = opts.egress.allow, deny = opts.egress.deny,
    resolve = opts.resolve, who = string.format("pack %q", pack.name) }
  if pack.wrap.network then
    if opts.network ~= "unrestricted" then
      return nil, string.format("sandbox: pack %q asks for unrestricted network (wrap.network: true); only the "
        .. "operator can allow it: hcp.create{ network = \"unrestricted\" } (or declare its hosts in wrap.egress)",
        pack.name)
    end
    plan.unrestricted = true
    return plan
  end
  local base = op and op.egress or pack.wrap.egress or {}
  for _, rule in ipairs(base) do plan.rules[#plan.rules + 1] = rule end
  for _, name in ipairs(names) do
    for _, rule in ipairs(pack.bindings[name] and pack.bindings[name].hosts or {}) do plan.rules[#plan.rules + 1] = rule end
  end
  plan.declared = #(pack.wrap.egress or {}) > 0
  for _, b in pairs(pack.bindings) do plan.declared = plan.declared or #(b.hosts or {}) > 0 end
  return plan
end

--- Whether the call needs a network at all (a proxy, or the host's).
---@param plan hcp.EgressPlan?
---@return boolean
function M.any(plan)
  return plan ~= nil and (plan.unrestricted or #plan.rules > 0)
end

--- Whether a call gets a proxy: its pack declares hosts (the call's own
--- list may be empty — an op that uses no binding of a pack whose hosts are
--- all its bindings' — and then every attempt is refused and recorded, so
--- the agent learns why), and it is not the host's whole network.
---@param plan hcp.EgressPlan?
---@return boolean
function M.proxied(plan)
  return plan ~= nil and not plan.unrestricted and (#plan.rules > 0 or plan.declared == true)
end

-- A path a glob can judge: no dot segment, no encoded dot, slash or
-- backslash, no backslash — a server would read those as another path.
local function plain_path(path)
  local p = (path or "/"):match("^[^?]*")
  return not (p:find("/%.%.?/") or p:find("/%.%.?$") or p:find("%%2[eEfF]") or p:find("%%5[cC]")
    or p:find("\\", 1, true))
end

-- Whether some rule with a path speaks of this host and port: then the
-- path must be one a glob can judge.
local function path_matters(plan, req)
  for _, list in ipairs({ plan.deny or {}, plan.allow or {}, plan.rules }) do
    for _, r in ipairs(list) do
      if r.path and r.port == req.port and host_matches(r, req.host) then return true end
    end
  end
  return false
end

--- The decision on one request, before any address is looked up: allowed
--- (with the rule that allows it) or refused with the reason a model can
--- be told. Deny wins; the operator's allow narrows; the call's rules
--- decide. Where a rule has a path, a request path with dot segments or
--- encoded separators is refused (the server would read another path).
---@param plan hcp.EgressPlan
---@param req hcp.EgressRequest
---@return hcp.EgressRule? rule, string? reason
function M.decide(plan, req)
  if req.method and not plain_path(req.path) and path_matters(plan, req) then
    return nil, string.format("the path %q has dot segments or encoded separators, which a path rule cannot judge",
      (req.path or ""):match("^[^?]*"))
  end
  local denied = first(plan.deny, req)
  if denied then return nil, string.format("denied by the operator (egress.deny %q)", denied.text) end
  if plan.allow and not first(plan.allow, req) then return nil, "not in the operator's egress.allow" end
  local rule = first(plan.rules, req)
  if rule then return rule end
  -- a rule for the host with a method or path: say why HTTPS is refused
  for _, r in ipairs(plan.rules) do
    if not req.method and r.port == req.port and host_matches(r, req.host) then
      return nil, string.format("declared by %s for plain HTTP only (%q has a method or path)", r.source, r.text)
    end
  end
  return nil, string.format("not declared by %s", plan.who)
end

-- Address classes a name may not resolve to unless a rule names the
-- address itself (or the operator pinned the name with `resolve`):
-- unspecified, private, shared, loopback, link-local, multicast, reserved.
local PRIVATE4 = { "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
  "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4" }

local function v4_bits(a)
  local n = 0
  for part in a:gmatch("%d+") do n = n * 256 + tonumber(part) end
  return n
end

local function private4(a)
  local n = v4_bits(a)
  for _, cidr in ipairs(PRIVATE4) do
    local base, len = cidr:match("^(.+)/(%d+)$")
    local size = 1 << (32 - tonumber(len))
    local start = v4_bits(base)
    if n >= start and n < start + size then return true end
  end
  return false
end

--- Whether an address (text, as the resolver gives it) is loopback,
--- private, link-local, multicast or unspecified.
---@param addr string
---@return boolean
function M.private_address(addr)
  if ipv4(addr) then return private4(addr) end
  local a = addr:lower():gsub("^%[", ""):gsub("%]$", "")
  if a == "::" or a == "::1" then return true end
  local mapped = a:match("^::ffff:(%d+%.%d+%.%d+%.%d+)$")
  if mapped then return private4(mapped) end
  local head = tonumber(a:match("^(%x+):") or "0", 16) or 0
  return head >= 0xfc00 and head <= 0xfdff      -- unique local
    or head >= 0xfe80 and head <= 0xfebf        -- link-local
    or head >= 0xff00                            -- multicast
end

--- After resolution: whether the call may connect to `addr` for a request
--- `rule` allowed. A literal rule, or a name the operator pinned with
--- `resolve`, may be any address; a name a resolver answered may not be a
--- private one.
---@param plan hcp.EgressPlan
---@param rule hcp.EgressRule
---@param req hcp.EgressRequest
---@param addr string
---@return boolean ok, string? reason
function M.address_ok(plan, rule, req, addr)
  if rule.literal or plan.resolve[req.host] then return true end
  if M.private_address(addr) then
    return false, string.format("%q resolves to %s, a private or loopback address, which only a literal entry "
      .. "may reach", req.host, addr)
  end
  return true
end

--- The address a request goes to without a lookup: the operator's pin
--- (`resolve`), or the IP literal the request names; nil for a name.
---@param plan hcp.EgressPlan
---@param host string as the client named it (an IPv6 literal in brackets)
---@return string? addr
function M.pinned(plan, host)
  if plan.resolve[host] then return plan.resolve[host] end
  if ipv4(host) then return host end
  if ipv6(host) then return host:sub(2, -2) end
  return nil
end

--- Answer what a call's proxy asks (core.egress): each request waiting is
--- decided here, by `decide` and `address_ok` — the one place the rules
--- live. A name neither pinned nor literal is looked up by the runtime
--- (eng:resolve) and comes back with its addresses; only the addresses it
--- may reach are given to the connect, in the resolver's order.
---@param engine userdata core.egress()
---@param plan hcp.EgressPlan
function M.serve(engine, plan)
  for _, r in ipairs(engine:pending()) do
    local req = { host = r.host, port = r.port, method = r.method, path = r.path }
    local rule, reason = M.decide(plan, req)
    local addr = rule and not r.addrs and M.pinned(plan, req.host)
    if not rule then
      engine:answer(r.id, nil, reason)
    elseif addr then
      local ok, why = M.address_ok(plan, rule, req, addr)
      if ok then engine:answer(r.id, addr) else engine:answer(r.id, nil, why) end
    elseif not r.addrs then
      engine:resolve(r.id)
    else
      local good, why = {}, nil
      for _, a in ipairs(r.addrs) do
        local ok, w = M.address_ok(plan, rule, req, a)
        if ok then good[#good + 1] = a else why = why or w end
      end
      if #good > 0 then engine:answer(r.id, good) else engine:answer(r.id, nil, why) end
    end
  end
end

--- The environment that points a child at its proxy: the variables curl,
--- git, Python, Go and most HTTP clients read, with nothing exempt.
---@param port integer core.EGRESS_PORT
---@return table<string, string>
function M.proxy_env(port)
  local url = "http://127.0.0.1:" .. math.tointeger(port)
  return { HTTP_PROXY = url, HTTPS_PROXY = url, http_proxy = url, https_proxy = url, ALL_PROXY = url,
    all_proxy = url, NO_PROXY = "", no_proxy = "" }
end

-- Attempts in a result: identical ones are merged (count, bytes summed).
M.REPORT_MAX = 256

--- A result's `egress`: the proxy's log of attempts, the same host, verdict,
--- method, path, reason and error merged into one entry with `count`; at
--- most REPORT_MAX entries (`truncated` then, or when the proxy kept fewer
--- than it saw).
---@param log table[] eng:log()
---@param dropped integer attempts the proxy did not keep
---@return table[] entries, boolean truncated
function M.report(log, dropped)
  local out, seen, truncated = {}, {}, dropped > 0
  for _, e in ipairs(log) do
    local key = table.concat({ e.host, tostring(e.allowed), e.method or "", e.path or "", e.reason or "",
      e.error or "" }, "\0")
    local have = seen[key]
    if have then
      have.count = (have.count or 1) + 1
      if e.allowed then
        have.bytes_in, have.bytes_out = have.bytes_in + e.bytes_in, have.bytes_out + e.bytes_out
      end
    elseif #out < M.REPORT_MAX then
      local entry = { host = e.host, allowed = e.allowed, reason = e.reason, error = e.error,
        bytes_in = e.bytes_in, bytes_out = e.bytes_out, method = e.method, path = e.path }
      out[#out + 1], seen[key] = entry, entry
    else
      truncated = true
    end
  end
  return out, truncated
end

--- The operator's options: `network` ("unrestricted" lets wrap.network
--- packs have the host's network), `egress = { allow = {...}, deny = {...} }`,
--- `resolve = { name = address }`.
---@param opts table hcp.create options (types checked)
---@return table? cfg, string? err
function M.options(opts)
  local cfg = { network = opts.network, egress = { deny = {} }, resolve = {} }
  if opts.network ~= nil and opts.network ~= "unrestricted" and opts.network ~= "egress" then
    return nil, "hcp.create: option \"network\" must be \"egress\" (the default) or \"unrestricted\""
  end
  for _, key in ipairs({ "allow", "deny" }) do
    local list = opts.egress and opts.egress[key]
    if list ~= nil then
      if not check.is_array(list) then return nil, string.format("hcp.create: egress.%s must be an array of hosts", key) end
      local out = {}
      for i, s in ipairs(list) do
        local rule, err = M.parse(s, "operator")
        if not rule then return nil, string.format("hcp.create: egress.%s[%d]: %s", key, i, err) end
        out[i] = rule
      end
      cfg.egress[key] = out
    end
  end
  local unknown = opts.egress and check.unknown_key(opts.egress, { allow = true, deny = true })
  if unknown then return nil, string.format("hcp.create: egress: unknown key %q (allow, deny)", unknown) end
  for name, addr in pairs(opts.resolve or {}) do
    if type(name) ~= "string" or not valid_name(name:lower()) or type(addr) ~= "string"
      or not (ipv4(addr) or ipv6("[" .. addr:gsub("^%[", ""):gsub("%]$", "") .. "]")) then
      return nil, string.format("hcp.create: resolve[%q] must map a host name to an IP address", tostring(name))
    end
    cfg.resolve[name:lower()] = addr:gsub("^%[", ""):gsub("%]$", "")
  end
  return cfg
end

return M
