/**
 * The events of the bridge's event bus (src/ops/events/bus.ts), as published in-process and as
 * streamed by `GET /v1/events` (src/ops/events/hub.ts): every turn, routing decision, change of a
 * conversation's state, step of a run or a build and canvas change. Redaction
 * (src/ops/events/redact.ts) replaces text with text, so a redacted event still has this shape.
 * Plain types (and the one list of their names, `EVENT_TYPES`), no imports from outside src/wire:
 * the dashboard (packages/dashboard) type-checks against these same declarations.
 */
import type { CanvasEdge, CanvasNode } from "./canvas.js";
import type { RunOrigin } from "./runs.js";

/** Where a conversation is, as the router sees it. */
export type ConversationState = "idle" | "routing" | "planning" | "executing" | "paused" | "completed" | "error";

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
  | "build"
  | "ask";

/** Who decided: the classifier model, the keyword fallback, a slash command, a reply to a question, the state, or a rule of code before any classifier call. */
export type DecisionSource = "classifier" | "fallback" | "slash" | "reply" | "state" | "rule";

interface Base {
  /** Milliseconds since the epoch. */
  at: number;
  /**
   * The id of the bridge instance that published it (`store.instanceId`; default host:process id).
   * Set on every event `GET /v1/events` streams (with PostgreSQL, events of every instance come
   * there); absent in-process, where every event is this instance's.
   */
  instance?: string;
}

export type BridgeEvent = Base &
  (
    | {
        type: "decision";
        conversation: string;
        action: DecisionAction;
        system?: string;
        /** The classifier's or the keyword fallback's; 1 for the code's own (slash, reply, state, rule). */
        confidence: number;
        source: DecisionSource;
        reason?: string;
      }
    | { type: "gathering"; conversation: string; system: string; collected: string[]; missing: string[]; round: number }
    | { type: "confirm"; conversation: string; system: string; inputsHash: string }
    | { type: "state"; conversation: string; state: ConversationState }
    // Runs of steps (src/workflows/systems/runner.ts): a system's, or a build (origin `builder`).
    // A step of a system used by a step is `<step>/<its step>` and has no `system`.
    // `test`: a test run (dry run), on every run.* event of one.
    | { type: "run.started"; runId: string; system: string; origin?: RunOrigin; conversation?: string; test?: true }
    | { type: "run.output"; runId: string; step?: string; text: string }
    | { type: "step.started"; runId: string; system?: string; origin?: RunOrigin; step: string; attempt: number }
    | {
        type: "step.retry";
        runId: string;
        system?: string;
        origin?: RunOrigin;
        step: string;
        attempt: number;
        error: string;
        delayMs: number;
      }
    | { type: "step.completed"; runId: string; system?: string; origin?: RunOrigin; step: string; ms: number }
    | {
        type: "step.failed";
        runId: string;
        system?: string;
        origin?: RunOrigin;
        step: string;
        error: string;
        ms: number;
      }
    | { type: "step.skipped"; runId: string; system?: string; origin?: RunOrigin; step: string; reason: string }
    | { type: "run.completed"; runId: string; system: string; origin?: RunOrigin; ms: number; test?: true }
    | {
        type: "run.failed";
        runId: string;
        system: string;
        origin?: RunOrigin;
        step?: string;
        error: string;
        ms: number;
        test?: true;
      }
    | { type: "run.paused"; runId: string; system: string; origin?: RunOrigin; test?: true }
    | { type: "run.cancelled"; runId: string; system: string; origin?: RunOrigin; test?: true }
    | { type: "run.interrupted"; runId: string; system: string; origin?: RunOrigin; test?: true }
    // Approvals (an `approval` step): the run stops `waiting` until a decision (`by` http, dashboard, chat or timeout).
    | {
        type: "approval.requested";
        runId: string;
        system: string;
        step: string;
        question: string;
        /** When its `onTimeout` applies (ms since the epoch). */
        deadline?: number;
      }
    | {
        type: "run.waiting";
        runId: string;
        system: string;
        origin?: RunOrigin;
        test?: true;
        step: string;
        question: string;
      }
    | {
        type: "approval.decided";
        runId: string;
        system: string;
        step: string;
        decision: "approved" | "rejected";
        by: string;
        note?: string;
      }
    | {
        type: "run.rejected";
        runId: string;
        system: string;
        origin?: RunOrigin;
        test?: true;
        step: string;
        error: string;
      }
    // Triggers (src/workflows/triggers): a schedule or an inbound hook started a run, a schedule's
    // time was skipped, a hook request was refused (nothing ran).
    | {
        type: "trigger.fired";
        system: string;
        /** `schedule:<index>` or `hook`. */
        trigger: string;
        runId: string;
        /** The schedule's time (ms since the epoch). */
        dueAt?: number;
        /** A time missed while the bridge was down, run once at start. */
        catchUp?: boolean;
      }
    | { type: "trigger.skipped"; system: string; trigger: string; dueAt: number; reason: string }
    | { type: "hook.refused"; system: string; status: number; reason: string }
    // A new version of a system (src/workflows/systems/versions.ts): deployed, rolled back, or loaded changed.
    | { type: "system.version"; system: string; version: number; by: string; note: string }
    // Turns (src/request/pipeline): one of each per turn; `turnId` ties them together. Times in ms since the turn was accepted.
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
    /**
     * A turn handed to the next model of its model's `fallback` chain before any output (src/request/pipeline):
     * `fromBackend` failed (or was skipped, exhausted) for `reason` (`limit_reached`, `auth_failed`,
     * `backend_unavailable`, `exhausted` …), `to` answers on `toBackend`.
     */
    | {
        type: "turn.fallback";
        turnId: string;
        conversation: string;
        model: string;
        fromModel: string;
        fromBackend: string;
        to: string;
        toBackend: string;
        reason: string;
        /** When the backend that failed said its limit resets (ms since the epoch). */
        resetAt?: number;
      }
    /**
     * A turn's images (src/request/images): `passed` when its model got them; otherwise each was
     * replaced by one line telling the model it cannot see images (`reason` says why).
     */
    | {
        type: "turn.images";
        turnId: string;
        conversation: string;
        model: string;
        backend: string;
        images: number;
        passed: boolean;
        reason?: string;
      }
    /** A backend answered with a limit (usage, rate, quota): skipped until `resetAt` (or a backoff when it gave none). */
    | { type: "backend.limited"; backend: string; message: string; resetAt?: number; until: number }
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
    /** Tool calls a backend wrote as text and the bridge turned into real calls (src/backends/openai's scanners). */
    | { type: "toolcalls.extracted"; conversation: string; model: string; backend: string; count: number }
    /** A backend's health as last checked, published when it changes. */
    | { type: "backend.health"; backend: string; usable: boolean; detail: string }
    // Canvas changes (src/workflows/builder/canvas-tools.ts).
    | { type: "node.created"; system: string; node: CanvasNode }
    | { type: "node.updated"; system: string; node: CanvasNode; key?: string }
    | { type: "node.deleted"; system: string; nodeId: string }
    | { type: "edge.created"; system: string; edge: CanvasEdge }
    | { type: "edge.deleted"; system: string; edgeId: string }
  );

export type BridgeEventType = BridgeEvent["type"];
/** The event of one type, for typed subscriptions. */
export type EventOf<T extends BridgeEventType> = Extract<BridgeEvent, { type: T }>;

/**
 * Every event type once, in the order above. An object checked against the union both ways: a
 * type added to `BridgeEvent` and not here is a missing property, one here that the union lacks an
 * unknown one — either fails to compile.
 */
const EVENT_TYPE_SET = {
  decision: true,
  gathering: true,
  confirm: true,
  state: true,
  "run.started": true,
  "run.output": true,
  "step.started": true,
  "step.retry": true,
  "step.completed": true,
  "step.failed": true,
  "step.skipped": true,
  "run.completed": true,
  "run.failed": true,
  "run.paused": true,
  "run.cancelled": true,
  "run.interrupted": true,
  "approval.requested": true,
  "run.waiting": true,
  "approval.decided": true,
  "run.rejected": true,
  "trigger.fired": true,
  "trigger.skipped": true,
  "hook.refused": true,
  "system.version": true,
  "turn.started": true,
  "turn.firstByte": true,
  "turn.completed": true,
  "turn.failed": true,
  "turn.aborted": true,
  "queue.rejected": true,
  "session.healed": true,
  "session.reset": true,
  "intent.executed": true,
  "toolcalls.extracted": true,
  "backend.health": true,
  "turn.fallback": true,
  "turn.images": true,
  "backend.limited": true,
  "node.created": true,
  "node.updated": true,
  "node.deleted": true,
  "edge.created": true,
  "edge.deleted": true,
} satisfies Record<BridgeEventType, true>;

/** Every event type (for checking `?types=` of `GET /v1/events`), in the order of the union. */
export const EVENT_TYPES = Object.keys(EVENT_TYPE_SET) as readonly BridgeEventType[];
