--- `hcp mcp`: an MCP server on stdio (JSON-RPC 2.0, one message per line)
--- over a runtime built from the usual options (--pack-dir, --config,
--- --allow-bin; the policy from the config file). One event loop: stdin is
--- read without blocking (hcp.core.poll_in/read_fd) next to the runtime's
--- pollfd, and calls are driven with rt:step, so concurrent tools/call
--- requests run concurrently. stdout carries protocol messages only; logs go
--- to stderr or, once the client initialized, notifications/message.
---
--- The pieces: hcp.mcp_rpc (framing, JSON-RPC), hcp.mcp_session (lifecycle
--- and methods), hcp.mcp_result (results as CallToolResult), this loop.
---@class hcp.mcp
local M = {}

local core = require("hcp.core")
local rpc = require("hcp.mcp_rpc")
local session = require("hcp.mcp_session")

--- The options with the server's policy.confirm in place: a confirm op runs
--- only with the one-shot approval the user gave through elicitation for
--- that call's envelope id — and, if the config has its own confirm, with
--- its yes too (it is asked after the user; it must not read stdin).
---@param opts table hcp.create options
---@param approvals table envelope id → true
---@return table opts
function M.with_confirm(opts, approvals)
  local out = {}
  for k, v in pairs(opts) do out[k] = v end
  local p = {}
  if type(opts.policy) == "table" then
    for k, v in pairs(opts.policy) do p[k] = v end
  elseif opts.policy ~= nil then
    return out -- not a table: hcp.create says what is wrong with it
  end
  local theirs = p.confirm
  if theirs ~= nil and type(theirs) ~= "function" then return out end
  p.confirm = function(call)
    local approved = approvals[call.id]
    approvals[call.id] = nil
    if not approved then return false end
    if theirs then return theirs(call) == true end
    return true
  end
  out.policy = p
  return out
end

local function writer(fd)
  local broken = false
  return function(msg)
    if broken then return false end
    local ok = core.write_fd(fd, (type(msg) == "string" and msg or rpc.encode(msg)) .. "\n")
    if not ok then broken = true end
    return ok and true or false
  end, function() return broken end
end

-- Read what stdin has: true at end of input.
local function read_input(sess, lines)
  local chunk, err, errno = core.read_fd(0)
  if chunk == nil and errno == 11 then return false end -- EAGAIN: a spurious wakeup
  if chunk == nil or chunk == "" then
    if chunk == nil then io.stderr:write("hcp mcp: stdin: ", tostring(err), "\n") end
    local rest = lines:rest()
    if rest then sess:receive(rest) end
    sess:eof()
    return true
  end
  for _, line in ipairs(lines:feed(chunk)) do sess:receive(line) end
  return false
end

local function step(rt)
  local ok, err = pcall(rt.step, rt, 0)
  if not ok then io.stderr:write("hcp mcp: ", tostring(err), "\n") end
end

--- Serve one session on stdin/stdout until the client closes stdin (the
--- calls still running finish and are answered first) or stdout breaks
--- (the calls are killed). Returns the exit status.
---@param rt hcp.Runtime built with M.with_confirm's options
---@param approvals table the same table
---@param opts { version: string?, page_size: integer? }?
---@return integer
function M.serve(rt, approvals, opts)
  opts = opts or {}
  local send, broken = writer(1)
  local sess = session.new(rt, send, { approvals = approvals, version = opts.version, page_size = opts.page_size })
  local lines, eof = rpc.lines(), false
  while not broken() and not (eof and not sess:busy()) do
    local wait = sess:tick()
    local pfd = rt:pollfd()
    local fds = {}
    if not eof then fds[#fds + 1] = 0 end
    if pfd then fds[#fds + 1] = pfd elseif sess:busy() then wait = math.min(wait or 10, 10) end
    if #fds == 0 then
      rt:step((wait or 10) / 1000)
    else
      local ready = core.poll_in(fds, wait) or {}
      for _, fd in ipairs(ready) do
        if fd == 0 then eof = read_input(sess, lines) end
      end
    end
    step(rt)
  end
  rt:close()
  return broken() and 1 or 0
end

return M
