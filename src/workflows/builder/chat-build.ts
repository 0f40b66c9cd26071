/**
 * BUILD and EDIT in a builder chat: the Architect model writes an ExecutionPlan for the request
 * (checked by plan-check.ts; sent back once with the errors), a plan that deletes nodes is shown
 * first and waits for "yes", and a checked plan is carried out by the Builder (build-runner.ts) while
 * its step lines stream to the turn; the end text says what comes next. Every applied plan is a
 * canvas version ("undo" goes back one).
 */
import type { BackendEvent, Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import type { Cancellation } from "../../core/util/cancel.js";
import { architectPrompt, parsePlan, repairRequest, type ArchitectContext } from "./architect.js";
import { validatePlan } from "./plan-check.js";
import type { RunHooks } from "../engine/scheduler.js";
import type { BuildRecord } from "./build-store.js";
import type { BuilderChat } from "./chat-kit.js";
import { isValidId } from "./canvas-ops.js";
import type { ExecutionPlan } from "./types.js";

/** BUILD or EDIT: plan, check (once more with the errors), then build — or ask first when it deletes. */
export async function planChange(
  chat: BuilderChat,
  conv: string,
  intent: "BUILD" | "EDIT",
  focus: string | undefined,
  text: string,
  input: DispatchInput,
): Promise<Dispatch> {
  chat.setState(conv, "planning");
  const canvas = focus ? chat.d.canvases.get(focus) : undefined;
  if (intent === "EDIT" && !canvas) return chat.say(conv, chat.noCanvasText(), "idle");
  const system = canvas?.system ?? chat.freshId(text);
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
  if (!plan) {
    return chat.say(
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
    plan.metadata.system = isValidId(wanted) && !chat.taken(wanted) ? wanted : system;
  } else plan.metadata.system = system;

  const deletes = plan.steps.filter((s) => s.action === "DELETE_NODE");
  if (deletes.length) {
    chat.ask(conv, { kind: "plan", system: plan.metadata.system, plan, intent, since: Date.now() });
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
  return startBuild(chat, conv, intent, plan, input);
}

/** Carry a checked plan out, streaming its steps. */
export function startBuild(
  chat: BuilderChat,
  conv: string,
  intent: "BUILD" | "EDIT",
  plan: ExecutionPlan,
  input: DispatchInput,
): Dispatch {
  const system = plan.metadata.system;
  if (intent === "BUILD" && !chat.d.canvases.get(system))
    chat.d.canvases.create({ system, name: plan.metadata.name || system, description: plan.metadata.description });
  else if (intent === "BUILD") {
    // A BUILD naming a draft that exists: its name and description follow the new plan.
    chat.d.canvases.mutate(system, (c) => ({
      ...c,
      name: plan.metadata.name || c.name,
      description: plan.metadata.description || c.description,
    }));
  }
  chat.d.conversations.setCanvas(conv, system);
  const head = (id: string) =>
    `${intent === "BUILD" ? "Building" : "Changing"} **${plan.metadata.name || system}** (build \`${id}\`)${plan.metadata.summary ? `: ${plan.metadata.summary}` : ""}\n\n`;
  return {
    kind: "answer",
    events: followBuild(
      chat,
      conv,
      (observe) => chat.runner.begin({ conversation: conv, intent, plan }, observe),
      head,
      input.turn.cancel,
    ),
  };
}

/** Start (or resume) a build with `launch` and stream it to this turn until it ends or detaches; its end text names what comes next. */
export function followBuild(
  chat: BuilderChat,
  conv: string,
  launch: (observe: (hooks: RunHooks) => void) => BuildRecord,
  head: (id: string) => string,
  turnCancel: Cancellation,
): AsyncGenerator<BackendEvent> {
  chat.setState(conv, "executing");
  return chat.runner.follow(launch, head, turnCancel, chat.opts.detachAfterSeconds * 1000, (b) =>
    buildEndText(chat, b),
  );
}

/** What a build that stopped (completed, failed or paused) tells the person, and what they can say next. */
export async function buildEndText(chat: BuilderChat, b: BuildRecord): Promise<string> {
  const name = b.plan.metadata.name || b.system;
  if (b.status === "paused" || b.status === "interrupted") {
    const left = Object.values(b.steps).filter((s) => s.status !== "completed" && s.status !== "skipped").length;
    return `Paused with ${left} step${left === 1 ? "" : "s"} to go. Say **resume** to go on.`;
  }
  if (b.status === "cancelled") return "The build was cancelled. Say **undo** to go back to the canvas as it was.";
  if (b.status === "failed") {
    const step = b.plan.steps.find((s) => s.id === b.failedStep);
    return `The build stopped: step \`${b.failedStep ?? "?"}\`${step ? ` (${step.name})` : ""} failed: ${b.error ?? "unknown error"}. Steps that needed it were not run. Say **undo** to go back to the canvas as it was.`;
  }
  const canvas = chat.d.canvases.get(b.system);
  const tail =
    canvas?.status === "deployed"
      ? await chat.redeploy(b.system)
      : `Say **deploy** to make it available from any chat, or tell me what to change.`;
  return `Done: **${name}** has ${canvas?.nodes.length ?? 0} nodes and ${canvas?.edges.length ?? 0} connections (version ${canvas?.version ?? "?"}). ${tail}`;
}

export function planSummary(plan: ExecutionPlan): string {
  return plan.steps
    .map(
      (s, i) =>
        `${i + 1}. ${s.action} ${s.name || s.id}${s.action === "DELETE_NODE" ? ` (\`${String(s.params.node)}\`)` : ""}`,
    )
    .join("\n");
}
