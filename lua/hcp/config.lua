--- Where the commands and the REPL get their hcp.create options from: a
--- `--config FILE.lua` (or `$HCP_CONFIG`) returning a table, the pack dirs
--- (`--pack-dir`, else `$HCP_PACK_PATH`, else `./packs`), extra allow-list
--- entries, and the double opt-in of native-local.
---@class hcp.config
local M = {}

--- `$HCP_PACK_PATH` split on ':', or nil when it is unset or empty (also
--- what hcp.create uses when it is given no pack_dirs).
---@return string[]?
function M.env_pack_dirs()
  local env = os.getenv("HCP_PACK_PATH")
  if not env or env == "" then return nil end
  local dirs = {}
  for d in env:gmatch("[^:]+") do dirs[#dirs + 1] = d end
  return dirs
end

--- `$HCP_PACK_PATH` split on ':', else `{ "packs" }` when ./packs exists
--- (a missing default is no problem to report; a missing configured dir is).
---@return string[]
function M.default_pack_dirs()
  local dirs = M.env_pack_dirs()
  if dirs then return dirs end
  if require("hcp.core").kind("packs") then return { "packs" } end
  return {}
end

--- Load a Lua config file that returns the options table.
---@param path string
---@return table? opts, string? err
function M.load_file(path)
  local chunk, err = loadfile(path, "t")
  if not chunk then return nil, "config: " .. tostring(err) end
  local ok, t = pcall(chunk)
  if not ok then return nil, "config: " .. path .. ": " .. tostring(t) end
  if type(t) ~= "table" then return nil, "config: " .. path .. ": must return a table of hcp.create options" end
  return t
end

---@class hcp.ConfigArgs
---@field config string?
---@field pack_dir string[]?
---@field allow_bin string[]?
---@field no_sandbox boolean?
---@field native_local boolean?
---@field out_dir string?
---@field replace boolean?
---@field no_replace boolean?
---@field allow_hidden boolean?
---@field audit string?
---@field replace_default boolean? what replace is when neither the flags nor the file say (hcp run: true)

--- The out_dir options of a command (issue 11): the commands and the REPL
--- stage from and write back under the current directory unless
--- `--out-dir` or the config file says otherwise; `--replace`/
--- `--no-replace` win over the file, which wins over the command's default;
--- the config file itself is protected (an output must never replace it).
---@param opts table
---@param a hcp.ConfigArgs
---@param file string? the config file
function M.file_options(opts, a, file)
  local absolute = require("hcp.manifest").absolute
  if a.out_dir then opts.out_dir = absolute(a.out_dir) end
  if opts.out_dir == nil then opts.out_dir = absolute(".") end
  if a.replace then
    opts.replace = true
  elseif a.no_replace then
    opts.replace = false
  elseif opts.replace == nil and a.replace_default ~= nil then
    opts.replace = a.replace_default
  end
  if a.allow_hidden then opts.allow_hidden = true end
  if file and file ~= "" then
    local protect = {}
    for i, p in ipairs(type(opts.protect) == "table" and opts.protect or {}) do protect[i] = p end
    protect[#protect + 1] = absolute(file)
    opts.protect = protect
  end
end

--- Build hcp.create options. Command-line values win over the config file.
---@param a hcp.ConfigArgs
---@return table? opts, string? err
function M.options(a)
  local opts = {}
  local file = a.config or os.getenv("HCP_CONFIG")
  if file and file ~= "" then
    local t, err = M.load_file(file)
    if not t then return nil, err end
    for k, v in pairs(t) do opts[k] = v end
  end
  if a.pack_dir and #a.pack_dir > 0 then
    opts.pack_dirs = a.pack_dir
  elseif opts.pack_dirs == nil then
    opts.pack_dirs = M.default_pack_dirs()
  end
  if a.allow_bin and #a.allow_bin > 0 then
    local list = {}
    for _, b in ipairs(opts.allow_bins or { "hcpx", "hcp" }) do list[#list + 1] = b end
    for _, b in ipairs(a.allow_bin) do list[#list + 1] = b end
    opts.allow_bins = list
  end
  if a.no_sandbox then opts.sandbox = false end
  if a.native_local then opts.native_local = true end
  if a.audit then opts.audit = require("hcp.manifest").absolute(a.audit) end
  M.file_options(opts, a, file)
  return opts
end

return M
