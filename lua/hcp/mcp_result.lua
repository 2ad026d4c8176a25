--- A call's result (contract §2) as an MCP `CallToolResult`: `content` for
--- the model — the output as text, or the runtime's error first when the
--- call failed — and `structuredContent` with the result envelope's fields
--- (exit, stdout/stderr, files, isolation layers). Binary-safe: text that is
--- not valid UTF-8 never goes into a text item (it becomes base64: an
--- `image` for PNG/JPEG, else an embedded `resource`, and `<field>_b64` in
--- `structuredContent`); PNG/JPEG files written back are also returned as
--- `image` items.
---@class hcp.mcp_result
local M = {}

local json = require("hcp.json")
local rpc = require("hcp.mcp_rpc")
local core = require("hcp.core")

M.MAX_TEXT = 1024 * 1024       -- per stream, in content and structuredContent
M.MAX_IMAGE = 4 * 1024 * 1024  -- a written-back image past this is listed, not sent

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
  "files_truncated", "left_in_jail", "hint" }

-- One stream into structuredContent (text, or base64) and content items.
local function stream(name, data, sc, content, label)
  if data == nil or data == "" then return end
  if not rpc.is_utf8(data) then
    sc[name .. "_b64"] = rpc.base64(data)
    local mime = M.image_type(data)
    if mime then
      content[#content + 1] = { type = "image", data = sc[name .. "_b64"], mimeType = mime }
    else
      content[#content + 1] = { type = "text", text = string.format(
        "(%s: %d bytes that are not UTF-8 text; base64 in the resource below and in structuredContent.%s_b64)",
        name, #data, name) }
      content[#content + 1] = { type = "resource", resource = { uri = "hcp:///result/" .. name,
        mimeType = "application/octet-stream", blob = sc[name .. "_b64"] } }
    end
    return
  end
  local text, cutoff = cut(data, M.MAX_TEXT)
  if cutoff then
    sc.truncated = true
    text = text .. string.format("\n…(%d more bytes: hcp mcp sends the first %d)", #data - #text, M.MAX_TEXT)
  end
  sc[name] = text
  content[#content + 1] = { type = "text", text = label and (label .. text) or text }
end

local function read_image(path)
  if core.kind(path) ~= "file" then return nil end
  local fh = io.open(path, "rb")
  if not fh then return nil end
  local data = fh:read(M.MAX_IMAGE + 1)
  fh:close()
  if not data or #data > M.MAX_IMAGE then return nil end
  local mime = M.image_type(data)
  return mime and { type = "image", data = rpc.base64(data), mimeType = mime } or nil
end

local function files(res, content)
  local list = res.files or {}
  if #list == 0 then return end
  content[#content + 1] = { type = "text", text = "files written back:\n" .. table.concat(list, "\n") }
  for _, path in ipairs(list) do
    content[#content + 1] = read_image(path)
  end
end

--- The CallToolResult of `res`. `note` (optional) is added after the
--- runtime's error, e.g. why the user could not be asked to confirm.
---@param res hcp.Result
---@param note string?
---@return table
function M.from_result(res, note)
  local sc, content = {}, json.array()
  for _, k in ipairs(FIELDS) do
    local v = res[k]
    if v ~= nil and v ~= json.null then sc[k] = v end
  end
  for _, k in ipairs({ "files", "isolation", "left_in_jail" }) do
    if type(sc[k]) == "table" then sc[k] = json.array(table.move(sc[k], 1, #sc[k], 1, {})) end
  end
  if not res.ok then
    content[#content + 1] = { type = "text", text = tostring(res.error or "exit: status " .. tostring(res.exit)) }
    if note then content[#content + 1] = { type = "text", text = note } end
  end
  local ok_label = not res.ok and "stdout:\n" or nil
  stream("stdout", res.stdout, sc, content, ok_label)
  stream("stderr", res.stderr, sc, content, "stderr:\n")
  files(res, content)
  if #content == 0 then content[1] = { type = "text", text = "" } end
  return { content = content, structuredContent = sc, isError = not res.ok }
end

return M
