/**
 * Runs end to end (src/workflows/systems/runner.ts, plan.ts, db.ts) with real processes — `node -e` scripts
 * via process.execPath and /bin/sh programs — a real node:http server on 127.0.0.1 for webhooks,
 * and a fake ModelCaller (the model kind's boundary) for `model` steps:
 * - a run is written `pending` before it starts; statuses, steps' status, output, attempts and
 *   timings are stored; events reach the bus in order, with stdout streamed as `run.output`;
 * - plans: independent steps run together (shown by processes that wait for each other's marker
 *   files) up to maxParallel, a diamond feeding outputs forward, retries for retryable failures
 *   only (exit codes, timeouts, 5xx), a failed step skipping its dependants while an independent
 *   branch finishes, nested systems;
 * - cancel (the whole process group, a backgrounded grandchild too, is gone), pause and resume
 *   (completed steps are not run again: counter files), cancelling a paused run, close() leaving
 *   runs `interrupted`, and a run left `running` by a bridge that was killed (a child process
 *   running a RunManager, SIGKILLed) found `interrupted` by recover(), not re-run, then resumed.
 * Every process group a test starts is SIGKILLed in `after` should a test fail half-way.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, afterEach, before, describe, test } from "node:test";
import type Database from "better-sqlite3";
import { pino } from "pino";
import { sqliteSqlOf } from "../../src/core/db/sql.js";
import { EventBus } from "../../src/ops/events/bus.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { openSystemsDb, RunStore, type RunRecord } from "../../src/workflows/systems/db.js";
import type { ModelCaller } from "../../src/workflows/systems/step-executor.js";
import { loadSystems } from "../../src/workflows/systems/library.js";
import { RunError, RunManager } from "../../src/workflows/systems/runner.js";
import { exited, groupAlive, killGroups } from "../helpers/process-groups.js";

const REPO = fileURLToPath(new URL("../..", import.meta.url));
const NODE = process.execPath;
const root = mkdtempSync(path.join(tmpdir(), "cb-runs-"));
/** Process groups and pids the tests start (from pid files), SIGKILLed in `after` whatever happened. */
const started: number[] = [];

let n = 0;
/** A fresh path under the test's temp folder. */
const fresh = (name: string) => path.join(root, `${n++}-${name}`);

// ---------------------------------------------------------------------------------------------
// programs (argv arrays, never a shell built from input)

/** Adds one to the counter file $1, then prints $2 (or the new count). */
const COUNT = (file: string, text?: string) => [
  NODE,
  "-e",
  "const fs=require('fs');const f=process.argv[1];const n=(fs.existsSync(f)?Number(fs.readFileSync(f,'utf8')):0)+1;fs.writeFileSync(f,String(n));console.log(process.argv[2]??String(n))",
  file,
  ...(text === undefined ? [] : [text]),
];

/** Counts itself in $1; exits with code $3 while the count is below $2, then prints "ok after N". */
const FLAKY = (file: string, failures: number, code: number) => [
  NODE,
  "-e",
  "const fs=require('fs');const f=process.argv[1];const n=(fs.existsSync(f)?Number(fs.readFileSync(f,'utf8')):0)+1;fs.writeFileSync(f,String(n));" +
    "if(n<=Number(process.argv[2])){process.stderr.write('not yet '+n);process.exit(Number(process.argv[3]))}console.log('ok after '+n)",
  file,
  String(failures),
  String(code),
];

/** Writes its marker $1, then waits (at most 10 s) for every other marker; prints "met" or exits 3. */
const RENDEZVOUS = (mine: string, others: string[]) => [
  NODE,
  "-e",
  "const fs=require('fs');const [mine,...others]=process.argv.slice(1);fs.writeFileSync(mine,'');const end=Date.now()+10000;" +
    "const t=setInterval(()=>{if(others.every(o=>fs.existsSync(o))){clearInterval(t);console.log('met')}else if(Date.now()>end){clearInterval(t);process.exit(3)}},20)",
  mine,
  ...others,
];

/** Waits (at most 10 s) for the file $1, then prints $2; exits 3 if it never came. */
const WAIT_FOR = (file: string, text: string) => [
  NODE,
  "-e",
  "const fs=require('fs');const end=Date.now()+10000;const t=setInterval(()=>{if(fs.existsSync(process.argv[1])){clearInterval(t);console.log(process.argv[2])}else if(Date.now()>end){clearInterval(t);process.exit(3)}},20)",
  file,
  text,
];

/**
 * /bin/sh: counts itself in $3; if the file $2 exists prints "finished"; else writes its pid (the
 * group's id) and a backgrounded sleep's pid to $1, says "started" and waits for the sleep.
 */
const LONG = (pidFile: string, goFile: string, counter: string) => [
  "/bin/sh",
  "-c",
  'n=$(cat "$3" 2>/dev/null || echo 0); echo $((n+1)) > "$3"; if [ -f "$2" ]; then echo finished; exit 0; fi; echo $$ > "$1"; sleep 30 & echo $! >> "$1"; echo started; wait',
  "sh",
  pidFile,
  goFile,
  counter,
];

const count = (file: string) => (existsSync(file) ? Number(readFileSync(file, "utf8").trim()) : 0);

/** The group id and the grandchild's pid a LONG program wrote (kept for the final sweep). */
function pidsOf(pidFile: string): { pgid: number; grandchild: number } {
  const [pgid, grandchild] = readFileSync(pidFile, "utf8").trim().split("\n").map(Number);
  assert.ok(pgid! > 0 && grandchild! > 0, `pid file ${pidFile}: ${readFileSync(pidFile, "utf8")}`);
  started.push(pgid!, grandchild!);
  return { pgid: pgid!, grandchild: grandchild! };
}

/** Poll `check` every 20 ms for at most `ms`. */
async function eventually(check: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (check()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function assertGone(p: { pgid: number; grandchild: number }): Promise<void> {
  assert.ok(await eventually(() => !groupAlive(p.pgid)), `process group ${p.pgid} still running`);
  assert.ok(await eventually(() => exited(p.grandchild)), `grandchild ${p.grandchild} still running`);
}

// ---------------------------------------------------------------------------------------------
// harness

interface Harness {
  manager: RunManager;
  store: RunStore;
  bus: EventBus;
  /** Every event published, in order. */
  events: BridgeEvent[];
  db: Database.Database;
  dataDir: string;
  modelCalls: Array<{ model: string; prompt: string; system?: string }>;
}

const open: Harness[] = [];

/** A fake of the model boundary: streams "Answer: " and the prompt in two pieces, then done. */
function fakeModel(calls: Harness["modelCalls"]): ModelCaller {
  return async function* (req) {
    calls.push({ model: req.model, prompt: req.prompt, system: req.system });
    yield { type: "text", text: "Answer: " };
    yield { type: "text", text: req.prompt };
    yield { type: "done", finishReason: "stop" };
  };
}

async function harness(systems: unknown[], opts: { dbFile?: string } = {}): Promise<Harness> {
  const { library, problems } = await loadSystems({
    configSystems: systems,
    models: new Map([["m", { router: false }]]),
  });
  assert.deepEqual(problems, []);
  const db = openSystemsDb(opts.dbFile ?? ":memory:");
  const store = new RunStore(sqliteSqlOf(db));
  const bus = new EventBus();
  const events: BridgeEvent[] = [];
  bus.on((e) => events.push(e));
  const modelCalls: Harness["modelCalls"] = [];
  const dataDir = fresh("data");
  const manager = new RunManager({
    store,
    library,
    bus,
    callModel: fakeModel(modelCalls),
    dataDir,
    log: pino({ level: "silent" }),
    retryBaseMs: 20,
  });
  const h = { manager, store, bus, events, db, dataDir, modelCalls };
  open.push(h);
  return h;
}

/** The first event matching `pred` from now on (rejects after `ms`). */
function nextEvent(bus: EventBus, pred: (e: BridgeEvent) => boolean, ms = 15_000): Promise<BridgeEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`event not seen within ${ms} ms`));
    }, ms);
    const off = bus.on((e) => {
      if (!pred(e)) return;
      clearTimeout(timer);
      off();
      resolve(e);
    });
  });
}

const outputSaid = (runId: string, text: string, step?: string) => (e: BridgeEvent) =>
  e.type === "run.output" && e.runId === runId && e.text.includes(text) && (step === undefined || e.step === step);

const stepOf = (rec: RunRecord, id: string) => {
  const s = rec.steps.find((x) => x.id === id);
  assert.ok(s, `no step ${id} in ${JSON.stringify(rec.steps)}`);
  return s;
};

const eventsOf = (h: Harness, runId: string) => h.events.filter((e) => "runId" in e && e.runId === runId);

async function rejectsWith(p: Promise<unknown>, code: RunError["code"]): Promise<void> {
  await assert.rejects(p, (err: unknown) => err instanceof RunError && err.code === code);
}

const cmd = (id: string, argv: string[], over: Record<string, unknown> = {}) => ({
  id,
  run: { kind: "command", argv, timeoutSeconds: 20, ...over },
});
const step = (id: string, argv: string[], dependsOn: string[] = [], over: Record<string, unknown> = {}) => ({
  id,
  uses: "command",
  dependsOn,
  with: { argv, timeoutSeconds: 20, ...over },
});
const plan = (id: string, steps: unknown[], over: Record<string, unknown> = {}) => ({
  id,
  run: { kind: "plan", steps, ...over },
});

// ---------------------------------------------------------------------------------------------
// webhook server

let server: Server;
let base: string;
let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.end();
const hits: string[] = [];

before(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      hits.push(req.url ?? "");
      handler(req, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.manager.close();
    h.db.close();
  }
});

after(async () => {
  killGroups(started);
  for (const pid of started) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      /* gone, as it should be */
    }
  }
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(root, { recursive: true, force: true });
});

const T = { timeout: 60_000 };

// ---------------------------------------------------------------------------------------------

describe("a run's record and events", T, () => {
  test("written pending before it starts; completed with output, attempts and timings; events in order", async () => {
    const h = await harness([cmd("hello", [NODE, "-e", "console.log('hi'); console.log('there')"])]);
    const rec = await h.manager.start({
      system: "hello",
      inputs: { x: 1 },
      conversation: "conv-1",
      origin: "chat",
      messageKey: "msg-1",
    });
    // Written before anything ran: this is what a crash right now would leave.
    assert.equal(rec.status, "pending");
    assert.equal(rec.startedAt, undefined);
    assert.deepEqual(rec.steps, [
      {
        id: "run",
        status: "pending",
        attempts: 0,
        startedAt: undefined,
        endedAt: undefined,
        output: undefined,
        error: undefined,
      },
    ]);
    assert.equal((await h.store.get(rec.id))!.status, "pending");
    assert.equal((await h.store.byMessage("conv-1", "msg-1"))!.id, rec.id);
    assert.equal(h.manager.isLive(rec.id), true);

    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "completed");
    assert.equal(end.output, "hi\nthere");
    assert.deepEqual(end.inputs, { x: 1 });
    assert.equal(end.origin, "chat");
    assert.equal(end.conversation, "conv-1");
    assert.ok(end.startedAt! >= end.createdAt && end.endedAt! >= end.startedAt!);
    const s = stepOf(end, "run");
    assert.equal(s.status, "completed");
    assert.equal(s.attempts, 1);
    assert.equal(s.output, "hi\nthere");
    assert.ok(s.startedAt! >= end.startedAt! && s.endedAt! >= s.startedAt!);
    assert.equal(h.manager.isLive(rec.id), false);
    assert.deepEqual(await h.store.get(rec.id), end);

    const seen = eventsOf(h, rec.id).map((e) => (e.type === "run.output" ? `${e.type}:${e.step}:${e.text}` : e.type));
    assert.deepEqual(seen, [
      "run.started",
      "step.started",
      "run.output:run:hi\n",
      "run.output:run:there\n",
      "step.completed",
      "run.completed",
    ]);
    const first = eventsOf(h, rec.id)[0]!;
    assert.deepEqual(
      { ...first, at: 0 },
      { type: "run.started", runId: rec.id, system: "hello", origin: "chat", conversation: "conv-1", at: 0 },
    );
  });

  test("unknown systems and runs are refused", async () => {
    const h = await harness([cmd("hello", [NODE, "-e", ""])]);
    await rejectsWith(h.manager.start({ system: "nope", inputs: {}, origin: "cli" }), "unknown_system");
    await rejectsWith(h.manager.resume("run-nope"), "not_found");
    await rejectsWith(h.manager.cancel("run-nope"), "not_found");
    await rejectsWith(h.manager.pause("run-nope"), "not_found");
    await rejectsWith(h.manager.wait("run-nope"), "not_found");
    const rec = await h.manager.start({ system: "hello", inputs: {}, origin: "cli" });
    await h.manager.wait(rec.id);
    // Ended: it can be neither paused, resumed nor cancelled.
    await rejectsWith(h.manager.pause(rec.id), "conflict");
    await rejectsWith(h.manager.resume(rec.id), "conflict");
    await rejectsWith(h.manager.cancel(rec.id), "conflict");
  });

  test("inputs and the run id reach the command; a model step gets its rendered prompt and streams", async () => {
    const h = await harness([
      {
        id: "ask",
        inputs: { type: "object", properties: { who: { type: "string" } } },
        run: {
          kind: "plan",
          steps: [
            step("facts", [
              NODE,
              "-e",
              "console.log(JSON.stringify({name: process.argv[1], run: process.argv[2]}))",
              "${inputs.who}",
              "${run.id}",
            ]),
            {
              id: "talk",
              uses: "model",
              dependsOn: ["facts"],
              with: { model: "m", prompt: "Greet ${steps.facts.output.name}", system: "be brief" },
            },
          ],
        },
      },
    ]);
    const rec = await h.manager.start({ system: "ask", inputs: { who: "Ada" }, origin: "http" });
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "completed");
    assert.deepEqual(JSON.parse(stepOf(end, "facts").output as string), { name: "Ada", run: rec.id });
    assert.deepEqual(h.modelCalls, [{ model: "m", prompt: "Greet Ada", system: "be brief" }]);
    assert.equal(end.output, "Answer: Greet Ada");
    const streamed = eventsOf(h, rec.id).flatMap((e) => (e.type === "run.output" && e.step === "talk" ? [e.text] : []));
    assert.deepEqual(streamed, ["Answer: ", "Greet Ada"]);
  });
});

describe("plans", T, () => {
  test("independent steps run at the same time (each waits for the others' marker files)", async () => {
    const [a, b, c] = [fresh("mark-a"), fresh("mark-b"), fresh("mark-c")];
    const h = await harness([
      plan(
        "together",
        [
          step("a", RENDEZVOUS(a, [b, c])),
          step("b", RENDEZVOUS(b, [a, c])),
          step("c", RENDEZVOUS(c, [a, b])),
          step("all", [NODE, "-e", "console.log('done')"], ["a", "b", "c"]),
        ],
        { maxParallel: 3 },
      ),
    ]);
    const end = await h.manager.wait((await h.manager.start({ system: "together", inputs: {}, origin: "cli" })).id);
    assert.equal(end.status, "completed", JSON.stringify(end));
    for (const id of ["a", "b", "c"]) assert.equal(stepOf(end, id).output, "met");
    assert.equal(end.output, "done");
  });

  test("never more than maxParallel steps at once", async () => {
    const live = fresh("live");
    // Each step notes itself in `live`, prints how many are there, waits a little, then leaves.
    const script =
      "const fs=require('fs'),p=require('path');const d=process.argv[1];fs.mkdirSync(d,{recursive:true});const me=p.join(d,process.argv[2]);fs.writeFileSync(me,'');" +
      "console.log(fs.readdirSync(d).length);setTimeout(()=>fs.rmSync(me),150)";
    const ids = ["s1", "s2", "s3", "s4", "s5"];
    const h = await harness([
      plan(
        "capped",
        ids.map((id) => step(id, [NODE, "-e", script, live, id])),
        { maxParallel: 2 },
      ),
    ]);
    const rec = await h.manager.start({ system: "capped", inputs: {}, origin: "cli" });
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "completed");
    for (const id of ids)
      assert.ok(Number(stepOf(end, id).output) <= 2, `${id} saw ${String(stepOf(end, id).output)} running`);
    // The manager's own view: steps in flight between step.started and step.completed.
    let inFlight = 0;
    let most = 0;
    for (const e of eventsOf(h, rec.id)) {
      if (e.type === "step.started") most = Math.max(most, ++inFlight);
      if (e.type === "step.completed") inFlight--;
    }
    assert.equal(most, 2);
  });

  test("a diamond: d uses b's and c's outputs (and a's, transitively)", async () => {
    const h = await harness([
      plan("diamond", [
        step("a", [NODE, "-e", "console.log(JSON.stringify({n: 4, name: 'x'}))"]),
        step("b", [NODE, "-e", "console.log(Number(process.argv[1]) * 10)", "${steps.a.output.n}"], ["a"]),
        step("c", [NODE, "-e", "console.log(process.argv[1] + '!')", "${steps.a.output.name}"], ["a"]),
        step(
          "d",
          [
            NODE,
            "-e",
            "console.log(process.argv.slice(1).join('|'))",
            "${steps.b.output}",
            "${steps.c.output}",
            "${steps.a.output.n}",
          ],
          ["b", "c"],
        ),
      ]),
    ]);
    const rec = await h.manager.start({ system: "diamond", inputs: {}, origin: "cli" });
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "completed");
    assert.equal(end.output, "40|x!|4");
    assert.deepEqual(
      end.steps.map((s) => [s.id, s.status, s.output]),
      [
        ["a", "completed", '{"n":4,"name":"x"}'],
        ["b", "completed", "40"],
        ["c", "completed", "x!"],
        ["d", "completed", "40|x!|4"],
      ],
    );
    const order = eventsOf(h, rec.id).flatMap((e) =>
      e.type === "step.started" || e.type === "step.completed" ? [`${e.type}:${e.step}`] : [],
    );
    const at = (x: string) => order.indexOf(x);
    assert.ok(at("step.started:b") > at("step.completed:a") && at("step.started:c") > at("step.completed:a"));
    assert.ok(at("step.started:d") > at("step.completed:b") && at("step.started:d") > at("step.completed:c"));
  });

  test("a flaky step (retryable exit code) succeeds on retry; the attempts are recorded", async () => {
    const counter = fresh("flaky");
    const h = await harness([plan("flaky", [step("s", FLAKY(counter, 2, 75), [], { retryExitCodes: [75] })])]);
    const rec = await h.manager.start({ system: "flaky", inputs: {}, origin: "cli" });
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "completed");
    assert.equal(end.output, "ok after 3");
    assert.equal(count(counter), 3);
    assert.equal(stepOf(end, "s").attempts, 3);
    const retries = eventsOf(h, rec.id).flatMap((e) =>
      e.type === "step.retry" ? [[e.attempt, e.delayMs, e.error] as const] : [],
    );
    assert.deepEqual(retries, [
      [2, 20, "exited with code 75: not yet 1"],
      [3, 40, "exited with code 75: not yet 2"],
    ]);
    assert.deepEqual(
      eventsOf(h, rec.id).flatMap((e) => (e.type === "step.started" ? [e.attempt] : [])),
      [1, 2, 3],
    );
  });

  test("a step that times out is retried; 3 retries at most, then the run fails", async () => {
    const counter = fresh("slow-first");
    const slowOnce =
      "const fs=require('fs');const f=process.argv[1];const n=(fs.existsSync(f)?Number(fs.readFileSync(f,'utf8')):0)+1;fs.writeFileSync(f,String(n));" +
      "if(n===1)setTimeout(()=>{},30000);else console.log('second try')";
    const always = fresh("always");
    const h = await harness([
      cmd("slow", [NODE, "-e", slowOnce, counter], { timeoutSeconds: 1.5 }),
      cmd("broken", FLAKY(always, 99, 75), { retryExitCodes: [75] }),
    ]);
    const slow = await h.manager.wait((await h.manager.start({ system: "slow", inputs: {}, origin: "cli" })).id);
    assert.equal(slow.status, "completed");
    assert.equal(slow.output, "second try");
    // 2 attempts; more only on a machine so loaded that starting node takes longer than the limit.
    assert.ok(stepOf(slow, "run").attempts >= 2);
    assert.equal(stepOf(slow, "run").attempts, count(counter));
    const retry = eventsOf(h, slow.id).find((e) => e.type === "step.retry");
    assert.ok(retry?.type === "step.retry" && /did not finish within 1.5s/.test(retry.error), JSON.stringify(retry));

    const broken = await h.manager.wait((await h.manager.start({ system: "broken", inputs: {}, origin: "cli" })).id);
    assert.equal(broken.status, "failed");
    assert.equal(count(always), 4, "the first attempt and 3 retries");
    assert.equal(stepOf(broken, "run").attempts, 4);
    assert.equal(stepOf(broken, "run").status, "failed");
    assert.match(stepOf(broken, "run").error!, /exited with code 75/);
  });

  test("a failure that is not retryable is not retried; the run fails naming the step", async () => {
    const counter = fresh("fatal");
    const h = await harness([
      plan("fatal", [
        step("ok", [NODE, "-e", "console.log(1)"]),
        step("bad", FLAKY(counter, 99, 3), ["ok"], { retryExitCodes: [75] }),
      ]),
    ]);
    const rec = await h.manager.start({ system: "fatal", inputs: {}, origin: "cli" });
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "failed");
    assert.equal(end.failedStep, "bad");
    assert.match(end.error!, /^exited with code 3: not yet 1/);
    assert.equal(count(counter), 1);
    assert.equal(stepOf(end, "bad").attempts, 1);
    assert.equal(eventsOf(h, rec.id).filter((e) => e.type === "step.retry").length, 0);
    const failed = eventsOf(h, rec.id).at(-1)!;
    assert.equal(failed.type, "run.failed");
    assert.equal(failed.type === "run.failed" && failed.step, "bad");
  });

  test("a failed step skips its dependants while an independent branch finishes", async () => {
    const go = fresh("go");
    const h = await harness([
      plan(
        "branches",
        [
          step("bad", [NODE, "-e", "process.exit(3)"]),
          step("child", [NODE, "-e", "console.log('never')"], ["bad"]),
          step("grandchild", [NODE, "-e", "console.log('never')"], ["child"]),
          // Still running when `bad` fails: it waits for the file the test writes on seeing that.
          step("branch", WAIT_FOR(go, "branch done")),
          step(
            "after-branch",
            [NODE, "-e", "console.log(process.argv[1] + ' and after')", "${steps.branch.output}"],
            ["branch"],
          ),
        ],
        { output: "after-branch" },
      ),
    ]);
    h.bus.on((e) => {
      if (e.type === "step.failed" && e.step === "bad") writeFileSync(go, "");
    });
    const rec = await h.manager.start({ system: "branches", inputs: {}, origin: "cli" });
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "failed");
    assert.equal(end.failedStep, "bad");
    assert.deepEqual(
      end.steps.map((s) => [s.id, s.status]),
      [
        ["bad", "failed"],
        ["child", "skipped"],
        ["grandchild", "skipped"],
        ["branch", "completed"],
        ["after-branch", "completed"],
      ],
    );
    assert.equal(stepOf(end, "child").error, "bad failed");
    assert.equal(stepOf(end, "grandchild").error, "child was skipped");
    assert.equal(stepOf(end, "after-branch").output, "branch done and after");
    const types = eventsOf(h, rec.id).map((e) => e.type);
    assert.ok(
      types.indexOf("step.failed") < types.lastIndexOf("step.completed"),
      "the branch finished after the failure",
    );
  });

  test("a webhook answering 503 is retried; its JSON output feeds the next step; a 404 is not retried", async () => {
    let calls = 0;
    handler = (req, res) => {
      if (req.url === "/missing") {
        res.writeHead(404).end("no such thing");
        return;
      }
      calls++;
      if (calls === 1) res.writeHead(503).end("busy");
      else
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ title: "Report", n: calls }));
    };
    hits.length = 0;
    const h = await harness([
      plan("hooked", [
        { id: "fetch", uses: "webhook", with: { url: `${base}/items`, timeoutSeconds: 5 } },
        step(
          "show",
          [
            NODE,
            "-e",
            "console.log(process.argv[1] + ' #' + process.argv[2])",
            "${steps.fetch.output.title}",
            "${steps.fetch.output.n}",
          ],
          ["fetch"],
        ),
      ]),
      { id: "missing", run: { kind: "webhook", url: `${base}/missing`, timeoutSeconds: 5 } },
    ]);
    const end = await h.manager.wait((await h.manager.start({ system: "hooked", inputs: {}, origin: "cli" })).id);
    assert.equal(end.status, "completed");
    assert.equal(end.output, "Report #2");
    assert.deepEqual(stepOf(end, "fetch").output, { title: "Report", n: 2 });
    assert.equal(stepOf(end, "fetch").attempts, 2);

    const missing = await h.manager.wait((await h.manager.start({ system: "missing", inputs: {}, origin: "cli" })).id);
    assert.equal(missing.status, "failed");
    assert.match(missing.error!, /webhook answered 404/);
    assert.equal(stepOf(missing, "run").attempts, 1);
    assert.deepEqual(hits, ["/items", "/items", "/missing"]);
  });

  test("nested systems run with their `with` inputs and their output feeds the next step", async () => {
    const h = await harness([
      {
        id: "greet",
        inputs: { type: "object", properties: { name: { type: "string" } }, required: ["name"] },
        run: {
          kind: "command",
          argv: [NODE, "-e", "console.log('Hello ' + process.argv[1])", "${inputs.name}"],
          timeoutSeconds: 20,
        },
      },
      {
        id: "summarise",
        inputs: { type: "object", properties: { text: { type: "string" } } },
        run: {
          kind: "plan",
          steps: [{ id: "ask", uses: "model", with: { model: "m", prompt: "Shorten: ${inputs.text}" } }],
        },
      },
      {
        id: "shout",
        inputs: { type: "object", properties: { who: { type: "string" } } },
        run: {
          kind: "plan",
          steps: [
            { id: "g", uses: "greet", with: { name: "${inputs.who}" } },
            step("up", [NODE, "-e", "console.log(process.argv[1].toUpperCase())", "${steps.g.output}"], ["g"]),
            { id: "sum", uses: "summarise", dependsOn: ["up"], with: { text: "${steps.up.output}" } },
          ],
        },
      },
    ]);
    const rec = await h.manager.start({ system: "shout", inputs: { who: "Ada" }, origin: "cli" });
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "completed", JSON.stringify(end));
    assert.deepEqual(
      end.steps.map((s) => [s.id, s.status, s.output]),
      [
        ["g", "completed", "Hello Ada"],
        ["up", "completed", "HELLO ADA"],
        ["sum", "completed", "Answer: Shorten: HELLO ADA"],
      ],
    );
    assert.equal(end.output, "Answer: Shorten: HELLO ADA");
    assert.deepEqual(
      h.modelCalls.map((c) => c.prompt),
      ["Shorten: HELLO ADA"],
    );
    const names = eventsOf(h, rec.id).flatMap((e) =>
      e.type === "step.started" || e.type === "step.completed" || e.type === "run.output"
        ? [`${e.type}:${e.step}`]
        : [],
    );
    assert.deepEqual(names, [
      "step.started:g",
      "step.started:g/run",
      "run.output:g/run",
      "step.completed:g/run",
      "step.completed:g",
      "step.started:up",
      "run.output:up",
      "step.completed:up",
      "step.started:sum",
      "step.started:sum/ask",
      "run.output:sum/ask",
      "run.output:sum/ask",
      "step.completed:sum/ask",
      "step.completed:sum",
    ]);
  });

  test("a failing nested system fails the step that uses it, once (no retry of the whole)", async () => {
    const counter = fresh("nested-fail");
    const h = await harness([cmd("inner", FLAKY(counter, 99, 3)), plan("outer", [{ id: "x", uses: "inner" }])]);
    const end = await h.manager.wait((await h.manager.start({ system: "outer", inputs: {}, origin: "cli" })).id);
    assert.equal(end.status, "failed");
    assert.equal(end.failedStep, "x");
    assert.match(end.error!, /system inner failed at step run: exited with code 3/);
    assert.equal(count(counter), 1);
  });
});

describe("stopping runs", T, () => {
  test("cancel while a long command runs: the whole process group is gone, the run cancelled", async () => {
    const pidFile = fresh("pids");
    const h = await harness([cmd("long", LONG(pidFile, fresh("never"), fresh("count")))]);
    const rec = await h.manager.start({ system: "long", inputs: {}, origin: "chat", conversation: "c" });
    await nextEvent(h.bus, outputSaid(rec.id, "started"));
    const pids = pidsOf(pidFile);
    assert.ok(groupAlive(pids.pgid));
    assert.equal((await h.store.get(rec.id))!.status, "running");
    assert.equal(stepOf((await h.store.get(rec.id))!, "run").status, "running");

    const end = await h.manager.cancel(rec.id);
    assert.equal(end.status, "cancelled");
    assert.equal(end.error, "cancelled");
    assert.equal(stepOf(end, "run").status, "pending");
    await assertGone(pids);
    assert.equal(h.manager.isLive(rec.id), false);
    assert.equal(eventsOf(h, rec.id).at(-1)!.type, "run.cancelled");
    // Ended for good.
    await rejectsWith(h.manager.resume(rec.id), "conflict");
    await rejectsWith(h.manager.cancel(rec.id), "conflict");
  });

  test("pause while a step runs, then resume: completed steps are not run again", async () => {
    const [pidFile, go, first, second] = [fresh("pids"), fresh("go"), fresh("first"), fresh("second")];
    const h = await harness([
      plan("two", [step("a", COUNT(first, "A done")), step("b", LONG(pidFile, go, second), ["a"])]),
    ]);
    const rec = await h.manager.start({ system: "two", inputs: {}, origin: "cli" });
    await nextEvent(h.bus, outputSaid(rec.id, "started", "b"));
    const pids = pidsOf(pidFile);

    const paused = await h.manager.pause(rec.id);
    assert.equal(paused.status, "paused");
    assert.deepEqual(
      paused.steps.map((s) => [s.id, s.status]),
      [
        ["a", "completed"],
        ["b", "pending"],
      ],
    );
    await assertGone(pids);
    assert.equal(h.manager.isLive(rec.id), false);
    assert.equal(eventsOf(h, rec.id).at(-1)!.type, "run.paused");
    await rejectsWith(h.manager.pause(rec.id), "conflict");

    writeFileSync(go, "");
    const resumed = await h.manager.resume(rec.id);
    assert.equal(resumed.id, rec.id);
    await rejectsWith(h.manager.resume(rec.id), "conflict"); // already going again
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "completed");
    assert.equal(end.output, "finished");
    assert.equal(count(first), 1, "a ran once");
    assert.equal(count(second), 2, "b ran before the pause and after the resume");
    assert.equal(stepOf(end, "a").output, "A done");
    assert.equal(stepOf(end, "a").attempts, 1);
    const starts = eventsOf(h, rec.id).flatMap((e) => (e.type === "step.started" ? [e.step] : []));
    assert.deepEqual(starts, ["a", "b", "b"]);
    assert.equal(eventsOf(h, rec.id).filter((e) => e.type === "run.started").length, 2);
  });

  test("cancelling a paused run", async () => {
    const [pidFile, first] = [fresh("pids"), fresh("first")];
    const h = await harness([
      plan("two", [step("a", COUNT(first)), step("b", LONG(pidFile, fresh("never"), fresh("second")), ["a"])]),
    ]);
    const rec = await h.manager.start({ system: "two", inputs: {}, origin: "cli" });
    await nextEvent(h.bus, outputSaid(rec.id, "started", "b"));
    const pids = pidsOf(pidFile);
    assert.equal((await h.manager.pause(rec.id)).status, "paused");
    await assertGone(pids);
    const end = await h.manager.cancel(rec.id);
    assert.equal(end.status, "cancelled");
    assert.ok(end.endedAt !== undefined);
    assert.deepEqual(
      end.steps.map((s) => [s.id, s.status]),
      [
        ["a", "completed"],
        ["b", "pending"],
      ],
    );
    assert.equal(eventsOf(h, rec.id).at(-1)!.type, "run.cancelled");
    await rejectsWith(h.manager.resume(rec.id), "conflict");
    assert.equal(count(first), 1);
  });

  test("a failed run can be resumed once the cause is fixed; completed steps are kept", async () => {
    const [first, fixed] = [fresh("first"), fresh("fixed")];
    const h = await harness([
      plan("fixable", [
        step("a", COUNT(first, "A")),
        step(
          "b",
          [
            NODE,
            "-e",
            "const fs=require('fs');if(!fs.existsSync(process.argv[1]))process.exit(4);console.log('fixed')",
            fixed,
          ],
          ["a"],
        ),
      ]),
    ]);
    const rec = await h.manager.start({ system: "fixable", inputs: {}, origin: "cli" });
    const failed = await h.manager.wait(rec.id);
    assert.equal(failed.status, "failed");
    assert.equal(failed.failedStep, "b");
    writeFileSync(fixed, "");
    await h.manager.resume(rec.id);
    const end = await h.manager.wait(rec.id);
    assert.equal(end.status, "completed");
    assert.equal(end.output, "fixed");
    assert.equal(end.error, undefined);
    assert.equal(end.failedStep, undefined);
    assert.equal(count(first), 1);
  });

  test("close() ends running runs as interrupted (group gone) and refuses new ones", async () => {
    const pidFile = fresh("pids");
    const h = await harness([cmd("long", LONG(pidFile, fresh("never"), fresh("count")))]);
    const rec = await h.manager.start({ system: "long", inputs: {}, origin: "chat", conversation: "c" });
    await nextEvent(h.bus, outputSaid(rec.id, "started"));
    const pids = pidsOf(pidFile);
    await h.manager.close();
    const end = (await h.store.get(rec.id))!;
    assert.equal(end.status, "interrupted");
    assert.equal(end.detached, true);
    assert.equal(stepOf(end, "run").status, "pending");
    await assertGone(pids);
    assert.equal(eventsOf(h, rec.id).at(-1)!.type, "run.interrupted");
    await rejectsWith(h.manager.start({ system: "long", inputs: {}, origin: "cli" }), "conflict");
    await rejectsWith(h.manager.resume(rec.id), "conflict");
  });
});

describe("runs left by a bridge that stopped", T, () => {
  test("a run found running or pending at start-up is interrupted, not re-run (store-marked)", async () => {
    const dbFile = path.join(fresh("db"), "systems.db");
    const counter = fresh("count");
    const h1 = await harness([cmd("c", COUNT(counter))], { dbFile });
    // As a bridge that died would leave them: one running (a step running), one never started.
    await h1.store.create({ id: "run-running", system: "c", inputs: {}, origin: "cli", steps: ["run"] });
    await h1.store.markStarted("run-running");
    await h1.store.stepStarted("run-running", "run", 1);
    await h1.store.create({ id: "run-pending", system: "c", inputs: {}, origin: "cli", steps: ["run"] });
    await h1.store.create({ id: "run-paused", system: "c", inputs: {}, origin: "cli", steps: ["run"] });
    await h1.store.setStatus("run-paused", "paused");

    const h2 = await harness([cmd("c", COUNT(counter))], { dbFile });
    assert.deepEqual((await h2.manager.recover()).sort(), ["run-pending", "run-running"]);
    for (const id of ["run-running", "run-pending"]) {
      const rec = (await h2.store.get(id))!;
      assert.equal(rec.status, "interrupted");
      assert.equal(rec.detached, true);
      assert.match(rec.error!, /bridge stopped/);
      assert.equal(stepOf(rec, "run").status, "pending");
    }
    assert.equal((await h2.store.get("run-paused"))!.status, "paused");
    assert.deepEqual(
      h2.events.map((e) => e.type),
      ["run.interrupted", "run.interrupted"],
    );
    assert.deepEqual(await h2.manager.recover(), []);
    assert.equal(count(counter), 0);
    assert.equal(h2.manager.isLive("run-running"), false);

    // Cancelling an interrupted run is allowed; resuming another runs it.
    assert.equal((await h2.manager.cancel("run-pending")).status, "cancelled");
    await h2.manager.resume("run-running");
    assert.equal((await h2.manager.wait("run-running")).status, "completed");
    assert.equal(count(counter), 1);
  });

  test("a bridge killed mid-run (SIGKILL): recover() finds the run interrupted, never re-runs it, resume finishes it", async () => {
    const dir = fresh("crash");
    const dbFile = path.join(dir, "systems.db");
    const [pidFile, go, first, second] = [fresh("pids"), fresh("go"), fresh("first"), fresh("second")];
    const systems = [plan("crashy", [step("a", COUNT(first, "A done")), step("b", LONG(pidFile, go, second), ["a"])])];
    // A bridge in a child process: a RunManager on `dbFile` that starts the run and says its id
    // once step b runs. It is SIGKILLed then, as a bridge dying under a run would be.
    const script = path.join(root, `bridge-${n++}.mts`);
    writeFileSync(
      script,
      `
import { createRequire } from "node:module";
import { EventBus } from ${JSON.stringify(path.join(REPO, "src/ops/events/bus.ts"))};
import { openSystemsDb, RunStore } from ${JSON.stringify(path.join(REPO, "src/workflows/systems/db.ts"))};
import { sqliteSqlOf } from ${JSON.stringify(path.join(REPO, "src/core/db/sql.ts"))};
import { loadSystems } from ${JSON.stringify(path.join(REPO, "src/workflows/systems/library.ts"))};
import { RunManager } from ${JSON.stringify(path.join(REPO, "src/workflows/systems/runner.ts"))};
const { pino } = createRequire(${JSON.stringify(path.join(REPO, "package.json"))})("pino");
const [dbFile, dataDir, systems] = process.argv.slice(2);
const { library, problems } = await loadSystems({ configSystems: JSON.parse(systems!), models: new Map() });
if (problems.length) throw new Error(JSON.stringify(problems));
const bus = new EventBus();
const manager = new RunManager({ store: new RunStore(sqliteSqlOf(openSystemsDb(dbFile!))), library, bus, callModel: async function* () {}, dataDir: dataDir!, log: pino({ level: "silent" }), retryBaseMs: 20 });
bus.on((e) => {
  if (e.type === "run.output" && e.step === "b" && e.text.includes("started")) process.stdout.write("RUN " + e.runId + "\\n");
});
await manager.start({ system: "crashy", inputs: {}, origin: "cli" });
setTimeout(() => process.exit(9), 30_000); // bounded, should the test not kill it
`,
    );
    const child = spawn(NODE, ["--import", "tsx", script, dbFile, path.join(dir, "data"), JSON.stringify(systems)], {
      cwd: REPO,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exitedChild = new Promise<void>((r) => child.once("exit", () => r()));
    let out = "";
    let err = "";
    child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
    const runId = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the child bridge did not start the run within 30 s: ${err}`)),
        30_000,
      );
      child.stdout!.on("data", (d: Buffer) => {
        out += d.toString();
        const m = /RUN (\S+)\n/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the child bridge exited (${code}) first: ${err}`));
      });
    }).catch(async (e: unknown) => {
      child.kill("SIGKILL");
      await exitedChild;
      throw e;
    });
    const pids = pidsOf(pidFile);
    child.kill("SIGKILL");
    await exitedChild;
    // The command it ran outlives it (its own process group); the orphan reaper's job, here ours.
    assert.ok(groupAlive(pids.pgid));
    killGroups([pids.pgid]);
    await assertGone(pids);

    const h = await harness(systems, { dbFile });
    const left = (await h.store.get(runId))!;
    assert.equal(left.status, "running");
    assert.equal(stepOf(left, "b").status, "running");

    assert.deepEqual(await h.manager.recover(), [runId]);
    const rec = (await h.store.get(runId))!;
    assert.equal(rec.status, "interrupted");
    assert.equal(rec.detached, true);
    assert.deepEqual(
      rec.steps.map((s) => [s.id, s.status, s.output]),
      [
        ["a", "completed", "A done"],
        ["b", "pending", undefined],
      ],
    );
    assert.deepEqual(
      h.events.map((e) => e.type),
      ["run.interrupted"],
    );
    // Never re-run silently: nothing is live and nothing ran (give it a moment to misbehave).
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(h.manager.isLive(runId), false);
    assert.equal(count(first), 1);
    assert.equal(count(second), 1);
    assert.equal((await h.store.get(runId))!.status, "interrupted");

    writeFileSync(go, "");
    await h.manager.resume(runId);
    const end = await h.manager.wait(runId);
    assert.equal(end.status, "completed");
    assert.equal(end.output, "finished");
    assert.equal(count(first), 1, "a is not run again");
    assert.equal(count(second), 2);
  });
});
