/**
 * Fallback chains (issue 28): a model's `fallback: [model ids]`, tried in order when its backend
 * fails BEFORE ANY OUTPUT with a limit (usage, rate, quota), a refused login, or is down or missing.
 * - A backend at its limit is noted (`LimitBook`: kept in the data dir, or shared by every instance
 *   on a PostgreSQL) and skipped, without being tried, until its reset (or its `limits.backoffSeconds`).
 * - The answering model is decided before anything reaches the client: the events of each model are
 *   held until its first content (text, reasoning, a tool call) or its end; only then do they flow,
 *   with `x-clawbridge-answered-by` set and a `turn.fallback` event per switch. After output has
 *   started nothing is switched: an error then is the client's, as any other.
 * - A failure that is the request's own fault (a 4xx other than 401/408/429) never falls back.
 * - In resume mode a fallback model keeps its own session of the conversation (`Turn.onFallback`),
 *   seeded from the request's history like a healed one; the primary's session stays to go back to.
 */
import type { BackendError, BackendEvent } from "../../backends/contract/backend.js";
import type { BackendModels } from "../../core/config/schema.js";
import type { BackendLimit, LimitBook } from "../../core/store/limits.js";
import type { EventBus } from "../../ops/events/bus.js";
import type { Route } from "../models/routes.js";
import type { Turn } from "./turn.js";

/** The header that names the model that answered (the primary or a fallback). */
export const ANSWERED_BY = "x-clawbridge-answered-by";

export interface ChainDeps {
  limits: LimitBook;
  /** A backend's settings (its `limits.backoffSeconds`). */
  settings(backend: string): BackendModels | undefined;
  bus?: EventBus;
}

/** The model and then its fallbacks, as routes (ids that no longer resolve are left out). */
export function chainOf(route: Route, resolve: ((id: string) => Route | undefined) | undefined): Route[] {
  const ids = route.model.fallback;
  if (!ids.length || !resolve) return [route];
  const chain = [route];
  for (const id of ids) {
    const r = resolve(id);
    if (r) chain.push(r);
  }
  return chain;
}

/** Whether a failure before any output hands the turn to the next model. */
export function canFallBack(err: BackendError): boolean {
  switch (err.code) {
    case "limit_reached":
    case "auth_failed":
    case "backend_unavailable":
      return true;
    case "aborted":
    case "backend_timeout":
    case "backend_rejected":
    case "session_not_found":
      return false;
    default:
      // An upstream or CLI failure: the backend's (5xx), not the request's (4xx).
      return !err.status || err.status >= 500;
  }
}

/** One model of the chain that did not answer. */
interface Miss {
  route: Route;
  reason: string;
  message: string;
  resetAt?: number;
  /** When a limited backend is tried again (its reset, or the backoff). */
  until?: number;
  limited: boolean;
}

const isContent = (ev: BackendEvent): boolean =>
  (ev.type === "text" && ev.text.length > 0) || ev.type === "reasoning" || ev.type === "tool_call";

/** Note a backend's limit (and say so on the bus). */
export function noteLimit(deps: ChainDeps, backend: string, err: BackendError): BackendLimit {
  const backoff = deps.settings(backend)?.limits.backoffSeconds ?? 300;
  const l = deps.limits.hit(backend, err.message, err.resetAt, backoff);
  deps.bus?.emit({
    type: "backend.limited",
    backend,
    message: err.message,
    ...(l.resetAt ? { resetAt: l.resetAt } : {}),
    until: l.until,
  });
  return l;
}

/**
 * The turn answered by the first model of `chain` that can (see the file header). `answer` runs
 * the turn on one route; `switched` is told when another model takes the turn (the deadline is
 * re-armed for its backend).
 */
export async function* runChain(
  turn: Turn,
  chain: readonly Route[],
  opts: {
    deps: ChainDeps;
    answer(t: Turn): AsyncIterable<BackendEvent>;
    switched(t: Turn): void;
    headers: Record<string, string>;
    /** A model after the first answered the turn to its end. */
    answered?(t: Turn): void;
  },
): AsyncGenerator<BackendEvent> {
  const { deps, headers } = opts;
  const misses: Miss[] = [];
  for (let i = 0; i < chain.length; i++) {
    const route = chain[i]!;
    const last = i === chain.length - 1;
    const limit = deps.limits.exhausted(route.backend.name);
    if (limit) {
      misses.push({
        route,
        reason: "exhausted",
        message: limit.message,
        ...(limit.resetAt ? { resetAt: limit.resetAt } : {}),
        until: limit.until,
        limited: true,
      });
      turn.log.info(
        { backend: route.backend.name, until: new Date(limit.until).toISOString() },
        "backend at its limit: skipped",
      );
      continue;
    }
    const t = i === 0 ? turn : turn.onFallback(route);
    if (misses.length) {
      const from = misses.at(-1)!;
      opts.switched(t);
      turn.log.info(
        { from: from.route.model.id, to: route.model.id, reason: from.reason },
        "turn handed to the next model of its fallback chain",
      );
      deps.bus?.emit({
        type: "turn.fallback",
        turnId: turn.requestId,
        conversation: turn.conversation.key,
        model: turn.route.model.id,
        fromModel: from.route.model.id,
        fromBackend: from.route.backend.name,
        to: route.model.id,
        toBackend: route.backend.name,
        reason: from.reason,
        ...(from.resetAt ? { resetAt: from.resetAt } : {}),
      });
    }
    const held: BackendEvent[] = [];
    let decided = false;
    let failure: BackendError | undefined;
    for await (const ev of opts.answer(t)) {
      if (!decided) {
        if (ev.type === "error" && !last && canFallBack(ev.error)) {
          failure = ev.error;
          break;
        }
        if (!isContent(ev) && ev.type !== "done" && ev.type !== "error") {
          held.push(ev);
          continue;
        }
        decided = true;
        if (ev.type === "error" && ev.error.code === "limit_reached") noteLimit(deps, route.backend.name, ev.error);
        headers[ANSWERED_BY] = route.model.id;
        if (ev.type === "error" && misses.length) {
          yield { type: "error", error: chainError(turn, misses, route, ev.error) };
          return;
        }
        if (misses.length && turn.route.model.fallbackNotice)
          yield { type: "text", text: notice(turn.route, misses, route) };
        for (const h of held) yield h;
      }
      if (ev.type === "done") {
        deps.limits.clear(route.backend.name);
        if (i > 0) opts.answered?.(t);
      }
      yield ev;
    }
    if (decided) return;
    if (!failure) {
      // The model's events ended without a word: its own contract answers that (empty success is
      // impossible there), so this is only reached when the client went away.
      for (const h of held) yield h;
      return;
    }
    const limited = failure.code === "limit_reached";
    const noted = limited ? noteLimit(deps, route.backend.name, failure) : undefined;
    misses.push({
      route,
      reason: failure.code,
      message: failure.message,
      ...(noted?.resetAt ? { resetAt: noted.resetAt } : {}),
      ...(noted ? { until: noted.until } : {}),
      limited,
    });
  }
  // Every model was skipped or failed.
  const final = misses.at(-1)!;
  yield {
    type: "error",
    error: chainError(turn, misses.slice(0, -1), final.route, {
      code: final.limited ? "limit_reached" : "backend_unavailable",
      message: final.message,
      status: final.limited ? 429 : 503,
      retryable: true,
      ...(final.until ? { resetAt: final.until } : {}),
    }),
  };
}

/**
 * The error when no model of the chain answered: every model named with what happened (and its
 * reset); when all were at their limit, a 429 whose `resetAt` is the earliest reset.
 */
function chainError(turn: Turn, misses: readonly Miss[], lastRoute: Route, lastError: BackendError): BackendError {
  const all: Miss[] = [
    ...misses,
    {
      route: lastRoute,
      reason: lastError.code,
      message: lastError.message,
      ...(lastError.resetAt ? { resetAt: lastError.resetAt, until: lastError.resetAt } : {}),
      limited: lastError.code === "limit_reached",
    },
  ];
  if (all.length === 1) return lastError;
  const allLimited = all.every((m) => m.limited);
  const resets = all.map((m) => m.until ?? m.resetAt).filter((x): x is number => !!x);
  const parts = all.map(
    (m) =>
      `${m.route.model.id} (${m.route.backend.name}): ${m.limited ? "at its limit" : m.reason}${m.resetAt ? ` until ${new Date(m.resetAt).toISOString()}` : ""} — ${m.message}`,
  );
  const earliest = resets.length ? Math.min(...resets) : undefined;
  return {
    code: allLimited ? "limit_reached" : lastError.code,
    message: `no model of ${turn.route.model.id}'s fallback chain could answer: ${parts.join("; ")}`,
    status: allLimited ? 429 : (lastError.status ?? 502),
    retryable: true,
    ...(allLimited && earliest ? { resetAt: earliest } : {}),
  };
}

/** "(Claude is at its limit until 04:20; Gemini answered.)" */
function notice(primary: Route, misses: readonly Miss[], answered: Route): string {
  const first = misses.find((m) => m.route === primary) ?? misses[0]!;
  const what = first.limited
    ? `is at its limit${first.resetAt ? ` until ${hhmm(first.resetAt)}` : ""}`
    : first.reason === "auth_failed"
      ? "needs a new login"
      : "is unavailable";
  return `(${first.route.model.name} ${what}; ${answered.model.name} answered.)\n\n`;
}

function hhmm(ms: number): string {
  const d = new Date(ms);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

/** The 429 when every model of a chain is at its limit before anything is tried, or undefined. */
export function allExhausted(
  chain: readonly Route[],
  limits: LimitBook,
): { message: string; retryAfterSeconds: number } | undefined {
  const found = chain.map((r) => ({ r, l: limits.exhausted(r.backend.name) }));
  if (found.some((f) => !f.l)) return undefined;
  const until = Math.min(...found.map((f) => f.l!.resetAt ?? f.l!.until));
  const names = found.map(
    (f) =>
      `${f.r.model.id} (${f.r.backend.name}) until ${new Date(f.l!.resetAt ?? f.l!.until).toISOString()}: ${f.l!.message}`,
  );
  return {
    message: `${chain.length > 1 ? "every model of the fallback chain is" : "the model's backend is"} at its limit: ${names.join("; ")}`,
    retryAfterSeconds: Math.max(1, Math.ceil((until - Date.now()) / 1000)),
  };
}
