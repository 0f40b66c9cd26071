/**
 * Starvation through the HTTP server (issue 20, item 7): a few conversations that flood the bridge
 * (several requests in flight each, resent at once) must not keep light conversations that honour
 * Retry-After from being served. One conversation runs one turn at a time, so its backlog is capped
 * (server.maxQueuedPerConversation) and the free slots go round the conversations.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Agent, fetch } from "undici";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge } from "../helpers/bridge.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("3 flooding conversations (6 requests in flight each) against 6 light ones honouring Retry-After: every light one is served", async () => {
  const fake = await startFakeOpenAI(() => ({ kind: "text", chunks: ["ok"], firstDelayMs: 100 }));
  const bridge = await startTestBridge({
    server: { maxConcurrent: 2, maxQueue: 12, queueTimeoutSeconds: 20 },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  // Our own connections, ended before the bridge closes (it would wait for idle keep-alive ones).
  const agent = new Agent({ connections: 32 });
  const ask = async (conversation: string, signal?: AbortSignal) => {
    const res = await fetch(`${bridge.baseURL}/chat/completions`, {
      dispatcher: agent,
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": conversation },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `from ${conversation}` }] }),
      signal,
    });
    return {
      status: res.status,
      retryAfter: Number(res.headers.get("retry-after") ?? 0),
      body: (await res.json()) as any,
    };
  };

  let stop = false;
  const stopFloods = new AbortController();
  const floodRefusals: string[] = [];
  const unexpected: string[] = [];
  const flood = async (conversation: string) => {
    for (let i = 0; i < 2000 && !stop; i++) {
      try {
        const a = await ask(conversation, stopFloods.signal);
        if (a.status === 429) {
          floodRefusals.push(`${a.body.error.code}: ${a.body.error.message}`);
          await sleep(50); // aggressive: ignores Retry-After
        } else if (a.status !== 200) unexpected.push(`${conversation}: ${a.status} ${JSON.stringify(a.body)}`);
      } catch (err) {
        if (!stop) unexpected.push(`${conversation}: ${(err as Error).message}`);
      }
    }
  };
  const served: Record<string, number> = {};
  const light = async (conversation: string) => {
    for (let attempt = 1; attempt <= 20 && !stop; attempt++) {
      const a = await ask(conversation);
      if (a.status === 200) return void (served[conversation] = attempt);
      if (a.status !== 429 || !(a.retryAfter >= 1))
        unexpected.push(`${conversation}: ${a.status} retry-after ${a.retryAfter} ${JSON.stringify(a.body)}`);
      await sleep(Math.max(1, a.retryAfter) * 1000);
    }
  };

  try {
    const floods = ["flood-a", "flood-b", "flood-c"].flatMap((c) => Array.from({ length: 6 }, () => flood(c)));
    await sleep(400); // the floods hold every place they may
    const lights = Array.from({ length: 6 }, (_, i) => light(`light-${i}`));
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<string>((r) => (timer = setTimeout(() => r("deadline"), 8000)));
    const outcome = await Promise.race([Promise.all(lights).then(() => "done"), deadline]);
    clearTimeout(timer);
    stop = true;
    stopFloods.abort();
    await Promise.allSettled(floods);
    await Promise.allSettled(lights);
    assert.deepEqual(unexpected, [], "every answer is a 200 or a 429 with Retry-After");
    assert.equal(outcome, "done", `light conversations served: ${JSON.stringify(served)}`);
    assert.equal(Object.keys(served).length, 6, `every light conversation served: ${JSON.stringify(served)}`);
    assert.ok(floodRefusals.length > 0, "the floods were refused");
    assert.ok(
      floodRefusals.some((m) => /^conversation_queue_full: .*maxQueuedPerConversation/.test(m)),
      `the floods were refused for their own conversation: ${floodRefusals.slice(0, 3).join(" | ")}`,
    );
  } finally {
    stop = true;
    stopFloods.abort();
    await agent.destroy();
    await bridge.close(0);
    await fake.close();
    cleanup(bridge.dataDir);
  }
});
