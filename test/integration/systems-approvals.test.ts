/**
 * Approvals inside a run, end to end: a real bridge (in-process, restarted on the same data dir),
 * real command steps, the official `openai` client for chat, and a fake OpenAI upstream (the only
 * faked part: the router's classifier and answer model, which these chats never need).
 * - over HTTP: a run stops `waiting` at its approval (`GET /v1/runs/:id` shows the question, the
 *   data shown and no deadline), stays waiting across a restart, is approved with the API key
 *   after it and finishes (the next step sees who approved); a second decision, and a decision on
 *   a run that is not waiting, are 409s; a body with an unknown field is a 400; no key is a 401;
 * - in chat: the conversation that started the run is told "… is waiting for your approval: …"
 *   with the data; "no" rejects it (the run ends `rejected`); on another run "approve" approves
 *   it and the answer follows the run to its output; a run that reaches its approval after the
 *   turn detached is told on the conversation's next turn, and the "yes" after that approves it.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { RunRow } from "../../src/wire/runs.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const NODE = process.execPath;
const KEY = "approvals-key-123456";

/** draft (a command) → check (approval) → publish (a command that says who approved). */
const publishPost = {
  id: "publish-post",
  name: "Publish Post",
  description: "Drafts a post and publishes it once approved",
  inputs: { type: "object", required: ["topic"], properties: { topic: { type: "string" } } },
  sideEffects: false,
  run: {
    kind: "plan",
    steps: [
      {
        id: "draft",
        uses: "command",
        with: { argv: [NODE, "-e", "console.log('draft about ' + process.argv[1])", "${inputs.topic}"] },
      },
      {
        id: "check",
        uses: "approval",
        dependsOn: ["draft"],
        with: { question: "Publish the draft about ${inputs.topic}?" },
      },
      {
        id: "publish",
        uses: "command",
        dependsOn: ["check"],
        with: {
          argv: [NODE, "-e", "console.log('published, approved by ' + process.argv[1])", "${steps.check.output.by}"],
        },
      },
    ],
  },
};

/** The same, with a draft that takes 1.5 s (the chat detaches before the approval). */
const slowPost = {
  ...publishPost,
  id: "slow-post",
  name: "Slow Post",
  run: {
    ...publishPost.run,
    steps: [
      {
        id: "draft",
        uses: "command",
        with: { argv: [NODE, "-e", "setTimeout(() => console.log('slow draft'), 1500)"] },
      },
      ...publishPost.run.steps.slice(1),
    ],
  },
};

function start(up: FakeOpenAI, dataDir: string): Promise<TestBridge> {
  return startTestBridge(
    {
      dataDir,
      server: { apiKeys: [KEY] },
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        router: { type: "router", classifier: "cls", answer: "ans" },
        quick: { type: "router", classifier: "cls", answer: "ans", detachAfterSeconds: 0.5 },
      },
      models: [
        { id: "cls", backend: "up" },
        { id: "ans", backend: "up" },
        { id: "router", backend: "router" },
        { id: "router-quick", backend: "quick" },
      ],
      systems: [publishPost, slowPost],
    },
    { retryBaseMs: 20 },
  );
}

describe("approvals", () => {
  let up: FakeOpenAI;
  let b: TestBridge;
  const dataDir = tempDir("cb-approvals-");
  const api = (p: string, init: RequestInit = {}, key = KEY) =>
    fetch(`${b.baseURL}${p}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    });
  const run = async (id: string) => (await (await api(`/runs/${id}`)).json()) as RunRow;
  const until = async (id: string, status: string) => {
    assert.ok(
      await eventually(async () => (await run(id)).status === status, 15_000),
      `run ${id} never became ${status} (it is ${(await run(id)).status})`,
    );
    return run(id);
  };

  before(async () => {
    up = await startFakeOpenAI(() => ({ kind: "text", chunks: ["not used"] }));
    b = await start(up, dataDir);
  });
  after(async () => {
    await b?.close();
    await up?.close();
    cleanup(dataDir);
  });

  test("a run waits, survives a restart, is approved over HTTP once and finishes", async () => {
    const res = await api("/systems/publish-post/runs", {
      method: "POST",
      body: JSON.stringify({ inputs: { topic: "tides" } }),
    });
    assert.equal(res.status, 202);
    const { id } = (await res.json()) as RunRow;
    const waiting = await until(id, "waiting");
    assert.deepEqual(
      waiting.steps.map((s) => [s.id, s.status]),
      [
        ["draft", "completed"],
        ["check", "waiting"],
        ["publish", "pending"],
      ],
    );
    assert.equal(waiting.approval?.step, "check");
    assert.equal(waiting.approval?.question, "Publish the draft about tides?");
    assert.deepEqual(waiting.approval?.data, { draft: "draft about tides" });
    assert.equal(waiting.approval?.deadline, null);
    assert.equal(waiting.approval?.on_timeout, "reject");

    // The bridge stops and another starts on the same data dir: still waiting, not interrupted.
    await b.close();
    b = await start(up, dataDir);
    assert.equal((await run(id)).status, "waiting");

    assert.equal((await api(`/runs/${id}/approve`, { method: "POST" }, "wrong-key")).status, 401);
    const bad = await api(`/runs/${id}/approve`, { method: "POST", body: JSON.stringify({ note: "ok", by: "me" }) });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { param: string } }).error.param, "by");
    assert.equal((await run(id)).status, "waiting", "a refused request decides nothing");

    const approved = await api(`/runs/${id}/approve`, { method: "POST", body: JSON.stringify({ note: "looks good" }) });
    assert.equal(approved.status, 200);
    const second = await api(`/runs/${id}/reject`, { method: "POST" });
    assert.equal(second.status, 409, "a decision is taken once");
    assert.equal(((await second.json()) as { error: { code: string } }).error.code, "run_conflict");

    const done = await until(id, "completed");
    assert.equal(done.output, "published, approved by http");
    const check = done.steps.find((s) => s.id === "check")!;
    assert.deepEqual(
      { ...(check.output as Record<string, unknown>), at: undefined },
      { approved: true, by: "http", note: "looks good", at: undefined },
    );
    assert.equal(done.approval, null);
    const again = await api(`/runs/${id}/approve`, { method: "POST" });
    assert.equal(again.status, 409, "a run that is not waiting");
    assert.match(((await again.json()) as { error: { message: string } }).error.message, /is completed, not waiting/);
    assert.equal((await api("/runs/run_nothere/approve", { method: "POST" })).status, 404);
  });

  test("in chat: told the question with the data; 'no' rejects the run, 'approve' approves another", async () => {
    const client = new OpenAI({ baseURL: b.baseURL, apiKey: KEY, maxRetries: 0 });
    const messages: OpenAI.ChatCompletionMessageParam[] = [];
    const say = async (text: string, model = "router", conversation = "approval-chat") => {
      messages.push({ role: "user", content: text });
      const res = await client.chat.completions.create(
        { model, messages },
        { headers: { "x-session-id": conversation } },
      );
      const out = res.choices[0]!.message.content ?? "";
      messages.push({ role: "assistant", content: out });
      return out;
    };
    const latest = async (conversation = "approval-chat") =>
      (
        (await (await api(`/runs?conversation=${conversation}&limit=1`)).json()) as {
          data: RunRow[];
        }
      ).data[0]!;

    const asked = await say("/run publish-post topic=tides");
    assert.match(
      asked,
      /\*\*Publish Post\*\* \(run `run\w+`\) is waiting for your approval: Publish the draft about tides\?/,
    );
    assert.match(asked, /"draft": "draft about tides"/);
    assert.match(asked, /Approve\? \(yes \/ no\)/);
    const first = await latest();
    assert.equal(first.status, "waiting");

    const no = await say("no");
    assert.match(no, /was rejected at step `check`: rejected by chat/);
    const rejected = await run(first.id);
    assert.equal(rejected.status, "rejected");
    assert.equal(rejected.error, "rejected by chat");
    assert.equal(rejected.steps.find((s) => s.id === "publish")!.status, "pending", "nothing after it ran");

    await say("/run publish-post topic=waves");
    const secondRun = await latest();
    assert.notEqual(secondRun.id, first.id);
    assert.equal(secondRun.status, "waiting");
    const yes = await say("approve");
    assert.match(yes, /published, approved by chat/);
    assert.equal((await run(secondRun.id)).status, "completed");

    // Detached before the approval: told on the next turn; the "yes" after that approves.
    const quick = (text: string) => say(text, "router-quick", "approval-quick");
    assert.match(await quick("/run slow-post topic=sand"), /is still running/);
    const slow = await latest("approval-quick");
    await until(slow.id, "waiting");
    const told = await quick("/runs");
    assert.match(
      told,
      /\*\*Slow Post\*\* \(run `run\w+`\) is waiting for your approval: Publish the draft about sand\?/,
    );
    assert.match(told, /"draft": "slow draft"/);
    assert.match(told, /Recent runs:/, "the message itself is answered too");
    await quick("yes");
    const finished = await until(slow.id, "completed");
    assert.equal(finished.output, "published, approved by chat");
  });
});
