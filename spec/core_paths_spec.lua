-- hcp.core path functions (src/paths.c), against docs/core-api.md "Paths".
-- resolve and resolve_beneath run on a real temporary tree with planted
-- executables and symlinks; the realpath fallback of resolve_beneath is
-- covered by build/test/test_paths (openat2 denied by seccomp).
local core = require("hcp.core")
local S = require("support")

local ENOENT, EACCES, ENOTDIR, EXDEV, ELOOP = 2, 13, 20, 18, 40

-- The build under test (make check: its sanitized hcp-lua).
local HCP_LUA = S.HCP_LUA

local q = S.q

local function sh(cmd)
  local p = assert(io.popen(cmd, "r"))
  local out = p:read("a")
  p:close()
  return out
end

local write = S.write

-- The real path of the shared temp tree (/tmp may itself be a link).
local T, TREAL

local function setup_tree()
  T = sh("mktemp -d /tmp/hcp-paths-spec.XXXXXX"):gsub("%s+$", "")
  TREAL = sh("cd " .. q(T) .. " && pwd -P"):gsub("%s+$", "")
  assert(os.execute(string.format(
    "mkdir -p %s/a %s/b %s/c %s/pack/bin/sub %s/pack/lib %s/cwd %s/b/tool3",
    q(T), q(T), q(T), q(T), q(T), q(T), q(T))))
  write(T .. "/a/tool", "#!/bin/sh\necho a\n", 493)          -- 0755
  write(T .. "/b/tool", "#!/bin/sh\necho b\n", 493)
  write(T .. "/a/tool2", "not executable\n", 420)            -- 0644
  write(T .. "/b/tool2", "#!/bin/sh\n", 493)
  write(T .. "/c/tool3", "#!/bin/sh\n", 493)                  -- b/tool3 is a dir
  write(T .. "/c/only-owner", "#!/bin/sh\n", 448)             -- 0700
  write(T .. "/cwd/planted", "#!/bin/sh\necho pwned\n", 493)
  write(T .. "/pack/bin/run", "#!/bin/sh\n", 493)
  write(T .. "/pack/bin/data", "plain\n", 420)
  write(T .. "/outside", "#!/bin/sh\n", 493)
  assert(os.execute(string.format("ln -s /usr/bin/id %s/pack/bin/x", q(T))))
  assert(os.execute(string.format("ln -s ../../outside %s/pack/bin/up", q(T))))
  assert(os.execute(string.format("ln -s run %s/pack/bin/inside", q(T))))
  assert(os.execute(string.format("ln -s ../bin/run %s/pack/lib/tool", q(T))))
  assert(os.execute(string.format("ln -s %s/a/tool %s/c/linked", q(T), q(T))))
end

describe("hcp.core paths", function()
  setup(setup_tree)
  teardown(function()
    if T then os.execute("rm -rf " .. q(T)) end
  end)

  describe("normalize", function()
    local cases = {
      { "//etc", "/etc" },
      { "/tmp/../etc", "/etc" },
      { "/../etc", "/etc" },
      { "/..", "/" },
      { "a/../../b", "../b" },
      { "", "." },
      { "./x/", "x" },
      { "/", "/" },
      { "//", "/" },
      { ".", "." },
      { "..", ".." },
      { "../..", "../.." },
      { "a/..", "." },
      { "a//b/./c/", "a/b/c" },
      { "/a/b/c/../../d", "/a/d" },
      { "...", "..." },
      { "/..x/.y/", "/..x/.y" },
    }
    for _, c in ipairs(cases) do
      it(string.format("%q -> %q", c[1], c[2]), function()
        assert.equal(c[2], core.normalize(c[1]))
      end)
    end

    it("handles long paths without truncation", function()
      local long = string.rep("/abcdefghij", 2000)
      assert.equal(long, core.normalize(long .. "/"))
      assert.equal(long, core.normalize(long .. "/x/.."))
    end)

    it("touches no file", function()
      assert.equal("/nonexistent/x", core.normalize("/nonexistent/y/../x"))
    end)

    it("raises on a non-string or a NUL byte", function()
      assert.has_error(function() core.normalize(nil) end)
      assert.has_error(function() core.normalize({}) end)
      assert.has_error(function() core.normalize("/etc\0/x") end)
    end)
  end)

  describe("contains", function()
    it("is component-wise", function()
      assert.is_false(core.contains("/a/pre", "/a/prefix"))
      assert.is_true(core.contains("/a/pre", "/a/pre/fix"))
      assert.is_false(core.contains("/etc", "/etcetera"))
    end)

    it("counts equal paths as contained", function()
      assert.is_true(core.contains("/a/b", "/a/b"))
      assert.is_true(core.contains("/a/b/", "/a//b"))
    end)

    it("lets / contain every absolute path", function()
      assert.is_true(core.contains("/", "/"))
      assert.is_true(core.contains("/", "/usr/bin/env"))
      assert.is_false(core.contains("/usr", "/"))
    end)

    it("normalises both sides first", function()
      assert.is_false(core.contains("/a/b", "/a/b/../c"))
      assert.is_true(core.contains("/a/x/../b", "/a/b/c"))
      assert.is_false(core.contains("/a/b", "/a/b/../../etc/passwd"))
    end)

    it("raises on relative paths", function()
      assert.has_error(function() core.contains("a", "/a") end)
      assert.has_error(function() core.contains("/a", "a/b") end)
      assert.has_error(function() core.contains("", "/") end)
      assert.has_error(function() core.contains("/a", nil) end)
    end)
  end)

  describe("resolve", function()
    it("finds a bare name on the search path", function()
      assert.equal(T .. "/a/tool", core.resolve("tool", T .. "/a:" .. T .. "/b"))
    end)

    it("takes the first match", function()
      assert.equal(T .. "/b/tool", core.resolve("tool", T .. "/b:" .. T .. "/a"))
    end)

    it("skips files without an execute bit", function()
      assert.equal(T .. "/b/tool2", core.resolve("tool2", T .. "/a:" .. T .. "/b"))
    end)

    it("skips directories", function()
      assert.equal(T .. "/c/tool3", core.resolve("tool3", T .. "/b:" .. T .. "/c"))
    end)

    it("accepts an owner-only execute bit", function()
      assert.equal(T .. "/c/only-owner", core.resolve("only-owner", T .. "/c"))
    end)

    it("returns dir/name for a symlink, without resolving it", function()
      assert.equal(T .. "/c/linked", core.resolve("linked", T .. "/c"))
    end)

    it("normalises the directory of the result", function()
      assert.equal(T .. "/a/tool", core.resolve("tool", T .. "//a/./"))
      assert.equal(T .. "/a/tool", core.resolve("tool", T .. "/c/../a"))
    end)

    it("reports a missing name with ENOENT", function()
      local sp = T .. "/a:" .. T .. "/b"
      assert.same({ nil, "nope: not found in " .. sp, ENOENT }, { core.resolve("nope", sp) })
      assert.same({ nil, "tool: not found in ", ENOENT }, { core.resolve("tool", "") })
    end)

    it("never searches the cwd through empty or relative entries", function()
      -- A child in a directory holding an executable "planted": a shell
      -- would run ./planted for ":/nonexistent::" or ".".
      local code = [[
        local core = require("hcp.core")
        for _, sp in ipairs({ ":/nonexistent::", "", ":", ".", "./", "cwd", ".:/nonexistent" }) do
          local p, msg, err = core.resolve("planted", sp)
          io.write(tostring(p), " ", tostring(err), "\n")
        end
      ]]
      local out = sh(string.format("cd %s/cwd && %s -e %s 2>&1", q(T), q(HCP_LUA), q(code)))
      assert.equal(string.rep("nil " .. ENOENT .. "\n", 7), out)
    end)

    it("accepts an absolute executable, normalised", function()
      assert.equal(T .. "/a/tool", core.resolve(T .. "/a/./../a//tool", ""))
      assert.equal(T .. "/a/tool", core.resolve(T .. "/a/tool", "/ignored"))
    end)

    it("refuses an absolute path that is not a regular executable", function()
      local p = T .. "/a/tool2"
      assert.same({ nil, p .. ": not executable", EACCES }, { core.resolve(p, "") })
      assert.same({ nil, T .. "/b/tool3: not executable", EACCES },
        { core.resolve(T .. "/b/tool3/", "") })
    end)

    it("reports a missing absolute path as an OS error", function()
      local p, msg, err = core.resolve(T .. "/a/missing", "")
      assert.is_nil(p)
      assert.equal(ENOENT, err)
      assert.matches("/a/missing: ", msg, 1, true)
    end)

    it("raises on names that are neither bare nor absolute", function()
      for _, name in ipairs({ "./tool", "a/tool", "", ".", "..", "../x" }) do
        assert.has_error(function() core.resolve(name, T .. "/a") end, nil, name)
      end
    end)

    it("raises on bad argument types and NUL bytes", function()
      assert.has_error(function() core.resolve("tool", nil) end)
      assert.has_error(function() core.resolve(nil, "/bin") end)
      assert.has_error(function() core.resolve("tool\0x", T .. "/a") end)
      assert.has_error(function() core.resolve("tool", T .. "/a\0:/bin") end)
    end)
  end)

  describe("resolve_beneath", function()
    local root

    before_each(function() root = T .. "/pack" end)

    it("returns the real path of an executable under root", function()
      assert.equal(TREAL .. "/pack/bin/run", core.resolve_beneath(root, "bin/run"))
      assert.equal(TREAL .. "/pack/bin/run", core.resolve_beneath(root .. "/", "./bin/sub/../run"))
    end)

    it("follows symlinks that stay inside", function()
      assert.equal(TREAL .. "/pack/bin/run", core.resolve_beneath(root, "bin/inside"))
      assert.equal(TREAL .. "/pack/bin/run", core.resolve_beneath(root, "lib/tool"))
    end)

    it("refuses a planted absolute symlink out of the root with EXDEV", function()
      assert.same({ nil, "bin/x: escapes " .. root, EXDEV }, { core.resolve_beneath(root, "bin/x") })
    end)

    it("refuses a relative symlink out of the root with EXDEV", function()
      assert.same({ nil, "bin/up: escapes " .. root, EXDEV }, { core.resolve_beneath(root, "bin/up") })
    end)

    it("refuses .. out of the root with EXDEV", function()
      assert.same({ nil, "../outside: escapes " .. root, EXDEV },
        { core.resolve_beneath(root, "../outside") })
      assert.same({ nil, "bin/../../outside: escapes " .. root, EXDEV },
        { core.resolve_beneath(root, "bin/../../outside") })
    end)

    it("refuses magic links with ELOOP", function()
      local p, msg, err = core.resolve_beneath("/proc/self", "exe")
      assert.is_nil(p)
      assert.matches("^exe: ", msg)
      assert.equal(ELOOP, err)
    end)

    it("refuses a file without an execute bit, and a directory", function()
      assert.same({ nil, "bin/data: not executable", EACCES }, { core.resolve_beneath(root, "bin/data") })
      assert.same({ nil, "bin: not executable", EACCES }, { core.resolve_beneath(root, "bin") })
    end)

    it("reports a missing file or root as an OS error", function()
      local p, msg, err = core.resolve_beneath(root, "bin/missing")
      assert.is_nil(p)
      assert.equal(ENOENT, err)
      assert.matches("^bin/missing: ", msg)
      p, msg, err = core.resolve_beneath(T .. "/nope", "bin/run")
      assert.is_nil(p)
      assert.equal(ENOENT, err)
      assert.matches("/nope: ", msg, 1, true)
      p, msg, err = core.resolve_beneath(T .. "/outside", "x")
      assert.is_nil(p)
      assert.matches("/outside: ", msg, 1, true)
      assert.equal(ENOTDIR, err)
    end)

    it("raises on an absolute or empty rel", function()
      assert.has_error(function() core.resolve_beneath(root, "/usr/bin/id") end)
      assert.has_error(function() core.resolve_beneath(root, "") end)
      assert.has_error(function() core.resolve_beneath(root, nil) end)
      assert.has_error(function() core.resolve_beneath(root, "bin/run\0x") end)
    end)
  end)

  describe("allow_match", function()
    it("matches a bare entry against the last component", function()
      assert.equal("jq", core.allow_match("/usr/bin/jq", { "jq" }))
      assert.equal("jq", core.allow_match("/usr/bin//jq", { "git", "jq" }))
    end)

    it("matches bare entries component-wise", function()
      assert.is_nil(core.allow_match("/usr/bin/jq", { "q" }))
      assert.is_nil(core.allow_match("/usr/bin/jq", { "bin/jq" }))
      assert.is_nil(core.allow_match("/usr/bin/xjq", { "jq" }))
      assert.is_nil(core.allow_match("/usr/bin/jq.sh", { "jq" }))
    end)

    it("matches an absolute entry exactly, after normalising both", function()
      assert.equal("/usr/bin/jq", core.allow_match("/usr/bin/jq", { "/usr/bin/jq" }))
      assert.equal("/usr//bin/../bin/jq", core.allow_match("/usr/./bin/jq", { "/usr//bin/../bin/jq" }))
      assert.is_nil(core.allow_match("/usr/local/bin/jq", { "/usr/bin/jq" }))
      assert.is_nil(core.allow_match("/usr/bin/jq", { "/usr/bin" }))
    end)

    it("returns the first matching entry", function()
      assert.equal("/usr/bin/jq", core.allow_match("/usr/bin/jq", { "git", "/usr/bin/jq", "jq" }))
      assert.equal("jq", core.allow_match("/usr/bin/jq", { "jq", "/usr/bin/jq" }))
    end)

    it("never matches entries that are neither bare nor absolute", function()
      assert.is_nil(core.allow_match("/usr/bin/jq", { "", "bin/jq", "./jq", ".", "..", "jq\0" }))
      assert.is_nil(core.allow_match("/", { "", "." }))
    end)

    it("returns nil for an empty list", function()
      assert.is_nil(core.allow_match("/usr/bin/jq", {}))
    end)

    it("raises on a relative path, a non-table list or a non-string entry", function()
      assert.has_error(function() core.allow_match("jq", { "jq" }) end)
      assert.has_error(function() core.allow_match("/usr/bin/jq", "jq") end)
      assert.has_error(function() core.allow_match("/usr/bin/jq", { 1 }) end)
    end)
  end)
end)
