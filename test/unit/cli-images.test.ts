/**
 * A turn's images for the CLIs (src/backends/cli/images.ts): written into a private folder per turn
 * under the working directory (names of our own, mode 0600, relative paths), removed with the turn;
 * and how each CLI is handed them: `codex exec --image=<file>` before the other options, Codex's
 * `image` input items, Gemini CLI's `@<file>` references and ACP image blocks, OpenCode's data URL
 * file parts.
 */
import assert from "node:assert/strict";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { imageDataUrl, imageFileName, TURN_IMAGES_DIR, writeTurnImages } from "../../src/backends/cli/images.js";
import { codexArgs, codexOptionsSchema } from "../../src/backends/codex/cli-args.js";
import { codexTurnInput } from "../../src/backends/codex/app-server-turn.js";
import type { TurnImage } from "../../src/backends/contract/backend.js";
import { acpPrompt } from "../../src/backends/gemini-cli/acp.js";
import { geminiPromptWithImages } from "../../src/backends/gemini-cli/backend.js";
import { opencodePromptParts } from "../../src/backends/opencode/serve-turn.js";

const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const img = (name: string, mediaType = "image/png", base64 = PNG): TurnImage => ({
  mediaType,
  base64,
  bytes: Buffer.from(base64, "base64").length,
  name,
});

const root = mkdtempSync(path.join(tmpdir(), "cb-cli-images-"));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const newCwd = () => {
  const d = path.join(root, `cwd-${++n}`);
  mkdirSync(d);
  return d;
};

describe("writeTurnImages", () => {
  test("no images: nothing written", () => {
    const cwd = newCwd();
    assert.equal(writeTurnImages(cwd, undefined), undefined);
    assert.equal(writeTurnImages(cwd, []), undefined);
    assert.deepEqual(readdirSync(cwd), []);
  });

  test("one private folder per turn under the cwd, the bytes in 0600 files, relative paths; remove() takes it all away", () => {
    const cwd = newCwd();
    const files = writeTurnImages(cwd, [img("image-1.png"), img("image-2.jpg", "image/jpeg", "/9j/AA==")]);
    assert.ok(files && !("error" in files));
    assert.equal(files.relative.length, 2);
    assert.match(files.relative[0]!, /^\.clawbridge-images\/turn-[A-Za-z0-9]{6}\/image-1\.png$/);
    assert.equal(path.dirname(files.relative[1]!), path.dirname(files.relative[0]!));
    assert.equal(path.basename(files.relative[1]!), "image-2.jpg");
    for (let i = 0; i < 2; i++) assert.equal(path.resolve(cwd, files.relative[i]!), files.absolute[i]);
    assert.deepEqual(readFileSync(files.absolute[0]!), Buffer.from(PNG, "base64"));
    assert.deepEqual(readFileSync(files.absolute[1]!), Buffer.from("/9j/AA==", "base64"));
    assert.equal(statSync(files.absolute[0]!).mode & 0o777, 0o600);
    assert.equal(statSync(path.dirname(files.absolute[0]!)).mode & 0o777, 0o700);
    assert.equal(statSync(path.join(cwd, TURN_IMAGES_DIR)).mode & 0o777, 0o700);
    files.remove();
    files.remove();
    assert.deepEqual(readdirSync(cwd), [], "the empty .clawbridge-images goes with the last turn's folder");
  });

  test("parallel turns in one cwd get folders of their own; the first removed leaves the other", () => {
    const cwd = newCwd();
    const a = writeTurnImages(cwd, [img("image-1.png")]);
    const b = writeTurnImages(cwd, [img("image-1.png")]);
    assert.ok(a && b && !("error" in a) && !("error" in b));
    assert.notEqual(a.absolute[0], b.absolute[0]);
    a.remove();
    assert.ok(existsSync(b.absolute[0]!));
    b.remove();
    assert.equal(existsSync(path.join(cwd, TURN_IMAGES_DIR)), false);
  });

  test("a folder an interrupted turn left is removed once an hour old; a recent one is kept", () => {
    const cwd = newCwd();
    const dir = path.join(cwd, TURN_IMAGES_DIR);
    mkdirSync(path.join(dir, "turn-old111"), { recursive: true });
    mkdirSync(path.join(dir, "turn-new111"));
    const old = (Date.now() - 2 * 3600_000) / 1000;
    utimesSync(path.join(dir, "turn-old111"), old, old);
    const files = writeTurnImages(cwd, [img("image-1.png")]);
    assert.ok(files && !("error" in files));
    const left = readdirSync(dir);
    assert.ok(!left.includes("turn-old111"), left.join());
    assert.ok(left.includes("turn-new111"), left.join());
    files.remove();
  });

  test("a cwd it cannot write in is an error value that says where", () => {
    // A file where the working directory would be.
    const cwd = path.join(newCwd(), "file");
    writeFileSync(cwd, "x");
    const r = writeTurnImages(cwd, [img("image-1.png")]);
    assert.ok(r && "error" in r);
    assert.match(r.error, /cannot write the turn's images under .*\.clawbridge-images/);
  });
});

describe("imageFileName", () => {
  test("the pipeline's own name when it is plain and of the media type's extension", () => {
    assert.equal(imageFileName(img("image-3.png"), 2), "image-3.png");
    assert.equal(imageFileName(img("image-1.jpg", "image/jpeg"), 0), "image-1.jpg");
    assert.equal(imageFileName(img("image-1.webp", "image/webp"), 0), "image-1.webp");
  });

  test("anything else becomes image-<n>.<ext>: paths, odd characters, a wrong extension, a taken name", () => {
    for (const bad of [
      "../x.png",
      "a/b.png",
      "/etc/passwd.png",
      ".hidden.png",
      "x y.png",
      "image-1.jpg",
      "",
      "a".repeat(80) + ".png",
    ])
      assert.equal(imageFileName(img(bad), 0), "image-1.png", JSON.stringify(bad));
    assert.equal(imageFileName(img("image-1.gif", "image/png"), 1), "image-2.png");
    assert.equal(imageFileName(img("image-1.png"), 0, new Set(["image-1.png"])), "image-2.png");
    assert.equal(imageFileName(img("x.bin", "image/heic"), 0), "image-1.img");
  });
});

describe("how each CLI is handed the images", () => {
  const opts = codexOptionsSchema.parse({});
  const session = { key: "k", turn: 0 };

  test("codex exec: --image=<file> right after --json, before the options and the final `-`", () => {
    const args = codexArgs(opts, { model: "default", session }, undefined, [".clawbridge-images/turn-a/image-1.png"]);
    assert.deepEqual(args.slice(0, 3), ["exec", "--json", "--image=.clawbridge-images/turn-a/image-1.png"]);
    assert.equal(args.at(-1), "-");
    assert.ok(args[3]!.startsWith("-"), "an option follows, so --image takes no other value");
    const resumed = codexArgs(
      opts,
      { model: "default", session: { ...session, backendSessionId: "019a0000-0000-7000-8000-000000000000" } },
      undefined,
      ["a.png", "b.png"],
    );
    assert.deepEqual(resumed.slice(0, 5), ["exec", "resume", "--json", "--image=a.png", "--image=b.png"]);
    assert.ok(!codexArgs(opts, { model: "default", session }).some((a) => a.startsWith("--image")));
  });

  test("codex app-server: image items with a data URL, then the text", () => {
    assert.deepEqual(codexTurnInput("hi"), [{ type: "text", text: "hi", text_elements: [] }]);
    assert.deepEqual(codexTurnInput("hi", [img("image-1.png")]), [
      { type: "image", url: `data:image/png;base64,${PNG}` },
      { type: "text", text: "hi", text_elements: [] },
    ]);
  });

  test("gemini cold: one @<file> reference per line after the text", () => {
    assert.equal(geminiPromptWithImages("hi", []), "hi");
    assert.equal(geminiPromptWithImages("hi", ["a/image-1.png"]), "hi\n\nAttached image:\n@a/image-1.png");
    assert.equal(geminiPromptWithImages("hi", ["a/1.png", "a/2.png"]), "hi\n\nAttached images:\n@a/1.png\n@a/2.png");
  });

  test("ACP: image blocks when the agent takes images, else a line saying they were not passed", () => {
    const spec = { label: "gemini", text: "hi", images: [img("image-1.png")] };
    const takes = { protocolVersion: 1, agentCapabilities: { promptCapabilities: { image: true } } } as any;
    assert.deepEqual(acpPrompt(spec, takes), [
      { type: "text", text: "hi" },
      { type: "image", data: PNG, mimeType: "image/png" },
    ]);
    assert.deepEqual(acpPrompt({ label: "gemini", text: "hi" }, takes), [{ type: "text", text: "hi" }]);
    const blind = acpPrompt(spec, { protocolVersion: 1, agentCapabilities: {} } as any);
    assert.equal(blind.length, 1);
    assert.match(
      (blind[0] as { text: string }).text,
      /^hi\n\n\[The person sent an image .* gemini does not take images/,
    );
  });

  test("opencode serve: the text, then data URL file parts named as the pipeline named them", () => {
    assert.deepEqual(opencodePromptParts("hi"), [{ type: "text", text: "hi" }]);
    assert.deepEqual(opencodePromptParts("hi", [img("image-1.png")]), [
      { type: "text", text: "hi" },
      { type: "file", mime: "image/png", url: imageDataUrl(img("image-1.png")), filename: "image-1.png" },
    ]);
  });
});
