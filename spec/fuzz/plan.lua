-- Fuzz target: argv planning, hcp.workspace.plan. The first input byte
-- picks the pack's file_flags (and whether files_dir is the jail); the
-- rest, split at newlines, is argv. plan never raises; it refuses with
-- "workspace: …", or returns a plan whose rewritten arguments all point
-- inside the jail or files_dir, whose other arguments are unchanged, and
-- whose staged and written-back names stay inside files_dir.
local workspace = require("hcp.workspace")
local core = require("hcp.core")
local F = require("fuzzlib")

local FLAGS = { "--file", "--json-file", "--output", "-o", "--env-file", "-i", "--db" }
local JAIL, FILES = "/fuzz/jail", "/fuzz/files"
local PREFIX = workspace.PREFIX

local function inside(path, files_dir)
  return core.normalize(path) == path and (core.contains(JAIL, path) or core.contains(files_dir, path))
end

-- What plan must do with argv[i] (the same pairing of flag and value).
local function expected_kinds(argv, is_flag)
  local kinds, i = {}, 1
  while i <= #argv do
    local a = argv[i]
    if is_flag[a] and i < #argv then
      kinds[i], kinds[i + 1] = "same", "value"
      i = i + 2
    else
      local eq = a:find("=", 1, true)
      local flag = eq and a:sub(1, eq - 1)
      if a:sub(1, #PREFIX) == PREFIX then
        kinds[i] = "ref"
      elseif flag and is_flag[flag] then
        kinds[i] = "flag=value"
      elseif flag and a:sub(1, 1) == "-" and a:sub(eq + 1, eq + #PREFIX) == PREFIX then
        kinds[i] = "flag=ref"
      else
        kinds[i] = "same"
      end
      i = i + 1
    end
  end
  return kinds
end

local function check_rel(rel, files_dir, what)
  assert(type(rel) == "string" and rel ~= "" and rel ~= "." and rel:sub(1, 1) ~= "/", what .. ": bad name " .. F.show(rel))
  assert(core.normalize(rel) == rel and rel ~= ".." and rel:sub(1, 3) ~= "../", what .. ": not normalised or climbs " .. F.show(rel))
  assert(core.contains(files_dir, files_dir .. "/" .. rel), what .. " outside files_dir: " .. F.show(rel))
end

return function(data)
  local sel = data:byte(1) or 0
  local flags, is_flag = {}, {}
  for i, f in ipairs(FLAGS) do
    if sel & (1 << (i - 1)) ~= 0 then flags[#flags + 1] = f; is_flag[f] = true end
  end
  local files_dir = sel & 0x80 ~= 0 and JAIL or FILES
  local argv = {}
  for a in (data:sub(2) .. "\n"):gmatch("([^\n]*)\n") do argv[#argv + 1] = a end
  local plan, err = F.must_not_raise("workspace.plan", workspace.plan, argv,
    { jail = JAIL, files_dir = files_dir, file_flags = flags })
  if not plan then
    assert(type(err) == "string" and err:match("^workspace: "), "plan: bad error " .. F.show(err))
    return
  end
  assert(#plan.argv == #argv, "plan changed the number of arguments")
  local kinds = expected_kinds(argv, is_flag)
  for i, out in ipairs(plan.argv) do
    local a, kind = argv[i], kinds[i]
    local where = "argument " .. i .. " " .. F.show(a) .. " -> " .. F.show(out)
    if kind == "same" then
      assert(out == a, "changed an argument that is no file reference: " .. where)
    elseif kind == "ref" then
      assert(inside(out, files_dir) and core.contains(JAIL, out), "a workspace: reference left the jail: " .. where)
    else
      local value, path = a, out
      if kind ~= "value" then
        local eq = a:find("=", 1, true)
        assert(out:sub(1, eq) == a:sub(1, eq), "lost the flag: " .. where)
        value, path = a:sub(eq + 1), out:sub(eq + 1)
      end
      if kind == "flag=ref" then
        assert(core.contains(JAIL, path) and core.normalize(path) == path, "a workspace: value left the jail: " .. where)
      elseif path ~= value then
        -- rewritten: into the jail (workspace:) or files_dir, never elsewhere
        assert(inside(path, files_dir), "a file value points outside the jail: " .. where)
      else
        -- kept: only "-", "", absolute paths and URLs that, read as a path,
        -- do not climb out of the cwd
        local norm = value ~= "" and core.normalize(value) or "."
        assert(value == "" or value == "-" or value:sub(1, 1) == "/"
          or (value:find("://", 1, true) and norm ~= ".." and norm:sub(1, 3) ~= "../"),
          "a relative file value was not rewritten, or climbs out: " .. where)
      end
    end
  end
  for _, s in ipairs(plan.stage) do check_rel(s.rel, files_dir, "staged") end
  local parents = {}
  for _, o in ipairs(plan.outputs) do
    check_rel(o.rel, files_dir, "output")
    parents[o.rel:match("^(.*)/[^/]+$") or ""] = true
  end
  for _, d in ipairs(plan.dirs) do
    assert(parents[d], "a directory to create that is no output's parent: " .. F.show(d))
    check_rel(d, files_dir, "dir")
  end
end
