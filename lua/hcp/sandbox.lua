--- The sandbox rules of §10.1–10.3 and §10.5: the mode, the allow-list,
--- where a bin is looked for, the child's environment, and the host-path
--- rule for arguments. The matching and resolution themselves are in the C
--- core (`hcp.core`); this module decides which rule applies.
---@class hcp.sandbox
local M = {}

local core = require("hcp.core")

M.DEFAULT_SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin"
M.SEED_ALLOWLIST = { "hcpx", "hcp" }
-- §10.6: host-absolute paths a sandboxed argument may never name.
M.HOST_ROOTS = { "/etc", "/home", "/root", "/Users" }

--- §10.1 and §10.5: native-local only with `sandbox = false` AND
--- `native_local = true`; anything else, including no configuration, is
--- sandbox.
---@param sandbox boolean?
---@param native_local boolean?
---@return "sandbox"|"native-local"
function M.mode(sandbox, native_local)
  if sandbox == false and native_local == true then return "native-local" end
  return "sandbox"
end

--- Whether `s` is an acceptable allow-list entry: a bare name or an
--- absolute path.
---@param s any
---@return boolean
function M.valid_entry(s)
  if type(s) ~= "string" or s == "" or s:find("\0", 1, true) then return false end
  if s:sub(1, 1) == "/" then return true end
  return not s:find("/", 1, true) and s ~= "." and s ~= ".."
end

--- Where bare names are looked up: `search_path` in sandbox mode, the
--- host's `$PATH` in native-local (§10.3.1).
---@param mode string
---@param search_path string
---@return string
function M.lookup_path(mode, search_path)
  if mode == "native-local" then
    return os.getenv("PATH") or search_path
  end
  return search_path
end

local function not_allowlisted(bin)
  return nil, 127, string.format("sandbox: bin %q not allowlisted", bin)
end

-- Whether an allow-list entry could match a bare name, decided before the
-- filesystem is touched (§10.2.1: never resolve an unlisted bare name).
local function could_match(name, list)
  for _, e in ipairs(list) do
    if e == name or (e:sub(1, 1) == "/" and e:sub(-(#name + 1)) == "/" .. name) then return true end
  end
  return false
end

---@class hcp.Resolved
---@field path string     absolute path of the file that will be executed
---@field beneath string? the directory a `./rel` bin was opened beneath (the pack root)
---@field argv0 string    what the child sees as argv[0]

--- §10.2.1 in one place, for every user of it: a pack's `wrap.bin` at load
--- time (no allow-list yet: the list is made from these), `rt:exec`, and
--- `hcp wrap`. A bare name is looked up in `lookup` only; an absolute path
--- is taken as it is; `./rel` is opened beneath `root` and may not leave it,
--- through a symlink either. With an allow-list, a name no entry could
--- match is refused before anything is looked up, and the resolved path
--- must match an entry.
---@param bin string
---@param opts { lookup: string, root: string?, allowlist: string[]? }
---@return hcp.Resolved? resolved, integer? exit, string? err
function M.resolve(bin, opts)
  local list = opts.allowlist
  if type(bin) ~= "string" or bin == "" or bin:find("\0", 1, true) then
    return nil, 126, "envelope: field \"bin\" must be a non-empty string"
  end
  local relative = bin:sub(1, 2) == "./"
  if not relative and not M.valid_entry(bin) then return not_allowlisted(bin) end
  if relative and not opts.root then return not_allowlisted(bin) end
  if list and bin:sub(1, 1) == "/" and not core.allow_match(core.normalize(bin), list) then return not_allowlisted(bin) end
  if list and not relative and bin:sub(1, 1) ~= "/" and not could_match(bin, list) then return not_allowlisted(bin) end
  local path, err
  if relative then
    path, err = core.resolve_beneath(opts.root, bin:sub(3))
  else
    path, err = core.resolve(bin, opts.lookup)
  end
  if not path then return nil, 127, "spawn: bin " .. string.format("%q", bin) .. ": " .. tostring(err) end
  if list and not core.allow_match(path, list) then return not_allowlisted(bin) end
  return { path = path, beneath = relative and opts.root or nil, argv0 = relative and path or bin }
end

--- The allow-list: the seed (or `allow_bins`), plus every loaded pack's bin
--- (its resolved absolute path when the bin is `./rel`).
---@param allow_bins string[]?
---@param packs hcp.Pack[]
---@return string[]
function M.allowlist(allow_bins, packs)
  local list, seen = {}, {}
  local function add(e)
    if not seen[e] then seen[e] = true; list[#list + 1] = e end
  end
  for _, e in ipairs(allow_bins or M.SEED_ALLOWLIST) do add(e) end
  for _, p in ipairs(packs) do
    if p.wrap.bin_kind == "relative" then
      if p.bin_path then add(p.bin_path) end
    else
      add(p.wrap.bin)
    end
  end
  return list
end

--- §10.2.1: a bin is runnable only when its resolved path matches an entry.
---@param path string resolved absolute path
---@param list string[]
---@param shown string the bin as the caller named it, for the message
---@return boolean? ok, string? err
function M.check_allowed(path, list, shown)
  if core.allow_match(path, list) then return true end
  return nil, string.format("sandbox: bin %q not allowlisted", shown)
end

-- The host roots, and what they resolve to on this host (a /home that is a
-- link to /data/home makes /data/home a host root too), lower-cased: the
-- comparison ignores case, for case-insensitive file systems.
local host_roots
local function roots()
  if host_roots then return host_roots end
  host_roots = {}
  for _, r in ipairs(M.HOST_ROOTS) do
    host_roots[#host_roots + 1] = r:lower()
    local real = core.realpath(r)
    if real and real ~= r then host_roots[#host_roots + 1] = real:lower() end
  end
  return host_roots
end

local function under_host_root(norm)
  local low = norm:lower()
  for _, root in ipairs(roots()) do
    if core.contains(root, low) then return true end
  end
  return false
end

-- /proc and /dev/fd names that lead to another root, another cwd or another
-- process's files: /proc/<pid>/…, /proc/self/{root,cwd,exe,map_files},
-- /proc/self/fd/N beyond 0..2 and anything beneath a descriptor,
-- /proc/self/task/<tid>/… alike, /dev/fd/N beyond 0..2.
local function magic(norm)
  local c = {}
  for part in norm:gmatch("[^/]+") do c[#c + 1] = part end
  local i
  if c[1] == "proc" and c[2] then
    if c[2]:match("^%d+$") then return true end
    if c[2] ~= "self" and c[2] ~= "thread-self" then return false end
    i = 3
    if c[i] == "task" then
      if not c[i + 1] then return false end
      i = i + 2
    end
    if c[i] == "root" or c[i] == "cwd" or c[i] == "exe" or c[i] == "map_files" then return true end
    if c[i] ~= "fd" then return false end
    i = i + 1
  elseif c[1] == "dev" and c[2] == "fd" then
    i = 3
  else
    return false
  end
  if not c[i] then return false end
  return c[i + 1] ~= nil or not c[i]:match("^[012]$")
end

-- Whether an absolute path names a host path: lexically (after
-- normalisation), through the /proc forms above, or — where it exists now —
-- as the kernel resolves it (a link /tmp/e -> /etc). The last is a check at
-- call time only: the child's own view (Landlock, bwrap) is what holds
-- afterwards.
local function host_path(path)
  local norm = core.normalize(path)
  if under_host_root(norm) or magic(norm) then return true end
  -- /proc and /dev are magic links all the way: the lexical rule above is
  -- theirs (resolving /proc/self would name the runtime, not the child)
  if core.contains("/proc", norm) or core.contains("/dev", norm) then return false end
  -- as the kernel walks it: ".." after a link goes up from the link's
  -- target (/tmp/l -> /etc/ssl: /tmp/l/../shadow is /etc/shadow), so the
  -- path is resolved as spelled, its longest existing prefix
  local rest = ""
  local cur = path:gsub("/+$", "")
  while cur ~= "" do
    local real = core.realpath(cur)
    if real then
      local full = core.normalize(real .. rest)
      return under_host_root(full) or magic(full)
    end
    local parent, leaf = cur:match("^(.*)/([^/]*)$")
    if not parent then return false end
    rest = "/" .. leaf .. rest
    cur = parent
  end
  return false
end

local function percent_decode(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- The path of a file: URI (file:/p, file://host/p, file:///p, percent
-- escapes decoded), or nil when it names none.
local function uri_path(u)
  local rest = u:sub(6)
  rest = rest:match("^[^?#]*")
  if rest:sub(1, 2) == "//" then
    rest = rest:match("^//[^/]*(.*)$")
  end
  rest = percent_decode(rest)
  if rest:sub(1, 1) == "/" then return rest end
  return nil
end

-- Characters after which a new path may start inside an argument: a
-- --flag=value, key=value, a PATH-like list, a quoted or spaced word in
-- SQL or a script, @file forms.
local SEP = "[%s'\"=:,;@(<>|&`+\\%[%]{}-]"
local PATH_END = "^[^%s'\"=:,;@(<>|&`\\%[%]{}]*"

-- Every place in `a` where a path can start: the start, after a
-- separator, or after the letters of a glued short option (-o/etc/x,
-- -I/root). Each with whether it starts a value (the whole argument, after
-- "=", after the glued option), where a tool might expand "~".
local function starts(a)
  local out = {}
  local glued = a:match("^%-%w+()")
  for p in a:gmatch("()[/~fF]") do
    local prev = p > 1 and a:sub(p - 1, p - 1) or ""
    if p == 1 or p == glued or prev:match(SEP) then
      out[#out + 1] = { p = p, value = p == 1 or p == glued or prev == "=" }
    end
  end
  return out
end

-- Whether the text of `a` at start `s` names a host path.
local function names_host(a, s)
  local p = s.p
  local c = a:sub(p, p)
  if c == "/" then
    if a:sub(math.max(1, p - 10), p - 1):lower() == "workspace:" then return false end
    return host_path(a:match(PATH_END, p))
  elseif c == "~" then
    -- ~ and ~user name home directories, for the tools that expand them
    return s.value and (a:match("^~[%w._-]*$", p) or a:match("^~[%w._-]*/", p)) ~= nil
  elseif a:sub(p, p + 4):lower() == "file:" then
    local path = uri_path(a:sub(p))
    return path ~= nil and host_path(path)
  end
  return false
end

--- §10.6: refuse any argument that carries an absolute path under /etc,
--- /home, /root or /Users — in any form an argument can carry one: the
--- whole argument, the value of `--flag=value` of any flag (and every other
--- `=`), after a glued short option (`-o/etc/x`), after a separator inside
--- the argument (`a:/etc`, `x,/root`, `'.open /etc/shadow'`), a `file:` URI
--- (percent escapes decoded), `~` and `~user` (a home directory), the
--- /proc forms that lead to another root or process (`/proc/self/root/…`,
--- `/proc/<n>/cwd/…`, `/proc/thread-self/…`), and paths that reach a host
--- root through a symlink that exists now. `workspace:REL` names the jail
--- and is exempt. Host roots compare case-insensitively.
---@param argv string[] arguments after argv[0]
---@return boolean? ok, string? err
function M.check_host_paths(argv)
  for i, a in ipairs(argv) do
    for _, st in ipairs(starts(a)) do
      if names_host(a, st) then
        return nil, string.format("sandbox: host path not allowed: argument %d %q", i, a)
      end
    end
  end
  return true
end

--- §10.2.3–10.2.4: the child's whole environment. Nothing comes from the
--- runtime's own environment except, in native-local mode, `$PATH`.
---@param mode string
---@param search_path string
---@param agent_env table<string, string>
---@param minted table<string, string>
---@param extra table<string, string>? runtime-set variables (home_env, TMPDIR)
---@return table<string, string>
function M.child_env(mode, search_path, agent_env, minted, extra)
  local env = {}
  for k, v in pairs(agent_env) do env[k] = v end
  for k, v in pairs(extra or {}) do env[k] = v end
  for k, v in pairs(minted) do env[k] = v end
  env.PATH = M.lookup_path(mode, search_path)
  env.HCP_SANDBOX = mode
  return env
end

--- Validate a colon-separated search path: every entry absolute.
---@param s any
---@return string? path, string? err
function M.check_search_path(s)
  if type(s) ~= "string" or s == "" then
    return nil, "hcp.create: option \"search_path\" must be a non-empty string"
  end
  for entry in (s .. ":"):gmatch("([^:]*):") do
    if entry:sub(1, 1) ~= "/" then
      return nil, string.format("hcp.create: search_path entry %q is not an absolute directory", entry)
    end
  end
  return s
end

return M
