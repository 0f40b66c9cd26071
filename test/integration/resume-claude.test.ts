/**
 * Resume mode end to end THROUGH THE BRIDGE with the REAL `claude` CLI (node_modules/.bin) against a
 * fake Anthropic Messages API: the resume contract every CLI keeps (test/helpers/resume-contract.ts:
 * only-new-messages turns with the bootstrap on every turn, conversation identity, self-healing after
 * a lost transcript, abort + retry without two CLIs, strict per-conversation ordering), with Claude
 * Code's session id checked on the wire; and the two client libraries OpenClaw and SDK users drive
 * us with. Only the model API is faked.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import path from "node:path";
import { test } from "node:test";
import { stream, type AssistantMessage, type Context } from "@mariozechner/pi-ai";
import OpenAI from "openai";
import {
  anthropicText,
  startFakeAnthropic,
  type AnthropicReply,
  type FakeAnthropic,
  type RecordedRequest,
} from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { findFiles } from "../helpers/backend-turn.js";
import { piModel } from "../helpers/pi-model.js";
import { lastLine } from "../helpers/resume.js";
import { resumeContract, type ResumeCli } from "../helpers/resume-contract.js";
import { wrapUserText, openclawSystemPrompt } from "../../testkit/openclaw-request.js";

const MODEL = "claude";

// ---------------------------------------------------------------------------------------------
// helpers

function blocks(content: unknown): string[] {
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  return content.filter((b: any) => b?.type === "text" && typeof b.text === "string").map((b: any) => b.text);
}

/** What the CLI sent as the person's words in a user message (Claude's own <system-reminder> blocks left out). */
function promptText(content: unknown): string {
  return blocks(content)
    .filter((t) => !t.trimStart().startsWith("<system-reminder>"))
    .join("\n")
    .trim();
}

/** user/assistant messages of a model call as [role, text] (Claude's own system rows and empty ones skipped). */
function dialogue(req: RecordedRequest): [string, string][] {
  const msgs: any[] = req.body?.messages ?? [];
  return msgs
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m): [string, string] => [m.role, m.role === "user" ? promptText(m.content) : anthropicText(m.content)])
    .filter(([, t]) => t !== "");
}

function systemOf(req: RecordedRequest): string {
  const s = req.body?.system;
  return typeof s === "string" ? s : Array.isArray(s) ? s.map((b: any) => b?.text ?? "").join("\n") : "";
}

/** Claude Code puts its session id into metadata.user_id (a JSON string). */
function sessionOf(req: RecordedRequest): string | undefined {
  try {
    return JSON.parse(String(req.body?.metadata?.user_id)).session_id;
  } catch {
    return undefined;
  }
}

/** The default script: answer naming the person's latest line, so answers are traceable. */
function replyScript(req: RecordedRequest): AnthropicReply {
  const msgs: any[] = req.body?.messages ?? [];
  const lastUser = [...msgs].reverse().find((m) => m.role === "user" && promptText(m.content));
  return { kind: "text", chunks: ["Reply to: ", lastLine(promptText(lastUser?.content ?? ""))] };
}

// ---------------------------------------------------------------------------------------------

let fake: FakeAnthropic;
const turns = () => fake.messageCalls();
const lastPrompt = (req: RecordedRequest) => promptText((req.body?.messages ?? []).at(-1)?.content);

/** Claude Code in the resume contract, warm (the default: one process per conversation) or cold. */
const claudeCli = (warm: boolean): ResumeCli<RecordedRequest, AnthropicReply> => ({
  title: `Claude Code (${warm ? "warm" : "cold"})`,
  cli: "claude",
  model: MODEL,
  backend: "cc",
  warm,
  async start(home) {
    fake = await startFakeAnthropic(replyScript);
    return {
      fake,
      backend: {
        type: "claude-code",
        command: CLAUDE_BIN,
        env: claudeEnv({ baseUrl: fake.baseUrl, home }),
        timeoutSeconds: 60,
        killGraceSeconds: 1,
        warm: { enabled: warm },
      },
    };
  },
  replyScript,
  hang: { kind: "hang" },
  turns,
  isTurn: () => true,
  dialogue,
  userTexts: (req) =>
    dialogue(req)
      .filter(([r]) => r === "user")
      .map(([, t]) => t),
  lastPrompt,
  systemOf,
  conversationJson: (req) => JSON.stringify(req.body?.messages ?? []),
  newMessageBytes(req) {
    const newUser = (req.body?.messages ?? []).at(-1);
    assert.equal(newUser?.role, "user");
    return Buffer.byteLength(blocks(newUser.content).join(""));
  },
  // Claude Code's own system prompt comes with the bootstrap (append mode).
  systemIsBootstrapOnly: false,
  sessionOf,
  sessionFiles: (home, id) => findFiles(path.join(home, ".claude", "projects"), (n) => n === `${id}.jsonl`),
  lostSession: /No conversation found/,
  reachModelMs: 30_000,
  // A second claude would reach the fake well within this time (one start takes ~0.5 s).
  parallelWindowMs: 2500,
});

resumeContract<RecordedRequest, AnthropicReply>(claudeCli(false));

resumeContract<RecordedRequest, AnthropicReply>(claudeCli(true), (ctx) => {
  test("multi-turn through OpenClaw's client library pi-ai (with the plugin's session header) and the official openai client", async () => {
    const { bridge, bindingOf } = ctx;
    fake.setScript(replyScript);
    // --- pi-ai, as OpenClaw 2026.5 drives it
    const model = piModel(bridge.baseURL, MODEL, "Claude via clawbridge");
    const piKey = `agent:main:pi:${randomUUID()}`;
    const context: Context = {
      systemPrompt: openclawSystemPrompt(),
      messages: [{ role: "user", content: wrapUserText("pi says hello", "2026.5"), timestamp: Date.now() }],
    };
    let seenKey: string | undefined;
    const before = fake.messageCalls().length;
    for (const next of ["pi asks again", undefined]) {
      const s = stream(model, context, {
        apiKey: "unused",
        maxRetries: 0,
        headers: { "x-openclaw-session-key": piKey },
        onResponse: (r) => {
          seenKey = r.headers["x-clawbridge-conversation"];
        },
      });
      let n = 0;
      for await (const _ of s) if (++n > 5000) break;
      const msg: AssistantMessage = await s.result();
      assert.equal(msg.stopReason, "stop", `pi-ai: ${msg.errorMessage ?? ""}`);
      context.messages.push(msg);
      if (next) context.messages.push({ role: "user", content: wrapUserText(next, "2026.5"), timestamp: Date.now() });
    }
    assert.equal(seenKey, piKey, "the session header names the conversation");
    const piCalls = fake.messageCalls().slice(before);
    assert.equal(piCalls.length, 2);
    assert.equal(sessionOf(piCalls[1]!), sessionOf(piCalls[0]!), "pi-ai's turn 2 resumed the session");
    assert.deepEqual(dialogue(piCalls[1]!), [
      ["user", "pi says hello"],
      ["assistant", "Reply to: pi says hello"],
      ["user", "pi asks again"],
    ]);
    const texts = context.messages
      .filter((m): m is AssistantMessage => m.role === "assistant")
      .map((m) => m.content.map((c) => (c.type === "text" ? c.text : "")).join(""));
    assert.deepEqual(texts, ["Reply to: pi says hello", "Reply to: pi asks again"]);
    assert.equal((await bindingOf(piKey)).turns, 2);

    // --- the official openai client, streaming, conversation named by `user`
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
    const user = `sdk-${randomUUID()}`;
    const history: OpenAI.ChatCompletionMessageParam[] = [{ role: "system", content: openclawSystemPrompt() }];
    const beforeSdk = fake.messageCalls().length;
    for (const q of ["sdk first", "sdk second"]) {
      history.push({ role: "user", content: q });
      const s = await client.chat.completions.create({ model: MODEL, messages: history, stream: true, user });
      let text = "";
      for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? "";
      assert.equal(text, `Reply to: ${q}`);
      history.push({ role: "assistant", content: text });
    }
    const sdkCalls = fake.messageCalls().slice(beforeSdk);
    assert.equal(sdkCalls.length, 2);
    assert.equal(sessionOf(sdkCalls[1]!), sessionOf(sdkCalls[0]!));
    assert.deepEqual(dialogue(sdkCalls[1]!), [
      ["user", "sdk first"],
      ["assistant", "Reply to: sdk first"],
      ["user", "sdk second"],
    ]);
    // Non-streaming works on the same session too.
    history.push({ role: "user", content: "sdk third" });
    const plain = await client.chat.completions.create({ model: MODEL, messages: history, user });
    assert.equal(plain.choices[0]?.message.content, "Reply to: sdk third");
    assert.equal(sessionOf(fake.messageCalls().at(-1)!), sessionOf(sdkCalls[0]!));
    assert.equal((await bindingOf(`user:${user}`)).turns, 3);
  });
});
