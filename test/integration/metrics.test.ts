/**
 * `GET /metrics` on a real bridge (issue 15): Prometheus text that a real text-format parser reads;
 * a turn through the official `openai` client moves the turn counter, the first-byte, duration and
 * queue-wait histograms and the token counter; a 429 moves the 429 counter; the queue gauges are
 * read at scrape time; `metrics.enabled: false` → 404 like any unknown route; with API keys the
 * scraper needs one (401 without), unless `metrics.requireKey: false`.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI from "openai";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, type TestBridge } from "../helpers/bridge.js";
import { histogram, parseMetrics, value, type Scrape } from "../helpers/prometheus.js";

const KEY = "metrics-test-key-0123456789";

async function scrape(bridge: TestBridge, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await fetch(`${bridge.url}/metrics`, { headers });
  assert.equal(res.status, 200, `GET /metrics: ${res.status}`);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return parseMetrics(await res.text());
}

const t = { model: "m", backend: "up" };

test("a turn moves the turn counter, the first-byte, duration and queue-wait histograms and the tokens", async () => {
  const fake = await startFakeOpenAI(() => ({
    kind: "text",
    chunks: ["hello ", "there"],
    delayMs: 20,
    usage: { prompt_tokens: 42, completion_tokens: 7 },
  }));
  const bridge = await startTestBridge({
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  try {
    const before = await scrape(bridge);
    assert.ok(before.families.get("process_cpu_seconds_total"), "Node's process metrics are there");
    assert.equal(value(before, "clawbridge_turns_total"), 0);
    assert.equal(value(before, "clawbridge_queue_limit", { limit: "concurrent" }), 4);

    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0 });
    const stream = await client.chat.completions.create(
      { model: "m", stream: true, messages: [{ role: "user", content: "hi" }] },
      { headers: { "x-session-id": "metrics-a" } },
    );
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    assert.equal(text, "hello there");
    const whole = await client.chat.completions.create(
      { model: "m", messages: [{ role: "user", content: "again" }] },
      { headers: { "x-session-id": "metrics-a" } },
    );
    assert.equal(whole.choices[0]?.message.content, "hello there");

    // The turn's end is published as the answer ends; the scrape that follows sees it.
    let after = await scrape(bridge);
    await eventually(
      async () => value((after = await scrape(bridge)), "clawbridge_turns_total", { ...t, outcome: "completed" }) >= 2,
      5000,
    );
    assert.equal(value(after, "clawbridge_turns_total", { ...t, outcome: "completed" }), 2, "two completed turns");
    assert.equal(
      histogram(after, "clawbridge_turn_first_byte_seconds", t).count,
      2,
      "time to first byte observed per turn",
    );
    const duration = histogram(after, "clawbridge_turn_duration_seconds", { ...t, outcome: "completed" });
    assert.equal(duration.count, 2, "duration observed per turn");
    assert.ok(duration.sum > 0.02, `the turns took the upstream's time (${duration.sum} s)`);
    assert.equal(histogram(after, "clawbridge_queue_wait_seconds").count, 2, "queue wait observed per turn");
    assert.equal(value(after, "clawbridge_tokens_total", { ...t, kind: "prompt" }), 84);
    assert.equal(value(after, "clawbridge_tokens_total", { ...t, kind: "completion" }), 14);
    assert.equal(value(after, "clawbridge_turns_in_flight"), 0);

    // /health checks the backends; their health is published and shows as clawbridge_backend_up.
    await (await fetch(`${bridge.url}/health`)).body?.cancel();
    assert.ok(
      await eventually(async () => value(await scrape(bridge), "clawbridge_backend_up", { backend: "up" }) === 1, 5000),
      "clawbridge_backend_up{backend=up} is 1",
    );
  } finally {
    await bridge.close(0);
    await fake.close();
    cleanup(bridge.dataDir);
  }
});

test("a 429 moves the 429 counter; the queue gauges show the running turn", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const fake = await startFakeOpenAI(() => ({
    kind: "steps",
    steps: [
      async () => gate,
      `data: ${JSON.stringify({ id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { role: "assistant", content: "slow" }, finish_reason: "stop" }] })}\n\n`,
      "data: [DONE]\n\n",
    ],
  }));
  const bridge = await startTestBridge({
    server: { maxConcurrent: 1, maxQueue: 0 },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  try {
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0 });
    const before = await scrape(bridge);
    assert.equal(
      value(before, "clawbridge_queue_rejected_total", { model: "m", scope: "bridge" }),
      0,
      "the 429 series exists at 0",
    );

    const slow = client.chat.completions.create(
      { model: "m", stream: true, messages: [{ role: "user", content: "slow one" }] },
      { headers: { "x-session-id": "holder" } },
    );
    assert.ok(
      await eventually(async () => value(await scrape(bridge), "clawbridge_turns_in_flight") === 1, 5000),
      "the slow turn holds the one slot",
    );

    const refused = await client.chat.completions
      .create(
        { model: "m", messages: [{ role: "user", content: "no room" }] },
        { headers: { "x-session-id": "latecomer" } },
      )
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    assert.ok(refused instanceof OpenAI.APIError && refused.status === 429, `refused with 429: ${String(refused)}`);

    const after = await scrape(bridge);
    assert.equal(value(after, "clawbridge_queue_rejected_total", { model: "m", scope: "bridge" }), 1, "one 429");
    assert.equal(value(after, "clawbridge_turns_in_flight"), 1);
    assert.equal(value(after, "clawbridge_queue_limit", { limit: "concurrent" }), 1);
    assert.equal(value(after, "clawbridge_queue_limit", { limit: "queue" }), 0);

    release();
    for await (const _ of await slow) {
      /* drain */
    }
    assert.ok(
      await eventually(async () => value(await scrape(bridge), "clawbridge_turns_in_flight") === 0, 5000),
      "the slot is free again",
    );
  } finally {
    release();
    await bridge.close(0);
    await fake.close();
    cleanup(bridge.dataDir);
  }
});

test("metrics.enabled: false → /metrics is 404, OpenAI-shaped like any unknown route", async () => {
  const fake = await startFakeOpenAI();
  const bridge = await startTestBridge({
    metrics: { enabled: false },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  try {
    assert.equal(bridge.metrics, undefined);
    const res = await fetch(`${bridge.url}/metrics`);
    assert.equal(res.status, 404);
    const body = (await res.json()) as { error: { type: string; code: string; message: string } };
    assert.equal(body.error.type, "not_found_error");
    assert.equal(body.error.code, "not_found");
    assert.match(body.error.message, /No route GET \/metrics/);
  } finally {
    await bridge.close(0);
    await fake.close();
    cleanup(bridge.dataDir);
  }
});

test("with server.apiKeys the scraper needs a key (bearer or x-api-key), unless metrics.requireKey: false", async () => {
  const fake = await startFakeOpenAI();
  const keyed = await startTestBridge({
    server: { apiKeys: [KEY] },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  const open = await startTestBridge({
    server: { apiKeys: [KEY] },
    metrics: { requireKey: false },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  try {
    const attempts: Array<Record<string, string>> = [{}, { authorization: "Bearer wrong-key-0123456789" }];
    for (const headers of attempts) {
      const res = await fetch(`${keyed.url}/metrics`, { headers });
      assert.equal(res.status, 401);
      assert.equal(res.headers.get("www-authenticate"), "Bearer");
      const body = (await res.json()) as { error: { type: string; code: string } };
      assert.deepEqual([body.error.type, body.error.code], ["authentication_error", "invalid_api_key"]);
    }
    assert.ok((await scrape(keyed, { authorization: `Bearer ${KEY}` })).families.get("clawbridge_turns_total"));
    assert.ok((await scrape(keyed, { "x-api-key": KEY })).families.get("clawbridge_turns_total"));
    assert.ok((await scrape(open)).families.get("clawbridge_turns_total"), "requireKey: false serves without a key");
  } finally {
    await keyed.close(0);
    await open.close(0);
    await fake.close();
    cleanup(keyed.dataDir);
    cleanup(open.dataDir);
  }
});
