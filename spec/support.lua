-- Helpers shared by the specs: temporary directories, packs written on the
-- fly, small executables. Everything is created under one temp root per
-- process and removed at exit.
local core = require("hcp.core")
local json = require("hcp.json")

local S = {}

local root
--- A fresh private temporary directory.
function S.tmpdir(prefix)
  if not root then
    root = assert(core.mkdtemp("/tmp", "hcp-spec-"))
    -- removed when the Lua state closes
    S._guard = setmetatable({}, { __gc = function() core.rmtree(root) end })
  end
  return assert(core.mkdtemp(root, prefix or "d-"))
end

--- Quote a string for a POSIX shell command line.
function S.q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

function S.write(path, data, mode)
  local fh = assert(io.open(path, "wb"))
  fh:write(data)
  fh:close()
  if mode then assert(os.execute(string.format("chmod %o %s", mode, S.q(path)))) end
  return path
end

function S.read(path)
  local fh = io.open(path, "rb")
  if not fh then return nil end
  local d = fh:read("a")
  fh:close()
  return d
end

function S.mkdir(path)
  assert(os.execute("mkdir -p '" .. path .. "'"))
  return path
end

--- Write a pack (manifest given as a Lua table, or a raw string) into a new
--- directory under `parent` (default: a new temp dir). Returns the pack root.
function S.pack(manifest, parent, dirname)
  parent = parent or S.tmpdir("packs-")
  local name = dirname or (type(manifest) == "table" and manifest.name) or "pack"
  local dir = S.mkdir(parent .. "/" .. name)
  local text = type(manifest) == "string" and manifest or assert(json.encode(manifest))
  S.write(dir .. "/hcp.json", text)
  return dir, parent
end

--- A minimal valid manifest for `bin`, merged with `extra` (shallow, and
--- `wrap` merged one level down).
function S.manifest(name, bin, extra)
  local m = { hcp = 1, name = name, wrap = { bin = bin } }
  for k, v in pairs(extra or {}) do
    if k == "wrap" then
      for wk, wv in pairs(v) do m.wrap[wk] = wv end
    else
      m[k] = v
    end
  end
  return m
end

local compiled = {}
--- Compile a small C program for a spec (cached per process). Returns its
--- path, or nil and the compiler's message.
function S.cc(name, source)
  if compiled[name] then return compiled[name] end
  local dir = S.tmpdir("cc-")
  local src = S.write(dir .. "/" .. name .. ".c", source)
  local out, code = S.sh(string.format("cc -O1 -o '%s/%s' '%s' 2>&1", dir, name, src))
  if code ~= 0 then return nil, out end
  compiled[name] = dir .. "/" .. name
  return compiled[name]
end

--- Run a shell command, return its stdout and exit status.
function S.sh(cmd)
  local p = io.popen(cmd, "r")
  local out = p:read("a")
  local ok, _, code = p:close()
  return out, ok and 0 or code
end

--- Whether a process with this pid is alive (not a zombie).
function S.alive(pid)
  local st = S.read("/proc/" .. pid .. "/stat")
  if not st then return false end
  local state = st:match("^%d+ %b() (%a)")
  return state ~= nil and state ~= "Z"
end

--- Every pid whose process group is `pgid`.
function S.group_members(pgid)
  local out = {}
  for _, name in ipairs(core.listdir("/proc") or {}) do
    if name:match("^%d+$") then
      local st = S.read("/proc/" .. name .. "/stat")
      if st then
        local fields = st:match("^%d+ %b() (.*)$")
        if fields then
          local f = {}
          for w in fields:gmatch("%S+") do f[#f + 1] = w end
          -- f[1]=state f[2]=ppid f[3]=pgrp
          if tonumber(f[3]) == pgid and f[1] ~= "Z" then out[#out + 1] = tonumber(name) end
        end
      end
    end
  end
  return out
end

S.REPO = (function()
  local p = io.popen("pwd")
  local d = p:read("l")
  p:close()
  return d
end)()

-- The interpreter for specs that start a second Lua process: stock lua5.4
-- with the C module from build/, or (make check) the ASan-built hcp-lua,
-- which has the instrumented core preloaded.
S.LUA = os.getenv("HCP_SPEC_LUA") or "lua5.4"
S.CPATH = "build/lib/lua/5.4/?.so"

return S
