/**
 * The person's images (`TurnInput.images`) reach the model through the REAL Codex, Gemini CLI and
 * OpenCode (node_modules/.bin), cold and warm, each in its own way; only the model APIs are faked
 * (they record the request bodies): Codex sends an `input_image` with a data URL, Gemini CLI an
 * `inlineData` part, OpenCode (an OpenAI-compatible provider whose model takes images) an
 * `image_url` part. A cold turn's image files are gone after the turn, and a later turn of the
 * session still has the image (the CLI keeps the bytes, not the path). The three CLIs run side by
 * side (each with its own fake, HOME and data directory).
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { codexBackend, type CodexBackend } from "../../src/backends/codex/backend.js";
import { codexOptionsSchema } from "../../src/backends/codex/cli-args.js";
import { TURN_IMAGES_DIR } from "../../src/backends/cli/images.js";
import type { Backend, TurnImage, TurnInput } from "../../src/backends/contract/backend.js";
import { geminiCliBackend, geminiCliOptionsSchema } from "../../src/backends/gemini-cli/backend.js";
import { opencodeBackend, opencodeOptionsSchema } from "../../src/backends/opencode/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { CODEX_BIN, codexEnv, geminiEnv, GEMINI_BIN } from "../../testkit/fakes/cli-env.js";
import { startFakeGemini, type RecordedGeminiRequest } from "../../testkit/fakes/gemini-api.js";
import { startFakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { startFakeResponses, type RecordedResponsesRequest } from "../../testkit/fakes/responses-api.js";
import { assertEndsOnce, collect, errorOf, pidGone, sessionOf, textOf, turnInput } from "../helpers/backend-turn.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

/** A real 1x1 RGBA PNG (70 bytes). */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
const PNG_URL = `data:image/png;base64,${PNG}`;
const png = (name = "image-1.png"): TurnImage => ({
  mediaType: "image/png",
  base64: PNG,
  bytes: Buffer.from(PNG, "base64").length,
  name,
});

function withImages(turn: TurnInput, images: TurnImage[]): TurnInput {
  turn.images = images;
  return turn;
}

function tempDirs(prefix: string) {
  const home = mkdtempSync(path.join(tmpdir(), `cb-img-${prefix}-home-`));
  const dataDir = mkdtempSync(path.join(tmpdir(), `cb-img-${prefix}-data-`));
  const cwd = path.join(dataDir, "cwd");
  mkdirSync(cwd, { recursive: true });
  return {
    home,
    dataDir,
    cwd,
    remove: () => {
      rmSync(home, { recursive: true, force: true });
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

const noImageFilesLeft = (cwd: string) =>
  assert.equal(existsSync(path.join(cwd, TURN_IMAGES_DIR)), false, "the turn's image files are removed");

/** The `input_image` URLs of a Responses request (every message of its input). */
const codexImages = (req: RecordedResponsesRequest): string[] =>
  ((req.body?.input ?? []) as any[]).flatMap((i) =>
    Array.isArray(i?.content)
      ? i.content.filter((p: any) => p?.type === "input_image").map((p: any) => p.image_url)
      : [],
  );

/** The `inlineData` parts of a Gemini request (every content). */
const geminiImages = (req: RecordedGeminiRequest): { mimeType: string; data: string }[] =>
  ((req.body?.contents ?? []) as any[]).flatMap((c) =>
    ((c?.parts ?? []) as any[]).filter((p) => p?.inlineData).map((p) => p.inlineData),
  );

/** The `image_url` URLs of a Chat Completions request (every message). */
const chatImages = (req: RecordedRequest): string[] =>
  ((req.body?.messages ?? []) as any[]).flatMap((m) =>
    Array.isArray(m?.content)
      ? m.content.filter((p: any) => p?.type === "image_url").map((p: any) => p.image_url?.url)
      : [],
  );

describe("images reach the model through Codex, Gemini CLI and OpenCode", { concurrency: true }, () => {
  test("codex: --image cold (new thread, stateless; then exec resume), image input items warm", async (t) => {
    const fake = await startFakeResponses();
    const dirs = tempDirs("codex");
    const made: CodexBackend[] = [];
    const make = (warm: boolean) => {
      const b = codexBackend.create(
        "codex",
        codexOptionsSchema.parse({
          command: CODEX_BIN,
          env: codexEnv({ baseUrl: fake.url, home: dirs.home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: warm },
        }),
        { logger, dataDir: dirs.dataDir },
      ) as CodexBackend;
      made.push(b);
      return b;
    };
    try {
      const cold = make(false);
      assert.equal(cold.imageInput, true);
      let thread: string | undefined;
      await t.test("cold, a new thread (stateless turn): an input_image with the data URL", async () => {
        const n0 = fake.responseCalls().length;
        const evs = await collect(
          cold.run(
            withImages(turnInput("img-codex", "What is in this picture?", { cwd: dirs.cwd, resume: false }), [png()]),
          ),
        );
        assertEndsOnce(evs);
        assert.equal(errorOf(evs), undefined, JSON.stringify(errorOf(evs)));
        const req = fake.responseCalls().slice(n0).at(-1)!;
        assert.deepEqual(codexImages(req), [PNG_URL]);
        noImageFilesLeft(dirs.cwd);
        thread = sessionOf(evs);
        assert.ok(thread);
      });
      await t.test("cold, exec resume: the new image, and the first one still in the thread", async () => {
        const n0 = fake.responseCalls().length;
        const evs = await collect(
          cold.run(
            withImages(turnInput("img-codex", "And this one?", { cwd: dirs.cwd, sessionId: thread }), [
              png(),
              { ...png("image-2.png") },
            ]),
          ),
        );
        assertEndsOnce(evs);
        assert.equal(errorOf(evs), undefined, JSON.stringify(errorOf(evs)));
        const req = fake.responseCalls().slice(n0).at(-1)!;
        assert.deepEqual(codexImages(req), [PNG_URL, PNG_URL, PNG_URL], "one from turn 1, two of this turn");
        assert.match(req.lastUserText, /And this one\?/);
        noImageFilesLeft(dirs.cwd);
      });
      await t.test("warm (codex app-server): image input items become an input_image", async () => {
        const warm = make(true);
        const n0 = fake.responseCalls().length;
        const evs = await collect(
          warm.run(withImages(turnInput("img-codex-warm", "Describe it.", { cwd: dirs.cwd }), [png()])),
        );
        assertEndsOnce(evs);
        assert.equal(errorOf(evs), undefined, JSON.stringify(errorOf(evs)));
        assert.ok(warm.warmPool.list(false).length > 0, "the turn ran on a warm app-server");
        const req = fake.responseCalls().slice(n0).at(-1)!;
        assert.deepEqual(codexImages(req), [PNG_URL]);
        assert.match(textOf(evs), /Describe it/);
      });
    } finally {
      const pids = made.flatMap((b) => b.warmPool.list(false).map((w) => w.pid));
      await Promise.all(made.map((b) => b.close()));
      for (const pid of pids) if (pid) assert.ok(pidGone(pid), `codex ${pid} ended`);
      await fake.close();
      dirs.remove();
    }
  });

  test("gemini: @<file> references cold (and the image stays in the resumed session), ACP image blocks warm", async (t) => {
    const fake = await startFakeGemini();
    const dirs = tempDirs("gemini");
    const made: Backend[] = [];
    const make = (warm: boolean) => {
      const b = geminiCliBackend.create(
        "gemini",
        geminiCliOptionsSchema.parse({
          command: GEMINI_BIN,
          env: geminiEnv({ baseUrl: fake.baseUrl, home: dirs.home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: warm },
        }),
        { logger, dataDir: dirs.dataDir },
      );
      made.push(b);
      return b;
    };
    try {
      const cold = make(false);
      assert.equal(cold.imageInput, true);
      let session: string | undefined;
      await t.test("cold: the image is an inlineData part of the user content", async () => {
        const n0 = fake.turnCalls().length;
        const evs = await collect(
          cold.run(withImages(turnInput("img-gemini", "What is in this picture?", { cwd: dirs.cwd }), [png()])),
        );
        assertEndsOnce(evs);
        assert.equal(errorOf(evs), undefined, JSON.stringify(errorOf(evs)));
        const req = fake.turnCalls().slice(n0).at(-1)!;
        assert.deepEqual(geminiImages(req), [{ mimeType: "image/png", data: PNG }]);
        assert.match(req.lastUserText, /What is in this picture\?[\s\S]*@\.clawbridge-images\/turn-\w+\/image-1\.png/);
        noImageFilesLeft(dirs.cwd);
        session = sessionOf(evs);
        assert.ok(session);
      });
      await t.test("cold --resume, no new image: the first image is still in the history", async () => {
        const n0 = fake.turnCalls().length;
        const evs = await collect(
          cold.run(turnInput("img-gemini", "What colour was it?", { cwd: dirs.cwd, sessionId: session })),
        );
        assertEndsOnce(evs);
        assert.equal(errorOf(evs), undefined, JSON.stringify(errorOf(evs)));
        const req = fake.turnCalls().slice(n0).at(-1)!;
        assert.deepEqual(geminiImages(req), [{ mimeType: "image/png", data: PNG }]);
        assert.match(req.lastUserText, /What colour was it\?/);
      });
      await t.test("warm (gemini --acp): image content blocks become inlineData parts", async () => {
        const warm = make(true);
        const n0 = fake.turnCalls().length;
        const evs = await collect(
          warm.run(withImages(turnInput("img-gemini-warm", "Describe it.", { cwd: dirs.cwd }), [png()])),
        );
        assertEndsOnce(evs);
        assert.equal(errorOf(evs), undefined, JSON.stringify(errorOf(evs)));
        const req = fake.turnCalls().slice(n0).at(-1)!;
        assert.deepEqual(geminiImages(req), [{ mimeType: "image/png", data: PNG }]);
        assert.doesNotMatch(req.lastUserText, /clawbridge-images/, "no file: the ACP prompt carried the bytes");
        assert.match(textOf(evs), /Describe it/);
      });
    } finally {
      await Promise.all(made.map((b) => b.close?.()));
      await fake.close();
      dirs.remove();
    }
  });

  test("opencode: --file cold (stateless), data URL file parts warm (opencode serve)", async (t) => {
    const fake = await startFakeOpenAI();
    const dirs = tempDirs("opencode");
    // The fake provider's model takes images (OpenCode sends an image only to a model whose
    // `modalities.input` has `image`; to another it sends a line saying it cannot read it).
    const env = opencodeEnv(fake.url, dirs.home);
    const config = JSON.parse(env.OPENCODE_CONFIG_CONTENT!);
    config.provider.fake.models.m1 = { modalities: { input: ["text", "image"], output: ["text"] } };
    env.OPENCODE_CONFIG_CONTENT = JSON.stringify(config);
    const made: Backend[] = [];
    const make = (warm: boolean) => {
      const b = opencodeBackend.create(
        "oc",
        opencodeOptionsSchema.parse({
          command: OPENCODE_BIN,
          env,
          timeoutSeconds: 60,
          killGraceSeconds: 1,
          warm: { enabled: warm },
        }),
        { logger, dataDir: dirs.dataDir },
      );
      made.push(b);
      return b;
    };
    const main = () => fake.requests.filter((r) => !r.side && r.path.endsWith("/chat/completions"));
    try {
      await t.test("cold (opencode run --file): an image_url part with the data URL", async () => {
        const cold = make(false);
        assert.equal(cold.imageInput, true);
        const n0 = main().length;
        const evs = await collect(
          cold.run(
            withImages(
              turnInput("img-oc", "What is in this picture?", { cwd: dirs.cwd, model: "fake/m1", resume: false }),
              [png()],
            ),
          ),
        );
        assertEndsOnce(evs);
        assert.equal(errorOf(evs), undefined, JSON.stringify(errorOf(evs)));
        const req = main().slice(n0).at(-1)!;
        assert.deepEqual(chatImages(req), [PNG_URL]);
        // OpenCode reads a `--file` with its Read tool and says so in the message.
        assert.match(req.lastUser, /Called the Read tool[\s\S]*image-1\.png/);
        noImageFilesLeft(dirs.cwd);
      });
      await t.test("warm (opencode serve, a resume turn): an image_url part with the data URL", async () => {
        const warm = make(true);
        const n0 = main().length;
        const evs = await collect(
          warm.run(withImages(turnInput("img-oc-warm", "Describe it.", { cwd: dirs.cwd, model: "fake/m1" }), [png()])),
        );
        assertEndsOnce(evs);
        assert.equal(errorOf(evs), undefined, JSON.stringify(errorOf(evs)));
        const req = main().slice(n0).at(-1)!;
        assert.deepEqual(chatImages(req), [PNG_URL]);
        assert.doesNotMatch(req.lastUser, /Read tool/, "no file: the prompt carried a data URL");
        assert.equal(existsSync(path.join(dirs.cwd, TURN_IMAGES_DIR)), false);
        assert.match(textOf(evs), /Describe it/);
      });
    } finally {
      await Promise.all(made.map((b) => b.close?.()));
      await fake.close();
      dirs.remove();
    }
  });
});
