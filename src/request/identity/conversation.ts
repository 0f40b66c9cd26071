/**
 * Conversation identity: which conversation a request belongs to. In order:
 *  1. an explicit header (`server.sessionHeader`, `x-openclaw-session-key`, `x-session-id`);
 *  2. the client API's own identity, when its door found one (the Responses chain, Anthropic's
 *     `metadata.user_id`), then the OpenAI `user` field;
 *  3. the `Runtime: … session=<key> | sessionId=<uuid>` line newer OpenClaw puts in the first user message;
 *  4. a key derived from the stable START of the conversation: its first user message exactly as
 *     sent (OpenClaw's timestamp / message-id metadata makes it unique per conversation) — never
 *     from the system prompt, which OpenClaw rebuilds every turn.
 */
import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { contentText, type ChatRequest } from "../chat-api/schema.js";
import { parseRuntimeLine, stripMetadata, stripReplayVariance } from "../context/metadata.js";

/** `chain`: a Responses API `previous_response_id` chain (the key of its first response's conversation). */
export type KeySource = "header" | "user" | "chain" | "runtime" | "derived";

export interface Conversation {
  key: string;
  source: KeySource;
}

const DEFAULT_HEADERS = ["x-openclaw-session-key", "x-session-id"];
const MAX_KEY = 200;

function clean(value: string): string {
  // Keys end up in logs, headers and file names (hashed): keep them printable and bounded.
  const printable = value.replace(/[^\x21-\x7e]/g, "_").slice(0, MAX_KEY);
  return printable;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name.toLowerCase()];
  const s = Array.isArray(v) ? v[0] : v;
  return s?.trim() ? s.trim() : undefined;
}

export function resolveConversation(
  req: ChatRequest,
  headers: IncomingHttpHeaders,
  opts: { sessionHeader?: string; scope?: string; own?: Conversation } = {},
): Conversation {
  for (const name of [opts.sessionHeader, ...DEFAULT_HEADERS]) {
    if (!name) continue;
    const v = header(headers, name);
    if (v) return { key: clean(v), source: "header" };
  }
  // The client API's own identity (a Responses chain, Anthropic's `metadata.user_id`).
  if (opts.own) return { key: clean(opts.own.key), source: opts.own.source };
  if (req.user?.trim()) return { key: clean(`user:${req.user.trim()}`), source: "user" };

  const users = req.messages.filter((m) => m.role === "user");
  for (const m of users.slice(0, 3)) {
    const rt = parseRuntimeLine(contentText(m.content));
    if (rt && (rt.session || rt.sessionId)) {
      return { key: clean(`openclaw:${rt.session ?? "-"}:${rt.sessionId ?? "-"}`), source: "runtime" };
    }
  }
  // The first user message that holds something the person typed, as sent — its message-id
  // metadata makes it unique — less what OpenClaw changes on replay: 2026.5 puts the timestamp
  // prefix on the NEWEST message only, and the Runtime line is per request.
  const first = users.map((m) => contentText(m.content)).find((t) => stripMetadata(t).length > 0) ?? "";
  const stable = stripReplayVariance(first);
  const digest = createHash("sha256")
    .update(opts.scope ?? "")
    .update("\0")
    .update(stable)
    .digest("hex")
    .slice(0, 24);
  return { key: `derived:${digest}`, source: "derived" };
}

/**
 * A conversation named by its client's own id (Claude Code's session, Codex's `prompt_cache_key`,
 * a person's id) AND its thread: a digest of its first user message, which stays the same for the
 * whole conversation. A client that sends one id for everything (an app-wide cache key, one user id
 * for all of a person's chats) then still gets one conversation per thread, and two sessions of one
 * client that begin alike (Codex: the same folder on the same day) one each.
 */
export function threadOf(owner: string, messages: ChatRequest["messages"]): Conversation {
  // As for a derived key: the first message the person typed something in, less what OpenClaw
  // changes on replay (the timestamp prefix it puts on the newest message only).
  const first =
    messages
      .filter((m) => m.role === "user")
      .map((m) => contentText(m.content))
      .find((t) => stripMetadata(t).length > 0) ?? "";
  const digest = createHash("sha256").update(stripReplayVariance(first)).digest("hex").slice(0, 16);
  // The owner is cut so that the digest always fits in a key (keys keep 200 characters).
  return { key: `${clean(owner).slice(0, 160)}:${digest}`, source: "user" };
}
