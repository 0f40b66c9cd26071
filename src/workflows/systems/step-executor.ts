/**
 * The contract every kind of run (webhook, command, mcp, model, approval) keeps. The run manager
 * (src/workflows/systems/runner.ts) calls an executor once per attempt of a step; a single-kind system is a
 * plan of one step. An executor substitutes its own templates (it knows where values must be
 * URL-encoded or kept typed), streams what it produces through `ctx.output`, and either returns the
 * step's output or throws an `ExecError` that says whether another attempt may succeed.
 */
import type { Logger } from "pino";
import type { BackendEvent } from "../../backends/contract/backend.js";
import type { Cancellation } from "../../core/util/cancel.js";
import type { Scope } from "../engine/template.js";
import type { Decision, OnTimeout } from "./approvals.js";

export type ExecErrorCode =
  | "timeout"
  | "http_status"
  | "exit_code"
  | "spawn_failed"
  | "network"
  | "bad_reply"
  | "tool_error"
  | "model_error"
  | "cancelled"
  | "invalid";

export class ExecError extends Error {
  constructor(
    readonly code: ExecErrorCode,
    message: string,
    /** Whether the same attempt may succeed if tried again (timeouts, 5xx, configured exit codes). */
    readonly retryable = false,
  ) {
    super(message);
    this.name = "ExecError";
  }
}

/** Calls a configured clawbridge model (the `model` kind); the caller resolves ids to backends. */
export type ModelCaller = (req: {
  model: string;
  prompt: string;
  system?: string;
  cancel: Cancellation;
  timeoutSeconds?: number;
  /** Working directory for a CLI agent (a system's sandbox); default the backend's own. */
  cwd?: string;
}) => AsyncIterable<BackendEvent>;

/** A model call's whole answer, or why there is none (its error event, a throw, or an end without `done`). */
export type ModelText = { ok: true; text: string } | { ok: false; code?: string; message: string };

/** Call a model and gather its text: the router's classifier and the builder's Supervisor and Architect. */
export async function modelText(callModel: ModelCaller, req: Parameters<ModelCaller>[0]): Promise<ModelText> {
  let text = "";
  try {
    for await (const ev of callModel(req)) {
      if (ev.type === "text") text += ev.text;
      else if (ev.type === "error") return { ok: false, code: ev.error.code, message: ev.error.message };
      else if (ev.type === "done") return { ok: true, text };
    }
    return { ok: false, message: "the answer ended without its end" };
  } catch (err) {
    return { ok: false, message: (err as Error).message };
  }
}

export interface ExecContext {
  runId: string;
  /**
   * The step's name in its run (`a`, or `outer/inner` in a nested system), set by the runner: the
   * `mcp` kind writes down the calls it sends under it (executors/mcp-journal.ts).
   */
  step?: string;
  systemId: string;
  /** The conversation that started the run, when a chat did. */
  conversation?: string;
  /** What templates may refer to: the run's inputs, earlier steps' outputs, the run id. */
  scope: Scope;
  /** Stops the attempt (run cancelled or paused, client gone, bridge stopping). Check `cancel.reason`. */
  cancel: Cancellation;
  /** Text as it is produced (streamed to the chat that runs it). */
  output(text: string): void;
  log: Logger;
  /** A working directory for this run (created on first use). */
  workDir(): string;
  /** The system's sandbox (`<dataDir>/sandboxes/<id>`) when it has one: the working directory of its model steps. */
  sandbox?: string;
  /** For the `model` kind. */
  callModel: ModelCaller;
  /** For the `approval` kind: its run's side of the approval (given by the run manager). */
  approval?: ApprovalGate;
  /** A test run: a step with side effects returns what it would have sent (`WouldSend`) instead of sending it. */
  test?: boolean;
  /**
   * In a test run, the secrets' real values (the scope's are `[secret NAME]`), only to connect to an
   * MCP server and list its tools (not a side effect) to learn whether a tool is harmless.
   */
  listingSecret?: (name: string) => string | undefined;
}

/** A test run's output of a step with side effects: exactly what would have been sent, and that it was not. */
export type WouldSend =
  | { notSent: "webhook"; method: string; url: string; headers: Record<string, string>; body: unknown }
  | {
      notSent: "command";
      argv: string[];
      /** `setEnv`, rendered; and the names the command would inherit from the bridge's environment. */
      env: Record<string, string>;
      inherits: string[];
      cwd: string;
      stdin: string | null;
    }
  | { notSent: "mcp"; server: string; tool: string; arguments: unknown };

/** Whether a step's output is a test run's record of what was not sent. */
export function isWouldSend(v: unknown): v is WouldSend {
  return !!v && typeof v === "object" && typeof (v as { notSent?: unknown }).notSent === "string";
}

/** What the `approval` kind asks of its run (src/workflows/systems/runner.ts). */
export interface ApprovalGate {
  /** The decision already taken on this step, if any. */
  decided(): Promise<Decision | undefined>;
  /** Write the question and stop the run `waiting` (the step goes back to pending; a decision resumes it). */
  wait(req: { question: string; shown: unknown; timeoutSeconds?: number; onTimeout: OnTimeout }): Promise<void>;
  /** The outputs of the steps it depends on (shown by default). */
  upstream: Record<string, unknown>;
}

/** What one successful attempt produced: parsed JSON when the reply was JSON, else text. */
export interface ExecResult {
  output: unknown;
}

export type Executor<Spec> = (spec: Spec, ctx: ExecContext) => Promise<ExecResult>;
