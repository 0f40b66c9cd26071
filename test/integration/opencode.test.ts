/**
 * The real `opencode` CLI (npm opencode-ai) behind the real bridge, driven by the official `openai`
 * client; only the model API is faked (testkit/fakes/openai-api.ts).
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import {
  cleanup,
  eventually,
  pidsWithEnv,
  readSse,
  startTestBridge,
  tempDir,
  type TestBridge,
} from "../helpers/bridge.js";
import { openclawRequest } from "../../testkit/openclaw-request.js";

const MODEL = "fake/m1";

describe("opencode backend through the bridge", () => {
  let fake: FakeOpenAI;
  let bridge: TestBridge;
  let home: string;
  let client: OpenAI;

  before(async () => {
    fake = await startFakeOpenAI();
    home = tempDir("cb-oc-home-");
    bridge = await startTestBridge({
      server: { heartbeatSeconds: 0.3, maxConcurrent: 4 },
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [
        { id: MODEL, backend: "oc" },
        { id: "fake/slow", backend: "oc", model: "fake/m1" },
      ],
      remap: [{ match: "kimi", to: MODEL }],
    });
    client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    cleanup(home);
    cleanup(bridge.dataDir);
  });

  test("a streamed turn reaches the model as a compact prompt and streams back", async () => {
    fake.setScript(() => ({
      kind: "text",
      chunks: ["The answer ", "is 81."],
      usage: { prompt_tokens: 321, completion_tokens: 5 },
    }));
    const body = openclawRequest(MODEL, [{ role: "user", text: "what is 9 * 9" }], "2026.9");
    const stream = (await client.chat.completions.create({
      ...(body as any),
      stream: true,
      stream_options: { include_usage: true },
    })) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>;
    let text = "";
    let sawRole = false;
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (c?.delta?.role) sawRole = true;
      text += c?.delta?.content ?? "";
      if (c?.finish_reason) finish = c.finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, "The answer is 81.");
    assert.ok(sawRole, "first chunk carries delta.role");
    assert.equal(finish, "stop");
    assert.equal(usage?.prompt_tokens, 321, "real token counts from the backend");
    assert.equal(usage?.completion_tokens, 5);
    const req = fake.mainRequests().at(-1)!;
    assert.match(req.lastUser, /\nUSER: what is 9 \* 9\n\nRespond:$/);
    assert.ok(!req.lastUser.includes("[Sat 2026-11-21"), "timestamp prefix stripped");
    assert.ok(!req.lastUser.includes("Runtime:"), "runtime line stripped");
    assert.ok(req.lastUser.length < 10_500, `prompt within budget (${req.lastUser.length})`);
    assert.match(req.lastUser, /Pebble/, "identity from IDENTITY.md kept");
  });

  test("non-streaming returns one chat.completion with the same answer", async () => {
    fake.setScript(() => ({
      kind: "text",
      chunks: ["plain ", "answer"],
      usage: { prompt_tokens: 10, completion_tokens: 2 },
    }));
    const res = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hello" }] });
    assert.equal(res.object, "chat.completion");
    assert.equal(res.choices[0]?.message.content, "plain answer");
    assert.equal(res.choices[0]?.finish_reason, "stop");
    assert.equal(res.usage?.total_tokens, 12);
  });

  test("remap rules send kimi models to the configured target", async () => {
    fake.setScript((r) => ({ kind: "text", chunks: [`model=${r.body.model}`] }));
    const res = await client.chat.completions.create({
      model: "moonshot/kimi-k2",
      messages: [{ role: "user", content: "who are you" }],
    });
    assert.equal(res.choices[0]?.message.content, "model=m1");
  });

  test("a model API error ends the stream with an SSE error carrying the reason", async () => {
    fake.setScript(() => ({ kind: "error", status: 400, message: "context length exceeded for fake model" }));
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "boom" }],
      stream: true,
    });
    await assert.rejects(
      async () => {
        for await (const _ of stream) {
          /* drain */
        }
      },
      (err: Error) => /context length exceeded for fake model/.test(err.message),
    );
  });

  test("a model API error on a non-streaming request is an HTTP error, never an empty success", async () => {
    fake.setScript(() => ({ kind: "error", status: 400, message: "bad things upstream" }));
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "boom" }] }),
      (err: any) => err.status === 502 && /bad things upstream/.test(err.message),
    );
  });

  test("a silent backend gets empty-content heartbeats, and the timeout ends it with an SSE error", async () => {
    const short = await startTestBridge({
      server: { heartbeatSeconds: 0.3 },
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          timeoutSeconds: 6,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [{ id: MODEL, backend: "oc" }],
    });
    try {
      fake.setScript(() => ({ kind: "hang" }));
      const res = await fetch(`${short.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "think hard" }] }),
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /text\/event-stream/);
      const { frames, raw } = await readSse(res);
      assert.ok(!/^:/m.test(raw), "no SSE comment lines");
      const parsed = frames.filter((f) => f !== "[DONE]").map((f) => JSON.parse(f));
      const beats = parsed.filter((p) => p.choices?.[0]?.delta?.content === "" && !p.choices?.[0]?.delta?.role);
      assert.ok(beats.length >= 3, `heartbeats sent during silence (${beats.length})`);
      const last = parsed.at(-1);
      assert.equal(last.error?.code, "backend_timeout");
      assert.match(last.error.message, /did not finish within 6s/);
      assert.ok(!frames.includes("[DONE]"), "a failed stream is not marked done");
      assert.ok(
        await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0),
        "the timed-out process group is gone",
      );
    } finally {
      await short.close(0);
    }
  });

  test("a client abort kills the CLI's whole process group and leaves nothing behind", async () => {
    fake.setScript(() => ({ kind: "hang" }));
    const before = fake.mainRequests().length;
    const ac = new AbortController();
    const res = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": "abort-test" },
      body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "never answered" }] }),
      signal: ac.signal,
    });
    const reader = res.body!.getReader();
    await reader.read(); // the role chunk
    assert.ok(await eventually(() => fake.mainRequests().length > before, 30_000), "the CLI reached the model");
    assert.ok(pidsWithEnv(`HOME=${home}`).length > 0, "opencode is running");
    ac.abort();
    assert.ok(
      await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 15_000),
      "no opencode process left after abort",
    );
    assert.ok(await eventually(() => fake.openConnections() === 0, 5000), "the model connection was closed");
    const health = (await (await fetch(`${bridge.url}/health`)).json()) as any;
    assert.equal(health.turns.running, 0);
    assert.equal(health.turns.processes, 0);
  });

  test("turns of one conversation run one at a time; other conversations run in parallel", async () => {
    const order: string[] = [];
    // A1 answers slowly; A2 (same conversation) must wait for it, B1 (another one) must not.
    fake.setScript((r) => {
      const who = r.lastUser.match(/USER: (\S+)/)?.[1] ?? "?";
      order.push(who);
      return { kind: "text", chunks: [`done ${who}`], firstDelayMs: who === "A1" ? 2500 : 0 };
    });
    const ask = (conv: string, text: string) =>
      client.chat.completions.create(
        { model: MODEL, messages: [{ role: "user", content: text }] },
        { headers: { "x-session-id": conv } },
      );
    const a1 = ask("conv-A", "A1");
    await eventually(() => order.includes("A1"), 30_000);
    const a2 = ask("conv-A", "A2");
    const b1 = ask("conv-B", "B1");
    const results = await Promise.all([a1, a2, b1]);
    assert.deepEqual(
      results.map((r) => r.choices[0]?.message.content),
      ["done A1", "done A2", "done B1"],
    );
    assert.ok(
      order.indexOf("B1") < order.indexOf("A2"),
      `B ran while A1 was still answering (order ${order.join(",")})`,
    );
    assert.ok(order.indexOf("A1") < order.indexOf("A2"));
  });

  test("a system's model step served by opencode runs in the system's sandbox", async () => {
    const dataDir = tempDir("cb-oc-sandbox-");
    const sandbox = path.join(dataDir, "sandboxes", "oc-step");
    mkdirSync(sandbox, { recursive: true });
    writeFileSync(path.join(sandbox, "NOTES.md"), "notes for the agent\n");
    const b = await startTestBridge({
      dataDir,
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [{ id: MODEL, backend: "oc" }],
      systems: [{ id: "oc-step", run: { kind: "model", model: MODEL, prompt: "say hi from the sandbox" } }],
    });
    try {
      // The model asks opencode's own `read` tool for a relative path: opencode resolves it in its working directory.
      fake.setScript((r) => {
        const msgs: Array<{ role: string }> = r.body?.messages ?? [];
        if (!msgs.some((m) => m.role === "tool"))
          return {
            kind: "tool_calls",
            calls: [{ id: "call_read_1", name: "read", arguments: { filePath: "NOTES.md" } }],
          };
        return { kind: "text", chunks: ["hi"] };
      });
      const res = await fetch(`${b.url}/v1/systems/oc-step/runs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ inputs: {}, wait: true }),
      });
      const run = (await res.json()) as { status: string; output: unknown };
      assert.equal(run.status, "completed", JSON.stringify(run));
      assert.equal(run.output, "hi");
      const req = fake
        .mainRequests()
        .filter((r) => r.rawBody.includes("say hi from the sandbox"))
        .at(-1);
      assert.ok(req, "opencode asked the model");
      const toolResult = JSON.stringify((req.body?.messages ?? []).filter((m: { role: string }) => m.role === "tool"));
      assert.ok(
        toolResult.includes("notes for the agent"),
        `opencode read NOTES.md in the sandbox: ${toolResult.slice(0, 300)}`,
      );
    } finally {
      await b.close(0);
      cleanup(dataDir);
    }
  });
});
