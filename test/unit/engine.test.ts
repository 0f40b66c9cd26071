/**
 * The engine's scheduler (src/workflows/engine/scheduler.ts) with fake attempts, in milliseconds:
 * the order its lifecycle hooks run in (handlers in the order added, run → step → retry → step →
 * run), retries with a doubling delay only for retryable errors, a failed step skipping its
 * dependants, the parallel bound, and a pause (cancel) that leaves unfinished steps for a resume
 * that runs only them. System plans on it: test/unit/systems-plan.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Cancellation } from "../../src/core/util/cancel.js";
import { type EngineStep, RunHooks, runSteps, sleep } from "../../src/workflows/engine/scheduler.js";

const step = (id: string, dependsOn: string[] = [], retry = 0, retryDelayMs = 1): EngineStep => ({
  id,
  dependsOn,
  retry,
  retryDelayMs,
});

class Flaky extends Error {
  readonly retryable = true;
}

/** Every hook call as a line. */
function recorder(log: string[], tag = ""): RunHooks {
  return new RunHooks()
    .addHandler("runBefore", () => log.push(`${tag}run.before`))
    .addHandler("stepBefore", (s, a) => log.push(`${tag}before ${s} ${a}`))
    .addHandler("stepRetry", (s, a, _e, d) => log.push(`${tag}retry ${s} ${a} ${d}`))
    .addHandler("stepAfter", (s, e) => log.push(`${tag}after ${s} ${e.status}`))
    .addHandler("runAfter", (o) => log.push(`${tag}run.after ${o.outcome}`));
}

describe("engine scheduler", () => {
  test("hooks run in order: the run, each step before and after, retries between; handlers in the order added", async () => {
    const log: string[] = [];
    const hooks = recorder(log).addHandler("stepAfter", async (s) => {
      await new Promise((r) => setImmediate(r));
      log.push(`second after ${s}`);
    });
    let calls = 0;
    const res = await runSteps({
      steps: [step("a", [], 2, 2), step("b", ["a"])],
      maxParallel: 2,
      done: {},
      cancel: new Cancellation(),
      hooks,
      attempt: async (s) => {
        if (s.id === "a" && ++calls < 3) throw new Flaky("not yet");
        return { output: s.id.toUpperCase() };
      },
    });
    assert.deepEqual(log, [
      "run.before",
      "before a 1",
      "retry a 2 2",
      "before a 2",
      "retry a 3 4",
      "before a 3",
      "after a completed",
      "second after a",
      "before b 1",
      "after b completed",
      "second after b",
      "run.after completed",
    ]);
    assert.deepEqual(res, { outcome: "completed", outputs: { a: "A", b: "B" } });
  });

  test("an error that is not retryable fails at once; its dependants are skipped, an independent branch finishes", async () => {
    const log: string[] = [];
    const res = await runSteps({
      steps: [step("bad", [], 3), step("child", ["bad"]), step("grandchild", ["child"]), step("other")],
      maxParallel: 4,
      done: {},
      cancel: new Cancellation(),
      hooks: recorder(log),
      attempt: async (s) => {
        if (s.id === "bad") throw new Error("refused");
        return { output: s.id };
      },
    });
    assert.equal(res.outcome, "failed");
    assert.equal(res.failedStep, "bad");
    assert.equal(res.error, "refused");
    assert.deepEqual(res.outputs, { other: "other" });
    assert.ok(!log.some((l) => l.startsWith("retry")));
    assert.ok(log.includes("after child skipped") && log.includes("after grandchild skipped"));
    assert.ok(!log.includes("before child 1"));
  });

  test("never more than maxParallel steps at once", async () => {
    let inFlight = 0;
    let most = 0;
    const res = await runSteps({
      steps: ["a", "b", "c", "d", "e"].map((id) => step(id)),
      maxParallel: 2,
      done: {},
      cancel: new Cancellation(),
      hooks: new RunHooks(),
      attempt: async (s) => {
        most = Math.max(most, ++inFlight);
        await new Promise((r) => setTimeout(r, 2));
        inFlight--;
        return { output: s.id };
      },
    });
    assert.equal(res.outcome, "completed");
    assert.equal(most, 2);
  });

  test("a pause stops the run with its unfinished steps pending; the resume runs only those, with the outputs before", async () => {
    const log: string[] = [];
    const cancel = new Cancellation();
    const steps = [step("a"), step("b", ["a"]), step("c", ["b"])];
    const first = await runSteps({
      steps,
      maxParallel: 1,
      done: {},
      cancel,
      hooks: recorder(log).addHandler("stepAfter", (s) => {
        if (s === "a") cancel.abort(new Error("paused"));
      }),
      attempt: (s, _o, c) =>
        s.id === "a"
          ? Promise.resolve({ output: 1 })
          : new Promise((_r, reject) => c.onAbort(() => reject(new Error("stopped")))),
    });
    assert.equal(first.outcome, "stopped");
    assert.deepEqual(first.outputs, { a: 1 });
    assert.ok(!log.includes("before b 1"), "nothing starts after the pause");
    const ran: string[] = [];
    const second = await runSteps({
      steps,
      maxParallel: 1,
      done: first.outputs,
      cancel: new Cancellation(),
      hooks: new RunHooks(),
      attempt: async (s, outputs) => {
        ran.push(s.id);
        return { output: Number(outputs[s.dependsOn[0]!]) + 1 };
      },
    });
    assert.deepEqual(ran, ["b", "c"]);
    assert.deepEqual(second, { outcome: "completed", outputs: { a: 1, b: 2, c: 3 } });
  });

  test("a pause during a retry's wait ends the wait at once; the step is stopped, not failed", async () => {
    const log: string[] = [];
    const cancel = new Cancellation();
    const t0 = Date.now();
    const res = await runSteps({
      steps: [step("slow", [], 3, 60_000)],
      maxParallel: 1,
      done: {},
      cancel,
      hooks: recorder(log).addHandler("stepRetry", () => setImmediate(() => cancel.abort())),
      attempt: async () => {
        throw new Flaky("busy");
      },
    });
    assert.ok(Date.now() - t0 < 5_000);
    assert.equal(res.outcome, "stopped");
    assert.deepEqual(log, [
      "run.before",
      "before slow 1",
      "retry slow 2 60000",
      "after slow stopped",
      "run.after stopped",
    ]);
  });

  test("sleep ends on its time or on the cancellation, whichever comes first", async () => {
    const c = new Cancellation();
    const t0 = Date.now();
    await sleep(5, c);
    assert.ok(Date.now() - t0 >= 4);
    setTimeout(() => c.abort(), 1);
    const t1 = Date.now();
    await sleep(60_000, c);
    assert.ok(Date.now() - t1 < 5_000);
  });
});
