/**
 * Limits and refused keys of the REAL `gemini` CLI (node_modules/.bin) against the fake Gemini API
 * on 127.0.0.1, cold (`-o stream-json`) and warm (`--acp`) (issue 28): a 429 `RESOURCE_EXHAUSTED`
 * ends the turn with ONE `limit_reached` (429, retryable, resetAt when the answer says when), an
 * invalid key with `auth_failed` (401).
 *
 * Gemini CLI 0.61.0 retries a 429 it takes for a short rate limit (no details, or a RetryInfo of
 * at most 300 s) with backoff for minutes; it gives up at once on a terminal quota: a QuotaFailure
 * whose quotaId is per day ("You have exhausted your daily quota on this model."), a "limit: 0",
 * or a RetryInfo over 300 s (its message then ends "Suggested retry after 3600s."). The tests use
 * those; the fake answers every call so (the routing side call too).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  type GeminiCliBackend,
  geminiCliBackend,
  geminiCliOptionsSchema,
} from "../../src/backends/gemini-cli/backend.js";
import { createLogger } from "../../src/core/log/logger.js";
import { GEMINI_BIN, geminiEnv } from "../../testkit/fakes/cli-env.js";
import { type FakeGemini, type GeminiReply, startFakeGemini } from "../../testkit/fakes/gemini-api.js";
import { assertEndsOnce, collect, errorOf, turnInput } from "../helpers/backend-turn.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

const DAILY: GeminiReply = {
  kind: "error",
  status: 429,
  statusText: "RESOURCE_EXHAUSTED",
  message:
    "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 50, model: gemini-2.5-pro",
  details: [
    {
      "@type": "type.googleapis.com/google.rpc.QuotaFailure",
      violations: [
        {
          quotaMetric: "generativelanguage.googleapis.com/generate_content_free_tier_requests",
          quotaId: "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
          quotaValue: "50",
        },
      ],
    },
  ],
};

const LONG_RETRY: GeminiReply = {
  kind: "error",
  status: 429,
  statusText: "RESOURCE_EXHAUSTED",
  message: "You exceeded your current quota, please check your plan and billing details.\nPlease retry in 3599.5s.",
  details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "3600s" }],
};

describe("gemini-cli: limits and keys with the real gemini CLI", () => {
  let fake: FakeGemini;
  let home: string;
  let dataDir: string;
  const backends: GeminiCliBackend[] = [];

  const make = (warm = false) => {
    const b = geminiCliBackend.create(
      "gemini",
      geminiCliOptionsSchema.parse({
        command: GEMINI_BIN,
        env: geminiEnv({ baseUrl: fake.baseUrl, home }),
        timeoutSeconds: 40,
        killGraceSeconds: 1,
        warm: { enabled: warm },
      }),
      { logger, dataDir },
    ) as GeminiCliBackend;
    backends.push(b);
    return b;
  };

  before(async () => {
    fake = await startFakeGemini();
    home = mkdtempSync(path.join(tmpdir(), "cb-limits-gemini-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-limits-gemini-data-"));
  });

  after(async () => {
    for (const b of backends) await b.close();
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  test("429 RESOURCE_EXHAUSTED, a daily quota → limit_reached (429, retryable), cold", async () => {
    fake.setScript(() => DAILY);
    const evs = await collect(make().run(turnInput("glim-daily", "hello", { resume: false })));
    assertEndsOnce(evs);
    const e = errorOf(evs);
    assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
    assert.equal(e?.status, 429);
    assert.equal(e?.retryable, true);
    assert.match(e!.message, /^gemini: .*You have exhausted your daily quota on this model\./);
    assert.equal(e?.resetAt, undefined, "the CLI did not say when");
  });

  test("429 RESOURCE_EXHAUSTED with a RetryInfo of an hour → limit_reached with resetAt ≈ now + 3600 s", async () => {
    fake.setScript(() => LONG_RETRY);
    const t0 = Date.now();
    const evs = await collect(make().run(turnInput("glim-long", "hello", { resume: false })));
    const e = errorOf(evs);
    assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
    assert.match(e!.message, /Suggested retry after 3600s/);
    assert.ok(e?.resetAt && e.resetAt >= t0 + 3_599_000 && e.resetAt <= Date.now() + 3_600_000, String(e?.resetAt));
  });

  test("the daily quota on a warm process (ACP) → limit_reached", async () => {
    fake.setScript(() => DAILY);
    const evs = await collect(make(true).run(turnInput("glim-warm", "hello")));
    assertEndsOnce(evs);
    const e = errorOf(evs);
    assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
    assert.match(e!.message, /^gemini: .*(exhausted your daily quota|Quota exceeded)/);
  });

  test("an invalid key (400 API_KEY_INVALID) → auth_failed (401)", async () => {
    fake.setScript(() => ({
      kind: "error",
      status: 400,
      statusText: "INVALID_ARGUMENT",
      message: "API key not valid. Please pass a valid API key.",
      details: [
        { "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "API_KEY_INVALID", domain: "googleapis.com" },
      ],
    }));
    const evs = await collect(make().run(turnInput("glim-auth", "hello", { resume: false })));
    assertEndsOnce(evs);
    const e = errorOf(evs);
    assert.equal(e?.code, "auth_failed", JSON.stringify(evs));
    assert.equal(e?.status, 401);
    assert.match(e!.message, /^gemini: .*API key not valid/);
  });
});
