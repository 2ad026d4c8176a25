-- bench/capture_worker.lua — one capture of make bench's capture figure, in
-- a process of its own (so its peak RSS is the call's): a call of the pack
-- `head` writing BYTES zeros, captured (`capture`), or streamed to a
-- callback that only counts them (`stream`: capture = false, on_stdout).
-- Prints "<seconds> <bytes received> <peak RSS bytes (VmHWM)>".
--
--   hcp-lua bench/capture_worker.lua PACK_DIR BYTES capture|stream
local hcp = require("hcp")
local core = require("hcp.core")
local lib = require("bench.lib")

local pack_dir, bytes, mode = arg[1], tonumber(arg[2]), arg[3]
local rt = assert(hcp.create({ pack_dirs = { pack_dir }, max_output = bytes + 1 }))
local req = { pack = "head", args = { "-c", tostring(bytes), "/dev/zero" } }
local t0, got = core.monotonic_us(), 0
if mode == "capture" then
  local res = rt:call(req)
  assert(res.ok, res.error)
  got = #res.stdout
  -- the bytes are what head wrote: zeros, in the string the result holds
  assert(res.stdout:sub(1, 4096) == string.rep("\0", 4096) and res.stdout:sub(-4096) == string.rep("\0", 4096))
else
  local h = rt:start(req, { capture = false, on_stdout = function(c) got = got + #c end })
  local res = h:wait()
  assert(res.ok, res.error)
end
local secs = (core.monotonic_us() - t0) / 1e6
io.write(string.format("%.6f %d %d\n", secs, got, lib.peak_rss()))
rt:close()
