/**
 * Limits and refused keys of the REAL `codex` CLI (node_modules/.bin) against the fake Responses
 * API on 127.0.0.1, cold (`codex exec --json`) and warm (`codex app-server`) (issue 28).
 *
 * Codex 0.169.0 turns a 429 whose body is `{"error":{"type":"usage_limit_reached","plan_type":…,
 * "resets_at":<unix s>}}` into its own words, whatever the provider: `You’ve hit your usage limit.
 * Upgrade to Pro (…), visit … to purchase more credits or try again at 6:37 AM.` — the reset in
 * the CLI's LOCAL time (its `TZ`), with no zone named (codex-rs/core/src/error.rs). The backend
 * reads it in the CLI's `TZ` (here Asia/Tokyo, so a wrong zone would be hours off).
 * `insufficient_quota` becomes `Quota exceeded. Check your plan and billing details.`; a 401 keeps
 * the body. The fake's provider has `request_max_retries = 0`.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { type CodexBackend, codexBackend } from "../../src/backends/codex/backend.js";
import { codexOptionsSchema } from "../../src/backends/codex/cli-args.js";
import { createLogger } from "../../src/core/log/logger.js";
import { CODEX_BIN, codexEnv } from "../../testkit/fakes/cli-env.js";
import { type FakeResponses, startFakeResponses } from "../../testkit/fakes/responses-api.js";
import { assertEndsOnce, collect, errorOf, turnInput } from "../helpers/backend-turn.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

describe("codex: limits and keys with the real codex CLI", () => {
  let fake: FakeResponses;
  let home: string;
  let dataDir: string;
  const backends: CodexBackend[] = [];

  const make = (warm: boolean) => {
    const b = codexBackend.create(
      "codex",
      codexOptionsSchema.parse({
        command: CODEX_BIN,
        env: { ...codexEnv({ baseUrl: fake.url, home }), TZ: "Asia/Tokyo" },
        timeoutSeconds: 40,
        killGraceSeconds: 1,
        warm: { enabled: warm },
      }),
      { logger, dataDir },
    ) as CodexBackend;
    backends.push(b);
    return b;
  };

  before(async () => {
    fake = await startFakeResponses();
    home = mkdtempSync(path.join(tmpdir(), "cb-limits-codex-home-"));
    dataDir = mkdtempSync(path.join(tmpdir(), "cb-limits-codex-data-"));
  });

  after(async () => {
    for (const b of backends) await b.close();
    await fake?.close();
    rmSync(home, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  for (const warm of [false, true]) {
    const how = warm ? "warm (app-server)" : "cold (exec)";

    test(`usage_limit_reached → limit_reached with the reset read in the CLI's zone, ${how}`, async () => {
      // Resets on a whole minute (codex prints minutes): 2 h away (today's time, or a date when
      // Tokyo's midnight falls between) and 30 h away (always another day: codex adds the date).
      for (const hours of [2, 30]) {
        const reset = Math.floor((Date.now() + hours * 3_600_000) / 60_000) * 60;
        fake.setScript(() => ({
          kind: "error",
          status: 429,
          type: "usage_limit_reached",
          message: "The usage limit has been reached",
          extra: { plan_type: "plus", resets_at: reset, resets_in_seconds: hours * 3600 },
        }));
        const before = Date.now();
        const evs = await collect(make(warm).run(turnInput(`clim-usage-${warm}-${hours}`, "hello")));
        const expected = new Set([codexResetText(reset * 1000, before), codexResetText(reset * 1000, Date.now())]);
        assertEndsOnce(evs);
        const e = errorOf(evs);
        assert.equal(e?.code, "limit_reached", JSON.stringify(evs));
        assert.equal(e?.status, 429);
        assert.equal(e?.retryable, true);
        assert.match(e!.message, /^codex: You.ve hit your usage limit\. /);
        const at = /try again at (.+)\.$/.exec(e!.message)?.[1];
        assert.ok(at !== undefined && expected.has(at), `${e!.message} (expected one of ${[...expected].join(" | ")})`);
        assert.equal(e?.resetAt, reset * 1000);
      }
    });

    test(`insufficient_quota → limit_reached; a 401 → auth_failed, ${how}`, async () => {
      fake.setScript(() => ({
        kind: "error",
        status: 429,
        type: "insufficient_quota",
        code: "insufficient_quota",
        message: "You exceeded your current quota, please check your plan and billing details.",
      }));
      const q = errorOf(await collect(make(warm).run(turnInput(`clim-quota-${warm}`, "hello"))));
      assert.equal(q?.code, "limit_reached", JSON.stringify(q));
      assert.match(q!.message, /Quota exceeded/);
      fake.setScript(() => ({ kind: "error", status: 401, message: "Incorrect API key provided: dummy." }));
      const a = errorOf(await collect(make(warm).run(turnInput(`clim-auth-${warm}`, "hello"))));
      assert.equal(a?.code, "auth_failed", JSON.stringify(a));
      assert.equal(a?.status, 401);
      assert.ok(!a!.message.includes("url:"), a!.message);
    });
  }
});

/**
 * How codex 0.169.0 writes a reset in its zone (`format_retry_timestamp`, codex-rs/core/src/error.rs):
 * `%-I:%M %p` on the same local day as now, else `%b %-d<st|nd|rd|th>, %Y %-I:%M %p`.
 */
function codexResetText(resetMs: number, nowMs: number, timeZone = "Asia/Tokyo"): string {
  const parts = (ms: number) =>
    Object.fromEntries(
      new Intl.DateTimeFormat("en-US", {
        timeZone,
        year: "numeric",
        month: "short",
        day: "numeric",
        hour: "numeric",
        minute: "2-digit",
        hour12: true,
      })
        .formatToParts(ms)
        .map((p) => [p.type, p.value]),
    );
  const r = parts(resetMs);
  const n = parts(nowMs);
  const time = `${r.hour}:${r.minute} ${r.dayPeriod}`;
  if (r.year === n.year && r.month === n.month && r.day === n.day) return time;
  const day = Number(r.day);
  const suffix = day >= 11 && day <= 13 ? "th" : (["th", "st", "nd", "rd"][day % 10] ?? "th");
  return `${r.month} ${day}${suffix}, ${r.year} ${time}`;
}
