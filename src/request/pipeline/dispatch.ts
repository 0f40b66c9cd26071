/**
 * What a dispatching backend (the router) is shown of a turn: the person's own words with the
 * client's wrappers stripped (src/request/context/metadata.ts), a few turns before it, whether the last
 * message is not the person's at all (a tool result, OpenClaw's heartbeat poll, an internal-context
 * message), and the message's identity for retries.
 */
import { createHash } from "node:crypto";
import type { DispatchInput, TurnInput } from "../../backends/contract/backend.js";
import { findCurrentUserTurn, stripMetadata } from "../context/metadata.js";
import { contentText, type ChatMessage } from "../chat-api/schema.js";

/** OpenClaw's heartbeat poll ("Read HEARTBEAT.md if it exists … reply HEARTBEAT_OK"). */
const HEARTBEAT = /\bHEARTBEAT(?:\.md|_OK)\b/;
const RECENT_TURNS = 6;
const RECENT_CHARS = 600;

export function dispatchInput(turn: TurnInput, messages: readonly ChatMessage[]): DispatchInput {
  const current = findCurrentUserTurn(messages);
  const last = messages[messages.length - 1];
  let notFromPerson: DispatchInput["notFromPerson"];
  // OpenClaw often sends internal context as the LAST user message of a person's turn: the turn is
  // the person's when their message comes after the last answer, whatever internal messages follow.
  let lastAnswer = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]!.role === "assistant") {
      lastAnswer = i;
      break;
    }
  }
  if (last && last.role === "tool") notFromPerson = "tool_result";
  else if (last && last.role !== "user") notFromPerson = "internal";
  else if (current.index < 0 || current.index < lastAnswer) notFromPerson = "internal";
  else if (HEARTBEAT.test(current.text)) notFromPerson = "heartbeat";

  const recent: DispatchInput["recent"] = [];
  const start = current.index < 0 ? messages.length : current.index;
  for (let i = start - 1; i >= 0 && recent.length < RECENT_TURNS; i--) {
    const m = messages[i]!;
    if (m.role !== "user" && m.role !== "assistant") continue;
    const text = m.role === "user" ? stripMetadata(contentText(m.content)) : contentText(m.content).trim();
    if (!text) continue;
    recent.unshift({ role: m.role, text: text.length > RECENT_CHARS ? `${text.slice(0, RECENT_CHARS)}…` : text });
  }

  // The raw last user message (timestamp and all) and where it sits: a retry of the same request
  // has both the same; the same words sent again later have another timestamp or position.
  const raw = current.index >= 0 ? contentText(messages[current.index]!.content) : "";
  const messageKey = createHash("sha256").update(`${current.index}\u0000${raw}`).digest("hex").slice(0, 24);
  return { turn, userText: current.text, notFromPerson, recent, messageKey };
}
