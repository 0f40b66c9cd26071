/** Many turns in flight at once: all answered, in parallel, with no listener-leak warning. */
import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI from "openai";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge } from "../helpers/bridge.js";

test("40 conversations at once through one bridge: every answer right, no MaxListeners warning", async () => {
  const fake = await startFakeOpenAI((r) => ({ kind: "text", chunks: [`echo ${r.lastUser}`], firstDelayMs: 200 }));
  const bridge = await startTestBridge({
    server: { maxConcurrent: 64 },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: "m", backend: "up" }],
  });
  const warnings: Error[] = [];
  const onWarning = (w: Error) => warnings.push(w);
  process.on("warning", onWarning);
  try {
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "x", maxRetries: 0 });
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        client.chat.completions.create(
          { model: "m", messages: [{ role: "user", content: `question ${i}` }] },
          { headers: { "x-session-id": `conv-${i}` } },
        ),
      ),
    );
    answers.forEach((a, i) => assert.equal(a.choices[0]?.message.content, `echo question ${i}`));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message),
      [],
    );
  } finally {
    process.off("warning", onWarning);
    await bridge.close(0);
    await fake.close();
    cleanup(bridge.dataDir);
  }
});
