--- The Lua side of the hcp-lua REPL: the `rt` it starts with, and how
--- results print (a compact JSON-like view, result fields in their usual
--- order).
---@class hcp.repl
local M = {}

local json = require("hcp.json")

local MAX_DEPTH = 6
local MAX_STRING = 2000

local function is_ident(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end

local function view(v, depth, seen)
  local tv = type(v)
  if tv == "string" then
    if #v > MAX_STRING then
      return string.format("%q", v:sub(1, MAX_STRING)):gsub("\\\n", "\\n") .. "…(" .. #v .. " bytes)"
    end
    return (string.format("%q", v):gsub("\\\n", "\\n"))
  elseif tv ~= "table" then
    if v == json.null then return "null" end
    return tostring(v)
  end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return "<" .. tostring(v) .. ">" end
  if seen[v] then return "<cycle>" end
  if depth >= MAX_DEPTH then return "{…}" end
  seen[v] = true
  local parts = {}
  local n = #v
  for i = 1, n do parts[#parts + 1] = view(v[i], depth + 1, seen) end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, json.key_less)
  for _, k in ipairs(keys) do
    local ks = is_ident(k) and k or "[" .. view(k, depth + 1, seen) .. "]"
    parts[#parts + 1] = ks .. " = " .. view(v[k], depth + 1, seen)
  end
  seen[v] = nil
  if #parts == 0 then return "{}" end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

--- A one-line readable view of any value.
---@param v any
---@return string
function M.view(v)
  return view(v, 0, {})
end

--- Print values the way the REPL shows results: as lua.c does for
--- everything but tables (a string prints as itself), and tables in the
--- compact view, strings quoted inside them.
function M.print(...)
  local out = {}
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    local mt = type(v) == "table" and getmetatable(v)
    if type(v) == "table" and not (mt and mt.__tostring) then
      out[i] = M.view(v)
    else
      out[i] = tostring(v)
    end
  end
  io.stdout:write(table.concat(out, "\t"), "\n")
end

--- What the REPL says when it found no packs: where it looked, and where
--- that came from.
---@param dirs string[] the pack_dirs it used
---@return string
function M.no_packs(dirs)
  local function env(name)
    local v = os.getenv(name)
    return (v and v ~= "") and string.format("%s=%s", name, v) or (name .. " is not set")
  end
  local where = #dirs > 0 and ("looked in " .. table.concat(dirs, ", ")) or "looked nowhere: there is no ./packs here"
  return string.format("hcp-lua: no packs loaded; %s (%s, %s); rt has no packs to call", where, env("HCP_PACK_PATH"),
    env("HCP_CONFIG"))
end

--- The REPL's runtime, over the configured packs ($HCP_CONFIG,
--- $HCP_PACK_PATH or ./packs). Raises with the reason when the configuration
--- is bad; hcp-lua turns that into a one-line warning and starts without rt.
---@return hcp.Runtime
function M.runtime()
  local hcp = require("hcp")
  local config = require("hcp.config")
  local opts = assert(config.options({}))
  local rt, err = hcp.create(opts)
  if not rt then error(err, 0) end
  for _, p in ipairs(rt:problems()) do
    io.stderr:write(require("hcp.manifest").format_problem(p), "\n")
  end
  if #rt:packs() == 0 then io.stderr:write(M.no_packs(opts.pack_dirs), "\n") end
  -- a printer the user defined (with -e or -l) wins
  if _G.hcp_repl_print == nil then _G.hcp_repl_print = M.print end
  return rt
end

return M
