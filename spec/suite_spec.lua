-- spec/suite_spec.lua — the suite itself: every spec runs the build under
-- test (S.BUILD: make check's sanitized one), so none may name build/ of
-- the checkout on its own — such a spec tests a stale or unsanitized build
-- and reports its verdict as the sanitized one's.
local S = require("support")

describe("the spec suite", function()
  it("names the build under test only through spec/support.lua", function()
    local p = assert(io.popen("ls " .. S.q(S.REPO .. "/spec") .. "/*.lua " .. S.q(S.REPO .. "/spec") .. "/*/*.lua"))
    local offenders, files = {}, 0
    for path in p:lines() do
      files = files + 1
      if not path:match("/spec/support%.lua$") and not path:match("/spec/suite_spec%.lua$") then
        local n = 0
        for line in io.lines(path) do
          n = n + 1
          -- a literal build/bin or build/lib or build/share of the checkout
          if line:match('"/build/[bls]') or line:match("/build/bin/hcp") then
            offenders[#offenders + 1] = path:sub(#S.REPO + 2) .. ":" .. n .. ": " .. line
          end
        end
      end
    end
    p:close()
    assert.is_true(files > 20, "found the specs")
    assert.same({}, offenders)
  end)
end)
