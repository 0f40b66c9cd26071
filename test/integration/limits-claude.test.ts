/**
 * Limits and refused logins of the REAL `claude` CLI (node_modules/.bin) against the fake
 * Anthropic API on 127.0.0.1, cold and warm (issue 28): every one ends the turn with ONE error,
 * `limit_reached` (429, retryable, resetAt when said) or `auth_failed` (401).
 *
 * The subscription message IS driven offline: Claude Code 2.1.197 prints its own
 * `You've hit your session limit · resets 7:35am (Europe/Warsaw)` when it is logged in with an
 * OAuth token (`CLAUDE_CODE_OAUTH_TOKEN`, any value: the fake takes it) and the API answers 429
 * with `anthropic-ratelimit-unified-status: rejected`, `…-unified-reset: <unix s>` and
 * `…-unified-representative-claim: five_hour` (`seven_day` → "weekly limit"); it also writes a
 * `rate_limit_event` line with the exact `resetsAt`. The zone it names is its own (`TZ`).
 * `CLAUDE_CODE_MAX_RETRIES=0`: the CLI's own retries of a 429/529 would otherwise take minutes.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import {
  type ClaudeCodeBackend,
  claudeCodeBackend,
  claudeCodeOptionsSchema,
} from "../../src/backends/claude-code/backend.js";
import { recogniseLimitText } from "../../src/backends/cli/limits.js";
import { createLogger } from "../../src/core/log/logger.js";
import { type FakeAnthropic, startFakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { assertEndsOnce, collect, errorOf, turnInput } from "../helpers/backend-turn.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

describe("claude-code: limits and logins with the real claude CLI", () => {
  let fake: FakeAnthropic;
  let home: string;
  let dataDir: string;
  const backends: ClaudeCodeBackend[] = [];

  const make = (opts: { subscription?: boolean; warm?: boolean } = {}) => {
    const env: Record<string, string> = {
      ...claudeEnv({ baseUrl: fake.baseUrl, home }),
      CLAUDE_CODE_MAX_RETRIES: "0",
      TZ: "Europe/Warsaw",
    };
    if (opts.subscription) {
      env.ANTHROPIC_API_KEY = "";
      env.CLAUDE_CODE_OAUTH_TOKEN = "fake-oauth-token";
    }
    const b = claudeCodeBackend.create(
      "claude",
      claudeCodeOptionsSchema.parse({
        command: CLAUDE_BIN,
        env,
        timeoutSeconds: 40,
        killGraceSeconds: 1,
        warm: { enabled: !!opts.warm },
      }),
      { logger, dataDir },
    ) as ClaudeCodeBackend;
    backends.push(b);
    return b;
  };

  before(async () => {
    fake = await startFakeAnthropic();
    home = mkdtempSync(path.join(tmpdir(), "cb-limits-claude-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-limits-claude-data-"));
  });

  after(async () => {
    for (const b of backends) await b.close();
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** A 429 of the subscription's unified limit, resetting in `hours` (on a whole minute, as the CLI prints it). */
  const unified = (claim: string, hours: number) => {
    const reset = Math.floor((Date.now() + hours * 3_600_000) / 60_000) * 60;
    fake.setScript(() => ({
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "Rate limited",
      headers: {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": String(reset),
        "anthropic-ratelimit-unified-representative-claim": claim,
      },
    }));
    return reset * 1000;
  };

  test("the API's 429 rate_limit_error → limit_reached (429, retryable), cold", async () => {
    fake.setScript(() => ({
      kind: "error",
      status: 429,
      errorType: "rate_limit_error",
      message: "This request would exceed your account's rate limit. Please try again later.",
      headers: { "retry-after": "120" },
    }));
    const evs = await collect(make().run(turnInput("lim-rate", "hello", { resume: false })));
    assertEndsOnce(evs);
    const e = errorOf(evs);
    assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
    assert.equal(e?.status, 429);
    assert.equal(e?.retryable, true);
    assert.match(e!.message, /^claude: API Error: .*429.*rate limit/);
  });

  test("the subscription's session limit, as the CLI prints it → limit_reached with the exact resetAt, cold", async () => {
    const resetAt = unified("five_hour", 3);
    const evs = await collect(make({ subscription: true }).run(turnInput("lim-session", "hello", { resume: false })));
    assertEndsOnce(evs);
    const e = errorOf(evs);
    assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
    assert.match(
      e!.message,
      /^claude: You've hit your session limit · resets \d{1,2}(:\d\d)?[ap]m \(Europe\/Warsaw\)$/,
    );
    assert.equal(e?.resetAt, resetAt, "the rate_limit_event's resetsAt");
    // The printed words alone give the same minute.
    const words = e!.message.replace(/^claude: /, "");
    assert.equal(recogniseLimitText(words, { now: Date.now() })?.resetAt, resetAt);
  });

  test("the weekly limit on a warm process → limit_reached with resetAt", async () => {
    const resetAt = unified("seven_day", 50);
    const evs = await collect(make({ subscription: true, warm: true }).run(turnInput("lim-weekly", "hello")));
    assertEndsOnce(evs);
    const e = errorOf(evs);
    assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
    assert.match(e!.message, /You've hit your weekly limit · resets [A-Z][a-z]{2} \d{1,2}, /);
    assert.equal(e?.resetAt, resetAt);
  });

  test("a refused key (401 authentication_error) → auth_failed (401), cold and warm", async () => {
    fake.setScript(() => ({
      kind: "error",
      status: 401,
      errorType: "authentication_error",
      message: "invalid x-api-key",
    }));
    for (const warm of [false, true]) {
      const evs = await collect(make({ warm }).run(turnInput(`lim-auth-${warm}`, "hello", { resume: warm })));
      assertEndsOnce(evs);
      const e = errorOf(evs);
      assert.equal(e?.code, "auth_failed", JSON.stringify(evs));
      assert.equal(e?.status, 401);
      assert.equal(e?.retryable, false);
      assert.match(e!.message, /^claude: Invalid API key/);
    }
  });

  test("529 overloaded is not a limit: upstream_error as before", async () => {
    fake.setScript(() => ({ kind: "error", status: 529, errorType: "overloaded_error", message: "Overloaded" }));
    const evs = await collect(make().run(turnInput("lim-529", "hello", { resume: false })));
    assertEndsOnce(evs);
    assert.equal(errorOf(evs)?.code, "upstream_error", JSON.stringify(evs));
  });
});
