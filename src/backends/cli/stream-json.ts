/**
 * Warm turns for the stream-json CLIs (Claude Code, Qwen Code): one process per conversation,
 * started with `--input-format stream-json --output-format stream-json`; each turn is ONE user
 * message written as a JSON line on stdin, and its answer is read up to the `result` line. The
 * process stays for the next turn. Observed with claude 2.1.197 (docs/CLI_FORMATS.md):
 * - every turn starts with `system/init` (same session id) and ends with `result`;
 * - an interrupt is `{"type":"control_request","request_id":…,"request":{"subtype":"interrupt"}}`,
 *   answered by a `control_response`, then the turn's `result` (`error_during_execution`): the
 *   process is fit for the next turn;
 * - `--resume <id>` of an unknown session: the process prints the reason on stderr and exits.
 * The CLI's events are mapped by the backend's own mapper (the same as the cold path's).
 * A standby taken by a conversation first reads its `preamble` (the conversation's bootstrap, given
 * the CLI's way: see stream-json-warm.ts); the turns it causes are read and dropped before the
 * turn's own message is sent, and a standby that did not take it is ended (the turn runs cold).
 */
import { randomUUID } from "node:crypto";
import type { BackendEvent, TurnImage } from "../contract/backend.js";
import type { ProcessEnd } from "../../core/util/process.js";
import type { WarmLease } from "../warm/pool.js";
import type { ClientToolCall, ToolSession } from "../client-tools/sessions.js";
import { cliToolPrefix } from "../client-tools/types.js";
import { Inbox, WarmProcess, type WarmMessage, type WarmProcessSpec } from "../warm/warm-process.js";
import { cancelledError, diedMidTurn, type WarmTurnControl, type WarmTurnEnd } from "../warm/warm-turn.js";

/** The backend's per-turn mapping of stream-json lines (the cold path's mapper fits). */
export interface StreamJsonMapper {
  onEvent(ev: Record<string, unknown>): BackendEvent[];
  finish(end: ProcessEnd): BackendEvent[];
}

/**
 * What a standby taken by a conversation reads before the turn's own message: the conversation's
 * bootstrap, given the CLI's way (see stream-json-warm.ts).
 */
export interface FirstTurnPreamble {
  /** Written before the user message (e.g. Claude Code's `initialize` with the bootstrap, Qwen Code's `/clear`). */
  messages: Record<string, unknown>[];
  /** Turns of output these messages cause (each ends with a `result`), read and dropped before the user message is sent. */
  skipTurns: number;
  /** What each skipped turn's `result` text must match; otherwise the standby cannot serve (the turn runs cold). */
  expect?: RegExp;
}

/** A stream-json CLI process serving one conversation (or, as a standby, none yet). */
export class StreamJsonWorker extends WarmProcess {
  /** The CLI session the process is on (the resumed one, or the one its first turn reported). */
  sessionId: string | undefined;
  /** Set when a conversation takes it as a standby: read before its first turn's message. */
  preamble: FirstTurnPreamble | undefined;

  constructor(
    spec: WarmProcessSpec,
    /**
     * What the process was started with besides the session (bootstrap, model, options): `fits`
     * compares it. A standby gets the fingerprint of the conversation that takes it.
     */
    public fingerprint: string,
    sessionId: string | undefined,
  ) {
    super(spec);
    this.sessionId = sessionId;
  }

  /**
   * Send `messages` and wait for the `turns` results they cause (their output is dropped): a
   * standby warming up before any conversation is given it. False when the process ended or did
   * not answer within `timeoutMs`.
   */
  async warmUp(messages: Record<string, unknown>[], turns: number, timeoutMs: number): Promise<boolean> {
    const inbox = new Inbox();
    this.listen(inbox.push);
    try {
      for (const m of messages) if (!this.send(m)) return false;
      const deadline = Date.now() + timeoutMs;
      for (let seen = 0, i = 0; seen < turns && i < 100_000; i++) {
        const item = await inbox.next(undefined, Math.max(1, deadline - Date.now()));
        if (item === "timeout" || item === "aborted" || item.kind === "end") return false;
        if (item.message.type === "result") seen++;
      }
      return true;
    } finally {
      this.listen(undefined);
    }
  }
}

export interface StreamJsonTurn {
  label: string;
  /** The user's turn as the CLI reads it. */
  text: string;
  /** The images of the person's new message(s), sent as image blocks after the text. */
  images?: readonly TurnImage[];
  mapper: StreamJsonMapper;
  /** The conversation's client tools, when the CLI was given them as an MCP server. */
  tools?: Pick<ToolSession, "listen" | "announce">;
  /** How long an interrupted turn may take to end before the process group is killed. */
  interruptGraceMs: number;
  /** Called with the turn's first line that is not a control message: the CLI has started the turn (and read its start-up files). */
  onFirstMessage?: () => void;
  /** Limit for a taken standby's preamble (default 30 s). */
  setupTimeoutMs?: number;
}

/**
 * The control request that switches a CLI's control channel on (Qwen Code ignores interrupts, and a
 * tool needing approval hangs its turn, unless this is its first line).
 */
export function controlInitialize(): Record<string, unknown> {
  return { type: "control_request", request_id: `clawbridge-init-${randomUUID()}`, request: { subtype: "initialize" } };
}

/**
 * A request from the CLI: a tool asking for approval (`can_use_tool`) is denied — nobody can be
 * asked, as in a cold non-interactive run, where such a tool is refused; anything else is answered
 * with an error so the CLI never waits on us.
 */
function answerControl(worker: StreamJsonWorker, msg: Record<string, unknown>): void {
  const id = msg.request_id;
  const request = (msg.request ?? {}) as { subtype?: string };
  if (typeof id !== "string") return;
  if (request.subtype === "can_use_tool") {
    worker.send({
      type: "control_response",
      response: {
        subtype: "success",
        request_id: id,
        response: {
          behavior: "deny",
          message: "This tool needs approval, and nobody can approve it here (non-interactive).",
        },
      },
    });
  } else {
    worker.send({
      type: "control_response",
      response: {
        subtype: "error",
        request_id: id,
        error: `clawbridge does not handle ${request.subtype ?? "this request"}`,
      },
    });
  }
}

/** An image of the turn as an Anthropic image block (what Claude Code's stream-json input takes). */
export function imageBlock(image: TurnImage): Record<string, unknown> {
  return { type: "image", source: { type: "base64", media_type: image.mediaType, data: image.base64 } };
}

/**
 * The stream-json user message of one turn: its text, then its images as image blocks, in one
 * message (Claude Code hands the blocks to its model as they are). Qwen Code would turn an image
 * block into JSON text, so its backend gives it none (it references image files in the text).
 */
export function userMessage(text: string, images: readonly TurnImage[] = []): Record<string, unknown> {
  return {
    type: "user",
    message: { role: "user", content: [{ type: "text", text }, ...images.map(imageBlock)] },
    parent_tool_use_id: null,
    session_id: "",
  };
}

/** A call of the client's tools reaching the turn (from the MCP endpoint, through the conversation's `ToolSession`). */
type TurnItem = WarmMessage | { kind: "call"; call: ClientToolCall };

/**
 * How long a turn waits after a client tool call for more calls of the same reply before it ends
 * the response with `tool_calls` (a CLI that runs calls one at a time sends the next only after the
 * first is answered; Claude Code sends read-only ones together, within a millisecond).
 */
const SETTLE_MS = 100;

/** Tool uses of our MCP server in an `assistant` line (how many calls the reply makes). */
function bridgedToolUses(msg: Record<string, unknown>): number {
  if (msg.type !== "assistant" || msg.parent_tool_use_id) return 0;
  const content = (msg.message as { content?: unknown } | undefined)?.content;
  if (!Array.isArray(content)) return 0;
  return content.filter(
    (b) =>
      b &&
      typeof b === "object" &&
      (b as { type?: unknown }).type === "tool_use" &&
      String((b as { name?: unknown }).name).startsWith(cliToolPrefix),
  ).length;
}

/**
 * Run one turn on the leased worker: the driver of `runWarmTurn`. With the client's tools
 * (`t.tools`), a call of one of them is announced as a `tool_call` and, once the reply's calls are
 * in, the turn parks (`ctl.parked`, then `done` with `tool_calls`): this generator pauses there,
 * the CLI waits on its MCP call, and the next response resumes it once the client answered.
 */
export async function* streamJsonTurn(
  lease: WarmLease<StreamJsonWorker>,
  t: StreamJsonTurn,
  ctl: WarmTurnControl,
): AsyncGenerator<BackendEvent, WarmTurnEnd> {
  const worker = lease.worker;
  const inbox = new Inbox<TurnItem>();
  worker.markTurn();
  worker.listen(inbox.push);
  t.tools?.listen((call) => inbox.push({ kind: "call", call }));
  let finished = false;
  let sawMessage = false;
  try {
    const preamble = worker.preamble;
    worker.preamble = undefined;
    if (preamble && !(await sendPreamble(worker, inbox, preamble, ctl, t.setupTimeoutMs ?? PREAMBLE_TIMEOUT_MS))) {
      // The standby did not take its conversation's bootstrap: it serves nobody, the turn runs cold.
      finished = true;
      worker.log.warn("a standby did not take its conversation's bootstrap; ending it, the turn runs cold");
      await worker.kill();
      if (ctl.signal.aborted) {
        yield cancelledError(ctl.signal, t.label);
        return { keep: false };
      }
      return { keep: false, lost: true };
    }
    if (!worker.send(userMessage(t.text, t.images))) {
      finished = true;
      return yield* ended(lease, t, ctl, await untilEnd(inbox), false);
    }
    let produced = false;
    /** Client tool calls announced in this response, and how many the CLI's reply made. */
    let announced = 0;
    let expected = 0;
    let index = 0;
    for (;;) {
      const item = await inbox.next(ctl.signal, announced ? SETTLE_MS : undefined);
      if (item === "timeout") {
        // No more calls came (a CLI calling one at a time): end this response; the CLI waits for the client.
        ctl.parked = true;
        yield { type: "done", finishReason: "tool_calls" };
        announced = expected = index = 0;
        continue;
      }
      if (item === "aborted") {
        finished = true;
        const keep = await interrupt(worker, inbox, t.interruptGraceMs);
        yield cancelledError(ctl.signal, t.label);
        return { keep };
      }
      if (item.kind === "end") {
        finished = true;
        return yield* ended(lease, t, ctl, item.end, produced);
      }
      if (item.kind === "call") {
        produced = true;
        t.tools?.announce(item.call.id);
        yield {
          type: "tool_call",
          index: index++,
          id: item.call.id,
          name: item.call.name,
          argumentsDelta: item.call.argumentsJson,
        };
        announced++;
        if (expected && announced >= expected) {
          // Every call of the reply is in: end this response; the CLI waits for the client.
          ctl.parked = true;
          yield { type: "done", finishReason: "tool_calls" };
          announced = expected = index = 0;
        }
        continue;
      }
      const msg = item.message;
      if (!sawMessage && msg.type !== "control_response" && msg.type !== "control_request") {
        sawMessage = true;
        t.onFirstMessage?.();
      }
      if (msg.type === "control_request") {
        answerControl(worker, msg);
        continue;
      }
      if (msg.type === "control_response") continue;
      if (t.tools) expected += bridgedToolUses(msg);
      for (const ev of t.mapper.onEvent(msg)) {
        if (ev.type === "session") worker.sessionId = ev.id;
        else produced = true;
        yield ev;
      }
      if (msg.type === "result") {
        finished = true;
        const final = t.mapper.finish({ code: 0, signal: null, reason: "exit", stderr: worker.stderrOfTurn() });
        for (const ev of final) yield ev;
        const lostSession = final.some((e) => e.type === "error" && e.error.code === "session_not_found");
        return { keep: !lostSession };
      }
    }
  } finally {
    // The consumer stopped early (or the parked turn was abandoned): stop the CLI's turn so the
    // process can serve the next one.
    if (!finished) await interrupt(worker, inbox, t.interruptGraceMs);
    worker.listen(undefined);
    t.tools?.listen(undefined);
  }
}

/** How long a standby's preamble (e.g. Qwen Code's `/clear`) may take. */
const PREAMBLE_TIMEOUT_MS = 30_000;

/**
 * Write a taken standby's preamble and read the turns it causes (dropped). True when every skipped
 * turn ended with a `result` matching `expect`.
 */
async function sendPreamble(
  worker: StreamJsonWorker,
  inbox: Inbox<TurnItem>,
  p: FirstTurnPreamble,
  ctl: WarmTurnControl,
  timeoutMs: number,
): Promise<boolean> {
  for (const m of p.messages) if (!worker.send(m)) return false;
  const deadline = Date.now() + timeoutMs;
  for (let seen = 0, i = 0; seen < p.skipTurns && i < 100_000; i++) {
    const item = await inbox.next(ctl.signal, Math.max(1, deadline - Date.now()));
    if (item === "timeout" || item === "aborted" || item.kind === "end") return false;
    if (item.kind !== "message") continue;
    const msg = item.message;
    if (msg.type === "control_request") answerControl(worker, msg);
    if (msg.type !== "result") continue;
    if (msg.is_error || (p.expect && !p.expect.test(String(msg.result ?? "")))) return false;
    seen++;
  }
  return true;
}

/** The process ended during the turn: the CLI's own answer (fresh), a cold retry, or an error. */
async function* ended(
  lease: WarmLease<StreamJsonWorker>,
  t: StreamJsonTurn,
  ctl: WarmTurnControl,
  end: ProcessEnd,
  produced: boolean,
): AsyncGenerator<BackendEvent, WarmTurnEnd> {
  if (ctl.signal.aborted) {
    yield cancelledError(ctl.signal, t.label);
    return { keep: false };
  }
  if (!produced && !lease.fresh) return { keep: false, lost: true };
  if (produced) {
    yield diedMidTurn(`${t.label} (warm process ${lease.worker.pid})`, `exit ${end.code ?? end.signal}`);
    return { keep: false };
  }
  // A fresh process that ended before answering: what it said is the CLI's answer, as when cold.
  const stderr = lease.worker.stderrOfTurn() || end.stderr;
  for (const ev of t.mapper.finish({ ...end, reason: end.reason === "aborted" ? "exit" : end.reason, stderr }))
    yield ev;
  return { keep: false };
}

async function untilEnd(inbox: Inbox<TurnItem>): Promise<ProcessEnd> {
  for (let i = 0; i < 100_000; i++) {
    const item = await inbox.next(undefined, 10_000);
    if (item !== "timeout" && item !== "aborted" && item.kind === "end") return item.end;
  }
  return { code: null, signal: null, reason: "exit", stderr: "" };
}

/**
 * Ask the CLI to stop its turn and wait (bounded) for the turn's `result`. True: the process obeyed
 * and may serve another turn. False: it was killed.
 */
async function interrupt(worker: StreamJsonWorker, inbox: Inbox<TurnItem>, graceMs: number): Promise<boolean> {
  if (!worker.usable) return false;
  const sent = worker.send({
    type: "control_request",
    request_id: `clawbridge-${randomUUID()}`,
    request: { subtype: "interrupt" },
  });
  if (sent) {
    const deadline = Date.now() + graceMs;
    for (let i = 0; i < 100_000; i++) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const item = await inbox.next(undefined, left);
      if (item === "timeout" || item === "aborted") break;
      if (item.kind === "end") return false;
      if (item.kind === "message" && item.message.type === "result") return true;
    }
  }
  worker.log.debug("warm cli did not stop its turn in time; ending it");
  await worker.kill();
  return false;
}
