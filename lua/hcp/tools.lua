--- Tools (contract §8): the ops a policy allows, as an agent's tool list —
--- MCP-shaped, one tool per op, with a JSON Schema of its params. What
--- `rt:tools`, `hcp tools` and `hcp mcp` publish.
---
--- Names: `<pack>__<op>` (for raw args, `<pack>__exec`). MCP allows
--- `[A-Za-z0-9_.-]`; the model APIs most agents forward tools to allow no
--- dot, so the separator is two underscores. Op names have no dot, pack
--- names no `__` in practice; should two tools still meet on one name, the
--- later one (in pack, op order) is named `<pack>.<op>`, which is unique.
---
--- Pure functions over the loaded packs and the policy; the runtime and
--- the MCP server pass both in.
---@class hcp.tools
local M = {}

local json = require("hcp.json")
local ops = require("hcp.ops")
local policy = require("hcp.policy")
local call = require("hcp.call")

M.SEPARATOR = "__"

---@class hcp.Tool
---@field name string           the tool's name, `<pack>__<op>`
---@field title string          `<pack>.<op>`, the name policy knows it by
---@field description string
---@field inputSchema table     JSON Schema (2020-12) of the arguments
---@field outputSchema table    JSON Schema of the structured result
---@field annotations table     MCP hints: readOnlyHint, destructiveHint, openWorldHint, idempotentHint
---@field pack string
---@field op string?            nil for the raw-args tool
---@field call string           `<pack>.<op>` or `<pack>.exec`
---@field confirm boolean       the call needs policy.confirm
---@field stdin boolean         the arguments take a `stdin` string
---@field output string         "text", "json" or "file"
---@field raw boolean           the raw-args (`exec`) tool: arguments are `args` (+ `stdin`)
---@field allowed boolean       the policy allows it (always true unless `all` was asked)

local STRINGS = { type = "array", items = { type = "string" } }

--- The structured result of every tool: the result envelope's fields
--- (contract §2) that `hcp mcp` puts in `structuredContent`.
M.RESULT_SCHEMA = {
  type = "object",
  properties = {
    ok = { type = "boolean" }, exit = { type = "integer" }, error = { type = "string" },
    signal = { type = "string" }, stdout = { type = "string" }, stderr = { type = "string" },
    stdout_b64 = { type = "string", contentEncoding = "base64" },
    stderr_b64 = { type = "string", contentEncoding = "base64" },
    files = STRINGS, isolation = STRINGS, sandbox = { type = "string" },
    files_truncated = { type = "boolean" },
    left_in_jail = { type = "array", items = { type = "string" },
      description = "Files the call left in its sandbox and did not write back: name one with out:PATH to get it" },
    left_in_jail_truncated = { type = "boolean" },
    hint = { type = "string", description = "Why a name the tool was given was not found, and how to pass a file" },
    timed_out = { type = "boolean" }, truncated = { type = "boolean" }, ms = { type = "number" },
  },
  required = json.array({ "exit", "ok" }),
}

local STDIN_DEFAULT = "Text given to the command on its standard input"

--- The tool name of `pack`'s op (nil: the raw-args tool).
---@param pack string
---@param op string?
---@return string
function M.name(pack, op)
  return pack .. M.SEPARATOR .. (op or "exec")
end

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

local function input_schema(op)
  local s = copy(ops.schema(op))
  s.properties = copy(s.properties)
  if op.stdin then
    s.properties.stdin = { type = "string", description = op.stdin.description or STDIN_DEFAULT }
  end
  return s
end

local function op_description(pack, op)
  local d = op.description or (pack.description and string.format("%s (op %s)", pack.description, op.name))
    or string.format("Op %s of pack %s", op.name, pack.name)
  local notes = {}
  if op.stdin then notes[#notes + 1] = "Reads the stdin argument." end
  if op.output == "file" then notes[#notes + 1] = "Its output is the files it writes, listed in the result." end
  for _, p in pairs(op.params) do
    if p.type == "file" then
      notes[#notes + 1] = "File parameters are paths relative to the caller's directory."
      break
    end
  end
  if op.confirm then notes[#notes + 1] = "Runs only after the user confirms it." end
  if #notes > 0 then d = d .. "\n\n" .. table.concat(notes, " ") end
  return d
end

local function op_tool(pack, op)
  local confirm = call.needs_confirm(pack, op)
  local name = pack.name .. "." .. op.name
  return { title = name, call = name, pack = pack.name, op = op.name, description = op_description(pack, op),
    inputSchema = input_schema(op), outputSchema = M.RESULT_SCHEMA, confirm = confirm,
    stdin = op.stdin and true or false, output = op.output or "text", raw = false,
    annotations = { title = name, readOnlyHint = op.read_only == true, destructiveHint = confirm,
      openWorldHint = call.network_allowed(pack) } }
end

local function exec_tool(pack)
  local name = pack.name .. ".exec"
  local argv = table.concat({ pack.wrap.bin, table.unpack(pack.wrap.args) }, " ")
  local d = string.format("Run %s with raw arguments: the whole command line tool, not one op.", argv)
  if pack.description then d = pack.description:gsub("[%s.]+$", "") .. ". " .. d end
  local confirm = call.needs_confirm(pack, nil)
  if confirm then d = d .. " Runs only after the user confirms it." end
  local schema = { type = "object", additionalProperties = false, required = json.array({ "args" }), properties = {
    args = { type = "array", items = { type = "string" },
      description = string.format("Arguments after %s, each one argv element (no shell). The tool runs in a "
        .. "directory of its own: name a file of the caller's directory as in:PATH (copied in) or out:PATH "
        .. "(written back after the call)", argv) },
    stdin = { type = "string", description = STDIN_DEFAULT } } }
  -- raw arguments can do whatever the tool can: never read-only, always destructive
  return { title = name, call = name, pack = pack.name, description = d, inputSchema = schema,
    outputSchema = M.RESULT_SCHEMA, confirm = confirm, stdin = true, output = "text", raw = true,
    annotations = { title = name, readOnlyHint = false, destructiveHint = true,
      openWorldHint = call.network_allowed(pack) } }
end

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

--- Every tool of the loaded packs, named, in pack then op order (the raw
--- tool after its pack's ops), whatever the policy says.
---@param packs hcp.Pack[]
---@return hcp.Tool[]
function M.all(packs)
  local list, seen = {}, {}
  local by_name = {}
  for _, p in ipairs(packs) do by_name[#by_name + 1] = p end
  table.sort(by_name, function(a, b) return a.name < b.name end)
  for _, pack in ipairs(by_name) do
    local pack_tools = {}
    for _, n in ipairs(sorted_keys(pack.ops)) do pack_tools[#pack_tools + 1] = op_tool(pack, pack.ops[n]) end
    pack_tools[#pack_tools + 1] = exec_tool(pack)
    for _, t in ipairs(pack_tools) do
      t.name = M.name(t.pack, t.op)
      if seen[t.name] then t.name = t.call end
      seen[t.name] = true
      list[#list + 1] = t
    end
  end
  return list
end

--- Whether the policy lets `name` (`pack.op`) run at all (allow and deny;
--- a confirmation is asked per call).
---@param p table policy (hcp.policy.new)
---@param name string
---@return boolean
function M.covered(p, name)
  for _, pat in ipairs(p.deny) do
    if policy.matches(pat, name) then return false end
  end
  for _, pat in ipairs(p.allow) do
    if policy.matches(pat, name) then return true end
  end
  return false
end

local OPTIONS = { exec = "boolean", all = "boolean" }

--- The tool list: one entry per op the policy allows (denied ops absent),
--- and a raw-args tool per pack whose `<pack>.exec` it allows.
--- `opts.exec = false` leaves the raw-args tools out; `opts.all = true`
--- lists denied tools too, each with `allowed = false` (for an operator,
--- or a server that must name the runtime's refusal).
---@param packs hcp.Pack[]
---@param p table policy
---@param opts { exec: boolean?, all: boolean? }?
---@return hcp.Tool[]
function M.list(packs, p, opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("tools: options must be a table", 3) end
  for k, v in pairs(opts) do
    if not OPTIONS[k] then error(string.format("tools: unknown option %q", tostring(k)), 3) end
    if type(v) ~= OPTIONS[k] then error(string.format("tools: option %q must be a %s", k, OPTIONS[k]), 3) end
  end
  local out = {}
  for _, t in ipairs(M.all(packs)) do
    t.allowed = M.covered(p, t.call)
    if (t.allowed or opts.all) and not (t.raw and opts.exec == false) then out[#out + 1] = t end
  end
  return out
end

--- The request envelope for a call of tool `t` with `arguments` (a tool
--- call's JSON object), checked against the tool's inputSchema by the
--- validator the runtime's own check uses (hcp.ops.validate). `extra`
--- fields (id, principal, timeout_ms, mode) are copied in.
---@param t hcp.Tool
---@param arguments table?
---@param extra table?
---@return hcp.Request? request, string? err
function M.request(t, arguments, extra)
  arguments = arguments or {}
  if type(arguments) ~= "table" or (next(arguments) ~= nil and #arguments > 0) then
    return nil, string.format("envelope: the arguments of \"%s\" must be an object", t.call)
  end
  local clean = {}
  for k, v in pairs(arguments) do
    if v ~= json.null then clean[k] = v end
  end
  local name, problem = ops.validate(t.inputSchema, clean)
  if name then return nil, ops.message(t.call, name, problem) end
  local req = extra and copy(extra) or {}
  req.pack, req.stdin = t.pack, clean.stdin
  if t.raw then
    req.args = clean.args
  else
    req.op, clean.stdin = t.op, nil
    req.params = clean
  end
  return req
end

--- A tool as MCP lists it (`tools/list`): the Lua-only fields left out, the
--- call name and confirmation in `_meta`.
---@param t hcp.Tool
---@return table
function M.wire(t)
  local meta = { ["hcp/call"] = t.call }
  if t.confirm then meta["hcp/confirm"] = true end
  return { name = t.name, title = t.title, description = t.description, inputSchema = t.inputSchema,
    outputSchema = t.outputSchema, annotations = t.annotations, _meta = meta }
end

return M
