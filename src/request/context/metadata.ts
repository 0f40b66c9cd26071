/**
 * OpenClaw wraps what the person typed in metadata: a timestamp prefix (`[Sat 2026-11-21 09:13 UTC] `),
 * "Conversation info (untrusted metadata):" / "Sender (untrusted metadata):" JSON blocks,
 * `[message_id: …]` lines, and whole messages of `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` blocks
 * (often the LAST user message). This module recovers the person's own words.
 */
import { contentText, type ChatMessage } from "../chat-api/schema.js";

const DAY = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*";
/** `[Sat 2026-11-21 09:13 UTC] `, `[Sat 2026-04-11 08:32 GMT+1] `, `[2026-11-21 09:13:05 +02:00]` */
const TIMESTAMP_PREFIX = new RegExp(
  `^\\[(?:${DAY},? )?\\d{4}-\\d{2}-\\d{2}[ T]\\d{2}:\\d{2}(?::\\d{2})?(?: ?(?:[A-Z]{2,5}(?:[+-]\\d{1,2}(?::?\\d{2})?)?|[+-]\\d{2}:?\\d{2}|Z))?\\]\\s*`,
);
/** `Conversation info (untrusted metadata):` followed by a fenced block. */
const UNTRUSTED_BLOCK = /^[A-Z][\w /-]{0,60}\(untrusted[^)\n]*\):[ \t]*\n```[a-z]*\n[\s\S]*?\n```[ \t]*(?:\n|$)/;
const MESSAGE_ID_LINE = /^\[message_id: [^\]\n]*\][ \t]*(?:\n|$)/;
const INTERNAL_BLOCK = /<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>[\s\S]*?(?:<<<END_OPENCLAW_INTERNAL_CONTEXT>>>|$)/g;
/** OpenClaw's `Runtime: agent=main | session=agent:main:main | sessionId=<uuid> | …` line. */
/** Only OpenClaw's `key=value | key=value` form: a person's "Runtime: 155 minutes" is kept. */
const RUNTIME_BODY = "[\\w.-]+=[^|\\n]*(?:\\|\\s*[\\w.-]+=[^|\\n]*)*";
const RUNTIME_LINE = new RegExp(`^Runtime: ${RUNTIME_BODY}(?:\\n|$)`, "gm");
const RUNTIME_AT_START = new RegExp(`^Runtime: ${RUNTIME_BODY}(?:\\n|$)`);

/** Remove OpenClaw's metadata wrappers from one user text. Idempotent. */
export function stripMetadata(text: string): string {
  let out = text.replace(/\r\n/g, "\n").replace(INTERNAL_BLOCK, "");
  // Wrappers stack at the start in any order; peel them until none is left (bounded). OpenClaw
  // adds ONE timestamp: a second one is the person's own text (a pasted log line).
  let stampRemoved = false;
  for (let i = 0; i < 20; i++) {
    const before = out;
    out = out.replace(/^\s+/, "");
    if (!stampRemoved) {
      const next = out.replace(TIMESTAMP_PREFIX, "");
      stampRemoved = next !== out;
      out = next;
    }
    out = out.replace(UNTRUSTED_BLOCK, "");
    out = out.replace(MESSAGE_ID_LINE, "");
    out = out.replace(RUNTIME_AT_START, "");
    if (out === before) break;
  }
  out = out.replace(RUNTIME_LINE, "");
  return out.trim();
}

/**
 * The parts of a user message OpenClaw does not replay identically — a leading timestamp prefix and
 * `Runtime:` lines — removed; everything else (message-id metadata included) kept. For identity.
 */
export function stripReplayVariance(text: string): string {
  let out = text.replace(/\r\n/g, "\n").replace(RUNTIME_LINE, "").trimStart();
  out = out.replace(TIMESTAMP_PREFIX, "");
  return out.trim();
}

/** True when a user message holds nothing the person typed (only internal context / metadata). */
export function isInternalOnly(text: string): boolean {
  return text.includes("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>") && stripMetadata(text) === "";
}

/** The internal-context blocks of a text, without their markers (kept as background for the model). */
export function internalContext(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(INTERNAL_BLOCK)) {
    const inner = m[0]
      .replace("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>", "")
      .replace("<<<END_OPENCLAW_INTERNAL_CONTEXT>>>", "")
      .trim();
    if (inner) out.push(inner);
  }
  return out;
}

export interface CurrentTurn {
  /** Index in `messages` of the message the person actually typed (-1 when there is none). */
  index: number;
  /** Its text with metadata removed. */
  text: string;
  /** Internal-context blocks sent with or after it (background, not the person's words). */
  internal: string[];
}

/**
 * Find what the person actually typed: the last user message that still has text after metadata
 * is removed — even when internal-context-only user messages come after it.
 */
export function findCurrentUserTurn(messages: readonly ChatMessage[]): CurrentTurn {
  const internal: string[] = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== "user") continue;
    const raw = contentText(m.content);
    const text = stripMetadata(raw);
    internal.unshift(...internalContext(raw));
    if (text) return { index: i, text, internal };
  }
  return { index: -1, text: "", internal };
}

/** The `Runtime:` line OpenClaw puts into a user message or the system prompt, parsed into fields. */
export function parseRuntimeLine(text: string): Record<string, string> | undefined {
  const m = new RegExp(`^Runtime: (${RUNTIME_BODY})$`, "m").exec(text);
  if (!m) return undefined;
  const out: Record<string, string> = {};
  for (const field of m[1]!.split("|")) {
    const eq = field.indexOf("=");
    if (eq > 0) out[field.slice(0, eq).trim()] = field.slice(eq + 1).trim();
  }
  return out;
}
