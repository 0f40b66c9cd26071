/**
 * Resume turns: the backend keeps the conversation; the store maps the conversation key to the
 * backend's session.
 * - The binding is written only once the backend confirmed a session id (`session` event).
 * - A lost session (deleted, expired, wrong directory) is healed once, before any output: the dead
 *   binding is dropped (event `healed`) and a new session is seeded from the conversation in the
 *   request.
 * - While a turn runs, its binding carries `lastError: "in-progress <hash of the message>"`. A turn
 *   that never finished (client gone, bridge killed) may already sit in the CLI's own history, so a
 *   retry of the SAME message starts a new session seeded from the conversation (event `reset`)
 *   instead of asking the CLI twice; a different next message continues the session. A resent
 *   tool-result request is left to the client tools (src/backends/client-tools/replay.ts).
 * - The store costs the turn little (issue 34): the in-progress marker is one small write before
 *   the backend is given the message (`beginTurn`); a new binding is written (durably, with its
 *   fsync) once the first output has gone out, not before the first token, and at the latest before
 *   the turn's end is yielded; the finished turn is recorded AFTER `done` has gone to the client —
 *   still before this generator returns, so before the conversation's queue slot is released and
 *   its next turn reads the binding. The marker and the record commit without an fsync of their own
 *   (src/core/store/sqlite.ts says why that keeps what the person made).
 */
import { createHash } from "node:crypto";
import type { BackendEvent } from "../../backends/contract/backend.js";
import { buildResumeTurn } from "../context/resume.js";
import type { DebugLog } from "../../core/log/debug-log.js";
import type { EventBus } from "../../ops/events/bus.js";
import type { SessionBinding, SessionStore } from "../../core/store/types.js";
import { conversationWorkDir } from "../../core/util/workdir.js";
import { resultsKey } from "../../backends/client-tools/replay.js";
import { offeredTools, trailingToolResults } from "../../backends/client-tools/types.js";
import type { ClientToolResult, ClientToolsTurn } from "../../backends/contract/backend.js";
import { isInternalOnly, stripMetadata } from "../context/metadata.js";
import { contentText, type ChatMessage } from "../chat-api/schema.js";
import { contract } from "./enforce-contract.js";
import type { Turn } from "./turn.js";

export interface ResumeDeps {
  store: SessionStore;
  dataDir: string;
  debugLog: DebugLog;
  /** `session.healed` and `session.reset` are published here. */
  bus?: EventBus;
}

/** `lastError` marker of a turn that started but has not finished: `in-progress <hash of the message>`. */
const IN_PROGRESS = "in-progress ";

export async function* runResume(turn: Turn, deps: ResumeDeps): AsyncGenerator<BackendEvent> {
  const { store, debugLog } = deps;
  const { route, conversation, log } = turn;
  const key = conversation.key;
  const backendName = route.backend.name;
  let binding: SessionBinding | undefined = await store.get(key);
  if (binding && binding.backend !== backendName) {
    log.info({ was: binding.backend }, "conversation moved to another backend: starting a new session there");
    binding = undefined;
  }
  const inProgress = `${IN_PROGRESS}${createHash("sha256").update(turn.userText()).digest("hex").slice(0, 16)}`;
  const clientTools = clientToolsOf(turn);
  // A resent tool-result request is the client tools' to recognise (replay.ts): its session stays.
  if (binding?.lastError === inProgress && !(clientTools && resultsKey(clientTools))) {
    log.info(
      { backendSessionId: binding.backendSessionId },
      "retry of an interrupted turn: starting a new session seeded from the conversation",
    );
    debugLog.line(`Retry of an interrupted turn for ${key}: new session`);
    await store.delete(key);
    await store.appendEvent(key, "reset", "retry of an interrupted turn");
    deps.bus?.emit({
      type: "session.reset",
      conversation: key,
      backend: backendName,
      reason: "retry of an interrupted turn",
    });
    binding = undefined;
  }
  const cwd = binding?.cwd ?? conversationWorkDir(deps.dataDir, key);
  for (let attempt = 0; attempt < 2; attempt++) {
    const continuing = binding !== undefined;
    const built = buildResumeTurn(turn.request.messages, {
      budget: route.model.context,
      clientTools: !!clientTools?.tools.length,
      conversationKey: key,
      continuing,
      maxSeedChars: route.model.session.maxSeedChars,
      live: turn.live,
      ...(turn.missedTurns ? { missedTurns: turn.missedTurns } : {}),
    });
    debugLog.line(
      `Prompt built: ${built.stats.totalChars} chars (resume, ${continuing ? "continuing" : "new session"}), tool_context: ${turn.live.length > 0}, history_entries: ${built.stats.seedEntries}`,
    );
    log.info(
      {
        conversationSource: conversation.source,
        mode: "resume",
        continuing,
        backendSessionId: binding?.backendSessionId,
        ...built.stats,
      },
      "turn started",
    );
    const input = turn.input(
      built.prompt,
      { key, backendSessionId: binding?.backendSessionId, cwd, turn: binding?.turns ?? 0, resume: true },
      clientTools,
    );
    if (binding) {
      await store.beginTurn(key, inProgress);
      binding = { ...binding, lastError: inProgress };
    }
    let answered = false;
    let heal = false;
    /** A session the backend confirmed, not written yet (see `save`). */
    let unsaved: SessionBinding | undefined;
    /** Write the confirmed session (at once, durably): after the first output, or before the turn ends. */
    const save = async (): Promise<void> => {
      const b = unsaved;
      unsaved = undefined;
      if (b) await store.put(b);
    };
    try {
      for await (const ev of contract(route.backend, input, () => `${built.prompt.system}\n${built.prompt.text}`)) {
        if (ev.type === "session") {
          if (ev.id !== binding?.backendSessionId) {
            // The backend confirmed a session id: only now is the binding made.
            const now = Date.now();
            binding = {
              key,
              backend: backendName,
              backendSessionId: ev.id,
              cwd,
              turns: binding?.turns ?? 0,
              createdAt: binding?.createdAt ?? now,
              updatedAt: now,
              model: route.model.id,
              lastError: inProgress,
            };
            unsaved = binding;
          }
        } else if (ev.type === "text" || ev.type === "tool_call" || ev.type === "reasoning") {
          answered = true;
          if (unsaved) {
            // The first output goes out first (its frame is flushed at the end of this tick); then
            // the binding is written, while the rest of the answer is on its way.
            yield ev;
            await new Promise<void>((r) => setImmediate(r));
            await save();
            continue;
          }
        } else if (
          ev.type === "error" &&
          ev.error.code === "session_not_found" &&
          continuing &&
          !answered &&
          attempt === 0
        ) {
          log.warn(
            { backendSessionId: binding?.backendSessionId, reason: ev.error.message },
            "resume failed: dropping the dead session and starting a new one seeded from the conversation",
          );
          debugLog.line(`Session healed for ${key}: ${ev.error.message}`);
          unsaved = undefined;
          await store.delete(key);
          await store.appendEvent(key, "healed", ev.error.message);
          deps.bus?.emit({
            type: "session.healed",
            conversation: key,
            backend: backendName,
            reason: ev.error.message,
          });
          binding = undefined;
          heal = true;
          break;
        } else if (ev.type === "done" && binding) {
          await save();
          // The answer first; the record before the generator returns (also when the consumer
          // stops at `done`), so before the conversation's next turn reads the binding.
          const sessionId = binding.backendSessionId;
          try {
            yield ev;
          } finally {
            await store
              .recordTurn(key, sessionId)
              .catch((err: Error) => log.warn({ err: err.message }, "cannot record the finished turn"));
          }
          return;
        } else if (ev.type === "error" && binding && ev.error.code !== "aborted") {
          // The CLI finished with an error: the session is consistent; record why.
          await save();
          await store.recordError(key, ev.error.message);
        }
        yield ev;
      }
    } finally {
      // The turn ended before any output (or its consumer stopped early): the session is kept.
      if (unsaved) await save().catch((err: Error) => log.warn({ err: err.message }, "cannot write the session"));
    }
    if (!heal) return;
  }
}

/** The client's tools for this turn, when its model offers them to the agent (`tools.mode: bridge`) and the request has some. */
function clientToolsOf(turn: Turn): ClientToolsTurn | undefined {
  const opts = turn.route.model.tools;
  if (opts.mode !== "bridge" || !turn.request.tools?.length) return undefined;
  const results = toolResultsOf(turn.request.messages);
  const spec: ClientToolsTurn = {
    tools: offeredTools(turn.request, opts.exclude),
    pendingTimeoutSeconds: opts.pendingTimeoutSeconds,
    results,
  };
  if (!results.length) {
    const both = resultsThenMessage(turn.request.messages);
    if (both) spec.resultsThenMessage = both;
  }
  return spec;
}

/**
 * Tool results followed by the person's new message (OpenClaw sends both when the person types
 * while a tool runs): the results, and the person's words after them (OpenClaw's internal-context
 * messages left out, its metadata stripped).
 */
export function resultsThenMessage(
  messages: readonly ChatMessage[],
): { results: ClientToolResult[]; message: string } | undefined {
  const said: string[] = [];
  let i = messages.length - 1;
  for (; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === "system" || m.role === "developer") continue;
    if (m.role !== "user") break;
    const raw = contentText(m.content);
    if (isInternalOnly(raw)) continue;
    const t = stripMetadata(raw).trim();
    if (t) said.unshift(t);
  }
  if (!said.length) return undefined;
  const results = trailingToolResults(messages.slice(0, i + 1));
  return results.length ? { results, message: said.join("\n\n") } : undefined;
}

/** The request's trailing tool results, past OpenClaw's internal-context messages that may follow them. */
export function toolResultsOf(messages: readonly ChatMessage[]): ClientToolResult[] {
  return trailingToolResults(messages, (m) => m.role === "user" && isInternalOnly(contentText(m.content)));
}
