/**
 * What every part of a builder chat shares (builder.ts routes the messages; chat-build.ts,
 * chat-answers.ts and chat-commands.ts handle them): the engine's dependencies, the builds running
 * in this process, the conversation's state and question (src/workflows/conversation/), the replies,
 * the calls to a model for plain text, the canvas a message names, and the short texts that say what there is.
 */
import type { Logger } from "pino";
import type { BackendEvent, Dispatch } from "../../backends/contract/backend.js";
import type { Cancellation } from "../../core/util/cancel.js";
import type { Canvas } from "../../wire/canvas.js";
import type { ConversationState } from "../../wire/events.js";
import type { BuilderQuestion } from "../conversation/machine.js";
import type { BuilderBase } from "./backend-deps.js";
import type { BuildStore } from "./build-store.js";
import type { CanvasStore } from "./canvas-store.js";
import { type DeployResult, deployCanvas, deployState, undeployCanvas } from "./deploy.js";
import { modelText } from "../systems/step-executor.js";
import { BuildRunner } from "./build-runner.js";
import type { ToolCaller } from "./mcp-client.js";
import type { BuilderOptions } from "./options.js";
import type { DeployPolicy } from "./policy.js";
import { freshSystemId, wordIn } from "./chat-words.js";
import { inputNames } from "./configure.js";

/** The builder base's parts (backend-deps.ts) and what this backend adds: its tools, its agent models, its exports, its log. */
export interface BuilderEngineDeps extends Omit<BuilderBase, "room" | "engines" | "models"> {
  canvases: CanvasStore;
  builds: BuildStore;
  /** A fresh MCP connection to the canvas and sandbox tools (closed after each build). */
  connect(): Promise<ToolCaller>;
  /** Models an agent node may use, with their backend type. */
  models: Array<{ id: string; kind: string }>;
  /** Write a system's bundle; returns the file. */
  exportBundle(system: string): Promise<{ file: string; bytes: number }>;
  log: Logger;
}

export class BuilderChat {
  /** Supervisor and Architect calls made (tests and the bench read it). */
  modelCalls = { supervisor: 0, architect: 0 };
  /** Builds running in this process. */
  readonly runner: BuildRunner;

  constructor(
    readonly name: string,
    readonly opts: BuilderOptions,
    readonly d: BuilderEngineDeps,
  ) {
    this.runner = new BuildRunner({
      canvases: d.canvases,
      manager: d.manager,
      connect: d.connect,
      maxParallel: opts.maxParallel,
      retryDelayScale: opts.retryDelayScale,
      ended: async (rec) => {
        if (rec.conversation)
          await this.setState(
            rec.conversation,
            rec.status === "completed"
              ? "completed"
              : rec.status === "paused" || rec.status === "interrupted"
                ? "paused"
                : "error",
          );
      },
    });
  }

  policy(): DeployPolicy {
    return { allowCommands: this.opts.allowCommands, allowHosts: this.opts.allowHosts };
  }

  deploy(system: string): Promise<DeployResult> {
    const { canvases: store, host, dataDir } = this.d;
    return deployCanvas({ store, host, dataDir, policy: this.policy(), system });
  }

  undeploy(system: string): Promise<{ ok: boolean; message: string }> {
    return undeployCanvas({ store: this.d.canvases, host: this.d.host, dataDir: this.d.dataDir, system });
  }

  /**
   * An edited canvas that was deployed is deployed again (the router runs what the canvas shows),
   * as a new version; when the deploy is refused, the reply says the canvas and the version that
   * runs differ.
   */
  async redeploy(system: string): Promise<string> {
    const res = await this.deploy(system);
    if (res.ok)
      return res.changed
        ? `Deployed again as version ${res.version}: that is what runs now.`
        : `The deployed system is unchanged (version ${res.version}).`;
    const { deployedVersion } = await deployState(
      this.d.canvases,
      this.d.dataDir,
      (await this.d.canvases.get(system))!,
      this.d.host,
    );
    return `The canvas has changes that are not deployed (deployed: ${deployedVersion === null ? "an earlier canvas" : `version ${deployedVersion}`}), because: ${res.problems.join("; ")}. Fix that and say **deploy** to make them live.`;
  }

  async callText(model: string, system: string, prompt: string, cancel: Cancellation): Promise<string | undefined> {
    const r = await modelText(this.d.callModel, {
      model,
      prompt,
      system,
      cancel,
      timeoutSeconds: this.opts.modelTimeoutSeconds,
    });
    if (r.ok) return r.text;
    this.d.log.warn({ builder: this.name, model, code: r.code, message: r.message }, "builder model call failed");
    return undefined;
  }

  // ---- which canvas ----------------------------------------------------------------------------

  /** The canvas a message is about: one it names, else the conversation's. */
  async focusFor(text: string, current: string | undefined): Promise<string | undefined> {
    return (await this.named(text)) ?? (current && (await this.d.canvases.get(current)) ? current : undefined);
  }

  /** A canvas or system the message names (by id or name, on word boundaries). */
  async named(text: string): Promise<string | undefined> {
    const lower = text.toLowerCase();
    for (const c of await this.d.canvases.list())
      if (this.mentions(lower, c.system) || (c.name && wordIn(lower, c.name.toLowerCase()))) return c.system;
    for (const s of this.d.host.library.systems) if (this.mentions(lower, s.id)) return s.id;
    return undefined;
  }

  mentions(text: string, id: string): boolean {
    return wordIn(text.toLowerCase(), id.toLowerCase());
  }

  /** Whether an id is taken (by a canvas or a system), as things are now. */
  async taken(): Promise<(id: string) => boolean> {
    const canvases = new Set((await this.d.canvases.list()).map((c) => c.system));
    return (id) => canvases.has(id) || Boolean(this.d.host.library.get(id));
  }

  /** The canvas a new build would double: one with the id `id`, or named `name` (case and spaces aside). */
  async twin(name: string, id: string): Promise<string | undefined> {
    const key = (s: string) => s.toLowerCase().replace(/\s+/g, " ").trim();
    return (await this.d.canvases.list()).find((c) => c.system === id || (name && key(c.name) === key(name)))?.system;
  }

  /** A readable id for a new system from the request's words (`researches-topic-writes`), unique. */
  async freshId(text: string): Promise<string> {
    return freshSystemId(text, await this.taken());
  }

  // ---- texts -----------------------------------------------------------------------------------

  async knownText(): Promise<string> {
    const list = await this.d.canvases.list();
    return list.length
      ? `Canvases: ${(await Promise.all(list.map(async (c) => `\`${c.system}\` (${await this.statusText(c)})`))).join(", ")}.`
      : "There are no canvases yet.";
  }

  /** A canvas's status, with the version a deployed one runs as and whether it has changes not deployed. */
  async statusText(c: Canvas): Promise<string> {
    const d = await deployState(this.d.canvases, this.d.dataDir, c, this.d.host);
    if (d.deployedVersion === null) return c.status;
    return `deployed: version ${d.deployedVersion}${d.changedSinceDeploy ? "; the canvas has changes that are not deployed" : ""}`;
  }

  /** How to use a system, named by its id: `/run` with its inputs when deployed, else "say deploy" first. */
  async usage(system: string): Promise<string> {
    const canvas = await this.d.canvases.get(system);
    const inputs = canvas ? inputNames(canvas) : [];
    const run = `\`/run ${system}${inputs.map((i) => ` ${i}=…`).join("")}\``;
    const deployed = canvas ? canvas.status === "deployed" : Boolean(this.d.host.library.get(system));
    return deployed
      ? `\`${system}\` — run it with ${run}, or ask for it in any chat.`
      : `\`${system}\` is a draft — say **deploy** to make it available from any chat, then run it with ${run}.`;
  }

  async noCanvasText(): Promise<string> {
    return `Which system? Name it, or build one first. ${await this.knownText()}`;
  }

  helpText(): string {
    return "I build and change systems from plain words: *build a system that …*, *add a step that …*, *what does content-pipeline do?*, *export content-pipeline*, *set the default tone to casual*, **deploy**, **undo**.";
  }

  // ---- the conversation ------------------------------------------------------------------------

  setState(conv: string, state: ConversationState): Promise<void> {
    return this.d.conversations.setState(conv, state, "builder");
  }

  /** A question waiting for a yes; the system it is about becomes the conversation's canvas. */
  ask(conv: string, question: BuilderQuestion): Promise<void> {
    return this.d.conversations.ask(conv, question, question.system);
  }

  async say(conv: string, text: string, state: ConversationState | undefined): Promise<Dispatch> {
    if (state) await this.setState(conv, state);
    return { kind: "answer", events: textEvents(text) };
  }
}

async function* textEvents(text: string): AsyncGenerator<BackendEvent> {
  yield { type: "text", text };
  yield { type: "done", finishReason: "stop" };
}
