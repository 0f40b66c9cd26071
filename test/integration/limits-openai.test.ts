/**
 * Limits and refused keys of an OpenAI-compatible upstream (the `openai` backend) against the fake
 * OpenAI API on 127.0.0.1 (issue 28): a 429 with `Retry-After: 120` ends the turn with ONE
 * `limit_reached` (429, retryable, resetAt ≈ now + 120 s), streamed or not; an HTTP-date
 * Retry-After and `x-ratelimit-reset-*` give resetAt too; 402 / `insufficient_quota` are limits;
 * 401 / 403 are `auth_failed` (401). A 429 that clears within 10 s (a full queue) stays the
 * retryable `upstream_error` it was (backend-openai.test.ts).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import pino from "pino";
import type { Backend } from "../../src/backends/contract/backend.js";
import { openaiBackend, openaiOptionsSchema } from "../../src/backends/openai/backend.js";
import { type FakeOpenAI, type Reply, startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { collect, assertEndsOnce, errorOf, turnInput } from "../helpers/backend-turn.js";
import { chatRequestSchema } from "../../src/request/chat-api/schema.js";

const logger = pino({ level: "silent" });

describe("openai backend: limits and keys of the upstream", () => {
  let fake: FakeOpenAI;
  const backends: Backend[] = [];

  const make = () => {
    const b = openaiBackend.create(
      "local",
      openaiOptionsSchema.parse({ baseUrl: `${fake.url}`, apiKey: "sk-secret-key-0123456789" }),
      { logger, dataDir: "/tmp" },
    );
    backends.push(b);
    return b;
  };
  const run = async (reply: Reply, stream = true) => {
    fake.setScript(() => reply);
    const t = turnInput("olim", "hello", { resume: false });
    t.request = chatRequestSchema.parse({ model: "m", stream, messages: [{ role: "user", content: "hello" }] });
    const evs = await collect(make().run(t));
    assertEndsOnce(evs);
    return { evs, e: errorOf(evs) };
  };
  const http = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => ({
    kind: "raw",
    status,
    headers: { "content-type": "application/json", ...headers },
    frames: [JSON.stringify(body)],
  });

  before(async () => {
    fake = await startFakeOpenAI();
  });

  after(async () => {
    for (const b of backends) await b.close?.();
    await fake?.close();
  });

  for (const stream of [true, false]) {
    test(`429 with Retry-After: 120 → limit_reached, resetAt ≈ now + 120 s (${stream ? "streamed" : "JSON"})`, async () => {
      const t0 = Date.now();
      const { e, evs } = await run(
        http(
          429,
          { error: { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" } },
          {
            "retry-after": "120",
          },
        ),
        stream,
      );
      assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
      assert.equal(e?.status, 429);
      assert.equal(e?.retryable, true);
      assert.match(e!.message, /Rate limit reached for requests \(retry after 120 s\)/);
      assert.ok(e?.resetAt && e.resetAt >= t0 + 120_000 && e.resetAt <= Date.now() + 120_000, String(e?.resetAt));
    });
  }

  test("an HTTP-date Retry-After and OpenAI's x-ratelimit-reset-* give resetAt", async () => {
    const at = new Date(Math.ceil((Date.now() + 300_000) / 1000) * 1000);
    const d = await run(http(429, { error: { message: "slow down" } }, { "retry-after": at.toUTCString() }));
    assert.equal(d.e?.resetAt, at.getTime());
    const t0 = Date.now();
    const x = await run(
      http(
        429,
        { error: { message: "Rate limit reached", code: "rate_limit_exceeded" } },
        {
          "x-ratelimit-remaining-tokens": "0",
          "x-ratelimit-reset-tokens": "6m0s",
        },
      ),
    );
    assert.equal(x.e?.code, "limit_reached");
    assert.ok(x.e?.resetAt && Math.abs(x.e.resetAt - (t0 + 360_000)) < 5000, String(x.e?.resetAt));
  });

  test("insufficient_quota and 402 → limit_reached without a reset", async () => {
    const q = await run(
      http(429, {
        error: { message: "You exceeded your current quota", type: "insufficient_quota", code: "insufficient_quota" },
      }),
    );
    assert.deepEqual([q.e?.code, q.e?.resetAt], ["limit_reached", undefined]);
    const p = await run(http(402, { error: { message: "Payment required: add credits" } }), false);
    assert.deepEqual([p.e?.code, p.e?.status], ["limit_reached", 429]);
  });

  test("401 and 403 → auth_failed (401), the key never in the message", async () => {
    for (const status of [401, 403]) {
      const { e } = await run(
        http(status, { error: { message: "Incorrect API key provided: sk-secret-key-0123456789" } }),
      );
      assert.deepEqual([e?.code, e?.status, e?.retryable], ["auth_failed", 401, false], String(status));
      assert.ok(!e!.message.includes("0123456789"), e!.message);
    }
  });

  test("a 429 that clears within seconds, and a 500, stay upstream_error", async () => {
    const m = await run(http(429, { error: { message: "queue is full" } }, { "retry-after": "3" }));
    assert.deepEqual([m.e?.code, m.e?.status, m.e?.retryable], ["upstream_error", 429, true]);
    const s = await run(http(500, { error: { message: "boom" } }));
    assert.equal(s.e?.code, "upstream_error");
  });

  test("a limit inside the stream (an error frame with code 429) → limit_reached", async () => {
    const { e, evs } = await run({
      kind: "raw",
      status: 200,
      headers: { "content-type": "text/event-stream" },
      frames: [
        `data: ${JSON.stringify({ error: { message: "Rate limit exceeded: free-models-per-day", code: 429 } })}\n\n`,
      ],
    });
    assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
  });
});
