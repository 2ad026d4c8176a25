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

local function under_host_root(p)
  local norm = core.normalize(p)
  for _, root in ipairs(M.HOST_ROOTS) do
    if core.contains(root, norm) then return true end
  end
  return false
end

--- §10.6: refuse any argument (or `--flag=value` value) that is an absolute
--- path lexically under /etc, /home, /root or /Users.
---@param argv string[] arguments after argv[0]
---@return boolean? ok, string? err
function M.check_host_paths(argv)
  for i, a in ipairs(argv) do
    local candidates = { a }
    local eq = a:find("=", 1, true)
    if eq then candidates[2] = a:sub(eq + 1) end
    for _, c in ipairs(candidates) do
      if c:sub(1, 1) == "/" and under_host_root(c) then
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
