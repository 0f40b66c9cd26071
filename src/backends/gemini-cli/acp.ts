/**
 * A warm CLI speaking the Agent Client Protocol (ACP: JSON-RPC over stdio; `gemini --acp`,
 * `qwen --acp`), through the protocol's own SDK (`@agentclientprotocol/sdk`) over a `WarmProcess`
 * — so the process is a `CliProcess` the orphan watcher and the start-up reaper know.
 *
 * One process serves one conversation: `initialize` once, then per turn the conversation's
 * session — `session/new` for a conversation without one, `session/load` for a session id the
 * process does not hold yet — and `session/prompt` with the turn's text (and the person's images as
 * `image` blocks, `acpPrompt`). `session/update`
 * notifications become events (message chunks → text, thought chunks → reasoning, tool calls →
 * tool_activity); the prompt's answer (`stopReason`, `_meta.quota`) ends the turn. An abort sends
 * `session/cancel`; a CLI that does not answer the prompt within the grace period is killed.
 * No file-system or terminal capability is advertised: the agent uses its own tools, and asks
 * permission for the ones that need it (`permission` decides).
 *
 * The client's tools (`tools: bridge`): the sessions are opened with the bridge's MCP endpoint in
 * `mcpServers`; a call of one of them reaches the turn through the conversation's `ToolSession`,
 * is announced as a `tool_call`, and once the reply's calls are in the turn parks (`ctl.parked`,
 * then `done` with `tool_calls`) with the prompt still running — the agent waits on its MCP call —
 * and goes on into the next response when the client answered.
 *
 * Here: one turn (`acpTurn`). The worker, its process and permissions are in acp-worker.ts; updates
 * and the prompt's answer become events in acp-updates.ts.
 */
import type * as acp from "@agentclientprotocol/sdk";
import type { ClientToolCall, ToolSession } from "../client-tools/sessions.js";
import type { BackendError, BackendEvent, TurnImage } from "../contract/backend.js";
import type { WarmLease } from "../warm/pool.js";
import { Inbox } from "../warm/warm-process.js";
import { cancelledError, diedMidTurn, type WarmTurnControl, type WarmTurnEnd } from "../warm/warm-turn.js";
import { AcpUpdateMapper, finishOf, usageOf } from "./acp-updates.js";
import { type AcpFailure, type AcpWorker, failureOf } from "./acp-worker.js";

type Item =
  | { kind: "update"; update: acp.SessionUpdate }
  | { kind: "result"; value: unknown }
  | { kind: "failed"; failure: AcpFailure }
  | { kind: "end" }
  /** A call of the client's tools (from the MCP endpoint, through the conversation's `ToolSession`). */
  | { kind: "call"; call: ClientToolCall }
  | { kind: "abort" }
  | { kind: "timeout" };

/** What the turn's queue holds (abort and timeout are outcomes of waiting on it). */
type Queued = Exclude<Item, { kind: "abort" } | { kind: "timeout" }>;

/**
 * How long a turn waits after a client tool call for more calls of the same reply before it ends
 * the response with `tool_calls` (gemini 0.61 runs a reply's calls one at a time, the next only
 * after the first is answered, and says nothing of the reply's calls beforehand).
 */
const SETTLE_MS = 100;

export interface AcpTurnSpec {
  label: string;
  cwd: string;
  /** Resume this session (the conversation's backend session id). */
  sessionId: string | undefined;
  text: string;
  /** The person's images of this turn: `image` content blocks after the text (see `acpPrompt`). */
  images?: readonly TurnImage[];
  interruptGraceMs: number;
  /** MCP servers for `session/new` and `session/load` (the client's tools; none by default). */
  mcpServers?: acp.McpServer[];
  /** The conversation's client tools, when the sessions get their MCP server (`mcpServers`). */
  tools?: Pick<ToolSession, "listen" | "announce">;
  /** Limit for `initialize`, `session/new` and `session/load`. */
  setupTimeoutMs: number;
  /** Called before and after a successful `session/load` (a CLI whose loading needs help with its files). */
  beforeLoad?(sessionId: string): void;
  afterLoad?(sessionId: string): void;
  /** `session/load` failed (the session is gone): clean up what the attempt left. */
  loadFailed?(sessionId: string): void;
  /** An error answer → the turn's error (`session_not_found`, `upstream_error`...). */
  error(failure: AcpFailure, stderr: string): BackendError;
  /** The tool's name for `tool_activity` (default: the ACP tool kind). */
  toolName?(update: { toolCallId: string; title?: string | null; kind?: string | null }): string;
}

/** How long a loaded session's history replay may keep arriving, and the quiet that ends it. */
const REPLAY_QUIET_MS = 120;
const REPLAY_MAX_MS = 3000;

/**
 * One turn on an ACP worker: set-up as needed, the prompt, its updates as events, exactly one
 * done/error. The worker is kept unless it died, was killed, or set-up failed. With the client's
 * tools (`spec.tools`), a call of one of them is announced as a `tool_call` and, once the reply's
 * calls are in, the turn parks (`ctl.parked`, then `done` with `tool_calls`): this generator pauses
 * there with the prompt running, and follows the new `ctl.signal` once resumed. Returned early
 * (abandoned, or the consumer went away), it cancels the prompt.
 */
export async function* acpTurn(
  lease: WarmLease<AcpWorker>,
  spec: AcpTurnSpec,
  ctl: WarmTurnControl,
): AsyncGenerator<BackendEvent, WarmTurnEnd> {
  const w = lease.worker;
  w.proc.markTurn();
  const inbox = new Inbox<Queued>();
  const push = inbox.push;
  void w.ended.then(() => push({ kind: "end" }));
  /** The next item; `abort` when the turn's CURRENT signal aborts (`watch`), `timeout` after `timeoutMs`. */
  const next = async (timeoutMs?: number, watch = true): Promise<Item> => {
    const it = await inbox.next(watch ? ctl.signal : undefined, timeoutMs);
    return it === "timeout" ? { kind: "timeout" } : it === "aborted" ? { kind: "abort" } : it;
  };
  /** One request, its answer pushed as result/failed; the other items stay queued in order. */
  const call = (method: string, p: Promise<unknown>) => {
    p.then(
      (value) => push({ kind: "result", value }),
      (err) => push({ kind: "failed", failure: failureOf(method, err) }),
    );
  };
  let produced = false;
  let prompting = false;
  let settled = false;
  const stderr = () => w.proc.stderrOfTurn();
  const lostOrDied = (): WarmTurnEnd & { event?: BackendEvent } =>
    produced || lease.fresh
      ? { keep: false, event: diedMidTurn(spec.label, tail(stderr() || (w.proc.end?.stderr ?? ""))) }
      : { keep: false, lost: true };
  const mcpServers = spec.mcpServers ?? [];

  /** Wait for the answer of a set-up request: value, or how the turn ends instead. */
  async function* setup<T>(
    method: string,
    p: Promise<T>,
  ): AsyncGenerator<BackendEvent, { value?: T; end?: WarmTurnEnd }> {
    call(method, p);
    const deadline = Date.now() + spec.setupTimeoutMs;
    for (;;) {
      const it = await next(Math.max(1, deadline - Date.now()));
      if (it.kind === "update" || it.kind === "call") continue; // history replay, available commands: not this turn's
      if (it.kind === "result") return { value: it.value as T };
      if (it.kind === "abort") {
        yield cancelledError(ctl.signal, spec.label);
        return { end: { keep: false } };
      }
      if (it.kind === "end" || (it.kind === "failed" && !w.proc.usable)) {
        const d = lostOrDied();
        if (d.event) yield d.event;
        return { end: d };
      }
      if (it.kind === "timeout") {
        yield {
          type: "error",
          error: {
            code: "backend_failed",
            message: `${spec.label} did not answer ${method} within ${Math.round(spec.setupTimeoutMs / 1000)}s`,
            status: 502,
            retryable: true,
          },
        };
        return { end: { keep: false } };
      }
      if (it.kind === "failed") {
        yield { type: "error", error: spec.error(it.failure, stderr()) };
        return { end: { keep: false } };
      }
    }
  }

  try {
    if (ctl.signal.aborted) {
      yield cancelledError(ctl.signal, spec.label);
      return { keep: true };
    }
    const init = yield* setup("initialize", w.initialize());
    if (init.end) return init.end;
    // The session.
    if (!spec.sessionId || spec.sessionId !== w.sessionId) {
      let opened: string | undefined;
      if (!spec.sessionId) {
        const r = yield* setup("session/new", w.conn.agent.request("session/new", { cwd: spec.cwd, mcpServers }));
        if (r.end) return r.end;
        opened = r.value!.sessionId;
      } else {
        if (!w.agentInfo?.agentCapabilities?.loadSession) {
          yield {
            type: "error",
            error: {
              code: "session_not_found",
              message: `${spec.label} cannot load session ${spec.sessionId} (no loadSession capability)`,
              status: 404,
            },
          };
          return { keep: false };
        }
        spec.beforeLoad?.(spec.sessionId);
        // Updates of the loaded session (its history, replayed) are routed from now on, and dropped.
        w.sessionId = spec.sessionId;
        w.sink = undefined;
        const r = yield* setup(
          "session/load",
          w.conn.agent.request("session/load", { sessionId: spec.sessionId, cwd: spec.cwd, mcpServers }),
        );
        if (r.end) {
          w.sessionId = undefined;
          // The process keeps what it started for the dead session (gemini may write it later): it
          // is not reused, and the backend cleans up once it has ended.
          w.proc.broken = true;
          spec.loadFailed?.(spec.sessionId);
          return r.end;
        }
        opened = spec.sessionId;
        spec.afterLoad?.(spec.sessionId);
        // The replay may still be arriving after the answer: wait for it to stop.
        const until = Date.now() + REPLAY_MAX_MS;
        while (Date.now() < until && Date.now() - w.lastUpdateAt < REPLAY_QUIET_MS) await sleep(REPLAY_QUIET_MS / 3);
      }
      w.sessionId = opened;
      w.sessionsOpened++;
      yield { type: "session", id: opened };
    } else {
      yield { type: "session", id: w.sessionId };
    }
    // The prompt.
    const sessionId = w.sessionId!;
    w.sink = (update) => push({ kind: "update", update });
    spec.tools?.listen((c) => push({ kind: "call", call: c }));
    prompting = true;
    call("session/prompt", w.conn.agent.request("session/prompt", { sessionId, prompt: acpPrompt(spec, w.agentInfo) }));
    const mapper = new AcpUpdateMapper(spec.toolName);
    /** Client tool calls announced in this response (their index restarts with each response). */
    let announced = 0;
    for (;;) {
      const it = await next(announced ? SETTLE_MS : undefined);
      if (it.kind === "timeout") {
        // No other call came: end this response; the agent waits on its MCP call for the client.
        ctl.parked = true;
        yield { type: "done", finishReason: "tool_calls" };
        // Resumed (the client answered): this response's signal is `ctl.signal` from now on.
        announced = 0;
        continue;
      }
      if (it.kind === "call") {
        produced = true;
        spec.tools?.announce(it.call.id);
        yield {
          type: "tool_call",
          index: announced++,
          id: it.call.id,
          name: it.call.name,
          argumentsDelta: it.call.argumentsJson,
        };
        continue;
      }
      if (it.kind === "update") {
        for (const ev of mapper.map(it.update)) {
          produced = true;
          yield ev;
        }
        continue;
      }
      if (it.kind === "abort") {
        prompting = false;
        const keep = await interrupt(w, sessionId, spec.interruptGraceMs, (ms) => next(ms, false));
        settled = true;
        yield cancelledError(ctl.signal, spec.label);
        return { keep };
      }
      if (it.kind === "end" || (it.kind === "failed" && !w.proc.usable)) {
        prompting = false;
        settled = true;
        const d = lostOrDied();
        if (d.event) yield d.event;
        return d;
      }
      if (it.kind === "failed") {
        prompting = false;
        settled = true;
        yield { type: "error", error: spec.error(it.failure, stderr()) };
        return { keep: true };
      }
      if (it.kind === "result") {
        prompting = false;
        settled = true;
        // Notifications are dispatched through promise chains: let the last ones land first.
        await new Promise((r) => setImmediate(r));
        for (
          let it2 = await inbox.next(undefined, 0);
          it2 !== "timeout" && it2 !== "aborted";
          it2 = await inbox.next(undefined, 0)
        ) {
          if (it2.kind === "update") for (const ev of mapper.map(it2.update)) yield ev;
          else if (it2.kind === "end") break;
        }
        const res = (it.value ?? {}) as acp.PromptResponse;
        const usage = usageOf(res);
        if (usage) yield { type: "usage", usage };
        if (res.stopReason === "cancelled") {
          yield {
            type: "error",
            error: {
              code: "backend_failed",
              message: `${spec.label} cancelled the turn on its own`,
              status: 502,
              retryable: true,
            },
          };
          return { keep: true };
        }
        yield { type: "done", finishReason: finishOf(res.stopReason) };
        return { keep: true };
      }
    }
  } finally {
    spec.tools?.listen(undefined);
    // The consumer stopped early in the middle of the prompt (or the parked turn was abandoned):
    // cancel it like an abort.
    if (prompting && !settled && w.sessionId) {
      const keep = await interrupt(w, w.sessionId, spec.interruptGraceMs, (ms) => next(ms, false));
      if (!keep) w.proc.broken = true;
    }
    w.sink = undefined;
  }
}

/**
 * `session/prompt`'s content: the text, then each image as an `image` block {data, mimeType} when
 * the agent says it takes them (`promptCapabilities.image`; gemini 0.61 does and sends each as an
 * `inlineData` part). An agent that does not is told in the text that images were not passed.
 */
export function acpPrompt(
  spec: Pick<AcpTurnSpec, "label" | "text" | "images">,
  agent: acp.InitializeResponse | undefined,
): acp.ContentBlock[] {
  const images = spec.images ?? [];
  if (!images.length) return [{ type: "text", text: spec.text }];
  if (!agent?.agentCapabilities?.promptCapabilities?.image) {
    const n = images.length === 1 ? "an image" : `${images.length} images`;
    return [
      {
        type: "text",
        text: `${spec.text}\n\n[The person sent ${n} with this message, but ${spec.label} does not take images here, so ${images.length === 1 ? "it was" : "they were"} not passed on. Say so if it matters.]`,
      },
    ];
  }
  return [
    { type: "text", text: spec.text },
    ...images.map((i): acp.ContentBlock => ({ type: "image", data: i.base64, mimeType: i.mediaType })),
  ];
}

/** `session/cancel`, then wait for the prompt's answer; not given in time → kill. True: the worker may stay. */
async function interrupt(
  w: AcpWorker,
  sessionId: string,
  graceMs: number,
  next: (ms: number) => Promise<Item>,
): Promise<boolean> {
  w.sink = undefined;
  if (w.proc.usable) {
    void w.conn.agent.notify("session/cancel", { sessionId }).catch(() => undefined);
    const until = Date.now() + graceMs;
    for (let left = graceMs; left > 0; left = until - Date.now()) {
      const it = await next(left);
      if (it.kind === "result" || it.kind === "failed") {
        if (w.proc.usable) return true;
        break;
      }
      if (it.kind === "end") return false;
    }
    w.proc.log.debug({ graceMs }, "acp prompt not cancelled in time; killing the process");
  }
  await w.kill();
  return false;
}

/** The last meaningful stderr lines of a turn. */
function tail(stderr: string): string {
  return stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/^at\s/.test(l) && !/Ripgrep is not available|^\[STARTUP\]/.test(l))
    .slice(-3)
    .join(" | ")
    .slice(0, 500);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
