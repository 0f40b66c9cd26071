/**
 * The builder sets a schedule by chat (src/workflows/builder/configure.ts,
 * src/workflows/triggers/phrases.ts), through a router whose classifier says "answer" to anything
 * but a build: "run it every weekday at 8" reaches the builder by the router's rule, is read
 * without a model, told back with its cron and next run and a diff, applied after yes and
 * redeployed; `GET /v1/systems/:id` then shows the schedule (with the conversation that set it)
 * and its next run; "every day at 7:30 instead" replaces it; "stop the schedule" removes it.
 * A real bridge, the official client, a fake OpenAI upstream scripting the models.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { SystemRow } from "../../src/wire/runs.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, type TestBridge } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";

const systemText = (req: RecordedRequest) =>
  ((req.body?.messages ?? []) as Array<{ role: string; content: unknown }>)
    .filter((m) => m.role === "system")
    .map((m) => (typeof m.content === "string" ? m.content : ""))
    .join("\n");

const PLAN = JSON.stringify({
  metadata: { system: "digest", name: "Daily digest", description: "a digest", summary: "digest" },
  steps: [
    {
      id: "n-topic",
      action: "CREATE_NODE",
      params: { id: "topic", type: "input", label: "topic", properties: { default: "news" } },
    },
    {
      id: "n-write",
      action: "CREATE_NODE",
      params: {
        id: "write",
        type: "agent",
        label: "write",
        properties: { model: "ans", prompt: "digest of {{topic}}" },
      },
      dependsOn: ["n-topic"],
    },
    {
      id: "e-topic-write",
      action: "CONNECT_NODES",
      params: { from: "${steps.n-topic.output}", to: "${steps.n-write.output}" },
      dependsOn: ["n-topic", "n-write"],
    },
  ],
});

describe("a schedule set by chat", () => {
  let up: FakeOpenAI;
  let b: TestBridge;
  const script = (req: RecordedRequest): Reply => {
    const sys = systemText(req);
    const message = req.lastUser.split("Message:\n").pop() ?? "";
    if (sys.includes("sent to a builder"))
      return {
        kind: "text",
        chunks: [JSON.stringify({ intent: /build a system/.test(message) ? "BUILD" : "UNKNOWN", confidence: 0.9 })],
      };
    if (sys.includes("You classify ONE chat message for a router"))
      return {
        kind: "text",
        chunks: [JSON.stringify({ action: /build a system/.test(message) ? "build" : "answer", confidence: 0.95 })],
      };
    if (sys.includes("You are the Architect")) return { kind: "text", chunks: [PLAN] };
    return { kind: "text", chunks: ["ANSWER"] };
  };

  before(async () => {
    up = await startFakeOpenAI(script);
    b = await startTestBridge({
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        builder: { type: "builder", supervisor: "sup", architect: "arch", answer: "ans", retryDelayScale: 0.05 },
        router: { type: "router", classifier: "cls", answer: "ans", builder: "builder" },
      },
      models: [
        { id: "sup", backend: "up" },
        { id: "arch", backend: "up" },
        { id: "ans", backend: "up" },
        { id: "cls", backend: "up" },
        { id: "builder", backend: "builder" },
        { id: "router", backend: "router" },
      ],
    });
  });
  after(async () => {
    await b?.close();
    await up?.close();
    cleanup(b.dataDir);
  });

  const system = async () => (await (await fetch(`${b.baseURL}/systems/digest`)).json()) as SystemRow;

  test("set, changed and stopped in words; told back with the cron and the next run", async () => {
    const c = new Chat(b.baseURL, "sched-chat", "router", "k");
    assert.match((await c.say("build a system that writes a daily digest")).text, /Done: \*\*Daily digest\*\*/);
    assert.match((await c.say("deploy")).text, /Deploy \*\*(Daily )?digest\*\*\?/);
    assert.match((await c.say("yes")).text, /Deployed \*\*(Daily )?digest\*\*/);
    const modelCalls = up.requests.length;

    const asked = await c.say("run it every weekday at 8");
    assert.equal(up.requests.length, modelCalls, "read without a model");
    assert.match(asked.text, /Schedule: cron `0 8 \* \* 1-5` \([^)]+\), next run \w{3}, \d+ \w{3} \d{4}, 08:00\./);
    assert.match(asked.text, /```diff[\s\S]*\+\s*triggers:[\s\S]*cron: 0 8 \* \* 1-5/);
    assert.match(asked.text, /Apply them\? \(yes \/ no\)/);
    assert.deepEqual((await system()).triggers, [], "nothing before yes");
    assert.match((await c.say("yes")).text, /Applied to \*\*(Daily )?digest\*\*/);
    const [t] = (await system()).triggers;
    assert.equal(t!.cron, "0 8 * * 1-5");
    assert.ok(t!.conversation, "the conversation that set it is told of its runs");
    assert.equal(new Date(t!.next_run_at!).getMinutes(), 0);
    assert.ok(t!.next_run_at! > Date.now());

    assert.match((await c.say("run it every day at 7:30 instead")).text, /cron `30 7 \* \* \*`/);
    await c.say("yes");
    assert.deepEqual(
      (await system()).triggers.map((x) => x.cron),
      ["30 7 * * *"],
      "replaced, not added",
    );

    assert.match((await c.say("stop the schedule")).text, /No schedule: it runs only when asked\./);
    await c.say("yes");
    assert.deepEqual((await system()).triggers, []);
  });
});
