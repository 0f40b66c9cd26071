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
 *   before the text as `{type: "image", url: "data:…"}` items (`codexTurnInput`). One turn on this
 *   process: ./app-server-turn.ts.
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
import type { WarmWorker } from "../warm/pool.js";
import { WarmProcess, type WarmMessage, type WarmProcessSpec } from "../warm/warm-process.js";
import { classify, JsonRpcClient, type JsonRpcIncoming } from "../warm/jsonrpc.js";
import { mcpToolCallOf } from "./app-server-events.js";

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
export function tail(stderr: string): string {
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
