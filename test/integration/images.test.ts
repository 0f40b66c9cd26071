/**
 * Images through the bridge (issue 29 item 3), driven by the official `openai` client: a data URL
 * reaches an OpenAI-compatible upstream unchanged; an image URL is fetched by the bridge (only
 * where the config allows the address) and sent on as data; a private address, an oversized or a
 * broken image is a 400 in the API's error shape that says what to do; a model configured as
 * text-only gets one line per image instead (and the turn's event says so); `/v1/models` lists
 * what each model takes in. Only the upstream model is faked.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { BridgeEvent } from "../../src/wire/events.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, type TestBridge } from "../helpers/bridge.js";
import { PNG_1x1 } from "../helpers/images.js";

const KEY = "images-test-key-1234";
const PNG_URL = `data:image/png;base64,${PNG_1x1}`;

describe("images through the Chat Completions door", () => {
  let upstream: FakeOpenAI;
  let bridge: TestBridge;
  let strict: TestBridge;
  let client: OpenAI;
  let strictClient: OpenAI;
  let host: http.Server;
  let origin: string;
  const events: BridgeEvent[] = [];

  before(async () => {
    upstream = await startFakeOpenAI();
    host = http.createServer((req, res) => {
      res.writeHead(200, { "content-type": "image/png" });
      res.end(Buffer.from(PNG_1x1, "base64"));
    });
    await new Promise<void>((r) => host.listen(0, "127.0.0.1", r));
    origin = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
    const config = (images: object) => ({
      server: { apiKeys: [KEY] },
      images,
      backends: { local: { type: "openai", baseUrl: upstream.url, apiKey: "up" } },
      models: [
        { id: "vision", backend: "local", model: "qwen2.5-vl", session: { mode: "passthrough" } },
        { id: "text-only", backend: "local", model: "qwen2.5", input: ["text"], session: { mode: "passthrough" } },
      ],
    });
    // One bridge allows its loopback image host (as a user's NAS would be allowed), one does not.
    bridge = await startTestBridge(config({ maxBytes: 4096, fetch: { allowHosts: ["127.0.0.1"] } }));
    strict = await startTestBridge(config({}));
    bridge.bus.on((e) => events.push(e));
    client = new OpenAI({ baseURL: bridge.baseURL, apiKey: KEY, maxRetries: 0 });
    strictClient = new OpenAI({ baseURL: strict.baseURL, apiKey: KEY, maxRetries: 0 });
  });

  after(async () => {
    await bridge?.close();
    await strict?.close();
    await upstream?.close();
    await new Promise<void>((r) => host.close(() => r()));
    cleanup(bridge.dataDir);
    cleanup(strict.dataDir);
  });

  const ask = (c: OpenAI, model: string, url: string, stream = false) =>
    c.chat.completions.create({
      model,
      stream: stream as false,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is in this picture?" },
            { type: "image_url", image_url: { url, detail: "high" } },
          ],
        },
      ],
    });
  const lastImagePart = () => {
    const m = upstream.mainRequests().at(-1)!.body.messages.at(-1);
    return m.content.find((p: { type: string }) => p.type === "image_url");
  };

  test("a data URL reaches the upstream vision model unchanged (streaming and not)", async () => {
    const answer = await ask(client, "vision", PNG_URL);
    assert.ok(answer.choices[0]!.message.content);
    assert.deepEqual(lastImagePart(), { type: "image_url", image_url: { url: PNG_URL, detail: "high" } });
    const stream = await client.chat.completions.create({
      model: "vision",
      stream: true,
      messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: PNG_URL } }] }],
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta.content ?? "";
    assert.ok(text);
    assert.equal(lastImagePart().image_url.url, PNG_URL);
  });

  test("an image URL the config allows is fetched by the bridge and sent on as data", async () => {
    await ask(client, "vision", `${origin}/photo.png`);
    assert.equal(lastImagePart().image_url.url, PNG_URL);
  });

  test("an image URL on a private address is a 400 that says what to do; nothing reaches the upstream", async () => {
    const before = upstream.requests.length;
    await assert.rejects(ask(strictClient, "vision", `${origin}/photo.png`), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError, String(err));
      assert.equal(err.code, "image_url_blocked");
      assert.equal(err.param, "messages[0].content[1].image_url");
      assert.match(err.message, /loopback address 127\.0\.0\.1 is not allowed.*send the image as a data URL/);
      return true;
    });
    assert.equal(upstream.requests.length, before);
  });

  test("an oversized image and one that is no image are 400s naming the limit and the problem", async () => {
    const big = `data:image/png;base64,${Buffer.concat([Buffer.from(PNG_1x1, "base64"), Buffer.alloc(8192)]).toString("base64")}`;
    await assert.rejects(ask(client, "vision", big), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.code, "image_too_large");
      assert.match(err.message, /larger than the 4 KB allowed \(images\.maxBytes\)/);
      return true;
    });
    await assert.rejects(ask(client, "vision", "data:image/png;base64,PGh0bWw+"), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.code, "invalid_image");
      return true;
    });
  });

  test("a text-only model gets one line per image instead, and the turn's event says so", async () => {
    events.length = 0;
    await ask(client, "text-only", PNG_URL);
    const parts = upstream.mainRequests().at(-1)!.body.messages.at(-1).content as Array<{
      type: string;
      text?: string;
    }>;
    assert.equal(
      parts.some((p) => p.type === "image_url"),
      false,
    );
    assert.match(parts[1]!.text!, /sent an image \(image\/png\) here, but qwen2\.5|text-only cannot see images/);
    const ev = events.find((e) => e.type === "turn.images") as Extract<BridgeEvent, { type: "turn.images" }>;
    assert.ok(ev, "a turn.images event");
    assert.equal(ev.passed, false);
    assert.equal(ev.images, 1);
    assert.match(ev.reason!, /models\[text-only\]\.input does not list image/);
    events.length = 0;
    await ask(client, "vision", PNG_URL);
    const passed = events.find((e) => e.type === "turn.images") as Extract<BridgeEvent, { type: "turn.images" }>;
    assert.equal(passed.passed, true);
  });

  test("/v1/models lists what each model takes in", async () => {
    const list = await client.models.list();
    const input = (id: string) => (list.data.find((m) => m.id === id) as unknown as { input: string[] }).input;
    assert.deepEqual(input("vision"), ["text", "image"]);
    assert.deepEqual(input("text-only"), ["text"]);
  });
});
