/**
 * The contract every kind of run (webhook, command, mcp, model) keeps. The run manager
 * (src/workflows/systems/runner.ts) calls an executor once per attempt of a step; a single-kind system is a
 * plan of one step. An executor substitutes its own templates (it knows where values must be
 * URL-encoded or kept typed), streams what it produces through `ctx.output`, and either returns the
 * step's output or throws an `ExecError` that says whether another attempt may succeed.
 */
import type { Logger } from "pino";
import type { BackendEvent } from "../../backends/contract/backend.js";
import type { Cancellation } from "../../core/util/cancel.js";
import type { Scope } from "../engine/template.js";

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
}

/** What one successful attempt produced: parsed JSON when the reply was JSON, else text. */
export interface ExecResult {
  output: unknown;
}

export type Executor<Spec> = (spec: Spec, ctx: ExecContext) => Promise<ExecResult>;
