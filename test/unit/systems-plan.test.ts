/**
 * A system's plan (src/workflows/systems/plan.ts) on the engine's scheduler
 * (src/workflows/engine/scheduler.ts) with fake attempts: the order steps start in (a step waits
 * for everything it depends on, independent ones run together up to `maxParallel`), retries only
 * for retryable failures with 1 s, 2 s, 4 s between them by default (checked under mock timers),
 * a failure skipping its dependants while an independent branch finishes, resumed plans not
 * re-running completed steps, and a cancellation stopping running steps and starting no more.
 * Real processes are in test/integration/systems-runs.test.ts.
 */
import assert from "node:assert/strict";
import { describe, mock, test } from "node:test";
import { ExecError, type ExecResult } from "../../src/workflows/systems/step-executor.js";
import { compileRun, SINGLE_STEP, type CompiledPlan, type CompiledStep } from "../../src/workflows/systems/plan.js";
import { RunHooks, runSteps, type RunStepsArgs } from "../../src/workflows/engine/scheduler.js";
import { commandRunSchema } from "../../src/workflows/systems/schema.js";
import { Cancellation } from "../../src/core/util/cancel.js";

const LEAF = { kind: "leaf" as const, spec: commandRunSchema.parse({ kind: "command", argv: ["/bin/true"] }) };

function plan(
  steps: Array<[id: string, deps?: string[], retry?: number]>,
  maxParallel = 4,
  output?: string,
): CompiledPlan {
  return {
    steps: steps.map(([id, deps = [], retry = 3]): CompiledStep => ({ id, dependsOn: deps, retry, target: LEAF })),
    maxParallel,
    output: output ?? steps[steps.length - 1]![0],
  };
}

/** Hooks that record every call as a line, e.g. `started a 1`, `retry a 2 1000`. */
function recorder(): { hooks: RunHooks; log: string[] } {
  const log: string[] = [];
  const hooks = new RunHooks()
    .addHandler("stepBefore", (s, a) => log.push(`started ${s} ${a}`))
    .addHandler("stepRetry", (s, a, e, d) => log.push(`retry ${s} ${a} ${d} ${(e as ExecError).code}`))
    .addHandler("stepAfter", (s, e) =>
      log.push(
        e.status === "completed"
          ? `completed ${s}`
          : e.status === "failed"
            ? `failed ${s} ${e.error.message}`
            : e.status === "skipped"
              ? `skipped ${s} (${e.reason})`
              : `stopped ${s}`,
      ),
    );
  return { log, hooks };
}

/** A compiled plan on the scheduler. */
function runPlan(
  args: { plan: CompiledPlan } & Omit<RunStepsArgs<CompiledStep>, "steps" | "maxParallel">,
): ReturnType<typeof runSteps> {
  const { plan: p, ...rest } = args;
  return runSteps({ steps: p.steps, maxParallel: p.maxParallel, ...rest });
}

/** A promise the test settles by hand. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** Yield to the event loop until `check` holds (at most `n` turns). */
async function until(check: () => boolean, n = 200): Promise<void> {
  for (let i = 0; i < n && !check(); i++) await new Promise((r) => setImmediate(r));
  assert.ok(check(), "condition not reached");
}

describe("compileRun", () => {
  test("a single-kind system is one step, retried up to 3 more times", () => {
    const spec = commandRunSchema.parse({ kind: "command", argv: ["/bin/true"] });
    assert.deepEqual(compileRun(spec), {
      steps: [{ id: SINGLE_STEP, dependsOn: [], retry: 3, target: { kind: "leaf", spec } }],
      maxParallel: 1,
      output: SINGLE_STEP,
    });
  });
});

describe("a plan on the scheduler", () => {
  test("a diamond: each step starts once what it depends on completed, and sees their outputs", async () => {
    const { hooks, log } = recorder();
    const seen: Record<string, string[]> = {};
    const res = await runPlan({
      plan: plan([["a"], ["b", ["a"]], ["c", ["a"]], ["d", ["b", "c"]]]),
      done: {},
      cancel: new Cancellation(),
      hooks,
      attempt: async (step, outputs) => {
        seen[step.id] = Object.keys(outputs).sort();
        const n = (k: string) => Number(outputs[k] ?? 0);
        const output =
          step.id === "a" ? 1 : step.id === "b" ? n("a") * 10 : step.id === "c" ? n("a") + 5 : n("b") + n("c");
        return { output };
      },
    });
    assert.deepEqual(res, { outcome: "completed", outputs: { a: 1, b: 10, c: 6, d: 16 } });
    assert.deepEqual(seen, { a: [], b: ["a"], c: ["a"], d: ["a", "b", "c"] });
    assert.ok(log.indexOf("started d 1") > log.indexOf("completed b"));
    assert.ok(log.indexOf("started d 1") > log.indexOf("completed c"));
    assert.ok(log.indexOf("started b 1") > log.indexOf("completed a"));
  });

  test("independent steps run together, never more than maxParallel", async () => {
    const gates = new Map<string, ReturnType<typeof deferred<ExecResult>>>();
    let inFlight = 0;
    let most = 0;
    const run = runPlan({
      plan: plan([["a"], ["b"], ["c"], ["d"], ["e"]], 2, "e"),
      done: {},
      cancel: new Cancellation(),
      hooks: recorder().hooks,
      attempt: async (step) => {
        inFlight++;
        most = Math.max(most, inFlight);
        const g = deferred<ExecResult>();
        gates.set(step.id, g);
        try {
          return await g.promise;
        } finally {
          inFlight--;
        }
      },
    });
    // Release one step at a time, in whatever order they started; bounded by the step count.
    for (let released = 0; released < 5; released++) {
      await until(() => [...gates.values()].some((g) => g !== undefined));
      assert.ok(inFlight <= 2);
      const [id, g] = [...gates.entries()][0]!;
      gates.delete(id);
      g.resolve({ output: id });
    }
    const res = await run;
    assert.equal(res.outcome, "completed");
    assert.equal(most, 2);
    assert.deepEqual(res.outputs, { a: "a", b: "b", c: "c", d: "d", e: "e" });
  });

  test("retries wait 1 s, 2 s, 4 s by default, then the step fails", async () => {
    mock.timers.enable({ apis: ["setTimeout"] });
    try {
      const { hooks, log } = recorder();
      const delays: number[] = [];
      const res = await runPlan({
        plan: plan([["flaky"]]),
        done: {},
        cancel: new Cancellation(),
        hooks: hooks.addHandler("stepRetry", (_s, _a, _e, d) => {
          delays.push(d);
          // The runner waits right after this hook: let the mocked clock pass that wait.
          setImmediate(() => mock.timers.tick(d));
        }),
        attempt: async () => {
          throw new ExecError("timeout", "too slow", true);
        },
      });
      assert.deepEqual(delays, [1000, 2000, 4000]);
      assert.deepEqual(log, [
        "started flaky 1",
        "retry flaky 2 1000 timeout",
        "started flaky 2",
        "retry flaky 3 2000 timeout",
        "started flaky 3",
        "retry flaky 4 4000 timeout",
        "started flaky 4",
        "failed flaky too slow",
      ]);
      assert.equal(res.outcome, "failed");
      assert.equal(res.failedStep, "flaky");
      assert.equal(res.error, "too slow");
    } finally {
      mock.timers.reset();
    }
  });

  test("retryBaseMs sets the first delay; a step's own retry count is kept; success ends the retries", async () => {
    const { hooks, log } = recorder();
    let calls = 0;
    const res = await runPlan({
      plan: plan([["once", [], 1], ["twice"]]),
      done: {},
      cancel: new Cancellation(),
      hooks,
      retryBaseMs: 5,
      attempt: async (step) => {
        calls++;
        if (step.id === "once") throw new ExecError("http_status", "503", true);
        if (log.filter((l) => l.startsWith("started twice")).length < 3)
          throw new ExecError("exit_code", "exit 75", true);
        return { output: "ok" };
      },
    });
    assert.equal(res.outcome, "failed");
    assert.equal(res.failedStep, "once");
    assert.deepEqual(res.outputs, { twice: "ok" });
    assert.deepEqual(
      log.filter((l) => l.startsWith("retry")),
      ["retry once 2 5 http_status", "retry twice 2 5 exit_code", "retry twice 3 10 exit_code"],
    );
    assert.equal(calls, 5);
  });

  test("a failure that is not retryable (or not an ExecError) is not retried", async () => {
    const { hooks, log } = recorder();
    const res = await runPlan({
      plan: plan([["fatal"], ["thrown"]]),
      done: {},
      cancel: new Cancellation(),
      hooks,
      retryBaseMs: 1,
      attempt: async (step) => {
        if (step.id === "fatal") throw new ExecError("exit_code", "exit 3", false);
        throw new Error("a bug");
      },
    });
    assert.deepEqual(
      log.filter((l) => l.startsWith("retry")),
      [],
    );
    assert.deepEqual(log.filter((l) => l.startsWith("started")).sort(), ["started fatal 1", "started thrown 1"]);
    assert.equal(res.outcome, "failed");
    assert.equal(res.failedStep, "fatal");
    assert.ok(log.includes("failed thrown a bug"));
  });

  test("a failed step skips its dependants (and theirs); an independent branch finishes", async () => {
    const { hooks, log } = recorder();
    const branch = deferred<ExecResult>();
    const run = runPlan({
      plan: plan(
        [["bad"], ["child", ["bad"]], ["grandchild", ["child"]], ["other"], ["after-other", ["other"]]],
        4,
        "after-other",
      ),
      done: {},
      cancel: new Cancellation(),
      hooks,
      attempt: async (step) => {
        if (step.id === "bad") throw new ExecError("exit_code", "exited with code 3", false);
        if (step.id === "other") return branch.promise;
        return { output: step.id };
      },
    });
    // The branch is still running when its sibling has failed and the dependants are skipped.
    await until(() => log.includes("skipped grandchild (child was skipped)"));
    assert.ok(log.includes("skipped child (bad failed)"));
    assert.ok(!log.includes("completed other"));
    branch.resolve({ output: "branch" });
    const res = await run;
    assert.equal(res.outcome, "failed");
    assert.equal(res.failedStep, "bad");
    assert.equal(res.error, "exited with code 3");
    assert.deepEqual(res.outputs, { other: "branch", "after-other": "after-other" });
    assert.ok(!log.some((l) => l.startsWith("started child") || l.startsWith("started grandchild")));
  });

  test("a resumed plan does not run completed steps again; their outputs feed the rest", async () => {
    const ran: string[] = [];
    const res = await runPlan({
      plan: plan([["a"], ["b", ["a"]], ["c", ["b"]]]),
      done: { a: { v: 1 }, b: "from before" },
      cancel: new Cancellation(),
      hooks: recorder().hooks,
      attempt: async (step, outputs) => {
        ran.push(step.id);
        return { output: `${JSON.stringify(outputs.a)} ${String(outputs.b)}` };
      },
    });
    assert.deepEqual(ran, ["c"]);
    assert.deepEqual(res, {
      outcome: "completed",
      outputs: { a: { v: 1 }, b: "from before", c: '{"v":1} from before' },
    });
  });

  test("a cancellation stops running steps (back to pending) and starts no more", async () => {
    const { hooks, log } = recorder();
    const cancel = new Cancellation();
    const aborted: string[] = [];
    const run = runPlan({
      plan: plan([["slow"], ["next", ["slow"]], ["waiting"]], 4, "next"),
      done: {},
      cancel,
      hooks,
      retryBaseMs: 60_000,
      attempt: (step, _outputs, c) => {
        if (step.id === "waiting") return Promise.reject(new ExecError("timeout", "retry me", true));
        return new Promise<ExecResult>((_resolve, reject) => {
          c.onAbort(() => {
            aborted.push(step.id);
            reject(new ExecError("cancelled", "stopped"));
          });
        });
      },
    });
    // "waiting" now sits in a 60 s retry delay; "slow" runs.
    await until(() => log.includes("retry waiting 2 60000 timeout") && log.includes("started slow 1"));
    cancel.abort("stop");
    const res = await run;
    assert.equal(res.outcome, "stopped");
    assert.deepEqual(aborted, ["slow"]);
    assert.ok(log.includes("stopped slow"));
    assert.ok(log.includes("stopped waiting"));
    assert.ok(!log.some((l) => l.startsWith("started next") || l.startsWith("failed") || l.startsWith("completed")));
  });

  test("an already cancelled plan starts nothing", async () => {
    const cancel = new Cancellation();
    cancel.abort();
    let called = false;
    const res = await runPlan({
      plan: plan([["a"]]),
      done: {},
      cancel,
      hooks: recorder().hooks,
      attempt: async () => {
        called = true;
        return { output: 1 };
      },
    });
    assert.equal(res.outcome, "stopped");
    assert.equal(called, false);
  });
});
