/**
 * The builder as a chat: Supervisor → Architect → Builder, on a canvas, for one conversation.
 *
 * Each message (after a pending question's yes/no, and the plain words "undo", "pause", "resume",
 * "deploy", "undeploy") is classified by the Supervisor model as JSON `{intent, confidence}` — or,
 * when that fails, by keywords on word boundaries — and handled:
 *   BUILD / EDIT → the Architect model writes an ExecutionPlan (checked; sent back once with the
 *                  errors), the Builder carries it out through the MCP tools, step lines stream;
 *                  an EDIT that deletes nodes is shown first and waits for "yes"; every applied
 *                  plan is a canvas version ("undo" goes back one);
 *   QUERY        → the answer model, given the canvases, systems and recent runs as context;
 *   EXPORT       → a bundle (.tar.gz) written under `<dataDir>/exports/`, and where to fetch it;
 *   CONFIGURE    → settings changes (deploy, enable, confirmation, input defaults, a step's model)
 *                  shown as a diff of the system, applied after "yes";
 *   UNKNOWN      → handed over to the answer model.
 * The conversation's state (routing → planning → executing → paused → completed | error) and any
 * question waiting for a yes are kept in SQLite (src/workflows/builder/build-store.ts) and published.
 */
import type { Logger } from "pino";
import type { BackendEvent, Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import type { ConversationState, EventBus } from "../../ops/events/bus.js";
import { replyKind } from "../router/replies.js";
import type { ModelCaller } from "../systems/step-executor.js";
import type { RunStore } from "../systems/db.js";
import type { Cancellation } from "../../core/util/cancel.js";
import { alnumId } from "../../core/util/ids.js";
import { architectPrompt, parsePlan, repairRequest, type ArchitectContext } from "./architect.js";
import { validatePlan } from "./plan-check.js";
import type { BuilderPending, BuildRecord, BuildStore } from "./build-store.js";
import type { CanvasStore } from "./canvas-store.js";
import {
  applyChanges,
  changesFromWords,
  checkChanges,
  configurePrompt,
  parseChanges,
  systemDiff,
} from "./configure.js";
import { compiledSystem, deployCanvas, undeployCanvas, type SystemsHost } from "./deploy.js";
import { BuildRunner } from "./build-runner.js";
import type { ToolCaller } from "./mcp-client.js";
import type { BuilderOptions } from "./options.js";
import type { DeployPolicy } from "./policy.js";
import { keywordIntent, parseSupervisorReply, supervisorPrompt } from "./supervisor.js";
import type { ExecutionPlan, IntentVerdict } from "./types.js";

export interface BuilderEngineDeps {
  canvases: CanvasStore;
  builds: BuildStore;
  /** A fresh MCP connection to the canvas and sandbox tools (closed after each build). */
  connect(): Promise<ToolCaller>;
  bus: EventBus;
  callModel: ModelCaller;
  host: SystemsHost;
  runs?: RunStore;
  dataDir: string;
  /** Models an agent node may use, with their backend type. */
  models: Array<{ id: string; kind: string }>;
  /** Write a system's bundle; returns the file. */
  exportBundle(system: string): Promise<{ file: string; bytes: number }>;
  log: Logger;
}

const SYSTEM_ID = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const STOP = new Set([
  "a",
  "an",
  "the",
  "that",
  "which",
  "who",
  "with",
  "and",
  "or",
  "of",
  "to",
  "for",
  "on",
  "in",
  "it",
  "about",
  "one",
  "another",
  "then",
  "me",
  "my",
  "i",
  "please",
  "build",
  "make",
  "create",
  "new",
  "system",
  "workflow",
  "pipeline",
  "can",
  "you",
  "would",
  "could",
  "set",
  "up",
  "design",
  "generate",
  "agent",
  "agents",
  "using",
  "by",
  "from",
  "into",
  "is",
  "be",
]);

/** Plain commands understood without a model. */
const COMMAND =
  /^\s*\/?(undo|pause|resume|deploy|undeploy|status)\b(?:\s+`?([a-z0-9][a-z0-9_-]{0,63})`?)?\s*[.!]?\s*$/i;

export class BuilderEngine {
  /** Supervisor and Architect calls made (tests and the bench read it). */
  modelCalls = { supervisor: 0, architect: 0 };
  /** Builds running in this process. */
  private readonly runner: BuildRunner;

  constructor(
    readonly name: string,
    private readonly opts: BuilderOptions,
    private readonly d: BuilderEngineDeps,
  ) {
    this.runner = new BuildRunner({
      canvases: d.canvases,
      builds: d.builds,
      connect: d.connect,
      bus: d.bus,
      maxParallel: opts.maxParallel,
      retryDelayScale: opts.retryDelayScale,
      ended: (rec) => {
        if (rec.conversation)
          this.setState(
            rec.conversation,
            rec.status === "completed" ? "completed" : rec.status === "paused" ? "paused" : "error",
          );
      },
    });
  }

  async dispatch(input: DispatchInput): Promise<Dispatch> {
    const conv = input.turn.session.key;
    const text = input.userText.trim();
    if (input.notFromPerson || !text)
      return this.say(
        conv,
        "I build systems from plain words. Say what the system should do, for example: *build a system that researches a topic and writes a blog post about it*.",
        undefined,
      );
    this.setState(conv, "routing");
    const c = this.d.builds.conversation(conv);

    // A question waiting for its answer.
    if (c.pending && Date.now() - c.pending.since <= this.opts.confirmMinutes * 60_000) {
      const reply = replyKind(text);
      if (reply === "yes") return this.confirmed(conv, c.pending, input);
      this.setPending(conv, undefined);
      if (reply) return this.say(conv, "Fine, nothing was changed.", "idle");
    } else if (c.pending) this.setPending(conv, undefined);

    const focus = this.focusFor(text, c.focus);
    const cmd = COMMAND.exec(text);
    if (cmd) return this.command(conv, cmd[1]!.toLowerCase(), cmd[2] ?? focus, input);

    const verdict = await this.classify(text, input);
    this.d.log.debug({ builder: this.name, conversation: conv, ...verdict }, "builder intent");
    switch (verdict.intent) {
      case "BUILD":
        // Keywords hear "add a step to X" as BUILD; naming an existing canvas makes it an edit of
        // it (the Supervisor model is told so itself).
        if (verdict.source === "keywords" && focus && this.mentions(text, focus) && /\badd\b/i.test(text))
          return this.plan(conv, "EDIT", focus, text, input);
        return this.plan(conv, "BUILD", undefined, text, input);
      case "EDIT":
        if (!focus) return this.say(conv, this.noCanvasText(), "idle");
        return this.plan(conv, "EDIT", focus, text, input);
      case "QUERY":
        return this.query(conv, text, focus, input);
      case "EXPORT":
        return this.exportSystem(conv, focus, text);
      case "CONFIGURE":
        return this.configure(conv, focus, text, input);
      default:
        if (this.opts.answer) return { kind: "handover", model: this.opts.answer };
        return this.say(conv, this.helpText(), "idle");
    }
  }

  // ---- intents -------------------------------------------------------------------------------

  private async classify(text: string, input: DispatchInput): Promise<IntentVerdict> {
    const prompt = supervisorPrompt({
      text,
      recent: input.recent,
      canvases: this.d.canvases.list().map((c) => ({ system: c.system, name: c.name, status: c.status })),
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

  /** BUILD or EDIT: plan, check (once more with the errors), then build — or ask first when it deletes. */
  private async plan(
    conv: string,
    intent: "BUILD" | "EDIT",
    focus: string | undefined,
    text: string,
    input: DispatchInput,
  ): Promise<Dispatch> {
    this.setState(conv, "planning");
    const canvas = focus ? this.d.canvases.get(focus) : undefined;
    if (intent === "EDIT" && !canvas) return this.say(conv, this.noCanvasText(), "idle");
    const system = canvas?.system ?? this.freshId(text);
    const ctx: ArchitectContext = {
      request: text,
      intent,
      system,
      canvas,
      models: this.d.models,
      systems: this.d.host.library.systems
        .filter((s) => s.id !== system)
        .map((s) => ({ id: s.id, description: s.description })),
      executors: { webhook: true, commands: this.opts.allowCommands, mcp: true },
    };
    const prompt = architectPrompt(ctx);
    let user = prompt.user;
    let errors: string[] = [];
    let plan: ExecutionPlan | undefined;
    for (let attempt = 0; attempt < 2 && !plan; attempt++) {
      this.modelCalls.architect++;
      const out = await this.callText(this.opts.architect, prompt.system, user, input.turn.cancel);
      if (out === undefined)
        return this.say(
          conv,
          `I could not reach the planning model (${this.opts.architect}); nothing was changed. Try again in a moment.`,
          "error",
        );
      const parsed = parsePlan(out, { system });
      errors =
        "errors" in parsed
          ? parsed.errors
          : validatePlan(parsed.plan, {
              canvas,
              models: ctx.models.map((m) => m.id),
              systems: ctx.systems.map((s) => s.id),
            });
      if (!errors.length && "plan" in parsed) plan = parsed.plan;
      else user = `${prompt.user}\n\n${repairRequest(out, errors)}`;
    }
    if (!plan) {
      return this.say(
        conv,
        [
          "The plan I got could not be used, even after sending it back once. Nothing was changed. What was wrong:",
          "",
          ...errors.map((e) => `- ${e}`),
        ].join("\n"),
        "error",
      );
    }
    // BUILD: the Architect may name the system; an id already in use keeps the one chosen here.
    if (intent === "BUILD") {
      const wanted = plan.metadata.system;
      plan.metadata.system = wanted && SYSTEM_ID.test(wanted) && !this.taken(wanted) ? wanted : system;
    } else plan.metadata.system = system;

    const deletes = plan.steps.filter((s) => s.action === "DELETE_NODE");
    if (deletes.length) {
      this.setPending(
        conv,
        { kind: "plan", system: plan.metadata.system, plan, intent, since: Date.now() },
        plan.metadata.system,
      );
      return this.say(
        conv,
        [
          `This change to **${plan.metadata.system}** deletes ${deletes.length} node${deletes.length === 1 ? "" : "s"}:`,
          "",
          planSummary(plan),
          "",
          "Go ahead? (yes / no)",
        ].join("\n"),
        "idle",
      );
    }
    return this.build(conv, intent, plan, input);
  }

  /** Carry a checked plan out, streaming its steps. */
  private build(conv: string, intent: "BUILD" | "EDIT", plan: ExecutionPlan, input: DispatchInput): Dispatch {
    const system = plan.metadata.system;
    if (intent === "BUILD" && !this.d.canvases.get(system))
      this.d.canvases.create({ system, name: plan.metadata.name || system, description: plan.metadata.description });
    else if (intent === "BUILD") {
      // A BUILD naming a draft that exists: its name and description follow the new plan.
      this.d.canvases.mutate(system, (c) => ({
        ...c,
        name: plan.metadata.name || c.name,
        description: plan.metadata.description || c.description,
      }));
    }
    const rec: BuildRecord = {
      id: alnumId("build_", 16),
      conversation: conv,
      system,
      intent,
      status: "running",
      plan,
      steps: {},
      vars: {},
      createdAt: Date.now(),
      updatedAt: Date.now(),
    };
    this.d.builds.save(rec);
    this.setFocus(conv, system);
    const head = `${intent === "BUILD" ? "Building" : "Changing"} **${plan.metadata.name || system}** (build \`${rec.id}\`)${plan.metadata.summary ? `: ${plan.metadata.summary}` : ""}\n\n`;
    return { kind: "answer", events: this.follow(conv, rec, head, input.turn.cancel) };
  }

  /** Stream a build (fresh or resumed) to this turn until it ends or detaches; its end text names what comes next. */
  private follow(conv: string, rec: BuildRecord, head: string, turnCancel: Cancellation): AsyncGenerator<BackendEvent> {
    this.setState(conv, "executing");
    return this.runner.follow(rec, head, turnCancel, this.opts.detachAfterSeconds * 1000, (b) => this.endText(b));
  }

  private async endText(b: BuildRecord): Promise<string> {
    const name = b.plan.metadata.name || b.system;
    if (b.status === "paused") {
      const left = Object.values(b.steps).filter((s) => s.status !== "completed" && s.status !== "skipped").length;
      return `Paused with ${left} step${left === 1 ? "" : "s"} to go. Say **resume** to go on.`;
    }
    if (b.status === "failed") {
      const step = b.plan.steps.find((s) => s.id === b.failedStep);
      return `The build stopped: step \`${b.failedStep ?? "?"}\`${step ? ` (${step.name})` : ""} failed: ${b.error ?? "unknown error"}. Steps that needed it were not run. Say **undo** to go back to the canvas as it was.`;
    }
    const canvas = this.d.canvases.get(b.system);
    const tail =
      canvas?.status === "deployed"
        ? await this.redeploy(b.system)
        : `Say **deploy** to make it available from any chat, or tell me what to change.`;
    return `Done: **${name}** has ${canvas?.nodes.length ?? 0} nodes and ${canvas?.edges.length ?? 0} connections (version ${canvas?.version ?? "?"}). ${tail}`;
  }

  /** An edited canvas that was deployed is deployed again (the router runs what the canvas shows). */
  private async redeploy(system: string): Promise<string> {
    const res = await deployCanvas({
      store: this.d.canvases,
      host: this.d.host,
      dataDir: this.d.dataDir,
      policy: this.policy(),
      system,
    });
    return res.ok
      ? "The deployed system was updated."
      : `The deployed system was NOT updated: ${res.problems.join("; ")}`;
  }

  private async query(conv: string, text: string, focus: string | undefined, input: DispatchInput): Promise<Dispatch> {
    const context = this.stateContext(focus);
    const model = this.opts.answer ?? this.opts.supervisor;
    const system =
      "You answer questions about the person's systems in clawbridge: their canvases (nodes and edges), whether each is a draft or deployed, and their recent runs. Use only the state given as JSON; say so when it does not hold the answer. Be brief.";
    const out = await this.callText(
      model,
      system,
      `State:\n${JSON.stringify(context, null, 1)}\n\nQuestion: ${text}`,
      input.turn.cancel,
    );
    return this.say(conv, out?.trim() || this.stateText(context), "idle");
  }

  private async exportSystem(conv: string, focus: string | undefined, text: string): Promise<Dispatch> {
    const id = this.named(text) ?? focus;
    if (!id) return this.say(conv, `Which system? ${this.knownText()}`, "idle");
    try {
      const { file, bytes } = await this.d.exportBundle(id);
      return this.say(
        conv,
        [
          `Exported **${id}** (${bytes} bytes): \`${file}\``,
          "",
          `Also: \`GET /v1/systems/${id}/export\`, or \`clawbridge systems export ${id} -o ${id}.tar.gz\`. \`clawbridge systems import FILE\` reads it back.`,
        ].join("\n"),
        "idle",
      );
    } catch (err) {
      return this.say(conv, `I could not export **${id}**: ${(err as Error).message}`, "error");
    }
  }

  private async configure(
    conv: string,
    focus: string | undefined,
    text: string,
    input: DispatchInput,
  ): Promise<Dispatch> {
    const id = this.named(text) ?? focus;
    const canvas = id ? this.d.canvases.get(id) : undefined;
    if (!canvas) {
      if (id && this.d.host.library.get(id))
        return this.say(
          conv,
          `**${id}** is defined in ${this.d.host.library.get(id)!.source}, not on a canvas; change it there.`,
          "idle",
        );
      return this.say(conv, this.noCanvasText(), "idle");
    }
    let changes = changesFromWords(text, canvas);
    if (changes.length) {
      const checked = checkChanges(changes, canvas);
      if ("errors" in checked)
        return this.say(
          conv,
          `I cannot change that on **${canvas.system}**: ${checked.errors.map((e) => e.replace(/^changes\[\d+\]: /, "")).join("; ")}.`,
          "idle",
        );
      changes = checked.changes;
    } else {
      const p = configurePrompt(text, canvas);
      const out = await this.callText(this.opts.answer ?? this.opts.supervisor, p.system, p.user, input.turn.cancel);
      const parsed = out === undefined ? { errors: ["the model could not be reached"] } : parseChanges(out, canvas);
      if ("errors" in parsed)
        return this.say(
          conv,
          `I did not understand which setting to change (${parsed.errors.join("; ")}). Say, for example, *set the default tone of ${canvas.system} to casual* or *always ask before running ${canvas.system}*.`,
          "idle",
        );
      changes = parsed.changes;
    }
    if (!changes.length) return this.say(conv, `Nothing to change on **${canvas.system}**.`, "idle");
    if (changes.length === 1 && changes[0]!.path === "deployed")
      return this.command(conv, changes[0]!.value ? "deploy" : "undeploy", canvas.system, input);
    const diff = systemDiff(canvas, changes);
    this.setPending(conv, { kind: "configure", system: canvas.system, changes, since: Date.now() }, canvas.system);
    return this.say(
      conv,
      [`These changes to **${canvas.system}**:`, "", diff, "", "Apply them? (yes / no)"].join("\n"),
      "idle",
    );
  }

  // ---- commands and confirmations ----------------------------------------------------------

  private async command(conv: string, cmd: string, id: string | undefined, input: DispatchInput): Promise<Dispatch> {
    if (cmd === "pause") {
      const b = this.d.builds.latest(conv, ["running"]);
      if (!b || !this.runner.isLive(b.id)) return this.say(conv, "No build is running in this conversation.", "idle");
      this.pause(b.id);
      const out = await this.runner.settled(b.id);
      return this.say(conv, out ? await this.endText(out) : "Paused.", "paused");
    }
    if (cmd === "resume") {
      const b = this.d.builds.latest(conv, ["paused"]);
      if (!b) return this.say(conv, "No build is paused in this conversation.", "idle");
      return {
        kind: "answer",
        events: this.follow(
          conv,
          b,
          `Resuming build \`${b.id}\` of **${b.plan.metadata.name || b.system}**\n\n`,
          input.turn.cancel,
        ),
      };
    }
    if (cmd === "status") {
      const b = this.d.builds.latest(conv);
      if (!b) return this.say(conv, this.knownText(), "idle");
      const done = Object.values(b.steps).filter((s) => s.status === "completed").length;
      return this.say(
        conv,
        `Build \`${b.id}\` of **${b.system}** is ${b.status}: ${done} of ${b.plan.steps.length} steps done.${b.failedStep ? ` Step \`${b.failedStep}\` failed: ${b.error}` : ""}`,
        "idle",
      );
    }
    if (!id) return this.say(conv, this.noCanvasText(), "idle");
    const canvas = this.d.canvases.get(id);
    if (!canvas) return this.say(conv, `There is no canvas **${id}**. ${this.knownText()}`, "idle");
    this.setFocus(conv, id);
    if (cmd === "undo") {
      if (canvas.version === 0)
        return this.say(conv, `**${id}** is at its first version; there is nothing to undo.`, "idle");
      const back = this.d.canvases.undo(id)!;
      const tail = back.status === "deployed" ? ` ${await this.redeploy(id)}` : "";
      return this.say(
        conv,
        `Undone: **${id}** is back at version ${back.version} (${back.nodes.length} nodes, ${back.edges.length} connections).${tail}`,
        "idle",
      );
    }
    if (cmd === "deploy") {
      const res = await compiledSystem(this.d.canvases, id, this.d.host, this.policy());
      if (!res.ok)
        return this.say(
          conv,
          [`**${id}** cannot be deployed yet:`, "", ...res.problems.map((p) => `- ${p}`)].join("\n"),
          "idle",
        );
      const inputs = Object.keys(((res.system.inputs as { properties?: object }).properties ?? {}) as object);
      this.setPending(conv, { kind: "deploy", system: id, since: Date.now() }, id);
      return this.say(
        conv,
        `Deploy **${canvas.name || id}**? The router will offer it in every chat${inputs.length ? ` and ask for ${inputs.map((i) => `\`${i}\``).join(", ")}` : ""}. (yes / no)`,
        "idle",
      );
    }
    // undeploy
    if (canvas.status !== "deployed") return this.say(conv, `**${id}** is not deployed.`, "idle");
    this.setPending(conv, { kind: "undeploy", system: id, since: Date.now() }, id);
    return this.say(conv, `Stop offering **${id}**? Its canvas stays, as a draft. (yes / no)`, "idle");
  }

  private async confirmed(conv: string, p: BuilderPending, input: DispatchInput): Promise<Dispatch> {
    this.setPending(conv, undefined, p.system);
    switch (p.kind) {
      case "plan":
        return this.build(conv, p.intent, p.plan, input);
      case "deploy": {
        const res = await deployCanvas({
          store: this.d.canvases,
          host: this.d.host,
          dataDir: this.d.dataDir,
          policy: this.policy(),
          system: p.system,
        });
        if (!res.ok)
          return this.say(
            conv,
            [`**${p.system}** was not deployed:`, "", ...res.problems.map((x) => `- ${x}`)].join("\n"),
            "error",
          );
        return this.say(
          conv,
          `Deployed **${p.system}**. Ask for it in any chat, or run it with \`/run ${p.system}\`.`,
          "completed",
        );
      }
      case "undeploy": {
        const res = await undeployCanvas({
          store: this.d.canvases,
          host: this.d.host,
          dataDir: this.d.dataDir,
          system: p.system,
        });
        return this.say(conv, res.message, res.ok ? "idle" : "error");
      }
      case "configure": {
        const canvas = this.d.canvases.get(p.system);
        if (!canvas) return this.say(conv, `**${p.system}** no longer exists.`, "idle");
        try {
          await applyChanges(p.changes, canvas, this.d.canvases, this.d.connect);
        } catch (err) {
          return this.say(conv, `The changes were not applied: ${(err as Error).message}`, "error");
        }
        this.d.canvases.commitVersion(p.system, `configure: ${p.changes.map((c) => c.path).join(", ")}`);
        const after = this.d.canvases.get(p.system)!;
        const tail = after.status === "deployed" ? ` ${await this.redeploy(p.system)}` : "";
        return this.say(conv, `Applied to **${p.system}** (version ${after.version}).${tail}`, "completed");
      }
    }
  }

  // ---- builds from outside the chat (HTTP, CLI) ---------------------------------------------

  /** Ask a running build to stop between steps. False when it is not running here. */
  pause(buildId: string): boolean {
    return this.runner.pause(buildId);
  }

  /** Resume a paused build in the background. */
  resume(buildId: string): BuildRecord | undefined {
    return this.runner.resume(buildId);
  }

  /** Wait for a live build (tests, shutdown). */
  settled(buildId: string): Promise<BuildRecord | undefined> {
    return this.runner.settled(buildId);
  }

  /** Pause every live build (shutdown): they resume from their unfinished steps. */
  close(): Promise<void> {
    return this.runner.close();
  }

  // ---- helpers ---------------------------------------------------------------------------------

  private policy(): DeployPolicy {
    return { allowCommands: this.opts.allowCommands, allowHosts: this.opts.allowHosts };
  }

  private async callText(
    model: string,
    system: string,
    prompt: string,
    cancel: Cancellation,
  ): Promise<string | undefined> {
    let text = "";
    try {
      for await (const ev of this.d.callModel({
        model,
        prompt,
        system,
        cancel,
        timeoutSeconds: this.opts.modelTimeoutSeconds,
      })) {
        if (ev.type === "text") text += ev.text;
        else if (ev.type === "error") {
          this.d.log.warn(
            { builder: this.name, model, code: ev.error.code, message: ev.error.message },
            "builder model call failed",
          );
          return undefined;
        } else if (ev.type === "done") return text;
      }
    } catch (err) {
      this.d.log.warn({ builder: this.name, model, err: (err as Error).message }, "builder model call failed");
    }
    return undefined;
  }

  /** The canvas a message is about: one it names, else the conversation's. */
  private focusFor(text: string, current: string | undefined): string | undefined {
    return this.named(text) ?? (current && this.d.canvases.get(current) ? current : undefined);
  }

  /** A canvas or system the message names (by id or name, on word boundaries). */
  private named(text: string): string | undefined {
    const lower = text.toLowerCase();
    for (const c of this.d.canvases.list())
      if (this.mentions(lower, c.system) || (c.name && wordIn(lower, c.name.toLowerCase()))) return c.system;
    for (const s of this.d.host.library.systems) if (this.mentions(lower, s.id)) return s.id;
    return undefined;
  }

  private mentions(text: string, id: string): boolean {
    return wordIn(text.toLowerCase(), id.toLowerCase());
  }

  private taken(id: string): boolean {
    return Boolean(this.d.canvases.get(id) || this.d.host.library.get(id));
  }

  /** A readable id for a new system from the request's words (`researches-topic-writes`), unique. */
  private freshId(text: string): string {
    const words = (text.toLowerCase().match(/[a-z0-9]+/g) ?? [])
      .filter((w) => !STOP.has(w) && w.length > 1)
      .slice(0, 3);
    const base = (words.join("-") || "system").slice(0, 48);
    let id = base;
    for (let n = 2; this.taken(id) && n < 1000; n++) id = `${base}-${n}`;
    return id;
  }

  private stateContext(focus: string | undefined) {
    const canvases = this.d.canvases.list().map((c) => ({
      system: c.system,
      name: c.name,
      status: c.status,
      version: c.version,
      nodes: c.nodes.length,
      edges: c.edges.length,
    }));
    const current = focus ? this.d.canvases.get(focus) : undefined;
    const runs =
      this.d.runs?.list({ limit: 10 }).map((r) => ({
        id: r.id,
        system: r.system,
        status: r.status,
        failedStep: r.failedStep,
        error: r.error,
        createdAt: new Date(r.createdAt).toISOString(),
      })) ?? [];
    return {
      canvases,
      current: current
        ? {
            system: current.system,
            status: current.status,
            nodes: current.nodes.map((n) => ({ id: n.id, type: n.type, label: n.label, properties: n.properties })),
            edges: current.edges.map((e) => `${e.from} -> ${e.to}`),
          }
        : null,
      deployedSystems: this.d.host.library.systems.map((s) => ({
        id: s.id,
        description: s.description,
        enabled: s.enabled,
      })),
      recentRuns: runs,
    };
  }

  private stateText(ctx: ReturnType<BuilderEngine["stateContext"]>): string {
    const lines = ["Here is what there is:", ""];
    for (const c of ctx.canvases)
      lines.push(`- **${c.system}** (${c.status}, version ${c.version}): ${c.nodes} nodes, ${c.edges} connections`);
    if (!ctx.canvases.length) lines.push("- no canvases yet");
    if (ctx.recentRuns.length)
      lines.push("", "Recent runs:", ...ctx.recentRuns.map((r) => `- \`${r.id}\` ${r.system}: ${r.status}`));
    return lines.join("\n");
  }

  private knownText(): string {
    const list = this.d.canvases.list();
    return list.length
      ? `Canvases: ${list.map((c) => `\`${c.system}\` (${c.status})`).join(", ")}.`
      : "There are no canvases yet.";
  }

  private noCanvasText(): string {
    return `Which system? Name it, or build one first. ${this.knownText()}`;
  }

  private helpText(): string {
    return "I build and change systems from plain words: *build a system that …*, *add a step that …*, *what does content-pipeline do?*, *export content-pipeline*, *set the default tone to casual*, **deploy**, **undo**.";
  }

  private setState(conv: string, state: ConversationState): void {
    const c = this.d.builds.conversation(conv);
    if (c.state === state) return;
    if (state !== "routing") this.d.builds.setConversation(conv, { ...c, state });
    this.d.bus.emit({ type: "state", conversation: conv, state });
  }

  private setPending(conv: string, pending: BuilderPending | undefined, focus?: string): void {
    const c = this.d.builds.conversation(conv);
    this.d.builds.setConversation(conv, { ...c, pending, focus: focus ?? c.focus });
  }

  private setFocus(conv: string, focus: string): void {
    const c = this.d.builds.conversation(conv);
    this.d.builds.setConversation(conv, { ...c, focus });
  }

  private say(conv: string, text: string, state: ConversationState | undefined): Dispatch {
    if (state) this.setState(conv, state);
    return { kind: "answer", events: textEvents(text) };
  }
}

function wordIn(text: string, word: string): boolean {
  const esc = word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^a-z0-9_-])${esc}($|[^a-z0-9_-])`).test(text);
}

export function planSummary(plan: ExecutionPlan): string {
  return plan.steps
    .map(
      (s, i) =>
        `${i + 1}. ${s.action} ${s.name || s.id}${s.action === "DELETE_NODE" ? ` (\`${String(s.params.node)}\`)` : ""}`,
    )
    .join("\n");
}

async function* textEvents(text: string): AsyncGenerator<BackendEvent> {
  yield { type: "text", text };
  yield { type: "done", finishReason: "stop" };
}
