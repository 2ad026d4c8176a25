-- spec/unit/view_sources_spec.lua — hcp.view.check_sources, the bwrap
-- driver's check of where a view's paths lead (the local driver's is in the
-- C core's plan: spec/core_rootfs_spec.lua). A fake realpath stands for the
-- links, so every spelling of the host's /dev, /proc and /tmp is covered.
local view = require("hcp.view")

local RES = ": reserved: the view has its own /dev, /proc and /tmp"

local function check(links, ro, rw, kinds)
  return view.check_sources({ ro = ro or {}, rw = rw or {} }, function(p) return links[p] end,
    function(p) return (kinds or {})[p] or "dir" end)
end

describe("view.check_sources", function()
  it("refuses a path that leads to the host's /proc, /dev, /tmp or root, read-only or read-write", function()
    for _, c in ipairs({
      { "/proc/4242", RES }, { "/proc", RES }, { "/proc/sys/kernel", RES },
      { "/dev", RES }, { "/dev/shm", RES }, { "/dev/null", RES }, { "/dev/pts/0", RES },
      { "/tmp", RES }, { "/", ": the host's root cannot be part of the view" },
    }) do
      for _, kind in ipairs({ "ro", "rw" }) do
        local ok, err = check({ ["/srv/l"] = c[1] }, kind == "ro" and { "/srv/l" } or nil,
          kind == "rw" and { "/srv/l" } or nil)
        assert.is_nil(ok, c[1])
        assert.equal("spawn: view: /srv/l: resolves to " .. c[1] .. c[2], err)
      end
    end
  end)

  it("refuses a device node, char or block, wherever it lies, given as it is or through a link", function()
    for _, kind in ipairs({ "char", "block" }) do
      local kinds = { ["/srv/node"] = kind }
      for _, given in ipairs({ "/srv/node", "/srv/l" }) do
        local ok, err = check({ ["/srv/node"] = "/srv/node", ["/srv/l"] = "/srv/node" }, { given }, nil, kinds)
        assert.is_nil(ok, kind)
        assert.equal("spawn: view: " .. given .. ": resolves to /srv/node: a device node cannot be part of the view"
          .. " (its /dev is its own)", err)
      end
    end
    -- the other kinds a view holds pass
    for _, kind in ipairs({ "file", "dir", "socket", "fifo" }) do
      assert.is_true(check({ ["/srv/x"] = "/srv/x" }, { "/srv/x" }, nil, { ["/srv/x"] = kind }), kind)
    end
  end)

  it("lets through what only looks alike, and paths that do not exist", function()
    local links = { ["/a"] = "/dev/shm/hcp-x/jail", ["/b"] = "/tmp/hcp-y", ["/c"] = "/procfs", ["/d"] = "/devices",
      ["/e"] = "/usr/lib" }
    assert.is_true(check(links, { "/a", "/c", "/d", "/e", "/missing" }, { "/b" }))
  end)
end)

-- One rule for both drivers: the C core's, which the local driver's plan
-- applies (spec/core_rootfs_spec.lua attacks it through links there).
describe("core.view_reserved", function()
  local core = require("hcp.core")
  it("names the host's root, /dev, /proc and /tmp itself; passes the look-alikes and what lies below /dev/shm", function()
    for _, p in ipairs({ "/dev", "/dev/null", "/dev/shm", "/dev/pts/0", "/proc", "/proc/self", "/proc/1/root", "/tmp" }) do
      assert.equal("reserved: the view has its own /dev, /proc and /tmp", core.view_reserved(p), p)
    end
    assert.equal("the host's root cannot be part of the view", core.view_reserved("/"))
    for _, p in ipairs({ "/devices", "/procfs", "/tmpx", "/tmp/x", "/dev/shm/jails", "/usr", "/var/tmp" }) do
      assert.is_nil(core.view_reserved(p), p)
    end
  end)
end)
