/**
 * "Limit reached" and "login refused", recognised the same way for every backend (issue 28).
 *
 * Pure functions: given what a CLI or an upstream said when a turn failed (its final error text,
 * the stderr, or an HTTP status with body and headers) and `now`, say whether it was a usage,
 * rate or quota limit, or a refused login, with when the limit resets when it said so. The
 * backends turn a finding into ONE error event of the contract (`limitError`): `limit_reached`
 * (429, retryable, `resetAt`) or `auth_failed` (401). Everything else stays as each backend
 * classified it before.
 *
 * The messages, where each was found and how the reset time is read: docs/CLI_FORMATS.md,
 * "Limit messages". In short:
 * - Claude Code (2.1.197, its bundle): `You've hit your session limit · resets 4:20am (Europe/Warsaw)`,
 *   `… weekly limit · resets Dec 1, 7:35am (UTC)`, `Opus limit`, `Sonnet limit`, `monthly spend limit`,
 *   `You're out of usage credits`, older `Claude AI usage limit reached|<unix seconds>`; the API's
 *   `rate_limit_error` (`API Error: Request rejected (429) · …`); auth: `Invalid API key · …`,
 *   `Not logged in · Please run /login`, `OAuth token has expired`, `OAuth token revoked`.
 * - Gemini CLI (0.61.0): `You have exhausted your daily quota on this model.`, `Quota exceeded for
 *   (quota )?metric …`, `RESOURCE_EXHAUSTED`, `Please retry in 37.5s`, `Suggested retry after 3600s.`;
 *   auth: `API key not valid`, `UNAUTHENTICATED`.
 * - Codex (0.169.0): `You’ve hit your usage limit. … try again at 6:37 AM.` (the CLI's local time),
 *   `Quota exceeded. Check your plan and billing details.`, `usage_limit_reached` bodies with
 *   `resets_at` / `resets_in_seconds`, `exceeded retry limit, last status: 429 …`; auth:
 *   `unexpected status 401 …`, `… refresh token has expired. Please log out and sign in again.`
 * - Qwen Code (0.15.10): `Qwen OAuth quota exceeded: …`, `Qwen OAuth free tier has been discontinued`,
 *   `Free allocated quota exceeded`, `[API Error: …]` + `Possible quota limitations in place …`.
 * - OpenCode / OpenAI-compatible upstreams: 429, 402, `insufficient_quota`, `rate_limit_exceeded`,
 *   `Retry-After` (seconds or an HTTP date), `retry-after-ms`, `x-ratelimit-reset-*` ("6m0s"),
 *   `anthropic-ratelimit-*-reset` (RFC 3339) and `anthropic-ratelimit-unified-reset` (unix seconds).
 */
import type { BackendError } from "../contract/backend.js";

export type LimitKind = "usage" | "rate" | "quota" | "auth";

export interface LimitFinding {
  kind: LimitKind;
  /** When the limit resets (ms since the epoch), when the CLI or upstream said. */
  resetAt?: number;
  /** The CLI's or upstream's own words (one line, secrets masked, bounded). */
  words: string;
}

export interface TextContext {
  /** The clock (ms since the epoch) a relative or wall-clock reset time is read against. */
  now: number;
  /** The model API's HTTP status when the CLI reported it apart from the text. */
  status?: number;
  /**
   * The zone a wall-clock time without a zone is in (Codex prints the CLI's local time): an IANA
   * name, or undefined for this process's own zone.
   */
  timeZone?: string;
}

/** Header values as Node (`IncomingHttpHeaders`), undici or a fetch `Headers` give them. */
export type HeaderBag =
  | Record<string, string | string[] | undefined>
  | { get(name: string): string | null }
  | undefined;

// ---------------------------------------------------------------------------------------------
// Text

const APOS = "['’]";
/** Claude Code's subscription messages (`hJ` / `xfp` in its bundle): the limit's name, then ` · resets …`. */
const CLAUDE_HIT = new RegExp(`You${APOS}ve hit your ((?:[\\w'’]+ ){0,3}?(?:limit|spend limit))\\b`, "i");
const CLAUDE_OUT = /You're out of usage credits|Your org is out of usage|usage allocation has been disabled/i;
const CLAUDE_OLD = /Claude AI usage limit reached\|(\d{9,13})/i;
const CLAUDE_RESETS = /\bresets (?:at )?([^·\n]+?)(?:\s*·|\s*$|\n)/i;
const CLAUDE_RESETS_IN = /\bresets in ((?:\d+\s*[dhms]\w*\s*)+)/i;

/** Codex's `UsageLimitReachedError` and friends (codex-rs/core/src/error.rs). */
const CODEX_USAGE = new RegExp(`You${APOS}ve hit your usage limit`, "i");
const CODEX_TRY_AGAIN = /try again at ([^\n]+?)\.?(?:\s*$|\n)/i;

const AUTH_WORDS: RegExp[] = [
  /Invalid API key/i,
  /Incorrect API key/i,
  /invalid[_ ]api[_ ]key/i,
  /API key not valid/i,
  /API_KEY_INVALID/,
  /Not logged in/i,
  /Please run \/login/i,
  /OAuth token (?:has )?(?:expired|been revoked|revoked)/i,
  /authentication_error/,
  /\bUNAUTHENTICATED\b/,
  /invalid authentication credentials/i,
  /refresh token (?:has expired|was already used|was revoked|was rejected)/i,
  /(?:log out and )?sign in again/i,
  /\bunexpected status 401\b/i,
  /\b401 Unauthorized\b/i,
];

interface Rule {
  re: RegExp;
  kind: Exclude<LimitKind, "auth">;
}

/** Limit words, the most specific first. */
const LIMIT_WORDS: Rule[] = [
  { re: /Qwen OAuth quota exceeded|Qwen OAuth free tier has been discontinued/i, kind: "quota" },
  { re: /Free allocated quota exceeded/i, kind: "quota" },
  { re: /exhausted your daily quota/i, kind: "quota" },
  { re: /Quota exceeded for (?:quota )?metric/i, kind: "quota" },
  { re: /exceeded your current quota|insufficient_quota|Quota exceeded\. Check your plan/i, kind: "quota" },
  { re: /To use Codex with your ChatGPT plan, upgrade/i, kind: "quota" },
  { re: /FreeUsageLimitError|Free usage exceeded/i, kind: "quota" },
  { re: /usage_limit_reached|usage limit (?:reached|exceeded)|\busageLimitExceeded\b/i, kind: "usage" },
  {
    re: /rate_limit_error|rate_limit_exceeded|rateLimitExceeded|rate[ -]limit(?:ed| reached| exceeded)?\b/i,
    kind: "rate",
  },
  { re: /Request rejected \(429\)|\b429 Too Many Requests\b|Too Many Requests|last status: 429/i, kind: "rate" },
  { re: /\bRESOURCE_EXHAUSTED\b|Resource has been exhausted|exhausted your capacity/i, kind: "rate" },
  { re: /Possible quota limitations in place/i, kind: "rate" },
];

/**
 * What a CLI's final error text (or its stderr) says, if it is a limit or a refused login.
 * `ctx.status` (the model API's status, when known) makes a 429 a rate limit and a 401 a login
 * failure even without the words.
 */
export function recogniseLimitText(text: string, ctx: TextContext): LimitFinding | undefined {
  if (!text) return undefined;
  const { now } = ctx;

  // Claude Code's subscription limits: the most exact wording first.
  const hit = CLAUDE_HIT.exec(text);
  if (hit && !CODEX_USAGE.test(text)) {
    const what = hit[1]!.toLowerCase();
    return finding(/spend/.test(what) ? "quota" : "usage", claudeReset(text, now), line(text, hit.index));
  }
  if (CLAUDE_OUT.test(text)) return finding("quota", claudeReset(text, now), line(text, text.search(CLAUDE_OUT)));
  const old = CLAUDE_OLD.exec(text);
  if (old) return finding("usage", epochOf(Number(old[1])), line(text, old.index));

  // Codex's usage limit: a local wall-clock time (the CLI's zone), maybe with a date.
  if (CODEX_USAGE.test(text)) {
    const m = CODEX_TRY_AGAIN.exec(text);
    const resetAt = (m ? parseWallClock(m[1]!, now, ctx.timeZone) : undefined) ?? bodyReset(text, now);
    return finding("usage", resetAt, line(text, text.search(CODEX_USAGE)));
  }

  if (ctx.status === 401 || AUTH_WORDS.some((re) => re.test(text))) {
    // "401" in a limit text (a quota body quoting a status) does not make it a login failure.
    if (ctx.status === 401 || !LIMIT_WORDS.some((r) => r.re.test(text)))
      return finding("auth", undefined, line(text, firstIndex(text, AUTH_WORDS)));
  }
  for (const r of LIMIT_WORDS) {
    const m = r.re.exec(text);
    if (m) return finding(r.kind, bodyReset(text, now), line(text, m.index));
  }
  if (ctx.status === 429) return finding("rate", bodyReset(text, now), line(text, 0));
  if (ctx.status === 402) return finding("quota", bodyReset(text, now), line(text, 0));
  return undefined;
}

/**
 * What an upstream's HTTP error answer says (the openai backend, OpenCode's `APIError` with its
 * response headers and body): 429 and 402 are limits, 401 and 403 refused keys; a body's words
 * (`insufficient_quota`...) count on any status. The reset comes from the headers, else the body.
 */
export function recogniseHttpLimit(
  status: number,
  body: string,
  headers: HeaderBag,
  now: number,
): LimitFinding | undefined {
  const words = upstreamWords(body) || `HTTP ${status}`;
  if (status === 401 || status === 403) return finding("auth", undefined, words);
  const fromText = recogniseLimitText(body, { now, ...(status === 429 || status === 402 ? { status } : {}) });
  if (!fromText && status !== 429 && status !== 402) return undefined;
  if (fromText?.kind === "auth") return status === 429 ? finding("rate", headerReset(headers, now), words) : fromText;
  const kind = fromText?.kind ?? (status === 402 ? "quota" : "rate");
  const resetAt = headerReset(headers, now) ?? fromText?.resetAt;
  return finding(kind, resetAt, words);
}

/**
 * A rate limit that clears within `seconds` (a local server's full queue, a per-second limit):
 * the same backend may simply be tried again, so the backends keep it a retryable 429
 * `upstream_error` rather than a limit the pipeline would skip the backend for.
 */
export function isMomentary(f: LimitFinding, now: number, seconds = 10): boolean {
  return f.kind === "rate" && f.resetAt !== undefined && f.resetAt - now <= seconds * 1000;
}

/**
 * The one error event a finding becomes: `<backend>: <its own words>` (the code says what it is),
 * `limit_reached` 429 retryable with `resetAt` when known, or `auth_failed` 401.
 */
export function limitError(label: string, f: LimitFinding): BackendError {
  if (f.kind === "auth") return { code: "auth_failed", message: `${label}: ${f.words}`, status: 401, retryable: false };
  return {
    code: "limit_reached",
    message: `${label}: ${f.words}`,
    status: 429,
    retryable: true,
    ...(f.resetAt !== undefined ? { resetAt: f.resetAt } : {}),
  };
}

/** `recogniseLimitText` → `limitError`, or undefined: the backends' one-liner. */
export function limitErrorOf(label: string, text: string, ctx: TextContext): BackendError | undefined {
  const f = recogniseLimitText(text, ctx);
  return f ? limitError(label, f) : undefined;
}

// ---------------------------------------------------------------------------------------------
// Reset times

/** Claude Code's ` · resets 4:20am (Europe/Warsaw)` / `resets Dec 1, 7:35am (UTC)` / `resets in 2h 5m`. */
function claudeReset(text: string, now: number): number | undefined {
  const rel = CLAUDE_RESETS_IN.exec(text);
  if (rel) {
    const s = durationSeconds(rel[1]!);
    if (s !== undefined) return now + s * 1000;
  }
  const m = CLAUDE_RESETS.exec(text);
  if (!m) return undefined;
  const zone = /\(([A-Za-z_]+(?:\/[A-Za-z0-9_+-]+)*|UTC|GMT)\)\s*$/.exec(m[1]!.trim());
  const when = zone ? m[1]!.trim().slice(0, zone.index).trim() : m[1]!.trim();
  return parseWallClock(when, now, zone ? zone[1] : undefined);
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/**
 * A wall-clock time as the CLIs print it, in `timeZone` (undefined: this process's zone), as ms
 * since the epoch: `4:20am`, `4am`, `6:37 AM`, `16:20`, with an optional date before it
 * (`Dec 1, 7:35am`, `Dec 1, 2027, 7am`, `Dec 29th, 2025 10:15 PM`). Without a date: the next
 * such time after `now` (a minute of grace for a time just printed). With a date but no year: this
 * year, or the next when that is well past.
 */
export function parseWallClock(s: string, now: number, timeZone?: string): number | undefined {
  const zone = validZone(timeZone);
  if (zone === null) return undefined;
  const t = /(\d{1,2})(?::(\d{2}))?\s*([ap])\.?\s?m\.?\b|(\d{1,2}):(\d{2})(?!\s*[ap]\.?m)/i.exec(s);
  if (!t) return undefined;
  let hour: number;
  let minute: number;
  if (t[3]) {
    hour = Number(t[1]) % 12;
    if (t[3].toLowerCase() === "p") hour += 12;
    minute = Number(t[2] ?? 0);
  } else {
    hour = Number(t[4]);
    minute = Number(t[5]);
  }
  if (hour > 23 || minute > 59) return undefined;
  const today = zonedParts(now, zone);
  const d =
    /\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(\d{4}))?/i.exec(
      s.slice(0, t.index),
    );
  if (d) {
    const month = MONTHS.indexOf(d[1]!.toLowerCase()) + 1;
    const day = Number(d[2]);
    if (d[3]) return zonedToEpoch(Number(d[3]), month, day, hour, minute, zone);
    const at = zonedToEpoch(today.year, month, day, hour, minute, zone);
    return at < now - 86_400_000 ? zonedToEpoch(today.year + 1, month, day, hour, minute, zone) : at;
  }
  let at = zonedToEpoch(today.year, today.month, today.day, hour, minute, zone);
  if (at < now - 60_000) {
    // Tomorrow's date: today's noon + 24 h lands on it whatever a DST change does.
    const next = zonedParts(zonedToEpoch(today.year, today.month, today.day, 12, 0, zone) + 86_400_000, zone);
    at = zonedToEpoch(next.year, next.month, next.day, hour, minute, zone);
  }
  return at;
}

/** A reset the words of a body or message carry: unix times, seconds, Google's retry delays. */
function bodyReset(text: string, now: number): number | undefined {
  const at = /"?resets?_at"?\s*[:=]\s*"?(\d{9,13})/i.exec(text);
  if (at) return epochOf(Number(at[1]));
  const atIso = /"?resets?_at"?\s*[:=]\s*"(\d{4}-\d{2}-\d{2}T[^"]+)"/i.exec(text);
  if (atIso && !Number.isNaN(Date.parse(atIso[1]!))) return Date.parse(atIso[1]!);
  const inS = /"?resets?_in_seconds"?\s*[:=]\s*(\d+(?:\.\d+)?)/i.exec(text);
  if (inS) return now + Number(inS[1]) * 1000;
  const suggested = /Suggested retry after (\d+(?:\.\d+)?(?:ms|s))/i.exec(text);
  const retryIn = /(?:Please )?retry in (\d+(?:\.\d+)?(?:ms|s))\b/i.exec(text);
  const delay = /"retryDelay"\s*:\s*"(\d+(?:\.\d+)?s)"/.exec(text);
  const d = suggested?.[1] ?? delay?.[1] ?? retryIn?.[1];
  if (d) {
    const s = durationSeconds(d);
    if (s !== undefined) return now + s * 1000;
  }
  const tryIn = /try again in (\d+(?:\.\d+)?)\s*(ms|s|seconds?|m|minutes?|h|hours?)\b/i.exec(text);
  if (tryIn) {
    const n = Number(tryIn[1]);
    const unit = tryIn[2]!.toLowerCase();
    const ms = unit === "ms" ? n : unit.startsWith("s") ? n * 1000 : unit.startsWith("m") ? n * 60_000 : n * 3_600_000;
    return now + Math.round(ms);
  }
  return undefined;
}

/** The reset an HTTP answer's headers give, the latest of those that apply. */
export function headerReset(headers: HeaderBag, now: number): number | undefined {
  const get = (name: string): string | undefined => {
    if (!headers) return undefined;
    if (typeof (headers as { get?: unknown }).get === "function") {
      const v = (headers as { get(n: string): string | null }).get(name);
      return v ?? undefined;
    }
    const v = (headers as Record<string, string | string[] | undefined>)[name];
    return Array.isArray(v) ? v[0] : v;
  };
  const ms = get("retry-after-ms");
  if (ms && /^\d+(\.\d+)?$/.test(ms.trim())) return now + Math.ceil(Number(ms));
  const ra = get("retry-after")?.trim();
  if (ra) {
    if (/^\d+(\.\d+)?$/.test(ra)) return now + Number(ra) * 1000;
    const when = Date.parse(ra);
    if (!Number.isNaN(when)) return when;
  }
  const unified = get("anthropic-ratelimit-unified-reset");
  if (unified && /^\d{9,13}$/.test(unified.trim())) return epochOf(Number(unified));
  const resets: number[] = [];
  for (const kind of ["requests", "tokens", "input-tokens", "output-tokens"]) {
    const a = get(`anthropic-ratelimit-${kind}-reset`);
    const remaining = get(`anthropic-ratelimit-${kind}-remaining`);
    if (a && !Number.isNaN(Date.parse(a)) && remaining !== undefined && Number(remaining) === 0)
      resets.push(Date.parse(a));
    const o = get(`x-ratelimit-reset-${kind}`);
    const left = get(`x-ratelimit-remaining-${kind}`);
    if (o && (left === undefined || Number(left) === 0)) {
      const s = durationSeconds(o);
      if (s !== undefined) resets.push(now + s * 1000);
    }
  }
  const plain = get("x-ratelimit-reset");
  if (plain && /^\d+(\.\d+)?$/.test(plain.trim())) {
    const n = Number(plain);
    resets.push(n > 1e9 ? epochOf(n) : now + n * 1000);
  }
  return resets.length ? Math.max(...resets) : undefined;
}

/** `37.5s`, `20ms`, `6m0s`, `1h2m3s`, `2h 5m`, `3600` (seconds) → seconds. */
export function durationSeconds(s: string): number | undefined {
  const t = s.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return Number(t);
  let total = 0;
  let any = false;
  for (const m of t.matchAll(/(\d+(?:\.\d+)?)\s*(ms|d|h|m(?!s)|s)[a-z]*/gi)) {
    any = true;
    const n = Number(m[1]);
    const u = m[2]!.toLowerCase();
    total += u === "ms" ? n / 1000 : u === "d" ? n * 86400 : u === "h" ? n * 3600 : u === "m" ? n * 60 : n;
  }
  return any ? total : undefined;
}

/** Seconds or milliseconds since the epoch → ms. */
function epochOf(n: number): number {
  return n < 1e11 ? n * 1000 : n;
}

// ---------------------------------------------------------------------------------------------
// Time zones (Intl only)

/** The zone if Intl knows it; undefined stays undefined (this process's zone); null: unknown. */
function validZone(z: string | undefined): string | undefined | null {
  if (!z) return undefined;
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: z });
    return z;
  } catch {
    return null;
  }
}

const formats = new Map<string, Intl.DateTimeFormat>();

function zonedParts(t: number, zone: string | undefined) {
  const key = zone ?? "";
  let f = formats.get(key);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", {
      ...(zone ? { timeZone: zone } : {}),
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    formats.set(key, f);
  }
  const p: Record<string, number> = {};
  for (const part of f.formatToParts(new Date(t))) if (part.type !== "literal") p[part.type] = Number(part.value);
  return {
    year: p.year!,
    month: p.month!,
    day: p.day!,
    hour: p.hour! % 24,
    minute: p.minute!,
    second: p.second!,
  };
}

/** The zone's offset from UTC at instant `t`, in ms. */
function zoneOffset(t: number, zone: string | undefined): number {
  const p = zonedParts(t, zone);
  return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) - Math.floor(t / 1000) * 1000;
}

/** A wall-clock time in `zone` → the instant (the later one in a DST overlap, the shifted one in a gap). */
export function zonedToEpoch(
  year: number,
  month: number,
  day: number,
  hour: number,
  minute: number,
  zone: string | undefined,
): number {
  const guess = Date.UTC(year, month - 1, day, hour, minute);
  const first = guess - zoneOffset(guess, zone);
  return guess - zoneOffset(first, zone);
}

// ---------------------------------------------------------------------------------------------
// Words

function finding(kind: LimitKind, resetAt: number | undefined, words: string): LimitFinding {
  return { kind, ...(resetAt !== undefined && Number.isFinite(resetAt) ? { resetAt } : {}), words };
}

function firstIndex(text: string, res: RegExp[]): number {
  let best = -1;
  for (const re of res) {
    const i = text.search(re);
    if (i >= 0 && (best < 0 || i < best)) best = i;
  }
  return Math.max(0, best);
}

/**
 * The words around `at`, one line, masked and bounded: the whole text when the match is near its
 * start (a CLI's error message), else from the start of the match's line (a long stderr).
 */
export function line(text: string, at: number): string {
  const start = at < 250 ? 0 : Math.max(0, text.lastIndexOf("\n", Math.max(0, at - 1)) + 1);
  const from = at - start > 250 ? at : start;
  const flat = text
    .slice(from)
    .replace(/\s*\n\s*/g, " ")
    .replace(/,? url: \S+/g, "")
    .trim();
  return mask(flat.length > 300 ? `${flat.slice(0, 300)}…` : flat);
}

/** Keys and tokens a message may quote (OpenAI echoes part of a wrong key) → masked. */
export function mask(s: string): string {
  return s
    .replace(/\b(sk-(?:ant-|proj-)?)[A-Za-z0-9_*-]{6,}/g, "$1…")
    .replace(/\bAIza[0-9A-Za-z_-]{10,}/g, "AIza…")
    .replace(/\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi, "$1…")
    .replace(/(Incorrect API key provided: )\S+/i, "$1…");
}

/** An upstream error body → its own message (OpenAI, Anthropic, Google shapes, or text), one line, masked. */
function upstreamWords(body: string): string {
  const text = body.trim();
  if (!text) return "";
  try {
    const j = JSON.parse(text) as unknown;
    const o = (Array.isArray(j) ? j[0] : j) as { error?: unknown; message?: unknown } | undefined;
    const e = o && typeof o.error === "object" && o.error ? (o.error as { message?: unknown }) : o;
    if (typeof o?.error === "string") return line(o.error, 0);
    if (e && typeof e.message === "string") return line(e.message, 0);
  } catch {
    // not JSON: the text
  }
  return line(text, 0);
}
