/**
 * A CLI whose leader exits while a child it started still holds stdout (issue 20, item 1): the
 * issue's repro, an opencode-type CLI that is a shell script doing `cat >/dev/null; sleep 30 &`,
 * then printing a text event and a `step_finish` event, and exiting. Abort, the turn deadline,
 * shutdown, and the turn's own end must each end the WHOLE process group within a couple of
 * seconds — through the real `runCliTurn` / `CliProcess`, and through a real bridge over HTTP
 * (the pipeline's deadline, the conversation lock after a client abort, `close()`).
 *
 * Every group a test starts is checked gone (`process.kill(-pgid, 0)` → ESRCH, zombies waiting
 * for init do not count) and SIGKILLed in `after` should a test fail.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { runCliTurn, type CliTurnMapper } from "../../src/backends/cli/base.js";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { TurnDeadline } from "../../src/core/util/cancel.js";
import { terminateAll } from "../../src/core/util/process.js";
import { procStat } from "../../src/core/util/run-records.js";
import {
  cleanup,
  eventually,
  pidsWithEnv,
  startTestBridge,
  tempDir,
  type TestBridge,
  within,
} from "../helpers/bridge.js";
import { exited, groupAlive, killGroups, killMarked } from "../helpers/process-groups.js";

const marker = randomUUID();
const MARK = `CB_PG_MARKER=${marker}`;
const groups = new Set<number>();
let dir: string;
let leaves: string; // the repro: the leader exits, `sleep` keeps stdout
let stubborn: string; // same, and the child ignores SIGTERM
let escaper: string; // a child leaves the group and the session (setsid) holding stdout; the leader hangs
let unfinished: string; // as `leaves`, but its turn never ends (no last step_finish): only the deadline stops it

const TEXT = '{"type":"text","part":{"type":"text","text":"hello"}}';
const STEP = '{"type":"step_finish","part":{"type":"step-finish","reason":"stop"}}';

function script(file: string, body: string): string {
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

/**
 * Read the turn's two events, then go on reading (as the HTTP response does) while nothing more
 * comes: the state the repro is in when the abort arrives.
 */
async function readAllThenWait(it: AsyncGenerator<BackendEvent>): Promise<{ ending: Promise<BackendEvent[]> }> {
  const a = await within(it.next(), 10_000, "first event");
  assert.deepEqual(a.value, { type: "text", text: "hello" });
  const b = await within(it.next(), 10_000, "second event");
  assert.deepEqual(b.value, { type: "reasoning", text: "step" });
  return { ending: rest(it) };
}

/** The leader has exited (and been reaped by us); its group lives on. */
async function leaderExited(pid: number): Promise<void> {
  assert.ok(await eventually(() => exited(pid), 5000), "the leader exited");
  assert.ok(groupAlive(pid), "a child of the leader still runs in its group");
  // Let node handle the exit too (its 'exit' event), as it has long before a real abort comes.
  await new Promise((r) => setTimeout(r, 300));
}

/** A turn of `bin` in the state: both events read, the leader exited, a child left in its group. */
async function orphanedTurn(bin: string, killGraceSeconds?: number) {
  const ac = new AbortController();
  const { it, pgid } = startTurn(bin, ac.signal, killGraceSeconds);
  const { ending } = await readAllThenWait(it);
  await leaderExited(pgid());
  return { ac, pgid, ending };
}

/** text → text; step_finish → a reasoning event, so a test can tell when every line has been read. */
const mapper: CliTurnMapper = {
  onEvent: (ev) =>
    ev.type === "text"
      ? [{ type: "text", text: String((ev.part as { text?: string }).text) }]
      : ev.type === "step_finish"
        ? [{ type: "reasoning", text: "step" }]
        : [],
  finish: () => [{ type: "done", finishReason: "stop" }],
};

function startTurn(bin: string, signal: AbortSignal, killGraceSeconds = 1) {
  let pgid = 0;
  const it = runCliTurn(
    {
      label: "fake-cli",
      bin,
      args: [],
      env: { PATH: process.env.PATH, CB_PG_MARKER: marker },
      cwd: dir,
      stdin: "a prompt",
      signal,
      killGraceSeconds,
      logger: createLogger("silent"),
      onSpawn: (pid) => {
        pgid = pid!;
        groups.add(pid!);
      },
    },
    mapper,
  );
  return { it, pgid: () => pgid };
}

async function rest(it: AsyncGenerator<BackendEvent>): Promise<BackendEvent[]> {
  const out: BackendEvent[] = [];
  for (let i = 0; i < 100; i++) {
    const r = await it.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

before(() => {
  dir = tempDir("cb-pg-");
  leaves = script(path.join(dir, "leaves.sh"), `cat >/dev/null\nsleep 30 &\necho '${TEXT}'\necho '${STEP}'`);
  stubborn = script(
    path.join(dir, "stubborn.sh"),
    `cat >/dev/null\n(trap '' TERM; exec sleep 30) &\necho '${TEXT}'\necho '${STEP}'`,
  );
  unfinished = script(path.join(dir, "unfinished.sh"), `cat >/dev/null\nsleep 30 &\necho '${TEXT}'`);
  escaper = script(
    path.join(dir, "escaper.sh"),
    `cat >/dev/null\nsetsid sleep 30 &\necho '${TEXT}'\necho '${STEP}'\nexec sleep 31`,
  );
});

after(async () => {
  killGroups(groups);
  killMarked(MARK);
  await eventually(() => pidsWithEnv(MARK).length === 0, 5000);
  cleanup(dir);
});

describe("runCliTurn / CliProcess: the leader exited, a child holds stdout", () => {
  test("a client abort ends the whole group at once", async (t) => {
    const { ac, pgid, ending } = await orphanedTurn(leaves);
    const t0 = Date.now();
    ac.abort();
    const events = await within(ending, 8000, "the aborted turn ended");
    t.diagnostic(`aborted turn ended after ${Date.now() - t0} ms`);
    assert.equal(events.at(-1)?.type, "error");
    assert.equal((events.at(-1) as Extract<BackendEvent, { type: "error" }>).error.code, "aborted");
    assert.ok(await eventually(() => !groupAlive(pgid()), 3000), "no process of the group is left");
  });

  test("the turn deadline (an abort with TurnDeadline) ends the whole group: backend_timeout", async (t) => {
    const { ac, pgid, ending } = await orphanedTurn(leaves);
    const t0 = Date.now();
    ac.abort(new TurnDeadline(1));
    const events = await within(ending, 8000, "the timed-out turn ended");
    t.diagnostic(`timed-out turn ended after ${Date.now() - t0} ms`);
    const last = events.at(-1) as Extract<BackendEvent, { type: "error" }>;
    assert.equal(last.error.code, "backend_timeout");
    assert.equal(last.error.status, 504);
    assert.ok(await eventually(() => !groupAlive(pgid()), 3000), "no process of the group is left");
  });

  test("shutdown (terminateAll) ends the whole group", async (t) => {
    const { pgid, ending } = await orphanedTurn(leaves);
    const t0 = Date.now();
    await within(terminateAll(), 8000, "terminateAll");
    t.diagnostic(`terminateAll returned after ${Date.now() - t0} ms`);
    assert.ok(
      !groupAlive(pgid()) || (await eventually(() => !groupAlive(pgid()), 3000)),
      "no process of the group is left",
    );
    const events = await within(ending, 3000, "the turn ended");
    assert.equal(events.at(-1)?.type, "error");
  });

  test("a child that ignores SIGTERM is SIGKILLed after the grace period", async (t) => {
    const { ac, pgid, ending } = await orphanedTurn(stubborn, 0.5);
    const t0 = Date.now();
    ac.abort();
    await within(ending, 8000, "the aborted turn ended");
    t.diagnostic(`ended after ${Date.now() - t0} ms (grace 500 ms)`);
    assert.ok(await eventually(() => !groupAlive(pgid()), 3000), "no process of the group is left");
  });

  test("a child that left the group (setsid) still holding stdout cannot keep the turn open", async (t) => {
    const ac = new AbortController();
    const { it, pgid } = startTurn(escaper, ac.signal, 0.5);
    const { ending } = await readAllThenWait(it);
    const t0 = Date.now();
    ac.abort();
    const events = await within(ending, 8000, "the aborted turn ended");
    t.diagnostic(`ended after ${Date.now() - t0} ms (grace 500 ms, then 1 s for the pipes)`);
    assert.equal(events.at(-1)?.type, "error");
    assert.ok(await eventually(() => !groupAlive(pgid()), 3000), "no process of the group is left");
    // Out of reach of a group kill: the process that escaped is stopped here by the test.
    for (const pid of pidsWithEnv(MARK)) if (procStat(pid)?.pgrp !== pgid()) process.kill(pid, "SIGKILL");
  });

  test("the turn's own end: the leader exited, the child is ended after a short linger and the turn is done", async (t) => {
    const ac = new AbortController();
    const t0 = Date.now();
    const { it, pgid } = startTurn(leaves, ac.signal);
    const events = await within(rest(it), 10_000, "the turn ended on its own");
    t.diagnostic(`turn ended after ${Date.now() - t0} ms`);
    assert.deepEqual(events, [
      { type: "text", text: "hello" },
      { type: "reasoning", text: "step" },
      { type: "done", finishReason: "stop" },
    ]);
    assert.ok(await eventually(() => !groupAlive(pgid()), 3000), "no process of the group is left");
  });
});

/** Read a streamed answer until the CLI's text ("hello") has come through (or the stream ended); what was read. */
async function readUntilHello(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let seen = "";
  for (let i = 0; i < 100 && !seen.includes("hello"); i++) {
    const r = await within(reader.read(), 10_000, "a streamed chunk");
    if (r.done) break;
    seen += Buffer.from(r.value).toString();
  }
  return seen;
}

describe("a bridge over HTTP with that CLI as an opencode backend", () => {
  let bridge: TestBridge;
  const backend = () => bridge.backends.get("long") as unknown as { lastPid?: number };
  const post = (body: Record<string, unknown>, session: string, signal: AbortSignal) =>
    fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": session },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }),
      signal,
    });

  before(async () => {
    bridge = await startTestBridge({
      server: { heartbeatSeconds: 0.5 },
      backends: {
        // A turn the CLI never ends (a finished one ends on its last step_finish, before any deadline).
        short: {
          type: "opencode",
          command: unfinished,
          env: { CB_PG_MARKER: marker },
          timeoutSeconds: 1,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
        long: {
          type: "opencode",
          command: leaves,
          env: { CB_PG_MARKER: marker },
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [
        { id: "fake/short", backend: "short" },
        { id: "fake/long", backend: "long" },
      ],
    });
  });

  after(async () => {
    await bridge?.close(0);
    if (bridge) cleanup(bridge.dataDir);
  });

  test("the pipeline's deadline answers 504 at once and ends the group", async (t) => {
    const t0 = Date.now();
    const res = await post({ model: "fake/short" }, `pg-${randomUUID()}`, AbortSignal.timeout(10_000));
    const body = (await res.json()) as { error?: { code?: string } };
    t.diagnostic(`504 after ${Date.now() - t0} ms (deadline 1 s)`);
    assert.equal(res.status, 504);
    assert.equal(body.error?.code, "backend_timeout");
    const pgid = (bridge.backends.get("short") as unknown as { lastPid?: number }).lastPid!;
    groups.add(pgid);
    assert.ok(await eventually(() => !groupAlive(pgid), 3000), "no process of the group is left");
  });

  test("a client abort frees the conversation: its next turn is served at once", async (t) => {
    const session = `pg-${randomUUID()}`;
    const ac = new AbortController();
    const res = await post({ model: "fake/long", stream: true }, session, ac.signal);
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    assert.match(await readUntilHello(reader), /hello/);
    const pgid = backend().lastPid!;
    groups.add(pgid);
    ac.abort();
    await reader.cancel().catch(() => {});
    assert.ok(await eventually(() => !groupAlive(pgid), 3000), "the aborted turn's group is gone");
    // The same conversation again: it must not wait for the first turn's leftover child.
    const t0 = Date.now();
    const next = await post({ model: "fake/long" }, session, AbortSignal.timeout(10_000));
    const body = (await next.json()) as { choices?: { message?: { content?: string } }[] };
    t.diagnostic(`next turn answered after ${Date.now() - t0} ms`);
    assert.equal(next.status, 200);
    assert.equal(body.choices?.[0]?.message?.content, "hello");
    groups.add(backend().lastPid!);
    assert.ok(await eventually(() => !groupAlive(backend().lastPid!), 3000), "the next turn's group is gone too");
  });

  test("shutdown with a turn running ends its group at once", async (t) => {
    const ac = new AbortController();
    const res = await post({ model: "fake/long", stream: true }, `pg-${randomUUID()}`, ac.signal);
    const reader = res.body!.getReader();
    await readUntilHello(reader);
    const pgid = backend().lastPid!;
    groups.add(pgid);
    const t0 = Date.now();
    const closing = bridge.close(0);
    assert.ok(await eventually(() => !groupAlive(pgid), 3000), "no process of the group is left");
    t.diagnostic(`group gone ${Date.now() - t0} ms after close() was called`);
    // (How soon close() returns with a client still connected is the HTTP server's business.)
    ac.abort();
    await reader.cancel().catch(() => {});
    await within(closing, 15_000, "bridge.close");
  });
});
