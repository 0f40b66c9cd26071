/**
 * The codex backend driving the REAL `codex` CLI (node_modules/.bin) against a fake OpenAI
 * Responses API on 127.0.0.1. Only the model API is faked.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { codexBackend, codexRolloutTotals, type CodexBackend } from "../../src/backends/codex/backend.js";
import { codexArgs, codexOptionsSchema } from "../../src/backends/codex/cli-args.js";
import { codexError } from "../../src/backends/codex/exec-events.js";
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

import { assertEndsOnce, collect, errorOf, findFiles, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";
import { cliBackendContract } from "../helpers/cli-backend-contract.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

const usageOf = (evs: BackendEvent[]) =>
  evs.find((e): e is Extract<BackendEvent, { type: "usage" }> => e.type === "usage")?.usage;

/** Texts of the developer messages (codex puts its base instructions there; `instructions` stays empty). */
function developerTexts(req: RecordedResponsesRequest): string[] {
  const input: any[] = req.body?.input ?? [];
  return input.filter((i) => i?.role === "developer").map((i) => responsesText(i.content));
}

/** user/assistant messages without codex's own context blocks (<environment_context>, AGENTS.md). */
function dialogue(req: RecordedResponsesRequest): [string, string][] {
  return responsesDialogue(req.body)
    .filter(([role]) => role === "user" || role === "assistant")
    .filter(([, t]) => !t.startsWith("<environment_context>") && !t.startsWith("# AGENTS.md"))
    .map(([r, t]): [string, string] => [r, t.trim()]);
}

describe("codex backend with the real codex CLI", () => {
  let fake: FakeResponses;
  let home: string;
  let dataDir: string;
  let backend: CodexBackend;

  const make = (extra: Record<string, unknown> = {}) =>
    codexBackend.create(
      "codex",
      // The cold path (`codex exec` per turn); warm app-servers: backend-codex-warm.test.ts.
      codexOptionsSchema.parse({
        command: CODEX_BIN,
        env: codexEnv({ baseUrl: fake.url, home }),
        timeoutSeconds: 60,
        killGraceSeconds: 1,
        warm: { enabled: false },
        ...extra,
      }),
      { logger, dataDir },
    ) as CodexBackend;

  before(async () => {
    fake = await startFakeResponses();
    home = mkdtempSync(path.join(tmpdir(), "cb-codex-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-codex-data-"));
    backend = make();
  });

  after(async () => {
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  cliBackendContract<ResponsesReply>({
    cli: "codex",
    backend: () => backend,
    make,
    missing: (command) =>
      codexBackend.create("nope", codexOptionsSchema.parse({ command, warm: { enabled: false } }), { logger, dataDir }),
    dataDir: () => dataDir,
    reply: (r) => fake.setScript(() => r),
    requests: () => fake.requests.length,
    turns: () => fake.responseCalls().length,
    version: /codex-cli \d+\.\d+/,
    unknownSession: /no rollout found for thread id/,
    sessionFiles: (id) => findFiles(path.join(home, ".codex", "sessions"), (n) => n.endsWith(`-${id}.jsonl`)),
    sessionFilesWhere: "CODEX_HOME/sessions/YYYY/MM/DD/",
    timeoutSeconds: 2,
  });

  test("argv: prompt on stdin, safe defaults, resume as a subcommand", () => {
    const opts = codexOptionsSchema.parse({});
    const a1 = codexArgs(opts, { model: "default", session: { key: "k", turn: 0 } }, "/d/instructions.md");
    assert.deepEqual(a1.slice(0, 2), ["exec", "--json"]);
    assert.equal(a1.at(-1), "-");
    for (const c of [
      'sandbox_mode="read-only"',
      'approval_policy="never"',
      "features.shell_tool=false",
      'model_instructions_file="/d/instructions.md"',
    ]) {
      assert.ok(a1.includes(c), `${c} in ${a1.join(" ")}`);
    }
    assert.ok(!a1.includes("-m"), "default model: no -m");
    const id = randomUUID();
    const a2 = codexArgs(opts, { model: "gpt-x", session: { key: "k", turn: 1, backendSessionId: id } });
    assert.deepEqual(a2.slice(0, 3), ["exec", "resume", "--json"]);
    assert.deepEqual(a2.slice(-2), [id, "-"]);
    assert.equal(a2[a2.indexOf("-m") + 1], "gpt-x");
  });

  test("a text turn gives the agent message, reasoning, usage, a session and done; the bootstrap replaces codex's instructions", async () => {
    fake.setScript(() => ({
      kind: "text",
      reasoning: ["Let me ", "think."],
      chunks: ["The answer ", "is ", "81."],
      delayMs: 5,
      inputTokens: 100,
      cachedTokens: 30,
      outputTokens: 9,
      reasoningTokens: 4,
    }));
    const n0 = fake.responseCalls().length;
    const evs = await collect(
      backend.run(turnInput("conv-basic", "what is 9 * 9", { system: "BOOTSTRAP-basic: you are Pebble." })),
    );
    assertEndsOnce(evs);
    assert.deepEqual(evs.at(-1), { type: "done", finishReason: "stop" });
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
      "session is known before the text",
    );
    assert.deepEqual(usageOf(evs), {
      promptTokens: 100,
      completionTokens: 9,
      totalTokens: 109,
      cachedTokens: 30,
      reasoningTokens: 4,
    });

    const calls = fake.responseCalls().slice(n0);
    assert.equal(calls.length, 1, "one model call");
    const req = calls[0]!;
    const dev = developerTexts(req);
    assert.equal(dev[0]?.trim(), "BOOTSTRAP-basic: you are Pebble.", "the bootstrap is the first developer message");
    assert.ok(
      !JSON.stringify(req.body).includes("You are a coding agent running in the Codex CLI"),
      "codex's own base instructions replaced",
    );
    assert.match(req.lastUserText, /what is 9 \* 9/);
    const toolNames: string[] = (req.body.tools ?? []).map((t: any) => t.name ?? t.type);
    for (const t of ["exec_command", "shell", "apply_patch"])
      assert.ok(!toolNames.includes(t), `${t} not offered: ${toolNames.join(",")}`);
    assert.deepEqual(
      fake.requests.filter((r) => r.path !== "/v1/responses").map((r) => `${r.method} ${r.path}`),
      [],
      "no other endpoint called",
    );
    assert.deepEqual(readdirSync(path.join(dataDir, "tmp")), [], "the per-turn instructions file is removed");
  });

  test("turn 2 resumes the thread: history from codex's rollout, only the new message added, bootstrap per turn, per-turn usage", async () => {
    fake.setScript((r) => ({
      kind: "text",
      chunks: [r.lastUserText.includes("second") ? "Second " : "First ", "reply."],
      inputTokens: 42,
      outputTokens: 6,
    }));
    const n0 = fake.responseCalls().length;
    const t1 = await collect(backend.run(turnInput("conv-resume", "first question", { system: "BOOT-ONE" })));
    assertEndsOnce(t1);
    assert.deepEqual(usageOf(t1), { promptTokens: 42, completionTokens: 6, totalTokens: 48 });
    const sid = sessionOf(t1)!;
    assert.ok(sid);
    const t2 = await collect(
      backend.run(turnInput("conv-resume", "second question", { system: "BOOT-TWO", sessionId: sid })),
    );
    assertEndsOnce(t2);
    assert.equal(t2.at(-1)?.type, "done");
    assert.equal(sessionOf(t2), sid, "same thread id confirmed");
    assert.equal(textOf(t2), "Second reply.");
    // codex reports the thread's running total (84/12); the backend reports this turn's share.
    assert.deepEqual(usageOf(t2), { promptTokens: 42, completionTokens: 6, totalTokens: 48 });

    const [r1, r2] = fake.responseCalls().slice(n0);
    assert.ok(r1 && r2);
    assert.equal(developerTexts(r1)[0]?.trim(), "BOOT-ONE");
    assert.equal(developerTexts(r2)[0]?.trim(), "BOOT-TWO", "bootstrap sent again on the resumed turn");
    assert.ok(!JSON.stringify(r2.body).includes("BOOT-ONE"), "the instructions are per turn, not stored in the thread");
    assert.deepEqual(dialogue(r2), [
      ["user", "first question"],
      ["assistant", "First reply."],
      ["user", "second question"],
    ]);

    // A new backend instance (bridge restarted) finds the baseline in the rollout file.
    const fresh = make();
    const t3 = await collect(fresh.run(turnInput("conv-resume", "third question", { sessionId: sid })));
    assertEndsOnce(t3);
    assert.deepEqual(usageOf(t3), { promptTokens: 42, completionTokens: 6, totalTokens: 48 });
    assert.deepEqual(await codexRolloutTotals(path.join(home, ".codex"), sid), {
      input_tokens: 126,
      cached_input_tokens: 0,
      output_tokens: 18,
      reasoning_output_tokens: 0,
    });
  });

  test("a session id that is not a UUID is refused before codex runs (codex would start a new thread)", async () => {
    const n0 = fake.requests.length;
    const evs = await collect(backend.run(turnInput("conv-notuuid", "hello", { sessionId: "not-a-uuid" })));
    assertEndsOnce(evs);
    assert.equal(errorOf(evs)?.code, "session_not_found");
    assert.equal(fake.requests.length, n0);
  });

  test("a response.failed stream becomes a retryable upstream_error", async () => {
    fake.setScript(() => ({ kind: "failed", message: "fake broke midway xyz" }));
    const evs = await collect(backend.run(turnInput("conv-failed", "hi")));
    assertEndsOnce(evs);
    const err = errorOf(evs);
    assert.equal(err?.code, "upstream_error");
    assert.match(err!.message, /fake broke midway xyz/);
    assert.equal(err!.retryable, true);
  });

  test("safe default: no command tool; a model calling one anyway gets 'unsupported call' and nothing runs", async () => {
    const cwd = mkdtempSync(path.join(dataDir, "tool-"));
    const marker = path.join(cwd, "pwned.txt");
    fake.setScript((r) => {
      const last = (r.body?.input as any[]).at(-1);
      if (last?.type === "function_call_output")
        return { kind: "text", chunks: ["tool said: ", String(last.output).slice(0, 100)] };
      return {
        kind: "text",
        chunks: [],
        functionCalls: [{ name: "exec_command", arguments: { cmd: `touch ${marker}` } }],
      };
    });
    const evs = await collect(backend.run(turnInput("conv-noshell", "run it", { cwd })));
    assertEndsOnce(evs);
    assert.equal(evs.at(-1)?.type, "done");
    assert.match(textOf(evs), /unsupported call: exec_command/);
    assert.equal(existsSync(marker), false);
  });

  test("shellTool: commands show as tool_activity and run in the read-only sandbox", async () => {
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
      if (outputs.length === 1)
        return {
          kind: "text",
          chunks: ["Let me look."],
          functionCalls: [{ name: "exec_command", arguments: { cmd: `touch ${marker}` } }],
        };
      return { kind: "text", chunks: ["done"] };
    });
    const shell = make({ shellTool: true });
    const n0 = fake.responseCalls().length;
    const evs = await collect(shell.run(turnInput("conv-shell", "run it", { cwd })));
    assertEndsOnce(evs);
    assert.equal(evs.at(-1)?.type, "done");
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
    assert.equal(textOf(evs), "Let me look.\n\ndone", "separate agent messages are joined");
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
    assert.ok(
      outputs.some((o) => /Read-only file system|Permission denied|Operation not permitted/.test(o)),
      outputs.join("\n"),
    );
    assert.equal(existsSync(marker), false, "the sandbox kept the file system read-only");
  });

  test("codexError reads codex's error formats", () => {
    const json = codexError(
      "codex",
      '{"error":{"message":"bad thing","type":"invalid_request_error","param":null,"code":null}}',
    );
    assert.equal(json.message, "codex: bad thing (model API status 400)");
    assert.equal(json.retryable, false);
    const e401 = codexError(
      "codex",
      "unexpected status 401 Unauthorized: bad key, url: http://127.0.0.1:1/v1/responses",
    );
    assert.equal(e401.message, "codex: unexpected status 401 Unauthorized: bad key");
    assert.equal(e401.retryable, false);
    const e429 = codexError("codex", "exceeded retry limit, last status: 429 Too Many Requests");
    assert.equal(e429.status, 429);
    assert.equal(e429.retryable, true);
    assert.equal(
      codexError("codex", "We’re currently experiencing high demand, which may cause temporary errors.").retryable,
      true,
    );
  });
});
