/**
 * Two bridges on one PostgreSQL (`store: { kind: postgres }`, in process, each with its own data
 * dir) running the same system:
 * - its schedule (every 2 seconds, real time) is checked by both, and a time missed (as after a
 *   downtime) that both check at once is caught up once; each due time starts ONE
 *   run in the whole cluster: no due time is fired twice, the runs the two bridges list are
 *   exactly the runs fired, and the claim is in the shared `trigger_state`;
 * - a signed hook request accepted by one bridge, sent again to the other, is refused as a replay
 *   (the shared `hook_seen`).
 * A real PostgreSQL (testkit/postgres.ts); the system is a local command, no model.
 */
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import pg from "pg";
import type { BridgeEvent } from "../../src/wire/events.js";
import type { RunRow } from "../../src/wire/runs.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const NODE = process.execPath;
const SECRET = "one-secret-both-instances-4b1d";
const dirs: string[] = [];
let server: TestPostgres;
before(async () => {
  server = await startPostgres();
});
after(async () => {
  await server?.stop();
  dirs.forEach(cleanup);
});

const tick = {
  id: "tick",
  sideEffects: false,
  inputs: { type: "object", required: ["topic"], properties: { topic: { type: "string" } } },
  triggers: [{ cron: "*/2 * * * * *", inputs: { topic: "tides" } }],
  hook: true,
  run: { kind: "command", argv: [NODE, "-e", "console.log('about ' + process.argv[1])", "${inputs.topic}"] },
};

/** A bridge on the database, in its own data dir, holding the hook secret both share. */
async function instance(url: string): Promise<{ bridge: TestBridge; events: BridgeEvent[] }> {
  const dir = tempDir("cb-pg-sched-");
  dirs.push(dir);
  mkdirSync(path.join(dir, "hooks"), { recursive: true, mode: 0o700 });
  writeFileSync(path.join(dir, "hooks", "tick.secret"), `${SECRET}\n`, { mode: 0o600 });
  const bridge = await startTestBridge({
    dataDir: dir,
    store: { kind: "postgres", url },
    backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
    models: [{ id: "m", backend: "up" }],
    systems: [tick],
  });
  const events: BridgeEvent[] = [];
  bridge.bus.on((e) => events.push(e));
  return { bridge, events };
}

async function runsOf(b: TestBridge): Promise<RunRow[]> {
  return ((await (await fetch(`${b.baseURL}/runs?system=tick`)).json()) as { data: RunRow[] }).data;
}

const fired = (events: BridgeEvent[]) =>
  events.flatMap((e) => (e.type === "trigger.fired" && e.trigger === "schedule:0" ? [e] : []));

test("two bridges on one PostgreSQL: a schedule fires once per due time; a hook replay to the other is refused", async () => {
  const url = await server.database();
  const a = await instance(url);
  const b = await instance(url);
  // From here on both bridges' events are watched; a run B fired while it was starting (before its
  // bus was watched) is listed with no event seen, and is older than this.
  const watched = Date.now();
  try {
    // Both run the schedule; wait for a few due times.
    assert.ok(
      await eventually(() => fired(a.events).length + fired(b.events).length >= 4, 15_000),
      "four due times fired in 15 s",
    );
    // Both check at once over a time missed ten minutes ago (as two instances back after a
    // downtime): it is caught up once.
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      await c.query("UPDATE trigger_state SET since = $1 WHERE system = 'tick'", [Date.now() - 600_000]);
    } finally {
      await c.end();
    }
    await Promise.all([a.bridge.systems!.triggers.reload(), b.bridge.systems!.triggers.reload()]);
    // Both stop checking (a check in progress ends first); the runs they started are recorded.
    await Promise.all([a.bridge.systems!.triggers.close(), b.bridge.systems!.triggers.close()]);
    const all = [...fired(a.events), ...fired(b.events)];
    const dues = all.map((e) => e.dueAt);
    assert.equal(new Set(dues).size, dues.length, `no due time fired twice: ${JSON.stringify(dues.sort())}`);
    assert.equal(all.filter((e) => e.catchUp).length, 1, "the missed time was caught up once");
    // Each bridge lists the cluster's runs (the run store is shared): every fired run, once, and
    // no other but those fired before both bridges were watched.
    const listed = [...(await runsOf(a.bridge)), ...(await runsOf(b.bridge))];
    const ids = new Set(listed.map((r) => r.id));
    for (const e of all) assert.ok(ids.has(e.runId), `fired run ${e.runId} is listed`);
    const unseen = listed.filter((r) => !all.some((e) => e.runId === r.id));
    assert.deepEqual(
      unseen.filter((r) => r.created_at >= watched).map((r) => r.id),
      [],
      "no run beyond one per due time",
    );
    // The claim is in the shared database: the last due time fired is its `since` or before it.
    const q = new pg.Client({ connectionString: url });
    await q.connect();
    try {
      const { rows } = await q.query("SELECT since, last_run_id FROM trigger_state WHERE system = 'tick' AND idx = 0");
      assert.equal(rows.length, 1);
      assert.ok(Number(rows[0].since) >= Math.max(...dues.map(Number)));
      assert.ok(
        all.some((e) => e.runId === rows[0].last_run_id),
        "its last run is one of theirs",
      );
    } finally {
      await q.end();
    }
  } finally {
    await Promise.all([a.bridge.close(), b.bridge.close()]);
  }

  // A signed hook request: accepted by one instance, its replay refused by the other.
  const one = await instance(url);
  const two = await instance(url);
  try {
    const ts = String(Math.floor(Date.now() / 1000));
    const body = JSON.stringify({ topic: "hooked" });
    const headers = {
      "content-type": "application/json",
      "x-clawbridge-timestamp": ts,
      "x-clawbridge-signature": `sha256=${createHmac("sha256", SECRET).update(`${ts}.${body}`).digest("hex")}`,
    };
    const first = await fetch(`${one.bridge.baseURL}/hooks/tick`, { method: "POST", headers, body });
    assert.equal(first.status, 202, await first.clone().text());
    const replay = await fetch(`${two.bridge.baseURL}/hooks/tick`, { method: "POST", headers, body });
    assert.equal(replay.status, 409);
    assert.equal(((await replay.json()) as { error: { code: string } }).error.code, "replayed_request");
  } finally {
    await Promise.all([one.bridge.close(), two.bridge.close()]);
  }
});
