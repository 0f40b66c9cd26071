/**
 * The builder as a chat: Supervisor → Architect → Builder, on a canvas, for one conversation.
 *
 * Each message (after a pending question's yes/no — or, to "a system of that name exists: change
 * it or make a new one?", change/new — and the plain words "undo", "pause", "resume",
 * "deploy", "undeploy") is classified by the Supervisor model as JSON `{intent, confidence}` — or,
 * when that fails, by keywords on word boundaries — and handled:
 *   BUILD / EDIT → the Architect model writes an ExecutionPlan (checked; sent back once with the
 *                  errors), the Builder carries it out through the MCP tools, step lines stream;
 *                  an EDIT that deletes nodes is shown first and waits for "yes"; every applied
 *                  plan is a canvas version ("undo" goes back one);
 *   QUERY        → the answer model, given the canvases, systems and recent runs as context;
 *   EXPORT       → a bundle (.tar.gz) written under `<dataDir>/exports/`, and where to fetch it;
 *   CONFIGURE    → settings changes (deploy, enable, confirmation, input defaults, a step's model,
 *                  schedules: a schedule in words goes here without the Supervisor)
 *                  shown as a diff of the system, applied after "yes";
 *   UNKNOWN      → handed over to the answer model.
 * The conversation's state (routing → planning → executing → paused → completed | error) and any
 * question waiting for a yes are kept in SQLite (src/workflows/conversation/) and published.
 *
 * This file routes a message and holds the builds' controls from outside the chat; the handlers are
 * beside it: chat-build.ts (BUILD, EDIT), chat-answers.ts (QUERY, EXPORT, CONFIGURE),
 * chat-commands.ts (the plain commands and the yes to a question), chat-versions.ts (a version
 * diff, a rollback), chat-kit.ts (what they share),
 * chat-words.ts (the words read without a model).
 */
import type { Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import { isRouterQuestion } from "../conversation/machine.js";
import { builderRule, versionRequest } from "../router/decide.js";
import type { RunRecord } from "../systems/db.js";
import type { RunProgram } from "../systems/runner.js";
import { answerQuery, configureSystem, exportSystem } from "./chat-answers.js";
import { buildBeside, planChange } from "./chat-build.js";
import { confirmed, runCommand } from "./chat-commands.js";
import { versionCommand } from "./chat-versions.js";
import { BuilderChat } from "./chat-kit.js";
import { COMMAND, sameNameAnswer } from "./chat-words.js";
import { keywordIntent, parseSupervisorReply, supervisorPrompt } from "./supervisor.js";
import { scheduleFromWords } from "../triggers/phrases.js";
import type { IntentVerdict } from "./types.js";

export type { BuilderEngineDeps } from "./chat-kit.js";
export { planSummary } from "./chat-build.js";

/** The chat's shared parts (chat-kit.ts) with the routing of a message on top. */
export class BuilderEngine extends BuilderChat {
  async dispatch(input: DispatchInput): Promise<Dispatch> {
    const conv = input.turn.session.key;
    const text = input.userText.trim();
    if (input.notFromPerson || !text)
      return this.say(
        conv,
        "I build systems from plain words. Say what the system should do, for example: *build a system that researches a topic and writes a blog post about it*.",
        undefined,
      );
    await this.setState(conv, "routing");
    // A question waiting for its answer: "yes" does what it asked; "no", "cancel" end it; anything else lapses it.
    const reply = await this.d.conversations.reply(conv, text);
    if (reply.kind === "ended") return this.say(conv, "Fine, nothing was changed.", "idle");
    if ("question" in reply && !isRouterQuestion(reply.question)) {
      const q = reply.question;
      // A build named like a system that exists: "change" is its yes, "new" builds beside it.
      const pick = q.kind === "samename" && reply.kind === "other" ? sameNameAnswer(text) : undefined;
      if (reply.kind === "yes" || pick === "change") return confirmed(this, conv, q, input);
      if (pick === "new" && q.kind === "samename")
        return (await this.d.conversations.take(conv, q))
          ? buildBeside(this, conv, q, input)
          : this.say(conv, "That was already answered.", "idle");
      await this.d.conversations.close(conv);
    }

    const focus = await this.focusFor(text, (await this.d.conversations.get(conv)).canvas);
    const versions = versionRequest(text);
    if (versions) return versionCommand(this, conv, versions, (await this.named(text)) ?? focus);
    const cmd = COMMAND.exec(text);
    if (cmd) return runCommand(this, conv, cmd[1]!.toLowerCase(), cmd[2] ?? focus, input);
    // A question about the person's systems or runs (the router's rule): answered from that state,
    // whatever a model would call it.
    const question = builderRule(text, {
      ...(focus ? { canvas: focus } : {}),
      systems: this.d.host.library.systems,
      runLive: false,
    });
    if (question?.action === "ask") return answerQuery(this, conv, text, focus, input);
    // A schedule in words ("run it every weekday at 8", "stop the schedule") is a settings change,
    // read without a model; a build request that mentions a time stays a build.
    if (scheduleFromWords(text) && (keywordIntent(text).intent !== "BUILD" || /\bschedul/i.test(text)))
      return configureSystem(this, conv, focus, text, input);

    const verdict = await this.classify(text, input);
    this.d.log.debug({ builder: this.name, conversation: conv, ...verdict }, "builder intent");
    switch (verdict.intent) {
      case "BUILD":
        // Keywords hear "add a step to X" as BUILD; naming an existing canvas makes it an edit of
        // it (the Supervisor model is told so itself).
        if (verdict.source === "keywords" && focus && this.mentions(text, focus) && /\badd\b/i.test(text))
          return planChange(this, conv, "EDIT", focus, text, input);
        return planChange(this, conv, "BUILD", undefined, text, input);
      case "EDIT":
        if (!focus) return this.say(conv, await this.noCanvasText(), "idle");
        return planChange(this, conv, "EDIT", focus, text, input);
      case "QUERY":
        return answerQuery(this, conv, text, focus, input);
      case "EXPORT":
        return exportSystem(this, conv, focus, text);
      case "CONFIGURE":
        return configureSystem(this, conv, focus, text, input);
      default:
        if (this.opts.answer) return { kind: "handover", model: this.opts.answer };
        return this.say(conv, this.helpText(), "idle");
    }
  }

  private async classify(text: string, input: DispatchInput): Promise<IntentVerdict> {
    const prompt = supervisorPrompt({
      text,
      recent: input.recent,
      canvases: (await this.d.canvases.list()).map((c) => ({ system: c.system, name: c.name, status: c.status })),
    });
    this.modelCalls.supervisor++;
    const out = await this.callText(this.opts.supervisor, prompt.system, prompt.user, input.turn.cancel);
    if (out !== undefined) {
      const v = parseSupervisorReply(out);
      if (!("error" in v)) return v;
      this.d.log.warn({ builder: this.name, problem: v.error }, "supervisor reply did not parse; using keywords");
    }
    return keywordIntent(text);
  }

  // ---- builds from outside the chat (HTTP, after a restart) ---------------------------------

  /** The program of a build resumed through the run manager: this engine's tools and settings. */
  program(run: RunRecord): Promise<RunProgram> {
    return this.runner.program(run);
  }
}
