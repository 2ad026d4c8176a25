--- A call's result (contract §2) as an MCP `CallToolResult`: `content` for
--- the model — the output as text, or the runtime's error first when the
--- call failed — and `structuredContent` with the result envelope's fields
--- (exit, stdout/stderr, files, isolation layers). Binary-safe: text that is
--- not valid UTF-8 never goes into a text item (it becomes base64: an
--- `image` for PNG/JPEG, else an embedded `resource`, and `<field>_b64` in
--- `structuredContent`); PNG/JPEG files written back are also returned as
--- `image` items.
---
--- Sizes: clients read one message per line into a bounded buffer (the
--- TypeScript SDK: 10 MiB), so each stream is cut (1 MiB; 1 MiB of binary
--- before base64; images up to 2 MiB in all), and `M.fit` shrinks the
--- limits until the encoded message is under `M.MAX_MESSAGE`. Whatever was
--- cut is said, and `structuredContent.truncated` is true.
---@class hcp.mcp_result
local M = {}

local json = require("hcp.json")
local rpc = require("hcp.mcp_rpc")
local core = require("hcp.core")

M.MAX_MESSAGE = 8 * 1024 * 1024
-- text: per stream, bytes; images: all images of one result, raw bytes
M.LIMITS = {
  { text = 1024 * 1024, images = 2 * 1024 * 1024 },
  { text = 128 * 1024, images = 0 },
  { text = 4 * 1024, images = 0 },
}

--- The image MIME type of `data` by its magic bytes, or nil.
---@param data string
---@return string?
function M.image_type(data)
  if data:sub(1, 8) == "\137PNG\r\n\26\n" then return "image/png" end
  if data:sub(1, 3) == "\255\216\255" then return "image/jpeg" end
  return nil
end

-- `s` cut to at most `max` bytes on a UTF-8 boundary.
local function cut(s, max)
  if #s <= max then return s, false end
  local n = max
  while n > 0 and (s:byte(n + 1) or 0) & 0xC0 == 0x80 do n = n - 1 end
  return s:sub(1, n), true
end

local FIELDS = { "ok", "exit", "error", "signal", "files", "sandbox", "isolation", "timed_out", "truncated", "ms",
  "files_truncated", "left_in_jail", "left_in_jail_truncated", "hint", "egress", "egress_truncated" }

-- issue 14: the hosts the proxy refused, one line each, for the model (the
-- child's own output rarely says why: curl only sees a 403)
local function egress_refusals(res, content)
  local lines = {}
  for _, e in ipairs(type(res.egress) == "table" and res.egress or {}) do
    if e.allowed == false and #lines < 16 then
      lines[#lines + 1] = string.format("egress refused: %s: %s", tostring(e.host), tostring(e.reason))
    end
  end
  if #lines > 0 then content[#content + 1] = { type = "text", text = table.concat(lines, "\n") } end
end

local function binary(name, data, sc, content, lim)
  local mime = M.image_type(data)
  if mime and #data <= lim.budget then
    lim.budget = lim.budget - #data
    sc[name .. "_b64"] = rpc.base64(data)
    content[#content + 1] = { type = "image", data = sc[name .. "_b64"], mimeType = mime }
    return
  end
  local part = data:sub(1, lim.text)
  if #part < #data then sc.truncated = true end
  sc[name .. "_b64"] = rpc.base64(part)
  content[#content + 1] = { type = "text", text = string.format(
    "(%s: %d bytes that are not UTF-8 text%s; base64 in the resource below and in structuredContent.%s_b64)",
    name, #data, #part < #data and string.format(", the first %d of them", #part) or "", name) }
  content[#content + 1] = { type = "resource", resource = { uri = "hcp:///result/" .. name,
    mimeType = "application/octet-stream", blob = sc[name .. "_b64"] } }
end

-- One stream into structuredContent (text, or base64) and content items.
local function stream(name, data, sc, content, label, lim)
  if data == nil or data == "" then return end
  if not rpc.is_utf8(data) then return binary(name, data, sc, content, lim) end
  local text, cutoff = cut(data, lim.text)
  if cutoff then
    sc.truncated = true
    text = text .. string.format("\n…(%d more bytes: hcp mcp sends the first %d)", #data - #text, #text)
  end
  sc[name] = text
  content[#content + 1] = { type = "text", text = label and (label .. text) or text }
end

local function read_image(path, lim)
  if lim.budget <= 0 or core.kind(path) ~= "file" then return nil end
  local fh = io.open(path, "rb")
  if not fh then return nil end
  local data = fh:read(lim.budget + 1)
  fh:close()
  if not data or #data > lim.budget then return nil end
  local mime = M.image_type(data)
  if not mime then return nil end
  lim.budget = lim.budget - #data
  return { type = "image", data = rpc.base64(data), mimeType = mime }
end

local function files(res, content, lim)
  local list = res.files or {}
  if #list == 0 then return end
  content[#content + 1] = { type = "text", text = "files written back:\n" .. table.concat(list, "\n") }
  for _, path in ipairs(list) do
    content[#content + 1] = read_image(path, lim)
  end
end

--- The CallToolResult of `res`, within `limits` (default: the largest of
--- M.LIMITS). `note` (optional) is added after the runtime's error, e.g.
--- why the user could not be asked to confirm.
---@param res hcp.Result
---@param note string?
---@param limits { text: integer, images: integer }?
---@return table
function M.from_result(res, note, limits)
  limits = limits or M.LIMITS[1]
  local lim = { text = limits.text, budget = limits.images }
  local sc, content = {}, json.array()
  for _, k in ipairs(FIELDS) do
    local v = res[k]
    if v ~= nil and v ~= json.null then sc[k] = v end
  end
  for _, k in ipairs({ "files", "isolation", "left_in_jail", "egress" }) do
    if type(sc[k]) == "table" then sc[k] = json.array(table.move(sc[k], 1, #sc[k], 1, {})) end
  end
  if not res.ok then
    content[#content + 1] = { type = "text", text = cut(tostring(res.error or "exit: status " .. tostring(res.exit)),
      lim.text) }
    if type(sc.error) == "string" then sc.error = cut(sc.error, lim.text) end
    if note then content[#content + 1] = { type = "text", text = note } end
  end
  egress_refusals(res, content)
  stream("stdout", res.stdout, sc, content, not res.ok and "stdout:\n" or nil, lim)
  stream("stderr", res.stderr, sc, content, "stderr:\n", lim)
  files(res, content, lim)
  if #content == 0 then content[1] = { type = "text", text = "" } end
  return { content = content, structuredContent = sc, isError = not res.ok }
end

--- The response to request `id` carrying `res`, as a line: the largest
--- limits under which the line is at most M.MAX_MESSAGE bytes (at the
--- smallest, output is cut to a few KiB; what is left always fits).
---@param id any
---@param res hcp.Result
---@param note string?
---@return string line
function M.fit(id, res, note)
  local line
  for _, limits in ipairs(M.LIMITS) do
    line = rpc.encode(rpc.response(id, M.from_result(res, note, limits)))
    if #line <= M.MAX_MESSAGE then return line end
  end
  return line
end

return M
