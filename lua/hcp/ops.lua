--- Ops (contract §1, §8): argv templates with `{param}` placeholders, the
--- JSON Schema of an op's parameters, and the one check every call's
--- params go through.
---
--- A placeholder is replaced inside exactly one argv element and never
--- splits it: `{"--name={who}"}` with `who = "a b; rm -rf /"` stays a single
--- argument. Nothing here goes near a shell.
---
--- Optional parameters: an absent one with a `default` is rendered from the
--- default; an absent one without drops every argv element that holds its
--- placeholder (`"--limit={n}"` disappears whole), so no `{x}` is ever left
--- behind. The manifest refuses a template where that would strand a flag.
---
--- The schema (`M.schema`) is what `rt:tools` publishes as a tool's
--- `inputSchema`; `M.check_params` validates against that same schema
--- object (`M.validate`), so what an agent is told and what the runtime
--- enforces cannot drift apart.
---@class hcp.ops
local M = {}

local json = require("hcp.json")
local mops = require("hcp.manifest.ops")

local function render(value, ty)
  if ty == "string" or ty == "file" then return value end
  if ty == "boolean" then return value and "true" or "false" end
  -- numbers: integers without a fraction, others with enough digits to round-trip
  if math.type(value) == "integer" or (value == math.floor(value) and math.abs(value) < 2^53) then
    return string.format("%d", math.tointeger(value) or value)
  end
  return string.format("%.17g", value)
end

local function sorted(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

-- What an agent is told about a file parameter: its value is a path in the
-- caller's directory (out_dir), read from there or written back there.
M.FILE_NOTES = {
  ["in"] = "A file the tool reads: a path relative to the caller's directory (out_dir); "
    .. "the runtime copies it into the sandbox.",
  out = "A file the tool writes: a path relative to the caller's directory (out_dir); "
    .. "the runtime writes it back there after the call (its directory must exist, and an existing "
    .. "file is replaced only when the operator allows it).",
}

local function property(p)
  if p.type == "file" then
    local note = M.FILE_NOTES[p.mode]
    local d = p.description and (p.description:gsub("[%s.]+$", "") .. ". " .. note) or note
    return { type = "string", description = d, default = p.default }
  end
  return { type = p.type, description = p.description, default = p.default,
    enum = p.enum and json.array(table.move(p.enum, 1, #p.enum, 1, {})) or nil }
end

-- Schemas are made once per (validated, never mutated) op table.
local cache = setmetatable({}, { __mode = "k" })

--- The JSON Schema (draft 2020-12, as MCP uses it) of an op's params: an
--- object of the declared parameters, nothing else.
---@param op table a validated op (hcp.manifest.ops)
---@return table schema
function M.schema(op)
  if cache[op] then return cache[op] end
  local props, required = {}, json.array()
  for _, name in ipairs(sorted(op.params)) do
    local p = op.params[name]
    props[name] = property(p)
    if p.required then required[#required + 1] = name end
  end
  local s = { type = "object", properties = props, additionalProperties = false }
  if #required > 0 then s.required = required end
  cache[op] = s
  return s
end

local function one_of(enum)
  local parts = {}
  for i, e in ipairs(enum) do parts[i] = json.encode(e) end
  return table.concat(parts, ", ")
end

-- One value against one property schema: nil, or what is wrong.
local function check_value(s, v)
  local ty = s.type
  if ty == "array" then
    local bad = s.items and ("must be an array of " .. s.items.type .. "s") or "must be an array"
    if type(v) ~= "table" then return bad end
    for k in pairs(v) do
      if math.type(k) ~= "integer" or k < 1 or k > #v then return bad end
    end
    for i = 1, #v do
      if s.items and check_value(s.items, v[i]) then return bad end
    end
  elseif ty and not mops.is_type(v, ty) then
    return "must be " .. mops.a(ty)
  end
  if s.enum then
    for _, e in ipairs(s.enum) do
      if e == v then return nil end
    end
    return "must be one of " .. one_of(s.enum)
  end
  return nil
end

--- Validate an object against a schema of the shape `M.schema` (and
--- `hcp.tools`) make: `properties` with `type` (string, number, integer,
--- boolean, array with `items`), `enum`, `required`, `additionalProperties =
--- false`. Returns nil when it fits, else the property at fault and what
--- is wrong: "unknown", "missing", or a phrase ("must be a string").
--- Properties are checked in sorted order, so the first fault is stable.
---@param schema table
---@param value table
---@return string? name, string? problem
function M.validate(schema, value)
  local props = schema.properties or {}
  for k in pairs(value) do
    if type(k) ~= "string" then return tostring(k), "unknown" end
  end
  for _, k in ipairs(sorted(value)) do
    if not props[k] and schema.additionalProperties == false then return k, "unknown" end
    local bad = props[k] and check_value(props[k], value[k])
    if bad then return k, bad end
  end
  for _, k in ipairs(schema.required or {}) do
    if value[k] == nil then return k, "missing" end
  end
  return nil
end

--- The refusal for what `M.validate` found, naming the call and the
--- parameter: `envelope: parameter "n" of "pack.op" must be an integer`.
---@param call string `pack.op`
---@param name string
---@param problem string
---@return string
function M.message(call, name, problem)
  if problem == "unknown" then
    return string.format("envelope: op \"%s\" has no parameter %q", call, name)
  elseif problem == "missing" then
    return string.format("envelope: op \"%s\" is missing parameter %q", call, name)
  end
  return string.format("envelope: parameter %q of \"%s\" %s", name, call, problem)
end

--- Check `params` against the op's schema and render them for the
--- template: every given parameter as its argv text, every absent optional
--- one with a default as the default's text.
---@param pack_name string
---@param op table validated op from the manifest
---@param params table<string, any>?
---@return table<string, string>? rendered, string? err
function M.check_params(pack_name, op, params)
  params = params or {}
  local name, problem = M.validate(M.schema(op), params)
  if name then return nil, M.message(pack_name .. "." .. op.name, name, problem) end
  local rendered = {}
  for k, p in pairs(op.params) do
    local v = params[k]
    if v == nil then v = p.default end
    if v ~= nil then rendered[k] = render(v, p.type) end
  end
  return rendered
end

--- Expand an op's argv template. An element holding the placeholder of a
--- parameter `rendered` lacks (an absent optional one) is dropped whole.
--- With the op's `params`, an element that holds a file parameter is also
--- described in `file_args` (by its index in the result): the parameter,
--- its mode as a plan kind, its value and the template text around it —
--- for hcp.workspace.plan, which makes it a file reference. `from_params`
--- marks the elements that hold any parameter (what the agent sent).
---@param template string[]
---@param rendered table<string, string> from check_params
---@param params table<string, hcp.ParamSpec>? the op's params
---@return string[] argv, table<integer, hcp.FileArg> file_args, table<integer, string> from_params
function M.expand(template, rendered, params)
  local out, file_args, from_params = {}, {}, {}
  -- gsub with a function: the replacement is never re-scanned and "%" in a
  -- value is taken literally
  local function fill(text)
    local absent, first = false, nil
    local filled = text:gsub("{([%a_][%w_]*)}", function(name)
      local v = rendered[name]
      if v == nil then absent = true end
      first = first or name
      return v
    end)
    return filled, absent, first
  end
  for _, a in ipairs(template) do
    -- the manifest allows at most one file parameter per element
    local fs, fe, fname
    for s0, name, e0 in a:gmatch("(){([%a_][%w_]*)}()") do
      if params and params[name] and params[name].type == "file" then fs, fname, fe = s0, name, e0 - 1 end
    end
    local s, absent, first = fill(a)
    if not absent then
      local n = #out + 1
      out[n], from_params[n] = s, first
      if fname then
        local before = fill(a:sub(1, fs - 1))
        local after = fill(a:sub(fe + 1))
        file_args[n] = { kind = mops.FILE_MODES[params[fname].mode], param = fname, value = rendered[fname],
          before = before, after = after }
      end
    end
  end
  return out, file_args, from_params
end

return M
