/**
 * End to end: the `router` backend behind the REAL OpenClaw (test/e2e/setup.ts installs it: 2026.5.x
 * on Node 22 and 2026.9.x on Node 24). OpenClaw's model is `clawbridge/router`; a clawbridge runs
 * in-process (Node 20) with
 *
 *   backends: up (type openai → the fake OpenAI API), router (type router: classifier `cls`, answer `ans`)
 *   systems:  content-pipeline (a command: prints "post about <topic> in <tone> tone")
 *
 * In ONE OpenClaw session (`openclaw agent` through ONE gateway per generation, started in `before()`;
 * one --session-key, no plugin: the bridge finds the conversation from the request itself):
 *   (a) "write a blog post about cats" → the clarify question for the missing `tone`, word for word;
 *   (b) "make it casual"               → the system runs; its output reaches the reply;
 *   (c) an everyday question           → handed over to `ans`, which asks for OpenClaw's `read` tool;
 *                                         OpenClaw executes it, the result comes back in the next
 *                                         request, and the final text reaches the reply.
 * At the fake upstream: exactly one classifier call per routed message, none for the tool-result
 * request, and the `answer` model is never called for (a) or (b).
 *
 * Like test/e2e/openclaw.test.ts, the suite installs OpenClaw when it is missing and fails (with
 * npm's output) when it cannot. CLAWBRIDGE_E2E_GEN=2026.5 runs one generation. Only the model API is
 * faked; everything listens on 127.0.0.1; every OpenClaw process is reaped in `after()`.
 */
import { contentPipeline } from "../../testkit/systems.js";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, type TestBridge } from "../helpers/bridge.js";
import {
  agentReply,
  classifiedMessage,
  type Gateway,
  describeRun,
  lastHumanText,
  openclawConfigForBridge,
  openclawHome,
  reapHome,
  readToolCall,
  runAgent,
  selectedGenerations,
  startAgentGateway,
  systemText,
  textOf,
  toolResultAfter,
} from "./harness.js";
import type { OpenClawInstall } from "./setup.js";

const TEST_KEY = "e2e-router-key-0123456789";
const NOTE_SECRET = "MANGO-17-ROUTER";
const SESSION_KEY = "agent:main:e2e-router";

const MSG_A = "write a blog post about cats";
const MSG_B = "make it casual";
const MSG_C = "what does my note file say? (router e2e)";

const CLARIFY_LINES = [
  "I can run **Content Pipeline** for you, but I need a bit more info:",
  "- **tone** (string: formal, casual, technical): Writing tone",
  "Please provide the missing details.",
];
const RUN_OUTPUT = "post about cats in casual tone";
const FINAL_PREFIX = "Your note says: ";

/** The router's classifier call (src/workflows/router/classifier.ts): its system prompt says so, and it offers no tools. */
function isClassifier(req: RecordedRequest): boolean {
  return /classif/i.test(systemText(req)) && !Array.isArray(req.body?.tools);
}

const classifierReply = (obj: object): Reply => ({ kind: "text", chunks: [JSON.stringify(obj)] });

/** The fake upstream: the classifier (told apart by its system prompt) and the `answer` model. */
function script(notePath: string) {
  return (req: RecordedRequest): Reply => {
    if (isClassifier(req)) {
      const msg = classifiedMessage(req);
      if (msg.includes(MSG_A))
        return classifierReply({
          action: "run",
          system: "content-pipeline",
          confidence: 0.9,
          inputs: { topic: "cats" },
        });
      if (msg.includes(MSG_B))
        return classifierReply({
          action: "run",
          system: "content-pipeline",
          confidence: 0.9,
          inputs: { tone: "casual" },
        });
      return classifierReply({ action: "answer", confidence: 0.1 });
    }
    const messages: any[] = req.body?.messages ?? [];
    const human = lastHumanText(messages);
    if (human.includes(MSG_C)) {
      const toolMsg = toolResultAfter(messages, human);
      if (toolMsg) return { kind: "text", chunks: [FINAL_PREFIX, textOf(toolMsg.content).trim().slice(0, 200)] };
      return readToolCall(req, "callRouterRead1", notePath);
    }
    return { kind: "text", chunks: ["ok"] };
  };
}

/** One line per recorded request, for failure messages. */
function describeRequests(reqs: RecordedRequest[]): string {
  return reqs
    .map((r, i) => {
      const messages: any[] = r.body?.messages ?? [];
      const last = messages.at(-1);
      return isClassifier(r)
        ? `#${i} classifier (model ${r.body?.model}): ${JSON.stringify(classifiedMessage(r).slice(0, 120))}`
        : `#${i} answer (model ${r.body?.model}, ${messages.length} messages, last ${last?.role}): ${JSON.stringify(lastHumanText(messages).slice(-120))}`;
    })
    .join("\n");
}

for (const gen of selectedGenerations()) {
  describe(`router through the real OpenClaw ${gen.gen}.x (model clawbridge/router)`, {
    concurrency: false,
    timeout: 15 * 60_000,
  }, () => {
    let install: OpenClawInstall;
    let home: string;
    let env: NodeJS.ProcessEnv;
    let notePath: string;
    let fake: FakeOpenAI;
    let bridge: TestBridge;
    let gateway: Gateway | undefined;
    const timings: string[] = [];

    /** One person's message in THE session; returns OpenClaw's result and the fake's requests during it. */
    const turn = async (message: string) => {
      const from = fake.mainRequests().length;
      const r = await runAgent(install, env, SESSION_KEY, message);
      timings.push(`${JSON.stringify(message.slice(0, 20))}: ${(r.ms / 1000).toFixed(1)} s`);
      const reqs = fake.mainRequests().slice(from);
      return { r, reqs, classifier: reqs.filter(isClassifier), answer: reqs.filter((q) => !isClassifier(q)) };
    };

    before(async () => {
      let workspace: string;
      ({ install, home, env, workspace } = await openclawHome(gen, "router"));
      notePath = path.join(workspace, "router-note.txt");
      writeFileSync(notePath, `The secret word is ${NOTE_SECRET}.\n`);

      fake = await startFakeOpenAI(script(notePath));
      bridge = await startTestBridge(
        {
          server: { apiKeys: [TEST_KEY] },
          backends: {
            up: { type: "openai", baseUrl: fake.url, apiKey: "x", timeoutSeconds: 60 },
            router: { type: "router", classifier: "cls", answer: "ans" },
          },
          models: [
            { id: "cls", backend: "up", model: "classifier-model" },
            { id: "ans", backend: "up", model: "answer-model" },
            { id: "router", backend: "router" },
          ],
          systems: [contentPipeline(process.execPath)],
        },
        { systemsDb: ":memory:" },
      );

      openclawConfigForBridge(home, { baseURL: bridge.baseURL, apiKey: TEST_KEY, model: "router", workspace });
      const t0 = Date.now();
      gateway = await startAgentGateway(install, env, home);
      timings.push(`gateway ready: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    });

    after(async () => {
      await gateway?.stop(30_000);
      await bridge?.close(0);
      await fake?.close();
      if (home) {
        await reapHome(home);
        cleanup(home);
      }
      if (bridge) cleanup(bridge.dataDir);
      process.stderr.write(
        `[e2e router ${gen.gen}] OpenClaw ${install?.openclawVersion} on Node ${install?.nodeVersion}: ${timings.join("; ")}\n`,
      );
    });

    let sessionA: string | undefined;

    test("(a) a request that lacks an input gets the clarify question, word for word; one classifier call, no answer model", async () => {
      const t = await turn(MSG_A);
      assert.equal(t.r.code, 0, describeRun(t.r));
      const reply = agentReply(t.r.stdout);
      sessionA = reply.sessionId;
      const lines = reply.text.split("\n").map((l) => l.trimEnd());
      for (const line of CLARIFY_LINES)
        assert.ok(lines.includes(line), `the reply has the line ${JSON.stringify(line)}:\n${reply.text}`);
      assert.ok(!/\*\*topic\*\*/.test(reply.text), `topic was given, so it is not asked for:\n${reply.text}`);
      const asked = t.classifier.filter((q) => classifiedMessage(q).includes(MSG_A));
      assert.equal(asked.length, 1, `one classifier call for the message:\n${describeRequests(t.reqs)}`);
      assert.equal(t.classifier.length, 1, `no other classifier call during the turn:\n${describeRequests(t.reqs)}`);
      assert.equal(t.answer.length, 0, `the answer model is not asked:\n${describeRequests(t.reqs)}`);
      assert.equal(asked[0]!.body?.model, "classifier-model", "the classifier call goes to the `cls` model");
    });

    test("(b) the next message supplies the input and the system runs; its output reaches OpenClaw's reply", async () => {
      const t = await turn(MSG_B);
      assert.equal(t.r.code, 0, describeRun(t.r));
      const reply = agentReply(t.r.stdout);
      assert.equal(reply.sessionId, sessionA, "the same OpenClaw session");
      assert.ok(reply.text.includes(RUN_OUTPUT), `the command's output is in the reply:\n${reply.text}`);
      assert.match(reply.text, /Running \*\*Content Pipeline\*\*/);
      const asked = t.classifier.filter((q) => classifiedMessage(q).includes(MSG_B));
      assert.equal(asked.length, 1, `one classifier call for the message:\n${describeRequests(t.reqs)}`);
      assert.equal(t.classifier.length, 1, `no other classifier call during the turn:\n${describeRequests(t.reqs)}`);
      assert.match(
        systemText(asked[0]!),
        /Now collecting inputs for content-pipeline/,
        "the classifier was told what is being gathered",
      );
      assert.equal(t.answer.length, 0, `the answer model is not asked:\n${describeRequests(t.reqs)}`);
    });

    test("(c) an everyday question is handed over to the answer model; OpenClaw executes its tool call; no classifier call for the tool result", async () => {
      const t = await turn(MSG_C);
      assert.equal(t.r.code, 0, describeRun(t.r));
      const reply = agentReply(t.r.stdout);
      assert.equal(reply.sessionId, sessionA, "the same OpenClaw session");

      // Classifier: once, for the person's message, before the answer model is asked.
      const asked = t.classifier.filter((q) => classifiedMessage(q).includes(MSG_C));
      assert.equal(asked.length, 1, `one classifier call for the message:\n${describeRequests(t.reqs)}`);
      assert.equal(
        t.classifier.length,
        1,
        `no classifier call for the tool-result request:\n${describeRequests(t.reqs)}`,
      );
      assert.ok(isClassifier(t.reqs[0]!), `the classifier is asked first:\n${describeRequests(t.reqs)}`);

      // The answer model: the tool call, then (after OpenClaw ran it) the tool result.
      const answers = t.answer.filter((q) => lastHumanText(q.body?.messages ?? []).includes(MSG_C));
      assert.equal(
        answers.length,
        2,
        `two answer-model calls (tool call, then the answer):\n${describeRequests(t.reqs)}`,
      );
      assert.ok(
        answers.every((q) => q.body?.model === "answer-model"),
        "both go to the `ans` model",
      );
      assert.ok(
        (answers[0]!.body?.tools ?? []).some((tl: any) => tl?.function?.name === "read"),
        "OpenClaw's tools are handed over to the answer model",
      );
      const second = answers[1]!.body.messages as any[];
      const call = second.find(
        (m) =>
          m.role === "assistant" &&
          Array.isArray(m.tool_calls) &&
          m.tool_calls.some((c: any) => c.function?.name === "read"),
      );
      assert.ok(call, "the assistant's read call is replayed");
      const toolMsg = second.find((m) => m.role === "tool");
      assert.ok(toolMsg, "a tool message follows in the second request");
      assert.match(textOf(toolMsg.content), new RegExp(NOTE_SECRET), "it holds the REAL file content OpenClaw read");
      assert.ok(
        reply.text.includes(FINAL_PREFIX) && reply.text.includes(NOTE_SECRET),
        `the final answer reached the reply:\n${reply.text}`,
      );
    });

    test("over the session: exactly one classifier call per person's message", () => {
      const all = fake.mainRequests().filter(isClassifier).map(classifiedMessage);
      assert.deepEqual(
        [MSG_A, MSG_B, MSG_C].map((m) => all.filter((c) => c.includes(m)).length),
        [1, 1, 1],
        `classifier calls: ${JSON.stringify(all)}`,
      );
      assert.equal(all.length, 3, `no other classifier calls: ${JSON.stringify(all)}`);
    });
  });
}
