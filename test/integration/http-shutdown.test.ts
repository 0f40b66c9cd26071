/**
 * Shutting down quickly and politely (issue 20, items 3 and 4):
 * - a turn that finishes during the grace period closes its connection (its answer says
 *   `Connection: close`), idle keep-alive connections are closed as soon as the last turn ended,
 *   and `close()` resolves then — not after the keep-alive timeout;
 * - requests that arrive while the bridge drains get 503 `shutting_down` with `Retry-After`, on an
 *   open keep-alive connection and on a new one, instead of a reset or a refused connection;
 * - a non-streaming turn stopped by the shutdown (running or waiting) gets 503 with `Retry-After`,
 *   not 499 (SDKs do not retry a 4xx);
 * - a stream honours the client's `Connection: close`;
 * - a second SIGTERM does not wait for the turns, but ends the CLI process groups before exiting.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { chmodSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import OpenAI from "openai";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { stopOnSignals } from "../../src/request/http/signals.js";
import { VERSION } from "../../src/core/version.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, within } from "../helpers/bridge.js";
import { connect, type Conn } from "../helpers/raw-http.js";

/** The answers in `raw`, in order (status, lower-cased headers, body by Content-Length). */
function answers(raw: string): Array<{ status: number; headers: Record<string, string>; body: string }> {
  const out = [];
  let rest = raw;
  for (let i = 0; i < 10 && rest.startsWith("HTTP/1.1 "); i++) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) break;
    const [statusLine, ...lines] = rest.slice(0, end).split("\r\n");
    const headers: Record<string, string> = {};
    for (const l of lines) headers[l.slice(0, l.indexOf(":")).toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
    const length = Number(headers["content-length"] ?? 0);
    out.push({ status: Number(statusLine!.slice(9, 12)), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

function assertShuttingDown(a: { status: number; headers: Record<string, string>; body: string } | undefined): void {
  assert.ok(a, "an answer");
  assert.equal(a.status, 503, a.body);
  assert.equal(a.headers["retry-after"], "5");
  assert.equal(a.headers.connection, "close");
  assert.equal(a.headers.server, `clawbridge/${VERSION}`);
  const body = JSON.parse(a.body);
  assert.deepEqual(Object.keys(body), ["error"]);
  assert.equal(body.error.code, "shutting_down");
  assert.equal(body.error.type, "server_error");
}

/** A fake upstream whose non-streamed answers wait for `release()`. */
async function gatedUpstream(): Promise<{ fake: FakeOpenAI; release: () => void }> {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const answer = (text: string) =>
    JSON.stringify({
      id: "x",
      object: "chat.completion",
      created: 1,
      model: "up",
      choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
    });
  const fake = await startFakeOpenAI((req) => ({
    kind: "steps",
    headers: { "content-type": "application/json" },
    steps: [() => gate, answer(`finished: ${req.lastUser}`)],
  }));
  return { fake, release };
}

const chatRequest = (host: string, text: string, extra = "") => {
  const body = JSON.stringify({ model: "up", messages: [{ role: "user", content: text }] });
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nx-session-id: ${text}\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
};

describe("shutdown with keep-alive clients", () => {
  test("a turn that finishes during the grace period (official openai client, keep-alive pool): its answer says Connection: close and close() resolves right after it", async (t) => {
    const { fake, release } = await gatedUpstream();
    const bridge = await startTestBridge({
      server: { shutdownGraceSeconds: 20 },
      backends: { up: { type: "openai", baseUrl: fake.url } },
      models: [{ id: "up", backend: "up" }],
    });
    try {
      const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0 });
      const answer = client.chat.completions
        .create({ model: "up", messages: [{ role: "user", content: "long turn" }] })
        .withResponse();
      assert.ok(await eventually(() => fake.requests.length === 1, 10_000), "the turn reached the upstream");
      const closing = bridge.close();
      await new Promise((r) => setTimeout(r, 100));
      release();
      const { data, response } = await answer;
      const answeredAt = Date.now();
      assert.equal(data.choices[0]?.message.content, "finished: long turn");
      assert.equal(response.headers.get("connection"), "close", "an answer sent while closing closes its connection");
      await within(closing, 10_000, "close() after the last turn");
      const ms = Date.now() - answeredAt;
      t.diagnostic(`close() resolved ${ms} ms after the last answer`);
      assert.ok(ms < 5000, `${ms} ms`);
    } finally {
      release();
      await bridge.close(0);
      await fake.close();
      cleanup(bridge.dataDir);
    }
  });

  test("an idle keep-alive client is closed as soon as the last turn ends; requests during the drain get 503 + Retry-After (keep-alive connection, new connection, official client)", async (t) => {
    const { fake, release } = await gatedUpstream();
    const bridge = await startTestBridge({
      server: { shutdownGraceSeconds: 20 },
      backends: { up: { type: "openai", baseUrl: fake.url } },
      models: [{ id: "up", backend: "up" }],
    });
    const host = new URL(bridge.url).host;
    const conns: Conn[] = [];
    try {
      // Two idle keep-alive connections (each served once), and one running turn.
      const idle = await connect(bridge.port);
      const asker = await connect(bridge.port);
      const runner = await connect(bridge.port);
      conns.push(idle, asker, runner);
      for (const c of [idle, asker]) {
        c.socket.write(`GET /v1/models HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
        assert.ok(await c.waitFor(/"object":"list"/, 5000));
      }
      runner.socket.write(chatRequest(host, "running"));
      assert.ok(await eventually(() => fake.requests.length === 1, 10_000), "the turn reached the upstream");

      const closing = bridge.close();
      // On a keep-alive connection opened before the shutdown.
      asker.socket.write(chatRequest(host, "too late"));
      assert.ok(await asker.closed(5000), "the connection is closed after the 503");
      assertShuttingDown(answers(asker.received())[1]);
      // On a new connection: the port is still open while the turns drain.
      const late = await connect(bridge.port);
      conns.push(late);
      late.socket.write(`GET /health HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
      assert.ok(await late.closed(5000));
      assertShuttingDown(answers(late.received())[0]);
      // The official client sees the 503 and its Retry-After.
      const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0 });
      await assert.rejects(
        client.chat.completions.create({ model: "up", messages: [{ role: "user", content: "sdk, too late" }] }),
        (err: any) => {
          assert.equal(err.status, 503);
          assert.equal(err.error?.code, "shutting_down");
          assert.equal(err.headers?.["retry-after"] ?? err.headers?.get?.("retry-after"), "5");
          return true;
        },
      );
      assert.equal(
        idle.isClosed(),
        false,
        "an idle connection is kept while turns run (it would get a 503, not a reset)",
      );
      assert.equal(fake.requests.length, 1, "nothing that came during the drain reached the upstream");

      release();
      assert.ok(await runner.waitFor(/finished: running/, 10_000), "the running turn finished");
      const lastTurnEnded = Date.now();
      const first = answers(runner.received())[0]!;
      assert.equal(first.status, 200);
      assert.equal(first.headers.connection, "close");
      await within(closing, 10_000, "close() after the last turn");
      const closedMs = Date.now() - lastTurnEnded;
      assert.ok(await idle.closed(2000), "the idle keep-alive connection was ended by the bridge");
      assert.ok(await runner.closed(2000), "the finished turn's connection was ended by the bridge");
      t.diagnostic(
        `close() resolved ${closedMs} ms after the last turn ended (idle keep-alive client open until then)`,
      );
      assert.ok(closedMs < 5000, `${closedMs} ms`);
    } finally {
      release();
      for (const c of conns) c.socket.destroy();
      await bridge.close(0);
      await fake.close();
      cleanup(bridge.dataDir);
    }
  });
});

describe("streams and Connection: close", () => {
  test("a stream honours the client's Connection: close (header and close), and keeps alive otherwise", async () => {
    const fake = await startFakeOpenAI();
    const bridge = await startTestBridge({
      backends: { up: { type: "openai", baseUrl: fake.url } },
      models: [{ id: "up", backend: "up" }],
    });
    const host = new URL(bridge.url).host;
    const body = JSON.stringify({ model: "up", stream: true, messages: [{ role: "user", content: "stream me" }] });
    const request = (conn: string) =>
      `POST /v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n${conn}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const conns: Conn[] = [];
    try {
      const closing = await connect(bridge.port);
      const keeping = await connect(bridge.port);
      conns.push(closing, keeping);
      closing.socket.write(request("Connection: close\r\n"));
      keeping.socket.write(request(""));
      for (const c of [closing, keeping]) assert.ok(await c.waitFor(/data: \[DONE\]/, 10_000), c.received());
      const head = (c: Conn) => c.received().slice(0, c.received().indexOf("\r\n\r\n")).toLowerCase();
      assert.match(head(closing), /\r\nconnection: close\r\n/);
      assert.match(head(keeping), /\r\nconnection: keep-alive\r\n/);
      assert.ok(await closing.closed(3000), "the stream's connection is closed after [DONE]");
      assert.equal(await keeping.closed(300), false, "a keep-alive stream's connection stays open");
    } finally {
      for (const c of conns) c.socket.destroy();
      await bridge.close(0);
      await fake.close();
      cleanup(bridge.dataDir);
    }
  });
});

/** An opencode-type CLI that reads its prompt and then runs for 30 s (in its own process group). */
function hangingCli(dir: string): string {
  const file = path.join(dir, "hang.sh");
  writeFileSync(file, "#!/bin/sh\ncat >/dev/null\nsleep 30\n");
  chmodSync(file, 0o755);
  return file;
}

describe("turns stopped by the shutdown", () => {
  test("a non-streaming turn aborted by the shutdown, and one that waited for a slot, get 503 + Retry-After (not 499); the CLI is reaped", async () => {
    const dir = tempDir("cb-http-shut-");
    const mark = `CB_HTTP_SHUTDOWN=${randomUUID()}`;
    const bridge = await startTestBridge({
      server: { maxConcurrent: 1 },
      backends: {
        cli: {
          type: "opencode",
          command: hangingCli(dir),
          env: { [mark.split("=")[0]!]: mark.split("=")[1]! },
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [{ id: "up", backend: "cli" }],
    });
    try {
      const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0, timeout: 20_000 });
      const outcome = (p: Promise<unknown>) =>
        p.then(
          () => ({ status: 200, code: "", retryAfter: null as string | null }),
          (err: any) => ({
            status: err.status,
            code: err.error?.code,
            retryAfter: err.headers?.["retry-after"] ?? err.headers?.get?.("retry-after") ?? null,
          }),
        );
      const running = outcome(
        client.chat.completions.create(
          { model: "up", messages: [{ role: "user", content: "running" }] },
          { headers: { "x-session-id": "a" } },
        ),
      );
      assert.ok(await eventually(() => pidsWithEnv(mark).length > 0, 10_000), "the CLI runs");
      const waiting = outcome(
        client.chat.completions.create(
          { model: "up", messages: [{ role: "user", content: "waiting" }] },
          { headers: { "x-session-id": "b" } },
        ),
      );
      await new Promise((r) => setTimeout(r, 200));
      await within(bridge.close(300), 15_000, "close()");
      for (const [name, o] of [
        ["running", await running],
        ["waiting", await waiting],
      ] as const) {
        assert.deepEqual(o, { status: 503, code: "shutting_down", retryAfter: "5" }, name);
      }
      assert.ok(await eventually(() => pidsWithEnv(mark).length === 0, 5000), "no CLI left");
    } finally {
      await bridge.close(0);
      cleanup(bridge.dataDir);
      cleanup(dir);
    }
  });

  test("a second SIGTERM does not wait for the turns, but ends the CLI process groups before it exits", async () => {
    const dir = tempDir("cb-http-sig-");
    const mark = `CB_HTTP_SIGNAL=${randomUUID()}`;
    const bridge = await startTestBridge({
      server: { shutdownGraceSeconds: 30 },
      backends: {
        cli: {
          type: "opencode",
          command: hangingCli(dir),
          env: { [mark.split("=")[0]!]: mark.split("=")[1]! },
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [{ id: "up", backend: "cli" }],
    });
    const signals = new EventEmitter();
    const lines: string[] = [];
    const exits: Array<{ code: number; cliLeft: number; at: number }> = [];
    let stop = () => {};
    try {
      stop = stopOnSignals(bridge, {
        source: signals as unknown as NodeJS.Process,
        write: (l) => void lines.push(l),
        exit: (code) => void exits.push({ code, cliLeft: pidsWithEnv(mark).length, at: Date.now() }),
      });
      const turn = fetch(`${bridge.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "up", messages: [{ role: "user", content: "a long one" }] }),
      }).then(
        (r) => r.text(),
        () => "",
      );
      assert.ok(await eventually(() => pidsWithEnv(mark).length > 0, 10_000), "the CLI runs");
      signals.emit("SIGTERM");
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(exits.length, 0, "the first SIGTERM waits for the turn (grace 30 s)");
      assert.ok(pidsWithEnv(mark).length > 0, "the CLI still runs");
      const second = Date.now();
      signals.emit("SIGTERM");
      assert.ok(await eventually(() => exits.length > 0, 10_000), "the second SIGTERM exits");
      assert.deepEqual(
        exits.map((e) => [e.code, e.cliLeft]),
        [[130, 0]],
        "exit 130, with no CLI process left when it exits",
      );
      assert.ok(exits[0]!.at - second < 8000, "without waiting for the grace period");
      assert.match(lines.join(""), /SIGTERM received, finishing running turns/);
      assert.match(lines.join(""), /SIGTERM again, ending the CLI processes and exiting now/);
      await turn;
    } finally {
      stop();
      await bridge.close(0);
      cleanup(bridge.dataDir);
      cleanup(dir);
    }
  });
});
