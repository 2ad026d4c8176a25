// Shared by the MCP client scripts the specs run: loads the official
// TypeScript SDK from build/mcp-clients (installed by `make mcp-clients`
// from spec/mcp/package-lock.json), connects a Client to `hcp mcp` over
// stdio, and prints one JSON line for the Lua spec to check.
import { createRequire } from "node:module";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const CLIENTS = process.env.HCP_MCP_CLIENTS || path.resolve(here, "../../build/mcp-clients");
const require = createRequire(path.join(CLIENTS, "package.json"));

export const sdk = {
  ...require("@modelcontextprotocol/sdk/client/index.js"),
  ...require("@modelcontextprotocol/sdk/client/stdio.js"),
  ...require("@modelcontextprotocol/sdk/types.js"),
};
export const Ajv2020 = require("ajv/dist/2020").default;

// The spec's JSON argument: { command, args, cwd, env, ... }.
export function config() {
  return JSON.parse(process.argv[2]);
}

// A connected client; `capabilities` as the Client declares them.
export async function connect(cfg, capabilities = {}) {
  const client = new sdk.Client({ name: "hcp-spec", version: "1.0.0" }, { capabilities });
  const transport = new sdk.StdioClientTransport({
    command: cfg.command,
    args: cfg.args,
    cwd: cfg.cwd,
    env: { ...sdk.getDefaultEnvironment(), ...(cfg.env || {}) },
    stderr: "pipe",
  });
  const errors = [];
  let stderr = "";
  client.onerror = (e) => errors.push(String(e && e.message || e));
  await client.connect(transport);
  transport.stderr?.on("data", (d) => { stderr += d.toString(); });
  return { client, transport, errors, stderr: () => stderr };
}

// Every tool, following nextCursor; also how many pages it took.
export async function listAll(client) {
  const tools = [];
  let cursor, pages = 0;
  do {
    const r = await client.listTools(cursor ? { cursor } : {});
    tools.push(...r.tools);
    cursor = r.nextCursor;
    pages++;
  } while (cursor && pages < 1000);
  return { tools, pages };
}

// The pids whose command line matches `pattern` (pgrep -f).
export function pids(pattern) {
  const r = spawnSync("pgrep", ["-f", pattern], { encoding: "utf8" });
  return (r.stdout || "").split("\n").filter(Boolean).map(Number);
}

// Poll `cond` until it is true or `ms` passed; returns its last value.
export async function until(cond, ms = 20000, every = 50) {
  const end = Date.now() + ms;
  let v = await cond();
  while (!v && Date.now() < end) {
    await new Promise((r) => setTimeout(r, every));
    v = await cond();
  }
  return v;
}

export function done(out) {
  process.stdout.write(JSON.stringify(out) + "\n");
}

// Run `main`, print its result (or the error) and exit.
export function run(main) {
  main().then((out) => { done(out); process.exit(0); },
    (e) => { done({ fatal: String(e && e.stack || e) }); process.exit(1); });
}
