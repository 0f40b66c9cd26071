/**
 * Holding under abuse at the HTTP level (issue 20, item 2, and the lost 413 of item 6):
 * - a request that arrives too slowly (headers or body) gets 408 and its connection is closed,
 *   within the configured timeouts — while a long turn (streamed or not) is never cut by them;
 * - an idle keep-alive connection is closed after `server.idleTimeoutSeconds`;
 * - a 401 for a huge announced body is answered and the connection closed without reading it; a
 *   client that asked `Expect: 100-continue` gets the 401 without `100 Continue`;
 * - past `server.maxConnections`, a new connection gets 503 `too_many_connections` and is closed;
 * - a 413 reaches the client every time, even one that is still sending its body.
 * Raw sockets where an HTTP client would hide the behaviour, the official `openai` client where a
 * normal client is meant.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { VERSION } from "../../src/core/version.js";
import { cleanup, startTestBridge, type TestBridge } from "../helpers/bridge.js";
import { connect } from "../helpers/raw-http.js";

const KEY = "sk-limits-0123456789";
let fake: FakeOpenAI;
const bridges: TestBridge[] = [];

before(async () => {
  // "slow" questions are answered after 2.5 s: longer than every request timeout below.
  fake = await startFakeOpenAI((req) => ({
    kind: "text",
    chunks: ["answer to ", req.lastUser],
    firstDelayMs: req.lastUser.includes("slow") ? 2500 : 0,
  }));
});

after(async () => {
  for (const b of bridges) await b.close(0);
  await fake?.close();
  for (const b of bridges) cleanup(b.dataDir);
});

async function bridgeWith(server: Record<string, unknown>): Promise<TestBridge> {
  const b = await startTestBridge({
    server,
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "up", backend: "up" }],
  });
  bridges.push(b);
  return b;
}

/** Status, lower-cased headers and body of the first answer in `raw`. */
function parse(raw: string): { status: number; headers: Record<string, string>; body: string } {
  const end = raw.indexOf("\r\n\r\n");
  assert.ok(end > 0, `an HTTP answer: ${JSON.stringify(raw.slice(0, 200))}`);
  const [statusLine, ...lines] = raw.slice(0, end).split("\r\n");
  const headers: Record<string, string> = {};
  for (const l of lines) headers[l.slice(0, l.indexOf(":")).toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
  const length = Number(headers["content-length"] ?? 0);
  return {
    status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine!)?.[1]),
    headers,
    body: raw.slice(end + 4, end + 4 + length),
  };
}

function assertOpenAIError(raw: string, status: number, code: string): { headers: Record<string, string>; body: any } {
  const p = parse(raw);
  assert.equal(p.status, status, raw.slice(0, 400));
  assert.equal(p.headers.server, `clawbridge/${VERSION}`);
  assert.match(p.headers["content-type"] ?? "", /^application\/json/);
  const body = JSON.parse(p.body);
  assert.deepEqual(Object.keys(body), ["error"]);
  assert.equal(body.error.code, code);
  assert.ok(body.error.message && body.error.type && "param" in body.error, p.body);
  return { headers: p.headers, body };
}

const chat = (text: string) => JSON.stringify({ model: "up", messages: [{ role: "user", content: text }] });

describe("request timeouts (requestTimeoutSeconds: 1, headersTimeoutSeconds: 0.5, idleTimeoutSeconds: 1)", () => {
  let bridge: TestBridge;
  before(async () => {
    bridge = await bridgeWith({ requestTimeoutSeconds: 1, headersTimeoutSeconds: 0.5, idleTimeoutSeconds: 1 });
  });

  test("a body that stops arriving (Content-Length 1000, one byte sent) → 408 and the connection closes; 20 such connections all close", async (t) => {
    const upstreamBefore = fake.requests.length;
    const started = Date.now();
    const conns = await Promise.all(Array.from({ length: 20 }, () => connect(bridge.port)));
    for (const c of conns)
      c.socket.write(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
      );
    const closed = await Promise.all(conns.map((c) => c.closed(5000)));
    const ms = Date.now() - started;
    t.diagnostic(`20 slow bodies: all answered 408 and closed after ${ms} ms (requestTimeoutSeconds: 1)`);
    assert.deepEqual(closed, Array(20).fill(true), "every connection was closed by the bridge");
    for (const c of conns) {
      const { headers } = assertOpenAIError(c.received(), 408, "request_timeout");
      assert.equal(headers.connection, "close");
    }
    assert.ok(ms >= 900 && ms < 4000, `closed after ${ms} ms`);
    assert.equal(fake.requests.length, upstreamBefore, "nothing reached the upstream");
  });

  test("headers that stop arriving → 408 and the connection closes", async (t) => {
    const started = Date.now();
    const c = await connect(bridge.port);
    c.socket.write("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: appl");
    assert.ok(await c.closed(5000), "closed by the bridge");
    const ms = Date.now() - started;
    t.diagnostic(`slow headers: 408 and closed after ${ms} ms (headersTimeoutSeconds: 0.5)`);
    assertOpenAIError(c.received(), 408, "request_timeout");
    assert.ok(ms >= 400 && ms < 3000, `closed after ${ms} ms`);
  });

  test("a connection that sends nothing is closed after the headers timeout", async () => {
    const c = await connect(bridge.port);
    assert.ok(await c.closed(5000), "closed by the bridge");
  });

  test("turns longer than every timeout are not cut: non-streamed and streamed (official openai client)", async () => {
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0, timeout: 20_000 });
    const started = Date.now();
    const [plain, streamed] = await Promise.all([
      client.chat.completions.create({ model: "up", messages: [{ role: "user", content: "slow plain" }] }),
      (async () => {
        let text = "";
        const stream = await client.chat.completions.create({
          model: "up",
          stream: true,
          messages: [{ role: "user", content: "slow stream" }],
        });
        for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
        return text;
      })(),
    ]);
    assert.ok(Date.now() - started >= 2400, "the answers took longer than the timeouts");
    assert.equal(plain.choices[0]?.message.content, "answer to slow plain");
    assert.equal(streamed, "answer to slow stream");
  });

  test("an idle keep-alive connection is closed after idleTimeoutSeconds", async (t) => {
    const c = await connect(bridge.port);
    c.socket.write("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.ok(await c.waitFor(/"object":"list"/, 5000), "answered");
    assert.match(parse(c.received()).headers["keep-alive"] ?? "", /timeout=1\b/);
    const started = Date.now();
    assert.ok(await c.closed(6000), "closed by the bridge");
    t.diagnostic(
      `idle keep-alive connection closed ${Date.now() - started} ms after its answer (node:http adds 1 s to idleTimeoutSeconds)`,
    );
  });
});

describe("answers that close without reading the body", () => {
  let auth: TestBridge;
  before(async () => {
    auth = await bridgeWith({ apiKeys: [KEY] });
  });

  test("401 for a huge announced body (1 GiB, sent as fast as possible): answered, and closed long before the body is read", async (t) => {
    const c = await connect(auth.port);
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${1024 ** 3}\r\n\r\n`,
    );
    const piece = Buffer.alloc(64 * 1024, 0x61);
    let written = 0;
    let closed = false;
    void c.closed(30_000).then(() => (closed = true));
    const started = Date.now();
    // At most 256 MiB, at most 10 s: the old bridge read it all and kept the connection.
    for (let i = 0; i < 4096 && !closed && Date.now() - started < 10_000; i++) {
      if (!c.socket.write(piece)) await Promise.race([new Promise((r) => c.socket.once("drain", r)), c.closed(1000)]);
      if (!closed) written += piece.length;
    }
    assert.ok(await c.closed(5000), "the bridge closed the connection");
    t.diagnostic(
      `401 sent; the client could write ${(written / 2 ** 20).toFixed(1)} MiB (kernel buffers included) before the bridge closed, in ${Date.now() - started} ms`,
    );
    const { headers } = assertOpenAIError(c.received(), 401, "invalid_api_key");
    assert.equal(headers.connection, "close");
    assert.ok(written < 64 * 2 ** 20, `the client could write ${written} bytes`);
  });

  test("401 with Expect: 100-continue: no 100 Continue, the body is never asked for", async () => {
    const c = await connect(auth.port);
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n`,
    );
    assert.ok(await c.closed(5000), "closed by the bridge");
    assert.ok(!c.received().includes("100 Continue"), c.received());
    assertOpenAIError(c.received(), 401, "invalid_api_key");
  });

  test("with the right key, Expect: 100-continue gets 100 Continue and then the answer", async () => {
    const body = chat("continue please");
    const c = await connect(auth.port);
    c.socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    assert.ok(await c.waitFor(/^HTTP\/1\.1 100 Continue\r\n\r\n/, 5000), c.received());
    c.socket.write(body);
    assert.ok(await c.waitFor(/answer to continue please/, 5000), c.received());
    c.socket.destroy();
  });
});

describe("connection cap (maxConnections: 3)", () => {
  test("a fourth connection gets 503 too_many_connections with Retry-After and is closed; once one closes, a new one is served", async () => {
    const bridge = await bridgeWith({ maxConnections: 3 });
    const held = await Promise.all([1, 2, 3].map(() => connect(bridge.port)));
    for (const c of held) {
      c.socket.write("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
      assert.ok(await c.waitFor(/"object":"list"/, 5000), "the first three are served and kept alive");
    }
    const fourth = await connect(bridge.port);
    fourth.socket.write("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.ok(await fourth.closed(5000), "closed by the bridge");
    const { headers } = assertOpenAIError(fourth.received(), 503, "too_many_connections");
    assert.equal(headers["retry-after"], "1");
    assert.equal(headers.connection, "close");

    // The official client sees the same 503 (no retries here).
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0 });
    await assert.rejects(
      client.models.list(),
      (err: any) => err.status === 503 && err.error?.code === "too_many_connections",
    );

    held[0]!.socket.destroy();
    let served = false;
    for (let i = 0; i < 40 && !served; i++) {
      const res = await fetch(`${bridge.baseURL}/models`, { headers: { connection: "close" } });
      await res.arrayBuffer();
      served = res.status === 200;
      if (!served) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(served, "a slot freed is used again");
    for (const c of held) c.socket.destroy();
  });
});

describe("413 reaches the client every time (bodyLimitBytes: 50000)", () => {
  const LIMIT = 50_000;
  let bridge: TestBridge;
  before(async () => {
    bridge = await bridgeWith({ bodyLimitBytes: LIMIT });
  });

  /**
   * A client that sends its whole request before it reads anything, its body in four pieces a
   * moment apart (a slow link, a body streamed from a file), as a blocking client does: the 413
   * comes before the body is all sent. The old bridge closed the socket at once: the next piece
   * was met by a reset, the one after it failed (EPIPE), and the client never read its 413.
   */
  async function writeFirst(chunked: boolean): Promise<string> {
    const c = await connect(bridge.port);
    c.socket.pause();
    const piece = Buffer.alloc(30_000, 0x61);
    const pieces = 4;
    const head = chunked
      ? "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
      : `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${pieces * piece.length}\r\n\r\n`;
    const framed = (last: boolean) =>
      chunked
        ? Buffer.concat([
            Buffer.from(`${piece.length.toString(16)}\r\n`),
            piece,
            Buffer.from(last ? "\r\n0\r\n\r\n" : "\r\n"),
          ])
        : piece;
    const write = (b: Buffer | string) => new Promise<boolean>((resolve) => c.socket.write(b, (err) => resolve(!err)));
    let ok = await write(head);
    for (let i = 0; i < pieces && ok; i++) {
      ok = await write(framed(i === pieces - 1));
      if (ok && i < pieces - 1) await new Promise((r) => setTimeout(r, 10));
    }
    c.socket.resume();
    await c.closed(5000);
    c.socket.destroy();
    return ok ? c.received() : `a write failed; received ${JSON.stringify(c.received().slice(0, 40))}`;
  }

  test("200 oversized bodies from four kinds of client: every one gets its 413", async (t) => {
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0 });
    const big = "x".repeat(LIMIT + 10);
    const failures: string[] = [];
    const started = Date.now();
    for (let i = 0; i < 200; i++) {
      const kind = ["content-length, write first", "chunked, write first", "fetch", "openai client"][i % 4]!;
      let got: string;
      try {
        if (i % 4 === 0) got = parse(await writeFirst(false)).status === 413 ? "413" : "other";
        else if (i % 4 === 1) got = parse(await writeFirst(true)).status === 413 ? "413" : "other";
        else if (i % 4 === 2) {
          const res = await fetch(`${bridge.baseURL}/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: chat(big),
          });
          const body = (await res.json()) as any;
          got = res.status === 413 && body.error.code === "body_too_large" ? "413" : `${res.status}`;
        } else {
          got = await client.chat.completions.create({ model: "up", messages: [{ role: "user", content: big }] }).then(
            () => "200",
            (err: any) =>
              err.status === 413 && err.error?.code === "body_too_large" ? "413" : `${err.status ?? err.message}`,
          );
        }
      } catch (err) {
        got = (err as Error).message;
      }
      if (got !== "413") failures.push(`#${i} ${kind}: ${got}`);
    }
    t.diagnostic(`200 oversized bodies in ${Date.now() - started} ms, ${failures.length} without their 413`);
    assert.deepEqual(failures, []);
    assert.equal(
      fake.requests.filter((r) => r.rawBody.length > LIMIT).length,
      0,
      "no oversized body reached the upstream",
    );
  });
});
