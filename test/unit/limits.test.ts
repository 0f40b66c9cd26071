/**
 * The limit recogniser (src/backends/cli/limits.ts) on each CLI's and upstream's real words: Claude
 * Code 2.1.197 (its bundle, and what the real CLI printed against a fake API), Gemini CLI 0.61.0,
 * Codex 0.169.0, Qwen Code 0.15.10, OpenCode 1.18.33 and HTTP upstreams; reset times in IANA zones
 * at a fixed `now`, unix times, Retry-After seconds and dates; and what each backend's error path
 * makes of them. Sources: docs/CLI_FORMATS.md, "Limit messages".
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  durationSeconds,
  headerReset,
  isMomentary,
  limitError,
  parseWallClock,
  recogniseHttpLimit,
  recogniseLimitText,
  zonedToEpoch,
} from "../../src/backends/cli/limits.js";
import { ClaudeStreamMapper } from "../../src/backends/claude-code/backend.js";
import { codexError } from "../../src/backends/codex/exec-events.js";
import { geminiAcpError, GeminiStreamMapper } from "../../src/backends/gemini-cli/backend.js";
import { statusError, chunkError } from "../../src/backends/openai/errors.js";
import { turnError } from "../../src/backends/opencode/events.js";
import type { BackendEvent } from "../../src/backends/contract/backend.js";

/** 2026-11-28 02:00 UTC (03:00 in Warsaw, 10:00 in Shanghai). */
const NOW = Date.parse("2026-11-28T02:00:00Z");
const iso = (t: number | undefined) => (t === undefined ? undefined : new Date(t).toISOString());
const text = (s: string, extra: { status?: number; timeZone?: string } = {}) =>
  recogniseLimitText(s, { now: NOW, ...extra });
const END = { code: 1, signal: null, reason: "exit" as const, stderr: "" };
const errorOf = (evs: BackendEvent[]) => (evs.at(-1) as Extract<BackendEvent, { type: "error" }>).error;

describe("Claude Code", () => {
  test("session limit (2.1.187+): 4:20am Europe/Warsaw, seen at 03:00 Warsaw, is today 03:20 UTC", () => {
    const f = text("You've hit your session limit · resets 4:20am (Europe/Warsaw)");
    assert.equal(f?.kind, "usage");
    assert.equal(iso(f?.resetAt), "2026-11-28T03:20:00.000Z");
    assert.equal(f?.words, "You've hit your session limit · resets 4:20am (Europe/Warsaw)");
  });

  test("a wall-clock time already past today is tomorrow's", () => {
    // 10:00 in Shanghai now: 3:20pm is today; 9am is tomorrow.
    assert.equal(
      iso(text("You've hit your limit · resets 3:20pm (Asia/Shanghai)")?.resetAt),
      "2026-11-28T07:20:00.000Z",
    );
    assert.equal(iso(text("You've hit your limit · resets 9am (Asia/Shanghai)")?.resetAt), "2026-11-29T01:00:00.000Z");
  });

  test("weekly, Opus and Sonnet limits with a date; a date in the next year", () => {
    const w = text("You've hit your weekly limit · resets Dec 1, 7:35am (UTC)");
    assert.deepEqual([w?.kind, iso(w?.resetAt)], ["usage", "2026-12-01T07:35:00.000Z"]);
    const o = text("You've hit your Opus limit · resets Jan 3, 2027, 5pm (America/New_York)");
    assert.equal(iso(o?.resetAt), "2027-01-03T22:00:00.000Z");
    const s = text("You've hit your Sonnet limit · resets Jan 3, 5pm (America/New_York)");
    assert.equal(iso(s?.resetAt), "2027-01-03T22:00:00.000Z", "January seen in November is next year's");
  });

  test("spend limits and credits are quotas; the fast limit resets in a duration", () => {
    assert.equal(text("You've hit your monthly spend limit. /model to switch models.")?.kind, "quota");
    assert.equal(text("You're out of usage credits · resets Dec 1, 7am (UTC)")?.kind, "quota");
    assert.equal(iso(text("You've hit your fast limit · resets in 2h 5m")?.resetAt), "2026-11-28T04:05:00.000Z");
  });

  test("the older `Claude AI usage limit reached|<unix seconds>`", () => {
    const f = text("Claude AI usage limit reached|1766502000");
    assert.deepEqual([f?.kind, f?.resetAt], ["usage", 1766502000 * 1000]);
  });

  test("the API's rate_limit_error (as the real CLI printed it), 529 is not a limit", () => {
    const f = text(
      "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.",
      { status: 429 },
    );
    assert.equal(f?.kind, "rate");
    assert.equal(f?.resetAt, undefined, "no reset said → none");
    assert.equal(
      text(
        "API Error: 529 fake overloaded xyz. This is a server-side issue, usually temporary — try again in a moment.",
        { status: 529 },
      ),
      undefined,
    );
    assert.equal(text("API Error: 400 fake says bad request xyz", { status: 400 }), undefined);
  });

  test("logins: invalid key, not logged in, expired or revoked OAuth token", () => {
    for (const s of [
      "Invalid API key · Fix external API key",
      "Invalid API key · Please run /login",
      "Not logged in · Please run /login",
      "OAuth token has expired. Please obtain a new token or refresh your existing token.",
      "OAuth token revoked · Please run /login",
      'API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
    ])
      assert.equal(text(s)?.kind, "auth", s);
  });

  test("the mapper: a subscription limit with the rate_limit_event's exact reset, cold and warm alike", () => {
    const m = new ClaudeStreamMapper("claude", false);
    m.onEvent({
      type: "rate_limit_event",
      rate_limit_info: { status: "rejected", resetsAt: 1795851354, rateLimitType: "five_hour" },
    });
    m.onEvent({
      type: "result",
      subtype: "success",
      is_error: true,
      api_error_status: 429,
      result: "You've hit your session limit · resets 7:35am (UTC)",
    });
    assert.deepEqual(errorOf(m.finish(END)), {
      code: "limit_reached",
      message: "claude: You've hit your session limit · resets 7:35am (UTC)",
      status: 429,
      retryable: true,
      resetAt: 1795851354000,
    });
    const a = new ClaudeStreamMapper("claude", false);
    a.onEvent({
      type: "result",
      subtype: "success",
      is_error: true,
      api_error_status: 401,
      result: "Not logged in · Please run /login",
    });
    assert.deepEqual(errorOf(a.finish(END)), {
      code: "auth_failed",
      message: "claude: Not logged in · Please run /login",
      status: 401,
      retryable: false,
    });
    const o = new ClaudeStreamMapper("claude", false);
    o.onEvent({
      type: "result",
      subtype: "success",
      is_error: true,
      api_error_status: 529,
      result: "API Error: 529 x",
    });
    assert.equal(errorOf(o.finish(END)).code, "upstream_error", "overloaded stays as it was");
  });
});

describe("Gemini CLI", () => {
  test("daily quota (TerminalQuotaError), as the real CLI printed it", () => {
    const f = text(
      "[API Error: You have exhausted your daily quota on this model.]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method",
    );
    assert.equal(f?.kind, "quota");
    assert.equal(f?.resetAt, undefined);
    assert.match(f!.words, /^\[API Error: You have exhausted your daily quota on this model\.\] Please wait/);
  });

  test("Quota exceeded for metric … with RetryInfo: `Suggested retry after` wins over `Please retry in`", () => {
    const f = text(
      "[API Error: You exceeded your current quota, please check your plan and billing details.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 50, model: gemini-2.5-pro\nPlease retry in 37.5s.\nSuggested retry after 3600s.]",
    );
    assert.deepEqual([f?.kind, iso(f?.resetAt)], ["quota", "2026-11-28T03:00:00.000Z"]);
    assert.equal(
      iso(text("Quota exceeded for quota metric 'Gemini 2.5 Pro Requests'. Please retry in 37.5s.")?.resetAt),
      "2026-11-28T02:00:37.500Z",
    );
  });

  test("RESOURCE_EXHAUSTED JSON (429) with a retryDelay; an invalid key is a login failure", () => {
    const body = JSON.stringify({
      error: {
        code: 429,
        message: "Resource has been exhausted (e.g. check quota).",
        status: "RESOURCE_EXHAUSTED",
        details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: "20s" }],
      },
    });
    const f = text(`[API Error: ${body}]`, { status: 429 });
    assert.deepEqual([f?.kind, iso(f?.resetAt)], ["rate", "2026-11-28T02:00:20.000Z"]);
    assert.equal(
      text(
        '[API Error: {"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}]',
      )?.kind,
      "auth",
    );
  });

  test("the mapper and the ACP error: limit_reached", () => {
    const m = new GeminiStreamMapper("gemini", false);
    m.onEvent({
      type: "result",
      status: "error",
      error: { type: "unknown", message: "[API Error: You have exhausted your daily quota on this model.]" },
    });
    const e = errorOf(m.finish({ ...END, code: 173 }));
    assert.deepEqual([e.code, e.status, e.retryable], ["limit_reached", 429, true]);
    assert.match(e.message, /^gemini: \[API Error: You have exhausted your daily quota/);
    const acp = geminiAcpError(
      "gemini",
      {
        method: "session/prompt",
        code: -32603,
        message: "Internal error",
        details: "You have exhausted your daily quota on this model.",
      },
      "",
      false,
    );
    assert.equal(acp.code, "limit_reached");
  });
});

describe("Codex", () => {
  test("usage limit with a local time (the CLI's zone), as the real CLI printed it", () => {
    const s =
      "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 6:37 AM.";
    assert.equal(iso(text(s, { timeZone: "UTC" })?.resetAt), "2026-11-28T06:37:00.000Z");
    assert.equal(iso(text(s, { timeZone: "Europe/Warsaw" })?.resetAt), "2026-11-28T05:37:00.000Z");
    const dated = text("You've hit your usage limit. Try again at Dec 29th, 2026 10:15 PM.", { timeZone: "UTC" });
    assert.deepEqual([dated?.kind, iso(dated?.resetAt)], ["usage", "2026-12-29T22:15:00.000Z"]);
    assert.equal(text("You've hit your usage limit. Try again later.")?.resetAt, undefined);
  });

  test("usage_limit_reached bodies, quota, retries exhausted on 429, refused keys and logins", () => {
    const body =
      '{"error":{"type":"usage_limit_reached","plan_type":"plus","resets_at":1795851354,"resets_in_seconds":7200}}';
    assert.deepEqual([text(body)?.kind, text(body)?.resetAt], ["usage", 1795851354000]);
    assert.equal(
      iso(text('{"error":{"type":"usage_limit_reached","resets_in_seconds":7200}}')?.resetAt),
      "2026-11-28T04:00:00.000Z",
    );
    assert.equal(text("Quota exceeded. Check your plan and billing details.")?.kind, "quota");
    assert.equal(text("exceeded retry limit, last status: 429 Too Many Requests")?.kind, "rate");
    const e = codexError(
      "codex",
      "unexpected status 401 Unauthorized: Incorrect API key provided: sk-abcdef123456., url: http://127.0.0.1:1/v1/responses",
    );
    assert.deepEqual(e, {
      code: "auth_failed",
      message: "codex: unexpected status 401 Unauthorized: Incorrect API key provided: …",
      status: 401,
      retryable: false,
    });
    assert.equal(
      text(
        "Your access token could not be refreshed because your refresh token has expired. Please log out and sign in again.",
      )?.kind,
      "auth",
    );
    assert.equal(codexError("codex", "codex reported an error", 429).code, "limit_reached", "usageLimitExceeded → 429");
    assert.equal(
      codexError("codex", '{"error":{"message":"bad thing","type":"invalid_request_error"}}').code,
      "upstream_error",
    );
  });
});

describe("Qwen Code", () => {
  test("Qwen OAuth quota, the free tier's end, a provider's 429 with qwen's advice", () => {
    assert.equal(text("Qwen OAuth quota exceeded: Your daily quota has been reached.")?.kind, "quota");
    assert.equal(text("Qwen OAuth free tier has been discontinued as of 2026-04-15.")?.kind, "quota");
    assert.equal(text("[API Error: 429 Free allocated quota exceeded.]")?.kind, "quota");
    const f = text(
      "[API Error: 429 slow down]\nPossible quota limitations in place or slow response times detected. Please wait and try again later.",
      { status: 429 },
    );
    assert.equal(f?.kind, "rate");
    assert.equal(text("[API Error: 400 fake says bad request xyz]", { status: 400 }), undefined);
  });
});

describe("OpenCode", () => {
  test("APIError: a provider's quota words, a 429 with Retry-After, a 401; a bare retryable 429 as before", () => {
    const q = turnError(
      {
        name: "APIError",
        data: {
          message: "You exceeded your current quota, please check your plan and billing details.",
          statusCode: 429,
          isRetryable: true,
          responseBody: '{"error":{"code":"insufficient_quota"}}',
        },
      },
      NOW,
    );
    assert.deepEqual([q.code, q.status, q.retryable], ["limit_reached", 429, true]);
    const r = turnError(
      { name: "APIError", data: { message: "Too many", statusCode: 429, responseHeaders: { "retry-after": "90" } } },
      NOW,
    );
    assert.deepEqual([r.code, iso(r.resetAt)], ["limit_reached", "2026-11-28T02:01:30.000Z"]);
    const a = turnError(
      { name: "APIError", data: { message: "Incorrect API key provided: dummy.", statusCode: 401 } },
      NOW,
    );
    assert.deepEqual([a.code, a.status], ["auth_failed", 401]);
    assert.equal(
      turnError({ name: "APIError", data: { message: "slow down", statusCode: 429, isRetryable: true } }).code,
      "upstream_error",
    );
  });
});

describe("HTTP upstreams (the openai backend)", () => {
  test("429 with Retry-After seconds or an HTTP date; none → no resetAt", () => {
    const s = recogniseHttpLimit(429, '{"error":{"message":"Rate limit reached"}}', { "retry-after": "120" }, NOW);
    assert.deepEqual(s, { kind: "rate", resetAt: NOW + 120_000, words: "Rate limit reached" });
    const d = recogniseHttpLimit(429, "", { "retry-after": "Sat, 28 Nov 2026 03:00:00 GMT" }, NOW);
    assert.equal(iso(d?.resetAt), "2026-11-28T03:00:00.000Z");
    assert.equal(recogniseHttpLimit(429, "{}", {}, NOW)?.resetAt, undefined);
  });

  test("402 and insufficient_quota are quotas; 401 and 403 refused keys; 400 and 500 nothing", () => {
    assert.equal(recogniseHttpLimit(402, "Payment Required", {}, NOW)?.kind, "quota");
    const q =
      '{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}';
    assert.equal(recogniseHttpLimit(429, q, {}, NOW)?.kind, "quota");
    assert.equal(recogniseHttpLimit(401, '{"error":{"message":"invalid api key"}}', {}, NOW)?.kind, "auth");
    assert.equal(recogniseHttpLimit(403, "forbidden", {}, NOW)?.kind, "auth");
    assert.equal(recogniseHttpLimit(400, '{"error":{"message":"bad"}}', {}, NOW), undefined);
    assert.equal(recogniseHttpLimit(500, "boom", {}, NOW), undefined);
  });

  test("reset headers: retry-after-ms, x-ratelimit-reset-*, anthropic-ratelimit-*, a fetch Headers", () => {
    assert.equal(headerReset({ "retry-after-ms": "1500" }, NOW), NOW + 1500);
    assert.equal(
      headerReset(
        {
          "x-ratelimit-remaining-requests": "0",
          "x-ratelimit-reset-requests": "6m0s",
          "x-ratelimit-reset-tokens": "1s",
        },
        NOW,
      ),
      NOW + 360_000,
    );
    assert.equal(
      headerReset(
        { "anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": "2026-11-28T02:05:00Z" },
        NOW,
      ),
      Date.parse("2026-11-28T02:05:00Z"),
    );
    assert.equal(headerReset(new Headers({ "anthropic-ratelimit-unified-reset": "1795851354" }), NOW), 1795851354000);
    assert.equal(headerReset({}, NOW), undefined);
  });

  test("statusError: limit_reached with resetAt, auth_failed, a momentary 429 stays upstream_error", () => {
    const now = Date.now();
    const e = statusError(
      429,
      { "retry-after": "120" },
      '{"error":{"message":"slow down","type":"rate_limit_error"}}',
      now,
    );
    assert.deepEqual(e, {
      code: "limit_reached",
      message: "upstream 429: slow down (retry after 120 s)",
      status: 429,
      retryable: true,
      resetAt: now + 120_000,
    });
    assert.equal(statusError(429, { "retry-after": "7" }, "{}", now).code, "upstream_error");
    const a = statusError(401, {}, '{"error":{"message":"Incorrect API key provided: sk-proj-abcdefghijk"}}', now);
    assert.deepEqual([a.code, a.status, a.retryable], ["auth_failed", 401, false]);
    assert.ok(!a.message.includes("abcdefghijk"), a.message);
    assert.equal(statusError(500, {}, "boom", now).code, "upstream_error");
    assert.equal(chunkError({ error: { message: "quota", code: 429 } })?.code, "limit_reached");
    assert.equal(chunkError({ error: { message: "boom", code: 500 } })?.code, "upstream_error");
  });

  test("isMomentary and limitError", () => {
    assert.equal(isMomentary({ kind: "rate", resetAt: NOW + 5000, words: "" }, NOW), true);
    assert.equal(isMomentary({ kind: "quota", resetAt: NOW + 5000, words: "" }, NOW), false);
    assert.equal(isMomentary({ kind: "rate", words: "" }, NOW), false);
    assert.deepEqual(limitError("x", { kind: "usage", words: "w" }), {
      code: "limit_reached",
      message: "x: w",
      status: 429,
      retryable: true,
    });
  });
});

describe("time", () => {
  test("wall clocks in zones, across DST, 24-hour times, unknown zones", () => {
    // Warsaw springs forward on 2026-03-29 at 02:00: 23:30 that day is CEST (+2).
    assert.equal(
      iso(parseWallClock("11:30pm", Date.parse("2026-03-29T00:30:00Z"), "Europe/Warsaw")),
      "2026-03-29T21:30:00.000Z",
    );
    assert.equal(iso(parseWallClock("16:20", NOW, "UTC")), "2026-11-28T16:20:00.000Z");
    assert.equal(iso(parseWallClock("12am", NOW, "UTC")), "2026-11-29T00:00:00.000Z");
    assert.equal(parseWallClock("4:20am", NOW, "Mars/Olympus"), undefined);
    assert.equal(parseWallClock("soon", NOW, "UTC"), undefined);
    assert.equal(iso(zonedToEpoch(2026, 7, 1, 12, 0, "America/Los_Angeles")), "2026-07-01T19:00:00.000Z");
  });

  test("durations", () => {
    assert.equal(durationSeconds("37.5s"), 37.5);
    assert.equal(durationSeconds("20ms"), 0.02);
    assert.equal(durationSeconds("1h2m3s"), 3723);
    assert.equal(durationSeconds("120"), 120);
    assert.equal(durationSeconds("soon"), undefined);
  });

  test("ordinary failures are not limits", () => {
    for (const s of ["", "No conversation found with session ID: x", "stream disconnected before completion: boom"])
      assert.equal(text(s), undefined, s);
  });
});
