--- The `ops` section (contract §1, §8): named operations, each an argv
--- template with typed `{param}` placeholders, and what an agent needs to
--- call it without reading the manifest: a description per op and per
--- parameter, which parameters are optional (with their default) and which
--- values are allowed, whether the op reads stdin, what it outputs, and
--- whether it only reads.
---
--- A parameter is a type string (`"string"`, as before) or an object
--- `{ type, description, required (default true), default, enum }`; both
--- normalise to the object form: `o.params[name].type` and so on. A
--- parameter of type `file` has a `mode`: `"in"` (a file of out_dir the
--- runtime stages into the jail) or `"out"` (a jail path it writes back to
--- out_dir after the call); its value is a path relative to out_dir, and
--- its placeholder becomes a file reference of the plan (hcp.workspace).
---@class hcp.manifest.ops
local M = {}

local check = require("hcp.check")
local egress = require("hcp.egress")
local json = require("hcp.json")

---@class hcp.ParamSpec
---@field type "string"|"number"|"integer"|"boolean"|"file"
---@field mode "in"|"out"|nil  for type file
---@field description string?
---@field required boolean
---@field default any           only when required is false
---@field enum any[]?           the allowed values, each of the type

M.PARAM_TYPES = { string = true, number = true, integer = true, boolean = true, file = true }
M.FILE_MODES = { ["in"] = "input", out = "output" }
M.OUTPUTS = { text = true, json = true, file = true }
M.RESERVED_OPS = { exec = true } -- `<pack>.exec` is the raw-args call (§4)
local FIELDS = { args = true, params = true, confirm = true, bindings = true, description = true,
  stdin = true, output = true, read_only = true, extra_args = true, egress = true }
-- `mode` belongs to the `file` type (§8: "in" or "out")
local PARAM_FIELDS = { type = true, description = true, required = true, default = true, enum = true, mode = true }

--- Whether `v` is a value of parameter type `ty` (numbers finite; an
--- integer within ±2^53, where JSON numbers are exact).
---@param v any
---@param ty string
---@return boolean
function M.is_type(v, ty)
  if ty == "file" then return type(v) == "string" end
  if ty == "string" or ty == "boolean" then return type(v) == ty end
  if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return false end
  if ty == "integer" then return v == math.floor(v) and math.abs(v) <= 2 ^ 53 end
  return ty == "number"
end

--- Whether `v` is a path relative to out_dir that stays inside it, as a
--- file parameter's value must be (the planner checks each call's again).
---@param v string
---@return boolean
function M.relative_path(v)
  if v == "" or v:sub(1, 1) == "/" then return false end
  local depth = 0
  for part in v:gmatch("[^/]+") do
    if part == ".." then depth = depth - 1 elseif part ~= "." then depth = depth + 1 end
    if depth < 0 then return false end
  end
  return depth > 0
end

--- "a string", "an integer": the type with its article, for messages.
---@param ty string
---@return string
function M.a(ty)
  return (ty:match("^[aeiou]") and "an " or "a ") .. ty
end

local function enum_of(v, ty, r, f)
  if not check.is_array(v) or #v == 0 then return r:bad(f, "must be a non-empty array of %s values", ty) end
  local seen, out = {}, {}
  for i, e in ipairs(v) do
    if not M.is_type(e, ty) then return r:bad(f .. "[" .. i .. "]", "must be %s", M.a(ty)) end
    if seen[e] then return r:bad(f .. "[" .. i .. "]", "repeats %s", json.encode(e)) end
    seen[e], out[i] = true, e
  end
  return out
end

local function in_enum(v, enum)
  for _, e in ipairs(enum) do
    if e == v then return true end
  end
  return false
end

local function type_of(ty, r, f)
  if not M.PARAM_TYPES[ty] then
    return r:bad(f, "type must be string, number, integer, boolean or file, got %s", tostring(ty))
  end
  return ty
end

-- The mode of a file parameter: "in" or "out", required.
local function file_mode(spec, r, f)
  if spec.mode == nil then
    return r:bad(f .. ".mode", "a parameter of type file needs a mode: \"in\" (a file it reads) or \"out\" (a file it writes)")
  end
  if not M.FILE_MODES[spec.mode] then return r:bad(f .. ".mode", "must be \"in\" or \"out\", got %s", tostring(spec.mode)) end
  if spec.enum ~= nil then return r:bad(f .. ".enum", "a parameter of type file has no enum") end
  return spec.mode
end

-- One parameter, in either form; nil (and a problem) when it is wrong.
local function param(spec, r, f)
  if type(spec) == "string" then
    if spec == "file" then
      return r:bad(f, "type file needs a mode: write { \"type\": \"file\", \"mode\": \"in\" } (or \"out\")")
    end
    local ty = type_of(spec, r, f)
    return ty and { type = ty, required = true }
  end
  if not check.is_object(spec) or next(spec) == nil then
    return r:bad(f, "must be a type name or an object with a \"type\"")
  end
  r:fields(spec, f, PARAM_FIELDS)
  local ty = type_of(spec.type, r, f .. ".type")
  if not ty then return nil end
  local p = { type = ty, required = true }
  if ty == "file" then
    p.mode = file_mode(spec, r, f)
    if not p.mode then return nil end
  elseif spec.mode ~= nil then
    return r:bad(f .. ".mode", "only a parameter of type file has a mode")
  end
  if spec.description ~= nil and type(spec.description) ~= "string" then
    return r:bad(f .. ".description", "must be a string")
  end
  p.description = spec.description
  if spec.required ~= nil and type(spec.required) ~= "boolean" then return r:bad(f .. ".required", "must be a boolean") end
  if spec.enum ~= nil then
    p.enum = enum_of(spec.enum, ty, r, f .. ".enum")
    if not p.enum then return nil end
  end
  if spec.default ~= nil then
    if spec.required == true then return r:bad(f .. ".default", "a required parameter has no default") end
    if not M.is_type(spec.default, ty) then return r:bad(f .. ".default", "must be %s", M.a(ty == "file" and "string" or ty)) end
    if ty == "file" and not M.relative_path(spec.default) then
      return r:bad(f .. ".default", "must be a path relative to out_dir that stays inside it")
    end
    if p.enum and not in_enum(spec.default, p.enum) then return r:bad(f .. ".default", "is not one of the enum values") end
    p.default = spec.default
  end
  -- a default makes a parameter optional
  p.required = spec.required == nil and spec.default == nil or spec.required == true
  return p
end

local function params(v, r, f)
  local out = {}
  if v == nil then return out end
  if not check.is_object(v) then
    r:bad(f, "must be an object of parameter types")
    return out
  end
  for p, spec in pairs(v) do
    if type(p) ~= "string" or not p:match(check.PARAM_NAME_PAT) then
      r:bad(f .. "." .. tostring(p), "parameter name must match ^[A-Za-z_][A-Za-z0-9_]*$")
    else
      out[p] = param(spec, r, f .. "." .. p)
    end
  end
  return out
end

-- An optional parameter without a default drops, when absent, every argv
-- element that holds its placeholder (hcp.ops.expand). An element that is
-- only such placeholders, right after a flag, would leave the flag behind
-- to take the next argument as its value: refused, with the fix.
local function dangling_flag(args, i, spec_of)
  local a, prev = args[i], args[i - 1]
  if not prev or not prev:match("^%-") or prev == "--" or prev == "-" or prev:find("{", 1, true) then return nil end
  if a:gsub("{([%a_][%w_]*)}", ""):match("%S") then return nil end
  for p in a:gmatch("{([%a_][%w_]*)}") do
    local s = spec_of[p]
    if s and not s.required and s.default == nil then return p, prev end
  end
  return nil
end

-- Where a file parameter may stand in an argument: alone, after a flag's
-- "=" or a key's ("--out={f}", "if={f}"), or glued to a short flag
-- ("-o{f}") — where a path begins, as the planner reads arguments — and
-- with nothing after it (the file is the parameter's value, whole).
local function file_place(a, fp, r, f)
  local before, after = a:sub(1, fp[2] - 1), a:sub(fp[3])
  if after ~= "" then
    return r:bad(f, "text after the file parameter %s (%q): the file is the parameter's value, whole", fp[1], after)
  end
  if before == "" or before:match("^%-?%-?[%w_.][%w_.%-]*=$") or before:match("^%-%w$") then return end
  r:bad(f, "the file parameter %s must stand alone, after \"--flag=\" or \"key=\", or glued to a short flag "
    .. "(\"-o%s\"), not after %q", fp[1], fp[1], before)
end

-- The template: strings without NUL whose placeholders are declared.
local function template(v, r, f, declared, spec_of)
  local out = {}
  if v == nil then return out end
  if not check.is_array(v) then
    r:bad(f, "must be an array of strings")
    return out
  end
  for i, a in ipairs(v) do
    if type(a) ~= "string" or check.has_nul(a) then
      r:bad(f .. "[" .. i .. "]", "must be a string without NUL")
    else
      local files = {}
      for s0, p, e0 in a:gmatch("(){([%a_][%w_]*)}()") do
        if declared[p] == nil then r:bad(f .. "[" .. i .. "]", "placeholder {%s} is not a declared parameter", p) end
        if spec_of[p] and spec_of[p].type == "file" then files[#files + 1] = { "{" .. p .. "}", s0, e0 } end
      end
      if #files > 1 then
        local names = {}
        for k, fp in ipairs(files) do names[k] = fp[1] end
        r:bad(f .. "[" .. i .. "]", "holds two file parameters (%s): give each file its own argument",
          table.concat(names, ", "))
      elseif #files == 1 then
        file_place(a, files[1], r, f .. "[" .. i .. "]")
      end
      out[i] = a
    end
  end
  for i = 2, #out do
    local p, flag = dangling_flag(out, i, spec_of)
    if p then
      r:bad(f .. "[" .. i .. "]", "{%s} is optional: when absent this element is dropped and %q is left without its "
        .. "value; write them as one element (\"%s={%s}\"), or give %s a default", p, flag, flag, p, p)
    end
  end
  return out
end

local function binding_names(v, r, f, bindings)
  local out = {}
  if v == nil then return out end
  if not check.is_array(v) then
    r:bad(f, "must be an array of binding names")
    return out
  end
  for i, name in ipairs(v) do
    if type(name) ~= "string" or not bindings[name] then
      r:bad(f .. "[" .. i .. "]", "%s is not a binding of this pack", tostring(name))
    else
      out[#out + 1] = name
    end
  end
  return out
end

-- `stdin`: true/false, or { description } (which means true).
local function stdin_of(v, r, f)
  if v == nil or v == false then return false end
  if v == true then return {} end
  if check.is_object(v) then
    r:fields(v, f, { description = true })
    if v.description ~= nil and type(v.description) ~= "string" then
      r:bad(f .. ".description", "must be a string")
      return false
    end
    return { description = v.description }
  end
  r:bad(f, "must be true, false or { \"description\": … }")
  return false
end

-- The agent-facing fields: description, stdin, output, read_only.
local function agent_fields(o, op, r, f)
  if op.description ~= nil and type(op.description) ~= "string" then r:bad(f .. ".description", "must be a string") end
  o.description = type(op.description) == "string" and op.description or nil
  o.stdin = stdin_of(op.stdin, r, f .. ".stdin")
  if o.stdin and o.params.stdin then
    r:bad(f .. ".params.stdin", "\"stdin\" names the op's stdin (%s.stdin); give the parameter another name", f)
  end
  if op.output ~= nil and not M.OUTPUTS[op.output] then
    r:bad(f .. ".output", "must be \"text\", \"json\" or \"file\", got %s", tostring(op.output))
  end
  o.output = M.OUTPUTS[op.output] and op.output or "text"
  if op.read_only ~= nil and type(op.read_only) ~= "boolean" then r:bad(f .. ".read_only", "must be a boolean") end
  o.read_only = op.read_only == true
end

-- An op's `egress`: a narrowing of its pack's wrap.egress, each entry
-- within the pack's list (an op can never reach more than its pack).
local function egress_of(op, r, f, pack_egress)
  local list = egress.validate_list(op.egress, r, f .. ".egress", string.format("op %q", f:sub(5)))
  if not list then return nil end
  for i, rule in ipairs(list) do
    if not egress.within(rule, pack_egress or {}) then
      r:bad(f .. ".egress[" .. i .. "]", "%q is not within the pack's wrap.egress (an op may only narrow it)", rule.text)
    end
  end
  return list
end

local function one(name, op, r, bindings, pack_egress)
  local f = "ops." .. tostring(name)
  if type(name) ~= "string" or #name > 64 or not name:match(check.OP_NAME_PAT) then
    return r:bad(f, "op name must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
  end
  if M.RESERVED_OPS[name] then
    return r:bad(f, "%q is reserved: \"<pack>.%s\" names the raw-args call for policy and mocks", name, name)
  end
  if not check.is_object(op) then return r:bad(f, "must be an object") end
  r:fields(op, f, FIELDS)
  local o = { name = name, params = params(op.params, r, f .. ".params"), confirm = false }
  -- a placeholder counts as declared even when its type was wrong: one
  -- problem is reported, at the parameter
  o.args = template(op.args, r, f .. ".args", check.is_object(op.params) and op.params or {}, o.params)
  if op.confirm ~= nil then
    if type(op.confirm) ~= "boolean" then r:bad(f .. ".confirm", "must be a boolean") else o.confirm = op.confirm end
  end
  o.bindings = binding_names(op.bindings, r, f .. ".bindings", bindings)
  -- trailing raw args of an op call are the op's own only when it says so
  -- (contract §4); otherwise such a call is also <pack>.exec for policy
  if op.extra_args ~= nil and type(op.extra_args) ~= "boolean" then r:bad(f .. ".extra_args", "must be a boolean") end
  o.extra_args = op.extra_args == true
  agent_fields(o, op, r, f)
  o.egress = egress_of(op, r, f, pack_egress)
  return o
end

--- Validate `doc.ops`.
---@param v any
---@param r hcp.Report
---@param bindings table<string, table> the pack's validated bindings
---@param pack_egress hcp.EgressRule[]? the pack's wrap.egress, which an op's egress narrows
---@return table<string, table> ops
function M.validate(v, r, bindings, pack_egress)
  local out = {}
  if v == nil then return out end
  if not check.is_object(v) then
    r:bad("ops", "must be an object")
    return out
  end
  for name, op in pairs(v) do out[name] = one(name, op, r, bindings, pack_egress) end
  return out
end

return M
