/**
 * What every CLI backend (claude-code, codex, gemini-cli, qwen-code) must do with its real CLI
 * against a fake of its model API, registered inside the CLI's own `describe()` (its file keeps the
 * tests of what only that CLI does): the version in health; no process left by a consumer that
 * stops early, an abort or the timeout; `session_not_found` for an unknown session and for one
 * whose files are gone; an API error as `upstream_error` with the model's message; a missing binary
 * as `backend_unavailable`. The backend drives the CLI as users have it; only the model is faked.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, unlinkSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import type { Backend } from "../../src/backends/types.js";
import { assertEndsOnce, collect, errorOf, guardedRun, pidGone, sessionOf, textOf, turnInput } from "./backend-turn.js";
import { eventually } from "./bridge.js";

/** Replies every fake model API understands alike. */
export type CommonReply = { kind: "text"; chunks: string[]; delayMs?: number } | { kind: "hang" } | { kind: "error"; status: number; message: string };
const text = (chunks: string[], delayMs?: number): CommonReply => ({ kind: "text", chunks, delayMs });
const hang: CommonReply = { kind: "hang" };

/** A CLI backend with the pid of its last process. */
export type CliBackend = Backend & { readonly lastPid?: number };

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
}

/** Files the backend writes per turn (system prompt files...) that are still there. */
function turnFilesLeft(dataDir: string): string[] {
  const dir = path.join(dataDir, "tmp");
  return existsSync(dir) ? readdirSync(dir) : [];
}

export function cliBackendContract<Reply>(t: CliUnderTest<Reply>): void {
  test("health reports the CLI version", async () => {
    const h = await t.backend().health();
    assert.equal(h.usable, true, h.detail);
    assert.match(h.version ?? "", t.version);
  });

  test("a consumer that stops reading early leaves no process behind", async () => {
    t.reply(text(["one ", "two ", "three"], 300));
    const backend = t.backend();
    let sawText = false;
    for await (const ev of backend.run(turnInput("conv-early", "count"))) {
      if (ev.type === "text") {
        sawText = true;
        break;
      }
    }
    assert.ok(sawText);
    assert.ok(pidGone(backend.lastPid!), "process terminated and reaped when the generator was closed");
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
    const files = t.sessionFiles(sid);
    assert.equal(files.length, 1, `the session is stored under ${t.sessionFilesWhere}`);
    unlinkSync(files[0]!);
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
    assert.ok(pidGone(pid), "process reaped");
    assert.deepEqual(turnFilesLeft(t.dataDir()), [], "the per-turn files are removed after an aborted turn too");
  });

  test("a turn over timeoutSeconds is stopped by the pipeline's deadline with backend_timeout", async () => {
    t.reply(hang);
    const slow = t.make({ timeoutSeconds: t.timeoutSeconds });
    const evs = await collect(guardedRun(slow, turnInput("conv-timeout", "slow")));
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "backend_timeout");
    assert.equal(err?.retryable, true);
    assert.ok(pidGone(slow.lastPid!), "process reaped");
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
