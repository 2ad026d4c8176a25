// Drives `hcp mcp` with the official MCP TypeScript SDK client (Client +
// StdioClientTransport). One scenario per run, chosen by the spec's JSON
// argument; prints one JSON line with what it saw.
//
//   list        every tool (all pages); each inputSchema and outputSchema
//               compiled by Ajv (draft 2020-12); `samples` validated by Ajv
//   calls       `calls` one after another: each result, or the error
//   cancel      `call` started, cancelled once `expect` processes matching
//               `marker` run; then whether they are gone, and `after` called
//   concurrent  `calls` all at once; once `expect` processes match
//               `marker` (all in flight together), they are sent SIGTERM
//   confirm     `call` with `capabilities`; elicitation answered `answer`
//   progress    `call` with an onprogress handler
//   logging     logging/setLevel `level`, then `call`; log messages seen
import { sdk, Ajv2020, config, connect, listAll, pids, until, run } from "./lib.mjs";

const cfg = config();
const marker = () => (cfg.marker || []).join("");

async function callTool(client, c, options) {
  try {
    return { result: await client.callTool({ name: c.name, arguments: c.arguments }, undefined, options) };
  } catch (e) {
    return { error: String(e && e.message || e), code: e && e.code };
  }
}

const scenarios = {
  async list(conn) {
    const { tools, pages } = await listAll(conn.client);
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    const schemaErrors = [];
    const validators = {};
    for (const t of tools) {
      for (const which of ["inputSchema", "outputSchema"]) {
        try {
          const v = ajv.compile(t[which]);
          if (which === "inputSchema") validators[t.name] = v;
        } catch (e) {
          schemaErrors.push(`${t.name}.${which}: ${e.message}`);
        }
      }
    }
    const verdicts = (cfg.samples || []).map((s) => {
      const v = validators[s.tool];
      return v ? v(s.arguments) : null;
    });
    return { tools, pages, schemaErrors, verdicts, server: conn.client.getServerVersion(),
      capabilities: conn.client.getServerCapabilities() };
  },

  async calls(conn) {
    const results = [];
    for (const c of cfg.calls) results.push(await callTool(conn.client, c));
    return { results };
  },

  async cancel(conn) {
    const ac = new AbortController();
    const pending = callTool(conn.client, cfg.call, { signal: ac.signal });
    const seen = await until(() => pids(marker()).length >= cfg.expect);
    const before = pids(marker()).length;
    ac.abort("spec cancels");
    const first = await pending;
    const gone = await until(() => pids(marker()).length === 0);
    const after = cfg.after ? await callTool(conn.client, cfg.after) : null;
    // a response for the cancelled request would show up as an SDK error
    await new Promise((r) => setTimeout(r, 200));
    return { seen: !!seen, before, first, gone: !!gone, left: pids(marker()), after };
  },

  async concurrent(conn) {
    const pending = cfg.calls.map((c) => callTool(conn.client, c));
    let max = 0;
    const all = await until(() => {
      const n = pids(marker()).length;
      if (n > max) max = n;
      return n >= cfg.expect;
    }, 60000);
    const running = pids(marker());
    for (const pid of running) {
      try { process.kill(pid, "SIGTERM"); } catch (e) { /* already gone */ }
    }
    const results = await Promise.all(pending);
    return { together: !!all, max, killed: running.length, results };
  },

  async confirm(conn) {
    const asked = [];
    if (cfg.capabilities && cfg.capabilities.elicitation) {
      conn.client.setRequestHandler(sdk.ElicitRequestSchema, async (req) => {
        asked.push(req.params);
        return cfg.answer;
      });
    }
    const r = await callTool(conn.client, cfg.call);
    return { asked, ...r };
  },

  async progress(conn) {
    const seen = [];
    const r = await callTool(conn.client, cfg.call, { onprogress: (p) => seen.push(p) });
    return { progress: seen, ...r };
  },

  async logging(conn) {
    const messages = [];
    conn.client.setNotificationHandler(sdk.LoggingMessageNotificationSchema, (n) => { messages.push(n.params); });
    await conn.client.setLoggingLevel(cfg.level);
    const r = cfg.call ? await callTool(conn.client, cfg.call) : {};
    await new Promise((res) => setTimeout(res, 100));
    return { messages, ...r };
  },
};

run(async () => {
  const conn = await connect(cfg, cfg.capabilities || {});
  const out = await scenarios[cfg.scenario](conn);
  out.protocolVersion = conn.transport._protocolVersion;
  out.errors = conn.errors;
  await conn.client.close();
  out.stderr = conn.stderr();
  return out;
});
