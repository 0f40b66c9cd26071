/**
 * Warm Codex: one `codex app-server` process (JSON-RPC over stdio, JSON lines) per conversation,
 * serving turn after turn of ONE thread. Observed with codex 0.169.0 (docs/CLI_FORMATS.md):
 *
 * - `initialize` {clientInfo, capabilities} → {userAgent, codexHome…} (~0.3 s after spawn), then
 *   the `initialized` notification.
 * - `thread/start` {cwd, sandbox, approvalPolicy, model?, baseInstructions?} → {thread: {id}} or
 *   `thread/resume` {threadId, …the same} (an unknown id: error -32600 "no rollout found for thread
 *   id …"). The id is the one `codex exec resume` takes: warm and cold turns alternate on a thread.
 *   `baseInstructions` replaces codex's own base instructions (the first developer message of every
 *   model request), as `model_instructions_file` does for `codex exec`; a process serves one
 *   bootstrap, a changed one gets a new process that resumes the thread with it.
 * - `turn/start` {threadId, input: [{type: "text", text}]} → {turn: {id}}; the turn streams as
 *   notifications (`app-server-events.ts`) and ends with `turn/completed`. The person's images go
 *   before the text as `{type: "image", url: "data:…"}` items (`codexTurnInput`).
 * - `turn/interrupt` {threadId, turnId} → {} and `turn/completed` {status: "interrupted"} within
 *   ~30 ms. Approval requests are declined (the bridge's policy is `never`; nobody can answer) —
 *   except those for the client's tools (below).
 * - Closing stdin ends the server (~40 ms).
 *
 * Standbys (the pool's `warm.standby`): app-servers started and `initialize`d with the backend's
 * options but for no thread, in a folder of their own (`<dataDir>/work/standby`, or the fixed
 * `cwd`), taken by a turn without client tools (whose token is in the process's environment).
 * Everything that differs per conversation is a parameter of `thread/start` / `thread/resume`
 * (cwd, model, base instructions), given at the first turn: a standby serves new and resumed
 * conversations alike, and gets the conversation's settings when taken.
 *
 * The client's tools (issue 17): the app-server is started with the bridge's MCP endpoint as
 * `mcp_servers.openclaw` (src/backends/codex/backend.ts). The model sees them inside a `namespace` tool
 * `mcp__openclaw`; a call is an `mcpToolCall` item, and codex's `tools/call` reaches the bridge,
 * where it waits in the conversation's `ToolSession` while the response ends with `tool_calls`
 * (the turn parks: this driver's generator pauses) until the client's next request answers it. A
 * reply's calls run together (the tools are read-only), so the turn parks once every started
 * `mcpToolCall` item of our server has its call here and 100 ms passed without another. Those calls
 * need no approval (read-only tools, policy `never`); should codex ask anyway (another policy, a
 * per-tool `approval_mode`), an elicitation or `requestUserInput` for OUR server's call is accepted.
 */
import { createHash } from "node:crypto";
import type { ClientToolCall, ToolSession } from "../client-tools/sessions.js";
import type { BackendEvent, TurnImage } from "../contract/backend.js";
import { imageDataUrl } from "../cli/images.js";
import type { WarmLease, WarmPool, WarmWorker } from "../warm/pool.js";
import { Inbox, WarmProcess, type WarmMessage, type WarmProcessSpec } from "../warm/warm-process.js";
import {
  cancelledError,
  diedMidTurn,
  runWarmTurn,
  type ParkedWarmTurn,
  type WarmTurnControl,
  type WarmTurnEnd,
} from "../warm/warm-turn.js";
import {
  classify,
  JsonRpcAborted,
  JsonRpcClient,
  JsonRpcClosed,
  JsonRpcError,
  type JsonRpcIncoming,
} from "../warm/jsonrpc.js";
import { CodexTurnMapper, mcpToolCallOf, type CodexErrorOf } from "./app-server-events.js";

/** How a conversation's thread is set up: what makes a process fit a turn. */
export interface CodexThreadSettings {
  cwd: string;
  sandbox: string;
  approvalPolicy: string;
  /** Absent: the model of codex's config. */
  model?: string;
  /** The bootstrap, replacing codex's base instructions. Absent: codex's own. */
  baseInstructions?: string;
  /** A fingerprint of the client's tools the process was given as an MCP server (absent: none). */
  clientTools?: string;
}

export interface CodexAppServerSpec extends Omit<WarmProcessSpec, "onEnd"> {
  /** `initialize`'s clientInfo (codex derives the `originator` header and User-Agent from it). */
  clientInfo: { name: string; title: string | null; version: string };
  /** Limit for `initialize` and the thread and turn requests. */
  requestTimeoutMs: number;
  /** The MCP server of the client's tools the process was given: codex's approval requests for ITS calls are accepted. */
  clientToolsServer?: string;
}

/** The question id codex gives an MCP tool approval asked through `item/tool/requestUserInput` (`mcp_tool_call_approval_<call id>`). */
const MCP_APPROVAL_QUESTION = "mcp_tool_call_approval_";
/** How many of the client tools' call ids a process remembers (for approvals; calls end long before). */
const CLIENT_TOOL_ITEMS_KEPT = 256;

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});

/** The stderr lines worth showing (no log noise). */
function tail(stderr: string): string {
  return stderr
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !/bubblewrap|PATH aliases/.test(l))
    .slice(-3)
    .join(" | ")
    .slice(0, 400);
}

export class CodexAppServer implements WarmWorker {
  readonly proc: WarmProcess;
  readonly rpc: JsonRpcClient;
  /** The thread it serves, once opened. */
  threadId: string | undefined;
  private sink: ((m: WarmMessage) => void) | undefined;
  /** `mcpToolCall` items of the client tools' server that started (an approval request names one). */
  private readonly clientToolItems = new Set<string>();

  private constructor(
    readonly spec: CodexAppServerSpec,
    /** What it was started for (compared by `fits`); a standby gets the settings of the conversation that takes it. */
    public settings: CodexThreadSettings,
  ) {
    this.proc = new WarmProcess(spec);
    this.rpc = new JsonRpcClient((m) => this.proc.send(m), spec.requestTimeoutMs);
    this.proc.listen(this.route);
  }

  /** Spawn `codex app-server` and initialize it. Rejects (after ending it) when it does not answer. */
  static async start(spec: CodexAppServerSpec, settings: CodexThreadSettings): Promise<CodexAppServer> {
    const w = new CodexAppServer(spec, settings);
    try {
      await w.rpc.request("initialize", { clientInfo: spec.clientInfo, capabilities: null });
      w.rpc.notify("initialized");
    } catch (err) {
      await w.kill();
      const why = tail(w.proc.end?.stderr ?? "");
      throw new Error(`${spec.label} app-server did not start: ${(err as Error).message}${why ? `: ${why}` : ""}`);
    }
    return w;
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  get usable(): boolean {
    return this.proc.usable;
  }

  get ended(): Promise<void> {
    return this.proc.ended;
  }

  close(): Promise<void> {
    return this.proc.close();
  }

  kill(): Promise<void> {
    return this.proc.kill();
  }

  /** Hand this turn the notifications (and the end); undefined: drop them between turns. */
  attach(sink: ((m: WarmMessage) => void) | undefined): void {
    this.sink = sink;
    if (sink && this.proc.end) sink({ kind: "end", end: this.proc.end });
  }

  private route = (m: WarmMessage): void => {
    if (m.kind === "end") {
      this.rpc.close(`${this.spec.label} exited (${m.end.code ?? m.end.signal ?? m.end.reason})`);
      this.sink?.(m);
      return;
    }
    const c = classify(m.message);
    if (c.kind === "response") {
      if (!this.rpc.handleResponse(c)) this.proc.log.debug({ id: c.id }, "codex answered a request nobody waits for");
    } else if (c.kind === "request") this.answer(c);
    else if (c.kind === "notification") {
      this.noteClientToolItem(c.method, c.params);
      this.sink?.(m);
    }
  };

  private noteClientToolItem(method: string, params: unknown): void {
    const server = this.spec.clientToolsServer;
    const call = server ? mcpToolCallOf(method, params) : undefined;
    if (!call || call.server !== server) return;
    if (call.phase === "completed") {
      this.clientToolItems.delete(call.id);
      return;
    }
    this.clientToolItems.add(call.id);
    if (this.clientToolItems.size > CLIENT_TOOL_ITEMS_KEPT)
      this.clientToolItems.delete(this.clientToolItems.values().next().value!);
  }

  /** An elicitation that is codex asking to approve a call of the client tools' server. */
  private approvesClientTool(params: unknown): boolean {
    const p = obj(params);
    return (
      !!this.spec.clientToolsServer &&
      p.serverName === this.spec.clientToolsServer &&
      obj(p._meta).codex_approval_kind === "mcp_tool_call"
    );
  }

  /** `requestUserInput` that only asks to approve a call of the client tools' server: the answers allowing it, else undefined. */
  private clientToolApproval(params: unknown): Record<string, { answers: string[] }> | undefined {
    const p = obj(params);
    const questions = Array.isArray(p.questions) ? p.questions.map(obj) : [];
    if (typeof p.itemId !== "string" || !this.clientToolItems.has(p.itemId) || !questions.length) return undefined;
    if (!questions.every((q) => q.id === `${MCP_APPROVAL_QUESTION}${p.itemId}`)) return undefined;
    return Object.fromEntries(questions.map((q) => [String(q.id), { answers: ["Allow"] }]));
  }

  /**
   * Requests from the server: approvals are declined (nobody can answer), anything else refused —
   * but a call of the client's tools is approved (the client runs it; the bridge offers nothing else).
   */
  private answer(r: Extract<JsonRpcIncoming, { kind: "request" }>): void {
    if (r.method === "mcpServer/elicitation/request" && this.approvesClientTool(r.params)) {
      this.proc.log.debug({ method: r.method }, "codex asked to approve a call of the client's tools; accepting");
      this.rpc.respond(r.id, { action: "accept", content: null, _meta: null });
      return;
    }
    if (r.method === "item/tool/requestUserInput") {
      const answers = this.clientToolApproval(r.params);
      if (answers) {
        this.proc.log.debug({ method: r.method }, "codex asked to approve a call of the client's tools; allowing");
        this.rpc.respond(r.id, { answers });
        return;
      }
    }
    this.proc.log.debug({ method: r.method }, "codex asked the client; declining");
    switch (r.method) {
      case "item/commandExecution/requestApproval":
      case "item/fileChange/requestApproval":
        this.rpc.respond(r.id, { decision: "decline" });
        return;
      case "execCommandApproval":
      case "applyPatchApproval":
        this.rpc.respond(r.id, {
          decision: { denied: { rejection: "the bridge approves nothing (approval policy never)" } },
        });
        return;
      case "mcpServer/elicitation/request":
        this.rpc.respond(r.id, { action: "decline", content: null, _meta: null });
        return;
      default:
        this.rpc.respondError(r.id, -32601, `the bridge does not answer ${r.method}`);
    }
  }

  /** `thread/start`, or `thread/resume` of `resume`; sets `threadId`. */
  async openThread(resume: string | undefined, signal: AbortSignal): Promise<string> {
    const s = this.settings;
    const params = {
      cwd: s.cwd,
      sandbox: s.sandbox,
      approvalPolicy: s.approvalPolicy,
      ...(s.model ? { model: s.model } : {}),
      ...(s.baseInstructions ? { baseInstructions: s.baseInstructions } : {}),
    };
    const r = await this.rpc.request<{ thread?: { id?: unknown } }>(
      resume ? "thread/resume" : "thread/start",
      resume ? { threadId: resume, ...params, excludeTurns: true } : params,
      { signal },
    );
    const id = r?.thread?.id;
    if (typeof id !== "string" || !id)
      throw new Error(`${resume ? "thread/resume" : "thread/start"} answered without a thread id`);
    this.threadId = id;
    return id;
  }
}

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
