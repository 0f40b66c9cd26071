/**
 * From words to a running system, end to end through the router (model `router`, as OpenClaw
 * would ask it), with the official `openai` client:
 *   conversation A: "build a system that …" → the router hands it to the builder, which plans
 *                   (Architect), builds the canvas through MCP and writes a CLAUDE.md into the
 *                   system's sandbox; "deploy" → asked; "yes" → the system is in the library;
 *   conversation B: the router matches the new system, asks for its missing input, then runs it:
 *                   its agent step is served by the REAL Claude Code CLI (the claude-code backend)
 *                   in the sandbox, against a fake Anthropic API — which sees the CLAUDE.md the
 *                   builder wrote.
 * Only the model APIs are faked (an OpenAI one for the router's classifier, the Supervisor and the
 * Architect; an Anthropic one for the agent). Everything listens on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { anthropicText, startFakeAnthropic, type FakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { HAIKU_SIGNATURE as SIGNATURE, haikuWriterPlan } from "../../testkit/systems.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";

function systemText(req: RecordedRequest): string {
  const ms: Array<{ role: string; content: unknown }> = req.body?.messages ?? [];
  return ms
    .filter((m) => m.role === "system")
    .map((m) => (typeof m.content === "string" ? m.content : ""))
    .join("\n");
}

const PLAN = haikuWriterPlan(SIGNATURE);

describe("builder end to end: build by chat, deploy, then the router runs it with a CLI agent", () => {
  let up: FakeOpenAI;
  let anthropic: FakeAnthropic;
  let b: TestBridge;
  let home: string;

  before(async () => {
    up = await startFakeOpenAI((req): Reply => {
      const sys = systemText(req);
      const msg = req.lastUser.split("Message:\n").pop() ?? "";
      if (sys.includes("You classify ONE chat message for a router")) {
        // The router's classifier.
        if (/build a system|deploy/.test(msg))
          return json({ action: "build", system: null, confidence: 0.9, inputs: {} });
        if (/haiku/.test(msg)) return json({ action: "run", system: "haiku-writer", confidence: 0.9, inputs: {} });
        if (/the sea/.test(msg))
          return json({ action: "run", system: "haiku-writer", confidence: 0.9, inputs: { topic: "the sea" } });
        return json({ action: "answer", system: null, confidence: 0.1, inputs: {} });
      }
      if (sys.includes("sent to a builder"))
        return json({ intent: /deploy/.test(msg) ? "CONFIGURE" : "BUILD", confidence: 0.9 });
      if (sys.includes("You are the Architect")) return { kind: "text", chunks: [JSON.stringify(PLAN)] };
      return { kind: "text", chunks: ["ANSWER"] };
    });
    anthropic = await startFakeAnthropic((req) => {
      const all = JSON.stringify(req.body ?? {});
      const signed = all.includes(SIGNATURE) ? ` ${SIGNATURE}` : " (unsigned)";
      return {
        kind: "text",
        chunks: ["Waves fold into foam / salt wind carries the gull's cry / the sea keeps its time", signed],
      };
    });
    home = mkdtempSync(path.join(tmpdir(), "cb-e2e-claude-home-"));
    b = await startTestBridge({
      dataDir: tempDir("cb-builder-e2e-"),
      backends: {
        up: { type: "openai", baseUrl: up.url, apiKey: "x" },
        claude: {
          type: "claude-code",
          command: CLAUDE_BIN,
          env: claudeEnv({ baseUrl: anthropic.baseUrl, home }),
          timeoutSeconds: 90,
          killGraceSeconds: 1,
        },
        router: { type: "router", classifier: "cls", answer: "ans", builder: "builder" },
        builder: { type: "builder", supervisor: "sup", architect: "arch", answer: "ans" },
      },
      models: [
        { id: "cls", backend: "up" },
        { id: "ans", backend: "up" },
        { id: "sup", backend: "up" },
        { id: "arch", backend: "up" },
        { id: "writer", backend: "claude" },
        { id: "router", backend: "router" },
        { id: "builder", backend: "builder" },
      ],
    });
  });
  after(async () => {
    await b?.close();
    await up?.close();
    await anthropic?.close();
    cleanup(b.dataDir);
    cleanup(home);
  });

  test("build, deploy, then another conversation is asked for the topic and gets the haiku", async () => {
    const a = new Chat(b.baseURL, "conv-builder", "router");
    const built = await a.say("build a system that writes a haiku about any topic");
    assert.match(built.text, /Building \*\*Haiku Writer\*\*/);
    assert.match(built.text, /Done: \*\*Haiku Writer\*\* has 3 nodes and 2 connections/);
    const ask = await a.say("deploy");
    assert.match(ask.text, /Deploy \*\*Haiku Writer\*\*\? .*ask for `topic`.*\(yes \/ no\)/);
    const deployed = await a.say("yes");
    assert.match(deployed.text, /Deployed \*\*haiku-writer\*\*/);

    const c = new Chat(b.baseURL, "conv-user", "router");
    const clarify = await c.say("write me a haiku");
    assert.match(clarify.text, /I can run \*\*Haiku Writer\*\* for you, but I need a bit more info/);
    assert.match(clarify.text, /\*\*topic\*\*/);
    const run = await c.say("the sea");
    assert.match(run.text, /Running \*\*Haiku Writer\*\*/);
    assert.match(run.text, /Waves fold into foam/);
    assert.ok(run.text.includes(SIGNATURE), `the agent saw the sandbox's CLAUDE.md: ${run.text}`);
    // The agent was asked the compiled prompt, in the sandbox.
    const asked = anthropic
      .messageCalls()
      .map((r) => (r.body?.messages ?? []).map((m: { content: unknown }) => anthropicText(m.content)).join("\n"))
      .join("\n");
    assert.match(asked, /Write a haiku about the sea\./);
    assert.ok(asked.includes(SIGNATURE), "CLAUDE.md from the sandbox reached the model");
  });
});

function json(v: unknown): Reply {
  return { kind: "text", chunks: [JSON.stringify(v)] };
}
