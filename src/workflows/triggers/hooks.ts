/**
 * Inbound hooks: `POST /v1/hooks/<system>` (src/request/http/hooks-route.ts) starts a run of a
 * system with `hook` set, the JSON body as its inputs. No bearer key: the request proves itself by
 * its signature, as the bridge's own webhook calls do (src/workflows/systems/executors/webhook.ts):
 *   x-clawbridge-timestamp: <unix seconds>            within 5 minutes of the bridge's clock
 *   x-clawbridge-signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>
 * compared in constant time; a signature seen in the last minutes is a replay (state.ts keeps them
 * in the store, so a replay sent to another instance on the same PostgreSQL is refused too). Each system has its own secret (hook-secret.ts) and its own rate (`perMinute`,
 * default 60; every request counts, refused ones too). Checked in this order, each refusal with its
 * status and code, and nothing runs: 404 `hook_not_found`, 429 `rate_limited`, 401
 * `missing_timestamp` / `stale_timestamp`, 401 `missing_signature` / `invalid_signature`, 409
 * `replayed_request`, 400 `invalid_body` / `invalid_inputs` (naming the input). A refusal is
 * published as `hook.refused`; a run started as `trigger.fired` (trigger `hook`).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Logger } from "pino";
import type { EventBus } from "../../ops/events/bus.js";
import type { RunRecord } from "../systems/db.js";
import { checkInputs, incompleteText } from "../systems/inputs.js";
import type { SystemsLibrary } from "../systems/library.js";
import { signWebhook } from "../systems/executors/webhook.js";
import type { RunManager } from "../systems/runner.js";
import { type Clock, realClock } from "./clock.js";
import { ensureHookSecret } from "./hook-secret.js";
import type { TriggerState } from "./state.js";

/** How far a request's timestamp may be from the bridge's clock. */
export const HOOK_WINDOW_SECONDS = 300;

export interface HookRefusal {
  status: 400 | 401 | 404 | 409 | 429;
  code: string;
  message: string;
  /** The input at fault (400). */
  param?: string;
  /** Seconds until the rate allows a request again (429). */
  retryAfter?: number;
}

export type HookResult = { ok: true; run: RunRecord } | { ok: false; refusal: HookRefusal };

export interface HookDeps {
  library: SystemsLibrary;
  runs: Pick<RunManager, "start">;
  state: TriggerState;
  bus: EventBus;
  log: Logger;
  dataDir: string;
  clock?: Clock;
}

const digest = (s: string) => createHash("sha256").update(s).digest();

export class Hooks {
  private readonly clock: Clock;
  /** Each system's request times in the last minute. */
  private readonly recent = new Map<string, number[]>();

  constructor(private readonly d: HookDeps) {
    this.clock = d.clock ?? realClock;
  }

  /** Every system with a hook has a secret (made at start and after a reload). */
  ensureSecrets(): void {
    for (const s of this.d.library.systems) if (s.hook) ensureHookSecret(this.d.dataDir, s.id);
  }

  async receive(system: string, headers: { timestamp?: string; signature?: string }, raw: string): Promise<HookResult> {
    const res = await this.check(system, headers, raw);
    if (!res.ok) {
      this.d.bus.emit({ type: "hook.refused", system, status: res.refusal.status, reason: res.refusal.code });
      this.d.log.info({ system, status: res.refusal.status, code: res.refusal.code }, "hook request refused");
    } else {
      this.d.bus.emit({ type: "trigger.fired", system, trigger: "hook", runId: res.run.id });
      this.d.log.info({ system, runId: res.run.id }, "hook started a run");
    }
    return res;
  }

  private async check(
    id: string,
    headers: { timestamp?: string; signature?: string },
    raw: string,
  ): Promise<HookResult> {
    const refuse = (refusal: HookRefusal): HookResult => ({ ok: false, refusal });
    const s = this.d.library.get(id);
    if (!s?.hook)
      return refuse({
        status: 404,
        code: "hook_not_found",
        message: s
          ? `System "${id}" has no inbound hook; set \`hook: true\` on it to accept signed requests.`
          : `No system "${id}" (GET /v1/systems lists them).`,
      });
    const now = this.clock.now();
    const times = (this.recent.get(id) ?? []).filter((t) => t > now - 60_000);
    this.recent.set(id, times);
    if (times.length >= s.hook.perMinute)
      return refuse({
        status: 429,
        code: "rate_limited",
        message: `Too many requests to the hook of ${id} (at most ${s.hook.perMinute} a minute); try again later.`,
        retryAfter: Math.max(1, Math.ceil((times[0]! + 60_000 - now) / 1000)),
      });
    times.push(now);

    const ts = headers.timestamp?.trim();
    if (!ts)
      return refuse({
        status: 401,
        code: "missing_timestamp",
        message: "Send x-clawbridge-timestamp: the request's time in Unix seconds (it is part of the signed text).",
      });
    if (!/^\d{1,12}$/.test(ts) || Math.abs(now / 1000 - Number(ts)) > HOOK_WINDOW_SECONDS)
      return refuse({
        status: 401,
        code: "stale_timestamp",
        message: `x-clawbridge-timestamp must be the current time in Unix seconds, within ${HOOK_WINDOW_SECONDS / 60} minutes of the bridge's clock.`,
      });
    const sig = headers.signature?.trim();
    if (!sig)
      return refuse({
        status: 401,
        code: "missing_signature",
        message:
          'Send x-clawbridge-signature: "sha256=" and the hex HMAC-SHA256 of "<timestamp>.<body>" keyed by the hook\'s secret.',
      });
    const secret = ensureHookSecret(this.d.dataDir, id);
    // Hashed first: equal lengths for timingSafeEqual, and nothing about the expected value leaks.
    if (!timingSafeEqual(digest(sig.toLowerCase()), digest(signWebhook(secret, ts, raw))))
      return refuse({
        status: 401,
        code: "invalid_signature",
        message: `The signature does not match: sign "<timestamp>.<raw body>" with HMAC-SHA256 and the hook's secret (\`clawbridge systems hook ${id}\` shows it).`,
      });
    if (!(await this.d.state.firstSeen(id, sig.toLowerCase(), now, now - 2 * HOOK_WINDOW_SECONDS * 1000)))
      return refuse({
        status: 409,
        code: "replayed_request",
        message: "This signed request was already received; send a new timestamp and signature for each request.",
      });

    let body: unknown;
    try {
      body = raw.trim() === "" ? {} : JSON.parse(raw);
    } catch {
      return refuse({
        status: 400,
        code: "invalid_body",
        message: "The body is not valid JSON; send a JSON object of the system's inputs.",
      });
    }
    if (!body || typeof body !== "object" || Array.isArray(body))
      return refuse({ status: 400, code: "invalid_body", message: "Send a JSON object: the system's inputs." });
    const check = checkInputs(s.inputs, body as Record<string, unknown>);
    if (!check.complete) {
      const why = incompleteText(check);
      return refuse({
        status: 400,
        code: "invalid_inputs",
        message: `The inputs of ${id} are not complete: ${why.text}.`,
        ...(why.input ? { param: why.input } : {}),
      });
    }
    try {
      return {
        ok: true,
        run: await this.d.runs.start({ system: id, inputs: check.values, origin: "hook", trigger: "hook" }),
      };
    } catch (err) {
      return refuse({ status: 409, code: "run_conflict", message: (err as Error).message });
    }
  }
}
