-- Each section of manifest validation on its own (hcp.manifest.*): the
-- normalised value it returns and the problems it reports, field by field.
local report = require("hcp.manifest.report")
-- validate(value, r, extra...) — the section modules take the report second
local function call(section, value, ...)
  local r = report.new("/p/hcp.json")
  local v, extra = require("hcp.manifest." .. section).validate(value, r, ...)
  return v, r:sorted(), extra
end

local function fields(problems)
  local out = {}
  for i, p in ipairs(problems) do out[i] = p.field .. ": " .. p.message end
  return out
end

describe("hcp.manifest sections", function()
  it("report names the file and field of each problem", function()
    local r = report.new("/x/hcp.json")
    r:bad("wrap.bin", "required %s", "string")
    r:fields({ a = 1, b = 2 }, "wrap", { a = true })
    assert.same({ { file = "/x/hcp.json", field = "wrap.b", message = "unknown field" },
      { file = "/x/hcp.json", field = "wrap.bin", message = "required string" } }, r:sorted())
    assert.is_false(r:ok())
  end)

  it("bindings: defaults as = env; env must be a free, valid, unreserved name", function()
    local b, problems, env_of = call("bindings", { gh = { family = "token", env = "GH" } })
    assert.same({ gh = { name = "gh", family = "token", env = "GH", as = "env" } }, b)
    assert.same({ GH = "gh" }, env_of)
    assert.same({}, problems)
    local _
    _, problems = call("bindings", { a = { family = "t", env = "X" }, b = { family = "", env = "LD_PRELOAD", as = "disk" } })
    assert.same({ "bindings.b.as: must be \"env\" or \"file\", got disk",
      "bindings.b.env: LD_PRELOAD is refused: LD_* variables are loader injection",
      "bindings.b.family: required string" }, fields(problems))
  end)

  it("workspace: output_flags apart from file_flags; old manifests keep -o among file_flags (issue 15)", function()
    local ws, problems = call("workspace", nil)
    assert.same({ "--file", "--json-file", "--output", "-o", "--env-file" }, ws.file_flags)
    assert.is_nil(ws.output_flags) -- hcp.workspace.flags reads --output/-o out of file_flags
    assert.same({}, problems)
    ws = call("workspace", { output_flags = { "--log", "-write" } })
    assert.same({ "--file", "--json-file", "--env-file" }, ws.file_flags)
    assert.same({ "--log", "-write" }, ws.output_flags)
    ws = call("workspace", { file_flags = { "-i" }, output_flags = {} })
    assert.same({ "-i" }, ws.file_flags)
    assert.same({}, ws.output_flags)
    local _
    _, problems = call("workspace", { file_flags = { "-o", "--in" }, output_flags = { "--log", "-o", "bad flag" } })
    assert.same({ "wrap.workspace.output_flags[2]: -o is also in file_flags: a flag's value is an input (file_flags) "
      .. "or an output (output_flags), not both", "wrap.workspace.output_flags[3]: must be a flag such as --file or -o" },
      fields(problems))
  end)

  it("limits: positive integers of the known keys", function()
    local l, problems = call("limits", { cpu_s = 5, procs = 2.0 })
    assert.same({ cpu_s = 5, procs = 2 }, l)
    assert.same({}, problems)
    local _
    _, problems = call("limits", { cpu_s = 0, disk = 1 })
    assert.same({ "wrap.limits.cpu_s: must be a positive integer", "wrap.limits.disk: unknown field" }, fields(problems))
  end)

  it("workspace: defaults per mode, flags and home_env checked", function()
    local ws = call("workspace", nil)
    assert.same({ mode = "none", file_flags = { "--file", "--json-file", "--output", "-o", "--env-file" }, home_env = {} }, ws)
    ws = call("workspace", { mode = "workspace" })
    assert.same({ "HOME" }, ws.home_env)
    local _, problems = call("workspace", { mode = "vm", file_flags = { "x" }, home_env = { "PATH" } })
    assert.same({ "wrap.workspace.file_flags[1]: must be a flag such as --file or -o",
      "wrap.workspace.home_env[1]: PATH is fixed by the runtime (search_path)",
      "wrap.workspace.mode: must be none, ephemeral or workspace, got vm" }, fields(problems))
  end)

  it("wrap: the bin's kind, defaults, and agent_env against the bindings' variables", function()
    local w, problems = call("wrap", { bin = "./bin/x", agent_env = { A = "1" } }, {})
    assert.same({}, problems)
    assert.equal("relative", w.bin_kind)
    assert.equal(30000, w.timeout_ms)
    assert.is_false(w.network)
    local _
    _, problems = call("wrap", { bin = "a/b", timeout_ms = 0, agent_env = { GH = "x", ["1X"] = "y" }, extra = 1 }, { GH = "gh" })
    assert.same({ "wrap.agent_env.1X: not a valid environment variable name",
      'wrap.agent_env.GH: GH is the variable of binding "gh"',
      'wrap.bin: "a/b" must be a bare name, an absolute path, or start with ./', "wrap.extra: unknown field",
      "wrap.timeout_ms: must be a positive integer of milliseconds (at most 86400000)" }, fields(problems))
  end)

  it("ops: params typed, placeholders declared, bindings known", function()
    local o, problems = call("ops", { f = { args = { "{x}" }, params = { x = "number" }, bindings = { "gh" } } },
      { gh = { name = "gh" } })
    assert.same({}, problems)
    assert.same({ name = "f", args = { "{x}" }, params = { x = { type = "number", required = true } }, confirm = false,
      bindings = { "gh" }, stdin = false, output = "text", read_only = false, extra_args = false }, o.f)
    local _
    _, problems = call("ops", { ["-bad"] = {}, g = { args = { "{y}" }, params = { z = "date" }, bindings = { "nope" }, confirm = 1 } }, {})
    assert.same({ "ops.-bad: op name must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
      "ops.g.args[1]: placeholder {y} is not a declared parameter",
      "ops.g.bindings[1]: nope is not a binding of this pack", "ops.g.confirm: must be a boolean",
      "ops.g.params.z: type must be string, number, integer, boolean or file, got date" }, fields(problems))
  end)

  it("mocks: keyed by an op, exec or *; exit 0..255", function()
    local m, problems = call("mocks", { ["*"] = { stdout = "x" } }, {})
    assert.same({ ["*"] = { exit = 0, stdout = "x", stderr = "" } }, m)
    assert.same({}, problems)
    local _
    _, problems = call("mocks", { nope = {}, exec = { exit = 256 } }, {})
    assert.same({ "mocks.exec.exit: must be an integer 0..255",
      'mocks.nope: names no op of this pack (use an op name, "exec" or "*")' }, fields(problems))
  end)

  it("are used by manifest.validate, which sorts every problem by field", function()
    local _, problems = require("hcp.manifest").validate({ hcp = 2, name = "X", wrap = { bin = "" } }, "/p/hcp.json", "/p")
    assert.same({ "hcp: must be the integer 1, got 2", 'name: "X" does not match ^[a-z0-9][a-z0-9._-]{0,63}$',
      "wrap.bin: required non-empty string" }, fields(problems))
  end)
end)
