/**
 * The qwen-code backend driving the REAL `qwen` CLI (node_modules/.bin) against a fake OpenAI
 * chat-completions API on 127.0.0.1. Only the model API is faked.
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  qwenCodeBackend,
  qwenCodeOptionsSchema,
  parseQwenApiError,
  type QwenCodeBackend,
} from "../../src/backends/qwen-code/backend.js";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { QWEN_BIN, qwenEnv } from "../../testkit/fakes/cli-env.js";

import { assertEndsOnce, collect, errorOf, findFiles, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";
import { cliBackendContract } from "../helpers/cli-backend-contract.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .map((p) => (p && typeof p === "object" && typeof (p as any).text === "string" ? (p as any).text : ""))
      .join("\n");
  return "";
}

function systemText(req: RecordedRequest): string {
  const msgs: any[] = req.body?.messages ?? [];
  return msgs
    .filter((m) => m.role === "system")
    .map((m) => contentText(m.content))
    .join("\n");
}

/** The user/assistant messages of a request as [role, text], without qwen's own context prelude. */
function dialogue(req: RecordedRequest): [string, string][] {
  const msgs: any[] = req.body?.messages ?? [];
  return msgs
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m): [string, string] => [m.role, contentText(m.content).trim()])
    .filter(
      ([, t]) => t !== "" && !/setting up the context for our chat/.test(t) && t !== "Got it. Thanks for the context!",
    );
}

describe("qwen-code backend with the real qwen CLI", () => {
  let fake: FakeOpenAI;
  let home: string;
  let dataDir: string;
  let backend: QwenCodeBackend;

  const make = (extra: Record<string, unknown> = {}) =>
    qwenCodeBackend.create(
      "qwen",
      qwenCodeOptionsSchema.parse({
        command: QWEN_BIN,
        env: qwenEnv({ baseUrl: fake.url, home }),
        timeoutSeconds: 60,
        killGraceSeconds: 1,
        warm: { enabled: false },
        ...extra,
      }),
      { logger, dataDir },
    ) as QwenCodeBackend;

  before(async () => {
    fake = await startFakeOpenAI();
    home = mkdtempSync(path.join(tmpdir(), "cb-qwen-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-qwen-data-"));
    backend = make();
  });

  after(async () => {
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  cliBackendContract<Reply>({
    cli: "qwen",
    backend: () => backend,
    make,
    missing: (command) => qwenCodeBackend.create("nope", qwenCodeOptionsSchema.parse({ command }), { logger, dataDir }),
    dataDir: () => dataDir,
    reply: (r) => fake.setScript(() => r),
    requests: () => fake.requests.length,
    turns: () => fake.mainRequests().length,
    version: /^\d+\.\d+\.\d+/,
    unknownSession: /No saved session found with ID/,
    sessionFiles: (id) => findFiles(path.join(home, ".qwen", "projects"), (n) => n === `${id}.jsonl`),
    sessionFilesWhere: "~/.qwen/projects/<cwd>/chats/<id>.jsonl",
    timeoutSeconds: 3,
  });

  test("a text turn streams deltas, reasoning, usage, a session and done; the bootstrap replaces qwen's prompt", async () => {
    // prompt_tokens includes the cached ones (OpenAI semantics): not added twice.
    const usage = { prompt_tokens: 120, completion_tokens: 9, prompt_tokens_details: { cached_tokens: 30 } };
    fake.setScript(() => ({
      kind: "text",
      reasoning: ["Let me ", "think."],
      chunks: ["The answer ", "is ", "81."],
      delayMs: 5,
      usage,
    }));
    const n0 = fake.mainRequests().length;
    const evs = await collect(
      backend.run(turnInput("conv-basic", "what is 9 * 9", { system: "BOOTSTRAP-basic: you are Pebble." })),
    );
    assertEndsOnce(evs);
    assert.deepEqual(evs.at(-1), { type: "done", finishReason: "stop" });
    assert.ok(evs.filter((e) => e.type === "text").length >= 3, "several text deltas");
    assert.equal(textOf(evs), "The answer is 81.", "streamed text, not repeated from the whole assistant message");
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
    assert.deepEqual(
      evs.find((e) => e.type === "usage"),
      { type: "usage", usage: { promptTokens: 120, completionTokens: 9, totalTokens: 129, cachedTokens: 30 } },
    );

    const calls = fake.mainRequests().slice(n0);
    assert.equal(calls.length, 1, "one model call (auto-memory side call off)");
    const req = calls[0]!;
    const sys = systemText(req);
    assert.ok(sys.startsWith("BOOTSTRAP-basic: you are Pebble."), sys.slice(0, 200));
    assert.ok(!sys.includes("You are Qwen Code"), "replace mode drops qwen's own prompt");
    assert.match(req.lastUser, /what is 9 \* 9/);
    const toolNames: string[] = (req.body.tools ?? []).map((t: any) => t.function?.name);
    assert.ok(toolNames.includes("read_file"), `read-only tools offered: ${toolNames.join(",")}`);
    for (const t of ["run_shell_command", "write_file", "edit"]) assert.ok(!toolNames.includes(t), `${t} not offered`);
    assert.deepEqual(readdirSync(path.join(dataDir, "tmp")), [], "the per-turn system prompt file is removed");
    const other = fake.requests.filter((r) => !r.path.endsWith("/chat/completions"));
    assert.deepEqual(
      other.map((r) => `${r.method} ${r.path}`),
      [],
      "no other endpoint called",
    );
  });

  test("systemPromptMode append keeps qwen's prompt and adds the bootstrap", async () => {
    fake.setScript(() => ({ kind: "text", chunks: ["ok"] }));
    const appending = make({ systemPromptMode: "append" });
    const n0 = fake.mainRequests().length;
    const evs = await collect(appending.run(turnInput("conv-append", "hi", { system: "APPENDED-BOOT-77" })));
    assertEndsOnce(evs);
    assert.equal(evs.at(-1)?.type, "done");
    const sys = systemText(fake.mainRequests().slice(n0)[0]!);
    assert.ok(sys.includes("You are Qwen Code"), "qwen's own prompt kept");
    assert.ok(sys.trimEnd().endsWith("APPENDED-BOOT-77"), sys.slice(-200));
  });

  test("turn 2 resumes the session: history from qwen's transcript, only the new message added, bootstrap on both turns", async () => {
    fake.setScript((r) => ({ kind: "text", chunks: [r.lastUser.includes("second") ? "Second " : "First ", "reply."] }));
    const n0 = fake.mainRequests().length;
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

    const [r1, r2] = fake.mainRequests().slice(n0);
    assert.ok(r1 && r2);
    assert.ok(systemText(r1).includes("BOOT-ONE"));
    assert.ok(systemText(r2).includes("BOOT-TWO"), "bootstrap sent again on the resumed turn");
    assert.ok(!systemText(r2).includes("BOOT-ONE"), "the system text is per turn, not stored in the session");
    const d2 = dialogue(r2);
    assert.deepEqual(
      d2.map(([role]) => role),
      ["user", "assistant", "user"],
      JSON.stringify(d2),
    );
    assert.match(d2[0]![1], /first question/);
    assert.equal(d2[1]![1], "First reply.");
    assert.match(d2[2]![1], /second question/);
    assert.ok(!d2[2]![1].includes("first question"), "only the new message is added");
  });

  test("a stream cut mid-answer: the partial text is streamed, then a retryable upstream_error", async () => {
    fake.setScript(() => ({ kind: "reset", afterChunks: ["partial ", "text "] }));
    const evs = await collect(backend.run(turnInput("conv-reset", "hi")));
    assertEndsOnce(evs);
    assert.equal(textOf(evs), "partial text ");
    const err = errorOf(evs);
    assert.equal(err?.code, "upstream_error", JSON.stringify(evs));
    assert.ok(!textOf(evs).includes("API Error"));
    assert.equal(err!.retryable, true, err!.message);
  });

  test("qwen's own tools show as tool_activity; a shell command is refused by the safe default", async () => {
    const cwd = mkdtempSync(path.join(dataDir, "tool-"));
    writeFileSync(path.join(cwd, "notes.txt"), "hi from notes\n");
    const marker = path.join(cwd, "pwned.txt");
    fake.setScript((r) => {
      const msgs: any[] = r.body?.messages ?? [];
      const toolResults = msgs.filter((m) => m.role === "tool").length;
      if (toolResults === 0) {
        return {
          kind: "tool_calls",
          calls: [
            { id: "call_read1", name: "read_file", arguments: { file_path: path.join(cwd, "notes.txt") } },
            { id: "call_sh1", name: "run_shell_command", arguments: { command: `touch ${marker}` } },
          ],
        };
      }
      return { kind: "text", chunks: ["The file says ", "hi."] };
    });
    const evs = await collect(backend.run(turnInput("conv-tool", "read notes.txt", { cwd })));
    assertEndsOnce(evs);
    assert.equal(evs.at(-1)?.type, "done");
    const acts = evs.filter((e): e is Extract<BackendEvent, { type: "tool_activity" }> => e.type === "tool_activity");
    const read = acts.filter((a) => a.name === "read_file").map((a) => a.status);
    const shell = acts.filter((a) => a.name === "run_shell_command").map((a) => a.status);
    assert.deepEqual(read, ["started", "completed"], JSON.stringify(acts));
    assert.deepEqual(shell, ["started", "failed"], JSON.stringify(acts));
    assert.equal(textOf(evs), "The file says hi.");
    assert.equal(existsSync(marker), false, "the command did not run");
    const last = fake.mainRequests().at(-1)!;
    const toolMsgs = (last.body.messages as any[]).filter((m) => m.role === "tool").map((m) => contentText(m.content));
    assert.ok(
      toolMsgs.some((t) => t.includes("hi from notes")),
      "the file content reached the model",
    );
  });

  test("parseQwenApiError reads the status from qwen's formats", () => {
    assert.deepEqual(parseQwenApiError("[API Error: 400 fake says no]"), { message: "400 fake says no", status: 400 });
    assert.deepEqual(parseQwenApiError("[API Error: over quota (Status: 429)]\nPossible quota limitations in place"), {
      message: "over quota (Status: 429)",
      status: 429,
    });
    assert.deepEqual(parseQwenApiError("[API Error: terminated (cause: other side closed)]"), {
      message: "terminated (cause: other side closed)",
    });
  });
});
