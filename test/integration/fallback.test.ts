/**
 * Fallback chains (issue 28), with the real bridge, the official `openai` client and fake model
 * APIs as the upstreams (`openai` backends): a primary that fails before any output hands the turn
 * to the next model of its chain, in the same request (header, event, the history reaching it); an
 * exhausted backend is skipped, without being tried, until its reset, and that survives a restart;
 * every model exhausted is a 429 with Retry-After; a 400 or an error after the first content does
 * not fall back.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { BridgeEvent } from "../../src/wire/events.js";
import { startFakeOpenAI, type FakeOpenAI, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

/** What each fake answers next, by the marker in the person's last message. */
function scripted(name: string): (req: { lastUser: string }) => Reply {
  return (req) => {
    const u = req.lastUser;
    if (u.includes(`${name}:429`))
      return {
        kind: "raw",
        status: 429,
        headers: { "content-type": "application/json", "retry-after": "120" },
        frames: [
          JSON.stringify({
            error: {
              message: "Rate limit reached for requests",
              type: "rate_limit_error",
              code: "rate_limit_exceeded",
            },
          }),
        ],
      };
    if (u.includes(`${name}:400`)) return { kind: "error", status: 400, message: "bad parameter: temperature" };
    if (u.includes(`${name}:cut`)) return { kind: "reset", afterChunks: ["partial "] };
    return { kind: "text", chunks: [`${name} says: `, u.split("\n").at(-1)!.slice(0, 60)] };
  };
}

describe("fallback chains", () => {
  let primary: FakeOpenAI;
  let second: FakeOpenAI;
  let third: FakeOpenAI;
  let bridge: TestBridge;
  let dataDir: string;
  const events: BridgeEvent[] = [];
  const config = () => ({
    dataDir,
    backends: {
      a: { type: "openai", baseUrl: primary.url, limits: { backoffSeconds: 60 } },
      b: { type: "openai", baseUrl: second.url },
      c: { type: "openai", baseUrl: third.url },
      down: { type: "openai", baseUrl: "http://127.0.0.1:9/v1", connectTimeoutSeconds: 2 },
    },
    models: [
      { id: "main", name: "Main", backend: "a", model: "m-a", fallback: ["backup", "last"], fallbackNotice: true },
      { id: "backup", name: "Backup", backend: "b", model: "m-b" },
      { id: "last", name: "Last", backend: "c", model: "m-c" },
      { id: "offline", backend: "down", model: "m-d", fallback: ["backup"] },
    ],
  });

  before(async () => {
    primary = await startFakeOpenAI(scripted("A"));
    second = await startFakeOpenAI(scripted("B"));
    third = await startFakeOpenAI(scripted("C"));
    dataDir = tempDir("cb-fallback-");
    bridge = await startTestBridge(config());
    bridge.bus.on((e) => events.push(e));
  });

  after(async () => {
    await bridge?.close(0);
    await Promise.all([primary?.close(), second?.close(), third?.close()]);
    cleanup(dataDir);
  });

  const client = () => new OpenAI({ baseURL: bridge.baseURL, apiKey: "k", maxRetries: 0, timeout: 60_000 });

  async function stream(model: string, messages: OpenAI.ChatCompletionMessageParam[]) {
    const { data, response } = await client()
      .chat.completions.create({ model, stream: true, messages }, { headers: { "x-session-id": `fb-${randomUUID()}` } })
      .withResponse();
    let text = "";
    for await (const c of data) text += c.choices[0]?.delta?.content ?? "";
    return { text, answeredBy: response.headers.get("x-clawbridge-answered-by"), status: response.status };
  }

  test("a backend that is down: the next model answers in the same streamed request, named in the header and an event, with the history", async () => {
    const before = second.mainRequests().length;
    const r = await stream("offline", [
      { role: "user", content: "earlier question EARLY-1" },
      { role: "assistant", content: "earlier answer" },
      { role: "user", content: "the new one NEW-1" },
    ]);
    assert.equal(r.answeredBy, "backup");
    assert.match(r.text, /^B says: /);
    const got = second.mainRequests().slice(before);
    assert.equal(got.length, 1);
    const sent = JSON.stringify(got[0]!.body.messages);
    assert.match(sent, /EARLY-1/, "the earlier history reaches the fallback model");
    assert.match(sent, /NEW-1/);
    const ev = events.find((e) => e.type === "turn.fallback" && e.fromModel === "offline") as any;
    assert.ok(ev, "a turn.fallback event");
    assert.equal(ev.to, "backup");
    assert.equal(ev.reason, "backend_unavailable");
  });

  test("a limit (429 with Retry-After): the next model answers with a notice; the limited backend is skipped, not tried, until its reset; all exhausted is a 429 with the earliest reset", async () => {
    const aBefore = primary.mainRequests().length;
    const r1 = await stream("main", [{ role: "user", content: "hello A:429" }]);
    assert.equal(r1.answeredBy, "backup");
    assert.match(r1.text, /^\(Main is at its limit until \d\d:\d\d; Backup answered\.\)\n\nB says: /, r1.text);
    assert.equal(primary.mainRequests().length, aBefore + 1);
    const limited = events.find((e) => e.type === "backend.limited" && e.backend === "a") as any;
    assert.ok(limited && limited.resetAt > Date.now() + 100_000, "the reset the upstream gave (Retry-After: 120)");

    // Skipped without being tried.
    const r2 = await stream("main", [{ role: "user", content: "again" }]);
    assert.equal(r2.answeredBy, "backup");
    assert.equal(primary.mainRequests().length, aBefore + 1, "the exhausted backend saw no request");
    const skip = events.filter((e) => e.type === "turn.fallback" && e.fromBackend === "a").at(-1) as any;
    assert.equal(skip.reason, "exhausted");

    // The second is at its limit too: the third answers.
    const r3 = await stream("main", [{ role: "user", content: "now B:429" }]);
    assert.equal(r3.answeredBy, "last");
    assert.match(r3.text, /C says: /);
  });

  test("a restart keeps the exhausted state; every model exhausted: 429 with Retry-After and each backend named", async () => {
    await bridge.close(0);
    bridge = await startTestBridge(config());
    bridge.bus.on((e) => events.push(e));
    const aBefore = primary.mainRequests().length;
    const r = await stream("main", [{ role: "user", content: "after the restart" }]);
    assert.equal(r.answeredBy, "last", "a and b are still skipped after the restart");
    assert.equal(primary.mainRequests().length, aBefore, "a was not tried");
    // The last one reaches its limit during the turn: nothing was sent yet, so an HTTP 429.
    const during = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "main", stream: true, messages: [{ role: "user", content: "now C:429" }] }),
    });
    assert.equal(during.status, 429);
    assert.ok(Number(during.headers.get("retry-after")) > 0);
    assert.equal(((await during.json()) as any).error.code, "limit_reached");
    // Now all three are at their limit: refused before anything runs.
    const res = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "main", stream: true, messages: [{ role: "user", content: "anyone?" }] }),
    });
    assert.equal(res.status, 429);
    const retry = Number(res.headers.get("retry-after"));
    assert.ok(retry > 0 && retry <= 120, `Retry-After is the earliest reset: ${retry}`);
    const body = (await res.json()) as any;
    assert.equal(body.error.code, "limit_reached");
    assert.match(body.error.message, /main \(a\).*backup \(b\).*last \(c\)/);
  });

  test("a 400 from the primary does not fall back; an error after the first content does not either", async () => {
    // A fresh bridge and data dir: nothing exhausted.
    await bridge.close(0);
    cleanup(dataDir);
    dataDir = tempDir("cb-fallback-");
    bridge = await startTestBridge(config());
    const bBefore = second.mainRequests().length;
    await assert.rejects(
      client().chat.completions.create({ model: "main", messages: [{ role: "user", content: "x A:400" }] }),
      (err: any) => err.status === 400 && /temperature/.test(err.message),
    );
    // The primary streams a first chunk, then its connection breaks: the error reaches the client in the stream.
    const { data, response } = await client()
      .chat.completions.create({ model: "main", stream: true, messages: [{ role: "user", content: "y A:cut" }] })
      .withResponse();
    assert.equal(response.headers.get("x-clawbridge-answered-by"), "main");
    let text = "";
    let error: Error | undefined;
    try {
      for await (const c of data) text += c.choices[0]?.delta?.content ?? "";
    } catch (err) {
      error = err as Error;
    }
    assert.equal(text, "partial ");
    assert.ok(error, "a stream error after the first content");
    assert.equal(second.mainRequests().length, bBefore, "the fallback model was not asked");
  });
});
