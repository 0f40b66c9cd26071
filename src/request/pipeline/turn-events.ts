/**
 * A turn's events on the bus (src/ops/events/bus.ts): `turn.started` when it has its slot,
 * `turn.firstByte` at its first text, reasoning or tool call, then one of `turn.completed`,
 * `turn.failed` or `turn.aborted` (and `toolcalls.extracted` before it when the backend turned
 * calls written as text into real ones). Made only when someone listens on the bus; what it keeps
 * per turn is a few numbers and the last usage, error and finish reason it saw.
 */
import type { BackendError, BackendEvent, FinishReason, Usage } from "../../backends/contract/backend.js";
import type { EventBus } from "../../ops/events/bus.js";
import { TurnDeadline, type Cancellation } from "../../core/util/cancel.js";

export class TurnEvents {
  private firstByteMs?: number;
  private usage?: Usage;
  private finish?: FinishReason;
  private error?: BackendError;
  private extracted = 0;
  /** The model a dispatching backend handed the turn to. */
  answeredBy?: string;

  constructor(
    private readonly bus: EventBus,
    private readonly turnId: string,
    private readonly conversation: string,
    /** What the client asked for. */
    private readonly model: string,
    private readonly backend: string,
    /** When the turn was accepted (before it waited for its slot). */
    private readonly accepted: number,
  ) {}

  started(mode: string): void {
    const { turnId, conversation, model, backend } = this;
    this.bus.emit({
      type: "turn.started",
      turnId,
      conversation,
      model,
      backend,
      mode,
      queuedMs: Date.now() - this.accepted,
    });
  }

  /** Every event of the turn's answer, as it passes. */
  observe(ev: BackendEvent): void {
    switch (ev.type) {
      case "text":
      case "reasoning":
        if (ev.text && this.firstByteMs === undefined) this.firstByte();
        break;
      case "tool_call":
        if (this.firstByteMs === undefined) this.firstByte();
        if (ev.extracted && ev.id !== undefined) this.extracted++;
        break;
      case "usage":
        this.usage = ev.usage;
        break;
      case "done":
        this.finish = ev.finishReason;
        break;
      case "error":
        this.error = ev.error;
        break;
      default:
        break;
    }
  }

  private firstByte(): void {
    const { turnId, conversation, model, backend } = this;
    this.firstByteMs = Date.now() - this.accepted;
    this.bus.emit({ type: "turn.firstByte", turnId, conversation, model, backend, ms: this.firstByteMs });
  }

  /**
   * The turn is over. `answered`: the model and backend that answered (for `toolcalls.extracted`);
   * `shuttingDown`: the pipeline is stopping turns (an abort is the bridge's, not the client's).
   */
  ended(cancel: Cancellation, shuttingDown: boolean, answered: { model: string; backend: string }): void {
    const { turnId, conversation, model, backend } = this;
    const ms = Date.now() - this.accepted;
    const via = this.answeredBy ? { answeredBy: this.answeredBy } : {};
    if (this.extracted)
      this.bus.emit({
        type: "toolcalls.extracted",
        conversation,
        model: answered.model,
        backend: answered.backend,
        count: this.extracted,
      });
    if (this.finish !== undefined) {
      const u = this.usage;
      this.bus.emit({
        type: "turn.completed",
        turnId,
        conversation,
        model,
        backend,
        ms,
        ...(this.firstByteMs !== undefined ? { firstByteMs: this.firstByteMs } : {}),
        ...(u && !u.replayed ? { promptTokens: u.promptTokens, completionTokens: u.completionTokens } : {}),
        finishReason: this.finish,
        ...via,
      });
    } else if (this.error?.code === "aborted" || (cancel.aborted && !(cancel.reason instanceof TurnDeadline))) {
      this.bus.emit({
        type: "turn.aborted",
        turnId,
        conversation,
        model,
        backend,
        ms,
        reason: shuttingDown ? "shutdown" : "client_gone",
        ...via,
      });
    } else {
      const e = this.error ?? { code: "backend_failed", message: "the turn ended without an answer" };
      this.bus.emit({
        type: "turn.failed",
        turnId,
        conversation,
        model,
        backend,
        ms,
        code: e.code,
        message: e.message,
        ...via,
      });
    }
  }
}
