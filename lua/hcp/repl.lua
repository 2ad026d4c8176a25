--- The Lua side of the hcp-lua REPL: the `rt` it starts with, how results
--- print (a compact JSON-like view, result fields in their usual order,
--- spread over indented lines when wider than the terminal), and what TAB
--- completes. The readline glue is in src/repl.c; everything here is pure
--- and takes its inputs as arguments.
---@class hcp.repl
local M = {}

local json = require("hcp.json")

local MAX_DEPTH = 6
local MAX_STRING = 2000

local function is_ident(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end

-- A table that prints through tostring: it has __tostring, or hides its
-- metatable behind __metatable.
local function opaque(v)
  local mt = getmetatable(v)
  return mt ~= nil and (type(mt) ~= "table" or mt.__tostring ~= nil)
end

-- Columns a view takes: its characters when it is UTF-8, else its bytes.
local function cols(s)
  return utf8.len(s) or #s
end

-- The entries of a table in print order: the array part, then the other
-- keys sorted as result fields are. Each is { key text or nil, value }.
local function entries(v, depth, seen, view_fn)
  local out, n = {}, #v
  for i = 1, n do out[#out + 1] = { nil, v[i] } end
  local keys = {}
  for k in pairs(v) do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then keys[#keys + 1] = k end
  end
  table.sort(keys, json.key_less)
  for _, k in ipairs(keys) do
    out[#out + 1] = { is_ident(k) and k or "[" .. view_fn(k, depth + 1, seen) .. "]", v[k] }
  end
  return out
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
  if opaque(v) then return "<" .. tostring(v) .. ">" end
  if seen[v] then return "<cycle>" end
  if depth >= MAX_DEPTH then return "{…}" end
  seen[v] = true
  local parts = {}
  for _, e in ipairs(entries(v, depth, seen, view)) do
    parts[#parts + 1] = (e[1] and e[1] .. " = " or "") .. view(e[2], depth + 1, seen)
  end
  seen[v] = nil
  if #parts == 0 then return "{}" end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

local function is_atom(v)
  return type(v) ~= "table" or opaque(v) or next(v) == nil
end

-- An array of atoms (strings, numbers, …) fills its lines, as many
-- elements to a line as fit. Returns false for any other table.
local function fill_atoms(list, lines, pad, width, depth, seen)
  for _, e in ipairs(list) do
    if e[1] or not is_atom(e[2]) then return false end
  end
  local line = ""
  for i, e in ipairs(list) do
    local item = view(e[2], depth + 1, seen) .. (i < #list and "," or "")
    if line ~= "" and #pad + cols(line) + 1 + cols(item) > width then
      lines[#lines + 1] = pad .. line
      line = item
    else
      line = line == "" and item or line .. " " .. item
    end
  end
  lines[#lines + 1] = pad .. line
  return true
end

-- The view of `v` starting at column `col` of a line indented by `indent`:
-- on one line when it fits in `width`, else a table opens on this line,
-- each entry on its own line two columns deeper, and closes on a line of
-- its own. Atoms (strings, numbers, values with __tostring) never split.
local function layout(v, col, indent, width, depth, seen)
  local one = view(v, depth, seen)
  if col + cols(one) <= width or is_atom(v) or seen[v] or depth >= MAX_DEPTH then return one end
  seen[v] = true
  local pad = string.rep(" ", indent + 2)
  local lines = { "{" }
  local list = entries(v, depth, seen, view)
  if not fill_atoms(list, lines, pad, width, depth, seen) then
    for i, e in ipairs(list) do
      local key = e[1] and e[1] .. " = " or ""
      local comma = i < #list and "," or ""
      local text = layout(e[2], indent + 2 + cols(key), indent + 2, width - #comma, depth + 1, seen)
      lines[#lines + 1] = pad .. key .. text .. comma
    end
  end
  seen[v] = nil
  lines[#lines + 1] = string.rep(" ", indent) .. "}"
  return table.concat(lines, "\n")
end

--- A readable view of any value: one line, or, given a `width`, a table
--- that does not fit in it spread over several lines, each entry on its own
--- line indented by two spaces per level.
---@param v any
---@param width integer? columns; nil for a single line whatever its length
---@return string
function M.view(v, width)
  if width == nil then return view(v, 0, {}) end
  return layout(v, 0, 0, width, 0, {})
end

local tty_module -- false when hcp-lua's src/repl.c did not preload it

--- The width results are laid out in: the terminal's (when the REPL runs
--- in hcp-lua on a terminal), else `$COLUMNS`, else 80.
---@return integer
function M.width()
  if tty_module == nil then
    local ok, mod = pcall(require, "hcp.repl.tty")
    tty_module = ok and type(mod) == "table" and type(mod.width) == "function" and mod or false
  end
  local w = tty_module and tty_module.width()
  if math.type(w) ~= "integer" or w < 1 then w = math.tointeger(tonumber(os.getenv("COLUMNS") or "")) end
  if math.type(w) ~= "integer" or w < 1 then w = 80 end
  return w
end

--- Print values the way the REPL shows results: as lua.c does for
--- everything but tables (a string prints as itself), and tables in the
--- compact view, strings quoted inside them, over several lines when wider
--- than `M.width()`.
function M.print(...)
  local out, width = {}, M.width()
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if type(v) == "table" and not opaque(v) then
      out[i] = M.view(v, width)
    else
      out[i] = tostring(v)
    end
  end
  io.stdout:write(table.concat(out, "\t"), "\n")
end

-- ---- completion --------------------------------------------------------

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
  "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }

local MAX_CHAIN = 8 -- __index tables followed, at most

-- v[k] without running any code: raw fields, then __index tables (never
-- __index functions or other metamethods: completing must not call user code).
local function peek(v, k)
  for _ = 1, MAX_CHAIN do
    if type(v) == "table" then
      local r = rawget(v, k)
      if r ~= nil then return r end
    end
    local mt = getmetatable(v)
    local idx = type(mt) == "table" and rawget(mt, "__index")
    if type(idx) ~= "table" then return nil end
    v = idx
  end
  return nil
end

-- The identifier keys of v and of its __index tables, an own field hiding
-- an inherited one; functions only when `methods`.
local function fields(v, methods)
  local out, seen = {}, {}
  for _ = 1, MAX_CHAIN do
    if type(v) == "table" then
      for k, val in next, v do
        if is_ident(k) and not seen[k] then
          seen[k] = true
          if not methods or type(val) == "function" then out[#out + 1] = k end
        end
      end
    end
    local mt = getmetatable(v)
    local idx = type(mt) == "table" and rawget(mt, "__index")
    if type(idx) ~= "table" then break end
    v = idx
  end
  return out
end

-- Where the end of `line` is: "code", "comment", or "string" with the index
-- its contents start at and its opening quote.
local function lex_end(line)
  local i, n = 1, #line
  while i <= n do
    local c = line:sub(i, i)
    local eq = line:match("^%[(=*)%[", i)
    if c == "-" and line:sub(i + 1, i + 1) == "-" then
      local ceq = line:match("^%[(=*)%[", i + 2)
      if not ceq then return "comment" end
      local close = line:find("]" .. ceq .. "]", i + 4 + #ceq, true)
      if not close then return "comment" end
      i = close + #ceq + 2
    elseif c == '"' or c == "'" then
      local j = i + 1
      while true do
        local ch = line:sub(j, j)
        if ch == "" then return "string", i + 1, c end
        if ch == c then break end
        j = j + (ch == "\\" and 2 or 1)
      end
      i = j + 1
    elseif eq then
      local close = line:find("]" .. eq .. "]", i + 2 + #eq, true)
      if not close then return "string", i + 2 + #eq, "[" end
      i = close + #eq + 2
    else
      i = i + 1
    end
  end
  return "code"
end

local function matching(names, prefix)
  local out, seen = {}, {}
  local hidden = prefix:sub(1, 1) ~= "_"
  for _, name in ipairs(names) do
    if name:sub(1, #prefix) == prefix and not seen[name] and not (hidden and name:sub(1, 1) == "_") then
      seen[name] = true
      out[#out + 1] = name
    end
  end
  table.sort(out)
  return out
end

-- A runtime is recognised by its metatable's name, never by calling anything.
local function is_runtime(v)
  local mt = type(v) == "table" and getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__name") == "hcp.Runtime"
end

-- Resolve a dotted name (`rt`, `a.b.rt`) in env.
local function resolve(env, dotted)
  local v = env
  for part in dotted:gmatch("[^%.]+") do
    v = peek(v, part)
    if v == nil then return nil end
  end
  return v
end

-- The packs of the runtime a string at the end of `before` is given to: the
-- receiver of the last `x:method{` / `x:method({` in it, else env.rt.
local function packs_for(before, env)
  local recv
  for name in before:gmatch("([%a_][%w_%.]*)%s*:%s*[%a_][%w_]*%s*%(?%s*{") do recv = name end
  local rt = recv and resolve(env, recv)
  if not is_runtime(rt) then rt = peek(env, "rt") end
  if not is_runtime(rt) then return {} end
  local packs_fn = peek(rt, "packs")
  local ok, packs = pcall(packs_fn, rt)
  return ok and type(packs) == "table" and packs or {}
end

-- Pack and op names inside `pack = "…` and `op = "…`.
local function complete_string(line, start, env)
  local before = line:sub(1, start - 2)
  local prefix = line:sub(start)
  local key = before:match("%f[%w_]([%a_][%w_]*)%s*=%s*$")
  if key ~= "pack" and key ~= "op" then return {} end
  local names, want = {}, nil
  if key == "op" then
    for _, name in before:gmatch("%f[%w_]pack%s*=%s*([\"'])([^\"']*)%1") do want = name end
  end
  for _, p in ipairs(packs_for(before, env)) do
    p = type(p) == "table" and p or {}
    if key == "pack" then
      names[#names + 1] = p.name
    elseif want == nil or want == p.name then
      for _, op in ipairs(type(p.ops) == "table" and p.ops or {}) do names[#names + 1] = op end
    end
  end
  -- what readline will print: names as manifests allow them, never control bytes
  local safe = {}
  for _, n in ipairs(names) do
    if type(n) == "string" and n:match("^[%w._%-]+$") then safe[#safe + 1] = n end
  end
  return matching(safe, prefix)
end

-- Globals, and fields and methods after `a.b.` / `a:`.
local function complete_code(line, env)
  local tail = line:match("[%w_%.:]*$")
  while tail:find("..", 1, true) do tail = tail:sub(tail:find("..", 1, true) + 2) end
  local prefix = tail:match("[%w_]*$")
  local start = #line - #prefix + 1
  if prefix:match("^%d") then return {}, start end
  local chain = tail:sub(1, #tail - #prefix)
  if chain == "" then
    local names = fields(env)
    for _, k in ipairs(KEYWORDS) do names[#names + 1] = k end
    return matching(names, prefix), start
  end
  local v, rest = env, chain
  while rest ~= "" do
    local name, sep, more = rest:match("^([%a_][%w_]*)([%.:])(.*)$")
    if not name or (sep == ":" and more ~= "") then return {}, start end
    v = peek(v, name)
    if v == nil then return {}, start end
    rest = more
  end
  return matching(fields(v, chain:sub(-1) == ":"), prefix), start
end

--- What TAB offers at the end of `line` (the line up to the cursor): global
--- names and keywords; after `t.` or `t:` the fields (or methods) of `t`,
--- its metatable's `__index` tables included; inside `pack = "…` and
--- `op = "…` the pack and op names of the runtime being called (or `rt`),
--- a single one with its closing quote.
--- Names starting with `_` only when the typed prefix does. Runs no user
--- code: `__index` functions are not called, only `rt:packs()` of a value
--- whose metatable is named "hcp.Runtime".
---@param line string the text before the cursor
---@param env table the REPL's globals
---@return string[] candidates sorted; each replaces line:sub(start)
---@return integer start where the word being completed begins
function M.complete(line, env)
  local state, start, quote = lex_end(line)
  if state == "comment" then return {}, #line + 1 end
  if state == "string" then
    local cands = complete_string(line, start, env)
    -- a single name is complete: close its string
    if #cands == 1 and quote ~= "[" then cands[1] = cands[1] .. quote end
    return cands, start
  end
  return complete_code(line, env)
end

--- What the REPL says when `rt` has no pack: where it looked, and what
--- chose those places. Pure; `getenv` is os.getenv or a stand-in.
---@param pack_dirs string[]
---@param getenv fun(name: string): string?
---@return string
function M.no_packs_message(pack_dirs, getenv)
  local function env(name)
    local v = getenv(name)
    return name .. (v and v ~= "" and ("=" .. v) or " unset")
  end
  local where = #pack_dirs > 0 and ("looked in " .. table.concat(pack_dirs, ", "))
    or "no pack dir to look in (./packs does not exist)"
  return string.format("hcp-lua: rt has no packs: %s (%s, %s)", where, env("HCP_CONFIG"), env("HCP_PACK_PATH"))
end

--- The REPL's runtime, over the configured packs ($HCP_CONFIG,
--- $HCP_PACK_PATH or ./packs). Raises with the reason when the configuration
--- is bad; hcp-lua turns that into a one-line warning and starts without rt.
--- On a terminal, a runtime without packs is said with where it looked.
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
  if #rt:packs() == 0 and require("hcp.core").isatty(0) then
    io.stderr:write(M.no_packs_message(opts.pack_dirs or {}, os.getenv), "\n")
  end
  -- a printer the user defined (with -e or -l) wins
  if _G.hcp_repl_print == nil then _G.hcp_repl_print = M.print end
  return rt
end

return M
