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

/** One chat turn of `conversation` over `agent`: its status, Retry-After and body. */
function asker(baseURL: string, agent: Agent) {
  return async (conversation: string, signal?: AbortSignal) => {
    const res = await fetch(`${baseURL}/chat/completions`, {
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
}

test("3 flooding conversations (6 requests in flight each) against 6 light ones honouring Retry-After: every light one is served", async () => {
  const fake = await startFakeOpenAI(() => ({ kind: "text", chunks: ["ok"], firstDelayMs: 100 }));
  const bridge = await startTestBridge({
    server: { maxConcurrent: 2, maxQueue: 12, queueTimeoutSeconds: 20 },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  // Our own connections, ended before the bridge closes (it would wait for idle keep-alive ones).
  const agent = new Agent({ connections: 32 });
  const ask = asker(bridge.baseURL, agent);

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

test("5 aggressive conversations (4 clients each, resending at once) against 20 polite ones honouring Retry-After, queue full: every polite one is served, turns per polite one within 2x", async () => {
  const fake = await startFakeOpenAI(() => ({ kind: "text", chunks: ["ok"], firstDelayMs: 100 }));
  // 5 aggressive conversations keep 2 turns waiting each: 10 of the 12 places. Without places kept
  // for refused conversations, a polite client coming back after its Retry-After finds them taken.
  const bridge = await startTestBridge({
    server: { maxConcurrent: 4, maxQueue: 12, queueTimeoutSeconds: 20 },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  const agent = new Agent({ connections: 64 });
  const ask = asker(bridge.baseURL, agent);

  const windowMs = 10_000;
  const stopAll = new AbortController();
  const started = Date.now();
  const open = () => !stopAll.signal.aborted && Date.now() - started < windowMs;
  const unexpected: string[] = [];
  const aggressiveTurns = new Map<string, number>();
  const aggressive = async (conversation: string) => {
    for (let i = 0; i < 2000 && open(); i++) {
      try {
        const a = await ask(conversation, stopAll.signal);
        if (a.status === 200) aggressiveTurns.set(conversation, (aggressiveTurns.get(conversation) ?? 0) + 1);
        else if (a.status === 429)
          await sleep(50); // ignores Retry-After
        else unexpected.push(`${conversation}: ${a.status} ${JSON.stringify(a.body)}`);
      } catch (err) {
        if (open()) unexpected.push(`${conversation}: ${(err as Error).message}`);
      }
    }
  };
  const politeTurns = new Map<string, number>();
  let honoured = 0; // attempts made after sleeping a Retry-After
  let honouredRefused = 0; // ... that were refused again
  const polite = async (conversation: string) => {
    politeTurns.set(conversation, 0);
    let afterRetryAfter = false;
    for (let i = 0; i < 200 && open(); i++) {
      try {
        const a = await ask(conversation, stopAll.signal);
        if (afterRetryAfter) honoured++;
        if (a.status === 200) {
          politeTurns.set(conversation, politeTurns.get(conversation)! + 1);
          afterRetryAfter = false;
          continue;
        }
        if (afterRetryAfter) honouredRefused++;
        if (a.status !== 429 || !(a.retryAfter >= 1)) {
          unexpected.push(`${conversation}: ${a.status} retry-after ${a.retryAfter} ${JSON.stringify(a.body)}`);
          return;
        }
        afterRetryAfter = true;
        await sleep(Math.min(a.retryAfter * 1000, Math.max(0, windowMs - (Date.now() - started))));
      } catch (err) {
        if (open()) unexpected.push(`${conversation}: ${(err as Error).message}`);
        return;
      }
    }
  };

  let timer: NodeJS.Timeout | undefined;
  try {
    const aggressives = Array.from({ length: 5 }, (_, c) => `hog-${c}`).flatMap((c) =>
      Array.from({ length: 4 }, () => aggressive(c)),
    );
    await sleep(300); // the flood holds every place it may
    const polites = Array.from({ length: 20 }, (_, i) => polite(`polite-${i}`));
    // Every loop above ends with the window; this only bounds a hang.
    const hung = new Promise<string>((r) => (timer = setTimeout(() => r("hung"), windowMs + 8000)));
    const outcome = await Promise.race([Promise.all(polites).then(() => "done"), hung]);
    stopAll.abort();
    await Promise.allSettled([...aggressives, ...polites]);
    const turns = [...politeTurns.values()];
    const summary = `polite turns ${JSON.stringify(Object.fromEntries(politeTurns))}, aggressive turns ${JSON.stringify(Object.fromEntries(aggressiveTurns))}, attempts after a Retry-After ${honoured} (${honouredRefused} refused again)`;
    assert.equal(outcome, "done", summary);
    assert.deepEqual(unexpected, [], "every answer is a 200 or a 429 with Retry-After");
    assert.equal(turns.filter((n) => n > 0).length, 20, `every polite conversation served: ${summary}`);
    assert.ok(Math.max(...turns) <= 2 * Math.min(...turns), `turns per polite conversation within 2x: ${summary}`);
    assert.ok(honoured > 20, `the polite clients were refused and came back: ${summary}`);
    assert.ok(honouredRefused <= honoured / 4, `coming back at its Retry-After, a polite client gets in: ${summary}`);
    console.log(`# ${summary}`);
  } finally {
    clearTimeout(timer);
    stopAll.abort();
    await agent.destroy();
    await bridge.close(0);
    await fake.close();
    cleanup(bridge.dataDir);
  }
});
