/**
 * Approval steps in the run manager (src/workflows/systems/runner.ts, approvals.ts,
 * executors/approval.ts) with a real SQLite file and a fake model boundary: a run stops `waiting`
 * at the approval (its step `waiting`, the question and the data shown written, events published),
 * goes on when approved (the step's output says who and when) or ends `rejected` with the note;
 * a decision is taken once; a run not waiting refuses one; a timeout applies its policy (both
 * ways); a waiting run stays waiting in a second manager on the same file (a restart), whose
 * `recover` applies a deadline that passed meanwhile.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import type Database from "better-sqlite3";
import { pino } from "pino";
import { sqliteSqlOf } from "../../src/core/db/sql.js";
import { EventBus } from "../../src/ops/events/bus.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { openSystemsDb, RunStore, type RunRecord } from "../../src/workflows/systems/db.js";
import { loadSystems } from "../../src/workflows/systems/library.js";
import { RunError, RunManager } from "../../src/workflows/systems/runner.js";
import type { ModelCaller } from "../../src/workflows/systems/step-executor.js";

const root = mkdtempSync(path.join(tmpdir(), "cb-approval-"));
const dbs: Database.Database[] = [];
const managers: RunManager[] = [];
after(async () => {
  for (const m of managers) await m.close();
  for (const db of dbs) db.close();
  rmSync(root, { recursive: true, force: true });
});

const fakeModel: ModelCaller = async function* (req) {
  yield { type: "text", text: `said: ${req.prompt}` };
  yield { type: "done", finishReason: "stop" };
};

/** draft (model) → check (approval) → publish (model, uses the approval's output). */
const system = (approval: Record<string, unknown> = {}) => ({
  id: "post",
  inputs: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
  run: {
    kind: "plan",
    steps: [
      { id: "draft", uses: "model", with: { model: "m", prompt: "draft about ${inputs.topic}" } },
      {
        id: "check",
        uses: "approval",
        dependsOn: ["draft"],
        with: { question: "Publish the post about ${inputs.topic}?", ...approval },
      },
      {
        id: "publish",
        uses: "model",
        dependsOn: ["check"],
        with: { model: "m", prompt: "publish (approved by ${steps.check.output.by})" },
      },
    ],
  },
});

let files = 0;
async function manager(sys: unknown, dbFile = path.join(root, `${files++}.db`)) {
  const { library, problems } = await loadSystems({
    configSystems: [sys],
    models: new Map([["m", { router: false }]]),
  });
  assert.deepEqual(problems, []);
  const db = openSystemsDb(dbFile);
  dbs.push(db);
  const bus = new EventBus();
  const events: BridgeEvent[] = [];
  bus.on((e) => events.push(e));
  const runs = new RunManager({
    store: new RunStore(sqliteSqlOf(db)),
    library,
    bus,
    callModel: fakeModel,
    dataDir: path.join(root, "data"),
    log: pino({ level: "silent" }),
    retryBaseMs: 10,
  });
  managers.push(runs);
  return { runs, events, dbFile };
}

async function until(check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

const step = (r: RunRecord, id: string) => r.steps.find((s) => s.id === id)!;

describe("approval steps", () => {
  test("a run waits at the approval, is approved once, and finishes", async () => {
    const { runs, events } = await manager(system());
    const started = await runs.start({ system: "post", inputs: { topic: "tides" }, origin: "http" });
    const waiting = await runs.wait(started.id);
    assert.equal(waiting.status, "waiting");
    assert.equal(step(waiting, "draft").status, "completed");
    assert.equal(step(waiting, "check").status, "waiting");
    assert.equal(step(waiting, "publish").status, "pending");
    assert.equal(waiting.approval?.question, "Publish the post about tides?");
    assert.deepEqual(waiting.approval?.shown, { draft: "said: draft about tides" });
    assert.equal(waiting.approval?.deadline, undefined);
    assert.ok(events.some((e) => e.type === "approval.requested" && e.step === "check"));
    assert.ok(events.some((e) => e.type === "run.waiting" && e.runId === started.id));
    await assert.rejects(runs.resume(started.id), RunError, "a waiting run is not resumed without a decision");

    await runs.decide(started.id, { approve: true, by: "http", note: "fine" });
    const done = await runs.wait(started.id);
    assert.equal(done.status, "completed");
    const out = step(done, "check").output as { approved: boolean; by: string; at: number; note: string };
    assert.equal(out.approved, true);
    assert.equal(out.by, "http");
    assert.equal(out.note, "fine");
    assert.equal(done.output, "said: publish (approved by http)");
    assert.equal(done.approval, undefined);
    assert.ok(events.some((e) => e.type === "approval.decided" && e.decision === "approved"));

    await assert.rejects(runs.decide(started.id, { approve: false, by: "http" }), (err: RunError) => {
      assert.equal(err.code, "conflict");
      return true;
    });
  });

  test("rejected: the run ends rejected with the note, and a second decision is a conflict", async () => {
    const { runs, events } = await manager(system());
    const { id } = await runs.start({ system: "post", inputs: { topic: "tides" }, origin: "http" });
    await runs.wait(id);
    // Two decisions at once (a person and the timeout, two tabs): the first is taken, the second refused.
    const [first, second] = await Promise.allSettled([
      runs.decide(id, { approve: false, by: "chat", note: "too long" }),
      runs.decide(id, { approve: true, by: "http" }),
    ]);
    assert.equal(first.status, "fulfilled");
    assert.equal(second.status, "rejected");
    assert.match(String((second as PromiseRejectedResult).reason), /was already decided/);
    const rejected = (await runs.get(id))!;
    assert.equal(rejected.status, "rejected");
    assert.equal(rejected.error, "too long");
    assert.equal(rejected.failedStep, "check");
    assert.equal(step(rejected, "check").status, "failed");
    assert.equal(step(rejected, "publish").status, "pending");
    assert.ok(events.some((e) => e.type === "run.rejected" && e.runId === id));
    await assert.rejects(runs.decide(id, { approve: true, by: "http" }), /not waiting/);
  });

  test("a run that is not waiting refuses a decision", async () => {
    const { runs } = await manager({ id: "plain", run: { kind: "model", model: "m", prompt: "hi" } });
    const { id } = await runs.start({ system: "plain", inputs: {}, origin: "http" });
    assert.equal((await runs.wait(id)).status, "completed");
    await assert.rejects(runs.decide(id, { approve: true, by: "http" }), /is completed, not waiting/);
    await assert.rejects(runs.decide("run_nope", { approve: true, by: "http" }), /no run/);
  });

  for (const onTimeout of ["approve", "reject"] as const)
    test(`a timeout applies its policy (${onTimeout})`, async () => {
      const { runs } = await manager(system({ timeoutSeconds: 0.2, onTimeout }));
      const { id } = await runs.start({ system: "post", inputs: { topic: "tides" }, origin: "http" });
      const waiting = await runs.wait(id);
      assert.equal(waiting.status, "waiting");
      assert.ok(waiting.approval?.deadline && waiting.approval.deadline > waiting.approval.createdAt);
      await until(async () => (await runs.get(id))!.status !== "waiting" && !runs.isLive(id));
      const end = await runs.wait(id);
      if (onTimeout === "approve") {
        assert.equal(end.status, "completed");
        assert.equal((step(end, "check").output as { by: string }).by, "timeout");
      } else {
        assert.equal(end.status, "rejected");
        assert.equal(end.error, "rejected by timeout");
      }
    });

  test("a waiting run stays waiting after a restart; a deadline that passed meanwhile applies at start", async () => {
    const first = await manager(system({ timeoutSeconds: 0.3, onTimeout: "approve" }));
    const { id } = await first.runs.start({ system: "post", inputs: { topic: "tides" }, origin: "http" });
    assert.equal((await first.runs.wait(id)).status, "waiting");
    await first.runs.close(); // the bridge stops before the deadline
    await new Promise((r) => setTimeout(r, 400));

    const second = await manager(system({ timeoutSeconds: 0.3, onTimeout: "approve" }), first.dbFile);
    assert.equal((await second.runs.get(id))!.status, "waiting");
    assert.deepEqual(await second.runs.recover(), [], "a waiting run is not interrupted");
    await until(async () => (await second.runs.get(id))!.status === "completed");
    assert.equal((step((await second.runs.get(id))!, "check").output as { by: string }).by, "timeout");
  });
});
