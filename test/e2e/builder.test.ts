/**
 * End to end: the builder issue's scenario behind the REAL OpenClaw (test/e2e/setup.ts installs it).
 * The same scenario as test/integration/builder-e2e.test.ts (same plan, fakes and bridge config),
 * but every message is sent by `openclaw agent` (through ONE OpenClaw gateway for the file, started
 * in `before()`) instead of the `openai` client.
 *
 * OpenClaw's model is `clawbridge/router`; a clawbridge runs in-process (Node 20) with
 *
 *   backends: up      (type openai → the fake OpenAI API: router classifier `cls`, answer `ans`,
 *                      builder supervisor `sup`, architect `arch`)
 *             claude  (type claude-code: the REAL Claude Code CLI → the fake Anthropic API; model `writer`)
 *             router  (classifier cls, answer ans, builder builder)
 *             builder (supervisor sup, architect arch, answer ans)
 *
 * OpenClaw session A (one --session-key):
 *   "build a system that writes a haiku about any topic" → the router hands it to the builder: the
 *                     Architect plans, the canvas is built (and a CLAUDE.md written into the
 *                     system's sandbox) → "Done: **Haiku Writer** has 3 nodes …";
 *   "deploy"        → "Deploy **Haiku Writer**? …" (the builder's own command: matched on the
 *                     person's words, which the bridge strips of OpenClaw's wrappers);
 *   "yes"           → "Deployed **haiku-writer**".
 * OpenClaw session B (another --session-key):
 *   "write me a haiku" → the router matches the new system and asks for its `topic`;
 *   "the sea"          → the system runs; its agent step is served by the REAL Claude Code CLI in the
 *                        sandbox, whose reply carries the signature only the sandbox's CLAUDE.md asks for.
 * At the fakes: the Architect is called exactly once, the builder's Supervisor once (for the build
 * message), and the `answer` model never.
 *
 * To keep the run short this file drives ONE OpenClaw generation: the newest in GENERATIONS, unless
 * CLAWBRIDGE_E2E_GEN names another. Like the other e2e files, the suite installs OpenClaw when it
 * is missing and fails (with npm's output) when it cannot. Only the model APIs are faked;
 * everything listens on 127.0.0.1; every OpenClaw (and Claude Code) process is reaped in `after()`.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { anthropicText, startFakeAnthropic, type FakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { HAIKU_SIGNATURE as SIGNATURE, haikuWriterPlan } from "../../testkit/systems.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import {
  agentReply,
  classifiedMessage,
  type Gateway,
  describeRun,
  openclawConfigForBridge,
  openclawHome,
  reapHome,
  runAgent,
  selectedGenerations,
  startAgentGateway,
  systemText,
} from "./harness.js";
import type { OpenClawInstall } from "./setup.js";

const TEST_KEY = "e2e-builder-key-0123456789";
const SESSION_A = "agent:main:e2e-builder-a";
const SESSION_B = "agent:main:e2e-builder-b";

const MSG_BUILD = "build a system that writes a haiku about any topic";
const MSG_DEPLOY = "deploy";
const MSG_YES = "yes";
const MSG_HAIKU = "write me a haiku";
const MSG_SEA = "the sea";

const HAIKU = "Waves fold into foam / salt wind carries the gull's cry / the sea keeps its time";

/** Upstream model names, one per role: the fake tells the calls apart by them. */
const MODEL = {
  cls: "classifier-model",
  ans: "answer-model",
  sup: "supervisor-model",
  arch: "architect-model",
} as const;

const PLAN = haikuWriterPlan(SIGNATURE);

const roleOf = (req: RecordedRequest): string => {
  const m = String(req.body?.model ?? "");
  return (Object.keys(MODEL) as Array<keyof typeof MODEL>).find((k) => MODEL[k] === m) ?? `other(${m})`;
};
const isClassifier = (req: RecordedRequest) => roleOf(req) === "cls";
const isSupervisor = (req: RecordedRequest) => roleOf(req) === "sup";
const isArchitect = (req: RecordedRequest) => roleOf(req) === "arch";
const isAnswer = (req: RecordedRequest) => roleOf(req) === "ans";

const json = (v: unknown): Reply => ({ kind: "text", chunks: [JSON.stringify(v)] });

/** The fake OpenAI API: the router's classifier, the builder's Supervisor and Architect, and `ans`. */
function script(req: RecordedRequest): Reply {
  const sys = systemText(req);
  const msg = classifiedMessage(req);
  if (isClassifier(req) && sys.includes("You classify ONE chat message for a router")) {
    if (msg.includes(MSG_BUILD) || /\bdeploy\b/.test(msg))
      return json({ action: "build", system: null, confidence: 0.9, inputs: {} });
    if (msg.includes(MSG_HAIKU)) return json({ action: "run", system: "haiku-writer", confidence: 0.9, inputs: {} });
    if (msg.includes(MSG_SEA))
      return json({ action: "run", system: "haiku-writer", confidence: 0.9, inputs: { topic: "the sea" } });
    return json({ action: "answer", system: null, confidence: 0.1, inputs: {} });
  }
  if (isSupervisor(req) && sys.includes("sent to a builder"))
    return json({ intent: /\bdeploy\b/.test(msg) ? "CONFIGURE" : "BUILD", confidence: 0.9 });
  if (isArchitect(req) && sys.includes("You are the Architect"))
    return { kind: "text", chunks: [JSON.stringify(PLAN)] };
  return { kind: "text", chunks: ["ANSWER"] };
}

/** One line per recorded request, for failure messages. */
function describeRequests(reqs: RecordedRequest[]): string {
  return reqs
    .map((r, i) => {
      const role = roleOf(r);
      const about = role === "cls" || role === "sup" ? classifiedMessage(r) : r.lastUser;
      return `#${i} ${role} (${(r.body?.messages ?? []).length} messages): ${JSON.stringify(about.slice(-160))}`;
    })
    .join("\n");
}

// The generation this file drives: CLAWBRIDGE_E2E_GEN, or else only the newest.
for (const gen of selectedGenerations("newest")) {
  describe(`builder through the real OpenClaw ${gen.gen}.x (model clawbridge/router): build, deploy, run with Claude Code`, {
    concurrency: false,
    timeout: 15 * 60_000,
  }, () => {
    let install: OpenClawInstall;
    let home: string;
    let claudeHome: string;
    let env: NodeJS.ProcessEnv;
    let up: FakeOpenAI;
    let anthropic: FakeAnthropic;
    let bridge: TestBridge;
    let gateway: Gateway | undefined;
    const timings: string[] = [];
    const sessionIds: Record<string, string | undefined> = {};

    /** One person's message in an OpenClaw session; OpenClaw's result and the fakes' requests during it. */
    const turn = async (sessionKey: string, message: string) => {
      const from = up.mainRequests().length;
      const fromA = anthropic.messageCalls().length;
      const r = await runAgent(install, env, sessionKey, message);
      timings.push(`${JSON.stringify(message.slice(0, 20))}: ${(r.ms / 1000).toFixed(1)} s`);
      assert.equal(r.code, 0, describeRun(r));
      const reply = agentReply(r.stdout);
      const known = sessionIds[sessionKey];
      if (known === undefined) sessionIds[sessionKey] = reply.sessionId;
      else assert.equal(reply.sessionId, known, `the same OpenClaw session for ${sessionKey}`);
      return { r, reply, reqs: up.mainRequests().slice(from), claude: anthropic.messageCalls().slice(fromA) };
    };

    before(async () => {
      let workspace: string;
      ({ install, home, env, workspace } = await openclawHome(gen, "builder"));
      claudeHome = tempDir("cb-e2e-builder-claude-home-");

      up = await startFakeOpenAI(script);
      anthropic = await startFakeAnthropic((req) => {
        const signed = JSON.stringify(req.body ?? {}).includes(SIGNATURE) ? ` ${SIGNATURE}` : " (unsigned)";
        return { kind: "text", chunks: [HAIKU, signed] };
      });
      bridge = await startTestBridge({
        dataDir: tempDir("cb-e2e-builder-data-"),
        server: { apiKeys: [TEST_KEY] },
        backends: {
          up: { type: "openai", baseUrl: up.url, apiKey: "x", timeoutSeconds: 60 },
          claude: {
            type: "claude-code",
            command: CLAUDE_BIN,
            env: claudeEnv({ baseUrl: anthropic.baseUrl, home: claudeHome }),
            timeoutSeconds: 90,
            killGraceSeconds: 1,
          },
          router: { type: "router", classifier: "cls", answer: "ans", builder: "builder" },
          builder: { type: "builder", supervisor: "sup", architect: "arch", answer: "ans" },
        },
        models: [
          { id: "cls", backend: "up", model: MODEL.cls },
          { id: "ans", backend: "up", model: MODEL.ans },
          { id: "sup", backend: "up", model: MODEL.sup },
          { id: "arch", backend: "up", model: MODEL.arch },
          { id: "writer", backend: "claude" },
          { id: "router", backend: "router" },
          { id: "builder", backend: "builder" },
        ],
      });

      openclawConfigForBridge(home, { baseURL: bridge.baseURL, apiKey: TEST_KEY, model: "router", workspace });
      const t0 = Date.now();
      gateway = await startAgentGateway(install, env, home);
      timings.push(`gateway ready: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    });

    after(async () => {
      await gateway?.stop(30_000);
      await bridge?.close(0);
      await up?.close();
      await anthropic?.close();
      for (const dir of [home, claudeHome]) {
        if (!dir) continue;
        await reapHome(dir);
        cleanup(dir);
      }
      if (bridge) cleanup(bridge.dataDir);
      process.stderr.write(
        `[e2e builder ${gen.gen}] OpenClaw ${install?.openclawVersion} on Node ${install?.nodeVersion}: ${timings.join("; ")}\n`,
      );
    });

    test("session A: the build message is handed to the builder: one Supervisor call, one Architect call, the canvas is built", async () => {
      const t = await turn(SESSION_A, MSG_BUILD);
      assert.match(t.reply.text, /Building \*\*Haiku Writer\*\*/, t.reply.text);
      assert.match(t.reply.text, /Done: \*\*Haiku Writer\*\* has 3 nodes and 2 connections/, t.reply.text);
      const sup = t.reqs.filter(isSupervisor);
      assert.equal(sup.length, 1, `one Supervisor call:\n${describeRequests(t.reqs)}`);
      assert.ok(
        classifiedMessage(sup[0]!).includes(MSG_BUILD),
        `the Supervisor is asked about the person's words:\n${describeRequests(t.reqs)}`,
      );
      assert.equal(t.reqs.filter(isArchitect).length, 1, `one Architect call:\n${describeRequests(t.reqs)}`);
      assert.equal(t.reqs.filter(isAnswer).length, 0, `the answer model is not asked:\n${describeRequests(t.reqs)}`);
    });

    test('session A: "deploy" is the builder\'s command: it asks first, naming the input the router will ask for', async () => {
      const t = await turn(SESSION_A, MSG_DEPLOY);
      assert.match(t.reply.text, /Deploy \*\*Haiku Writer\*\*\? .*ask for `topic`.*\(yes \/ no\)/, t.reply.text);
      assert.equal(
        t.reqs.filter((q) => isSupervisor(q) || isArchitect(q) || isAnswer(q)).length,
        0,
        `no Supervisor, Architect or answer call:\n${describeRequests(t.reqs)}`,
      );
    });

    test('session A: "yes" deploys the system', async () => {
      const t = await turn(SESSION_A, MSG_YES);
      assert.match(t.reply.text, /Deployed \*\*haiku-writer\*\*/, t.reply.text);
      assert.equal(
        t.reqs.filter((q) => isSupervisor(q) || isArchitect(q) || isAnswer(q)).length,
        0,
        `no Supervisor, Architect or answer call:\n${describeRequests(t.reqs)}`,
      );
    });

    test("session B: the router offers the new system and asks for its `topic`", async () => {
      const t = await turn(SESSION_B, MSG_HAIKU);
      assert.notEqual(sessionIds[SESSION_B], sessionIds[SESSION_A], "another OpenClaw session");
      assert.match(t.reply.text, /I can run \*\*Haiku Writer\*\* for you, but I need a bit more info/, t.reply.text);
      assert.ok(
        t.reply.text.split("\n").some((l) => l.startsWith("- **topic**")),
        `the question names topic:\n${t.reply.text}`,
      );
      const cls = t.reqs.filter(isClassifier);
      assert.ok(
        cls.some((q) => classifiedMessage(q).includes(MSG_HAIKU)),
        `the classifier is asked about the message:\n${describeRequests(t.reqs)}`,
      );
      assert.ok(
        cls.every((q) => !classifiedMessage(q).includes("<<<")),
        `the classifier sees the person's words, not OpenClaw's wrappers:\n${describeRequests(t.reqs)}`,
      );
      assert.equal(t.claude.length, 0, "nothing runs yet");
    });

    test("session B: the topic runs the system; the REAL Claude Code CLI in the sandbox saw the builder's CLAUDE.md", async () => {
      const t = await turn(SESSION_B, MSG_SEA);
      assert.match(t.reply.text, /Running \*\*Haiku Writer\*\*/, t.reply.text);
      assert.ok(t.reply.text.includes(HAIKU), `the haiku reached OpenClaw's reply:\n${t.reply.text}`);
      assert.ok(t.reply.text.includes(SIGNATURE), `signed: the agent saw the sandbox's CLAUDE.md:\n${t.reply.text}`);
      const asked = t.claude
        .map((r) => (r.body?.messages ?? []).map((m: { content: unknown }) => anthropicText(m.content)).join("\n"))
        .join("\n");
      assert.match(asked, /Write a haiku about the sea\./, "the agent was asked the compiled prompt");
      assert.ok(
        JSON.stringify(t.claude.map((r) => r.body)).includes(SIGNATURE),
        "CLAUDE.md from the sandbox reached the model",
      );
      assert.equal(t.reqs.filter(isAnswer).length, 0, `the answer model is not asked:\n${describeRequests(t.reqs)}`);
    });

    test("over both sessions: the Architect once, the Supervisor once (for the build message), the answer model never", () => {
      const all = up.mainRequests();
      assert.equal(all.filter(isArchitect).length, 1, `Architect calls:\n${describeRequests(all)}`);
      const sup = all.filter(isSupervisor);
      assert.equal(sup.length, 1, `Supervisor calls:\n${describeRequests(all)}`);
      assert.ok(
        classifiedMessage(sup[0]!).includes(MSG_BUILD),
        `the Supervisor call is for the build message:\n${describeRequests(all)}`,
      );
      assert.equal(all.filter(isAnswer).length, 0, `nothing reached the answer model:\n${describeRequests(all)}`);
      assert.equal(
        all.filter((q) => roleOf(q).startsWith("other")).length,
        0,
        `no call to an unknown model:\n${describeRequests(all)}`,
      );
    });
  });
}
