// A whole agent session against `tessel mcp`, driven by the official MCP
// TypeScript SDK client (@modelcontextprotocol/sdk): initialize, list tools
// and resources, read the space, ask, tell (one told time too good to be
// true), enqueue, run with progress notifications, explain, why_failed,
// verify, summary, and bad arguments. Exits non-zero on the first failed check.
//
//   node session.mjs TESSEL_BINARY SPACE.tsl
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ProgressNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import assert from "node:assert/strict";

const [tessel, spaceFile] = process.argv.slice(2);
if (!tessel || !spaceFile) {
  console.error("usage: node session.mjs TESSEL_BINARY SPACE.tsl");
  process.exit(2);
}

const transport = new StdioClientTransport({
  command: tessel,
  args: ["mcp", spaceFile, "--backend", "sim", "--no-db", "--seed", "3", "--verify",
         "--token-price", "0.5"],
  stderr: "inherit",
});
const client = new Client({ name: "tessel-test", version: "1.0.0" });
await client.connect(transport);

let step = 0;
const check = (what, fn) => {
  step += 1;
  return Promise.resolve(fn()).then(
    (v) => { console.log(`ok ${step} - ${what}`); return v; },
    (e) => { console.error(`not ok ${step} - ${what}\n${e.stack ?? e}`); process.exit(1); });
};
const call = async (name, args = {}, options = undefined) => {
  const r = await client.callTool({ name, arguments: args }, undefined, options);
  return r;
};
const ok = (r) => {
  assert.equal(r.isError, false, `tool error: ${JSON.stringify(r.content)}`);
  assert.equal(r.content[0].type, "text");
  assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
  return r.structuredContent;
};

await check("the server says who it is and what it offers", () => {
  assert.equal(client.getServerVersion().name, "tessel");
  const caps = client.getServerCapabilities();
  assert.ok(caps.tools && caps.resources);
  assert.match(client.getInstructions(), /space tool/);
});

await check("tools/list names every op, each with a JSON Schema", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const n of ["space", "ask", "tell", "enqueue", "evaluate", "run", "best", "explain",
                   "interactions", "why_failed", "summary", "verify", "trials"])
    assert.ok(names.includes(n), `missing tool ${n}`);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, "object");
    assert.ok(t.description.length > 20, `${t.name} needs a description an LLM can use`);
  }
  assert.deepEqual(tools.find((t) => t.name === "tell").inputSchema.required, ["trial_id"]);
});

const space = await check("space: typed values, defaults, kinds, constants, target numbers",
  async () => {
    const { space } = ok(await call("space"));
    assert.ok(space.valid_configs > 1000);
    const tileM = space.parameters.find((p) => p.name === "tile_m");
    assert.equal(tileM.kind, "integer");
    assert.equal(typeof tileM.values[0], "number");
    const order = space.parameters.find((p) => p.kind === "permutation");
    assert.ok(Array.isArray(order.values[0]));
    assert.equal(typeof space.constants.M, "number");
    assert.ok(space.target.constants.partitions > 0);
    assert.ok(space.default_config);
    return space;
  });

const asked = await check("ask: every suggestion has a prediction (the prior before a model)",
  async () => {
    const { suggestions } = ok(await call("ask", { n: 2 }));
    assert.equal(suggestions.length, 2);
    for (const s of suggestions) {
      assert.equal(s.prediction.basis, "prior");
      assert.ok(s.prediction.cost_s > 0);
      assert.equal(typeof s.reason, "string");
    }
    return suggestions;
  });

await check("tell: an agent's time is stored as reported and, with --verify, is not the best",
  async () => {
    const told = ok(await call("tell", { trial_id: asked[0].trial_id, objective: 1e-9,
                                         tokens: 300 }));
    assert.equal(told.trial.reported, true);
    assert.equal(told.trial.tokens, 300);
    assert.equal(told.best, null);
    const failed = ok(await call("tell", { trial_id: asked[1].trial_id, status: "compile_error",
                                           message: "SBUF overflow" }));
    assert.equal(failed.trial.status, "compile_error");
  });

await check("enqueue: a partial config takes the space's defaults", async () => {
  const r = ok(await call("enqueue", { config: { tile_m: 256 }, tokens: 120,
                                       note: "taller tiles" }));
  assert.equal(typeof r.trial_id, "number");
  assert.equal(r.duplicate, false);
});

await check("verify: the told time is re-measured on the backend", async () => {
  const r = ok(await call("verify", { max: 2 }));
  assert.equal(r.verified, 1);
  const { trials } = ok(await call("trials"));
  const t = trials.find((x) => x.trial_id === asked[0].trial_id);
  assert.equal(t.reported, false);
  assert.equal(t.metrics.reported_objective, 1e-9);
  assert.notEqual(t.objective, 1e-9);
  assert.equal(r.best.trial_id, t.trial_id, "now measured, it is the best");
});

await check("run: evaluations on the simulator, with progress notifications", async () => {
  // onprogress makes the client send a progressToken. The SDK drops progress
  // notifications that arrive in the same read as the response (it runs
  // notification handlers a microtask late, after the response has removed
  // the request's progress handler), and a simulator run is that fast: so
  // every notifications/progress is recorded here, as sent.
  const seen = [];
  client.setNotificationHandler(ProgressNotificationSchema, (n) => seen.push(n.params));
  const r = ok(await call("run", { evaluations: 4 }, { onprogress: () => {} }));
  assert.equal(seen.length, 4, `progress notifications: ${JSON.stringify(seen)}`);
  assert.deepEqual(seen.map((p) => p.progress), [1, 2, 3, 4]);
  assert.ok(seen.every((p) => p.total === 4 && typeof p.message === "string"));
  assert.ok(seen.every((p) => p.progressToken === seen[0].progressToken));
  assert.equal(r.summary.evaluations, 6);
  assert.ok(r.best && r.best.reported === false, "the best is a measured result");
});

await check("explain: bottleneck and suggestions of the best config", async () => {
  const { explanation } = ok(await call("explain"));
  assert.equal(typeof explanation.bottleneck, "string");
  assert.ok(explanation.latency_s > 0);
  assert.ok(Array.isArray(explanation.suggestions));
  const partial = ok(await call("explain", { config: { tile_n: 512 } }));
  assert.equal(partial.explanation.config.tile_n, 512);
});

await check("why_failed: failures grouped by status", async () => {
  const r = ok(await call("why_failed"));
  assert.ok(r.failed >= 1);
  assert.ok(r.by_status.some((g) => g.status === "compile_error"));
});

await check("bad arguments are tool errors an LLM can act on", async () => {
  const wrongType = await call("ask", { n: "two" });
  assert.equal(wrongType.isError, true);
  assert.match(wrongType.content[0].text, /"n" must be a whole number/);
  const unknownTrial = await call("tell", { trial_id: 9999, objective: 1 });
  assert.equal(unknownTrial.isError, true);
  assert.match(unknownTrial.content[0].text, /unknown trial id 9999/);
  const badConfig = await call("evaluate", { config: { tile_m: 7 } });
  assert.equal(badConfig.isError, true);
  assert.match(badConfig.content[0].text, /tile_m/);
  const extra = await call("best", { verbose: true });
  assert.equal(extra.isError, true);
  assert.match(extra.content[0].text, /unknown argument "verbose"/);
});

await check("an unknown tool is a JSON-RPC invalid-params error", async () => {
  await assert.rejects(call("fly"), (e) => e.code === -32602 && /unknown tool 'fly'/.test(e.message));
});

await check("resources: the report, the best config and the trace", async () => {
  const { resources } = await client.listResources();
  assert.deepEqual(resources.map((r) => r.name).sort(), ["best", "report", "trace"]);
  const report = await client.readResource({ uri: "tessel://study/report" });
  assert.match(report.contents[0].text, /tessel study report/);
  assert.match(report.contents[0].text, /tokens spent/);
  const best = await client.readResource({ uri: "tessel://study/best" });
  assert.equal(typeof JSON.parse(best.contents[0].text).tile_m, "number");
  const trace = await client.readResource({ uri: "tessel://study/trace" });
  assert.ok(JSON.parse(trace.contents[0].text).traceEvents.length > 0);
  await assert.rejects(client.readResource({ uri: "tessel://nope" }), (e) => e.code === -32002);
});

await check("summary: counts, tokens and the report", async () => {
  const { summary, report } = ok(await call("summary"));
  assert.equal(summary.evaluations, 6);
  assert.equal(summary.tokens, 420);
  assert.equal(summary.verified, 1);
  assert.match(report, /re-measured/);
});

await client.close();
console.log(`all ${step} checks passed (space ${space.name})`);
