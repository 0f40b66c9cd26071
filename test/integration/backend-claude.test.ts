/**
 * The claude-code backend driving the REAL `claude` CLI (node_modules/.bin) against a fake
 * Anthropic Messages API on 127.0.0.1. Only the model API is faked.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  claudeCodeBackend,
  claudeCodeOptionsSchema,
  type ClaudeCodeBackend,
} from "../../src/backends/claude-code/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import {
  anthropicText,
  startFakeAnthropic,
  type AnthropicReply,
  type FakeAnthropic,
  type RecordedRequest,
} from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";

import { assertEndsOnce, collect, findFiles, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";
import { cliBackendContract } from "../helpers/cli-backend-contract.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

function systemText(req: RecordedRequest): string {
  const s = req.body?.system;
  return typeof s === "string" ? s : Array.isArray(s) ? s.map((b: any) => b?.text ?? "").join("\n") : "";
}

/** The user/assistant messages of a request as [role, text] (tool-only and claude's own system rows skipped). */
function dialogue(req: RecordedRequest): [string, string][] {
  const msgs: any[] = req.body?.messages ?? [];
  return msgs
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m): [string, string] => [m.role, anthropicText(m.content)])
    .filter(([, t]) => t.trim() !== "");
}

describe("claude-code backend with the real claude CLI", () => {
  let fake: FakeAnthropic;
  let home: string;
  let dataDir: string;
  let backend: ClaudeCodeBackend;

  const make = (extra: Record<string, unknown> = {}) =>
    claudeCodeBackend.create(
      "claude",
      claudeCodeOptionsSchema.parse({
        command: CLAUDE_BIN,
        env: claudeEnv({ baseUrl: fake.baseUrl, home }),
        timeoutSeconds: 60,
        killGraceSeconds: 1,
        warm: { enabled: false },
        ...extra,
      }),
      { logger, dataDir },
    ) as ClaudeCodeBackend;

  before(async () => {
    fake = await startFakeAnthropic();
    home = mkdtempSync(path.join(tmpdir(), "cb-claude-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-claude-data-"));
    backend = make();
  });

  after(async () => {
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  cliBackendContract<AnthropicReply>({
    cli: "claude",
    backend: () => backend,
    make,
    missing: (command) =>
      claudeCodeBackend.create("nope", claudeCodeOptionsSchema.parse({ command }), { logger, dataDir }),
    dataDir: () => dataDir,
    reply: (r) => fake.setScript(() => r),
    refusal: (message) => ({ kind: "error", status: 400, errorType: "invalid_request_error", message }),
    requests: () => fake.messageCalls().length,
    turns: () => fake.messageCalls().length,
    version: /Claude Code/,
    unknownSession: /No conversation found with session ID/,
    sessionFiles: (id) => findFiles(path.join(home, ".claude", "projects"), (n) => n === `${id}.jsonl`),
    sessionFilesWhere: "CLAUDE_CONFIG_DIR/projects/<cwd>/<id>.jsonl",
    timeoutSeconds: 2,
  });

  test("a text turn streams deltas, reasoning, usage, a session and done", async () => {
    fake.setScript(() => ({
      kind: "text",
      thinking: ["Let me ", "think."],
      chunks: ["The answer ", "is ", "81."],
      delayMs: 5,
      inputTokens: 120,
      outputTokens: 9,
    }));
    const before = fake.messageCalls().length;
    const evs = await collect(
      backend.run(turnInput("conv-basic", "what is 9 * 9", { system: "BOOTSTRAP-basic: you are Pebble." })),
    );
    assertEndsOnce(evs);
    assert.deepEqual(evs.at(-1), { type: "done", finishReason: "stop" });
    const texts = evs.filter((e) => e.type === "text");
    assert.ok(texts.length >= 3, `several text deltas, got ${texts.length}`);
    assert.equal(textOf(evs), "The answer is 81.");
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
      "session is known before the first text",
    );
    const usage = evs.find((e) => e.type === "usage");
    assert.deepEqual(usage, { type: "usage", usage: { promptTokens: 120, completionTokens: 9, totalTokens: 129 } });

    const calls = fake.messageCalls().slice(before);
    assert.equal(calls.length, 1, "one model call");
    const req = calls[0]!;
    assert.ok(systemText(req).includes("BOOTSTRAP-basic: you are Pebble."), "bootstrap appended to the system prompt");
    assert.ok(systemText(req).includes("Claude Code"), "append mode keeps claude's own system prompt");
    assert.match(req.lastUserText, /what is 9 \* 9/);
    const toolNames: string[] = (req.body.tools ?? []).map((t: any) => t.name);
    assert.ok(toolNames.includes("Read"), "read-only tools offered");
    for (const t of ["Bash", "Edit", "Write"])
      assert.ok(!toolNames.includes(t), `${t} not offered by the safe default`);
    assert.equal(fake.unknown.length, 0, `unknown paths: ${fake.unknown.map((u) => u.path).join(", ")}`);
    assert.deepEqual(readdirSync(path.join(dataDir, "tmp")), [], "the per-turn system prompt file is removed");
  });

  test("systemPromptMode replace (flag value instead of a file) sends only the bootstrap as the system prompt", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["ok"] }));
    const replacing = make({ systemPromptMode: "replace", systemPromptFile: false });
    const n0 = fake.messageCalls().length;
    const evs = await collect(
      replacing.run(turnInput("conv-replace", "hi", { system: "--- ONLY-BOOT (starts with dashes)" })),
    );
    assertEndsOnce(evs);
    assert.equal(evs.at(-1)?.type, "done");
    const sys = systemText(fake.messageCalls().slice(n0)[0]!);
    assert.ok(sys.includes("--- ONLY-BOOT (starts with dashes)"), sys);
    assert.ok(!sys.includes("Claude Code"), "claude's own prompt replaced");
  });

  test("turn 2 resumes the session: history from the CLI's transcript, only the new message added, bootstrap on both turns", async () => {
    fake.setScript((r) => ({
      kind: "text",
      chunks: [r.lastUserText.includes("second") ? "Second " : "First ", "reply."],
    }));
    const n0 = fake.messageCalls().length;
    const t1 = await collect(backend.run(turnInput("conv-resume", "first question", { system: "BOOT-ONE" })));
    assertEndsOnce(t1);
    const sid = sessionOf(t1)!;
    assert.ok(sid);
    const t2 = await collect(
      backend.run(turnInput("conv-resume", "second question", { system: "BOOT-TWO", sessionId: sid })),
    );
    assertEndsOnce(t2);
    assert.equal(t2.at(-1)?.type, "done");
    assert.equal(sessionOf(t2), sid, "same session id confirmed");
    assert.equal(textOf(t2), "Second reply.");

    const [r1, r2] = fake.messageCalls().slice(n0);
    assert.ok(r1 && r2);
    assert.ok(systemText(r1).includes("BOOT-ONE"));
    assert.ok(systemText(r2).includes("BOOT-TWO"), "bootstrap sent again on the resumed turn");
    assert.ok(!systemText(r2).includes("BOOT-ONE"), "the system text is per turn, not stored in the session");
    const d2 = dialogue(r2);
    assert.equal(d2.length, 3, `user, assistant, user: ${JSON.stringify(d2)}`);
    assert.equal(d2[0]![0], "user");
    assert.match(d2[0]![1], /first question/);
    assert.deepEqual(d2[1], ["assistant", "First reply."]);
    assert.equal(d2[2]![0], "user");
    assert.match(d2[2]![1], /second question/);
    assert.ok(!d2[2]![1].includes("first question"), "only the new message is added");
  });

  test("claude's own tool use shows as tool_activity and the answer continues after it", async () => {
    let step = 0;
    fake.setScript((r) => {
      const hasResult = JSON.stringify(r.body?.messages ?? []).includes("tool_result");
      step++;
      return hasResult
        ? { kind: "text", chunks: ["The file says ", "hi."] }
        : {
            kind: "text",
            chunks: ["Let me look."],
            toolUses: [{ id: `toolu_${step}x`, name: "Read", input: { file_path: "notes.txt" } }],
          };
    });
    const cwd = mkdtempSync(path.join(dataDir, "tool-"));
    writeFileSync(path.join(cwd, "notes.txt"), "hi\n");
    const evs = await collect(backend.run(turnInput("conv-tool", "read notes.txt", { cwd })));
    assertEndsOnce(evs);
    const acts = evs.filter((e) => e.type === "tool_activity");
    assert.deepEqual(
      acts.map((a) => [a.name, a.status]),
      [
        ["Read", "started"],
        ["Read", "completed"],
      ],
    );
    assert.equal((acts[0] as { detail?: string }).detail, "notes.txt");
    assert.equal(textOf(evs), "Let me look.\n\nThe file says hi.");
  });

  test("two conversations in parallel stay apart, on their first and their resumed turns", async () => {
    fake.setScript((r) => ({
      kind: "text",
      chunks: [r.lastUserText.includes("alpha") ? "A" : "B", "-", r.lastUserText.includes("again") ? "2" : "1"],
      delayMs: 20,
    }));
    const [a1, b1] = await Promise.all([
      collect(backend.run(turnInput("conv-par-A", "alpha start"))),
      collect(backend.run(turnInput("conv-par-B", "beta start"))),
    ]);
    assert.equal(textOf(a1), "A-1");
    assert.equal(textOf(b1), "B-1");
    const sa = sessionOf(a1)!;
    const sb = sessionOf(b1)!;
    assert.notEqual(sa, sb);
    const n0 = fake.messageCalls().length;
    const [a2, b2] = await Promise.all([
      collect(backend.run(turnInput("conv-par-A", "alpha again", { sessionId: sa }))),
      collect(backend.run(turnInput("conv-par-B", "beta again", { sessionId: sb }))),
    ]);
    assert.equal(textOf(a2), "A-2");
    assert.equal(textOf(b2), "B-2");
    const calls = fake.messageCalls().slice(n0);
    const reqA = calls.find((r) => r.lastUserText.includes("alpha again"))!;
    const reqB = calls.find((r) => r.lastUserText.includes("beta again"))!;
    assert.ok(reqA && reqB);
    const histA = JSON.stringify(dialogue(reqA));
    const histB = JSON.stringify(dialogue(reqB));
    assert.ok(histA.includes("alpha start") && !histA.includes("beta"), histA);
    assert.ok(histB.includes("beta start") && !histB.includes("alpha"), histB);
    const dirs = readdirSync(path.join(dataDir, "work"));
    assert.ok(dirs.length >= 2, "each conversation has its own working directory");
  });
});
