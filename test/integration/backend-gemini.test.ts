/**
 * The gemini-cli backend driving the REAL `gemini` CLI (node_modules/.bin) against a fake Gemini
 * API on 127.0.0.1. Only the model API is faked.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  GEMINI_MD_MARKER,
  geminiCliBackend,
  geminiCliOptionsSchema,
  type GeminiCliBackend,
} from "../../src/backends/gemini-cli/backend.js";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { geminiEnv, GEMINI_BIN } from "../../testkit/fakes/cli-env.js";
import {
  geminiPartsText,
  startFakeGemini,
  type FakeGemini,
  type GeminiReply,
  type RecordedGeminiRequest,
} from "../../testkit/fakes/gemini-api.js";

import { assertEndsOnce, collect, errorOf, findFiles, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";
import { cliBackendContract } from "../helpers/cli-backend-contract.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

/** The conversation of a request as [role, text] pairs (text parts of each content joined). */
function dialogue(req: RecordedGeminiRequest): [string, string][] {
  return (req.body?.contents ?? []).map((c: any): [string, string] => [c.role, geminiPartsText(c.parts)]);
}

/** Script only the model turn; side calls (routing classifier: JSON) keep the fake's default answer. */
const mainTurn =
  (fn: (r: RecordedGeminiRequest) => GeminiReply) =>
  (r: RecordedGeminiRequest): GeminiReply =>
    r.action === "streamGenerateContent" ? fn(r) : { kind: "text", chunks: ["side"] };

describe("gemini-cli backend with the real gemini CLI", () => {
  let fake: FakeGemini;
  let home: string;
  let dataDir: string;
  let backend: GeminiCliBackend;

  const make = (extra: Record<string, unknown> = {}) =>
    geminiCliBackend.create(
      "gemini",
      geminiCliOptionsSchema.parse({
        command: GEMINI_BIN,
        env: geminiEnv({ baseUrl: fake.baseUrl, home }),
        timeoutSeconds: 60,
        killGraceSeconds: 1,
        warm: { enabled: false },
        ...extra,
      }),
      { logger, dataDir },
    ) as GeminiCliBackend;

  before(async () => {
    fake = await startFakeGemini();
    home = mkdtempSync(path.join(tmpdir(), "cb-gemini-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-gemini-data-"));
    backend = make();
  });

  after(async () => {
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  cliBackendContract<GeminiReply>({
    cli: "gemini",
    backend: () => backend,
    make,
    missing: (command) =>
      geminiCliBackend.create("nope", geminiCliOptionsSchema.parse({ command }), { logger, dataDir }),
    dataDir: () => dataDir,
    reply: (r) => fake.setScript(mainTurn(() => r)),
    requests: () => fake.turnCalls().length,
    turns: () => fake.turnCalls().length,
    version: /^\d+\.\d+/,
    unknownSession: /Error resuming session|Invalid session identifier|No previous sessions found/,
    sessionFiles: (id) =>
      findFiles(
        path.join(home, ".gemini", "tmp"),
        (n) => n.startsWith("session-") && n.includes(id.slice(0, 8)),
      ).filter((f) => readFileSync(f, "utf8").includes(id)),
    sessionFilesWhere: "~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl",
    timeoutSeconds: 4,
  });

  test("a text turn streams deltas, usage, a session and done; the bootstrap is the system instruction", async () => {
    fake.setScript(
      mainTurn(() => ({
        kind: "text",
        chunks: ["The answer ", "is ", "81."],
        delayMs: 5,
        promptTokens: 200,
        outputTokens: 7,
      })),
    );
    const n0 = fake.turnCalls().length;
    const evs = await collect(
      backend.run(turnInput("conv-basic", "what is 9 * 9", { system: "BOOTSTRAP-basic: you are Pebble." })),
    );
    assertEndsOnce(evs);
    assert.deepEqual(evs.at(-1), { type: "done", finishReason: "stop" });
    assert.ok(evs.filter((e) => e.type === "text").length >= 3, "several text deltas");
    assert.equal(textOf(evs), "The answer is 81.");
    const sid = sessionOf(evs);
    assert.match(sid ?? "", /^[0-9a-f-]{36}$/);
    assert.ok(
      evs.findIndex((e) => e.type === "session") < evs.findIndex((e) => e.type === "text"),
      "session is known before the first text",
    );
    const usage = evs.find((e) => e.type === "usage") as Extract<BackendEvent, { type: "usage" }> | undefined;
    assert.ok(usage, "usage reported");
    // stats add up every model call of the turn (the routing side call included).
    assert.ok(usage.usage.promptTokens >= 200 && usage.usage.completionTokens >= 7, JSON.stringify(usage.usage));
    assert.equal(usage.usage.totalTokens, usage.usage.promptTokens + usage.usage.completionTokens);

    const calls = fake.turnCalls().slice(n0);
    assert.equal(calls.length, 1, "one model turn");
    assert.equal(
      calls[0]!.systemText,
      "BOOTSTRAP-basic: you are Pebble.",
      "GEMINI_SYSTEM_MD replaces the system instruction",
    );
    assert.match(calls[0]!.lastUserText, /what is 9 \* 9/);
    assert.deepEqual(
      fake.unknown.map((u) => u.path),
      [],
      "no unknown endpoints called",
    );
  });

  test("turn 2 resumes the session: turn 1's history plus only the new message, bootstrap on both turns", async () => {
    fake.setScript(
      mainTurn((r) => ({ kind: "text", chunks: [r.lastUserText.includes("second") ? "Second " : "First ", "reply."] })),
    );
    const n0 = fake.turnCalls().length;
    const t1 = await collect(backend.run(turnInput("conv-resume", "first question", { system: "BOOT-ONE" })));
    assertEndsOnce(t1);
    const sid = sessionOf(t1)!;
    const t2 = await collect(
      backend.run(turnInput("conv-resume", "second question", { system: "BOOT-TWO", sessionId: sid })),
    );
    assertEndsOnce(t2);
    assert.equal(t2.at(-1)?.type, "done", JSON.stringify(errorOf(t2)));
    assert.equal(sessionOf(t2), sid, "same session id");
    assert.equal(textOf(t2), "Second reply.");
    const [r1, r2] = fake.turnCalls().slice(n0);
    assert.ok(r1 && r2);
    assert.equal(r1.systemText, "BOOT-ONE");
    assert.equal(r2.systemText, "BOOT-TWO", "bootstrap applied again on the resumed turn");
    const d2 = dialogue(r2);
    assert.equal(d2.length, 3, JSON.stringify(d2.map(([r, t]) => [r, t.slice(-40)])));
    assert.equal(d2[0]![0], "user");
    assert.match(d2[0]![1], /first question/);
    assert.deepEqual(d2[1], ["model", "First reply."]);
    assert.equal(d2[2]![0], "user");
    assert.match(d2[2]![1], /^second question/);
    assert.ok(!d2[2]![1].includes("first question"), "only the new message is added");
  });

  test("context mode: the bootstrap goes to GEMINI.md and reaches the first user content on every turn", async () => {
    const ctx = make({ systemPromptMode: "context" });
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["ok"] })));
    const n0 = fake.turnCalls().length;
    const t1 = await collect(ctx.run(turnInput("conv-context", "hello", { system: "CTX-BOOT-ONE" })));
    assertEndsOnce(t1);
    const t2 = await collect(
      ctx.run(turnInput("conv-context", "again", { system: "CTX-BOOT-TWO", sessionId: sessionOf(t1) })),
    );
    assertEndsOnce(t2);
    assert.equal(t2.at(-1)?.type, "done");
    const [r1, r2] = fake.turnCalls().slice(n0);
    assert.ok(r1 && r2);
    assert.match(r1.systemText, /Gemini CLI/, "gemini's own system prompt stays");
    assert.ok(!r1.systemText.includes("CTX-BOOT"));
    assert.match(dialogue(r1)[0]![1], /CTX-BOOT-ONE/);
    const first2 = dialogue(r2)[0]![1];
    assert.match(first2, /CTX-BOOT-TWO/, "rewritten GEMINI.md is re-read on the resumed turn");
    assert.ok(!first2.includes("CTX-BOOT-ONE"));
  });

  test("context mode never overwrites a GEMINI.md that is not the bridge's", async () => {
    const cwd = mkdtempSync(path.join(dataDir, "own-md-"));
    writeFileSync(path.join(cwd, "GEMINI.md"), "USER-OWN-NOTES\n");
    const ctx = make({ systemPromptMode: "context" });
    fake.setScript(mainTurn(() => ({ kind: "text", chunks: ["ok"] })));
    const n0 = fake.turnCalls().length;
    const evs = await collect(ctx.run(turnInput("conv-own-md", "hello", { system: "BRIDGE-BOOT", cwd })));
    assertEndsOnce(evs);
    assert.equal(readFileSync(path.join(cwd, "GEMINI.md"), "utf8"), "USER-OWN-NOTES\n");
    const r = fake.turnCalls().slice(n0)[0]!;
    assert.equal(r.systemText, "BRIDGE-BOOT", "fell back to GEMINI_SYSTEM_MD");
    assert.ok(!readFileSync(path.join(cwd, "GEMINI.md"), "utf8").startsWith(GEMINI_MD_MARKER));
  });

  test("gemini's own tool use shows as tool_activity and the answer continues after it", async () => {
    fake.setScript(
      mainTurn((r) =>
        JSON.stringify(r.body?.contents ?? []).includes("functionResponse")
          ? { kind: "text", chunks: ["The file says ", "hi."] }
          : {
              kind: "text",
              chunks: ["Let me look."],
              functionCalls: [{ name: "read_file", args: { file_path: "notes.txt" } }],
            },
      ),
    );
    const cwd = mkdtempSync(path.join(dataDir, "tool-"));
    writeFileSync(path.join(cwd, "notes.txt"), "hi\n");
    const evs = await collect(backend.run(turnInput("conv-tool", "read notes.txt", { cwd })));
    assertEndsOnce(evs);
    const acts = evs.filter((e) => e.type === "tool_activity");
    assert.deepEqual(
      acts.map((a) => [a.name, a.status]),
      [
        ["read_file", "started"],
        ["read_file", "completed"],
      ],
    );
    assert.equal((acts[0] as { detail?: string }).detail, "notes.txt");
    assert.equal(textOf(evs), "Let me look.\n\nThe file says hi.");
  });

  test("two conversations in parallel stay apart, on their first and their resumed turns", async () => {
    fake.setScript(
      mainTurn((r) => ({
        kind: "text",
        chunks: [r.lastUserText.includes("alpha") ? "A" : "B", "-", r.lastUserText.includes("again") ? "2" : "1"],
        delayMs: 20,
      })),
    );
    const [a1, b1] = await Promise.all([
      collect(backend.run(turnInput("conv-par-A", "alpha start", { system: "SYS-A" }))),
      collect(backend.run(turnInput("conv-par-B", "beta start", { system: "SYS-B" }))),
    ]);
    assert.equal(textOf(a1), "A-1");
    assert.equal(textOf(b1), "B-1");
    const sa = sessionOf(a1)!;
    const sb = sessionOf(b1)!;
    assert.notEqual(sa, sb);
    const n0 = fake.turnCalls().length;
    const [a2, b2] = await Promise.all([
      collect(backend.run(turnInput("conv-par-A", "alpha again", { sessionId: sa, system: "SYS-A" }))),
      collect(backend.run(turnInput("conv-par-B", "beta again", { sessionId: sb, system: "SYS-B" }))),
    ]);
    assert.equal(textOf(a2), "A-2");
    assert.equal(textOf(b2), "B-2");
    const calls = fake.turnCalls().slice(n0);
    const reqA = calls.find((r) => r.lastUserText.includes("alpha again"))!;
    const reqB = calls.find((r) => r.lastUserText.includes("beta again"))!;
    assert.ok(reqA && reqB);
    assert.equal(reqA.systemText, "SYS-A");
    assert.equal(reqB.systemText, "SYS-B");
    const histA = JSON.stringify(dialogue(reqA).map(([r, t]) => [r, t.slice(-60)]));
    const histB = JSON.stringify(dialogue(reqB).map(([r, t]) => [r, t.slice(-60)]));
    assert.ok(histA.includes("alpha start") && !histA.includes("beta"), histA);
    assert.ok(histB.includes("beta start") && !histB.includes("alpha"), histB);
  });
});
