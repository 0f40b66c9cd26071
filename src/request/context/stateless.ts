/**
 * Stateless context building: each turn the backend starts fresh, so the bridge sends a compact,
 * self-contained prompt built from OpenClaw's 60-80 KB request:
 *   system  — compressed system prompt (≤ maxSystemChars)
 *   text    — recent history (≤ maxHistoryChars, newest kept, running total kept correctly),
 *             tool results and live data (≤ maxToolResultChars), then the person's message, whole.
 * system + text stay within maxPromptChars, cut from the OLDEST history first; the current user
 * message is never cut, even when it alone is over every budget.
 */
import type { ContextBudget } from "../../core/config/schema.js";
import { contentText, type ChatMessage } from "../chat-api/schema.js";
import type { PromptParts } from "../../backends/contract/backend.js";
import { findCurrentUserTurn, isInternalOnly, stripMetadata } from "./metadata.js";
import { compressSystemPrompt } from "./system-prompt.js";
import { fairShares, truncateAtWord, truncateKeepEnd } from "./text.js";

export interface LiveData {
  /** Heading the model sees, e.g. "LIVE WEB SEARCH RESULTS". */
  title: string;
  body: string;
}

export interface BuildStats {
  systemChars: number;
  historyEntries: number;
  historyDropped: number;
  historyChars: number;
  toolResultChars: number;
  userChars: number;
  totalChars: number;
}

export interface BuiltPrompt {
  prompt: PromptParts;
  /** The person's own message (metadata removed). */
  userText: string;
  stats: BuildStats;
}

const MAX_ENTRY_CHARS = 800;

/** All system/developer text of a request. */
export function systemText(messages: readonly ChatMessage[]): string {
  return messages
    .filter((m) => m.role === "system" || m.role === "developer")
    .map((m) => contentText(m.content))
    .join("\n\n");
}

function toolCallSummary(m: ChatMessage): string {
  return (m.tool_calls ?? [])
    .map((c) => `[called ${c.function.name}(${truncateAtWord(c.function.arguments ?? "", 200)})]`)
    .join(" ");
}

/** One history line per message, oldest first. */
export function renderHistory(messages: readonly ChatMessage[]): string[] {
  const names = new Map<string, string>();
  const out: string[] = [];
  for (const m of messages) {
    if (m.role === "system" || m.role === "developer") continue;
    if (m.role === "assistant") {
      for (const c of m.tool_calls ?? []) if (c.id) names.set(c.id, c.function.name);
      const text = contentText(m.content).trim();
      const calls = toolCallSummary(m);
      const line = [text, calls].filter(Boolean).join(" ");
      if (line) out.push(`ASSISTANT: ${truncateAtWord(line, MAX_ENTRY_CHARS)}`);
    } else if (m.role === "tool" || m.role === "function") {
      const name = (m.tool_call_id && names.get(m.tool_call_id)) || m.name || "tool";
      out.push(`TOOL RESULT (${name}): ${truncateKeepEnd(contentText(m.content).trim(), 300)}`);
    } else if (m.role === "user") {
      const raw = contentText(m.content);
      if (isInternalOnly(raw)) continue;
      const text = stripMetadata(raw);
      if (text) out.push(`USER: ${truncateAtWord(text, MAX_ENTRY_CHARS)}`);
    }
  }
  return out;
}

/** Newest entries whose running total fits `budget` (the running total is really kept). */
export function fitHistory(entries: readonly string[], budget: number): string[] {
  const kept: string[] = [];
  let total = 0;
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!;
    const cost = e.length + 1;
    if (total + cost > budget) {
      const room = budget - total - 1;
      if (kept.length === 0 && room > 120) kept.unshift(truncateAtWord(e, room));
      break;
    }
    kept.unshift(e);
    total += cost;
  }
  return kept;
}

/** Tool results of the current turn (after the person's message) and live data, within budget. */
function renderToolResults(
  after: readonly ChatMessage[],
  live: readonly LiveData[],
  internal: readonly string[],
  budget: number,
): string {
  const blocks: string[] = [];
  for (const d of live) blocks.push(`${d.title}:\n${d.body.trim()}`);
  const names = new Map<string, string>();
  for (const m of after) {
    if (m.role === "assistant") {
      for (const c of m.tool_calls ?? []) if (c.id) names.set(c.id, c.function.name);
      const calls = toolCallSummary(m);
      const text = contentText(m.content).trim();
      if (calls || text) blocks.push(`YOU (earlier this turn): ${[text, calls].filter(Boolean).join(" ")}`);
    } else if (m.role === "tool" || m.role === "function") {
      const name = (m.tool_call_id && names.get(m.tool_call_id)) || m.name || "tool";
      blocks.push(`TOOL RESULT (${name}):\n${contentText(m.content).trim()}`);
    }
  }
  for (const c of internal) blocks.push(`CONTEXT FROM OPENCLAW:\n${c}`);
  if (!blocks.length || budget <= 0) return "";
  const shares = fairShares(
    blocks.map((b) => b.length),
    budget - (blocks.length - 1) * 2,
  );
  return blocks
    .map((b, i) => (shares[i]! >= b.length ? b : shares[i]! > 40 ? truncateAtWord(b, shares[i]!) : ""))
    .filter(Boolean)
    .join("\n\n");
}

export function buildStatelessPrompt(
  messages: readonly ChatMessage[],
  budget: ContextBudget,
  live: readonly LiveData[] = [],
): BuiltPrompt {
  const current = findCurrentUserTurn(messages);
  const userText = current.index >= 0 ? current.text : "";
  const before = current.index >= 0 ? messages.slice(0, current.index) : messages.filter((m) => m.role !== "user");
  const after = current.index >= 0 ? messages.slice(current.index + 1) : [];

  const userBlock = `USER: ${userText}\n\nRespond:`;
  let avail = budget.maxPromptChars - userBlock.length;

  // The 2 characters that separate system and text are part of the budget; a brief under 40
  // characters would be noise, so then there is none.
  const systemRoom = Math.min(budget.maxSystemChars, Math.max(0, avail - 2));
  const system = systemRoom >= 40 ? compressSystemPrompt(systemText(messages), systemRoom, budget.preamble) : "";
  avail -= system.length + (system ? 2 : 0);

  const toolText = renderToolResults(
    after,
    live,
    current.internal,
    Math.min(budget.maxToolResultChars, Math.max(0, avail - 40)),
  );
  const toolSection = toolText ? `${toolText}\n\n` : "";
  avail -= toolSection.length;

  const header = "CONVERSATION SO FAR:\n";
  const allHistory = renderHistory(before);
  const history = fitHistory(allHistory, Math.min(budget.maxHistoryChars, Math.max(0, avail - header.length - 2)));
  const historySection = history.length ? `${header}${history.join("\n")}\n\n` : "";

  const text = `${historySection}${toolSection}${userBlock}`;
  return {
    prompt: { system, text },
    userText,
    stats: {
      systemChars: system.length,
      historyEntries: history.length,
      historyDropped: allHistory.length - history.length,
      historyChars: historySection.length,
      toolResultChars: toolText.length,
      userChars: userText.length,
      totalChars: system.length + (system ? 2 : 0) + text.length,
    },
  };
}
