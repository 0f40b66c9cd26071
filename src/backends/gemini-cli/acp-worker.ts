/**
 * One warm ACP process (`gemini --acp`, `qwen --acp`) as a pool worker: a `WarmProcess` (so the
 * orphan watcher and the start-up reaper know it) with the protocol's own SDK
 * (`@agentclientprotocol/sdk`) connected over its stdio, `initialize` once, `session/update`
 * notifications routed to the turn being served, and the agent's permission requests answered by
 * the bridge's policy (`acpPermissionPolicy`). Also how a failed request is described (`AcpFailure`).
 */
import * as acp from "@agentclientprotocol/sdk";
import type { WarmWorker } from "../warm/pool.js";
import { WarmProcess, type WarmProcessSpec } from "../warm/warm-process.js";

/** How the bridge answers the agent's `session/request_permission`. */
export type AcpPermissionPolicy = (req: acp.RequestPermissionRequest) => "allow" | "reject";

/** Tool kinds that only look (never change anything). */
const READ_ONLY_KINDS = new Set(["read", "search", "fetch", "think"]);

/** `read-only`: only looking tools; `edits`: those and file edits; `all`: anything. */
export function acpPermissionPolicy(allow: "read-only" | "edits" | "all"): AcpPermissionPolicy {
  return (req) => {
    if (allow === "all") return "allow";
    const kind = String(req.toolCall?.kind ?? "other");
    if (READ_ONLY_KINDS.has(kind)) return "allow";
    return allow === "edits" && (kind === "edit" || kind === "delete" || kind === "move") ? "allow" : "reject";
  };
}

/** A request the agent answered with an error (or that could not be sent). */
export interface AcpFailure {
  method: string;
  code?: number;
  message: string;
  /** `error.data.details` or the like, when the agent gave one. */
  details?: string;
}

export interface AcpWorkerSpec extends WarmProcessSpec {
  /** Everything besides the session the process was started with (bootstrap, model, cwd...). */
  fingerprint: string;
  permission: AcpPermissionPolicy;
}

/** At most this many sessions opened in one process (stateless turns open one each). */
const MAX_SESSIONS = 32;

export class AcpWorker implements WarmWorker {
  readonly proc: WarmProcess;
  readonly conn: acp.ClientConnection;
  /** The session the process holds now (after `session/new` or `session/load`). */
  sessionId: string | undefined;
  sessionsOpened = 0;
  /** The agent's `initialize` answer, once given. */
  agentInfo: acp.InitializeResponse | undefined;
  private initializing: Promise<acp.InitializeResponse> | undefined;
  /** Where `session/update` notifications of `sessionId` go now (the turn being served). */
  sink: ((u: acp.SessionUpdate) => void) | undefined;
  /** Updates seen for the session since the last `quiet()` check (history replay after a load). */
  lastUpdateAt = 0;
  /**
   * What the process was started with besides the session (`spec.fingerprint`); a standby gets the
   * fingerprint of the conversation that takes it.
   */
  fingerprint: string;

  constructor(readonly spec: AcpWorkerSpec) {
    this.fingerprint = spec.fingerprint;
    this.proc = new WarmProcess(spec);
    const proc = this.proc;
    const readable = new ReadableStream<acp.AnyMessage>({
      start(controller) {
        proc.listen((m) => {
          if (m.kind === "message") controller.enqueue(m.message as unknown as acp.AnyMessage);
          else
            try {
              controller.close();
            } catch {
              /* already closed */
            }
        });
      },
    });
    const writable = new WritableStream<acp.AnyMessage>({
      write(msg) {
        if (!proc.send(msg)) throw new Error(`${spec.label} can no longer take input`);
      },
    });
    const app = acp
      .client({ name: "clawbridge" })
      .onNotification("session/update", ({ params }) => {
        if (params.sessionId !== this.sessionId) return;
        this.lastUpdateAt = Date.now();
        this.sink?.(params.update);
      })
      .onRequest("session/request_permission", ({ params }) => {
        const verdict = spec.permission(params);
        const wanted = verdict === "allow" ? ["allow_once", "allow_always"] : ["reject_once", "reject_always"];
        const option = wanted.map((k) => params.options.find((o) => o.kind === k)).find(Boolean);
        this.proc.log.debug(
          { tool: params.toolCall?.title, kind: params.toolCall?.kind, verdict },
          "acp permission request",
        );
        return option
          ? { outcome: { outcome: "selected", optionId: option.optionId } }
          : { outcome: { outcome: "cancelled" } };
      });
    this.conn = app.connect({ readable, writable });
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }
  get usable(): boolean {
    return this.proc.usable && this.sessionsOpened < MAX_SESSIONS;
  }
  get ended(): Promise<void> {
    return this.proc.ended;
  }
  async close(): Promise<void> {
    this.conn.close();
    await this.proc.close();
  }
  async kill(): Promise<void> {
    this.conn.close();
    await this.proc.kill();
  }

  /** `initialize` once per process (no fs/terminal capabilities: the agent uses its own tools). */
  initialize(): Promise<acp.InitializeResponse> {
    this.initializing ??= this.conn.agent
      .request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: { name: "clawbridge", version: "0" },
      })
      .then((r) => (this.agentInfo = r));
    return this.initializing;
  }
}

export function failureOf(method: string, err: unknown): AcpFailure {
  if (err instanceof acp.RequestError) {
    const data = err.data as Record<string, unknown> | undefined;
    const details = typeof data?.details === "string" ? data.details : typeof data === "string" ? data : undefined;
    return { method, code: err.code, message: err.message, ...(details ? { details } : {}) };
  }
  return { method, message: err instanceof Error ? err.message : String(err) };
}
