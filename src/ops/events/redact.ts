/**
 * What a watcher of `GET /v1/events` may see of an event: the redaction policy, and the event's
 * JSON (the `data:` line of its SSE frame, made by src/ops/events/hub.ts).
 *
 * Redaction (unless `includeText`): what a watcher sees is WHO and WHAT, never the words.
 * 1. Kept: `type`, `at`, every number and boolean, and the identifying fields (KEEP: ids, names,
 *    statuses and codes — `turnId`, `runId`, `origin`, `conversation`, `model`, `backend`,
 *    `system`, `step`, `tools`, `collected`, `missing`, `action`, `status`, `code`,
 *    `finishReason`…), plus `turn.aborted.reason`, `backend.health.detail` (the bridge's own
 *    words), `turn.fallback`'s models, backends and reason (an error code) and
 *    `approval.decided`'s `decision` and `by`.
 * 2. A canvas node keeps `id`, `type`, `label`, `position` and `parent`; its `properties` keep
 *    their names and their number and boolean values, every other value (`prompt`, `system`,
 *    `headers`, `setEnv`, `url`, `command`…) is replaced. An edge keeps `id`, `from`, `to`.
 * 3. Everything else — prompts, answer and output text (`run.output.text`), step outputs, error
 *   messages and reasons that may quote a prompt (`message`, `error`, `reason`) — is replaced by
 *   `"[redacted: N chars]"` (N: the text's length, or its JSON's for a structured value).
 * With `includeText: true` events are streamed as published, except that a string longer than
 * MAX_TEXT_CHARS is cut (`…[+N chars]`) so the ring stays bounded. Either way the stream adds
 * `instance`, the id of the bridge that published the event.
 */
import type { BridgeEvent, BridgeEventType } from "../../wire/events.js";

/** With `includeText`, longer strings are cut (the ring holds at most ringSize events). */
export const MAX_TEXT_CHARS = 32 * 1024;

/** Fields kept as they are (ids, names, statuses, codes). */
const KEEP = new Set([
  "type",
  "at",
  "turnId",
  "runId",
  "origin",
  "conversation",
  "model",
  "backend",
  "answeredBy",
  "mode",
  "system",
  "step",
  "failedStep",
  "name",
  "key",
  "nodeId",
  "edgeId",
  "inputsHash",
  "action",
  "source",
  "state",
  "status",
  "code",
  "finishReason",
  "scope",
  "tools",
  "collected",
  "missing",
]);
/** Fields kept for one event type only: the bridge's own words. */
const KEEP_FOR: Partial<Record<BridgeEventType, ReadonlySet<string>>> = {
  "turn.aborted": new Set(["reason"]),
  "backend.health": new Set(["detail"]),
  // Which model handed the turn to which, and the error code why (the limit's words stay out).
  "turn.fallback": new Set(["fromModel", "fromBackend", "to", "toBackend", "reason"]),
  // Why a model did not get the person's images: the bridge's own words.
  "turn.images": new Set(["reason"]),
  // An approval's decision and who took it (`http`, `chat`, `timeout`); its note stays out.
  "approval.decided": new Set(["decision", "by"]),
};
const NODE_KEEP = new Set(["id", "type", "label", "position", "parent"]);
const EDGE_KEEP = new Set(["id", "from", "to"]);

/** A value replaced: numbers, booleans and null stay, text and structures say how long they were. */
function replaced(v: unknown): unknown {
  if (v === null || v === undefined || typeof v === "number" || typeof v === "boolean") return v;
  if (typeof v === "string") return `[redacted: ${v.length} chars]`;
  let n = 0;
  try {
    n = JSON.stringify(v)?.length ?? 0;
  } catch {
    /* a cycle: its length is unknown */
  }
  return `[redacted: ${n} chars]`;
}

function keepOnly(obj: unknown, keep: ReadonlySet<string>, inner?: (key: string, v: unknown) => unknown): unknown {
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) return replaced(obj);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = keep.has(k) ? v : inner ? inner(k, v) : replaced(v);
  return out;
}

/** A node's properties: their names, numbers and booleans; every other value replaced. */
function properties(_k: string, v: unknown): unknown {
  if (_k !== "properties") return replaced(v);
  if (!v || typeof v !== "object" || Array.isArray(v)) return replaced(v);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = replaced(x);
  return out;
}

/** The event as a watcher may see it without `includeText` (the rule at the top of this file). */
export function redact(ev: BridgeEvent): Record<string, unknown> {
  const extra = KEEP_FOR[ev.type];
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(ev)) {
    if (KEEP.has(k) || extra?.has(k)) out[k] = v;
    else if (k === "node") out[k] = keepOnly(v, NODE_KEEP, properties);
    else if (k === "edge") out[k] = keepOnly(v, EDGE_KEEP);
    else out[k] = replaced(v);
  }
  return out;
}

const clipLong = (_k: string, v: unknown) =>
  typeof v === "string" && v.length > MAX_TEXT_CHARS
    ? `${v.slice(0, MAX_TEXT_CHARS)}…[+${v.length - MAX_TEXT_CHARS} chars]`
    : v;

/** `data:` of a frame: one line (JSON escapes every newline). */
function json(v: unknown, clip: boolean): string {
  try {
    return JSON.stringify(v, clip ? clipLong : undefined);
  } catch {
    return JSON.stringify({ type: (v as { type?: unknown }).type, error: "[unserialisable event]" });
  }
}

/**
 * The event's `data:` as a watcher sees it: redacted, or (with `includeText`) whole with long
 * strings cut; with `instance` (the id of the bridge that published it) when given.
 */
export function eventData(ev: BridgeEvent, includeText: boolean, instance?: string): string {
  const shown = includeText ? ev : redact(ev);
  return json(instance === undefined ? shown : { ...shown, instance }, includeText);
}
