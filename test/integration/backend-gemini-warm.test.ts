/**
 * Warm mode of the gemini-cli backend: one REAL `gemini --acp` process (node_modules/.bin) per
 * conversation, driven over the Agent Client Protocol, against the fake Gemini API on 127.0.0.1.
 * Only the model API is faked. Every test ends with no gemini process of its own left.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import {
  geminiCliBackend,
  geminiCliOptionsSchema,
  type GeminiCliBackend,
} from "../../src/backends/gemini-cli/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { geminiEnv, GEMINI_BIN } from "../../testkit/fakes/cli-env.js";
import {
  geminiPartsText,
  startFakeGemini,
  type FakeGemini,
  type GeminiReply,
  type RecordedGeminiRequest,
} from "../../testkit/fakes/gemini-api.js";
import { assertEndsOnce, collect, errorOf, pidGone, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";
import { eventually } from "../helpers/bridge.js";
import { backendFixture } from "../helpers/backend-fixture.js";
import { cliBackendContract } from "../helpers/cli-backend-contract.js";
import { findFiles } from "../helpers/backend-turn.js";
import { readFileSync } from "node:fs";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

const mainTurn =
  (fn: (r: RecordedGeminiRequest) => GeminiReply) =>
  (r: RecordedGeminiRequest): GeminiReply =>
    r.action === "streamGenerateContent" ? fn(r) : { kind: "text", chunks: ["side"] };

function dialogue(req: RecordedGeminiRequest): [string, string][] {
  return (req.body?.contents ?? []).map((c: any): [string, string] => [c.role, geminiPartsText(c.parts)]);
}

describe("gemini-cli backend, warm (gemini --acp)", () => {
  let fake: FakeGemini;
  let home: string;
  let dataDir: string;
  const made: GeminiCliBackend[] = [];
  const pids = new Set<number>();

  const make = (extra: Record<string, unknown> = {}) => {
    const b = geminiCliBackend.create(
      "gemini",
      geminiCliOptionsSchema.parse({
        command: GEMINI_BIN,
        env: geminiEnv({ baseUrl: fake.baseUrl, home }),
        timeoutSeconds: 60,
        killGraceSeconds: 1,
        ...extra,
      }),
      { logger, dataDir },
    ) as GeminiCliBackend;
    made.push(b);
    return b;
  };
  const pidOf = (b: GeminiCliBackend) => {
    const pid = b.lastPid!;
    pids.add(pid);
    return pid;
  };

  before(async () => {
    fake = await startFakeGemini();
    home = mkdtempSync(path.join(tmpdir(), "cb-gwarm-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-gwarm-data-"));
  });

  afterEach(async () => {
    await Promise.all(made.splice(0).map((b) => b.close()));
    for (const pid of pids)
      assert.ok(await eventually(() => pidGone(pid), 10_000), `gemini ${pid} is gone after close()`);
    pids.clear();
  });

  after(async () => {
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("turn 1 streams deltas and a session; turn 2 runs on the same process, continues the history, bootstrap on both", async () => {
    const b = make();
    fake.setScript(
      mainTurn((r) => ({
        kind: "text",
        chunks: [r.lastUserText.includes("second") ? "Second " : "First ", "reply ", "here."],
        delayMs: 5,
      })),
    );
    const n0 = fake.turnCalls().length;
    const t1 = await collect(b.run(turnInput("w-basic", "first question", { system: "WARM-BOOT" })));
    assertEndsOnce(t1);
    assert.deepEqual(t1.at(-1), { type: "done", finishReason: "stop" }, JSON.stringify(t1));
    assert.ok(t1.filter((e) => e.type === "text").length >= 3, "several text deltas");
    assert.equal(textOf(t1), "First reply here.");
    const sid = sessionOf(t1)!;
    assert.match(sid, /^[0-9a-f-]{36}$/);
    assert.ok(
      t1.some((e) => e.type === "usage"),
      "usage from the prompt's _meta",
    );
    const pid1 = pidOf(b);

    const started = Date.now();
    let firstTokenMs = -1;
    const t2: Awaited<ReturnType<typeof collect>> = [];
    for await (const ev of b.run(turnInput("w-basic", "second question", { system: "WARM-BOOT", sessionId: sid }))) {
      if (ev.type === "text" && firstTokenMs < 0) firstTokenMs = Date.now() - started;
      t2.push(ev);
    }
    assertEndsOnce(t2);
    assert.equal(t2.at(-1)?.type, "done", JSON.stringify(errorOf(t2)));
    assert.equal(sessionOf(t2), sid);
    assert.equal(textOf(t2), "Second reply here.");
    assert.equal(b.lastPid, pid1, "the same process served turn 2");
    assert.ok(
      firstTokenMs >= 0 && firstTokenMs < 1500,
      `first token after ${firstTokenMs} ms (a cold start takes ~2 s)`,
    );
    const [r1, r2] = fake.turnCalls().slice(n0);
    assert.ok(r1 && r2);
    assert.equal(r1.systemText, "WARM-BOOT");
    assert.equal(r2.systemText, "WARM-BOOT", "the bootstrap is the system instruction on turn 2 too");
    const d2 = dialogue(r2);
    assert.match(d2[0]![1], /first question/);
    assert.deepEqual(d2.at(-2), ["model", "First reply here."]);
    assert.deepEqual(d2.at(-1), ["user", "second question"]);
  });

  test("a changed bootstrap starts a new process that loads the session; a cold --resume continues it too", async () => {
    const b = make();
    fake.setScript(mainTurn((r) => ({ kind: "text", chunks: ["Re: ", r.lastUserText.slice(-12)] })));
    const n0 = fake.turnCalls().length;
    const t1 = await collect(b.run(turnInput("w-boot", "alpha one", { system: "BOOT-A" })));
    assert.equal(t1.at(-1)?.type, "done", JSON.stringify(t1));
    const sid = sessionOf(t1)!;
    const pid1 = pidOf(b);
    const t2 = await collect(b.run(turnInput("w-boot", "beta two", { system: "BOOT-B", sessionId: sid })));
    assert.equal(t2.at(-1)?.type, "done", JSON.stringify(t2));
    assert.equal(textOf(t2), "Re: beta two", "the replayed history is not streamed as this turn's text");
    assert.equal(sessionOf(t2), sid);
    const pid2 = pidOf(b);
    assert.notEqual(pid2, pid1, "a new process");
    assert.ok(await eventually(() => pidGone(pid1), 10_000), "the old process was ended");
    const r2 = fake.turnCalls().slice(n0)[1]!;
    assert.equal(r2.systemText, "BOOT-B");
    assert.match(JSON.stringify(dialogue(r2)), /alpha one.*Re: .*beta two/s, "the loaded session has turn 1");
    // The same conversation cold: gemini's --resume takes the ACP session id.
    const cold = make({ warm: { enabled: false } });
    const t3 = await collect(cold.run(turnInput("w-boot", "gamma three", { system: "BOOT-B", sessionId: sid })));
    assert.equal(t3.at(-1)?.type, "done", JSON.stringify(t3));
    assert.equal(sessionOf(t3), sid);
    const r3 = fake.turnCalls().at(-1)!;
    assert.match(JSON.stringify(dialogue(r3)), /alpha one.*beta two.*gamma three/s);
    // ...and back to warm (a load in the same minute as the cold turn's recording).
    const t4 = await collect(b.run(turnInput("w-boot", "delta four", { system: "BOOT-C", sessionId: sid })));
    assert.equal(t4.at(-1)?.type, "done", JSON.stringify(t4));
    pidOf(b);
    assert.match(JSON.stringify(dialogue(fake.turnCalls().at(-1)!)), /alpha one.*beta two.*gamma three.*delta four/s);
  });

  test("abort while the model hangs: session/cancel, `aborted`, and the process serves the next turn", async () => {
    const b = make();
    fake.setScript(mainTurn(() => ({ kind: "hang" })));
    const ac = new AbortController();
    const n0 = fake.turnCalls().length;
    const done = collect(b.run(turnInput("w-abort", "never answered", { signal: ac.signal })));
    assert.ok(await eventually(() => fake.turnCalls().length > n0, 30_000), "gemini reached the model");
    const pid = pidOf(b);
    const t0 = Date.now();
    ac.abort();
    const evs = await done;
    assertEndsOnce(evs);
    assert.equal(errorOf(evs)?.code, "aborted");
    assert.ok(Date.now() - t0 < 5000, "ended promptly");
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["back"] })));
    const next = await collect(b.run(turnInput("w-abort", "again", { sessionId: sessionOf(evs) })));
    assert.equal(next.at(-1)?.type, "done", JSON.stringify(next));
    assert.equal(textOf(next), "back");
    assert.ok(b.lastPid === pid || pidGone(pid), "reused, or the old one was reaped");
    pidOf(b);
  });

  test("a consumer that stops early cancels the prompt; the process is reused or reaped", async () => {
    const b = make();
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["one ", "two ", "three"], delayMs: 400 })));
    for await (const ev of b.run(turnInput("w-early", "count"))) if (ev.type === "text") break;
    const pid = pidOf(b);
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["ok"] })));
    const again = await collect(b.run(turnInput("w-early", "more")));
    assert.equal(again.at(-1)?.type, "done", JSON.stringify(again));
    assert.ok(b.lastPid === pid || pidGone(pid));
    pidOf(b);
  });

  test("a warm process killed mid-turn: an error event or a cold retry, and the next turn starts a new process", async () => {
    const b = make();
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["ok"] })));
    const t1 = await collect(b.run(turnInput("w-kill", "hello")));
    const sid = sessionOf(t1)!;
    const pid = pidOf(b);
    // The model answers slowly: the process dies while the turn waits for it.
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["slow ", "answer"], delayMs: 1500 })));
    const n0 = fake.turnCalls().length;
    const done = collect(b.run(turnInput("w-kill", "wait for it", { sessionId: sid })));
    assert.ok(await eventually(() => fake.turnCalls().length > n0, 30_000));
    process.kill(-pid, "SIGKILL");
    const evs = await done;
    assertEndsOnce(evs);
    const end = evs.at(-1)!;
    if (end.type === "error") assert.equal(end.error.code, "backend_failed", JSON.stringify(evs));
    else assert.equal(textOf(evs), "slow answer", "the turn was run again cold");
    assert.ok(pidGone(pid));
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["fine"] })));
    const t3 = await collect(b.run(turnInput("w-kill", "after", { sessionId: sid })));
    assert.equal(t3.at(-1)?.type, "done", JSON.stringify(t3));
    assert.notEqual(pidOf(b), pid);
  });

  test("an unknown session id gives session_not_found; an API error gives upstream_error with the model's message", async () => {
    const b = make();
    const n0 = fake.turnCalls().length;
    const evs = await collect(b.run(turnInput("w-unknown", "hello", { sessionId: randomUUID() })));
    assertEndsOnce(evs);
    assert.equal(errorOf(evs)?.code, "session_not_found", JSON.stringify(evs));
    assert.match(errorOf(evs)!.message, /No previous sessions found|Invalid session identifier/);
    assert.equal(sessionOf(evs), undefined);
    assert.equal(fake.turnCalls().length, n0, "the model was not called");
    pidOf(b);
    fake.setScript(mainTurn(() => ({ kind: "error", status: 400, message: "fake refused: bad-field-xyz" })));
    const e2 = await collect(b.run(turnInput("w-apierr", "hi")));
    assertEndsOnce(e2);
    const err = errorOf(e2);
    assert.equal(err?.code, "upstream_error", JSON.stringify(e2));
    assert.match(err!.message, /fake refused: bad-field-xyz/);
    assert.match(err!.message, /400/);
    assert.equal(err!.retryable, false);
    pidOf(b);
  });

  test("idle processes are reaped; at maxProcesses a new conversation evicts the idle one; close() ends all", async () => {
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["ok"] })));
    const idle = make({ warm: { idleSeconds: 1 } });
    await collect(idle.run(turnInput("w-idle", "hi")));
    const p0 = pidOf(idle);
    assert.ok(await eventually(() => pidGone(p0), 15_000), "reaped after idleSeconds");

    const one = make({ warm: { maxProcesses: 1 } });
    await collect(one.run(turnInput("w-max-a", "hi")));
    const pa = pidOf(one);
    await collect(one.run(turnInput("w-max-b", "hi")));
    const pb = pidOf(one);
    assert.notEqual(pa, pb);
    assert.ok(await eventually(() => pidGone(pa), 10_000), "the idle process of the other conversation was evicted");
    await one.close();
    assert.ok(await eventually(() => pidGone(pb), 10_000), "close() ended the last one");
  });
});

describe("gemini-cli backend, warm: the CLI contract", () => {
  const fx = backendFixture({
    name: "gwarmc",
    startFake: () => startFakeGemini(),
    create: ({ fake, home, dataDir }, extra) =>
      geminiCliBackend.create(
        "gemini",
        geminiCliOptionsSchema.parse({
          command: GEMINI_BIN,
          env: geminiEnv({ baseUrl: fake.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          ...extra,
        }),
        { logger, dataDir },
      ) as GeminiCliBackend,
  });

  cliBackendContract<GeminiReply>({
    cli: "gemini",
    warm: true,
    backend: () => fx.backend,
    make: (extra) => fx.make(extra),
    missing: (command) => fx.make({ command }),
    dataDir: () => fx.dataDir,
    reply: (r) => fx.fake.setScript(mainTurn(() => r)),
    requests: () => fx.fake.turnCalls().length,
    turns: () => fx.fake.turnCalls().length,
    version: /^\d+\.\d+/,
    unknownSession: /Error resuming session|Invalid session identifier|No previous sessions found/,
    sessionFiles: (id) =>
      findFiles(
        path.join(fx.home, ".gemini", "tmp"),
        (n) => n.startsWith("session-") && n.includes(id.slice(0, 8)),
      ).filter((f) => readFileSync(f, "utf8").includes(id)),
    sessionFilesWhere: "~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl",
    timeoutSeconds: 8,
  });
});
