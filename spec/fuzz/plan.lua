-- Fuzz target: argv planning, hcp.workspace.plan (root-free) and bind. The
-- first input byte picks the pack's input and output flags; the rest, split
-- at newlines, is argv. plan never raises; it refuses with "workspace: …",
-- or returns a plan in which every argument is either the argument as given
-- or a reference whose path stays inside its root, and whose staged and
-- written-back names stay inside the files directory; bind puts every
-- reference under its root.
local workspace = require("hcp.workspace")
local core = require("hcp.core")
local F = require("fuzzlib")

local INPUTS = { "--file", "--json-file", "--env-file", "-i", "--db" }
local OUTPUTS = { "--output", "-o", "--log" }
local JAIL, FILES = "/fuzz/jail", "/fuzz/files"

local function check_rel(rel, what)
  assert(type(rel) == "string" and rel ~= "" and rel:sub(1, 1) ~= "/", what .. ": bad name " .. F.show(rel))
  assert(core.normalize(rel) == rel and rel ~= ".." and rel:sub(1, 3) ~= "../", what .. ": not normalised or climbs " .. F.show(rel))
end

local function flags_of(sel)
  local inputs, outputs = {}, {}
  for i, f in ipairs(INPUTS) do
    if sel & (1 << (i - 1)) ~= 0 then inputs[#inputs + 1] = f end
  end
  for i, f in ipairs(OUTPUTS) do
    if sel & (1 << (i + 4)) ~= 0 then outputs[#outputs + 1] = f end
  end
  return { file_flags = inputs, output_flags = outputs }
end

local function check_ref(ref, a, where)
  assert(ref.root == "jail" or ref.root == "files", "a reference to no root: " .. where)
  assert(type(ref.before) == "string", "a reference without its text before: " .. where)
  if ref.rel ~= "." then check_rel(ref.rel, where) end
  -- the text kept before the path is the argument's own start (file: URIs
  -- and glued flags keep theirs; nothing is invented)
  assert(ref.encode == "uri" or ref.before == "" or a:sub(1, #ref.before):lower() == ref.before:lower(),
    "kept text that was not there: " .. where)
end

return function(data)
  local sel = data:byte(1) or 0
  local argv = {}
  for a in (data:sub(2) .. "\n"):gmatch("([^\n]*)\n") do argv[#argv + 1] = a end
  local plan, err = F.must_not_raise("workspace.plan", workspace.plan, argv, flags_of(sel))
  if not plan then
    assert(type(err) == "string" and err:match("^workspace: "), "plan: bad error " .. F.show(err))
    return
  end
  assert(#plan.argv == #argv, "plan changed the number of arguments")
  for i, e in ipairs(plan.argv) do
    local where = "argument " .. i .. " " .. F.show(argv[i])
    if type(e) == "string" then
      assert(e == argv[i], "changed an argument that is no file reference: " .. where .. " -> " .. F.show(e))
    else
      check_ref(e, argv[i], where)
    end
  end
  for _, s in ipairs(plan.stage) do check_rel(s.rel, "staged") end
  for _, o in ipairs(plan.outputs) do check_rel(o.rel, "output") end
  for _, d in ipairs(plan.dirs) do check_rel(d, "dir") end
  local bound = F.must_not_raise("workspace.bind", workspace.bind, plan, { jail = JAIL, files_dir = FILES })
  for i, e in ipairs(plan.argv) do
    if type(e) == "table" and e.encode ~= "uri" then
      local root = e.root == "jail" and JAIL or FILES
      local path = bound[i]:sub(#e.before + 1, #bound[i] - #(e.after or ""))
      assert(core.contains(root, core.normalize(path)), "bound outside its root: " .. F.show(bound[i]))
    end
  end
end
