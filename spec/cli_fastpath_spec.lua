-- `hcp run` and `hcpx` parse their plain command lines without argparse
-- (cli.lua's fast_run, issue 12: ~0.5 ms of every `hcp run`). The fast path
-- must give exactly the table argparse gives, and must leave every other
-- spelling — help, errors, `--opt=value`, repeated options — to argparse.
local S = require("support")
local cli = require("hcp.cli")

local q = S.q

-- Both parses of one command line; fails when the fast path answered and
-- argparse refused, or the two tables differ.
local function check(name, args)
  local fast, a, err = cli.parse_both(name, args)
  if fast then
    assert(a, "fast path accepted what argparse refuses (" .. tostring(err) .. "): " .. table.concat(args, " "))
    assert.same(a, fast, table.concat(args, " "))
  end
  return fast, a, err
end

describe("the fast path of hcp run", function()
  local plain = {
    { "run", "jq" },
    { "run", "jq", "-n", "1" },
    { "run", "jq", "--json", "--pack-dir", "x" }, -- after PACK: the child's
    { "run", "--json", "jq", "." },
    { "run", "--pack-dir", "a", "--pack-dir", "b", "--allow-bin", "c", "jq" },
    { "run", "--config", "c.lua", "--audit", "log", "--out-dir", "o", "jq" },
    { "run", "--no-sandbox", "--native-local", "--replace", "--no-replace", "--allow-hidden", "--json", "jq" },
    { "run", "--pack-dir", "", "jq" },
    { "run", "--pack-dir", "with space", "jq" },
    { "run", "--", "jq", "-x" },
    { "run", "--json", "--", "jq" },
    { "run", "" },
  }

  it("gives argparse's table for every plain spelling, for hcp run and hcpx", function()
    for _, args in ipairs(plain) do
      local fast = check("hcp", args)
      assert.is_table(fast, table.concat(args, " "))
      local x = table.move(args, 2, #args, 1, {})
      fast = check("hcpx", x)
      assert.is_table(fast, "hcpx " .. table.concat(x, " "))
    end
  end)

  it("leaves every other spelling to argparse, which speaks for it", function()
    local others = {
      { { "run", "--pack-dir=a", "jq" } },                    -- accepted by argparse, not taken here
      { { "run", "--json", "--json", "jq" } },                -- argparse's rule for a repeat, not ours
      { { "run", "--config", "a", "--config", "b", "jq" } },
      { { "run", "--bogus", "jq" }, "unknown option" },
      { { "run", "--pack-dir", "-x", "jq" } },
      { { "run", "--", "-x" } },
      { { "run", "-", "x" } },
      { { "run", "--json" }, "missing argument" },
      { { "run" }, "missing argument" },
    }
    for _, case in ipairs(others) do
      local args, says = case[1], case[2]
      local fast, a, err = check("hcp", args)
      assert.is_nil(fast, table.concat(args, " "))
      if says then
        assert.is_nil(a)
        assert.matches(says, err, 1, true)
      end
    end
  end)

  it("agrees with argparse on 3000 generated command lines", function()
    local pool = { "--pack-dir", "--allow-bin", "--config", "--audit", "--out-dir", "--no-sandbox", "--native-local",
      "--replace", "--no-replace", "--allow-hidden", "--json", "--", "-", "-x", "--pack-dir=x", "--json=1", "v", "",
      "-n", "jq", "--bogus", "run" }
    local seed = tonumber(os.getenv("HCP_SPEC_SEED")) or os.time()
    math.randomseed(seed)
    local fast_taken = 0
    for _ = 1, 3000 do
      local args = { "run" }
      for _ = 1, math.random(0, 8) do args[#args + 1] = pool[math.random(#pool)] end
      local fast = check("hcp", args)
      if fast then fast_taken = fast_taken + 1 end
    end
    assert.is_true(fast_taken > 100, "the generated lines hardly reach the fast path (seed " .. seed .. ")")
  end)

  it("hcp --version alone prints what argparse's --version prints", function()
    for _, prog in ipairs({ S.HCP, S.HCPX }) do
      local fast, code = S.sh(prog .. " --version 2>&1")
      assert.equal(0, code)
      -- `--version x`: parsed by argparse, whose --version answers first
      local slow, code2 = S.sh(prog .. " --version x 2>&1")
      assert.equal(0, code2)
      assert.equal(slow, fast)
      assert.matches("^hcpx? %(hcp%-lua%) %d", fast)
    end
  end)

  it("is what hcp run takes: argparse is not even loaded", function()
    local dir = S.tmpdir("fastpath-")
    local mark = dir .. "/loaded"
    -- the config file runs in the command's own process, after parsing
    S.write(dir .. "/probe.lua", string.format(
      "local f = assert(io.open(%q, 'w')) f:write(tostring(package.loaded.argparse ~= nil)) f:close() return {}", mark))
    local cmd = string.format("cd %s && %s run --config %s --pack-dir packs-examples jq -n 1 > /dev/null 2>&1",
      q(S.REPO), S.HCP, q(dir .. "/probe.lua"))
    assert.is_true(os.execute(cmd))
    assert.equal("false", S.read(mark))
    -- and with an option it leaves to argparse, it is loaded: the probe can tell
    cmd = cmd:gsub("%-%-pack%-dir packs", "--pack-dir=packs")
    assert.is_true(os.execute(cmd))
    assert.equal("true", S.read(mark))
  end)

  -- the modules a call needs only for what this one does not have (an audit
  -- log, a manifest's mocks or variables, a stderr to read hints from) are
  -- loaded when they are needed, not at every start
  it("loads the audit, mocks, env-rules and hint modules only for a call that uses them", function()
    local dir = S.tmpdir("lazymods-")
    local mark = dir .. "/required"
    -- the config file runs after parsing, before the runtime: it writes
    -- what is loaded by then, and a searcher it places first sees every
    -- module looked for from then on, then lets the real searchers find it
    local probe = string.format([[
local f = assert(io.open(%q, 'w'))
for name in pairs(package.loaded) do f:write(name, '\n') end
table.insert(package.searchers, 1, function(name) f:write(name, '\n') f:flush() return nil end)
return { audit = os.getenv('PROBE_AUDIT') }]], mark)
    S.write(dir .. "/probe.lua", probe)
    S.mkdir(dir .. "/packs/bare")
    S.mkdir(dir .. "/packs/rich")
    S.write(dir .. "/packs/bare/hcp.json", '{"hcp":1,"name":"bare","wrap":{"bin":"/bin/sh","args":["-c","exit 0"]}}')
    S.write(dir .. "/packs/rich/hcp.json", [[{"hcp":1,"name":"rich","wrap":{"bin":"/bin/sh",
      "args":["-c","echo missing.txt: No such file or directory >&2; exit 1"], "agent_env":{"RICH":"1"}},
      "mocks":{"exec":{"stdout":"mocked"}}}]])
    local function required(pack, env)
      local cmd = string.format("cd %s && %s %s run --config %s --pack-dir %s %s missing.txt > /dev/null 2> %s",
        q(dir), env, S.HCP, q(dir .. "/probe.lua"), q(dir .. "/packs"), pack, q(dir .. "/stderr"))
      os.execute(cmd)
      local set = {}
      for name in S.read(mark):gmatch("[^\n]+") do set[name] = true end
      return set
    end
    local lazy = { "hcp.audit", "hcp.manifest.mocks", "hcp.envrules", "hcp.workspace.hint" }
    local bare = required("bare", "")
    assert.is_true(bare["hcp.cli"] and bare["hcp.driver.local"], "the probe saw the modules loaded before and after")
    for _, m in ipairs(lazy) do assert.is_nil(bare[m], m .. " loaded by a call that does not use it") end
    local rich = required("rich", "PROBE_AUDIT=" .. q(dir .. "/audit.log"))
    for _, m in ipairs(lazy) do assert.is_true(rich[m], m .. " not loaded by a call that uses it") end
    -- and each did its work: the log, the hint on the name the tool did not find
    assert.matches('"call":"rich.exec"', S.read(dir .. "/audit.log"))
    assert.matches('hint: argument %d %("missing.txt"%) is not a file reference', S.read(dir .. "/stderr"))
  end)
end)
