/**
 * The warm pool (src/backends/warm/pool.ts) with real long-lived processes: `cat` started as a WarmProcess
 * (stdin kept open, so it lives until its input ends), one per conversation key. What the pool
 * promises: one process per key (a second turn waits for the first, a replaced one is gone before
 * its successor starts), the least recently used idle process ends at `maxProcesses`, a full pool
 * of busy processes gives no lease (the turn runs cold), idle ones are reaped, dead ones forgotten,
 * `close()` ends them all, and `warmProcesses()` lists them with their memory.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createLogger } from "../../src/core/log/logger.js";
import { WarmPool } from "../../src/backends/warm/pool.js";
import { warmProcesses, warmSummary } from "../../src/backends/warm/registry.js";
import { Inbox, WarmProcess } from "../../src/backends/warm/warm-process.js";

const logger = createLogger("silent");

class Cat extends WarmProcess {
  constructor(readonly tag: string) {
    super({
      label: "cat",
      command: "/bin/cat",
      args: [],
      env: process.env,
      cwd: process.cwd(),
      killGraceMs: 500,
      logger,
    });
  }
}

const gone = (pid: number | undefined) => {
  try {
    process.kill(pid!, 0);
    return false;
  } catch {
    return true;
  }
};

async function until(check: () => boolean, ms = 5000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (check()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return check();
}

test("a process serves its key's turns while it fits; a misfit is ended before its successor starts", async () => {
  const pool = new WarmPool<Cat>("b", { idleSeconds: 60, maxProcesses: 4 }, logger);
  try {
    const l1 = (await pool.acquire(
      "k",
      () => true,
      async () => new Cat("one"),
    ))!;
    assert.equal(l1.fresh, true);
    // The process really answers over its kept-open stdin.
    const inbox = new Inbox();
    l1.worker.listen(inbox.push);
    l1.worker.send({ hello: 1 });
    const echoed = await inbox.next(undefined, 5000);
    assert.deepEqual(
      echoed !== "timeout" && echoed !== "aborted" && echoed.kind === "message" ? echoed.message : echoed,
      { hello: 1 },
    );
    l1.worker.listen(undefined);
    l1.release(true);
    const l2 = (await pool.acquire(
      "k",
      (w) => w.tag === "one",
      async () => new Cat("two"),
    ))!;
    assert.equal(l2.fresh, false);
    assert.equal(l2.worker, l1.worker, "reused");
    l2.release(true);
    const oldPid = l1.worker.pid;
    let oldGoneAtStart: boolean | undefined;
    const l3 = (await pool.acquire(
      "k",
      (w) => w.tag === "three",
      async () => {
        oldGoneAtStart = gone(oldPid);
        return new Cat("three");
      },
    ))!;
    assert.equal(oldGoneAtStart, true, "the misfit was reaped before the new process was started");
    assert.equal(l3.worker.tag, "three");
    l3.release(true);
    assert.deepEqual(pool.stats, {
      started: 2,
      reused: 1,
      overflow: 0,
      reaped: 0,
      evicted: 0,
      closed: 0,
      died: 0,
      standbyStarted: 0,
      standbyTaken: 0,
      memoryEvicted: 0,
      memoryOverflow: 0,
    });
    await pool.close();
    assert.equal(pool.stats.closed, 1, "the shutdown's end is counted as closed");
    assert.equal(pool.stats.died, 0, "and not as died");
  } finally {
    await pool.close();
  }
});

test("a second turn of the same key waits for the first one's release (never two processes)", async () => {
  const pool = new WarmPool<Cat>("b", { idleSeconds: 60, maxProcesses: 4 }, logger);
  try {
    let starts = 0;
    const start = async () => (starts++, new Cat("x"));
    const first = (await pool.acquire("k", () => true, start))!;
    let second: Awaited<ReturnType<typeof pool.acquire>>;
    const pending = pool.acquire("k", () => true, start).then((l) => (second = l));
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(second!, undefined, "still waiting");
    first.release(true);
    await pending;
    assert.equal(second!.worker, first.worker);
    assert.equal(starts, 1);
    second!.release(true);
    // A waiting turn that is cancelled stops waiting and gets no lease.
    const busy = (await pool.acquire("k", () => true, start))!;
    const ac = new AbortController();
    const waiting = pool.acquire("k", () => true, start, ac.signal);
    ac.abort();
    assert.equal(await waiting, undefined);
    busy.release(true);
  } finally {
    await pool.close();
  }
});

test("at maxProcesses the least recently used idle process goes; with all busy there is no lease", async () => {
  const pool = new WarmPool<Cat>("b", { idleSeconds: 60, maxProcesses: 2 }, logger);
  try {
    const a = (await pool.acquire(
      "a",
      () => true,
      async () => new Cat("a"),
    ))!;
    a.release(true);
    await new Promise((r) => setTimeout(r, 5));
    const b = (await pool.acquire(
      "b",
      () => true,
      async () => new Cat("b"),
    ))!;
    b.release(true);
    const c = (await pool.acquire(
      "c",
      () => true,
      async () => new Cat("c"),
    ))!;
    assert.ok(gone(a.worker.pid), "a, the least recently used, was ended");
    assert.ok(!gone(b.worker.pid));
    assert.equal(pool.size, 2);
    const b2 = (await pool.acquire(
      "b",
      () => true,
      async () => new Cat("b2"),
    ))!;
    assert.equal(b2.worker, b.worker);
    // b and c are both busy: a new conversation gets no lease (its turn runs cold).
    assert.equal(
      await pool.acquire(
        "d",
        () => true,
        async () => new Cat("d"),
      ),
      undefined,
    );
    assert.equal(pool.stats.overflow, 1);
    assert.equal(pool.stats.evicted, 1);
    c.release(true);
    b2.release(true);
    const listed = warmProcesses().filter((w) => w.backend === "b");
    assert.equal(listed.length, 2);
    assert.ok(
      listed.every((w) => !w.busy && (w.rssBytes ?? 0) > 0),
      JSON.stringify(listed),
    );
    assert.equal(warmSummary().byBackend.b?.processes, 2);
  } finally {
    await pool.close();
  }
  assert.equal(warmProcesses().filter((w) => w.backend === "b").length, 0, "a closed pool lists nothing");
});

test("an idle process is reaped after idleSeconds; a dead one is forgotten; close() ends the rest", async () => {
  const pool = new WarmPool<Cat>("b", { idleSeconds: 0.3, maxProcesses: 4 }, logger);
  const a = (await pool.acquire(
    "a",
    () => true,
    async () => new Cat("a"),
  ))!;
  a.release(true);
  assert.ok(await until(() => gone(a.worker.pid)), "reaped after 0.3 s idle");
  assert.equal(pool.stats.reaped, 1);
  const b = (await pool.acquire(
    "b",
    () => true,
    async () => new Cat("b"),
  ))!;
  b.release(true);
  process.kill(b.worker.pid!, "SIGKILL");
  await b.worker.ended;
  assert.equal(pool.stats.died, 1);
  assert.equal(pool.size, 0, "the dead process is forgotten");
  const c = (await pool.acquire(
    "c",
    () => true,
    async () => new Cat("c"),
  ))!;
  // A turn that leaves its process unfit hands it back with keep = false: it is ended.
  c.release(false);
  assert.ok(await until(() => gone(c.worker.pid)));
  const d = (await pool.acquire(
    "d",
    () => true,
    async () => new Cat("d"),
  ))!;
  await pool.close();
  assert.ok(gone(d.worker.pid), "close() ended the busy one too");
  assert.equal(
    await pool.acquire(
      "e",
      () => true,
      async () => new Cat("e"),
    ),
    undefined,
    "a closed pool gives no lease",
  );
});

test('a CliProcess keeps stdin open only when asked (a prompt that reads "keep" is still written and closed)', async () => {
  const { CliProcess } = await import("../../src/core/util/process.js");
  const once = new CliProcess({ command: "/bin/cat", args: [], env: process.env, stdin: "keep" });
  const lines: string[] = [];
  for await (const l of once.lines()) lines.push(l);
  assert.deepEqual(lines, ["keep"]);
  assert.equal((await once.wait()).code, 0, "cat ended: its stdin was closed after the prompt");
  const kept = new CliProcess({ command: "/bin/cat", args: [], env: process.env, keepStdin: true });
  assert.equal(kept.write("one\n"), true);
  const it = kept.lines()[Symbol.asyncIterator]();
  assert.deepEqual(await it.next(), { done: false, value: "one" });
  assert.equal(kept.running, true, "still running: stdin is open");
  kept.endInput();
  assert.equal((await it.next()).done, true);
  assert.equal((await kept.wait()).code, 0);
  assert.equal(kept.write("late\n"), false, "no input after the end");
});
