/**
 * Warm Codex: the codex backend keeping one REAL `codex app-server` (node_modules/.bin) per
 * conversation, against the fake OpenAI Responses API on 127.0.0.1. Only the model API is faked.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { codexBackend, type CodexBackend } from "../../src/backends/codex/backend.js";
import { codexOptionsSchema } from "../../src/backends/codex/cli-args.js";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import {
  responsesDialogue,
  responsesText,
  startFakeResponses,
  type FakeResponses,
  type RecordedResponsesRequest,
  type ResponsesReply,
} from "../../testkit/fakes/responses-api.js";
import { CODEX_BIN, codexEnv } from "../../testkit/fakes/cli-env.js";
import {
  assertEndsOnce,
  collect,
  errorOf,
  findFiles,
  guardedRun,
  pidGone,
  sessionOf,
  textOf,
  turnInput,
} from "../helpers/backend-turn.js";
import { eventually, within } from "../helpers/bridge.js";
import { cliBackendContract } from "../helpers/cli-backend-contract.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

const usageOf = (evs: BackendEvent[]) =>
  evs.find((e): e is Extract<BackendEvent, { type: "usage" }> => e.type === "usage")?.usage;
const developerTexts = (req: RecordedResponsesRequest): string[] =>
  ((req.body?.input ?? []) as any[]).filter((i) => i?.role === "developer").map((i) => responsesText(i.content));
const dialogue = (req: RecordedResponsesRequest): [string, string][] =>
  responsesDialogue(req.body)
    .filter(([role]) => role === "user" || role === "assistant")
    .filter(([, t]) => !t.startsWith("<environment_context>") && !t.startsWith("# AGENTS.md"))
    .map(([r, t]): [string, string] => [r, t.trim()]);
const alive = (pid: number | undefined) => pid !== undefined && !pidGone(pid);

describe("codex backend, warm: codex app-server per conversation", () => {
  let fake: FakeResponses;
  let home: string;
  let dataDir: string;
  let backend: CodexBackend;
  const made: CodexBackend[] = [];

  const make = (extra: Record<string, unknown> = {}) => {
    const b = codexBackend.create(
      "codex",
      codexOptionsSchema.parse({
        command: CODEX_BIN,
        env: codexEnv({ baseUrl: fake.url, home }),
        timeoutSeconds: 60,
        killGraceSeconds: 1,
        ...extra,
      }),
      { logger, dataDir },
    ) as CodexBackend;
    made.push(b);
    return b;
  };

  before(async () => {
    fake = await startFakeResponses();
    home = mkdtempSync(path.join(tmpdir(), "cb-codexw-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-codexw-data-"));
    backend = make();
  });

  after(async () => {
    const pids = made.flatMap((b) => b.warmPool.list(false).map((w) => w.pid));
    await Promise.all(made.map((b) => b.close()));
    for (const pid of pids) if (pid) assert.ok(pidGone(pid), `warm process ${pid} ended by close()`);
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  cliBackendContract<ResponsesReply>({
    cli: "codex",
    warm: true,
    backend: () => backend,
    make,
    missing: (command) => codexBackend.create("nope", codexOptionsSchema.parse({ command }), { logger, dataDir }),
    dataDir: () => dataDir,
    reply: (r) => fake.setScript(() => r),
    requests: () => fake.requests.length,
    turns: () => fake.responseCalls().length,
    version: /codex-cli \d+\.\d+/,
    unknownSession: /no rollout found for thread id/,
    sessionFiles: (id) => findFiles(path.join(home, ".codex", "sessions"), (n) => n.endsWith(`-${id}.jsonl`)),
    sessionFilesWhere: "CODEX_HOME/sessions/YYYY/MM/DD/",
    timeoutSeconds: 3,
  });

  test("warm is the default; the answer streams as token deltas with reasoning, usage, a session and done", async () => {
    assert.equal(codexOptionsSchema.parse({}).warm.enabled, true);
    fake.setScript(() => ({
      kind: "text",
      reasoning: ["Let me ", "think."],
      chunks: ["The answer ", "is ", "81", "."],
      delayMs: 20,
      inputTokens: 100,
      cachedTokens: 30,
      outputTokens: 9,
      reasoningTokens: 4,
    }));
    const n0 = fake.responseCalls().length;
    const evs = await collect(
      backend.run(turnInput("w-basic", "what is 9 * 9", { system: "BOOT-W-basic: you are Pebble." })),
    );
    assertEndsOnce(evs);
    assert.deepEqual(evs.at(-1), { type: "done", finishReason: "stop" });
    const texts = evs.filter((e) => e.type === "text").map((e) => (e as { text: string }).text);
    assert.deepEqual(
      texts,
      ["The answer ", "is ", "81", "."],
      "one text event per delta (codex exec gives one whole message)",
    );
    assert.equal(
      evs
        .filter((e) => e.type === "reasoning")
        .map((e) => (e as { text: string }).text)
        .join(""),
      "Let me think.",
    );
    const sid = sessionOf(evs);
    assert.match(sid ?? "", /^[0-9a-f-]{36}$/);
    assert.ok(
      evs.findIndex((e) => e.type === "session") < evs.findIndex((e) => e.type === "text"),
      "session before the text",
    );
    assert.deepEqual(usageOf(evs), {
      promptTokens: 100,
      completionTokens: 9,
      totalTokens: 109,
      cachedTokens: 30,
      reasoningTokens: 4,
    });
    const calls = fake.responseCalls().slice(n0);
    assert.equal(calls.length, 1);
    assert.equal(
      developerTexts(calls[0]!)[0]?.trim(),
      "BOOT-W-basic: you are Pebble.",
      "the bootstrap replaces codex's base instructions",
    );
    assert.ok(!JSON.stringify(calls[0]!.body).includes("You are a coding agent running in the Codex CLI"));
    const tools: string[] = (calls[0]!.body.tools ?? []).map((t: any) => t.name ?? t.type);
    assert.ok(!tools.includes("exec_command"), `no command tool by default: ${tools.join(",")}`);
    assert.ok(alive(backend.lastPid), "the app-server stays for the next turn");
    assert.ok(
      backend.warmPool.list(false).some((w) => w.pid === backend.lastPid && !w.busy),
      "listed by the pool, idle",
    );
  });

  test("turn 2 runs on the same process, continues the thread, answers fast, reports its own usage and gets the bootstrap again", async () => {
    fake.setScript((r) => ({
      kind: "text",
      chunks: [r.lastUserText.includes("second") ? "Second " : "First ", "reply."],
      inputTokens: 42,
      outputTokens: 6,
    }));
    const n0 = fake.responseCalls().length;
    const t1 = await collect(backend.run(turnInput("w-two", "first question", { system: "BOOT-W-two" })));
    assertEndsOnce(t1);
    assert.deepEqual(usageOf(t1), { promptTokens: 42, completionTokens: 6, totalTokens: 48 });
    const sid = sessionOf(t1)!;
    const pid = backend.lastPid;

    const t0 = Date.now();
    let firstText = -1;
    const t2: BackendEvent[] = [];
    for await (const ev of backend.run(
      turnInput("w-two", "second question", { system: "BOOT-W-two", sessionId: sid }),
    )) {
      if (ev.type === "text" && firstText < 0) firstText = Date.now() - t0;
      t2.push(ev);
    }
    assertEndsOnce(t2);
    assert.equal(backend.lastPid, pid, "the same app-server process");
    assert.equal(sessionOf(t2), sid);
    assert.equal(textOf(t2), "Second reply.");
    assert.ok(firstText >= 0 && firstText < 2000, `first token after ${firstText} ms on a warm process`);
    // codex's thread total is 84/12 now; the turn's own share is reported.
    assert.deepEqual(usageOf(t2), { promptTokens: 42, completionTokens: 6, totalTokens: 48 });
    const [r1, r2] = fake.responseCalls().slice(n0);
    assert.equal(developerTexts(r1!)[0]?.trim(), "BOOT-W-two");
    assert.equal(developerTexts(r2!)[0]?.trim(), "BOOT-W-two", "the bootstrap reaches the model on turn 2");
    assert.deepEqual(dialogue(r2!), [
      ["user", "first question"],
      ["assistant", "First reply."],
      ["user", "second question"],
    ]);

    // A changed bootstrap: a new process resuming the same thread with it.
    const t3 = await collect(
      backend.run(turnInput("w-two", "third question", { system: "BOOT-W-three", sessionId: sid })),
    );
    assertEndsOnce(t3);
    assert.equal(sessionOf(t3), sid);
    assert.notEqual(backend.lastPid, pid, "a new process for the new bootstrap");
    assert.ok(await eventually(() => pidGone(pid!), 10_000), "the old process is ended");
    const r3 = fake.responseCalls().at(-1)!;
    assert.equal(developerTexts(r3)[0]?.trim(), "BOOT-W-three");
    assert.ok(!JSON.stringify(r3.body).includes("BOOT-W-two"), "the old bootstrap is not sent");
    assert.deepEqual(
      dialogue(r3).map(([, t]) => t),
      ["first question", "First reply.", "second question", "Second reply.", "third question"],
    );
    assert.deepEqual(usageOf(t3), { promptTokens: 42, completionTokens: 6, totalTokens: 48 });
  });

  test("warm and cold turns alternate on one thread (the same thread ids), usage per turn on both", async () => {
    const cold = make({ warm: { enabled: false } });
    fake.setScript((r) => ({
      kind: "text",
      chunks: [`re: ${r.lastUserText.slice(0, 20)}`],
      inputTokens: 40,
      outputTokens: 5,
    }));
    const t1 = await collect(cold.run(turnInput("w-alt", "one cold")));
    assertEndsOnce(t1);
    const sid = sessionOf(t1)!;
    const warmA = make();
    const t2 = await collect(warmA.run(turnInput("w-alt", "two warm", { sessionId: sid })));
    assertEndsOnce(t2);
    assert.equal(sessionOf(t2), sid);
    assert.equal(textOf(t2), "re: two warm");
    assert.deepEqual(usageOf(t2), { promptTokens: 40, completionTokens: 5, totalTokens: 45 });

    // While a warm app-server holds the thread, codex refuses a second writer: not "session not found".
    const busy = await collect(cold.run(turnInput("w-alt", "busy cold", { sessionId: sid })));
    assertEndsOnce(busy);
    assert.equal(errorOf(busy)?.code, "backend_failed", JSON.stringify(busy));
    assert.match(errorOf(busy)!.message, /already has an active writer/);
    assert.equal(errorOf(busy)!.retryable, true);
    await warmA.close();

    // A bridge restarted with warm off: the cold path reads the thread's total from its rollout.
    const cold2 = make({ warm: { enabled: false } });
    const t3 = await collect(cold2.run(turnInput("w-alt", "three cold", { sessionId: sid })));
    assertEndsOnce(t3);
    assert.equal(sessionOf(t3), sid, JSON.stringify(t3));
    assert.deepEqual(
      usageOf(t3),
      { promptTokens: 40, completionTokens: 5, totalTokens: 45 },
      "the cold turn after a warm one reports its own share",
    );
    const warmB = make();
    const t4 = await collect(warmB.run(turnInput("w-alt", "four warm", { sessionId: sid })));
    assertEndsOnce(t4);
    assert.equal(sessionOf(t4), sid);
    assert.deepEqual(usageOf(t4), { promptTokens: 40, completionTokens: 5, totalTokens: 45 });
    assert.deepEqual(
      dialogue(fake.responseCalls().at(-1)!).map(([, t]) => t),
      ["one cold", "re: one cold", "two warm", "re: two warm", "three cold", "re: three cold", "four warm"],
    );
    await warmB.close();
  });

  test("an unknown thread id gives session_not_found without calling the model; the process is not kept", async () => {
    const n0 = fake.requests.length;
    const evs = await collect(backend.run(turnInput("w-unknown", "hello", { sessionId: randomUUID() })));
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "session_not_found", JSON.stringify(err));
    assert.match(err!.message, /no rollout found for thread id/);
    assert.equal(sessionOf(evs), undefined);
    assert.equal(fake.requests.length, n0);
    assert.ok(await eventually(() => pidGone(backend.lastPid!), 10_000), "its process is ended");
  });

  test("an API error becomes an upstream_error with the model's message and status; the process serves the next turn", async () => {
    fake.setScript(() => ({ kind: "error", status: 400, message: "fake refused the request: bad-field-xyz-123" }));
    const evs = await collect(backend.run(turnInput("w-apierr", "hi")));
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "upstream_error", JSON.stringify(evs));
    assert.match(err!.message, /fake refused the request: bad-field-xyz-123/);
    assert.match(err!.message, /400/);
    assert.equal(err!.retryable, false);
    assert.equal(textOf(evs), "");
    const sid = sessionOf(evs)!;
    const pid = backend.lastPid;
    fake.setScript(() => ({ kind: "failed", message: "fake broke midway xyz" }));
    const failed = await collect(backend.run(turnInput("w-apierr", "again", { sessionId: sid })));
    assertEndsOnce(failed);
    assert.equal(errorOf(failed)?.code, "upstream_error");
    assert.match(errorOf(failed)!.message, /fake broke midway xyz/);
    assert.equal(errorOf(failed)!.retryable, true);
    assert.equal(backend.lastPid, pid, "the same process after failed turns");
    fake.setScript(() => ({ kind: "text", chunks: ["fine now"] }));
    const ok = await collect(backend.run(turnInput("w-apierr", "third", { sessionId: sid })));
    assert.equal(textOf(ok), "fine now");
    assert.equal(backend.lastPid, pid);
  });

  test("abort while the model hangs: turn/interrupt, aborted, and the process serves the next turn", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["ready"] }));
    const t1 = await collect(backend.run(turnInput("w-abort", "warm up")));
    const sid = sessionOf(t1)!;
    const pid = backend.lastPid!;
    fake.setScript(() => ({ kind: "hang" }));
    const ac = new AbortController();
    const n0 = fake.responseCalls().length;
    const done = collect(backend.run(turnInput("w-abort", "never answered", { signal: ac.signal, sessionId: sid })));
    assert.ok(await eventually(() => fake.responseCalls().length > n0, 15_000), "the CLI reached the model");
    const t0 = Date.now();
    ac.abort();
    const evs = await within(done, 10_000, "the aborted turn");
    assertEndsOnce(evs);
    assert.equal(errorOf(evs)?.code, "aborted");
    assert.ok(Date.now() - t0 < 5000, `ended ${Date.now() - t0} ms after the abort`);
    assert.ok(alive(pid), "codex obeyed the interrupt: the process is kept");
    fake.setScript(() => ({ kind: "text", chunks: ["after abort"] }));
    const t3 = await collect(backend.run(turnInput("w-abort", "next", { sessionId: sid })));
    assertEndsOnce(t3);
    assert.equal(textOf(t3), "after abort");
    assert.equal(backend.lastPid, pid);
  });

  test("the turn deadline ends a hanging turn with backend_timeout", async () => {
    fake.setScript(() => ({ kind: "hang" }));
    const slow = make({ timeoutSeconds: 3 });
    const evs = await collect(guardedRun(slow, turnInput("w-deadline", "slow")));
    assertEndsOnce(evs);
    assert.equal(errorOf(evs)?.code, "backend_timeout");
    assert.equal(errorOf(evs)?.retryable, true);
    await slow.close();
    assert.ok(pidGone(slow.lastPid!), "closed with its backend");
  });

  test("a consumer that stops reading early: the CLI's turn is interrupted and the conversation goes on", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["one ", "two ", "three ", "four"], delayMs: 300 }));
    let sid: string | undefined;
    for await (const ev of backend.run(turnInput("w-early", "count"))) {
      if (ev.type === "session") sid = ev.id;
      if (ev.type === "text") break;
    }
    assert.ok(sid);
    const pid = backend.lastPid;
    assert.ok(alive(pid), "codex obeyed turn/interrupt: the process is kept");
    fake.setScript(() => ({ kind: "text", chunks: ["next turn"] }));
    const evs = await collect(backend.run(turnInput("w-early", "go on", { sessionId: sid })));
    assertEndsOnce(evs);
    assert.equal(textOf(evs), "next turn");
    assert.equal(backend.lastPid, pid, "and serves the next turn");
  });

  test("SIGKILL of the warm process after output: an error event, nothing left behind", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["one ", "two ", "three ", "four ", "five"], delayMs: 400 }));
    const evs: BackendEvent[] = [];
    let pid: number | undefined;
    for await (const ev of backend.run(turnInput("w-kill", "count slowly"))) {
      evs.push(ev);
      if (ev.type === "text" && pid === undefined) {
        pid = backend.lastPid!;
        process.kill(pid, "SIGKILL");
      }
    }
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "backend_failed", JSON.stringify(evs));
    assert.match(err!.message, /ended in the middle of the turn/);
    assert.ok(await eventually(() => pidGone(pid!), 10_000));
    assert.equal(backend.warmPool.list(false).filter((w) => w.pid === pid).length, 0, "the dead process is forgotten");
  });

  test("SIGKILL of a reused warm process before any output: the same turn runs cold", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["warm"] }));
    const t1 = await collect(backend.run(turnInput("w-lost", "first")));
    const sid = sessionOf(t1)!;
    const pid = backend.lastPid!;
    let calls = 0;
    fake.setScript(() =>
      ++calls === 1 ? { kind: "hang" } : { kind: "text", chunks: ["answered cold"], inputTokens: 30, outputTokens: 3 },
    );
    const n0 = fake.responseCalls().length;
    const done = collect(backend.run(turnInput("w-lost", "second", { sessionId: sid })));
    assert.ok(await eventually(() => fake.responseCalls().length > n0, 15_000), "the warm process reached the model");
    assert.equal(backend.lastPid, pid, "the reused process");
    process.kill(pid, "SIGKILL");
    const evs = await within(done, 60_000, "the cold retry");
    assertEndsOnce(evs);
    assert.equal(evs.at(-1)?.type, "done", JSON.stringify(evs));
    assert.equal(textOf(evs), "answered cold");
    assert.equal(sessionOf(evs), sid);
    assert.notEqual(backend.lastPid, pid, "a cold codex exec ran the turn");
    assert.deepEqual(
      usageOf(evs),
      { promptTokens: 30, completionTokens: 3, totalTokens: 33 },
      "the cold run's own share of the thread total",
    );
    assert.ok(pidGone(pid));
  });

  test("shellTool: commands show as tool_activity; an approval codex asks for is declined and nothing runs", async () => {
    const cwd = mkdtempSync(path.join(dataDir, "tool-"));
    writeFileSync(path.join(cwd, "notes.txt"), "hi from notes\n");
    const marker = path.join(cwd, "pwned.txt");
    fake.setScript((r) => {
      const outputs = (r.body?.input as any[]).filter((i) => i?.type === "function_call_output");
      if (outputs.length === 0)
        return {
          kind: "text",
          chunks: [],
          functionCalls: [{ name: "exec_command", arguments: { cmd: `cat ${path.join(cwd, "notes.txt")}` } }],
        };
      if (outputs.length === 1) {
        return {
          kind: "text",
          chunks: ["Let me write."],
          functionCalls: [
            {
              name: "exec_command",
              arguments: {
                cmd: `touch ${marker}`,
                sandbox_permissions: "require_escalated",
                justification: "write a file",
              },
            },
          ],
        };
      }
      return { kind: "text", chunks: ["done"] };
    });
    const shell = make({ shellTool: true, approvalPolicy: "on-request" });
    const n0 = fake.responseCalls().length;
    const evs = await collect(shell.run(turnInput("w-shell", "run it", { cwd })));
    assertEndsOnce(evs);
    assert.equal(evs.at(-1)?.type, "done", JSON.stringify(evs));
    const acts = evs.filter((e): e is Extract<BackendEvent, { type: "tool_activity" }> => e.type === "tool_activity");
    assert.deepEqual(
      acts.slice(0, 2).map((a) => [a.name, a.status]),
      [
        ["shell", "started"],
        ["shell", "completed"],
      ],
      JSON.stringify(acts),
    );
    assert.ok(acts[0]!.detail?.includes("cat "), acts[0]!.detail);
    assert.equal(textOf(evs), "Let me write.\n\ndone");
    const outputs = fake
      .responseCalls()
      .slice(n0)
      .flatMap((r) =>
        (r.body.input as any[]).filter((i) => i?.type === "function_call_output").map((i) => String(i.output)),
      );
    assert.ok(
      outputs.some((o) => o.includes("hi from notes")),
      "reading works",
    );
    assert.equal(existsSync(marker), false, "the escalation was declined: nothing written");
    await shell.close();
  });

  test("an idle process is ended after warm.idleSeconds", async () => {
    const idle = make({ warm: { idleSeconds: 1 } });
    fake.setScript(() => ({ kind: "text", chunks: ["hi"] }));
    const evs = await collect(idle.run(turnInput("w-idle", "hi")));
    assertEndsOnce(evs);
    const pid = idle.lastPid!;
    assert.ok(alive(pid));
    assert.ok(await eventually(() => pidGone(pid), 10_000), "reaped after 1 s idle");
    assert.equal(idle.warmPool.list(false).length, 0);
    assert.equal(idle.warmPool.stats.reaped, 1);
  });

  test("warm.enabled false runs codex exec per turn (no process kept)", async () => {
    const cold = make({ warm: { enabled: false } });
    fake.setScript(() => ({ kind: "text", chunks: ["The ", "whole ", "message"] }));
    const evs = await collect(cold.run(turnInput("w-cold", "hi")));
    assertEndsOnce(evs);
    assert.deepEqual(
      evs.filter((e) => e.type === "text").map((e) => (e as { text: string }).text),
      ["The whole message"],
      "codex exec prints whole messages",
    );
    assert.ok(pidGone(cold.lastPid!));
    assert.equal(cold.warmPool.list(false).length, 0);
  });
});
