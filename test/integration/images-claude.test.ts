/**
 * A turn's images reach Claude Code's model (issue 29): the claude-code backend's `run()` with
 * `TurnInput.images`, the REAL `claude` CLI against the fake Anthropic Messages API, which must
 * receive each image as an `image` block (same media type, same base64) in the LAST user message,
 * after the turn's text — cold in both pipeline modes (stateless, and resume with `--resume`) and
 * warm (a long-lived `--input-format stream-json` process, on its first and on a later turn).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  claudeCodeBackend,
  claudeCodeOptionsSchema,
  type ClaudeCodeBackend,
} from "../../src/backends/claude-code/backend.js";
import type { TurnImage } from "../../src/backends/contract/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { startFakeAnthropic, type RecordedRequest } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { backendFixture } from "../helpers/backend-fixture.js";
import { GIF_1x1, PNG_1x1, turnImage, withImages } from "../helpers/images.js";
import { assertEndsOnce, collect, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

const png = turnImage("image/png", PNG_1x1, "image-1.png");
const gif = turnImage("image/gif", GIF_1x1, "image-2.gif");

/** The model request whose last user message holds `marker`, and that message's content blocks. */
function lastUserBlocks(requests: RecordedRequest[], marker: string): any[] {
  const req = requests.findLast((r) => r.lastUserText.includes(marker));
  assert.ok(req, `a model request with "${marker}" in its last user message`);
  const users = (req.body.messages as any[]).filter((m) => m.role === "user");
  const content = users.at(-1).content;
  assert.ok(Array.isArray(content), "the last user message has content blocks");
  return content;
}

/** The text then exactly these images, as Anthropic image blocks, in the last user message. */
function assertImages(blocks: any[], marker: string, images: TurnImage[]): void {
  const at = blocks.findIndex((b) => b.type === "text" && b.text.includes(marker));
  assert.ok(at >= 0, `the turn's text is in the message: ${JSON.stringify(blocks).slice(0, 300)}`);
  const sent = blocks.filter((b) => b.type === "image");
  assert.deepEqual(
    sent.map((b) => b.source),
    images.map((i) => ({ type: "base64", media_type: i.mediaType, data: i.base64 })),
    "each image as an image block, same media type and bytes, in order",
  );
  assert.ok(blocks.indexOf(sent[0]) > at, "the images follow the text");
}

describe("images reach Claude Code's model", () => {
  const fx = backendFixture({
    name: "claude-img",
    startFake: () => startFakeAnthropic(),
    create: ({ fake, home, dataDir }, extra) =>
      claudeCodeBackend.create(
        "claude",
        claudeCodeOptionsSchema.parse({
          command: CLAUDE_BIN,
          env: claudeEnv({ baseUrl: fake.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          ...extra,
        }),
        { logger, dataDir },
      ) as ClaudeCodeBackend,
  });

  test("the backend says it takes images", () => {
    assert.equal(fx.backend.imageInput, true);
  });

  test("cold: a stateless turn and a resumed turn (--resume) each send their images as image blocks", async () => {
    const cold = fx.make({ warm: { enabled: false } });
    fx.fake.setScript(() => ({ kind: "text", chunks: ["I see ", "a pixel."] }));
    const t1 = await collect(
      cold.run(withImages(turnInput("img-cold", "IMG-COLD-1 what is in these?", { resume: false }), [png, gif])),
    );
    assertEndsOnce(t1);
    assert.equal(t1.at(-1)?.type, "done", JSON.stringify(t1));
    assert.equal(textOf(t1), "I see a pixel.");
    assertImages(lastUserBlocks(fx.fake.messageCalls(), "IMG-COLD-1"), "IMG-COLD-1 what is in these?", [png, gif]);

    const sid = sessionOf(t1);
    assert.ok(sid, "the stateless turn reported its session");
    const t2 = await collect(
      cold.run(withImages(turnInput("img-cold", "IMG-COLD-2 and this one?", { sessionId: sid }), [png])),
    );
    assert.equal(t2.at(-1)?.type, "done", JSON.stringify(t2));
    assertImages(lastUserBlocks(fx.fake.messageCalls(), "IMG-COLD-2"), "IMG-COLD-2 and this one?", [png]);
    const req = fx.fake.messageCalls().findLast((r) => r.lastUserText.includes("IMG-COLD-2"))!;
    const earlier = (req.body.messages as any[]).slice(0, -1);
    assert.ok(
      earlier.some((m) => Array.isArray(m.content) && m.content.some((b: any) => b.type === "image")),
      "the resumed session still holds the first turn's images",
    );
  });

  test("warm: the process's first turn and a later turn on it send their images as image blocks", async () => {
    fx.fake.setScript(() => ({ kind: "text", chunks: ["A pixel."] }));
    const t1 = await collect(fx.backend.run(withImages(turnInput("img-warm", "IMG-WARM-1 look"), [gif])));
    assertEndsOnce(t1);
    assert.equal(t1.at(-1)?.type, "done", JSON.stringify(t1));
    assertImages(lastUserBlocks(fx.fake.messageCalls(), "IMG-WARM-1"), "IMG-WARM-1 look", [gif]);
    const pid = fx.backend.lastPid;
    const sid = sessionOf(t1);
    assert.ok(fx.backend.warm && pid && sid, "a warm process answered");

    const t2 = await collect(
      fx.backend.run(withImages(turnInput("img-warm", "IMG-WARM-2 and now", { sessionId: sid }), [png, gif])),
    );
    assert.equal(t2.at(-1)?.type, "done", JSON.stringify(t2));
    assert.equal(fx.backend.lastPid, pid, "the same warm process took the second turn");
    assertImages(lastUserBlocks(fx.fake.messageCalls(), "IMG-WARM-2"), "IMG-WARM-2 and now", [png, gif]);
  });
});
