/**
 * What every CLI backend (claude-code, codex, gemini-cli, qwen-code) must do with its real CLI
 * against a fake of its model API, registered inside the CLI's own `describe()` (its file keeps the
 * tests of what only that CLI does): the version in health; no process left by a consumer that
 * stops early, an abort or the timeout; `session_not_found` for an unknown session and for one
 * whose files are gone; an API error as `upstream_error` with the model's message; a missing binary
 * as `backend_unavailable`. The backend drives the CLI as users have it; only the model is faked.
 *
 * `warm: true` runs the same contract on a backend in warm mode (src/backends/warm): a process outlives its
 * turn on purpose, so "no process left behind" becomes "the process is either gone or serves the
 * conversation's next turn — never a second one"; a lost session is seen once the warm process has
 * gone. Warm mode adds its own checks: turn 2 on the same process, a process killed mid-turn,
 * `maxProcesses` with a new conversation arriving, idle reaping, and `close()` ending them all.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, unlinkSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import type { Backend, BackendEvent } from "../../src/backends/contract/backend.js";
import { assertEndsOnce, collect, errorOf, guardedRun, pidGone, sessionOf, textOf, turnInput } from "./backend-turn.js";
import { eventually } from "./bridge.js";
import { warmProcesses } from "../../src/backends/warm/registry.js";

/** Replies every fake model API understands alike. */
export type CommonReply =
  | { kind: "text"; chunks: string[]; delayMs?: number }
  | { kind: "hang" }
  | { kind: "error"; status: number; message: string };
const text = (chunks: string[], delayMs?: number): CommonReply => ({ kind: "text", chunks, delayMs });
const hang: CommonReply = { kind: "hang" };

/** A CLI backend with the pid of its last process. */
export type CliBackend = Backend & { readonly lastPid?: number };

/** A warm process that stayed: it serves the conversation's next turn (the same pid answers). */
async function reusedOrGone(
  t: CliUnderTest<unknown>,
  backend: CliBackend,
  key: string,
  pid: number,
  sessionId: string | undefined,
  system?: string,
): Promise<void> {
  if (pidGone(pid)) return;
  t.reply(text(["again"]));
  // The same session and bootstrap: the process it was started for fits.
  const evs = await collect(backend.run(turnInput(key, "again?", { sessionId, system })));
  assertEndsOnce(evs);
  assert.equal(evs.at(-1)?.type, "done", JSON.stringify(evs));
  assert.equal(textOf(evs), "again");
  assert.equal(backend.lastPid, pid, "the conversation's warm process served its next turn (no second process)");
}

export interface CliUnderTest<Reply> {
  /** The binary's name ("claude"). */
  cli: string;
  /** The backend the file's tests share (made in its `before`). */
  backend(): CliBackend;
  /** A backend with these options on top of the file's. */
  make(extra: Record<string, unknown>): CliBackend;
  /** A backend of this type whose command does not exist. */
  missing(command: string): Backend;
  dataDir(): string;
  /** The fake answers every model turn with `reply` (side calls keep a harmless answer). */
  reply(reply: Reply | CommonReply): void;
  /** The model refusing the request with HTTP 400 and `message`, when the fake needs more than the common shape. */
  refusal?(message: string): Reply;
  /** Requests the fake has seen (any path): "the model was not called" counts these. */
  requests(): number;
  /** Model turns the fake has seen: "the CLI reached the model" counts these. */
  turns(): number;
  /** What `health().version` looks like. */
  version: RegExp;
  /** How the CLI words a session id it does not know. */
  unknownSession: RegExp;
  /** The CLI's own file of session `id` (transcript, rollout, session file), and where it should be. */
  sessionFiles(id: string): string[];
  sessionFilesWhere: string;
  /** The timeout of the timeout test: long enough for the CLI to start and reach the model. */
  timeoutSeconds: number;
  /** The backends run in warm mode (`make` gives warm backends too). */
  warm?: boolean;
}

/** Files the backend writes per turn (system prompt files...) that are still there. */
function turnFilesLeft(dataDir: string): string[] {
  const dir = path.join(dataDir, "tmp");
  return existsSync(dir) ? readdirSync(dir) : [];
}

export function cliBackendContract<Reply>(t: CliUnderTest<Reply>): void {
  if (t.warm) warmContract(t);
  test("health reports the CLI version", async () => {
    const h = await t.backend().health();
    assert.equal(h.usable, true, h.detail);
    assert.match(h.version ?? "", t.version);
  });

  test("a consumer that stops reading early leaves no process behind", async () => {
    t.reply(text(["one ", "two ", "three"], 300));
    const backend = t.backend();
    let sawText = false;
    let sid: string | undefined;
    for await (const ev of backend.run(turnInput("conv-early", "count"))) {
      if (ev.type === "session") sid = ev.id;
      if (ev.type === "text") {
        sawText = true;
        break;
      }
    }
    assert.ok(sawText);
    if (t.warm) await reusedOrGone(t as CliUnderTest<unknown>, backend, "conv-early", backend.lastPid!, sid);
    else assert.ok(pidGone(backend.lastPid!), "process terminated and reaped when the generator was closed");
  });

  test("resuming an unknown session id gives session_not_found without calling the model", async () => {
    const n0 = t.requests();
    const evs = await collect(t.backend().run(turnInput("conv-unknown", "hello", { sessionId: randomUUID() })));
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "session_not_found", JSON.stringify(err));
    assert.match(err!.message, t.unknownSession);
    assert.equal(sessionOf(evs), undefined, "no session bound for a failed resume");
    assert.equal(t.requests(), n0, "the model was not called");
  });

  test("resuming a session whose file was deleted gives session_not_found", async () => {
    t.reply(text(["ok"]));
    const t1 = await collect(t.backend().run(turnInput("conv-deleted", "remember me")));
    const sid = sessionOf(t1)!;
    assert.ok(sid, JSON.stringify(t1));
    // A warm CLI may write its session file a moment after the turn.
    await eventually(() => t.sessionFiles(sid).length > 0, 5000);
    const files = t.sessionFiles(sid);
    assert.equal(files.length, 1, `the session is stored under ${t.sessionFilesWhere}`);
    unlinkSync(files[0]!);
    if (t.warm) {
      // A warm process holds the session itself; the loss shows once that process has gone.
      const pid = t.backend().lastPid!;
      process.kill(-pid, "SIGKILL"); // the whole group: some CLIs relaunch themselves in a child
      assert.ok(await eventually(() => pidGone(pid), 10_000), "the warm process is gone");
    }
    const evs = await collect(t.backend().run(turnInput("conv-deleted", "do you remember", { sessionId: sid })));
    assertEndsOnce(evs);
    assert.equal(errorOf(evs)?.code, "session_not_found", JSON.stringify(errorOf(evs)));
  });

  test("an API error from the model becomes an upstream_error carrying its message", async () => {
    const message = "fake refused the request: bad-field-xyz-123";
    t.reply(t.refusal?.(message) ?? { kind: "error", status: 400, message });
    const evs = await collect(t.backend().run(turnInput("conv-apierr", "hi")));
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "upstream_error", JSON.stringify(evs));
    assert.match(err!.message, /fake refused the request: bad-field-xyz-123/);
    assert.match(err!.message, /400/, "the model API's status is named");
    assert.equal(err!.retryable, false);
    assert.equal(textOf(evs), "", `the CLI's own "API Error" text is not streamed as answer text`);
  });

  test("abort while the model hangs ends the turn promptly, leaves no process and no per-turn file", async () => {
    t.reply(hang);
    const backend = t.backend();
    const ac = new AbortController();
    const n0 = t.turns();
    const done = collect(backend.run(turnInput("conv-abort", "never answered", { signal: ac.signal, system: "boot" })));
    assert.ok(await eventually(() => t.turns() > n0, 15_000), "the CLI reached the model");
    const pid = backend.lastPid!;
    assert.ok(pid > 0);
    ac.abort();
    const evs = await done;
    assertEndsOnce(evs);
    assert.equal(errorOf(evs)?.code, "aborted");
    if (t.warm) {
      // A warm CLI may re-read its bootstrap file while it lives (Gemini's GEMINI_SYSTEM_MD): at most one per warm process.
      assert.ok(
        turnFilesLeft(t.dataDir()).length <= warmProcesses().length,
        `files left: ${turnFilesLeft(t.dataDir()).join(", ")}`,
      );
    } else assert.deepEqual(turnFilesLeft(t.dataDir()), [], "the per-turn files are removed after an aborted turn too");
    if (t.warm) await reusedOrGone(t as CliUnderTest<unknown>, backend, "conv-abort", pid, sessionOf(evs), "boot");
    else assert.ok(pidGone(pid), "process reaped");
  });

  test("a turn over timeoutSeconds is stopped by the pipeline's deadline with backend_timeout", async () => {
    t.reply(hang);
    const slow = t.make({ timeoutSeconds: t.timeoutSeconds });
    const evs = await collect(guardedRun(slow, turnInput("conv-timeout", "slow")));
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "backend_timeout");
    assert.equal(err?.retryable, true);
    if (t.warm) {
      const pid = slow.lastPid!;
      await reusedOrGone(t as CliUnderTest<unknown>, slow, "conv-timeout", pid, sessionOf(evs));
      await slow.close?.();
      assert.ok(pidGone(pid), "close() ends the warm process");
    } else assert.ok(pidGone(slow.lastPid!), "process reaped");
  });

  test("a missing binary gives backend_unavailable naming the path tried", async () => {
    const command = `/nonexistent/dir/${t.cli}`;
    const missing = t.missing(command);
    const evs = await collect(missing.run(turnInput("conv-missing", "hi")));
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "backend_unavailable");
    assert.ok(err!.message.includes(command), err!.message);
    assert.equal((await missing.health()).usable, false);
  });
}

/** What only warm mode does, for every CLI with a warm mode (called by `cliBackendContract` when `warm`). */
function warmContract<Reply>(t: CliUnderTest<Reply>): void {
  const closeAll = async (...backends: CliBackend[]) => {
    for (const b of backends) await b.close?.();
  };

  test("warm: a conversation's next turn runs on the same process; another conversation gets its own", async () => {
    t.reply(text(["one"]));
    const backend = t.backend();
    const a1 = await collect(backend.run(turnInput("conv-warm-a", "first")));
    assert.equal(a1.at(-1)?.type, "done", JSON.stringify(a1));
    const pidA = backend.lastPid!;
    const sid = sessionOf(a1);
    const a2 = await collect(backend.run(turnInput("conv-warm-a", "second", { sessionId: sid })));
    assert.equal(a2.at(-1)?.type, "done", JSON.stringify(a2));
    assert.equal(backend.lastPid, pidA, "turn 2 on the warm process");
    assert.equal(sessionOf(a2) ?? sid, sid, "the same CLI session");
    const b1 = await collect(backend.run(turnInput("conv-warm-b", "other")));
    assert.equal(b1.at(-1)?.type, "done");
    assert.notEqual(backend.lastPid, pidA, "a conversation never shares another's process");
    assert.ok(!pidGone(pidA), "the first conversation's process is still warm");
  });

  test("warm: a process killed mid-answer ends that turn with an error; killed before any output, the turn is answered cold", async () => {
    const backend = t.make({});
    try {
      t.reply(text(["warm"]));
      const t1 = await collect(backend.run(turnInput("conv-warm-kill", "warm up")));
      assert.equal(t1.at(-1)?.type, "done", JSON.stringify(t1));
      let sid = sessionOf(t1);
      const pid1 = backend.lastPid!;
      // Killed after the first words reached the client: the turn ends with an error, not a hang.
      t.reply(text(["first ", "second ", "third ", "fourth"], 400));
      const evs: BackendEvent[] = [];
      for await (const ev of backend.run(turnInput("conv-warm-kill", "talk slowly", { sessionId: sid }))) {
        evs.push(ev);
        if (ev.type === "text" && evs.filter((e) => e.type === "text").length === 1) process.kill(-pid1, "SIGKILL");
        if (evs.length > 500) break;
      }
      assertEndsOnce(evs);
      assert.equal(backend.lastPid, pid1, "the killed turn was served warm");
      assert.equal(errorOf(evs)?.code, "backend_failed", JSON.stringify(evs));
      assert.ok(await eventually(() => pidGone(pid1), 10_000), "the killed process is reaped");
      // A new warm process, killed while the model has not answered yet: the turn is run cold.
      t.reply(text(["again"]));
      const t3 = await collect(backend.run(turnInput("conv-warm-kill", "after the crash", { sessionId: sid })));
      assert.equal(t3.at(-1)?.type, "done", JSON.stringify(t3));
      const pid2 = backend.lastPid!;
      assert.notEqual(pid2, pid1, "a new process replaced the dead one");
      sid = sessionOf(t3) ?? sid;
      t.reply(hang);
      const n0 = t.turns();
      const pending = collect(backend.run(turnInput("conv-warm-kill", "before any output", { sessionId: sid })));
      assert.ok(await eventually(() => t.turns() > n0, 15_000), "the warm CLI reached the model");
      t.reply(text(["answered ", "cold"]));
      process.kill(-pid2, "SIGKILL");
      const t4 = await pending;
      assertEndsOnce(t4);
      assert.equal(t4.at(-1)?.type, "done", JSON.stringify(t4));
      assert.equal(textOf(t4), "answered cold");
    } finally {
      await closeAll(backend);
    }
  });

  test("warm: at maxProcesses a new conversation ends the least recently used idle process", async () => {
    const backend = t.make({ warm: { enabled: true, maxProcesses: 1 } });
    try {
      t.reply(text(["ok"]));
      const a = await collect(backend.run(turnInput("conv-max-a", "a")));
      assert.equal(a.at(-1)?.type, "done");
      const pidA = backend.lastPid!;
      const b = await collect(backend.run(turnInput("conv-max-b", "b")));
      assert.equal(b.at(-1)?.type, "done");
      assert.notEqual(backend.lastPid, pidA);
      assert.ok(await eventually(() => pidGone(pidA), 10_000), "the idle process of the other conversation was ended");
    } finally {
      await closeAll(backend);
    }
  });

  test("warm: an idle process is ended after idleSeconds; close() ends the rest", async () => {
    const idle = t.make({ warm: { enabled: true, idleSeconds: 1 } });
    const kept = t.make({});
    try {
      t.reply(text(["ok"]));
      assert.equal((await collect(idle.run(turnInput("conv-idle", "hi")))).at(-1)?.type, "done");
      assert.equal((await collect(kept.run(turnInput("conv-kept", "hi")))).at(-1)?.type, "done");
      const idlePid = idle.lastPid!;
      const keptPid = kept.lastPid!;
      assert.ok(await eventually(() => pidGone(idlePid), 15_000), "reaped after 1 s idle");
      assert.ok(!pidGone(keptPid), "a process within its idle time stays");
      await kept.close?.();
      assert.ok(pidGone(keptPid), "close() ended it");
    } finally {
      await closeAll(idle, kept);
    }
  });
}
