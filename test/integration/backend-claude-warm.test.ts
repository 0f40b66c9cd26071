/**
 * The claude-code backend in WARM mode (src/backends/warm): one long-lived `claude --input-format
 * stream-json` process per conversation, driving the REAL `claude` CLI against a fake Anthropic
 * Messages API on 127.0.0.1. The CLI contract every backend keeps runs here warm (its cold run is
 * in backend-claude.test.ts), plus what only Claude's warm mode does.
 */
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
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
  type RecordedRequest,
} from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { assertEndsOnce, collect, findFiles, pidGone, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";
import { backendFixture } from "../helpers/backend-fixture.js";
import { cliBackendContract } from "../helpers/cli-backend-contract.js";
import { warmProcesses } from "../../src/backends/warm/registry.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

function systemText(req: RecordedRequest): string {
  const s = req.body?.system;
  return typeof s === "string" ? s : Array.isArray(s) ? s.map((b: any) => b?.text ?? "").join("\n") : "";
}

describe("claude-code backend, warm, with the real claude CLI", () => {
  const fx = backendFixture({
    name: "claudew",
    startFake: () => startFakeAnthropic(),
    create: ({ fake, home, dataDir }, extra) =>
      claudeCodeBackend.create(
        "claude",
        claudeCodeOptionsSchema.parse({
          command: CLAUDE_BIN,
          env: claudeEnv({ baseUrl: fake.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          ...extra,
        }),
        { logger, dataDir },
      ) as ClaudeCodeBackend,
  });

  test("warm is the default: the option parses to enabled with its limits", () => {
    const o = claudeCodeOptionsSchema.parse({});
    assert.deepEqual(o.warm, { enabled: true, idleSeconds: 600, maxProcesses: 4, interruptGraceSeconds: 2 });
    assert.equal(claudeCodeOptionsSchema.parse({ warm: { enabled: false } }).warm.enabled, false);
    assert.throws(() => claudeCodeOptionsSchema.parse({ warm: { maxProcesses: 0 } }));
  });

  cliBackendContract<AnthropicReply>({
    cli: "claude",
    warm: true,
    backend: () => fx.backend,
    make: (extra) => fx.make(extra),
    missing: (command) => fx.make({ command }),
    dataDir: () => fx.dataDir,
    reply: (r) => fx.fake.setScript(() => r),
    refusal: (message) => ({ kind: "error", status: 400, errorType: "invalid_request_error", message }),
    requests: () => fx.fake.messageCalls().length,
    turns: () => fx.fake.messageCalls().length,
    version: /Claude Code/,
    unknownSession: /No conversation found with session ID/,
    sessionFiles: (id) => findFiles(path.join(fx.home, ".claude", "projects"), (n) => n === `${id}.jsonl`),
    sessionFilesWhere: "CLAUDE_CONFIG_DIR/projects/<cwd>/<id>.jsonl",
    timeoutSeconds: 3,
  });

  test("the bootstrap reaches the model on every warm turn; a changed bootstrap starts a new process on the same session", async () => {
    fx.fake.setScript((r) => ({ kind: "text", chunks: [`re: ${r.lastUserText.slice(0, 12)}`] }));
    const n0 = fx.fake.messageCalls().length;
    const t1 = await collect(
      fx.backend.run(turnInput("conv-boot", "first words", { system: "BOOT-ONE you are Pebble" })),
    );
    assert.equal(t1.at(-1)?.type, "done", JSON.stringify(t1));
    const sid = sessionOf(t1)!;
    const pid1 = fx.backend.lastPid!;
    assert.deepEqual(
      readdirSync(path.join(fx.dataDir, "tmp")),
      [],
      "the bootstrap file is removed once the CLI has read it",
    );
    const t2 = await collect(
      fx.backend.run(turnInput("conv-boot", "second words", { system: "BOOT-ONE you are Pebble", sessionId: sid })),
    );
    assert.equal(t2.at(-1)?.type, "done");
    assert.equal(fx.backend.lastPid, pid1, "same bootstrap: same process");
    const t3 = await collect(
      fx.backend.run(turnInput("conv-boot", "third words", { system: "BOOT-TWO you are Quartz", sessionId: sid })),
    );
    assert.equal(t3.at(-1)?.type, "done", JSON.stringify(t3));
    assert.notEqual(fx.backend.lastPid, pid1, "a changed bootstrap: a new process");
    assert.ok(pidGone(pid1), "the old process was ended before the new one started");
    assert.equal(sessionOf(t3), sid, "the new process resumed the same session");
    const calls = fx.fake.messageCalls().slice(n0);
    assert.equal(calls.length, 3);
    assert.ok(systemText(calls[0]!).includes("BOOT-ONE") && systemText(calls[1]!).includes("BOOT-ONE"));
    assert.ok(systemText(calls[2]!).includes("BOOT-TWO") && !systemText(calls[2]!).includes("BOOT-ONE"));
    const msgs = (calls[2]!.body.messages as any[]).map((m) => anthropicText(m.content)).join("\n");
    assert.ok(msgs.includes("first words") && msgs.includes("second words"), "the history came along");
  });

  test("text streams as deltas on a reused process, and a later turn's first token comes fast", async () => {
    fx.fake.setScript(() => ({ kind: "text", chunks: ["Warm ", "and ", "quick."], delayMs: 5 }));
    const t1 = await collect(fx.backend.run(turnInput("conv-quick", "hello")));
    const sid = sessionOf(t1);
    const started = Date.now();
    let firstToken = 0;
    const evs: any[] = [];
    for await (const ev of fx.backend.run(turnInput("conv-quick", "again", { sessionId: sid }))) {
      if (ev.type === "text" && !firstToken) firstToken = Date.now() - started;
      evs.push(ev);
    }
    assertEndsOnce(evs);
    assert.equal(textOf(evs), "Warm and quick.");
    assert.ok(evs.filter((e) => e.type === "text").length >= 3, "several deltas");
    // Not a benchmark (bench/suites/warm.ts measures it): only "no process start" — a cold start takes ~0.5 s or more.
    assert.ok(firstToken < 5000, `first token after ${firstToken} ms`);
  });

  test("a turn the pipeline does not resume (stateless mode, a side call) runs cold: no warm process is kept for it", async () => {
    fx.fake.setScript(() => ({ kind: "text", chunks: ["stateless ", "answer"] }));
    const before = warmProcesses().length;
    const evs = await collect(fx.backend.run(turnInput("conv-stateless", "the whole prompt", { resume: false })));
    assertEndsOnce(evs);
    assert.equal(textOf(evs), "stateless answer");
    assert.ok(pidGone(fx.backend.lastPid!), "its process ended with the turn");
    assert.equal(warmProcesses().length, before, "no warm process added");
  });
});
