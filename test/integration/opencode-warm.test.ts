/**
 * Warm mode of the opencode backend: one real `opencode serve` (npm opencode-ai) per backend behind
 * the real bridge, driven by the official `openai` client; only the model API is faked
 * (testkit/fakes/openai-api.ts). Everything on 127.0.0.1; every wait bounded; every process reaped.
 */
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import Database from "better-sqlite3";
import OpenAI from "openai";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { openclawRequest } from "../../testkit/openclaw-request.js";
import { warmProcesses } from "../../src/backends/warm/registry.js";
import type { Backend } from "../../src/backends/contract/backend.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { pidGone } from "../helpers/backend-turn.js";
import {
  cleanup,
  eventually,
  pidsWithEnv,
  readSse,
  startTestBridge,
  tempDir,
  within,
  type TestBridge,
} from "../helpers/bridge.js";

const MODEL = "fake/m1";

type WarmBackend = Backend & { readonly warmPid?: number; readonly lastPid?: number };

/** Stream one chat turn with the openai client: the content deltas with their arrival times. */
async function streamTurn(
  client: OpenAI,
  body: Record<string, unknown>,
  opts: { headers?: Record<string, string>; signal?: AbortSignal; onContent?: (text: string) => void } = {},
) {
  const t0 = Date.now();
  const stream = (await client.chat.completions.create(
    { model: MODEL, ...(body as any), stream: true },
    { headers: opts.headers, signal: opts.signal },
  )) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>;
  const deltas: Array<{ text: string; at: number }> = [];
  let finish: string | null = null;
  for await (const chunk of stream) {
    const c = chunk.choices[0];
    const text = c?.delta?.content;
    if (text) {
      deltas.push({ text, at: Date.now() - t0 });
      opts.onContent?.(text);
    }
    if (c?.finish_reason) finish = c.finish_reason;
  }
  return { text: deltas.map((d) => d.text).join(""), deltas, finish, t0 };
}

function systemOf(req: RecordedRequest): string {
  const m = (req.body?.messages ?? []).find((x: { role: string }) => x.role === "system");
  return typeof m?.content === "string" ? m.content : JSON.stringify(m?.content ?? "");
}

describe("opencode warm mode (opencode serve) through the bridge", () => {
  let fake: FakeOpenAI;
  let bridge: TestBridge;
  let home: string;
  let client: OpenAI;
  const backend = () => bridge.backends.get("oc") as WarmBackend;

  before(async () => {
    fake = await startFakeOpenAI();
    home = tempDir("cb-ocw-home-");
    bridge = await startTestBridge({
      server: { heartbeatSeconds: 0.3, maxConcurrent: 4 },
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { idleSeconds: 120 },
        },
      },
      models: [{ id: MODEL, backend: "oc" }],
    });
    client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    assert.ok(
      await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 15_000),
      "no opencode process left after the bridge closed",
    );
    cleanup(home);
    cleanup(bridge.dataDir);
  });

  test("a multi-chunk answer streams token by token; the bootstrap goes as the system prompt", async () => {
    const DELAY = 1000;
    let asked = 0; // when the turn's model request reached the fake (not the title's side call)
    fake.setScript((req) => {
      if (!req.side) asked = Date.now();
      return {
        kind: "text",
        chunks: ["alpha ", "beta ", "gamma ", "delta."],
        delayMs: DELAY,
        usage: { prompt_tokens: 50, completion_tokens: 4 },
      };
    });
    const body = openclawRequest(MODEL, [{ role: "user", text: "count for me" }], "2026.9");
    const r = await streamTurn(client, body as Record<string, unknown>);
    assert.equal(r.text, "alpha beta gamma delta.");
    assert.equal(r.finish, "stop");
    assert.ok(r.deltas.length >= 4, `one delta per model chunk (${JSON.stringify(r.deltas)})`);
    // Streamed, not the whole answer at its end: the first words reach the client while the model is
    // still writing (its last chunk goes 3 s after the request). Not the gaps between deltas: a young
    // `opencode serve` on a loaded machine was seen to stall 3.7 s and hand over three deltas at once.
    const lastChunk = asked + 3 * DELAY;
    assert.ok(
      r.t0 + r.deltas[0]!.at < lastChunk,
      `the first delta came before the model's last chunk (request at +${asked - r.t0} ms: ${JSON.stringify(r.deltas)})`,
    );
    const req = fake.mainRequests().at(-1)!;
    assert.match(req.lastUser, /USER: count for me/);
    assert.match(
      systemOf(req),
      /Pebble/,
      "the bridge's bootstrap (identity) reaches the model in OpenCode's system prompt",
    );
    assert.doesNotMatch(req.lastUser, /Pebble/, "and is not pasted in front of the user's text");
    assert.equal(
      fake.requests.filter((x) => x.side).length,
      0,
      "no title-generation side call (the bridge names the session)",
    );
    const warm = warmProcesses().filter((w) => w.backend === "oc");
    assert.equal(warm.length, 1, JSON.stringify(warm));
    assert.equal(warm[0]!.pid, backend().warmPid);
    assert.equal(warm[0]!.busy, false);
    assert.ok(warm[0]!.turns >= 1);
  });

  test("the next turn reuses the same server and its first token comes fast", async () => {
    const pid = backend().warmPid;
    assert.ok(pid, "a server is running");
    fake.setScript(() => ({ kind: "text", chunks: ["quick ", "reply"], delayMs: 50 }));
    const r = await streamTurn(client, { messages: [{ role: "user", content: "again" }] });
    assert.equal(r.text, "quick reply");
    assert.equal(backend().warmPid, pid, "same opencode serve process");
    assert.ok(
      r.deltas[0]!.at < 2000,
      `first token after ${r.deltas[0]!.at} ms (a cold opencode run takes 2.5 s+ to start)`,
    );
    const body = fake.mainRequests().at(-1)!.body;
    assert.equal(body.model, "m1", "the model reached OpenCode as providerID/modelID");
  });

  test("a stateless turn starts on a session made ahead at the end of the turn before", async () => {
    // OpenCode's own database (XDG_DATA_HOME of the test's home): the shared directory's empty
    // sessions are the ones made ahead; the turn's text shows which session it went to.
    const db = new Database(path.join(home, ".local", "share", "opencode", "opencode.db"), {
      readonly: true,
      fileMustExist: true,
    });
    try {
      const ahead = () =>
        db
          .prepare(
            "SELECT id FROM session s WHERE title = 'clawbridge' AND NOT EXISTS (SELECT 1 FROM message m WHERE m.session_id = s.id)",
          )
          .all() as Array<{ id: string }>;
      assert.ok(
        await eventually(() => ahead().length === 1, 10_000),
        `the turn before left one session made ahead (${JSON.stringify(ahead())})`,
      );
      const spare = ahead()[0]!.id;
      fake.setScript(() => ({ kind: "text", chunks: ["ahead"] }));
      const r = await streamTurn(client, { messages: [{ role: "user", content: "marker-made-ahead-7731" }] });
      assert.equal(r.text, "ahead");
      const used = db
        .prepare("SELECT DISTINCT session_id AS id FROM part WHERE data LIKE '%marker-made-ahead-7731%'")
        .all() as Array<{ id: string }>;
      assert.deepEqual(
        used.map((u) => u.id),
        [spare],
        "the prompt went to the session made ahead (no POST /session on the turn's path)",
      );
      assert.ok(
        await eventually(() => ahead().length === 1 && ahead()[0]!.id !== spare, 10_000),
        `and this turn's end made the next one (${JSON.stringify(ahead())})`,
      );
    } finally {
      db.close();
    }
  });

  test("a client abort mid-turn aborts the session; the server keeps serving", async () => {
    fake.setScript(() => ({ kind: "hang", afterChunks: ["partial "] }));
    const ac = new AbortController();
    let got = "";
    let pid: number | undefined;
    const onContent = (t: string) => {
      got += t;
      pid = backend().warmPid;
      ac.abort();
    };
    const turn = streamTurn(
      client,
      { messages: [{ role: "user", content: "never finished" }] },
      { signal: ac.signal, onContent },
    ).catch((e: Error) => e);
    const res = await within(turn, 30_000, "aborted turn");
    // The openai client ends an aborted stream with an error or quietly, depending on timing.
    if (!(res instanceof Error)) assert.equal(res.finish, null, "the stream did not finish normally");
    assert.equal(got, "partial ");
    assert.ok(pid, "served by the warm server");
    assert.ok(
      await eventually(() => fake.openConnections() === 0, 10_000),
      "OpenCode dropped the model request (the session was aborted)",
    );
    // The server itself says no session is working any more (its API, with the bridge's credentials).
    const server = (backend() as any).warm.server as {
      request(m: string, p: string): Promise<{ status: number; body: unknown }>;
    };
    const busy = async () =>
      Object.values(
        ((await server.request("GET", "/session/status")).body ?? {}) as Record<string, { type: string }>,
      ).filter((s) => s.type !== "idle");
    assert.ok(
      await eventually(async () => (await busy()).length === 0, 10_000),
      `sessions still busy: ${JSON.stringify(await busy())}`,
    );
    assert.ok(
      await eventually(
        async () => ((await (await fetch(`${bridge.url}/health`)).json()) as any).turns.running === 0,
        10_000,
      ),
    );
    assert.equal(backend().warmPid, pid, "the server was not killed for the abort");
    fake.setScript(() => ({ kind: "text", chunks: ["still ", "here"] }));
    const next = await streamTurn(client, { messages: [{ role: "user", content: "are you there" }] });
    assert.equal(next.text, "still here");
    assert.equal(backend().warmPid, pid);
  });

  test("a model API error ends the turn with upstream_error carrying its message", async () => {
    fake.setScript(() => ({ kind: "error", status: 400, message: "fake refused: bad-field-xyz-123" }));
    const res = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "boom" }] }),
    });
    const { frames } = await readSse(res);
    const last = JSON.parse(frames.filter((f) => f !== "[DONE]").at(-1)!);
    assert.equal(last.error?.code, "upstream_error", JSON.stringify(last));
    assert.match(last.error.message, /fake refused: bad-field-xyz-123/);
    assert.ok(!frames.includes("[DONE]"));
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "boom again" }] }),
      (err: any) => err.status === 502 && /bad-field-xyz-123/.test(err.message),
    );
  });

  test("a server killed mid-answer: the turn gets an error and the next turn starts a new server", async () => {
    const pid = backend().warmPid!;
    fake.setScript(() => ({ kind: "hang", afterChunks: ["half an "] }));
    const res = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: "user", content: "die midway" }] }),
    });
    const reader = res.body!.getReader();
    let raw = "";
    const dec = new TextDecoder();
    for (let i = 0; i < 1000 && !raw.includes("half an "); i++) {
      const { value, done } = await within(reader.read(), 30_000, "first content");
      if (done) break;
      raw += dec.decode(value, { stream: true });
    }
    assert.ok(raw.includes("half an "), raw);
    process.kill(pid, "SIGKILL");
    for (let i = 0; i < 1000; i++) {
      const { value, done } = await within(reader.read(), 30_000, "end of the stream");
      if (done) break;
      raw += dec.decode(value, { stream: true });
    }
    assert.match(raw, /"code":"backend_failed"/, raw.slice(-500));
    assert.match(raw, /opencode serve ended in the middle of the turn/);
    assert.ok(await eventually(() => pidGone(pid), 10_000), "the killed server is reaped");
    fake.setScript(() => ({ kind: "text", chunks: ["new ", "server"] }));
    const next = await streamTurn(client, { messages: [{ role: "user", content: "after the crash" }] });
    assert.equal(next.text, "new server");
    const newPid = backend().warmPid;
    assert.ok(newPid && newPid !== pid, `a new server (${newPid} vs ${pid})`);
  });

  test("a server killed before the answer began: the turn is run cold instead", async () => {
    const pid = backend().warmPid!;
    let calls = 0;
    fake.setScript(() => (++calls === 1 ? { kind: "hang" } : { kind: "text", chunks: ["answered ", "cold"] }));
    const n0 = fake.mainRequests().length;
    const turn = streamTurn(client, { messages: [{ role: "user", content: "die before answering" }] });
    assert.ok(await eventually(() => fake.mainRequests().length > n0, 30_000), "the server asked the model");
    process.kill(pid, "SIGKILL");
    const r = await within(turn, 60_000, "the cold retry");
    assert.equal(r.text, "answered cold");
    assert.ok(await eventually(() => pidGone(pid), 10_000));
  });

  test("a system's model step runs warm in the system's sandbox (?directory=)", async () => {
    const dataDir = tempDir("cb-ocw-sandbox-");
    const sandbox = path.join(dataDir, "sandboxes", "ocw-step");
    mkdirSync(sandbox, { recursive: true });
    writeFileSync(path.join(sandbox, "NOTES.md"), "warm notes for the agent\n");
    const b = await startTestBridge({
      dataDir,
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
        },
      },
      models: [{ id: MODEL, backend: "oc" }],
      systems: [{ id: "ocw-step", run: { kind: "model", model: MODEL, prompt: "say hi from the warm sandbox" } }],
    });
    try {
      fake.setScript((r) => {
        const msgs: Array<{ role: string }> = r.body?.messages ?? [];
        if (!msgs.some((m) => m.role === "tool"))
          return {
            kind: "tool_calls",
            calls: [{ id: "call_read_1", name: "read", arguments: { filePath: "NOTES.md" } }],
          };
        return { kind: "text", chunks: ["hi"] };
      });
      const res = await fetch(`${b.url}/v1/systems/ocw-step/runs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ inputs: {}, wait: true }),
      });
      const run = (await res.json()) as { status: string; output: unknown };
      assert.equal(run.status, "completed", JSON.stringify(run));
      assert.equal(run.output, "hi");
      assert.ok((b.backends.get("oc") as WarmBackend).warmPid, "served by the warm server");
      const req = fake
        .mainRequests()
        .filter((r) => r.rawBody.includes("say hi from the warm sandbox"))
        .at(-1);
      const toolResult = JSON.stringify((req?.body?.messages ?? []).filter((m: { role: string }) => m.role === "tool"));
      assert.ok(
        toolResult.includes("warm notes for the agent"),
        `opencode read NOTES.md in the sandbox: ${toolResult.slice(0, 300)}`,
      );
    } finally {
      const pid = (b.backends.get("oc") as WarmBackend).warmPid;
      await b.close(0);
      if (pid) assert.ok(await eventually(() => pidGone(pid), 10_000), "bridge shutdown ended its server");
      cleanup(dataDir);
    }
  });
});

describe("opencode warm server lifetime", () => {
  let fake: FakeOpenAI;
  let home: string;

  before(async () => {
    fake = await startFakeOpenAI(() => ({ kind: "text", chunks: ["ok"] }));
    home = tempDir("cb-ocw-life-");
  });

  after(async () => {
    await fake?.close();
    assert.ok(await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 15_000), "no opencode process left");
    cleanup(home);
  });

  test("an idle server is ended after idleSeconds; the next turn starts another", async () => {
    const b = await startTestBridge({
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          killGraceSeconds: 1,
          warm: { idleSeconds: 1 },
        },
      },
      models: [{ id: MODEL, backend: "oc" }],
    });
    try {
      const client = new OpenAI({ baseURL: b.baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
      const res = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
      assert.equal(res.choices[0]?.message.content, "ok");
      const pid = (b.backends.get("oc") as WarmBackend).warmPid!;
      assert.ok(pid);
      assert.ok(await eventually(() => pidGone(pid), 15_000), "the idle server was ended");
      assert.equal(warmProcesses().filter((w) => w.pid === pid).length, 0, "and is no longer listed");
      const again = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: "user", content: "hi again" }],
      });
      assert.equal(again.choices[0]?.message.content, "ok");
      const pid2 = (b.backends.get("oc") as WarmBackend).warmPid;
      assert.ok(pid2 && pid2 !== pid, "a new server for the next turn");
    } finally {
      await b.close(0);
    }
  });

  test("backend close() ends the server", async () => {
    const b = await startTestBridge({
      backends: {
        oc: { type: "opencode", command: OPENCODE_BIN, env: opencodeEnv(fake.url, home), killGraceSeconds: 1 },
      },
      models: [{ id: MODEL, backend: "oc" }],
    });
    let pid: number | undefined;
    try {
      const client = new OpenAI({ baseURL: b.baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
      await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }] });
      const oc = b.backends.get("oc") as WarmBackend;
      pid = oc.warmPid;
      assert.ok(pid && !pidGone(pid));
      await within(oc.close!(), 15_000, "backend close");
      assert.ok(pidGone(pid), "the server is gone once close() resolved");
      assert.equal(warmProcesses().filter((w) => w.pid === pid).length, 0);
    } finally {
      await b.close(0);
    }
  });

  test("a missing binary is backend_unavailable", async () => {
    const b = await startTestBridge({
      backends: {
        oc: { type: "opencode", command: path.join(home, "no-such-opencode"), env: opencodeEnv(fake.url, home) },
      },
      models: [{ id: MODEL, backend: "oc" }],
    });
    try {
      const res = await fetch(`${b.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }] }),
      });
      assert.equal(res.status, 503);
      const body = (await res.json()) as any;
      assert.equal(body.error?.code, "backend_unavailable", JSON.stringify(body));
    } finally {
      await b.close(0);
    }
  });
});
