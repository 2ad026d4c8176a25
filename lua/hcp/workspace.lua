--- File references (§10.6): `workspace:REL` arguments become paths inside
--- the call's jail. A pure function of argv and the jail path; argv stays an
--- array from end to end.
---@class hcp.workspace
local M = {}

local core = require("hcp.core")

M.PREFIX = "workspace:"

--- Rewrite `workspace:REL` elements (and `--flag=workspace:REL` values) into
--- the jail. A reference that would leave the jail is refused.
---@param argv string[] arguments after argv[0]
---@param jail string absolute jail directory
---@return string[]? argv, string? err
function M.rewrite(argv, jail)
  local out = {}
  local prefix_len = #M.PREFIX
  local function into_jail(rel, i)
    if rel:sub(1, 1) == "/" then
      -- an absolute path after workspace: is read as relative to the jail
      rel = rel:sub(2)
    end
    local path = core.normalize(jail .. "/" .. rel)
    if not core.contains(jail, path) then
      return nil, string.format("workspace: path escapes the jail: argument %d", i)
    end
    return path
  end
  for i, a in ipairs(argv) do
    if a:sub(1, prefix_len) == M.PREFIX then
      local p, err = into_jail(a:sub(prefix_len + 1), i)
      if not p then return nil, err end
      out[i] = p
    else
      local eq = a:find("=" .. M.PREFIX, 1, true)
      if eq and a:sub(1, 1) == "-" then
        local p, err = into_jail(a:sub(eq + 1 + prefix_len), i)
        if not p then return nil, err end
        out[i] = a:sub(1, eq) .. p
      else
        out[i] = a
      end
    end
  end
  return out
end

return M
