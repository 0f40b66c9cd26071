/**
 * BUILD and EDIT in a builder chat: the Architect model writes an ExecutionPlan for the request
 * (checked by plan-check.ts; sent back once with the errors, then refused in words that say what to
 * try next), a BUILD named like a canvas that exists asks whether to change that one or make a new
 * one with its own id, a plan that deletes nodes is shown first and waits for "yes", and a checked
 * plan is carried out by the Builder (build-runner.ts) while its step lines stream to the turn; the
 * end text names the system's id and how to use it. Every applied plan is a canvas version ("undo"
 * goes back one).
 */
import type { BackendEvent, Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import type { Cancellation } from "../../core/util/cancel.js";
import { architectPrompt, parsePlan, repairRequest, type ArchitectContext } from "./architect.js";
import { Sandbox } from "./sandbox.js";
import { validatePlan } from "./plan-check.js";
import type { RunHooks } from "../engine/scheduler.js";
import type { BuildRecord } from "./build-store.js";
import type { BuilderChat } from "./chat-kit.js";
import { uniqueId } from "./chat-words.js";
import { isValidId } from "./canvas-ops.js";
import type { BuilderQuestion } from "../conversation/machine.js";
import type { ExecutionPlan } from "./types.js";

/**
 * BUILD or EDIT: plan, check (once more with the errors), then build — or ask first when it deletes
 * or when a BUILD doubles a canvas. `lead` opens the build's reply.
 */
export async function planChange(
  chat: BuilderChat,
  conv: string,
  intent: "BUILD" | "EDIT",
  focus: string | undefined,
  text: string,
  input: DispatchInput,
  lead = "",
): Promise<Dispatch> {
  await chat.setState(conv, "planning");
  const canvas = focus ? await chat.d.canvases.get(focus) : undefined;
  if (intent === "EDIT" && !canvas) return chat.say(conv, await chat.noCanvasText(), "idle");
  const system = canvas?.system ?? (await chat.freshId(text));
  const ctx: ArchitectContext = {
    request: text,
    intent,
    system,
    canvas,
    models: chat.d.models,
    systems: chat.d.host.library.systems
      .filter((s) => s.id !== system)
      .map((s) => ({ id: s.id, description: s.description })),
    executors: { webhook: true, commands: chat.opts.allowCommands, mcp: true },
    sandboxFiles: sandboxFilesOf(chat.d.dataDir, system),
  };
  const prompt = architectPrompt(ctx);
  let user = prompt.user;
  let errors: string[] = [];
  let plan: ExecutionPlan | undefined;
  for (let attempt = 0; attempt < 2 && !plan; attempt++) {
    chat.modelCalls.architect++;
    const out = await chat.callText(chat.opts.architect, prompt.system, user, input.turn.cancel);
    if (out === undefined)
      return chat.say(
        conv,
        `I could not reach the planning model (${chat.opts.architect}); nothing was changed. Try again in a moment.`,
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
  if (!plan) return chat.say(conv, refusalText(errors, intent === "EDIT" ? system : undefined), "error");
  // BUILD: the Architect may name the system; one named like a canvas asks first; an id already in
  // use (a system of the config) keeps the one chosen here.
  if (intent === "BUILD") {
    const wanted = plan.metadata.system;
    const twin = await chat.twin(plan.metadata.name, wanted);
    if (twin) {
      await chat.ask(conv, { kind: "samename", system: twin, request: text, plan, since: Date.now() });
      const c = (await chat.d.canvases.get(twin))!;
      return chat.say(
        conv,
        `There is a system named **${c.name || twin}** already: \`${twin}\` (${c.status}, ${c.nodes.length} node${c.nodes.length === 1 ? "" : "s"}). Change it with this request? Say **yes** to change \`${twin}\`, **new** to build a separate system with its own id, or **no** to leave things as they are.`,
        "idle",
      );
    }
    plan.metadata.system = isValidId(wanted) && !(await chat.taken())(wanted) ? wanted : system;
  } else plan.metadata.system = system;

  const deletes = plan.steps.filter((s) => s.action === "DELETE_NODE");
  if (deletes.length) {
    await chat.ask(conv, { kind: "plan", system: plan.metadata.system, plan, intent, since: Date.now() });
    return chat.say(
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
  return startBuild(chat, conv, intent, plan, input, lead);
}

/**
 * What a refused plan tells the person: what to do next first, in plain words, then the checker's
 * problems, short (the Architect got them whole). `edited`: the system an EDIT was for.
 */
export function refusalText(errors: string[], edited?: string): string {
  const all = errors.join("\n");
  const next = /cycle|depend on itself/.test(all)
    ? "The steps I planned wait on each other in a circle, so none could start. Try describing the flow again in order, e.g. *first research the topic, then write a post from the research*."
    : /is not a node id|unknown step/.test(all)
      ? "A step uses a value nothing provides. Name the input the system needs, e.g. *… that takes a `topic` as input*, or say which step's result each step uses."
      : `Try describing ${edited ? `the change to \`${edited}\`` : "the system"} again in other words, step by step, e.g. *first research the topic, then write a post from the research*.`;
  const detail = errors.slice(0, 3).map((e) => `- ${e.length > 160 ? `${e.slice(0, 157)}…` : e}`);
  if (errors.length > 3) detail.push(`- and ${errors.length - 3} more`);
  return [`I could not make a plan that works, so nothing was changed. ${next}`, "", "Details:", ...detail].join("\n");
}

/** "new" to a BUILD named like `q.system`: its plan is built beside it, with an id (and name) of its own. */
export async function buildBeside(
  chat: BuilderChat,
  conv: string,
  q: Extract<BuilderQuestion, { kind: "samename" }>,
  input: DispatchInput,
): Promise<Dispatch> {
  const plan = q.plan as ExecutionPlan;
  const wanted = plan.metadata.system;
  const id = uniqueId(isValidId(wanted) ? wanted : q.system, await chat.taken());
  const name = plan.metadata.name || id;
  plan.metadata.system = id;
  plan.metadata.name = (await chat.twin(name, id)) ? `${name} (${id})` : name;
  return startBuild(chat, conv, "BUILD", plan, input, `A new system, \`${id}\`; \`${q.system}\` stays as it was.\n\n`);
}

/** Carry a checked plan out, streaming its steps; `lead` opens the reply. */
export async function startBuild(
  chat: BuilderChat,
  conv: string,
  intent: "BUILD" | "EDIT",
  plan: ExecutionPlan,
  input: DispatchInput,
  lead = "",
): Promise<Dispatch> {
  const system = plan.metadata.system;
  // A BUILD's id is never a canvas's (planChange asks first), unless one was made since it was planned.
  // Its examples and keywords become settings (editable by CONFIGURE), so the router can find it without a model.
  if (intent === "BUILD" && !(await chat.d.canvases.get(system))) {
    const { name, description, examples, keywords } = plan.metadata;
    await chat.d.canvases.mutate(
      system,
      (c) => ({
        ...c,
        settings: {
          ...c.settings,
          ...(examples?.length ? { examples } : {}),
          ...(keywords?.length ? { keywords } : {}),
        },
      }),
      { create: { name: name || system, description } },
    );
  }
  await chat.d.conversations.setCanvas(conv, system);
  const name = plan.metadata.name || (await chat.d.canvases.get(system))?.name || system;
  const head = (id: string) =>
    `${lead}${intent === "BUILD" ? "Building" : "Changing"} **${name}** (\`${system}\`, build \`${id}\`)${plan.metadata.summary ? `: ${plan.metadata.summary}` : ""}\n\n`;
  return {
    kind: "answer",
    events: await followBuild(
      chat,
      conv,
      (observe) => chat.runner.begin({ conversation: conv, intent, plan }, observe),
      head,
      input.turn.cancel,
    ),
  };
}

/** Start (or resume) a build with `launch` and stream it to this turn until it ends or detaches; its end text names what comes next. */
export async function followBuild(
  chat: BuilderChat,
  conv: string,
  launch: (observe: (hooks: RunHooks) => void) => Promise<BuildRecord>,
  head: (id: string) => string,
  turnCancel: Cancellation,
): Promise<AsyncGenerator<BackendEvent>> {
  await chat.setState(conv, "executing");
  return chat.runner.follow(launch, head, turnCancel, chat.opts.detachAfterSeconds * 1000, (b) =>
    buildEndText(chat, b),
  );
}

/** What a build that stopped (completed, failed or paused) tells the person, and what they can say next. */
export async function buildEndText(chat: BuilderChat, b: BuildRecord): Promise<string> {
  const canvas = await chat.d.canvases.get(b.system);
  const name = b.plan.metadata.name || canvas?.name || b.system;
  if (b.status === "paused" || b.status === "interrupted") {
    const left = Object.values(b.steps).filter((s) => s.status !== "completed" && s.status !== "skipped").length;
    return `Paused with ${left} step${left === 1 ? "" : "s"} to go. Say **resume** to go on with \`${b.system}\`.`;
  }
  const undo = `Say **undo** to go back to the canvas of \`${b.system}\` as it was.`;
  if (b.status === "cancelled") return `The build was cancelled. ${undo}`;
  if (b.status === "failed") {
    const step = b.plan.steps.find((s) => s.id === b.failedStep);
    return `The build stopped: step \`${b.failedStep ?? "?"}\`${step ? ` (${step.name})` : ""} failed: ${b.error ?? "unknown error"}. Steps that needed it were not run. ${undo}`;
  }
  const redeployed = canvas?.status === "deployed" ? `${await chat.redeploy(b.system)} ` : "";
  return `Done: **${name}** has ${canvas?.nodes.length ?? 0} nodes and ${canvas?.edges.length ?? 0} connections (canvas version ${canvas?.version ?? "?"}). ${redeployed}${await chat.usage(b.system)} Or tell me what to change.`;
}

export function planSummary(plan: ExecutionPlan): string {
  return plan.steps
    .map(
      (s, i) =>
        `${i + 1}. ${s.action} ${s.name || s.id}${s.action === "DELETE_NODE" ? ` (\`${String(s.params.node)}\`)` : ""}`,
    )
    .join("\n");
}

/** Files the Architect is told are in the system's sandbox already (what an EDIT may read or replace), at most 50. */
const SANDBOX_FILES_SHOWN = 50;

function sandboxFilesOf(dataDir: string, system: string): string[] {
  const files = Sandbox.forSystem(dataDir, system)
    .list(".", { recursive: true })
    .filter((e) => e.type === "file");
  const shown = files.slice(0, SANDBOX_FILES_SHOWN).map((e) => `${e.path} (${e.bytes} bytes)`);
  return files.length > shown.length ? [...shown, `… and ${files.length - shown.length} more`] : shown;
}
