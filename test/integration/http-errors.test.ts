/**
 * Errors raised before any route runs (issue 20, item 6): node:http's parser errors, an HTTP/2
 * preface, an unknown method, headers too large, an unknown `Expect`, a missing Host. Each is
 * answered with an OpenAI-shaped body (`{"error":{message,type,code,param}}`), `Connection: close`
 * and the bridge's `server` header, and the connection is closed. Sent on raw sockets: an HTTP
 * client would refuse to send most of these.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { VERSION } from "../../src/core/version.js";
import { cleanup, startTestBridge, type TestBridge } from "../helpers/bridge.js";

let fake: FakeOpenAI;
let bridge: TestBridge;

before(async () => {
  fake = await startFakeOpenAI();
  bridge = await startTestBridge({
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "up", backend: "up" }],
  });
});

after(async () => {
  await bridge?.close(0);
  await fake?.close();
  if (bridge) cleanup(bridge.dataDir);
});

interface Exchange {
  raw: string;
  /** The server closed the connection (within the wait). */
  closed: boolean;
}

/** Write `bytes` on a fresh connection and read until the server closes it (at most `waitMs`). */
function exchange(bytes: string | Buffer, waitMs = 5000): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = net.connect(bridge.port, "127.0.0.1");
    let raw = "";
    let closed = false;
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on("connect", () => socket.write(bytes));
    socket.on("data", (d) => (raw += d.toString("latin1")));
    socket.on("end", () => (closed = true));
    socket.on("error", () => (closed = true)); // a reset after the answer is a close too
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ raw, closed });
    });
  });
}

interface Parsed {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function parse(raw: string): Parsed {
  const end = raw.indexOf("\r\n\r\n");
  assert.ok(end > 0, `an HTTP answer: ${JSON.stringify(raw.slice(0, 200))}`);
  const [statusLine, ...lines] = raw.slice(0, end).split("\r\n");
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine!);
  assert.ok(m, `status line: ${statusLine}`);
  const headers: Record<string, string> = {};
  for (const l of lines) {
    const i = l.indexOf(":");
    headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const length = Number(headers["content-length"]);
  assert.ok(Number.isInteger(length), `content-length: ${headers["content-length"]}`);
  return { status: Number(m[1]), headers, body: raw.slice(end + 4, end + 4 + length) };
}

/** An OpenAI-shaped error answer that closes its connection. */
function assertOpenAIClose(x: Exchange, status: number, code: string): Parsed {
  const p = parse(x.raw);
  assert.equal(p.status, status, x.raw);
  assert.match(p.headers["content-type"] ?? "", /^application\/json/);
  assert.equal(p.headers.connection, "close");
  assert.equal(p.headers.server, `clawbridge/${VERSION}`);
  const body = JSON.parse(p.body);
  assert.deepEqual(Object.keys(body), ["error"]);
  assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
  assert.equal(body.error.code, code);
  assert.equal(body.error.type, "invalid_request_error");
  assert.ok(typeof body.error.message === "string" && body.error.message.length > 0);
  assert.equal(body.error.param, null);
  assert.ok(x.closed, "the connection is closed after the answer");
  return p;
}

const chatBody = JSON.stringify({ model: "up", messages: [{ role: "user", content: "hi" }] });

describe("HTTP-level errors are OpenAI-shaped and close the connection", () => {
  const cases: Array<{ name: string; bytes: string; status: number; code: string }> = [
    {
      name: "a bad header name",
      bytes: "GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",
      status: 400,
      code: "bad_request",
    },
    {
      name: "bad chunking on the chat route",
      bytes:
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
      status: 400,
      code: "bad_request",
    },
    {
      name: "Transfer-Encoding with Content-Length (request smuggling shape)",
      bytes: `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: ${chatBody.length}\r\n\r\n${chatBody}`,
      status: 400,
      code: "bad_request",
    },
    {
      name: "an HTTP/2 preface",
      bytes: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
      status: 400,
      code: "http_version_not_supported",
    },
    {
      name: "an HTTP/3.0 request line",
      bytes: "GET /v1/models HTTP/3.0\r\nHost: x\r\n\r\n",
      status: 400,
      code: "http_version_not_supported",
    },
    {
      name: "an unknown method",
      bytes: "FOO /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
      status: 400,
      code: "method_not_supported",
    },
    {
      name: "a CONNECT request",
      bytes: "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n",
      status: 400,
      code: "method_not_supported",
    },
    {
      name: "headers over 16 KiB",
      bytes: `GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`,
      status: 431,
      code: "headers_too_large",
    },
    {
      name: "an unknown Expect",
      bytes: `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: ${chatBody.length}\r\n\r\n${chatBody}`,
      status: 417,
      code: "expectation_failed",
    },
    {
      name: "an HTTP/1.1 request without Host",
      bytes: "GET /v1/models HTTP/1.1\r\n\r\n",
      status: 400,
      code: "missing_host",
    },
    {
      name: "a bad request line",
      bytes: "GET /v1/models HTTP/1.1 extra\r\nHost: x\r\n\r\n",
      status: 400,
      code: "bad_request",
    },
  ];
  for (const c of cases) {
    test(`${c.name} → ${c.status} ${c.code}`, async () => {
      const x = await exchange(c.bytes);
      assertOpenAIClose(x, c.status, c.code);
    });
  }

  test("the unknown Expect is not run (the upstream is never called)", async () => {
    const before = fake.requests.length;
    await exchange(
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: ${chatBody.length}\r\n\r\n${chatBody}`,
    );
    assert.equal(fake.requests.length, before);
  });

  test("pipelined garbage after a good request: the good answer, then the error, then the close", async () => {
    const x = await exchange(
      `GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n`,
    );
    const first = parse(x.raw);
    assert.equal(first.status, 200);
    const rest = x.raw.slice(x.raw.indexOf(first.body) + first.body.length);
    assertOpenAIClose({ raw: rest, closed: x.closed }, 400, "bad_request");
  });

  test("the bridge still serves a normal client afterwards (official openai client)", async () => {
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0 });
    const res = await client.chat.completions.create({
      model: "up",
      messages: [{ role: "user", content: "still there?" }],
    });
    assert.match(res.choices[0]?.message.content ?? "", /still there\?/);
  });
});
