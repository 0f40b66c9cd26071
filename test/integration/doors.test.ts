/**
 * Every door leads into the same pipeline (issue 29): one conversation (the same `x-session-id`)
 * goes on across Chat Completions, the Responses API and Anthropic Messages on the REAL Claude Code
 * (resume mode: its session has all three turns); an image sent through the Anthropic SDK reaches
 * Claude Code's model API as an image block, and a Responses `input_image` reaches an OpenAI
 * upstream unchanged; an image URL on a private address is refused on each door in that API's own
 * error shape. Drivers: the official `openai` and `@anthropic-ai/sdk` clients. Only the model APIs
 * are faked.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { startFakeAnthropic, type FakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { PNG_1x1, PNG_DATA_URL } from "../helpers/images.js";

const KEY = "doors-test-key-123456";
const PRIVATE_IMAGE = "http://127.0.0.1:9/secret.png";

describe("three doors, one pipeline", () => {
  let anthropicApi: FakeAnthropic;
  let upstream: FakeOpenAI;
  let bridge: TestBridge;
  let home: string;
  let openai: OpenAI;
  let anthropic: Anthropic;

  before(async () => {
    anthropicApi = await startFakeAnthropic();
    upstream = await startFakeOpenAI();
    home = tempDir("cb-doors-home-");
    bridge = await startTestBridge({
      server: { apiKeys: [KEY] },
      backends: {
        cc: {
          type: "claude-code",
          command: CLAUDE_BIN,
          env: claudeEnv({ baseUrl: anthropicApi.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
        up: { type: "openai", baseUrl: upstream.url },
      },
      models: [
        { id: "claude", backend: "cc", session: { mode: "resume" } },
        { id: "local", backend: "up", session: { mode: "passthrough" } },
      ],
    });
    openai = new OpenAI({ baseURL: bridge.baseURL, apiKey: KEY, maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: bridge.url, apiKey: KEY, maxRetries: 0 });
  });

  after(async () => {
    await bridge?.close();
    await anthropicApi?.close();
    await upstream?.close();
    cleanup(bridge.dataDir);
    cleanup(home);
  });

  test("one conversation goes on across all three doors on the same CLI session", async () => {
    const session = { "x-session-id": "doors-one-conversation" };
    const chat = await openai.chat.completions
      .create(
        { model: "claude", messages: [{ role: "user", content: "first, through chat: alpha" }] },
        { headers: session },
      )
      .withResponse();
    assert.equal(chat.response.headers.get("x-clawbridge-conversation"), "doors-one-conversation");
    assert.match(chat.data.choices[0]!.message.content ?? "", /alpha/);

    const responses = await openai.responses
      .create({ model: "claude", input: "second, through responses: bravo" }, { headers: session })
      .withResponse();
    assert.equal(responses.response.headers.get("x-clawbridge-conversation"), "doors-one-conversation");
    assert.match(responses.data.output_text, /bravo/);

    const stream = anthropic.messages.stream(
      { model: "claude", max_tokens: 256, messages: [{ role: "user", content: "third, through messages: charlie" }] },
      { headers: session },
    );
    const message = await stream.finalMessage();
    const text = message.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    assert.match(text, /charlie/);

    // The CLI resumed one session: its third model request holds all three of the person's turns.
    const last = anthropicApi.requests.findLast((r) => r.lastUserText.includes("charlie"));
    assert.ok(last, "Claude Code's model saw the third turn");
    const history = JSON.stringify(last.body.messages);
    for (const word of ["alpha", "bravo", "charlie"]) assert.ok(history.includes(word), `the session holds ${word}`);
  });

  test("an image sent with the Anthropic SDK reaches Claude Code's model as an image block", async () => {
    const message = await anthropic.messages.create(
      {
        model: "claude",
        max_tokens: 256,
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "what is in this picture? delta" },
              { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_1x1 } },
            ],
          },
        ],
      },
      { headers: { "x-session-id": "doors-image" } },
    );
    assert.equal(message.role, "assistant");
    const req = anthropicApi.requests.findLast((r) => r.lastUserText.includes("delta"));
    assert.ok(req);
    const content = (req.body.messages as Array<{ role: string; content: unknown }>)
      .filter((m) => m.role === "user")
      .at(-1)!.content as Array<{ type: string; source?: unknown }>;
    assert.deepEqual(
      content.filter((b) => b.type === "image").map((b) => b.source),
      [{ type: "base64", media_type: "image/png", data: PNG_1x1 }],
    );
  });

  test("a Responses input_image reaches an OpenAI upstream unchanged", async () => {
    await openai.responses.create({
      model: "local",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "describe it" },
            { type: "input_image", image_url: PNG_DATA_URL, detail: "auto" },
          ],
        },
      ],
    });
    const parts = upstream.mainRequests().at(-1)!.body.messages.at(-1).content as Array<{
      type: string;
      image_url?: { url: string };
    }>;
    assert.equal(parts.find((p) => p.type === "image_url")?.image_url?.url, PNG_DATA_URL);
  });

  test("an image on a private address is refused on each door in its API's own shape", async () => {
    const before = upstream.requests.length;
    await assert.rejects(
      openai.chat.completions.create({
        model: "local",
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: PRIVATE_IMAGE } }] }],
      }),
      (err: unknown) =>
        err instanceof OpenAI.BadRequestError && err.code === "image_url_blocked" && /data URL/.test(err.message),
    );
    await assert.rejects(
      openai.responses.create({
        model: "local",
        input: [{ role: "user", content: [{ type: "input_image", image_url: PRIVATE_IMAGE, detail: "auto" }] }],
      }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError, String(err));
        assert.equal(err.code, "image_url_blocked");
        // Named as this API's client counts it, not by the pipeline's message positions.
        assert.match(err.message, /^400 image 1 of the request: the bridge does not fetch .*data URL/);
        assert.equal(err.param, null);
        return true;
      },
    );
    await assert.rejects(
      anthropic.messages.create({
        model: "local",
        max_tokens: 64,
        messages: [{ role: "user", content: [{ type: "image", source: { type: "url", url: PRIVATE_IMAGE } }] }],
      }),
      (err: unknown) => {
        assert.ok(err instanceof Anthropic.BadRequestError, String(err));
        const body = err.error as { type: string; error: { type: string; message: string } };
        assert.equal(body.type, "error");
        assert.equal(body.error.type, "invalid_request_error");
        assert.match(
          body.error.message,
          /^image 1 of the request: .*loopback address 127\.0\.0\.1 is not allowed.*data URL/,
        );
        return true;
      },
    );
    assert.equal(upstream.requests.length, before, "nothing reached the model");
  });
});
