/**
 * Fallback chains with the REAL CLIs (issue 28): the real `claude` (warm, resume mode) against the
 * fake Anthropic API, driven into its subscription limit exactly as it prints it offline (an OAuth
 * token and the API's 429 with the unified rate-limit headers: see limits-claude.test.ts), and the
 * real `gemini` against the fake Gemini API answering 429 RESOURCE_EXHAUSTED. The turn is answered
 * by the next model (an `openai` backend in front of the fake OpenAI API), streamed, with the header
 * and the event, and the earlier history reaches it; the limited CLI is skipped until its reset;
 * after the reset the conversation goes back to Claude's own session, which is given the turns it
 * missed. Driven by the official `openai` client.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { BridgeEvent } from "../../src/wire/events.js";
import { type FakeAnthropic, startFakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, GEMINI_BIN, claudeEnv, geminiEnv } from "../../testkit/fakes/cli-env.js";
import { type FakeGemini, startFakeGemini } from "../../testkit/fakes/gemini-api.js";
import { type FakeOpenAI, startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

describe("fallback chains with the real Claude Code and Gemini CLI", () => {
  let anthropic: FakeAnthropic;
  let gemini: FakeGemini;
  let local: FakeOpenAI;
  let bridge: TestBridge;
  let home: string;
  const events: BridgeEvent[] = [];

  before(async () => {
    anthropic = await startFakeAnthropic();
    gemini = await startFakeGemini();
    local = await startFakeOpenAI((req) => ({ kind: "text", chunks: ["local answers: ", req.lastUser.slice(-30)] }));
    home = tempDir("cb-fbcli-home-");
    bridge = await startTestBridge({
      backends: {
        cc: {
          type: "claude-code",
          command: CLAUDE_BIN,
          // Logged in with a subscription (an OAuth token the fake takes); no retries of a 429 by the CLI itself.
          env: {
            ...claudeEnv({ baseUrl: anthropic.baseUrl, home }),
            ANTHROPIC_API_KEY: "",
            CLAUDE_CODE_OAUTH_TOKEN: "fake-oauth-token",
            CLAUDE_CODE_MAX_RETRIES: "0",
          },
          timeoutSeconds: 60,
          killGraceSeconds: 1,
        },
        gm: {
          type: "gemini-cli",
          command: GEMINI_BIN,
          env: geminiEnv({ baseUrl: gemini.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
        },
        up: { type: "openai", baseUrl: local.url },
      },
      models: [
        { id: "claude", name: "Claude", backend: "cc", session: { mode: "resume" }, fallback: ["local"] },
        { id: "gemini", name: "Gemini", backend: "gm", session: { mode: "resume" }, fallback: ["local"] },
        { id: "local", name: "Local", backend: "up", model: "m-local" },
      ],
    });
    bridge.bus.on((e) => events.push(e));
  });

  after(async () => {
    await bridge?.close(0);
    await Promise.all([anthropic?.close(), gemini?.close(), local?.close()]);
    cleanup(home);
    if (bridge) cleanup(bridge.dataDir);
  });

  /** A streamed turn of one conversation; its history kept as OpenClaw keeps it. */
  function conversation(model: string) {
    const key = `fbcli-${randomUUID()}`;
    const messages: OpenAI.ChatCompletionMessageParam[] = [];
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "k", maxRetries: 0, timeout: 90_000 });
    return async (text: string) => {
      messages.push({ role: "user", content: text });
      const { data, response } = await client.chat.completions
        .create({ model, stream: true, messages: [...messages] }, { headers: { "x-session-id": key } })
        .withResponse();
      let answer = "";
      for await (const c of data) answer += c.choices[0]?.delta?.content ?? "";
      messages.push({ role: "assistant", content: answer });
      return { answer, answeredBy: response.headers.get("x-clawbridge-answered-by") };
    };
  }

  test("Claude Code at its session limit: the next model answers with the history; Claude is skipped until the reset, then goes on in its own session with the turns it missed", async () => {
    const say = conversation("claude");
    const t1 = await say("first question FIRST-Q");
    assert.equal(t1.answeredBy, "claude");
    assert.match(t1.answer, /^You said: [\s\S]*FIRST-Q/);

    // The subscription's session limit, resetting a few seconds from now.
    const resetAt = (Math.floor(Date.now() / 1000) + 6) * 1000;
    anthropic.setScript(() => ({
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "Rate limited",
      headers: {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": String(resetAt / 1000),
        "anthropic-ratelimit-unified-representative-claim": "five_hour",
      },
    }));
    const localBefore = local.mainRequests().length;
    const t2 = await say("second question SECOND-Q");
    assert.equal(t2.answeredBy, "local");
    assert.match(t2.answer, /^local answers: /);
    const got = local.mainRequests().slice(localBefore);
    assert.equal(got.length, 1);
    const sent = JSON.stringify(got[0]!.body.messages);
    assert.match(sent, /FIRST-Q/, "the earlier history reaches the fallback model");
    assert.match(sent, /SECOND-Q/, "and the person's message");
    const fb = events.find((e) => e.type === "turn.fallback" && e.fromBackend === "cc") as any;
    assert.ok(fb, "a turn.fallback event");
    assert.equal(fb.reason, "limit_reached");
    assert.equal(fb.resetAt, resetAt, "the reset Claude Code said");

    // Skipped, without being tried, until the reset.
    const claudeCalls = anthropic.messageCalls().length;
    const t3 = await say("third question THIRD-Q");
    assert.equal(t3.answeredBy, "local");
    assert.equal(anthropic.messageCalls().length, claudeCalls, "claude was not asked");

    // After the reset: back to Claude's own session, given the turns it missed.
    assert.ok(await eventually(() => Date.now() > resetAt + 200, 15_000));
    anthropic.setScript((req) => ({ kind: "text", chunks: ["You said: ", req.lastUserText.slice(-40), "."] }));
    const t4 = await say("fourth question FOURTH-Q");
    assert.equal(t4.answeredBy, "claude");
    const req = anthropic.messageCalls().at(-1)!;
    const all = JSON.stringify(req.body.messages);
    assert.match(all, /FIRST-Q/, "its own session went on (what it saw itself)");
    assert.match(req.lastUserText, /MEANWHILE/, "told what happened meanwhile");
    for (const s of ["SECOND-Q", "THIRD-Q", "local answers", "FOURTH-Q"]) assert.ok(req.lastUserText.includes(s), s);
  });

  test("Claude Code answered by the API's 429 rate_limit_error (an API key's rate limit): the next model answers, streamed, with the header and the event", async () => {
    const say = conversation("claude");
    anthropic.setScript(() => ({
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "This request would exceed your account's rate limit. Please try again later.",
      headers: { "retry-after": "2" },
    }));
    try {
      const before = local.mainRequests().length;
      const t = await say("rate limited R-ONE");
      assert.equal(t.answeredBy, "local");
      assert.match(JSON.stringify(local.mainRequests().slice(before)[0]!.body.messages), /R-ONE/);
      const fb = events.filter((e) => e.type === "turn.fallback" && e.fromBackend === "cc").at(-1) as any;
      assert.equal(fb?.reason, "limit_reached");
    } finally {
      anthropic.setScript((req) => ({ kind: "text", chunks: ["You said: ", req.lastUserText.slice(-40), "."] }));
    }
  });

  test("Gemini CLI at its quota (429 RESOURCE_EXHAUSTED): the next model answers, streamed, with the header and the event", async () => {
    const say = conversation("gemini");
    const t1 = await say("hello gemini G-FIRST");
    assert.equal(t1.answeredBy, "gemini");
    gemini.setScript(() => ({
      kind: "error",
      status: 429,
      statusText: "RESOURCE_EXHAUSTED",
      message: "You exceeded your current quota, please check your plan and billing details.\nPlease retry in 600s.",
      details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "600s" }],
    }));
    const before = local.mainRequests().length;
    const t2 = await say("and now G-SECOND");
    assert.equal(t2.answeredBy, "local");
    const sent = JSON.stringify(local.mainRequests().slice(before)[0]!.body.messages);
    assert.match(sent, /G-FIRST/);
    assert.match(sent, /G-SECOND/);
    const fb = events.find((e) => e.type === "turn.fallback" && e.fromBackend === "gm") as any;
    assert.equal(fb?.reason, "limit_reached");
    assert.ok(fb.resetAt > Date.now() + 500_000, "the RetryInfo's reset");
  });
});
