/**
 * `GET /v1/events` across two bridges on one real PostgreSQL (`store: { kind: postgres }`), both in
 * this process on 127.0.0.1, turns sent with the official `openai` client to a fake OpenAI upstream
 * (the only faked part), the streams read with `eventsource-parser`. Checked: a turn on A is seen by
 * a watcher of B's stream with A's instance id, under the same ids as on A's own stream; a
 * reconnect to B with `Last-Event-ID` older than B's ring replays both instances' events after it,
 * in id order, then goes live; a bridge on SQLite names itself too; and the same across two
 * `clawbridge serve` processes.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { createParser } from "eventsource-parser";
import OpenAI from "openai";
import { type FakeOpenAI, startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { bridgeListening } from "../helpers/process-groups.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const KEY = "events-cluster-key-0001";

interface Ev {
  id?: number;
  event: string;
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** One `/v1/events` stream, read as it arrives. */
async function watch(b: { url: string }, headers: Record<string, string> = {}) {
  const ctl = new AbortController();
  const res = await fetch(`${b.url}/v1/events?types=turn.*`, {
    headers: { authorization: `Bearer ${KEY}`, ...headers },
    signal: ctl.signal,
  });
  assert.equal(res.status, 200);
  const events: Ev[] = [];
  const parser = createParser({
    onEvent: (e) =>
      events.push({ id: e.id === undefined ? undefined : Number(e.id), event: e.event!, data: JSON.parse(e.data) }),
  });
  const done = (async () => {
    const decoder = new TextDecoder();
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) parser.feed(decoder.decode(chunk));
    } catch {
      /* aborted */
    }
  })();
  return {
    events,
    async close() {
      ctl.abort();
      await done;
    },
  };
}

async function turn(b: { url: string }, conv: string): Promise<string> {
  const client = new OpenAI({ baseURL: `${b.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 20_000 });
  const { response } = await client.chat.completions
    .create({ model: "m1", messages: [{ role: "user", content: "hello" }] }, { headers: { "x-session-id": conv } })
    .withResponse();
  return response.headers.get("x-request-id")!;
}

const config = (up: FakeOpenAI, store: Record<string, unknown>) => ({
  server: { apiKeys: [KEY], shutdownGraceSeconds: 1 },
  backends: { up: { type: "openai", baseUrl: up.url, apiKey: "x" } },
  models: [{ id: "m1", backend: "up" }],
  events: { ringSize: 4, heartbeatSeconds: 60 },
  store,
});

let pg: TestPostgres;
let up: FakeOpenAI;
let a: TestBridge;
let b: TestBridge;

before(async () => {
  pg = await startPostgres();
  up = await startFakeOpenAI();
  const url = await pg.database();
  a = await startTestBridge(config(up, { kind: "postgres", url, instanceId: "bridge-a" }));
  b = await startTestBridge(config(up, { kind: "postgres", url, instanceId: "bridge-b" }));
});

after(async () => {
  await a?.close();
  await b?.close();
  await up?.close();
  await pg?.stop();
  for (const x of [a, b]) if (x) cleanup(x.dataDir);
});

describe("/v1/events across instances (PostgreSQL)", () => {
  test("a turn on A is seen by B's watcher, with A's instance id, under the ids A's watcher sees", async () => {
    const [wa, wb] = [await watch(a), await watch(b)];
    const turnId = await turn(a, "conv-a");
    const done = (w: { events: Ev[] }) =>
      w.events.some((e) => e.event === "turn.completed" && e.data.turnId === turnId);
    assert.ok(await eventually(() => done(wa) && done(wb), 10_000), "turn.completed on both streams");
    const ofTurn = (w: { events: Ev[] }) => w.events.filter((e) => e.data.turnId === turnId);
    assert.deepEqual(
      ofTurn(wb).map((e) => [e.event, e.data.instance]),
      [
        ["turn.started", "bridge-a"],
        ["turn.firstByte", "bridge-a"],
        ["turn.completed", "bridge-a"],
      ],
    );
    assert.deepEqual(
      ofTurn(wb).map((e) => e.id),
      ofTurn(wa).map((e) => e.id),
    );
    await wa.close();
    await wb.close();
  });

  test("Last-Event-ID on B, older than B's ring: both instances' events after it, in id order, then live", async () => {
    const wa = await watch(a);
    const turns: string[] = [];
    for (let i = 0; i < 4; i++) turns.push(await turn(i % 2 ? b : a, `conv-${i}`));
    const last = turns[3]!;
    assert.ok(
      await eventually(() => wa.events.some((e) => e.event === "turn.completed" && e.data.turnId === last), 10_000),
    );
    await wa.close();
    const all = wa.events;
    assert.equal(all.length, 12, "three events a turn");
    const from = all[0]!.id!;
    const rb = await watch(b, { "last-event-id": String(from) });
    assert.ok(await eventually(() => rb.events.length === 11, 10_000), JSON.stringify(rb.events));
    assert.deepEqual(
      rb.events.map((e) => [e.id, e.event, e.data.turnId, e.data.instance]),
      all.slice(1).map((e) => [e.id, e.event, e.data.turnId, e.data.instance]),
    );
    assert.deepEqual([...new Set(rb.events.map((e) => e.data.instance))].sort(), ["bridge-a", "bridge-b"]);
    const live = await turn(a, "conv-live");
    assert.ok(
      await eventually(() => rb.events.some((e) => e.data.turnId === live && e.event === "turn.completed"), 10_000),
    );
    const ids = rb.events.map((e) => e.id!);
    assert.deepEqual(
      ids,
      [...new Set(ids)].sort((x, y) => x - y),
      "in id order, no duplicate",
    );
    await rb.close();
  });

  test("on SQLite a bridge names itself too (host:pid)", async () => {
    const s = await startTestBridge(config(up, { kind: "sqlite" }));
    try {
      const w = await watch(s);
      const turnId = await turn(s, "conv-s");
      assert.ok(
        await eventually(() => w.events.some((e) => e.event === "turn.completed" && e.data.turnId === turnId), 10_000),
      );
      assert.equal(
        w.events[0]!.data.instance,
        `${(await import("node:os")).hostname()}:${process.pid}`.replace(/[^A-Za-z0-9_.:-]/g, "-"),
      );
      assert.equal(w.events[0]!.id, 1);
      await w.close();
    } finally {
      await s.close();
      cleanup(s.dataDir);
    }
  });

  test("two `clawbridge serve` processes: a turn on A is seen by a watcher of B, with A's instance id", async () => {
    const url = await pg.database();
    const procs = ["proc-a", "proc-b"].map((instanceId) => {
      const home = tempDir("cb-evc-home-");
      const file = path.join(home, "config.json");
      writeFileSync(
        file,
        JSON.stringify({
          ...config(up, { kind: "postgres", url, instanceId }),
          dataDir: path.join(home, "data"),
          server: { apiKeys: [KEY], shutdownGraceSeconds: 1, backendProbes: { enabled: false } },
          intents: { enabled: false },
        }),
      );
      const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, XDG_CONFIG_HOME: path.join(home, ".config") };
      delete env.CLAWBRIDGE_CONFIG;
      delete env.CLAWBRIDGE_STORE_URL;
      const proc = spawn(
        process.execPath,
        ["--import", "tsx", path.resolve("src/ops/commands/main.ts"), "serve", "--config", file, "--port", "0"],
        { env, stdio: ["ignore", "ignore", "pipe"] },
      );
      const exited = new Promise((r) => proc.once("exit", r));
      return { home, proc, exited, listening: bridgeListening(proc) };
    });
    try {
      const [urlA, urlB] = await Promise.all(procs.map((p) => p.listening.url));
      const wb = await watch({ url: urlB! });
      const turnId = await turn({ url: urlA! }, "conv-procs");
      assert.ok(
        await eventually(() => wb.events.some((e) => e.event === "turn.completed" && e.data.turnId === turnId), 10_000),
        procs[1]!.listening.stderr(),
      );
      assert.deepEqual(
        [...new Set(wb.events.filter((e) => e.data.turnId === turnId).map((e) => e.data.instance))],
        ["proc-a"],
      );
      await wb.close();
    } finally {
      for (const p of procs) {
        if (p.proc.exitCode === null && p.proc.signalCode === null) p.proc.kill("SIGTERM");
        const killer = setTimeout(() => p.proc.kill("SIGKILL"), 15_000);
        await p.exited;
        clearTimeout(killer);
        cleanup(p.home);
      }
    }
  });
});
