/**
 * One turn on an `opencode serve` (./server.ts) over its HTTP API — the warm OpenCode
 * backend's driver, used by ./warm.ts for the shared server and for a conversation's own:
 * the session (continued, made ahead, or created), the prompt (`POST /session/:id/prompt_async`
 * with a message id of the bridge's, the person's images as data URL file parts, the bootstrap as
 * `system`, the model and the agent), the
 * answer from the server's event stream (./events.ts) until the session is idle, abort
 * (`POST /session/:id/abort`, then a bounded wait for idle), and the client's tools: a call is
 * announced as a `tool_call` and, once the reply's calls are in, the turn parks.
 */
import type { Logger } from "pino";
import type { ClientToolCall, ToolSession } from "../client-tools/sessions.js";
import type { BackendEvent, TurnImage, TurnInput } from "../contract/backend.js";
import { imageDataUrl } from "../cli/images.js";
import type { WarmOptions } from "../warm/options.js";
import { ascendingMessageId, OpencodeTurnEvents } from "./events.js";
import type { OpencodeServer } from "./server.js";
import { Inbox, type WarmMessage } from "../warm/warm-process.js";
import { cancelledError, diedMidTurn, type WarmTurnControl } from "../warm/warm-turn.js";

export const LABEL = "opencode serve";
/** After a `session.error`, how long the session may take to go idle (OpenCode may try a compaction). */
const ERROR_SETTLE_MS = 5000;
/**
 * How long a turn waits after a client tool call for more calls of the same reply before it ends
 * the response with `tool_calls` (OpenCode runs a reply's calls together; their tool parts, which
 * tell how many there are, may come just before or just after the calls themselves).
 */
const SETTLE_MS = 100;
/** How long a turn waits for a call OpenCode has started (its tool part is running) to reach the bridge. */
const EXPECTED_CALL_MS = 2000;

/** What a turn takes from the backend's warm options (`OpencodeWarmOptions` has them). */
export interface DriveSettings {
  /** OpenCode agent for every prompt. */
  agent?: string;
  logger: Logger;
  warm: Pick<WarmOptions, "interruptGraceSeconds">;
}

/** `provider/model` → the API's model object (`undefined`, e.g. for `default`: OpenCode's default model). */
export function opencodeModel(model: string): { providerID: string; modelID: string } | undefined {
  const i = model.indexOf("/");
  if (i <= 0 || i === model.length - 1) return undefined;
  return { providerID: model.slice(0, i), modelID: model.slice(i + 1) };
}

/**
 * The prompt's parts: the text, then each of the person's images as a file part with a data URL
 * (`{type: "file", mime, url: "data:…", filename}`). OpenCode keeps a data URL part as it is (a
 * `file://` one it would read from disk), stores it in the session, and sends it to a model that
 * takes images (its `modalities.input` has `image`) as an image part — `image_url` on an
 * OpenAI-compatible provider; to another model it sends a line saying it cannot read the image.
 */
export function opencodePromptParts(text: string, images: readonly TurnImage[] = []): Record<string, unknown>[] {
  return [
    { type: "text", text },
    ...images.map((i) => ({ type: "file", mime: i.mediaType, url: imageDataUrl(i), filename: i.name })),
  ];
}

function apiMessage(reply: { status: number; body: unknown; text: string }): string {
  const b = reply.body as { data?: { message?: string }; message?: string; error?: unknown } | undefined;
  const msg =
    b?.data?.message ?? b?.message ?? (typeof b?.error === "string" ? b.error : undefined) ?? reply.text.slice(0, 300);
  return `${reply.status}${msg ? ` ${msg}` : ""}`;
}

/** What `driveTurn` is given besides the server and the turn. */
export interface DriveOptions {
  /** The user's turn as OpenCode is sent it (the turn's own text, or late tool results before it). */
  text: string;
  /** The turn's cancellation (replaced when a parked turn goes on into a new response) and its park flag. */
  ctl: WarmTurnControl;
  /** A session made ahead for a turn without one. */
  spare?: string;
  /** The conversation's client tools, when the server was given them: calls are announced and the turn parks on them. */
  tools?: Pick<ToolSession, "listen" | "announce">;
  /** OpenCode's names of those tools (their tool parts are counted, not mapped). */
  bridged?: ReadonlySet<string>;
  /**
   * Called once when the session has gone idle, before the turn's last events are yielded: the
   * server is free, and what the caller asks of it now (the next turn's session) overlaps the
   * answer's end reaching the client. (Code after `yield*` of this generator does not run when
   * the consumer stops at the turn's terminal event, as the pipeline does.)
   */
  onIdle?: () => void;
}

/** A server event, the end of the process, or a call of the client's tools reaching the turn. */
type TurnItem = WarmMessage | { kind: "call"; call: ClientToolCall };

/**
 * One turn on the server: session, prompt, events until idle. Returns `lost` when the server
 * ended before the turn produced anything (the caller may run it cold). With the client's tools
 * (`d.tools`), a call of one is announced as a `tool_call`; once the reply's calls are in (as many
 * calls as OpenCode's open tool parts of those tools, or SETTLE_MS without another) the turn parks
 * (`ctl.parked`, then `done` with `tool_calls`) and this generator pauses there; resumed, it goes
 * on with `ctl.signal` (the new response's). Returned early (abandoned, or the consumer stopped),
 * it aborts the session's prompt.
 */
export async function* driveTurn(
  server: OpencodeServer,
  turn: TurnInput,
  cwd: string,
  o: DriveSettings,
  d: DriveOptions,
): AsyncGenerator<BackendEvent, { lost: boolean }> {
  const query = { directory: cwd };
  const graceMs = o.warm.interruptGraceSeconds * 1000;
  const { ctl } = d;
  let sessionId = turn.session.backendSessionId;
  // OpenCode's ids are `ses_…`; the server answers another with a 500 rather than a 404.
  if (sessionId && !sessionId.startsWith("ses_")) {
    yield {
      type: "error",
      error: {
        code: "session_not_found",
        message: `${LABEL}: Session not found: "${sessionId.slice(0, 80)}" is not an OpenCode session id`,
        status: 404,
      },
    };
    return { lost: false };
  }
  if (!sessionId && d.spare) {
    sessionId = d.spare;
    yield { type: "session", id: d.spare };
  }
  let finished = false;
  let prompted = false;
  const inbox = new Inbox<TurnItem>();
  let stop: (() => void) | undefined;
  try {
    if (!sessionId) {
      let reply;
      try {
        // A title of our own spares a title-generating call to the model.
        reply = await server.request("POST", "/session", { query, body: { title: "clawbridge" } });
      } catch (err) {
        if (await server.gone()) return { lost: true };
        finished = true;
        yield {
          type: "error",
          error: {
            code: "backend_failed",
            message: `${LABEL}: cannot create a session: ${(err as Error).message}`,
            status: 502,
            retryable: true,
          },
        };
        return { lost: false };
      }
      const id = (reply.body as { id?: unknown } | undefined)?.id;
      if (reply.status !== 200 || typeof id !== "string") {
        finished = true;
        yield {
          type: "error",
          error: {
            code: "backend_failed",
            message: `${LABEL}: cannot create a session: ${apiMessage(reply)}`,
            status: 502,
          },
        };
        return { lost: false };
      }
      sessionId = id;
      yield { type: "session", id };
    }
    stop = server.listen(sessionId, inbox.push);
    // An earlier turn of this session that did not wind down (aborted, the server slow to stop).
    if (server.busy(sessionId)) await stopSession(server, sessionId, cwd, inbox, undefined, graceMs);
    d.tools?.listen((call) => inbox.push({ kind: "call", call }));
    const ev = new OpencodeTurnEvents(ascendingMessageId(), d.bridged);
    const model = opencodeModel(turn.model);
    const body = {
      messageID: ev.messageId,
      parts: opencodePromptParts(d.text, turn.images),
      ...(model ? { model } : {}),
      ...(o.agent ? { agent: o.agent } : {}),
      ...(turn.prompt.system ? { system: turn.prompt.system } : {}),
    };
    let reply;
    try {
      reply = await server.request("POST", `/session/${encodeURIComponent(sessionId)}/prompt_async`, { query, body });
    } catch (err) {
      if (await server.gone()) return { lost: true };
      finished = true;
      yield {
        type: "error",
        error: {
          code: "backend_failed",
          message: `${LABEL}: the prompt was not taken: ${(err as Error).message}`,
          status: 502,
          retryable: true,
        },
      };
      return { lost: false };
    }
    if (reply.status === 404) {
      // `{"name": "NotFoundError", "data": {"message": "Session not found: ses_…"}}`: gone (its
      // database lost, another data directory), and the pipeline heals it.
      finished = true;
      yield {
        type: "error",
        error: { code: "session_not_found", message: `${LABEL}: ${apiMessage(reply)}`, status: 404 },
      };
      return { lost: false };
    }
    if (reply.status < 200 || reply.status >= 300) {
      finished = true;
      yield {
        type: "error",
        error: {
          code: "backend_failed",
          message: `${LABEL}: the prompt was not taken: ${apiMessage(reply)}`,
          status: 502,
        },
      };
      return { lost: false };
    }
    prompted = true;
    let errorDeadline: number | undefined;
    /** Client tool calls announced in this response, when the last came, and whether any was made this turn. */
    let announced = 0;
    let lastCallAt = 0;
    let called = false;
    for (;;) {
      // After a call: SETTLE_MS for another, longer while OpenCode's tool parts say more are coming.
      const settleAt = announced
        ? lastCallAt + (ev.bridgedCalls > announced ? EXPECTED_CALL_MS : SETTLE_MS)
        : undefined;
      const until = Math.min(errorDeadline ?? Infinity, settleAt ?? Infinity);
      const m = await inbox.next(ctl.signal, until === Infinity ? undefined : Math.max(0, until - Date.now()));
      if (m === "aborted") {
        await stopSession(server, sessionId, cwd, inbox, ev, graceMs);
        finished = true;
        yield cancelledError(ctl.signal, "opencode");
        return { lost: false };
      }
      if (m === "timeout") {
        if (settleAt !== undefined && Date.now() >= settleAt) {
          // No more calls came: end this response; the session waits on its calls for the client.
          o.logger.debug({ calls: announced, open: ev.bridgedCalls }, "client tool calls handed over (no more came)");
          ctl.parked = true;
          yield { type: "done", finishReason: "tool_calls" };
          announced = 0;
          ev.newResponse();
          continue;
        }
        if (errorDeadline === undefined || Date.now() < errorDeadline) continue;
        // The error is known; the session did not settle: stop it and report the error.
        await stopSession(server, sessionId, cwd, inbox, ev, graceMs);
        finished = true;
        yield* ev.finishEvents();
        return { lost: false };
      }
      if (m.kind === "end") {
        finished = true;
        if (ev.produced === 0 && !called && !ev.error) return { lost: true };
        if (ev.error) yield* ev.finishEvents();
        else yield diedMidTurn(LABEL, m.end.signal ? `killed by ${m.end.signal}` : `exit ${m.end.code}`);
        return { lost: false };
      }
      if (m.kind === "call") {
        d.tools?.announce(m.call.id);
        yield {
          type: "tool_call",
          index: announced,
          id: m.call.id,
          name: m.call.name,
          argumentsDelta: m.call.argumentsJson,
        };
        announced++;
        called = true;
        lastCallAt = Date.now();
      } else {
        for (const out of ev.map(m.message)) yield out;
        if (ev.idle) {
          finished = true;
          d.onIdle?.();
          if (ev.error?.code === "aborted" && !ctl.signal.aborted) {
            yield { type: "error", error: ev.error };
            return { lost: false };
          }
          yield* ev.finishEvents();
          return { lost: false };
        }
        if (ev.error && errorDeadline === undefined) errorDeadline = Date.now() + ERROR_SETTLE_MS;
      }
      if (announced && ev.bridgedCalls && announced >= ev.bridgedCalls) {
        // Every call the reply started is in: end this response; the session waits for the client.
        o.logger.debug({ calls: announced }, "client tool calls handed over (all of the reply's)");
        ctl.parked = true;
        yield { type: "done", finishReason: "tool_calls" };
        announced = 0;
        ev.newResponse();
      }
    }
  } finally {
    // The consumer stopped early (or the parked turn was abandoned): the session must not keep
    // working for no one — nor wait on a client tool call no one will answer.
    if (!finished && prompted && sessionId && server.usable)
      await stopSession(server, sessionId, cwd, inbox, undefined, graceMs);
    d.tools?.listen(undefined);
    stop?.();
  }
}

/** Abort the session's prompt and wait (bounded) until it is idle; its busy state tells the next turn otherwise. */
async function stopSession(
  server: OpencodeServer,
  sessionId: string,
  cwd: string,
  inbox: Inbox<TurnItem>,
  ev: OpencodeTurnEvents | undefined,
  graceMs: number,
): Promise<void> {
  if (!(await server.abort(sessionId, cwd))) return;
  const until = Date.now() + Math.max(graceMs, 500);
  for (let i = 0; i < 10_000 && server.busy(sessionId); i++) {
    const left = until - Date.now();
    if (left <= 0) return;
    const m = await inbox.next(undefined, left);
    if (m === "timeout" || m === "aborted" || m.kind === "end") return;
    if (m.kind === "message") ev?.map(m.message);
  }
}
