/**
 * The bridge's one in-process event bus: every turn, every routing decision, every change of a
 * conversation's state, every step of a run or a build and every canvas change is published here as
 * a typed event. The pipeline, the router, the systems runner and the builder publish; `/v1/events`,
 * the metrics and tests subscribe. Publishing never throws and
 * never waits: a listener that fails is logged and kept.
 */

/** Where a conversation is, as the router sees it. */
export type ConversationState = "idle" | "routing" | "planning" | "executing" | "paused" | "completed" | "error";

/** A run's life. `interrupted`: found `running` when the bridge started (never re-run silently). */
export type RunStatus = "pending" | "running" | "paused" | "completed" | "failed" | "cancelled" | "interrupted";

/** What the router decided for one message, and what that decision rested on. */
export type DecisionAction =
  | "answer"
  | "clarify"
  | "confirm"
  | "run"
  | "cancel"
  | "status"
  | "list"
  | "decline"
  | "give_up"
  | "resume"
  | "build";

interface Base {
  /** Milliseconds since the epoch. */
  at: number;
}

export type BridgeEvent = Base &
  (
    | {
        type: "decision";
        conversation: string;
        action: DecisionAction;
        system?: string;
        confidence?: number;
        /** Who decided: the classifier model, the keyword fallback, a slash command, or a reply to a question. */
        source: "classifier" | "fallback" | "slash" | "reply" | "state";
        reason?: string;
      }
    | { type: "gathering"; conversation: string; system: string; collected: string[]; missing: string[]; round: number }
    | { type: "confirm"; conversation: string; system: string; inputsHash: string }
    | { type: "state"; conversation: string; state: ConversationState }
    | { type: "run.started"; runId: string; system: string; conversation?: string }
    | { type: "run.output"; runId: string; step?: string; text: string }
    | { type: "step.started"; runId: string; step: string; attempt: number }
    | { type: "step.retry"; runId: string; step: string; attempt: number; error: string; delayMs: number }
    | { type: "step.completed"; runId: string; step: string; ms: number }
    | { type: "step.failed"; runId: string; step: string; error: string; ms: number }
    | { type: "step.skipped"; runId: string; step: string; reason: string }
    | { type: "run.completed"; runId: string; system: string; ms: number }
    | { type: "run.failed"; runId: string; system: string; step?: string; error: string; ms: number }
    | { type: "run.paused"; runId: string; system: string }
    | { type: "run.cancelled"; runId: string; system: string }
    | { type: "run.interrupted"; runId: string; system: string }
    // Turns (src/pipeline): one of each per turn; `turnId` ties them together. Times in ms since the turn was accepted.
    // `model`/`backend` are what the client asked for; `answeredBy` the model a dispatching backend (the router) handed the turn to.
    | {
        type: "turn.started";
        turnId: string;
        conversation: string;
        model: string;
        backend: string;
        mode: string;
        queuedMs: number;
      }
    | { type: "turn.firstByte"; turnId: string; conversation: string; model: string; backend: string; ms: number }
    | {
        type: "turn.completed";
        turnId: string;
        conversation: string;
        model: string;
        backend: string;
        ms: number;
        firstByteMs?: number;
        promptTokens?: number;
        completionTokens?: number;
        finishReason?: string;
        answeredBy?: string;
      }
    | {
        type: "turn.failed";
        turnId: string;
        conversation: string;
        model: string;
        backend: string;
        ms: number;
        code: string;
        message: string;
        answeredBy?: string;
      }
    | {
        type: "turn.aborted";
        turnId: string;
        conversation: string;
        model: string;
        backend: string;
        ms: number;
        reason: string;
        answeredBy?: string;
      }
    /** A turn refused by the queue (429). */
    | { type: "queue.rejected"; conversation: string; model: string; scope: string }
    // Resume mode (src/request/pipeline/resume.ts): a dead backend session replaced, or a retried message started afresh.
    | { type: "session.healed"; conversation: string; backend: string; reason: string }
    | { type: "session.reset"; conversation: string; backend: string; reason: string }
    /** Intent pre-execution (src/request/pipeline/enrich.ts): live data fetched before the model answered. */
    | {
        type: "intent.executed";
        conversation: string;
        model: string;
        tools: string[];
        ok: boolean;
        ms: number;
        error?: string;
      }
    /** Tool calls a backend found written as text and turned into real calls (src/toolcalls). */
    | { type: "toolcalls.extracted"; conversation: string; model: string; backend: string; count: number }
    /** A backend's health as last checked, published when it changes. */
    | { type: "backend.health"; backend: string; usable: boolean; detail: string }
    // The builder (src/builder): a plan's steps as they run, and every change to a canvas.
    | {
        type: "execution:stepStart";
        buildId: string;
        system: string;
        step: string;
        name: string;
        action: string;
        attempt: number;
      }
    | {
        type: "execution:stepRetry";
        buildId: string;
        system: string;
        step: string;
        attempt: number;
        error: string;
        delayMs: number;
      }
    | {
        type: "execution:stepComplete";
        buildId: string;
        system: string;
        step: string;
        status: "completed" | "failed" | "skipped";
        output?: unknown;
        error?: string;
        ms: number;
      }
    | {
        type: "execution:planComplete";
        buildId: string;
        system: string;
        status: "completed" | "failed" | "paused";
        failedStep?: string;
        error?: string;
        ms: number;
      }
    | { type: "node:created"; system: string; node: CanvasNodeEvent }
    | { type: "node:updated"; system: string; node: CanvasNodeEvent; key?: string }
    | { type: "node:deleted"; system: string; nodeId: string }
    | { type: "edge:created"; system: string; edge: { id: string; from: string; to: string } }
    | { type: "edge:deleted"; system: string; edgeId: string }
  );

/** A canvas node as events carry it (src/workflows/builder/types.ts CanvasNode, kept structural so events stays at the bottom). */
export interface CanvasNodeEvent {
  id: string;
  type: string;
  label: string;
  properties: Record<string, unknown>;
  position: { x: number; y: number };
  parent?: string;
}

export type BridgeEventType = BridgeEvent["type"];
/** The event of one type, for typed subscriptions. */
export type EventOf<T extends BridgeEventType> = Extract<BridgeEvent, { type: T }>;
/** An event as it is published: the bus stamps `at`. */
export type NewEvent = BridgeEvent extends infer E ? (E extends BridgeEvent ? Omit<E, "at"> : never) : never;

export type Listener = (event: BridgeEvent) => void;

export class EventBus {
  private listeners: Listener[] = [];

  constructor(private readonly onListenerError: (err: unknown) => void = () => {}) {}

  /**
   * Publish. Listeners run synchronously, in subscription order; one that throws is reported and
   * kept. The event is stamped with `at` in place (not copied: three events per turn pass here):
   * it belongs to the bus from then on, and whoever published it must not change it afterwards.
   */
  emit(event: NewEvent): void {
    const stamped = event as BridgeEvent;
    stamped.at = Date.now();
    for (const fn of this.listeners) {
      try {
        fn(stamped);
      } catch (err) {
        this.onListenerError(err);
      }
    }
  }

  /** Subscribe to every event. Returns the function that unsubscribes. */
  on(fn: Listener): () => void {
    this.listeners = [...this.listeners, fn];
    return () => {
      this.listeners = this.listeners.filter((l) => l !== fn);
    };
  }

  /** Subscribe to the events of one run. */
  onRun(runId: string, fn: Listener): () => void {
    return this.on((e) => {
      if ("runId" in e && e.runId === runId) fn(e);
    });
  }

  get listenerCount(): number {
    return this.listeners.length;
  }
}
