/**
 * The plain commands of a builder chat, understood without a model ("undo", "pause", "resume",
 * "status", "deploy", "undeploy", each optionally naming a system), and what happens when the person
 * says "yes" to a question that waited for it: a plan that deletes nodes, a deploy, an undeploy,
 * settings changes (CONFIGURE), or a BUILD named like a system that exists (the request becomes an
 * EDIT of it), a rollback. A deployed canvas that changes (an undo, settings) is deployed again, as
 * a new system version; when that deploy is refused the reply says the canvas has changes that are
 * not deployed and which version runs. Replies name the system's id and how to use it.
 */
import type { Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import type { BuilderQuestion } from "../conversation/machine.js";
import { buildOf } from "./build-store.js";
import { applyChanges } from "./configure.js";
import { compiledSystem } from "./deploy.js";
import { buildEndText, followBuild, planChange, startBuild } from "./chat-build.js";
import { rollbackConfirmed } from "./chat-versions.js";
import type { BuilderChat } from "./chat-kit.js";
import type { ExecutionPlan } from "./types.js";

/** Carry out a plain command; `id` is the system it names, else the conversation's. */
export async function runCommand(
  chat: BuilderChat,
  conv: string,
  cmd: string,
  id: string | undefined,
  input: DispatchInput,
): Promise<Dispatch> {
  if (cmd === "pause") {
    const b = await chat.d.builds.latest(conv, ["running"]);
    if (!b || !chat.d.manager.isLive(b.id)) return chat.say(conv, "No build is running in this conversation.", "idle");
    const out = buildOf(await chat.d.manager.pause(b.id));
    return chat.say(conv, await buildEndText(chat, out), "paused");
  }
  if (cmd === "resume") {
    const b = await chat.d.builds.latest(conv, ["paused", "interrupted"]);
    if (!b) return chat.say(conv, "No build is paused in this conversation.", "idle");
    return {
      kind: "answer",
      events: await followBuild(
        chat,
        conv,
        (observe) => chat.runner.resume(b.id, observe),
        (id) => `Resuming build \`${id}\` of **${b.plan.metadata.name || b.system}**\n\n`,
        input.turn.cancel,
      ),
    };
  }
  if (cmd === "status") {
    const b = await chat.d.builds.latest(conv);
    if (!b) return chat.say(conv, await chat.knownText(), "idle");
    const done = Object.values(b.steps).filter((s) => s.status === "completed").length;
    return chat.say(
      conv,
      `Build \`${b.id}\` of **${b.system}** is ${b.status}: ${done} of ${b.plan.steps.length} steps done.${b.failedStep ? ` Step \`${b.failedStep}\` failed: ${b.error}` : ""}`,
      "idle",
    );
  }
  if (!id) return chat.say(conv, await chat.noCanvasText(), "idle");
  const canvas = await chat.d.canvases.get(id);
  if (!canvas) return chat.say(conv, `There is no canvas **${id}**. ${await chat.knownText()}`, "idle");
  await chat.d.conversations.setCanvas(conv, id);
  if (cmd === "undo") {
    if (canvas.version === 0)
      return chat.say(conv, `**${id}** is at its first version; there is nothing to undo.`, "idle");
    const back = (await chat.d.canvases.undo(id))!;
    const tail = back.status === "deployed" ? ` ${await chat.redeploy(id)}` : "";
    return chat.say(
      conv,
      `Undone: **${id}** is back at canvas version ${back.version} (${back.nodes.length} nodes, ${back.edges.length} connections).${tail} ${await chat.usage(id)}`,
      "idle",
    );
  }
  if (cmd === "deploy") {
    const res = await compiledSystem(chat.d.canvases, id, chat.d.host, chat.policy());
    if (!res.ok)
      return chat.say(
        conv,
        [`**${id}** cannot be deployed yet:`, "", ...res.problems.map((p) => `- ${p}`)].join("\n"),
        "idle",
      );
    const inputs = Object.keys(((res.system.inputs as { properties?: object }).properties ?? {}) as object);
    await chat.ask(conv, { kind: "deploy", system: id, since: Date.now() });
    return chat.say(
      conv,
      `Deploy **${canvas.name || id}**? The router will offer it as \`${id}\` in every chat${inputs.length ? ` and ask for ${inputs.map((i) => `\`${i}\``).join(", ")}` : ""}. (yes / no)`,
      "idle",
    );
  }
  // undeploy
  if (canvas.status !== "deployed") return chat.say(conv, `**${id}** is not deployed.`, "idle");
  await chat.ask(conv, { kind: "undeploy", system: id, since: Date.now() });
  return chat.say(conv, `Stop offering **${id}**? Its canvas stays, as a draft. (yes / no)`, "idle");
}

/** The person said yes to the question waiting in the conversation: do what it asked. */
export async function confirmed(
  chat: BuilderChat,
  conv: string,
  p: BuilderQuestion,
  input: DispatchInput,
): Promise<Dispatch> {
  if (!(await chat.d.conversations.take(conv, p))) return chat.say(conv, "That was already answered.", "idle");
  await chat.d.conversations.setCanvas(conv, p.system);
  switch (p.kind) {
    case "plan":
      // The builder wrote this plan when it asked.
      return startBuild(chat, conv, p.intent, p.plan as ExecutionPlan, input);
    case "samename":
      return planChange(
        chat,
        conv,
        "EDIT",
        p.system,
        p.request,
        input,
        `Changing the existing \`${p.system}\`; no second system was made.\n\n`,
      );
    case "deploy": {
      const res = await chat.deploy(p.system);
      if (!res.ok)
        return chat.say(
          conv,
          [`**${p.system}** was not deployed:`, "", ...res.problems.map((x) => `- ${x}`)].join("\n"),
          "error",
        );
      return chat.say(
        conv,
        `Deployed **${p.system}** ${res.changed ? `as version ${res.version}` : `(unchanged: still version ${res.version})`}. ${await chat.usage(p.system)}`,
        "completed",
      );
    }
    case "undeploy": {
      const res = await chat.undeploy(p.system);
      return chat.say(conv, res.message, res.ok ? "idle" : "error");
    }
    case "rollback":
      return rollbackConfirmed(chat, conv, p.system, p.version);
    case "configure": {
      const canvas = await chat.d.canvases.get(p.system);
      if (!canvas) return chat.say(conv, `**${p.system}** no longer exists.`, "idle");
      try {
        await applyChanges(p.changes, canvas, chat.d.canvases, chat.d.connect);
      } catch (err) {
        return chat.say(conv, `The changes were not applied: ${(err as Error).message}`, "error");
      }
      await chat.d.canvases.commitVersion(p.system, `configure: ${p.changes.map((c) => c.path).join(", ")}`);
      const after = (await chat.d.canvases.get(p.system))!;
      // "deploy it and …", "undeploy it and …": the deploy is part of the same yes.
      const deployed = p.changes.find((c) => c.path === "deployed")?.value;
      const tail =
        deployed === false
          ? ` ${(await chat.undeploy(p.system)).message}`
          : deployed === true || after.status === "deployed"
            ? ` ${await chat.redeploy(p.system)}`
            : "";
      return chat.say(
        conv,
        `Applied to **${p.system}** (canvas version ${after.version}).${tail} ${await chat.usage(p.system)}`,
        "completed",
      );
    }
  }
}
