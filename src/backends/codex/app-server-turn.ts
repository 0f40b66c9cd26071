/**
 * One warm Codex turn on a conversation's `codex app-server` (./app-server.ts): the process from the
 * pool (or a standby), the thread started or resumed, the person's text and images as `turn/start`
 * input (`codexTurnInput`), the notifications mapped to backend events (./app-server-events.ts),
 * and the turn parked while the client's tools answer (see app-server.ts's header).
 */
import { createHash } from "node:crypto";
import type { ClientToolCall, ToolSession } from "../client-tools/sessions.js";
import type { BackendEvent, TurnImage } from "../contract/backend.js";
import { imageDataUrl } from "../cli/images.js";
import type { WarmLease, WarmPool } from "../warm/pool.js";
import { Inbox, type WarmMessage } from "../warm/warm-process.js";
import {
  cancelledError,
  diedMidTurn,
  runWarmTurn,
  type ParkedWarmTurn,
  type WarmTurnControl,
  type WarmTurnEnd,
} from "../warm/warm-turn.js";
import { JsonRpcAborted, JsonRpcClosed, JsonRpcError } from "../warm/jsonrpc.js";
import { CodexTurnMapper, mcpToolCallOf, type CodexErrorOf } from "./app-server-events.js";
import { CodexAppServer, type CodexAppServerSpec, type CodexThreadSettings, tail } from "./app-server.js";

/** What one warm Codex turn needs from the backend. */
export interface CodexWarmTurnSpec {
  pool: WarmPool<CodexAppServer>;
  /** The conversation key. */
  key: string;
  signal: AbortSignal;
  /** The thread to resume (`turn.session.backendSessionId`). */
  resume: string | undefined;
  prompt: string;
  /**
   * The person's images of this turn: `image` input items with a data URL, before the text (as
   * `codex exec --image` puts them); codex sends each as an `input_image` of the user message.
   */
  images?: readonly TurnImage[];
  settings: CodexThreadSettings;
  server: CodexAppServerSpec;
  interruptGraceMs: number;
  /** codex's error text → a bridge error (the cold path's classification). */
  errorOf: CodexErrorOf;
  /** How codex words a thread it cannot find. */
  sessionNotFound: RegExp;
  /** The same turn with `codex exec` (no worker free, or a reused one lost before any output). */
  cold(): AsyncGenerator<BackendEvent>;
  onWorker?(worker: CodexAppServer): void;
  /**
   * The conversation's client tools, when the app-server was given them as an MCP server
   * (`server.clientToolsServer`): a call of one is announced as a `tool_call` and parks the turn.
   */
  tools?: Pick<ToolSession, "listen" | "announce">;
  /** The turn parked on a client tool call: keep it (`parkIn`). */
  onPark?(turn: ParkedWarmTurn<CodexAppServer>): void;
  /**
   * The standbys this turn may start on (no client tools): what they share (hashed into the pool's
   * kind) and how one is started (in its own folder; the thread's cwd comes with `thread/start`).
   */
  standby?: { kind: unknown[]; server: CodexAppServerSpec };
}

const same = (a: CodexThreadSettings, b: CodexThreadSettings) =>
  a.cwd === b.cwd &&
  a.sandbox === b.sandbox &&
  a.approvalPolicy === b.approvalPolicy &&
  a.model === b.model &&
  a.baseInstructions === b.baseInstructions &&
  (a.clientTools ?? "") === (b.clientTools ?? "");

/** One Codex turn on the conversation's warm app-server (started or reused), else cold. */
export function runCodexWarmTurn(spec: CodexWarmTurnSpec): AsyncGenerator<BackendEvent> {
  return runWarmTurn<CodexAppServer>({
    pool: spec.pool,
    key: spec.key,
    signal: spec.signal,
    fits: (w) => w.threadId !== undefined && w.threadId === spec.resume && same(w.settings, spec.settings),
    start: () => CodexAppServer.start(spec.server, spec.settings),
    ...(spec.standby && !spec.tools
      ? {
          standby: {
            kind: createHash("sha256").update(JSON.stringify(spec.standby.kind)).digest("hex"),
            start: () => CodexAppServer.start(spec.standby!.server, spec.settings),
            adopt: (w: CodexAppServer) => {
              if (w.threadId !== undefined) return false;
              w.settings = spec.settings;
              return true;
            },
          },
        }
      : {}),
    drive: (lease, ctl) => driveCodexTurn(lease, spec, ctl),
    cold: () => spec.cold(),
    onWorker: spec.onWorker,
    ...(spec.onPark ? { onPark: spec.onPark } : {}),
  });
}

/**
 * `turn/start`'s `input` (`UserInput[]` of the app-server protocol, codex 0.169: `codex app-server
 * generate-ts`): the images as `{type: "image", url}` with a data URL (no file needed), then the text.
 */
export function codexTurnInput(prompt: string, images: readonly TurnImage[] = []): Record<string, unknown>[] {
  return [
    ...images.map((image) => ({ type: "image", url: imageDataUrl(image) })),
    { type: "text", text: prompt, text_elements: [] },
  ];
}

/** A call of the client's tools reaching the turn (from the MCP endpoint, through the conversation's `ToolSession`). */
type TurnItem = WarmMessage | { kind: "call"; call: ClientToolCall };

/**
 * How long a turn waits, once every started call of the client's tools has reached the bridge, for
 * another before it ends the response with `tool_calls` (codex starts a reply's read-only calls
 * together, within milliseconds).
 */
const SETTLE_MS = 100;

/**
 * Stop the running turn: `turn/interrupt` (once its id is known) and wait for its `turn/completed`
 * within the grace; a CLI that does not obey in time is killed. True when it obeyed.
 */
async function stopTurn(
  w: CodexAppServer,
  mapper: CodexTurnMapper | undefined,
  inbox: Inbox<TurnItem>,
  graceMs: number,
): Promise<boolean> {
  if (!w.usable) return false;
  // No turn started yet (the consumer stopped at the session event): nothing to stop.
  if (!mapper) return true;
  const until = Date.now() + graceMs;
  let asked = false;
  while (!mapper.finished) {
    if (!asked && mapper.turnId && w.threadId) {
      asked = true;
      w.rpc
        .request("turn/interrupt", { threadId: w.threadId, turnId: mapper.turnId }, { timeoutMs: Math.max(1, graceMs) })
        .catch(() => undefined);
    }
    const left = until - Date.now();
    if (left <= 0) break;
    const m = await inbox.next(undefined, asked ? left : Math.min(left, 50));
    if (m === "timeout" || m === "aborted" || m.kind === "call") continue;
    if (m.kind === "end") return false;
    mapper.onNotification(String(m.message.method), m.message.params);
  }
  if (mapper.finished) return true;
  w.proc.log.debug({ graceMs }, "codex did not stop its turn in time; killing it");
  await w.kill();
  return false;
}

/**
 * Run one turn on the leased worker: thread (first turn), `turn/start`, notifications → events.
 * The driver of `runWarmTurn`: with the client's tools (`spec.tools`), a call of one is announced as
 * a `tool_call` and, once the reply's calls are in, the turn parks (`ctl.parked`, then `done` with
 * `tool_calls`): this generator pauses there while codex waits on its MCP call, and the next
 * response resumes it (with its own `ctl.signal`) once the client answered.
 */
export async function* driveCodexTurn(
  lease: WarmLease<CodexAppServer>,
  spec: CodexWarmTurnSpec,
  ctl: WarmTurnControl,
): AsyncGenerator<BackendEvent, WarmTurnEnd> {
  const w = lease.worker;
  const label = spec.server.label;
  const ours = spec.server.clientToolsServer;
  const inbox = new Inbox<TurnItem>();
  w.attach(inbox.push);
  spec.tools?.listen((call) => inbox.push({ kind: "call", call }));
  w.proc.markTurn();
  let mapper: CodexTurnMapper | undefined;
  let ended = false;
  // A reused worker confirms its thread only with the first output: a process lost before any
  // output may then be replaced by a cold run of the same turn (`WarmTurnEnd.lost`).
  let sessionDue = false;
  const stderr = () => tail(w.proc.stderrOfTurn());
  try {
    if (!w.threadId) {
      try {
        await w.openThread(spec.resume, ctl.signal);
      } catch (err) {
        ended = true;
        if (ctl.signal.aborted || err instanceof JsonRpcAborted) {
          yield cancelledError(ctl.signal, label);
        } else if (err instanceof JsonRpcError && spec.resume && spec.sessionNotFound.test(err.message)) {
          yield {
            type: "error",
            error: { code: "session_not_found", message: `${label}: ${err.message}`, status: 404 },
          };
        } else if (err instanceof JsonRpcError && /already has an active writer/i.test(err.message)) {
          // Another codex process (a cold `codex exec` of another backend, another bridge) has the thread open.
          yield {
            type: "error",
            error: { code: "backend_failed", message: `${label}: ${err.message}`, status: 409, retryable: true },
          };
        } else if (err instanceof JsonRpcClosed) {
          yield {
            type: "error",
            error: {
              code: "backend_failed",
              message: `${label} ended before the thread was opened${stderr() ? `: ${stderr()}` : ""}`,
              status: 502,
              retryable: true,
            },
          };
        } else {
          yield {
            type: "error",
            error: { code: "backend_failed", message: `${label}: ${(err as Error).message}`, status: 502 },
          };
        }
        return { keep: false };
      }
      yield { type: "session", id: w.threadId! };
    } else sessionDue = true;
    const m = new CodexTurnMapper(label, w.threadId!, spec.errorOf);
    mapper = m;
    const started = await w.rpc
      .request<{ turn?: { id?: unknown } }>(
        "turn/start",
        { threadId: w.threadId, input: codexTurnInput(spec.prompt, spec.images) },
        { signal: ctl.signal },
      )
      .then((r) => {
        if (typeof r?.turn?.id === "string") m.turnId ??= r.turn.id;
        return undefined;
      })
      .catch((err: Error) => err);
    if (
      started instanceof JsonRpcError ||
      (started && !(started instanceof JsonRpcAborted) && !(started instanceof JsonRpcClosed))
    ) {
      ended = true;
      yield {
        type: "error",
        error: { code: "backend_failed", message: `${label}: turn/start failed: ${started.message}`, status: 502 },
      };
      return { keep: started instanceof JsonRpcError };
    }
    /** A client tool call was announced (output the mapper does not see). */
    let called = false;
    // This response's calls of the client's tools: announced, their `tool_call` index, the started
    // `mcpToolCall` items of our server not ended yet, and when to park if nothing more comes.
    let announced = 0;
    let index = 0;
    const open = new Set<string>();
    let settleAt = 0;
    for (let n = 0; ; n++) {
      const settle = announced > 0 && announced >= open.size ? Math.max(1, settleAt - Date.now()) : undefined;
      // Read anew every time: a resumed turn follows the new response's signal.
      const next = await inbox.next(ctl.signal, settle);
      if (next === "aborted") break;
      if (next === "timeout") {
        // Every call of the reply is in: end this response; codex waits for the client.
        ctl.parked = true;
        yield { type: "done", finishReason: "tool_calls" };
        announced = index = 0;
        open.clear();
        continue;
      }
      if (next.kind === "end") {
        ended = true;
        if (!m.produced && !called && !lease.fresh) return { keep: false, lost: true };
        if (sessionDue) yield { type: "session", id: w.threadId! };
        yield m.pendingError() ??
          diedMidTurn(
            label,
            [next.end.signal ? `killed by ${next.end.signal}` : `exit ${next.end.code}`, stderr()]
              .filter(Boolean)
              .join(": "),
          );
        return { keep: false };
      }
      if (next.kind === "call") {
        if (sessionDue) {
          sessionDue = false;
          yield { type: "session", id: w.threadId! };
        }
        called = true;
        spec.tools?.announce(next.call.id);
        yield {
          type: "tool_call",
          index: index++,
          id: next.call.id,
          name: next.call.name,
          argumentsDelta: next.call.argumentsJson,
        };
        announced++;
        settleAt = Date.now() + SETTLE_MS;
        continue;
      }
      const method = String(next.message.method);
      const call = ours && spec.tools ? mcpToolCallOf(method, next.message.params) : undefined;
      if (call && call.server === ours) {
        if (call.phase === "started") {
          open.add(call.id);
          settleAt = Date.now() + SETTLE_MS;
        } else open.delete(call.id);
      }
      const evs = m.onNotification(method, next.message.params);
      if (m.finished) evs.push(...m.final());
      for (const ev of evs) {
        if (sessionDue) {
          sessionDue = false;
          yield { type: "session", id: w.threadId! };
        }
        if (ev.type === "done" || ev.type === "error") ended = true;
        yield ev;
      }
      if (ended) {
        if (m.notes.length) w.proc.log.debug({ notes: m.notes.slice(0, 10) }, "codex notes of the turn");
        return { keep: true };
      }
      if (n > 10_000_000) break;
    }
    // Cancelled (client gone, shutdown, the turn's deadline).
    const obeyed = await stopTurn(w, m, inbox, spec.interruptGraceMs);
    ended = true;
    yield cancelledError(ctl.signal, label);
    return { keep: obeyed };
  } finally {
    // The consumer stopped reading early, the parked turn was abandoned (the client moved on, its
    // result did not come in time), or something threw: stop the CLI's turn too.
    if (!ended) await stopTurn(w, mapper, inbox, spec.interruptGraceMs);
    w.attach(undefined);
    spec.tools?.listen(undefined);
  }
}
