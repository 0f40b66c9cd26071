/**
 * The router: for each message, answer it (a transparent hand-over to the `answer` model), ask for
 * what is missing, ask before running, or run one of the person's systems and stream its progress.
 *
 * Code decides; the classifier model only informs. One classifier call per routed message (asked
 * again once if its reply does not parse; the keyword fallback when it still fails or is down);
 * none for "yes", "no", "cancel", slash commands, tool results, heartbeats or a retried message,
 * nor, with a builder, for a builder command or a question about the systems (decide.ts `builderRule`).
 *   confidence < match                          → answer
 *   inputs missing or invalid (checked here)    → clarify (gathering, kept in SQLite)
 *   < trigger, side effects, or confirm: always → confirm (exactly the inputs shown, by hash)
 *   otherwise                                   → run
 * A run that stopped at an approval asks its question in the conversation that started it; the
 * next "yes" (or "approve") approves it and follows the run again, "no" (or "reject") rejects it.
 * Every decision and change of state is published on the event bus.
 *
 * Deciding what a message asks for is in decide.ts; the ways a turn ends, and the publishing of
 * decisions and states, in outcomes.ts.
 */
import type { Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import { checkInputs, inputsHash, mergeInputs } from "../systems/inputs.js";
import { isRouterQuestion, type RouterQuestion } from "../conversation/machine.js";
import type { LoadedSystem } from "../systems/types.js";
import { RunError } from "../systems/runner.js";
import { builderRule, type Decision, decide } from "./decide.js";
import { runsListText, runStatusText } from "./follow.js";
import { parseSlash, testCommand } from "./keyword-fallback.js";
import { cancelledText, clarifyText, confirmText, declinedText, giveUpText, systemsListText } from "./messages.js";
import { join, RouterOutcomes } from "./outcomes.js";

/** A message that asks for a test run in words ("test …", "dry run …"). */
const ASKS_FOR_TEST = /^\s*(?:please\s+)?(?:test|dry[- ]run)\b/i;
const RESUME = /^\/?resume\s+(?:run\s+)?`?([A-Za-z0-9_-]{4,64})`?\s*[.!]?$/i;

export class RouterEngine extends RouterOutcomes {
  /** Classifier calls made (for the bench and /health). */
  classifierCalls = 0;

  async dispatch(input: DispatchInput): Promise<Dispatch> {
    const conv = input.turn.session.key;
    const told = await this.reportBackground(conv);
    const answer = await this.route(input, told.text);
    // An approval told in this turn: the next message answers it (unless this one opened a question of its own).
    if (told.waiting && !(await this.rt.conversations.get(conv)).question) await this.askApproval(conv, told.waiting);
    return answer;
  }

  private async route(input: DispatchInput, told: string): Promise<Dispatch> {
    const conv = input.turn.session.key;
    const text = input.userText.trim();
    let preface = told;

    // Not the person's words: hand over untouched, whatever is pending.
    if (input.notFromPerson || !text) return this.handover(conv, preface, "state", input.notFromPerson ?? "empty");

    await this.setState(conv, "routing");

    // A client's retry of a message that already started a run: never a second run.
    const prior = await this.rt.runs.store.byMessage(conv, input.messageKey);
    if (prior) {
      this.decision(conv, "status", "state", {
        system: prior.system,
        reason: "retry of the message that started this run",
      });
      if (!this.rt.runs.isLive(prior.id)) return this.sayRun(conv, preface, prior);
      await this.setState(conv, "executing");
      return this.attach(prior, input, preface, false);
    }

    const resume = RESUME.exec(text);
    if (resume) return this.askResume(conv, resume[1]!, preface);

    const slash = parseSlash(text) ?? testCommand(text, (id) => this.system(id) !== undefined);
    if (slash) return this.slash(conv, slash, input, preface);

    // The builder is waiting for this conversation's answer, or building: its message.
    if (this.opts.builder && (await this.rt.conversations.withBuilder(conv)))
      return this.toBuilder(conv, preface, "state", "the builder is busy with this conversation");

    // The open question: "yes" to a run shown; "no", "cancel" end it; a lapsed one is dropped.
    const reply = await this.rt.conversations.reply(conv, text);
    const asked = "question" in reply && isRouterQuestion(reply.question) ? reply.question : undefined;
    if (reply.kind === "expired" && asked) {
      this.decision(conv, "give_up", "state", { system: asked.system, reason: "expired" });
      const sys = this.system(asked.system);
      if (asked.kind === "gathering" && sys) preface = join(preface, giveUpText(sys.name, "expired"));
    }
    if (asked?.kind === "approval" && (reply.kind === "yes" || reply.kind === "ended"))
      return this.answerApproval(conv, asked, reply.kind === "yes", input, preface);
    if (reply.kind === "ended") {
      const confirm = reply.question.kind === "confirm";
      this.decision(conv, confirm ? "decline" : "cancel", "reply", { system: reply.question.system });
      const name = this.nameOf(reply.question.system);
      return this.say(conv, preface, confirm ? declinedText(name) : cancelledText(name), "idle");
    }
    if (asked?.kind === "confirm" && reply.kind === "yes") return this.confirmed(conv, asked, input, preface);
    // Anything else: a confirmation lapses and the message is routed afresh.
    if (asked?.kind === "confirm") await this.rt.conversations.close(conv);

    // What code can know, before any classifier call: a builder command, a question about the person's systems.
    const forBuilder = this.opts.builder
      ? builderRule(text, {
          canvas: (await this.rt.conversations.get(conv)).canvas,
          systems: this.rt.library.systems,
          runLive: (await this.rt.runs.store.active(conv)).length > 0,
        })
      : undefined;
    if (forBuilder) {
      if (asked?.kind === "gathering") await this.rt.conversations.close(conv);
      return this.toBuilder(conv, preface, { source: "rule", confidence: 1 }, forBuilder.reason, forBuilder.action);
    }

    const systems = this.systems();
    if (!systems.length && !this.opts.builder) return this.handover(conv, preface, "state", "no systems");
    const gathering = asked?.kind === "gathering" && reply.kind !== "expired" ? asked : undefined;
    const gatheringSystem = gathering ? await this.systemAt(gathering.system, gathering.version) : undefined;
    const d = await decide(
      { name: this.name, opts: this.opts, rt: this.rt, counted: () => this.classifierCalls++ },
      text,
      input,
      systems,
      gathering && gatheringSystem ? { system: gatheringSystem, values: gathering.values } : undefined,
    );

    if (d.action === "cancel") {
      if (gathering) {
        await this.rt.conversations.close(conv);
        this.decision(conv, "cancel", d.source, { system: gathering.system, confidence: d.confidence });
        return this.say(conv, preface, cancelledText(this.nameOf(gathering.system)), "idle");
      }
      const [active] = await this.rt.runs.store.active(conv);
      if (active) {
        this.decision(conv, "cancel", d.source, { system: active.system, confidence: d.confidence });
        return this.cancelRun(conv, preface, active.id);
      }
      return this.handover(conv, preface, d, "nothing to cancel");
    }
    if ((d.action === "build" || d.action === "ask") && this.opts.builder) {
      if (gathering) await this.rt.conversations.close(conv);
      return d.action === "ask"
        ? this.toBuilder(conv, preface, d, "a question about the person's systems", "ask")
        : this.toBuilder(conv, preface, d, "build");
    }
    if (d.action === "status") {
      const latest = await this.rt.runs.store.latest(conv);
      if (latest) {
        this.decision(conv, "status", d.source, { system: latest.system, confidence: d.confidence });
        return this.sayRun(conv, preface, latest);
      }
      return this.handover(conv, preface, d, "no run to report");
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
          await this.rt.conversations.close(conv);
          return this.handover(conv, preface, d, `unrelated to ${gatheringSystem.id}; gathering dropped`);
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
          gathering.version,
        );
      }
    }

    if (d.action !== "run" || !d.system || d.confidence < this.opts.thresholds.match) {
      if (gathering) await this.rt.conversations.close(conv);
      return this.handover(
        conv,
        preface,
        d,
        d.system ? `confidence ${d.confidence.toFixed(2)} below ${this.opts.thresholds.match}` : "no system",
      );
    }
    // "test the blog system with …", found by the classifier: a test run, never a real one.
    if (ASKS_FOR_TEST.test(text)) return this.testRun(conv, d.system, d.inputs, input, preface, d);
    return this.proceed(conv, d.system, d.inputs, d.confidence, d.source, input, preface, 0);
  }

  /** Inputs checked here, never on the classifier's word: clarify, confirm or run. */
  private async proceed(
    conv: string,
    system: LoadedSystem,
    candidate: Record<string, unknown>,
    confidence: number,
    source: Decision["source"] | "slash",
    input: DispatchInput,
    preface: string,
    rounds: number,
    /** The version chosen (`/run id@3`): `system` is that version's. */
    version?: number,
  ): Promise<Dispatch> {
    const check = checkInputs(system.inputs, candidate);
    if (!check.complete) {
      if (rounds >= this.opts.gathering.maxRounds) {
        await this.rt.conversations.close(conv);
        this.decision(conv, "give_up", source, {
          system: system.id,
          confidence,
          reason: `still missing after ${rounds} questions`,
        });
        return this.say(conv, preface, giveUpText(system.name, "rounds", rounds), "idle");
      }
      const next: RouterQuestion = {
        kind: "gathering",
        system: system.id,
        values: check.values,
        rounds: rounds + 1,
        since: Date.now(),
        ...(version === undefined ? {} : { version }),
      };
      await this.rt.conversations.ask(conv, next);
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
    const why =
      system.confirm === "always"
        ? "always"
        : confidence < this.opts.thresholds.trigger
          ? "unsure"
          : system.sideEffects && system.confirm === "auto"
            ? "side_effects"
            : undefined;
    if (why) {
      const hash = inputsHash(system.id, check.values);
      await this.rt.conversations.ask(conv, {
        kind: "confirm",
        system: system.id,
        values: check.values,
        hash,
        since: Date.now(),
        ...(version === undefined ? {} : { version }),
      });
      this.decision(conv, "confirm", source, { system: system.id, confidence, reason: why });
      this.rt.bus.emit({ type: "confirm", conversation: conv, system: system.id, inputsHash: hash });
      return this.say(conv, preface, confirmText(system.name, check.values, why), "idle");
    }
    await this.rt.conversations.close(conv);
    this.decision(conv, "run", source, { system: system.id, confidence });
    return this.start(conv, system, check.values, input, preface, false, version);
  }

  /**
   * A test run: with complete inputs it starts at once (nothing with side effects is carried out,
   * so there is nothing to confirm); otherwise what is missing, and no question is kept open.
   */
  private async testRun(
    conv: string,
    system: LoadedSystem,
    candidate: Record<string, unknown>,
    input: DispatchInput,
    preface: string,
    by: Pick<Decision, "source" | "confidence"> | "slash",
    version?: number,
  ): Promise<Dispatch> {
    const check = checkInputs(system.inputs, candidate);
    if (!check.complete) {
      const ask = clarifyText(system.name, check.missing, check.invalid, check.problems);
      return this.say(conv, preface, `${ask}\n\nThen test it with \`/test ${system.id} name=value …\`.`, "idle");
    }
    await this.rt.conversations.close(conv);
    const { source, confidence } = by === "slash" ? { source: "slash" as const, confidence: 1 } : by;
    this.decision(conv, "run", source, { system: system.id, confidence, reason: "test run" });
    return this.start(conv, system, check.values, input, preface, true, version);
  }

  /** "yes" to a shown run: exactly the inputs shown (hash), once. */
  private async confirmed(
    conv: string,
    pending: Extract<RouterQuestion, { kind: "confirm" }>,
    input: DispatchInput,
    preface: string,
  ): Promise<Dispatch> {
    if (!(await this.rt.conversations.take(conv, pending)))
      return this.say(conv, preface, "That was already answered.", "idle");
    if (pending.resumeRun) {
      this.decision(conv, "resume", "reply", { system: pending.system });
      await this.setState(conv, "executing");
      try {
        const rec = await this.rt.runs.resume(pending.resumeRun);
        await this.rt.runs.store.markAttached(rec.id);
        return this.attach(rec, input, preface, true);
      } catch (err) {
        return this.say(conv, preface, (err as Error).message, "idle");
      }
    }
    const system = await this.systemAt(pending.system, pending.version);
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
    return this.start(conv, system, pending.values, input, preface, false, pending.version);
  }

  /** "yes" or "no" to the approval a run of this conversation waits on: approved, the turn follows the run again. */
  private async answerApproval(
    conv: string,
    asked: Extract<RouterQuestion, { kind: "approval" }>,
    approve: boolean,
    input: DispatchInput,
    preface: string,
  ): Promise<Dispatch> {
    // "no" closed the question already; a second "yes" (or a retry racing the first) finds nothing.
    if (approve && !(await this.rt.conversations.take(conv, asked)))
      return this.say(conv, preface, "That was already answered.", "idle");
    this.decision(conv, approve ? "resume" : "decline", "reply", { system: asked.system, reason: "approval" });
    if (approve) await this.setState(conv, "executing");
    try {
      const rec = await this.rt.runs.decide(asked.runId, { approve, by: "chat", step: asked.step });
      if (!approve) {
        await this.rt.runs.store.markReported(rec.id);
        return this.sayRun(conv, preface, rec);
      }
      await this.rt.runs.store.markAttached(rec.id);
      return this.attach(rec, input, preface, false);
    } catch (err) {
      if (!(err instanceof RunError)) throw err;
      const rec = await this.rt.runs.get(asked.runId);
      if (!rec) return this.say(conv, preface, err.message, "idle");
      return this.say(
        conv,
        preface,
        `That run no longer waits for an approval. ${runStatusText(rec, this.nameOf(rec.system))}`,
        "idle",
      );
    }
  }

  private async askResume(conv: string, runId: string, preface: string): Promise<Dispatch> {
    const rec = await this.rt.runs.get(runId);
    // No run of this conversation: while the builder is busy here, or naming a system, it is the builder's "resume <system>".
    if ((!rec || rec.conversation !== conv) && this.opts.builder) {
      if (await this.rt.conversations.withBuilder(conv))
        return this.toBuilder(conv, preface, "state", "the builder is busy with this conversation");
      if (this.rt.library.get(runId) || (await this.rt.conversations.get(conv)).canvas === runId)
        return this.toBuilder(conv, preface, { source: "rule", confidence: 1 }, "a builder command");
    }
    if (!rec || rec.conversation !== conv)
      return this.say(conv, preface, `I know of no run \`${runId}\` in this conversation.`, "idle");
    if (!["paused", "interrupted", "failed"].includes(rec.status)) return this.sayRun(conv, preface, rec);
    const hash = inputsHash(rec.system, rec.inputs);
    await this.rt.conversations.ask(conv, {
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
          runsListText(await this.rt.runs.store.list({ conversation: conv, limit: 10 }), (id) => this.nameOf(id)),
          "idle",
        );
      case "status": {
        const rec = await (slash.runId ? this.rt.runs.get(slash.runId) : this.rt.runs.store.latest(conv));
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
        return this.sayRun(conv, preface, rec);
      }
      case "cancel": {
        const pending = await this.rt.conversations.close(conv);
        const [active] = await this.rt.runs.store.active(conv);
        this.decision(conv, "cancel", "slash", { system: active?.system ?? pending?.system });
        if (active) return this.cancelRun(conv, preface, active.id);
        return this.say(
          conv,
          preface,
          pending ? cancelledText(this.nameOf(pending.system)) : "There is nothing to cancel.",
          "idle",
        );
      }
      case "run": {
        const system = await this.systemAt(slash.system, slash.version);
        if (!system) {
          const last = this.system(slash.system) && (await this.rt.runs.versions.latest(slash.system))?.number;
          return this.say(
            conv,
            preface,
            last
              ? `\`${slash.system}\` has no version ${slash.version} (its versions: 1 to ${last}).`
              : `There is no system \`${slash.system}\`.\n\n${systemsListText(this.systems())}`,
            "idle",
          );
        }
        if (slash.test) return this.testRun(conv, system, slash.inputs, input, preface, "slash", slash.version);
        // An explicit command: as sure as can be, but side effects are still confirmed.
        return this.proceed(conv, system, slash.inputs, 1, "slash", input, preface, 0, slash.version);
      }
    }
  }
}
