/**
 * The ends of a routed turn, shared by the router engine: say something, hand the turn over (to
 * the `answer` model or the builder), start a run or attach to a live one and stream it, tell runs
 * that ended (or stopped at an approval) in the background, open the question of an approval; and with each, the decision and the conversation's state
 * published on the event bus. Also what a router needs at run time (`RouterRuntime`).
 */
import type { Logger } from "pino";
import type { ConversationMachine } from "../conversation/machine.js";
import type { BackendEvent, Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import type { EventBus } from "../../ops/events/bus.js";
import type { ConversationState, DecisionAction, DecisionSource, EventOf } from "../../wire/events.js";
import type { RunRecord } from "../systems/db.js";
import type { SystemsLibrary } from "../systems/library.js";
import { RunError, type RunManager } from "../systems/runner.js";
import type { ModelCaller } from "../systems/step-executor.js";
import type { LoadedSystem } from "../systems/types.js";
import type { Decision } from "./decide.js";
import { endState, follow, runStatusText, textSteps } from "./follow.js";
import { runningLine, testingLine } from "./messages.js";
import type { RouterOptions } from "./options.js";

export interface RouterRuntime {
  library: SystemsLibrary;
  runs: RunManager;
  bus: EventBus;
  /** Every conversation's state and open question, the builder's too (src/workflows/conversation/). */
  conversations: ConversationMachine;
  callModel: ModelCaller;
  log: Logger;
}

/** What a hand-over rests on: the classifier's, the fallback's or a rule's decision, or the conversation's state. */
type DecidedBy = Pick<Decision, "source" | "confidence"> | "state";
type DecisionFields = Omit<EventOf<"decision">, "type" | "conversation" | "at">;

/** The router engine's ways to end a turn and to publish what it decided (see router.ts). */
export abstract class RouterOutcomes {
  constructor(
    readonly name: string,
    protected readonly opts: RouterOptions,
    protected readonly rt: RouterRuntime,
  ) {}

  protected systems(): LoadedSystem[] {
    // Disabled systems stay runnable by id (HTTP, CLI) but are not offered in chat.
    const all = this.rt.library.systems.filter((s) => s.enabled);
    return this.opts.systems ? all.filter((s) => this.opts.systems!.includes(s.id)) : all;
  }

  protected system(id: string): LoadedSystem | undefined {
    return this.systems().find((s) => s.id === id);
  }

  /** A system offered here as it was at `version` (its current self without one); undefined when it has no such version. */
  protected async systemAt(id: string, version: number | undefined): Promise<LoadedSystem | undefined> {
    const current = this.system(id);
    if (!current || version === undefined) return current;
    return (await this.rt.runs.versions.get(id, version))?.compiled;
  }

  protected async start(
    conv: string,
    system: LoadedSystem,
    values: Record<string, unknown>,
    input: DispatchInput,
    preface: string,
    test = false,
    version?: number,
  ): Promise<Dispatch> {
    await this.setState(conv, "executing");
    let rec: RunRecord;
    try {
      rec = await this.rt.runs.start({
        system: system.id,
        inputs: values,
        conversation: conv,
        origin: "chat",
        messageKey: input.messageKey,
        test,
        version,
      });
    } catch (err) {
      if (err instanceof RunError) return this.say(conv, preface, err.message, "error");
      throw err;
    }
    return this.attach(rec, input, preface, true);
  }

  /**
   * Stream a live run to this turn (until it ends, or detach). The caller set the conversation's
   * state to `executing` before the run started or went on: nothing is awaited between that and
   * the stream, so a quick run's events are not missed.
   */
  protected attach(rec: RunRecord, input: DispatchInput, preface: string, fresh: boolean): Dispatch {
    const system = this.rt.library.get(rec.system);
    const name = system?.name ?? rec.system;
    const conv = input.turn.session.key;
    const plan = system ? this.rt.library.plan(system.id) : undefined;
    const text = plan ? textSteps(this.rt.library, plan) : { streams: [], output: "" };
    const events = follow({
      run: rec,
      name,
      single: plan?.steps.length === 1,
      streams: new Set(text.streams),
      outputStep: text.output,
      runs: this.rt.runs,
      bus: this.rt.bus,
      cancel: input.turn.cancel,
      detachAfterMs: this.opts.detachAfterSeconds * 1000,
      head: join(
        preface,
        fresh ? (rec.test ? testingLine(name) : runningLine(name)) : `Still running **${name}** (run \`${rec.id}\`)…`,
      ),
      onEnd: async (end, now) => {
        await this.setState(conv, end);
        if (now.status === "waiting") await this.askApproval(conv, now);
      },
    });
    return { kind: "answer", events };
  }

  /**
   * Runs that ended in the background since the conversation last heard, and those that stopped at
   * an approval (`waiting`: the last of them, whose question the caller opens once the turn is routed): told first.
   */
  protected async reportBackground(conv: string): Promise<{ text: string; waiting?: RunRecord }> {
    const done = await this.rt.runs.store.unreported(conv);
    const parts: string[] = [];
    let waiting: RunRecord | undefined;
    for (const r of done) {
      await this.rt.runs.store.markReported(r.id);
      // A schedule made in this conversation ran without it.
      const text = runStatusText(r, this.nameOf(r.system));
      parts.push(r.origin === "schedule" ? `While you were away, ${text}` : text);
      if (r.status === "waiting" && r.approval) waiting = r;
    }
    return { text: parts.join("\n\n"), waiting };
  }

  /** The conversation's next "yes" approves (and "no" rejects) the approval `run` waits on. */
  protected async askApproval(conv: string, run: RunRecord): Promise<void> {
    if (!run.approval) return;
    await this.rt.conversations.ask(conv, {
      kind: "approval",
      system: run.system,
      runId: run.id,
      step: run.approval.step,
      since: Date.now(),
    });
  }

  /** Hand the message to the `answer` model; `by`: the classifier's or fallback's decision, or the conversation's state. */
  protected async handover(conv: string, preface: string, by: DecidedBy, reason: string): Promise<Dispatch> {
    this.handedOver(conv, "answer", by, reason);
    await this.setState(conv, "idle");
    return { kind: "handover", model: this.opts.answer, ...(preface ? { preface: `${preface}\n\n` } : {}) };
  }

  /** Hand the message to the builder model (a transparent hand-over; `ask`: a question its QUERY answers); the builder sets the state next. */
  protected toBuilder(
    conv: string,
    preface: string,
    by: DecidedBy,
    reason: string,
    action: "build" | "ask" = "build",
  ): Dispatch {
    this.handedOver(conv, action, by, reason);
    return { kind: "handover", model: this.opts.builder!, ...(preface ? { preface: `${preface}\n\n` } : {}) };
  }

  /** A run's state in words; the conversation's state follows the run's unless given. */
  protected sayRun(conv: string, preface: string, rec: RunRecord, state = endState(rec)): Promise<Dispatch> {
    return this.say(conv, preface, runStatusText(rec, this.nameOf(rec.system)), state);
  }

  /** Cancel a run of this conversation and say where it ended. */
  protected async cancelRun(conv: string, preface: string, id: string): Promise<Dispatch> {
    return this.sayRun(
      conv,
      preface,
      await this.rt.runs.cancel(id).catch(async () => (await this.rt.runs.get(id))!),
      "idle",
    );
  }

  protected async say(conv: string, preface: string, text: string, state: ConversationState): Promise<Dispatch> {
    await this.setState(conv, state);
    return { kind: "answer", events: textEvents(join(preface, text)) };
  }

  /**
   * Published with its confidence: the classifier's or the fallback's must be given; the code's own
   * decisions (a slash command, a reply to a question, the conversation's state) are sure (1).
   */
  protected decision<S extends DecisionSource>(
    conv: string,
    action: DecisionAction,
    source: S,
    extra: { system?: string; reason?: string } & (S extends Decision["source"]
      ? { confidence: number }
      : { confidence?: number }),
  ): void {
    const d: DecisionFields = { action, source, ...extra, confidence: extra.confidence ?? 1 };
    this.rt.bus.emit({ type: "decision", conversation: conv, ...d });
    this.rt.log.debug({ router: this.name, conversation: conv, ...d }, "router decision");
  }

  private handedOver(conv: string, action: "answer" | "build" | "ask", by: DecidedBy, reason: string): void {
    if (by === "state") this.decision(conv, action, "state", { reason });
    else this.decision(conv, action, by.source, { confidence: by.confidence, reason });
  }

  protected setState(conv: string, state: ConversationState): Promise<void> {
    return this.rt.conversations.setState(conv, state, "router");
  }

  protected nameOf(id: string): string {
    return this.rt.library.get(id)?.name ?? id;
  }
}

export function join(a: string, b: string): string {
  return a ? `${a}\n\n${b}` : b;
}

async function* textEvents(text: string): AsyncGenerator<BackendEvent> {
  yield { type: "text", text };
  yield { type: "done", finishReason: "stop" };
}
