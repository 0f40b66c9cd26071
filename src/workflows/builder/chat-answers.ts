/**
 * The builder chat's answers that build nothing: QUERY (the answer model, given the canvases,
 * systems and recent runs as JSON; a plain list of them when it says nothing), EXPORT (a bundle
 * written under `<dataDir>/exports/`, and where else to fetch it) and CONFIGURE (settings changes —
 * deploy, enable, confirmation, input defaults, a step's model — read from the words or by the
 * model, shown as a diff of the system — a schedule also with its cron and next run — and applied
 * after "yes").
 */
import type { Dispatch, DispatchInput } from "../../backends/contract/backend.js";
import {
  changesFromWords,
  checkChanges,
  configurePrompt,
  parseChanges,
  scheduleText,
  systemDiff,
} from "./configure.js";
import type { CanvasTrigger } from "../../wire/canvas.js";
import type { BuilderChat } from "./chat-kit.js";
import { runCommand } from "./chat-commands.js";

export async function answerQuery(
  chat: BuilderChat,
  conv: string,
  text: string,
  focus: string | undefined,
  input: DispatchInput,
): Promise<Dispatch> {
  const context = await stateContext(chat, focus);
  const model = chat.opts.answer ?? chat.opts.supervisor;
  const system =
    "You answer questions about the person's systems in clawbridge: their canvases (nodes and edges), whether each is a draft or deployed, and their recent runs. Use only the state given as JSON; say so when it does not hold the answer. Be brief.";
  const out = await chat.callText(
    model,
    system,
    `State:\n${JSON.stringify(context, null, 1)}\n\nQuestion: ${text}`,
    input.turn.cancel,
  );
  return chat.say(conv, out?.trim() || stateText(context), "idle");
}

export async function exportSystem(
  chat: BuilderChat,
  conv: string,
  focus: string | undefined,
  text: string,
): Promise<Dispatch> {
  const id = (await chat.named(text)) ?? focus;
  if (!id) return chat.say(conv, `Which system? ${await chat.knownText()}`, "idle");
  try {
    const { file, bytes } = await chat.d.exportBundle(id);
    return chat.say(
      conv,
      [
        `Exported **${id}** (${bytes} bytes): \`${file}\``,
        "",
        `Also: \`GET /v1/systems/${id}/export\`, or \`clawbridge systems export ${id} -o ${id}.tar.gz\`. \`clawbridge systems import FILE\` reads it back.`,
      ].join("\n"),
      "idle",
    );
  } catch (err) {
    return chat.say(conv, `I could not export **${id}**: ${(err as Error).message}`, "error");
  }
}

export async function configureSystem(
  chat: BuilderChat,
  conv: string,
  focus: string | undefined,
  text: string,
  input: DispatchInput,
): Promise<Dispatch> {
  const id = (await chat.named(text)) ?? focus;
  const canvas = id ? await chat.d.canvases.get(id) : undefined;
  if (!canvas) {
    if (id && chat.d.host.library.get(id))
      return chat.say(
        conv,
        `**${id}** is defined in ${chat.d.host.library.get(id)!.source}, not on a canvas; change it there.`,
        "idle",
      );
    return chat.say(conv, await chat.noCanvasText(), "idle");
  }
  let changes = changesFromWords(text, canvas);
  if (changes.length) {
    const checked = checkChanges(changes, canvas);
    if ("errors" in checked)
      return chat.say(
        conv,
        `I cannot change that on **${canvas.system}**: ${checked.errors.map((e) => e.replace(/^changes\[\d+\]: /, "")).join("; ")}.`,
        "idle",
      );
    changes = checked.changes;
  } else {
    const p = configurePrompt(text, canvas);
    const out = await chat.callText(chat.opts.answer ?? chat.opts.supervisor, p.system, p.user, input.turn.cancel);
    const parsed = out === undefined ? { errors: ["the model could not be reached"] } : parseChanges(out, canvas);
    if ("errors" in parsed)
      return chat.say(
        conv,
        `I did not understand which setting to change (${parsed.errors.join("; ")}). Say, for example, *set the default tone of ${canvas.system} to casual* or *always ask before running ${canvas.system}*.`,
        "idle",
      );
    changes = parsed.changes;
  }
  if (!changes.length) return chat.say(conv, `Nothing to change on **${canvas.system}**.`, "idle");
  // A schedule set here tells this conversation of its runs.
  const schedules = changes.find((c) => c.path === "triggers");
  if (schedules)
    schedules.value = (schedules.value as CanvasTrigger[]).map((t) => ({ ...t, conversation: t.conversation ?? conv }));
  if (changes.length === 1 && changes[0]!.path === "deployed")
    return runCommand(chat, conv, changes[0]!.value ? "deploy" : "undeploy", canvas.system, input);
  const diff = systemDiff(canvas, changes);
  await chat.ask(conv, { kind: "configure", system: canvas.system, changes, since: Date.now() });
  return chat.say(
    conv,
    [
      `These changes to **${canvas.system}**:`,
      "",
      ...(schedules ? [scheduleText(schedules.value as CanvasTrigger[]), ""] : []),
      diff,
      "",
      "Apply them? (yes / no)",
    ].join("\n"),
    "idle",
  );
}

/** The state a QUERY is answered from: the canvases, the one in focus, the deployed systems, recent runs. */
async function stateContext(chat: BuilderChat, focus: string | undefined) {
  const canvases = await Promise.all(
    (await chat.d.canvases.list()).map(async (c) => ({
      system: c.system,
      name: c.name,
      status: await chat.statusText(c),
      version: c.version,
      nodes: c.nodes.length,
      edges: c.edges.length,
    })),
  );
  const current = focus ? await chat.d.canvases.get(focus) : undefined;
  const runs =
    (await chat.d.runs?.list({ limit: 20 }))
      ?.filter((r) => r.origin !== "builder") // the systems' runs; builds are the builder's own
      .slice(0, 10)
      .map((r) => ({
        id: r.id,
        system: r.system,
        status: r.status,
        version: r.version,
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
    deployedSystems: await Promise.all(
      chat.d.host.library.systems.map(async (s) => ({
        id: s.id,
        description: s.description,
        enabled: s.enabled,
        version: (await chat.d.manager.versions.latest(s.id))?.number,
      })),
    ),
    recentRuns: runs,
  };
}

function stateText(ctx: Awaited<ReturnType<typeof stateContext>>): string {
  const lines = ["Here is what there is:", ""];
  for (const c of ctx.canvases)
    lines.push(
      `- **${c.system}** (${c.status}, canvas version ${c.version}): ${c.nodes} nodes, ${c.edges} connections`,
    );
  if (!ctx.canvases.length) lines.push("- no canvases yet");
  if (ctx.recentRuns.length)
    lines.push("", "Recent runs:", ...ctx.recentRuns.map((r) => `- \`${r.id}\` ${r.system}: ${r.status}`));
  return lines.join("\n");
}
