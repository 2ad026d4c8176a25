-- spec/unit/view_hidden_sockets_spec.lua — hcp.view.hidden_sockets, where
-- the bwrap driver covers the host's listening unix sockets that its view
-- would show (the local driver's core does the same in its plan: the
-- sockets themselves are attacked under both drivers in spec/view_spec.lua).
-- A fake realpath stands for the links.
local view = require("hcp.view")

-- The places, and the directories the socket list was asked about.
local function run(links, ro, rw, sockets)
  local asked
  local places = view.hidden_sockets({ ro = ro or {}, rw = rw or {} }, function(p) return links[p] end,
    function(within) asked = within return sockets end)
  return places, asked
end

local function hidden(...) return (run(...)) end

local ID = setmetatable({}, { __index = function(_, p) return p end }) -- no links anywhere

describe("view.hidden_sockets", function()
  it("covers a socket inside any directory of the view, read-only or read-write, at any depth", function()
    assert.same({ "/jail/x/s", "/opt/app/run/s.sock", "/usr/local/var/run/d.sock" },
      hidden(ID, { "/usr", "/opt" }, { "/jail" },
        { "/usr/local/var/run/d.sock", "/opt/app/run/s.sock", "/jail/x/s", "/run/elsewhere.sock" }))
  end)

  it("covers it at every place the view shows it: through a linked directory too", function()
    local links = setmetatable({ ["/bin"] = "/usr/bin" }, { __index = ID })
    assert.same({ "/bin/s.sock", "/usr/bin/s.sock" }, hidden(links, { "/bin", "/usr" }, {}, { "/usr/bin/s.sock" }))
  end)

  it("leaves a socket the view lists itself (a grant), and one outside every path", function()
    assert.same({ "/opt/b.sock" }, hidden(ID, { "/opt", "/opt/a.sock" }, {}, { "/opt/a.sock", "/opt/b.sock" }))
    assert.same({}, hidden(ID, { "/usr" }, {}, { "/usrx/s.sock", "/us", "/usr" }))
  end)

  it("asks the socket list about the view's real paths, and passes its failure on", function()
    local links = setmetatable({ ["/bin"] = "/usr/bin" }, { __index = ID })
    assert.same({ "/usr/bin", "/opt", "/jail" }, select(2, run(links, { "/bin", "/opt" }, { "/jail" }, {})))
    assert.same({ nil, "/proc/net/unix: Permission denied", 13 }, { view.hidden_sockets({ ro = { "/usr" }, rw = {} },
      function(p) return p end, function() return nil, "/proc/net/unix: Permission denied", 13 end) })
  end)

  it("never treats the host's root as a directory of the view, nor a path realpath cannot resolve", function()
    assert.same({}, hidden({ ["/weird"] = "/" }, { "/weird" }, {}, { "/run/s.sock" }))
    assert.same({}, hidden({}, { "/gone" }, {}, { "/gone/s.sock" }))
  end)
end)

describe("view.bwrap_args", function()
  it("binds /dev/null read-only over each covered place, after the binds that show it", function()
    local a = view.bwrap_args({ ro = { "/usr" }, rw = {}, cwd = "/", bin = "/usr/bin/x",
      hide = { "/usr/local/var/run/d.sock" } }, { network = false })
    local usr, hide
    for i = 1, #a - 2 do
      if a[i] == "--ro-bind-try" and a[i + 2] == "/usr" then usr = i end
      if a[i] == "--ro-bind" and a[i + 1] == "/dev/null" and a[i + 2] == "/usr/local/var/run/d.sock" then hide = i end
    end
    assert.is_number(usr)
    assert.is_number(hide)
    assert.is_true(hide > usr)
  end)
end)
