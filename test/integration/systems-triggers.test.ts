/**
 * Schedules end to end on a real bridge (src/workflows/triggers/schedule.ts) with short real
 * times (a 6-field cron: every 2 seconds) and bounded waits:
 * - a schedule runs the system again and again with its inputs (origin `schedule`, trigger
 *   `schedule:0`), each outcome is POSTed to its `notify` URL, and `GET /v1/systems/:id` shows its
 *   next and last run;
 * - a bridge stopped over a due time catches it up ONCE at its next start (and not with
 *   `catchUp: false`); the start after that catches up nothing;
 * - a schedule that names a conversation: the router tells that conversation on its next turn
 *   ("While you were away, …"), once.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, describe, test } from "node:test";
import Database from "better-sqlite3";
import OpenAI from "openai";
import { stringify } from "yaml";
import type { BridgeEvent } from "../../src/wire/events.js";
import type { RunRow, SystemRow } from "../../src/wire/runs.js";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const NODE = process.execPath;
const dirs: string[] = [];
after(() => dirs.forEach(cleanup));

const say = (id: string, triggers: unknown[], name = id) => ({
  id,
  name,
  sideEffects: false,
  inputs: { type: "object", required: ["topic"], properties: { topic: { type: "string" } } },
  triggers,
  run: { kind: "command", argv: [NODE, "-e", "console.log('about ' + process.argv[1])", "${inputs.topic}"] },
});

const base = (dataDir: string, systems: unknown[]) => ({
  dataDir,
  backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
  models: [{ id: "m", backend: "up" }],
  systems,
});

async function runsOf(b: TestBridge, system: string): Promise<RunRow[]> {
  return ((await (await fetch(`${b.baseURL}/runs?system=${system}`)).json()) as { data: RunRow[] }).data;
}

describe("schedules", () => {
  test("a schedule every 2 seconds runs with its inputs; the system shows its next and last run", async () => {
    const dir = tempDir("cb-sched-");
    dirs.push(dir);
    // The schedule's `notify` receiver.
    const told: Array<{ headers: Record<string, unknown>; body: any }> = [];
    const receiver = createServer((req, res) => {
      let raw = "";
      req.on("data", (c: Buffer) => (raw += c.toString()));
      req.on("end", () => {
        told.push({ headers: req.headers, body: JSON.parse(raw) });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, "127.0.0.1", r));
    const notify = {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/done`,
      // A token for the receiver from the data dir's secrets file, like a webhook step's.
      headers: { authorization: "Bearer ${secrets.NOTIFY_TOKEN}" },
    };
    writeFileSync(path.join(dir, "secrets"), "NOTIFY_TOKEN=to-the-receiver-7f3a\n", { mode: 0o600 });
    const b = await startTestBridge(
      base(dir, [say("tick", [{ cron: "*/2 * * * * *", inputs: { topic: "tides" }, notify }])]),
    );
    try {
      assert.ok(await eventually(async () => (await runsOf(b, "tick")).length >= 2, 8_000), "two runs in 8 s");
      const runs = await runsOf(b, "tick");
      for (const r of runs.slice(0, 2)) {
        assert.equal(r.origin, "schedule");
        assert.equal(r.trigger, "schedule:0");
        assert.deepEqual(r.inputs, { topic: "tides" });
      }
      assert.ok(await eventually(async () => (await runsOf(b, "tick")).some((r) => r.status === "completed")));
      assert.match(String((await runsOf(b, "tick")).find((r) => r.status === "completed")!.output), /about tides/);
      const row = (await (await fetch(`${b.baseURL}/systems/tick`)).json()) as SystemRow;
      const [t] = row.triggers;
      assert.equal(t!.cron, "*/2 * * * * *");
      assert.ok(t!.last_run_id?.startsWith("run"));
      assert.ok(t!.next_run_at! > t!.last_run_at! && t!.next_run_at! - Date.now() <= 2_100, JSON.stringify(t));
      assert.equal(t!.notify, true);
      // Each ended run was POSTed to `notify`, with its outcome.
      assert.ok(await eventually(() => told.length >= 1, 5_000), "notify was called");
      const [first] = told;
      assert.equal(first!.headers.authorization, "Bearer to-the-receiver-7f3a");
      assert.equal(first!.body.system, "tick");
      assert.equal(first!.body.event, "run.ended");
      assert.deepEqual(first!.body.inputs, { topic: "tides" });
      assert.equal(first!.body.run.id, first!.body.runId);
      assert.equal(first!.body.run.status, "completed");
      assert.equal(first!.body.run.trigger, "schedule:0");
      assert.match(first!.body.run.output, /about tides/);
    } finally {
      await b.close();
      receiver.close();
    }
  });

  test("a bridge stopped over a due time catches up once at start, not with catchUp: false", async () => {
    const dir = tempDir("cb-sched-");
    dirs.push(dir);
    // Once a year: never due while the test runs, unless the bridge "was down" over New Year.
    const yearly = (catchUp: boolean) => [{ cron: "0 0 1 1 *", timezone: "UTC", inputs: { topic: "year" }, catchUp }];
    const config = base(dir, [say("annual", yearly(true)), say("skipper", yearly(false))]);
    const first = await startTestBridge(config);
    await first.close();
    // Both schedules were first seen now; pretend they were seen two years ago and the bridge was down since.
    const db = new Database(path.join(dir, "systems.db"));
    db.prepare(`UPDATE trigger_state SET since = ?`).run(Date.now() - 2 * 366 * 86_400_000);
    db.close();
    const events: BridgeEvent[] = [];
    const second = await startTestBridge(config);
    try {
      second.bus.on((e) => events.push(e));
      assert.ok(await eventually(async () => (await runsOf(second, "annual")).length >= 1, 5_000));
      // Give a second catch-up (which must not come) the time to show up.
      await new Promise((r) => setTimeout(r, 500));
      const annual = await runsOf(second, "annual");
      assert.equal(annual.length, 1, "two missed New Years, one run");
      assert.equal(annual[0]!.origin, "schedule");
      assert.equal((await runsOf(second, "skipper")).length, 0, "catchUp: false skips it");
      const row = (await (await fetch(`${second.baseURL}/systems/annual`)).json()) as SystemRow;
      assert.equal(row.triggers[0]!.last_run_id, annual[0]!.id);
      assert.equal(new Date(row.triggers[0]!.next_run_at!).toISOString().slice(5), "01-01T00:00:00.000Z");
    } finally {
      await second.close();
    }
    const third = await startTestBridge(config);
    try {
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await runsOf(third, "annual")).length, 1, "nothing more to catch up");
    } finally {
      await third.close();
    }
  });

  test("a schedule made in a conversation is told there on its next turn, once", async () => {
    const dir = tempDir("cb-sched-");
    dirs.push(dir);
    const up = await startFakeOpenAI((req) =>
      JSON.stringify(req.body?.messages?.[0] ?? "").includes("You classify ONE chat message")
        ? { kind: "text", chunks: ['{"action":"answer","confidence":0.9}'] }
        : { kind: "text", chunks: ["ANSWER"] },
    );
    const b = await startTestBridge({
      dataDir: dir,
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        router: { type: "router", classifier: "cls", answer: "ans" },
      },
      models: [
        { id: "cls", backend: "up" },
        { id: "ans", backend: "up" },
        { id: "router", backend: "router" },
      ],
      systems: [say("other", [])],
    });
    const events: BridgeEvent[] = [];
    b.bus.on((e) => events.push(e));
    const client = new OpenAI({ baseURL: b.baseURL, apiKey: "k", maxRetries: 0 });
    const chat = async (text: string) =>
      (
        await client.chat.completions.create(
          { model: "router", messages: [{ role: "user", content: text }] },
          { headers: { "x-session-id": "digest-chat" } },
        )
      ).choices[0]!.message.content ?? "";
    try {
      assert.equal(await chat("hello"), "ANSWER");
      const conv = events.find((e) => e.type === "decision")?.conversation;
      assert.ok(conv, "the conversation's key");
      // A schedule that names this conversation (as the builder writes it), every 2 seconds.
      const file = path.join(dir, "systems", "digest.yaml");
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(
        file,
        stringify(
          say("digest", [{ cron: "*/2 * * * * *", inputs: { topic: "news" }, conversation: conv }], "Daily digest"),
        ),
      );
      assert.deepEqual(await b.systems!.reload(), []);
      assert.ok(await eventually(async () => (await runsOf(b, "digest")).some((r) => r.status === "completed"), 8_000));
      // The schedule is removed again, so no further run comes between the turns below.
      writeFileSync(file, stringify(say("digest", [], "Daily digest")));
      assert.deepEqual(await b.systems!.reload(), []);
      await eventually(async () => (await runsOf(b, "digest")).every((r) => r.status === "completed"), 5_000);
      const runs = await runsOf(b, "digest");
      assert.ok(runs.every((r) => r.conversation === conv));
      const told = await chat("anything new?");
      assert.match(
        told,
        /^While you were away, \*\*Daily digest\*\* \(run `run\w+`\) finished[\s\S]*about news[\s\S]*ANSWER$/,
      );
      assert.equal(told.match(/While you were away/g)!.length, runs.length, "each run told");
      assert.equal(await chat("ok"), "ANSWER", "told once");
    } finally {
      await b.close();
      await up.close();
    }
  });
});
