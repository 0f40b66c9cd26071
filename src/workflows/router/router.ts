/**
 * The router: for each message, answer it (a transparent hand-over to the `answer` model), ask for
 * what is missing, ask before running, or run one of the person's systems and stream its progress.
 *
 * Code decides; the classifier model only informs. One classifier call per routed message (asked
 * again once if its reply does not parse; the keyword fallback when it still fails or is down);
 * none for "yes", "no", "cancel", slash commands, tool results, heartbeats or a retried message.
 *   confidence < match                          → answer
 *   inputs missing or invalid (checked here)    → clarify (gathering, kept in SQLite)
 *   < trigger, side effects, or confirm: always → confirm (exactly the inputs shown, by hash)
 *   otherwise                                   → run
 * Every decision and change of state is published on the event bus.
 */
import type { Logger } from "pino";
import type { BackendEvent, Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import type { ConversationState, DecisionAction, EventBus } from "../../ops/events/bus.js";
import type { RunRecord } from "../systems/db.js";
import type { ModelCaller } from "../systems/step-executor.js";
import type { SystemsLibrary } from "../systems/library.js";
import { RunError, type RunManager } from "../systems/runner.js";
import type { LoadedSystem } from "../systems/types.js";
import type { Cancellation } from "../../core/util/cancel.js";
import { classifierPrompt, parseClassifierReply, retryMessage, type ClassifierReply } from "./classifier.js";
import { fallbackMatch, parseSlash } from "./keyword-fallback.js";
import { checkInputs, inputsHash, mergeInputs } from "../systems/inputs.js";
import {
  cancelledText,
  clarifyText,
  confirmText,
  declinedText,
  giveUpText,
  runningLine,
  stepLine,
  systemsListText,
} from "./messages.js";
import type { RouterOptions } from "./options.js";
import { replyKind } from "./replies.js";
import type { Pending, RouterStateStore } from "./state.js";
import { follow, runStatusText, runsListText } from "./follow.js";

export interface RouterRuntime {
  library: SystemsLibrary;
  runs: RunManager;
  bus: EventBus;
  state: RouterStateStore;
  callModel: ModelCaller;
  log: Logger;
  /**
   * Whether the builder is in the middle of something with this conversation (a question waiting
   * for its yes, a build running or paused): then its messages go to the builder. Wired by the
   * bridge when a builder is configured (the router knows it only as a model id).
   */
  builderBusy?: (conversation: string) => boolean;
}

/** Making, changing or deploying a system, in words the keyword fallback can hear. */
const BUILD_WORDS =
  /\b(?:build|create|make|design|set up|draft)\b[^.?!\n]{0,80}\b(?:system|workflow|pipeline|automation)s?\b|^\s*\/?(?:deploy|undeploy|undo)\b/i;

interface Decision {
  action: "answer" | "run" | "cancel" | "status" | "build";
  system?: LoadedSystem;
  confidence: number;
  inputs: Record<string, unknown>;
  source: "classifier" | "fallback";
}

const RESUME = /^\/?resume\s+(?:run\s+)?`?([A-Za-z0-9_-]{4,64})`?\s*[.!]?$/i;

export class RouterEngine {
  /** Classifier calls made (for the bench and /health). */
  classifierCalls = 0;
  /** Conversations in the passing `routing` state (not written to the database). */
  private readonly transient = new Map<string, ConversationState>();

  constructor(
    readonly name: string,
    private readonly opts: RouterOptions,
    private readonly rt: RouterRuntime,
  ) {}

  private systems(): LoadedSystem[] {
    // Disabled systems stay runnable by id (HTTP, CLI) but are not offered in chat.
    const all = this.rt.library.systems.filter((s) => s.enabled);
    return this.opts.systems ? all.filter((s) => this.opts.systems!.includes(s.id)) : all;
  }

  private system(id: string): LoadedSystem | undefined {
    return this.systems().find((s) => s.id === id);
  }

  async dispatch(input: DispatchInput): Promise<Dispatch> {
    const conv = input.turn.session.key;
    const text = input.userText.trim();
    let preface = this.reportBackground(conv);

    // Not the person's words: hand over untouched, whatever is pending.
    if (input.notFromPerson || !text) return this.handover(conv, preface, "state", input.notFromPerson ?? "empty");

    this.setState(conv, "routing");

    // A client's retry of a message that already started a run: never a second run.
    const prior = this.rt.runs.store.byMessage(conv, input.messageKey);
    if (prior) {
      this.decision(conv, "status", "state", {
        system: prior.system,
        reason: "retry of the message that started this run",
      });
      return this.rt.runs.isLive(prior.id)
        ? this.attach(prior, input, preface, false)
        : this.say(conv, preface, runStatusText(prior, this.nameOf(prior.system)), this.endState(prior));
    }

    const resume = RESUME.exec(text);
    if (resume) return this.askResume(conv, resume[1]!, preface);

    const slash = parseSlash(text);
    if (slash) return this.slash(conv, slash, input, preface);

    // The builder is waiting for this conversation's answer, or building: its message.
    if (this.opts.builder && this.rt.builderBusy?.(conv))
      return this.toBuilder(conv, preface, "state", "the builder is busy with this conversation");

    let rec = this.rt.state.get(conv);
    if (rec.pending && Date.now() - rec.pending.since > this.opts.gathering.ttlMinutes * 60_000) {
      const sys = this.system(rec.pending.system);
      this.rt.state.setPending(conv, undefined);
      this.decision(conv, "give_up", "state", { system: rec.pending.system, reason: "expired" });
      if (rec.pending.kind === "gathering" && sys) preface = join(preface, giveUpText(sys.name, "expired"));
      rec = { ...rec, pending: undefined };
    }
    const pending = rec.pending;

    if (pending?.kind === "confirm") {
      const reply = replyKind(text);
      if (reply === "yes") return this.confirmed(conv, pending, input, preface);
      if (reply === "no" || reply === "cancel") {
        this.rt.state.setPending(conv, undefined);
        this.decision(conv, "decline", "reply", { system: pending.system });
        return this.say(conv, preface, declinedText(this.nameOf(pending.system)), "idle");
      }
      // Anything else: the question lapses and the message is routed afresh.
      this.rt.state.setPending(conv, undefined);
    }

    if (pending?.kind === "gathering") {
      const reply = replyKind(text);
      if (reply === "cancel" || reply === "no") {
        this.rt.state.setPending(conv, undefined);
        this.decision(conv, "cancel", "reply", { system: pending.system });
        return this.say(conv, preface, cancelledText(this.nameOf(pending.system)), "idle");
      }
    }

    const systems = this.systems();
    if (!systems.length && !this.opts.builder) return this.handover(conv, preface, "state", "no systems");
    const gathering = pending?.kind === "gathering" ? pending : undefined;
    const gatheringSystem = gathering ? this.system(gathering.system) : undefined;
    const d = await this.decide(
      text,
      input,
      systems,
      gathering && gatheringSystem ? { system: gatheringSystem, values: gathering.values } : undefined,
    );

    if (d.action === "cancel") {
      if (gathering) {
        this.rt.state.setPending(conv, undefined);
        this.decision(conv, "cancel", d.source, { system: gathering.system });
        return this.say(conv, preface, cancelledText(this.nameOf(gathering.system)), "idle");
      }
      const active = this.rt.runs.store.active(conv)[0];
      if (active) {
        this.decision(conv, "cancel", d.source, { system: active.system });
        const ended = await this.rt.runs.cancel(active.id).catch(() => this.rt.runs.get(active.id)!);
        return this.say(conv, preface, runStatusText(ended, this.nameOf(ended.system)), "idle");
      }
      return this.handover(conv, preface, d.source, "nothing to cancel");
    }
    if (d.action === "build" && this.opts.builder) {
      if (gathering) this.rt.state.setPending(conv, undefined);
      return this.toBuilder(conv, preface, d.source, "build");
    }
    if (d.action === "status") {
      const latest = this.rt.runs.store.latest(conv);
      if (latest) {
        this.decision(conv, "status", d.source, { system: latest.system });
        return this.say(conv, preface, runStatusText(latest, this.nameOf(latest.system)), this.endState(latest));
      }
      return this.handover(conv, preface, d.source, "no run to report");
    }

    // While gathering, a message about the same system (or none in particular) supplies inputs;
    // a confident match of another system starts over with that one; anything else is a question.
    if (gathering && gatheringSystem) {
      const other =
        d.action === "run" &&
        d.system &&
        d.system.id !== gatheringSystem.id &&
        d.confidence >= this.opts.thresholds.match;
      if (!other) {
        if (d.action === "answer" && !Object.keys(d.inputs).length) {
          this.rt.state.setPending(conv, undefined);
          return this.handover(conv, preface, d.source, `unrelated to ${gatheringSystem.id}; gathering dropped`);
        }
        const values = mergeInputs(gathering.values, d.inputs);
        return this.proceed(
          conv,
          gatheringSystem,
          values,
          Math.max(d.confidence, this.opts.thresholds.trigger),
          d.source,
          input,
          preface,
          gathering.rounds,
        );
      }
    }

    if (d.action !== "run" || !d.system || d.confidence < this.opts.thresholds.match) {
      if (gathering) this.rt.state.setPending(conv, undefined);
      return this.handover(
        conv,
        preface,
        d.source,
        d.system ? `confidence ${d.confidence.toFixed(2)} below ${this.opts.thresholds.match}` : "no system",
      );
    }
    return this.proceed(conv, d.system, d.inputs, d.confidence, d.source, input, preface, 0);
  }

  /** Inputs checked here, never on the classifier's word: clarify, confirm or run. */
  private proceed(
    conv: string,
    system: LoadedSystem,
    candidate: Record<string, unknown>,
    confidence: number,
    source: Decision["source"] | "slash",
    input: DispatchInput,
    preface: string,
    rounds: number,
  ): Dispatch {
    const check = checkInputs(system.inputs, candidate);
    if (!check.complete) {
      if (rounds >= this.opts.gathering.maxRounds) {
        this.rt.state.setPending(conv, undefined);
        this.decision(conv, "give_up", source, {
          system: system.id,
          confidence,
          reason: `still missing after ${rounds} questions`,
        });
        return this.say(conv, preface, giveUpText(system.name, "rounds"), "idle");
      }
      const next: Pending = {
        kind: "gathering",
        system: system.id,
        values: check.values,
        rounds: rounds + 1,
        since: Date.now(),
      };
      this.rt.state.setPending(conv, next);
      this.decision(conv, "clarify", source, { system: system.id, confidence });
      this.rt.bus.emit({
        type: "gathering",
        conversation: conv,
        system: system.id,
        collected: Object.keys(check.values),
        missing: check.missing.map((f) => f.name),
        round: next.rounds,
      });
      return this.say(conv, preface, clarifyText(system.name, check.missing, check.invalid, check.problems), "idle");
    }
    const unsure = confidence < this.opts.thresholds.trigger;
    const why =
      system.confirm === "always"
        ? "always"
        : unsure
          ? "unsure"
          : system.sideEffects && system.confirm === "auto"
            ? "side_effects"
            : undefined;
    if (why) {
      const hash = inputsHash(system.id, check.values);
      this.rt.state.setPending(conv, {
        kind: "confirm",
        system: system.id,
        values: check.values,
        hash,
        since: Date.now(),
      });
      this.decision(conv, "confirm", source, { system: system.id, confidence, reason: why });
      this.rt.bus.emit({ type: "confirm", conversation: conv, system: system.id, inputsHash: hash });
      return this.say(conv, preface, confirmText(system.name, check.values, why), "idle");
    }
    this.rt.state.setPending(conv, undefined);
    this.decision(conv, "run", source, { system: system.id, confidence });
    return this.start(conv, system, check.values, input, preface);
  }

  /** "yes" to a shown run: exactly the inputs shown (hash), once. */
  private confirmed(
    conv: string,
    pending: Extract<Pending, { kind: "confirm" }>,
    input: DispatchInput,
    preface: string,
  ): Dispatch {
    if (!this.rt.state.consume(conv, pending)) return this.say(conv, preface, "That was already answered.", "idle");
    if (pending.resumeRun) {
      this.decision(conv, "resume", "reply", { system: pending.system });
      try {
        const rec = this.rt.runs.resume(pending.resumeRun);
        this.rt.runs.store.markAttached(rec.id);
        return this.attach(rec, input, preface, true);
      } catch (err) {
        return this.say(conv, preface, (err as Error).message, "idle");
      }
    }
    const system = this.system(pending.system);
    if (!system)
      return this.say(conv, preface, `**${pending.system}** is no longer configured, so nothing was run.`, "idle");
    if (inputsHash(system.id, pending.values) !== pending.hash) {
      return this.say(
        conv,
        preface,
        "The details changed since I asked, so nothing was run. Ask again and I will show them.",
        "idle",
      );
    }
    this.decision(conv, "run", "reply", { system: system.id, reason: "confirmed" });
    return this.start(conv, system, pending.values, input, preface);
  }

  private askResume(conv: string, runId: string, preface: string): Dispatch {
    const rec = this.rt.runs.get(runId);
    if (!rec || rec.conversation !== conv)
      return this.say(conv, preface, `I know of no run \`${runId}\` in this conversation.`, "idle");
    if (!["paused", "interrupted", "failed"].includes(rec.status))
      return this.say(conv, preface, runStatusText(rec, this.nameOf(rec.system)), this.endState(rec));
    const hash = inputsHash(rec.system, rec.inputs);
    this.rt.state.setPending(conv, {
      kind: "confirm",
      system: rec.system,
      values: rec.inputs,
      hash,
      since: Date.now(),
      resumeRun: rec.id,
    });
    this.decision(conv, "confirm", "state", { system: rec.system, reason: "resume" });
    const next = rec.steps.find((s) => s.status !== "completed");
    return this.say(
      conv,
      preface,
      `Run \`${rec.id}\` of **${this.nameOf(rec.system)}** is ${rec.status}. Resume it from step \`${next?.id ?? "?"}\`? (yes / no)`,
      "paused",
    );
  }

  private async slash(
    conv: string,
    slash: NonNullable<ReturnType<typeof parseSlash>>,
    input: DispatchInput,
    preface: string,
  ): Promise<Dispatch> {
    if ("error" in slash) return this.say(conv, preface, slash.error, "idle");
    switch (slash.cmd) {
      case "systems":
        this.decision(conv, "list", "slash", {});
        return this.say(conv, preface, systemsListText(this.systems()), "idle");
      case "runs":
        this.decision(conv, "list", "slash", {});
        return this.say(
          conv,
          preface,
          runsListText(this.rt.runs.store.list({ conversation: conv, limit: 10 }), (id) => this.nameOf(id)),
          "idle",
        );
      case "status": {
        const rec = slash.runId ? this.rt.runs.get(slash.runId) : this.rt.runs.store.latest(conv);
        this.decision(conv, "status", "slash", { system: rec?.system });
        if (!rec || rec.conversation !== conv)
          return this.say(
            conv,
            preface,
            slash.runId
              ? `I know of no run \`${slash.runId}\` in this conversation.`
              : "Nothing has run in this conversation yet.",
            "idle",
          );
        return this.say(conv, preface, runStatusText(rec, this.nameOf(rec.system)), this.endState(rec));
      }
      case "cancel": {
        const pending = this.rt.state.get(conv).pending;
        this.rt.state.setPending(conv, undefined);
        const active = this.rt.runs.store.active(conv)[0];
        this.decision(conv, "cancel", "slash", { system: active?.system ?? pending?.system });
        if (active) {
          const ended = await this.rt.runs.cancel(active.id).catch(() => this.rt.runs.get(active.id)!);
          return this.say(conv, preface, runStatusText(ended, this.nameOf(ended.system)), "idle");
        }
        return this.say(
          conv,
          preface,
          pending ? cancelledText(this.nameOf(pending.system)) : "There is nothing to cancel.",
          "idle",
        );
      }
      case "run": {
        const system = this.system(slash.system);
        if (!system)
          return this.say(
            conv,
            preface,
            `There is no system \`${slash.system}\`.\n\n${systemsListText(this.systems())}`,
            "idle",
          );
        // An explicit command: as sure as can be, but side effects are still confirmed.
        return this.proceed(conv, system, slash.inputs, 1, "slash", input, preface, 0);
      }
    }
  }

  /** One classifier call (asked again once if it does not parse); the keyword fallback if it fails. */
  private async decide(
    text: string,
    input: DispatchInput,
    systems: LoadedSystem[],
    gathering?: { system: LoadedSystem; values: Record<string, unknown> },
  ): Promise<Decision> {
    const reply = await this.classify(text, input, systems, gathering);
    if (reply)
      return {
        action: reply.action,
        system: reply.system ? systems.find((s) => s.id.toLowerCase() === reply.system!.toLowerCase()) : undefined,
        confidence: reply.confidence,
        inputs: reply.inputs,
        source: "classifier",
      };
    if (gathering) {
      // Without the classifier, `k=v` pairs still supply inputs, and a lone missing input takes the message.
      const pairs = parseSlash(`/run ${gathering.system.id} ${text}`);
      const given = pairs && !("error" in pairs) && pairs.cmd === "run" ? pairs.inputs : {};
      if (Object.keys(given).length)
        return { action: "run", system: gathering.system, confidence: 1, inputs: given, source: "fallback" };
      const missing = checkInputs(gathering.system.inputs, gathering.values).missing;
      if (missing.length === 1)
        return {
          action: "run",
          system: gathering.system,
          confidence: 1,
          inputs: { [missing[0]!.name]: text },
          source: "fallback",
        };
    }
    if (this.opts.builder && BUILD_WORDS.test(text))
      return { action: "build", confidence: 0.7, inputs: {}, source: "fallback" };
    const fb = fallbackMatch(text, systems);
    if (!fb) return { action: "answer", confidence: 0, inputs: {}, source: "fallback" };
    return {
      action: "run",
      system: systems.find((s) => s.id === fb.system),
      confidence: fb.confidence,
      inputs: {},
      source: "fallback",
    };
  }

  private async classify(
    text: string,
    input: DispatchInput,
    systems: LoadedSystem[],
    gathering?: { system: LoadedSystem; values: Record<string, unknown> },
  ): Promise<ClassifierReply | undefined> {
    const known = new Set(systems.map((s) => s.id));
    const prompt = classifierPrompt({
      systems,
      userText: text,
      recent: input.recent,
      gathering: gathering
        ? {
            system: gathering.system,
            collected: gathering.values,
            missing: checkInputs(gathering.system.inputs, gathering.values).missing.map((f) => f.name),
          }
        : undefined,
      builder: Boolean(this.opts.builder),
    });
    let user = prompt.user;
    for (let attempt = 0; attempt < 2; attempt++) {
      const out = await this.callText(prompt.system, user, input.turn.cancel);
      if (out === undefined) return undefined; // upstream down, timeout, cancelled: fallback
      const parsed = parseClassifierReply(out, known, { builder: Boolean(this.opts.builder) });
      if (!("error" in parsed)) return parsed;
      this.rt.log.warn({ router: this.name, problem: parsed.error }, "classifier reply did not parse");
      user = `${prompt.user}\n\n${retryMessage(out)}`;
    }
    return undefined;
  }

  private async callText(system: string, prompt: string, cancel: Cancellation): Promise<string | undefined> {
    this.classifierCalls++;
    let text = "";
    try {
      for await (const ev of this.rt.callModel({
        model: this.opts.classifier,
        prompt,
        system,
        cancel,
        timeoutSeconds: this.opts.classifierTimeoutSeconds,
      })) {
        if (ev.type === "text") text += ev.text;
        else if (ev.type === "error") {
          this.rt.log.warn(
            { router: this.name, code: ev.error.code, message: ev.error.message },
            "classifier call failed; using the keyword fallback",
          );
          return undefined;
        } else if (ev.type === "done") return text;
      }
    } catch (err) {
      this.rt.log.warn(
        { router: this.name, err: (err as Error).message },
        "classifier call failed; using the keyword fallback",
      );
    }
    return undefined;
  }

  private start(
    conv: string,
    system: LoadedSystem,
    values: Record<string, unknown>,
    input: DispatchInput,
    preface: string,
  ): Dispatch {
    let rec: RunRecord;
    try {
      rec = this.rt.runs.start({
        system: system.id,
        inputs: values,
        conversation: conv,
        origin: "chat",
        messageKey: input.messageKey,
      });
    } catch (err) {
      if (err instanceof RunError) return this.say(conv, preface, err.message, "error");
      throw err;
    }
    return this.attach(rec, input, preface, true);
  }

  /** Stream a live run to this turn (until it ends, or detach). */
  private attach(rec: RunRecord, input: DispatchInput, preface: string, fresh: boolean): Dispatch {
    const system = this.rt.library.get(rec.system);
    const conv = input.turn.session.key;
    this.setState(conv, "executing");
    const events = follow({
      run: rec,
      name: system?.name ?? rec.system,
      single: system ? this.rt.library.plan(system.id).steps.length === 1 : false,
      runs: this.rt.runs,
      bus: this.rt.bus,
      cancel: input.turn.cancel,
      detachAfterMs: this.opts.detachAfterSeconds * 1000,
      head: join(
        preface,
        fresh
          ? runningLine(system?.name ?? rec.system)
          : `Still running **${system?.name ?? rec.system}** (run \`${rec.id}\`)…`,
      ),
      stepLine,
      onEnd: (end) => this.setState(conv, end),
    });
    return { kind: "answer", events };
  }

  /** Runs that ended in the background since the conversation last heard: told first. */
  private reportBackground(conv: string): string {
    const done = this.rt.runs.store.unreported(conv);
    const parts: string[] = [];
    for (const r of done) {
      this.rt.runs.store.markReported(r.id);
      parts.push(runStatusText(r, this.nameOf(r.system)));
    }
    return parts.join("\n\n");
  }

  private handover(conv: string, preface: string, source: Decision["source"] | "state", reason: string): Dispatch {
    this.decision(conv, "answer", source, { reason });
    this.setState(conv, "idle");
    return { kind: "handover", model: this.opts.answer, ...(preface ? { preface: `${preface}\n\n` } : {}) };
  }

  /** Hand the message to the builder model (a transparent hand-over, like an ordinary answer). */
  private toBuilder(conv: string, preface: string, source: Decision["source"] | "state", reason: string): Dispatch {
    this.decision(conv, "build", source, { reason });
    this.setState(conv, "idle");
    return { kind: "handover", model: this.opts.builder!, ...(preface ? { preface: `${preface}\n\n` } : {}) };
  }

  private say(conv: string, preface: string, text: string, state: ConversationState): Dispatch {
    this.setState(conv, state);
    return { kind: "answer", events: textEvents(join(preface, text)) };
  }

  private decision(
    conv: string,
    action: DecisionAction,
    source: Decision["source"] | "slash" | "reply" | "state",
    extra: { system?: string; confidence?: number; reason?: string },
  ): void {
    this.rt.bus.emit({ type: "decision", conversation: conv, action, source, ...extra });
    this.rt.log.debug({ router: this.name, conversation: conv, action, source, ...extra }, "router decision");
  }

  /**
   * A conversation's state: published on every change; written to the database only when it is
   * not the passing `routing` state and differs from what is stored (an ordinary message, routing
   * → idle, writes nothing).
   */
  private setState(conv: string, state: ConversationState): void {
    const current = this.transient.get(conv) ?? this.rt.state.get(conv).state;
    if (current === state) return;
    if (state === "routing") this.transient.set(conv, state);
    else {
      this.transient.delete(conv);
      if (this.rt.state.get(conv).state !== state) this.rt.state.setState(conv, state);
    }
    this.rt.bus.emit({ type: "state", conversation: conv, state });
  }

  private endState(rec: RunRecord): ConversationState {
    switch (rec.status) {
      case "completed":
        return "completed";
      case "failed":
      case "interrupted":
        return "error";
      case "paused":
        return "paused";
      case "cancelled":
        return "idle";
      default:
        return "executing";
    }
  }

  private nameOf(id: string): string {
    return this.rt.library.get(id)?.name ?? id;
  }
}

function join(a: string, b: string): string {
  return a ? `${a}\n\n${b}` : b;
}

async function* textEvents(text: string): AsyncGenerator<BackendEvent> {
  yield { type: "text", text };
  yield { type: "done", finishReason: "stop" };
}
