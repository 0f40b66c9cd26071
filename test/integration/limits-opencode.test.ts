/**
 * Refused keys and limits of the REAL `opencode` CLI (node_modules/.bin) against the fake OpenAI
 * API on 127.0.0.1, cold (`opencode run --format json`) and warm (`opencode serve`) (issue 28).
 *
 * OpenCode 1.18.33 reports a provider's failure as `APIError` {message, statusCode, isRetryable,
 * responseHeaders, responseBody}: a 401 is not retryable and ends the turn at once → `auth_failed`.
 * A 429 (also `insufficient_quota`) IS retryable for OpenCode and it retries without end (its
 * `session.status` `retry` events; nothing on `run`'s stdout). On `serve` a retry whose message
 * names a quota or usage limit ends the turn with `limit_reached` (the session is stopped); a plain
 * rate limit is left to OpenCode's retries, and `run` ends only at the bridge's deadline
 * (docs/CLI_FORMATS.md, "Limit messages").
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { Backend } from "../../src/backends/contract/backend.js";
import { opencodeBackend, opencodeOptionsSchema } from "../../src/backends/opencode/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { type FakeOpenAI, startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { assertEndsOnce, collect, errorOf, turnInput } from "../helpers/backend-turn.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

describe("opencode: a refused key with the real opencode CLI", () => {
  let fake: FakeOpenAI;
  let home: string;
  let dataDir: string;
  const backends: Backend[] = [];

  before(async () => {
    fake = await startFakeOpenAI();
    home = mkdtempSync(path.join(tmpdir(), "cb-limits-oc-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-limits-oc-data-"));
  });

  after(async () => {
    for (const b of backends) await b.close?.();
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  for (const warm of [false, true]) {
    test(`401 → auth_failed (401), ${warm ? "warm (serve)" : "cold (run)"}`, async () => {
      const b = opencodeBackend.create(
        "oc",
        opencodeOptionsSchema.parse({
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          timeoutSeconds: 40,
          killGraceSeconds: 1,
          warm: { enabled: warm },
        }),
        { logger, dataDir },
      );
      backends.push(b);
      fake.setScript(() => ({ kind: "error", status: 401, message: "Incorrect API key provided: dummy." }));
      const evs = await collect(b.run(turnInput(`oclim-${warm}`, "hello", { model: "fake/m1", resume: false })));
      assertEndsOnce(evs);
      const e = errorOf(evs);
      assert.equal(e?.code, "auth_failed", JSON.stringify(evs));
      assert.equal(e?.status, 401);
      assert.equal(e?.retryable, false);
      assert.match(e!.message, /^opencode: Incorrect API key provided: …/);
    });
  }

  test("a quota OpenCode keeps retrying (insufficient_quota) → limit_reached on serve, the session stopped", async () => {
    const b = opencodeBackend.create(
      "oc",
      opencodeOptionsSchema.parse({
        command: OPENCODE_BIN,
        env: opencodeEnv(fake.url, home),
        timeoutSeconds: 40,
        killGraceSeconds: 1,
        warm: { enabled: true },
      }),
      { logger, dataDir },
    );
    backends.push(b);
    fake.setScript(() => ({
      kind: "raw",
      status: 429,
      headers: { "content-type": "application/json" },
      frames: [
        JSON.stringify({
          error: {
            message: "You exceeded your current quota, please check your plan and billing details.",
            type: "insufficient_quota",
            code: "insufficient_quota",
          },
        }),
      ],
    }));
    const t0 = Date.now();
    const evs = await collect(b.run(turnInput("oclim-quota", "hello", { model: "fake/m1", resume: false })));
    assertEndsOnce(evs);
    const e = errorOf(evs);
    assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
    assert.match(e!.message, /^opencode: You exceeded your current quota/);
    assert.ok(Date.now() - t0 < 30_000, `ended by the limit, not by the 40 s deadline (${Date.now() - t0} ms)`);
    // The session no longer calls the model (OpenCode's next retry would come 4-8 s later).
    await new Promise((r) => setTimeout(r, 1000));
    const calls = fake.requests.length;
    await new Promise((r) => setTimeout(r, 5000));
    assert.ok(fake.requests.length <= calls + 1, `${calls} → ${fake.requests.length} requests`);
  });
});
