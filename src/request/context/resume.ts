/**
 * Turn building in resume mode: the CLI agent keeps its OWN conversation, so the bridge forwards
 * only what is new. Every turn carries a compact bootstrap (identity, user profile, workspace,
 * conversation key, what the agent is) as the system text — re-sent each turn so it never drifts
 * from OpenClaw's current prompt — and the text is:
 *   - continuing a session: the person's new message(s) since the last answer, plus new tool results;
 *   - a NEW session (first turn, or healed after a lost one): the earlier conversation from the
 *     request within `maxSeedChars`, then the new message — never silent amnesia.
 */
import type { ContextBudget } from "../../core/config/schema.js";
import type { PromptParts } from "../../backends/contract/backend.js";
import { isBridgeCallId } from "../../backends/client-tools/types.js";
import { contentText, type ChatMessage } from "../chat-api/schema.js";
import { findCurrentUserTurn, isInternalOnly, stripMetadata } from "./metadata.js";
import { fitHistory, renderHistory, systemText, type LiveData } from "./stateless.js";
import { compressSystemPrompt, workspacePath } from "./system-prompt.js";
import { truncateAtWord } from "./text.js";

export interface ResumeTurnOptions {
  budget: ContextBudget;
  conversationKey: string;
  /** True when the backend already has this conversation (a session to resume). */
  continuing: boolean;
  /** Budget for earlier conversation given to a new session. */
  maxSeedChars: number;
  /** OpenClaw's tools are offered to the agent as MCP tools (the brief says so). */
  clientTools?: boolean;
  live?: readonly LiveData[];
  /**
   * A continuing session that missed this many of the conversation's last turns (another model
   * answered them while its backend was at its limit): their text, within `maxSeedChars`, goes
   * before the new message.
   */
  missedTurns?: number;
}

export interface ResumeTurn {
  prompt: PromptParts;
  userText: string;
  stats: { bootstrapChars: number; newChars: number; seedEntries: number; totalChars: number };
}

const AGENT_BRIEF =
  "You answer a person chatting through OpenClaw (Telegram, Discord...), connected to you by clawbridge. " +
  "You keep this conversation's history yourself; each message is the person's NEW message. " +
  "OpenClaw's tools are not available here: use your own, and reply in chat-friendly text.";

/** The brief when OpenClaw's own tools are offered to the agent over MCP (a model in `tools.mode: bridge`). */
const AGENT_BRIEF_WITH_TOOLS =
  "You answer a person chatting through OpenClaw (Telegram, Discord...), connected to you by clawbridge. " +
  "You keep this conversation's history yourself; each message is the person's NEW message. " +
  "OpenClaw's own tools (sending messages to channels, its memory, cron jobs, other sessions...) are the tools of your MCP server \"openclaw\" (named after OpenClaw's, e.g. mcp__openclaw__<tool>): " +
  "use them for what only OpenClaw can do, your own tools for the rest, and reply in chat-friendly text.";

/** The bootstrap is re-sent every turn: keep it small (a later turn should forward < 2 KB + the message). */
export const MAX_BOOTSTRAP_CHARS = 1600;

/** The bootstrap: built from OpenClaw's system prompt of THIS request, so it follows its changes. */
export function buildBootstrap(
  messages: readonly ChatMessage[],
  budget: ContextBudget,
  conversationKey: string,
  clientTools = false,
): string {
  const sys = systemText(messages);
  const ws = workspacePath(sys);
  const head = [
    clientTools ? AGENT_BRIEF_WITH_TOOLS : AGENT_BRIEF,
    `Conversation: ${conversationKey}`,
    ws ? `OpenClaw workspace: ${ws}` : "",
  ]
    .filter(Boolean)
    .join("\n");
  const total = Math.min(budget.maxSystemChars, MAX_BOOTSTRAP_CHARS);
  const brief = compressSystemPrompt(sys, Math.max(0, total - head.length - 2), budget.preamble);
  return [head, brief].filter(Boolean).join("\n\n");
}

/**
 * Messages after the last assistant answer: what the backend has not seen yet. With the client's
 * tools bridged, an assistant message whose calls the bridge made for the CLI is in the CLI's own
 * history too (the CLI made those calls), so it counts as an answer.
 */
function newSinceLastAnswer(messages: readonly ChatMessage[], bridged = false): ChatMessage[] {
  let lastAssistant = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    const calls = m.tool_calls ?? [];
    // An assistant message that asked for tools is part of the current turn, not an answer.
    if (
      m.role === "assistant" &&
      (!calls.length || (bridged && calls.every((c) => c.id !== undefined && isBridgeCallId(c.id))))
    ) {
      lastAssistant = i;
      break;
    }
  }
  return messages.slice(lastAssistant + 1).filter((m) => m.role !== "system" && m.role !== "developer");
}

function renderNew(fresh: readonly ChatMessage[], toolBudget: number): string {
  const parts: string[] = [];
  let toolChars = 0;
  for (const m of fresh) {
    if (m.role === "user") {
      const raw = contentText(m.content);
      if (isInternalOnly(raw)) continue;
      const t = stripMetadata(raw);
      if (t) parts.push(t);
    } else if (m.role === "tool" || m.role === "function") {
      const body = contentText(m.content).trim();
      const room = Math.max(0, toolBudget - toolChars);
      if (room > 40) {
        const t = truncateAtWord(body, room);
        toolChars += t.length;
        parts.push(`TOOL RESULT${m.name ? ` (${m.name})` : ""}:\n${t}`);
      }
    }
  }
  return parts.join("\n\n");
}

export function buildResumeTurn(messages: readonly ChatMessage[], opts: ResumeTurnOptions): ResumeTurn {
  const { budget } = opts;
  const current = findCurrentUserTurn(messages);
  const system = buildBootstrap(messages, budget, opts.conversationKey, opts.clientTools);
  const fresh = newSinceLastAnswer(messages, opts.clientTools);
  let newText = renderNew(fresh, budget.maxToolResultChars);
  if (!newText) newText = current.text; // e.g. only an internal-context message came after the answer
  const extras: string[] = [];
  for (const d of opts.live ?? []) extras.push(`${d.title}:\n${d.body.trim()}`);
  for (const c of current.internal)
    extras.push(`CONTEXT FROM OPENCLAW:\n${truncateAtWord(c, budget.maxToolResultChars)}`);

  let seed = "";
  let seedEntries = 0;
  if (opts.continuing && opts.missedTurns) {
    const firstNew = messages.indexOf(fresh[0]!);
    const earlier = firstNew > 0 ? messages.slice(0, firstNew) : [];
    // From the user message that opened the first missed turn.
    let from = earlier.length;
    for (let i = earlier.length - 1, n = 0; i >= 0 && n < opts.missedTurns; i--) {
      if (earlier[i]!.role === "user") {
        from = i;
        n++;
      }
    }
    const kept = fitHistory(renderHistory(earlier.slice(from)), opts.maxSeedChars);
    seedEntries = kept.length;
    if (kept.length)
      seed = `MEANWHILE (another model answered these turns while you were unavailable; for context):\n${kept.join("\n")}\n\n`;
  } else if (!opts.continuing) {
    const firstNew = messages.indexOf(fresh[0]!);
    const earlier = firstNew > 0 ? messages.slice(0, firstNew) : [];
    const kept = fitHistory(renderHistory(earlier), opts.maxSeedChars);
    seedEntries = kept.length;
    if (kept.length)
      seed = `EARLIER IN THIS CONVERSATION (for context; it happened before this session):\n${kept.join("\n")}\n\n`;
  }
  const extraText = extras.length ? `${extras.join("\n\n")}\n\n` : "";
  const text = `${seed}${extraText}${newText}`;
  return {
    prompt: { system, text },
    userText: current.text,
    stats: {
      bootstrapChars: system.length,
      newChars: newText.length,
      seedEntries,
      totalChars: system.length + text.length,
    },
  };
}
