/**
 * A turn's images reach Qwen Code's model (issue 29): the qwen-code backend's `run()` with
 * `TurnInput.images`, the REAL `qwen` CLI against the fake OpenAI chat-completions API, which must
 * receive each image as an `image_url` data-URL part of the LAST user message. qwen reads the
 * images from files the backend writes in the turn's working directory and references after the
 * text (`@<path>`), cold and warm; the files are gone after the turn. qwen's settings say its model
 * takes images (`visionEnv`); for a text-only one qwen itself tells the model it cannot see them.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { TURN_IMAGES_DIR } from "../../src/backends/cli/images.js";
import type { TurnImage } from "../../src/backends/contract/backend.js";
import { qwenCodeBackend, qwenCodeOptionsSchema, type QwenCodeBackend } from "../../src/backends/qwen-code/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { conversationWorkDir } from "../../src/core/util/workdir.js";
import { startFakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { QWEN_BIN, qwenEnv } from "../../testkit/fakes/cli-env.js";
import { backendFixture } from "../helpers/backend-fixture.js";
import { GIF_1x1, PNG_1x1, turnImage, withImages } from "../helpers/images.js";
import { assertEndsOnce, collect, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

const png = turnImage("image/png", PNG_1x1, "image-1.png");
const gif = turnImage("image/gif", GIF_1x1, "image-2.gif");

const partsText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
      ? content.map((p: any) => (typeof p?.text === "string" ? p.text : "")).join("\n")
      : "";

/** The last user message of the (last) model request that holds `marker` in it. */
function lastUser(requests: RecordedRequest[], marker: string): { content: any[]; earlier: any[] } {
  const req = requests.findLast((r) => {
    const users = (r.body?.messages ?? []).filter((m: any) => m.role === "user");
    return partsText(users.at(-1)?.content).includes(marker);
  });
  assert.ok(req, `a model request with "${marker}" in its last user message`);
  const messages: any[] = req.body.messages;
  const at = messages.findLastIndex((m) => m.role === "user");
  const content = messages[at].content;
  assert.ok(Array.isArray(content), `the last user message has parts: ${JSON.stringify(content).slice(0, 300)}`);
  return { content, earlier: messages.slice(0, at) };
}

/** These images, in order, as `image_url` data-URL parts. */
function assertImageParts(content: any[], images: TurnImage[]): void {
  assert.deepEqual(
    content.filter((p) => p.type === "image_url").map((p) => p.image_url?.url),
    images.map((i) => `data:${i.mediaType};base64,${i.base64}`),
    `each image as an image_url data URL, in order: ${JSON.stringify(content).slice(0, 400)}`,
  );
}

/**
 * qwen's settings saying its model takes images. With a key and `OPENAI_MODEL` (no `modelProviders`
 * entry) qwen 0.15 counts the model as text-only unless `model.generationConfig.modalities` says
 * otherwise (its table by model name applies to Qwen OAuth and `modelProviders` models only).
 */
function visionEnv(env: Record<string, string>, home: string): Record<string, string> {
  const file = path.join(home, ".qwen", "settings.json");
  const settings = JSON.parse(readFileSync(file, "utf8"));
  settings.model = { generationConfig: { modalities: { image: true } } };
  writeFileSync(file, JSON.stringify(settings, null, 2));
  return env;
}

describe("images reach Qwen Code's model", () => {
  const fx = backendFixture({
    name: "qwen-img",
    startFake: () => startFakeOpenAI(),
    create: ({ fake, home, dataDir }, extra) =>
      qwenCodeBackend.create(
        "qwen",
        qwenCodeOptionsSchema.parse({
          command: QWEN_BIN,
          env: visionEnv(qwenEnv({ baseUrl: fake.url, home, model: "qwen3-vl-plus" }), home),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          ...extra,
        }),
        { logger, dataDir },
      ) as QwenCodeBackend,
  });

  const imagesDir = (key: string) => path.join(conversationWorkDir(fx.dataDir, key), TURN_IMAGES_DIR);

  test("the backend says it takes images", () => {
    assert.equal(fx.backend.imageInput, true);
  });

  test("cold, stateless then resumed: each turn's images reach the model as image_url parts; their files are gone afterwards", async () => {
    const cold = fx.make({ warm: { enabled: false } });
    fx.fake.setScript(() => ({ kind: "text", chunks: ["Two ", "pixels."] }));
    const evs = await collect(
      cold.run(withImages(turnInput("qimg-cold", "QIMG-COLD what are these?", { resume: false }), [png, gif])),
    );
    assertEndsOnce(evs);
    assert.equal(evs.at(-1)?.type, "done", JSON.stringify(evs));
    assert.equal(textOf(evs), "Two pixels.");
    const { content } = lastUser(fx.fake.mainRequests(), "QIMG-COLD");
    assert.match(partsText(content), /QIMG-COLD what are these\?/, "the turn's text is in the message");
    assertImageParts(content, [png, gif]);
    assert.equal(existsSync(imagesDir("qimg-cold")), false, "the image files are removed after the turn");

    // Resume mode (`--resume`): the new turn's image, and the first turn's from qwen's session file.
    const sid = sessionOf(evs);
    assert.ok(sid, "the first turn reported its session");
    const t2 = await collect(
      cold.run(withImages(turnInput("qimg-cold", "QIMG-COLD-2 and this?", { sessionId: sid }), [gif])),
    );
    assert.equal(t2.at(-1)?.type, "done", JSON.stringify(t2));
    const second = lastUser(fx.fake.mainRequests(), "QIMG-COLD-2");
    assertImageParts(second.content, [gif]);
    assert.equal(
      second.earlier.filter((m) => Array.isArray(m.content) && m.content.some((p: any) => p.type === "image_url"))
        .length,
      1,
      "the resumed session holds the first turn's images (read from qwen's own session, not the removed files)",
    );
  });

  test("warm: a first and a later turn on the same process send their images; the session keeps the first", async () => {
    fx.fake.setScript(() => ({ kind: "text", chunks: ["A pixel."] }));
    const t1 = await collect(fx.backend.run(withImages(turnInput("qimg-warm", "QIMG-WARM-1 look"), [png])));
    assert.equal(t1.at(-1)?.type, "done", JSON.stringify(t1));
    assertImageParts(lastUser(fx.fake.mainRequests(), "QIMG-WARM-1").content, [png]);
    const pid = fx.backend.lastPid;
    const sid = sessionOf(t1);
    assert.ok(fx.backend.warm && pid && sid, "a warm process answered");

    const t2 = await collect(
      fx.backend.run(withImages(turnInput("qimg-warm", "QIMG-WARM-2 and this", { sessionId: sid }), [gif])),
    );
    assert.equal(t2.at(-1)?.type, "done", JSON.stringify(t2));
    assert.equal(fx.backend.lastPid, pid, "the same warm process took the second turn");
    const { content, earlier } = lastUser(fx.fake.mainRequests(), "QIMG-WARM-2");
    assertImageParts(content, [gif]);
    assert.ok(
      earlier.some((m) => Array.isArray(m.content) && m.content.some((p: any) => p.type === "image_url")),
      "the first turn's image is still in the conversation",
    );
    assert.equal(existsSync(imagesDir("qimg-warm")), false, "the image files are removed after each turn");
  });
});
