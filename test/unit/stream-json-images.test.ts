/**
 * A turn's images for the stream-json CLIs: Claude Code's user message carries them as Anthropic
 * image blocks after the text (src/backends/cli/stream-json.ts); Qwen Code, which would turn such a
 * block into JSON text, is given the turn with the images written as files and referenced after the
 * text, the rest of the pipeline's input (its `signal` getter too) unchanged
 * (src/backends/qwen-code/backend.ts).
 */
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { imageBlock, userMessage } from "../../src/backends/cli/stream-json.js";
import type { TurnImage } from "../../src/backends/contract/backend.js";
import { qwenImageText, qwenImageTurn } from "../../src/backends/qwen-code/backend.js";
import { Cancellation } from "../../src/core/util/cancel.js";
import { chatRequestSchema } from "../../src/request/chat-api/schema.js";
import { BackendInput } from "../../src/request/pipeline/turn.js";

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const png: TurnImage = { mediaType: "image/png", base64: PNG, bytes: 70, name: "image-1.png" };
const gif: TurnImage = { mediaType: "image/gif", base64: "R0lGODlhAQABAAAAACw=", bytes: 14, name: "image-2.gif" };

describe("stream-json user messages with images", () => {
  test("without images: one text block, as before", () => {
    assert.deepEqual(userMessage("hello"), {
      type: "user",
      message: { role: "user", content: [{ type: "text", text: "hello" }] },
      parent_tool_use_id: null,
      session_id: "",
    });
  });

  test("with images: the text, then each image as a base64 image block, in order", () => {
    const msg = userMessage("look", [png, gif]) as { message: { content: unknown[] } };
    assert.deepEqual(msg.message.content, [
      { type: "text", text: "look" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: PNG } },
      { type: "image", source: { type: "base64", media_type: "image/gif", data: gif.base64 } },
    ]);
    assert.deepEqual(imageBlock(gif), msg.message.content[2]);
  });
});

describe("qwen: images as @ references to files", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "cb-qwen-img-unit-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("the references follow the text, one a line", () => {
    assert.equal(qwenImageText("hi", []), "hi");
    assert.equal(qwenImageText("hi", ["a/x.png"]), "hi\n\nAttached image:\n@a/x.png");
    assert.equal(qwenImageText("hi", ["a/x.png", "a/y.gif"]), "hi\n\nAttached images:\n@a/x.png\n@a/y.gif");
  });

  test("a turn without images is given as it is", () => {
    const turn = input("plain");
    const r = qwenImageTurn(dir, turn);
    assert.ok(!("error" in r));
    assert.equal(r.turn, turn);
    assert.equal(r.files, undefined);
  });

  test("the pipeline's input with images: files written, text references them, no images, signal kept", () => {
    const turn = input("what is it?");
    turn.images = [png];
    const r = qwenImageTurn(dir, turn);
    assert.ok(!("error" in r) && r.files);
    const given = r.turn;
    assert.equal(given.prompt.text, `what is it?\n\nAttached image:\n@${r.files.relative[0]}`);
    assert.equal(given.prompt.system, "SYS");
    assert.equal(given.images, undefined, "qwen gets no image blocks");
    assert.equal(turn.images?.length, 1, "the pipeline's own input is not changed");
    assert.equal(given.session, turn.session);
    assert.equal(given.model, turn.model);
    assert.equal(given.signal, turn.signal, "the class's signal getter still answers");
    assert.deepEqual(readFileSync(r.files.absolute[0]!), Buffer.from(PNG, "base64"));
    r.files.remove();
    assert.equal(existsSync(r.files.absolute[0]!), false);
  });
});

function input(text: string): BackendInput {
  const request = chatRequestSchema.parse({ model: "m", messages: [{ role: "user", content: text }] });
  return new BackendInput("m", { system: "SYS", text }, request, { key: "k", turn: 0 }, new Cancellation());
}
