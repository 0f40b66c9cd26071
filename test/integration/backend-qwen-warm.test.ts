/**
 * The qwen-code backend in WARM mode (src/backends/warm): one long-lived `qwen --input-format stream-json`
 * process per conversation, the REAL `qwen` CLI against a fake OpenAI chat-completions API on
 * 127.0.0.1. The CLI contract runs here warm (its cold run is in backend-qwen.test.ts).
 */
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { qwenCodeBackend, qwenCodeOptionsSchema, type QwenCodeBackend } from "../../src/backends/qwen-code/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { startFakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { QWEN_BIN, qwenEnv } from "../../testkit/fakes/cli-env.js";
import { collect, findFiles, pidGone, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";
import { eventually } from "../helpers/bridge.js";
import { backendFixture } from "../helpers/backend-fixture.js";
import { cliBackendContract } from "../helpers/cli-backend-contract.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

function systemText(req: RecordedRequest): string {
  const msgs: any[] = req.body?.messages ?? [];
  return msgs
    .filter((m) => m.role === "system")
    .map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content)))
    .join("\n");
}

/** Warm qwen backends on a fake OpenAI chat-completions API, for one suite. */
const qwenFixture = (name: string) =>
  backendFixture({
    name,
    startFake: () => startFakeOpenAI(),
    create: ({ fake, home, dataDir }, extra) =>
      qwenCodeBackend.create(
        "qwen",
        qwenCodeOptionsSchema.parse({
          command: QWEN_BIN,
          env: qwenEnv({ baseUrl: fake.url, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          ...extra,
        }),
        { logger, dataDir },
      ) as QwenCodeBackend,
  });

describe("qwen-code backend, warm, with the real qwen CLI", () => {
  const fx = qwenFixture("qwenw");

  cliBackendContract<Reply>({
    cli: "qwen",
    warm: true,
    backend: () => fx.backend,
    make: (extra) => fx.make(extra),
    missing: (command) => fx.make({ command }),
    dataDir: () => fx.dataDir,
    reply: (r) => fx.fake.setScript(() => r),
    requests: () => fx.fake.requests.length,
    turns: () => fx.fake.mainRequests().length,
    version: /^\d+\.\d+\.\d+/,
    unknownSession: /No saved session found with ID/,
    sessionFiles: (id) => findFiles(path.join(fx.home, ".qwen", "projects"), (n) => n === `${id}.jsonl`),
    sessionFilesWhere: "~/.qwen/projects/<cwd>/chats/<id>.jsonl",
    timeoutSeconds: 3,
  });

  test("the bootstrap reaches the model on every warm turn; a changed bootstrap starts a new process on the same session", async () => {
    fx.fake.setScript(() => ({ kind: "text", chunks: ["fine"] }));
    const n0 = fx.fake.mainRequests().length;
    const t1 = await collect(
      fx.backend.run(turnInput("conv-boot", "first words", { system: "BOOT-ONE you are Pebble" })),
    );
    assert.equal(t1.at(-1)?.type, "done", JSON.stringify(t1));
    const sid = sessionOf(t1)!;
    const pid1 = fx.backend.lastPid!;
    const t2 = await collect(
      fx.backend.run(turnInput("conv-boot", "second words", { system: "BOOT-ONE you are Pebble", sessionId: sid })),
    );
    assert.equal(t2.at(-1)?.type, "done", JSON.stringify(t2));
    assert.equal(fx.backend.lastPid, pid1, "same bootstrap: same process");
    const t3 = await collect(
      fx.backend.run(turnInput("conv-boot", "third words", { system: "BOOT-TWO you are Quartz", sessionId: sid })),
    );
    assert.equal(t3.at(-1)?.type, "done", JSON.stringify(t3));
    assert.notEqual(fx.backend.lastPid, pid1, "a changed bootstrap: a new process");
    assert.ok(pidGone(pid1));
    const calls = fx.fake.mainRequests().slice(n0);
    assert.equal(calls.length, 3);
    assert.ok(systemText(calls[0]!).includes("BOOT-ONE"), systemText(calls[0]!).slice(0, 300));
    assert.ok(systemText(calls[1]!).includes("BOOT-ONE"), "turn 2 on the warm process still has the bootstrap");
    assert.ok(systemText(calls[2]!).includes("BOOT-TWO") && !systemText(calls[2]!).includes("BOOT-ONE"));
    const all = JSON.stringify(calls[2]!.body.messages);
    assert.ok(all.includes("first words") && all.includes("second words"), "the history came along");
    assert.deepEqual(
      readdirSync(path.join(fx.dataDir, "tmp")).filter((n) => n.startsWith("qwen-system-")).length <= 1,
      true,
    );
  });
});

describe("qwen-code backend, warm: its control channel", () => {
  const fx = qwenFixture("qwenc");

  test("an abort interrupts the turn at once (the control channel is on; qwen then exits) and the next turn resumes the session", async () => {
    fx.fake.setScript(() => ({ kind: "text", chunks: ["ready"] }));
    // A long grace: qwen ignoring the interrupt would show as an abort taking 5 s.
    const backend = fx.make({ warm: { enabled: true, interruptGraceSeconds: 5 } });
    const t1 = await collect(backend.run(turnInput("conv-int", "warm up")));
    assert.equal(t1.at(-1)?.type, "done", JSON.stringify(t1));
    const sid = sessionOf(t1);
    const pid = backend.lastPid!;
    fx.fake.setScript(() => ({ kind: "hang" }));
    const n0 = fx.fake.mainRequests().length;
    const ac = new AbortController();
    const pending = collect(
      backend.run(turnInput("conv-int", "never answered", { sessionId: sid, signal: ac.signal })),
    );
    assert.ok(await eventually(() => fx.fake.mainRequests().length > n0, 15_000), "qwen reached the model");
    const t0 = Date.now();
    ac.abort();
    const evs = await pending;
    const took = Date.now() - t0;
    assert.equal(evs.at(-1)?.type, "error");
    assert.equal((evs.at(-1) as { error: { code: string } }).error.code, "aborted");
    // Without the control channel qwen ignores the interrupt and is killed after the grace (5 s).
    assert.ok(took < 4000, `qwen took the interrupt at once (${took} ms), not the grace period`);
    assert.ok(await eventually(() => pidGone(pid), 5000), "qwen 0.15 ends its process on an interrupt");
    fx.fake.setScript(() => ({ kind: "text", chunks: ["after ", "the interrupt"] }));
    const t3 = await collect(backend.run(turnInput("conv-int", "and now?", { sessionId: sid })));
    assert.equal(t3.at(-1)?.type, "done", JSON.stringify(t3));
    assert.equal(sessionOf(t3), sid, "a new process resumed the same session");
    assert.match(textOf(t3), /after the interrupt/);
  });
});
