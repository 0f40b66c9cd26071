/**
 * A builder chat's words about a system's versions (read without a model, decide.ts
 * `versionRequest`): "what changed between version 1 and 2 of research-blog" shows the diff of the
 * two versions; "roll back research-blog to version 2" asks for a yes first (or says at once why it
 * cannot: a system of the config file, a person's own file, an unknown version), then rolls back
 * (rollback.ts): version 2's definition and canvas come back as a new version.
 */
import type { Dispatch } from "../../backends/contract/backend.js";
import type { VersionRequest } from "../router/decide.js";
import { diffText, diffVersions } from "../systems/versions.js";
import type { BuilderChat } from "./chat-kit.js";
import { rollbackCheck, rollbackSystem } from "./rollback.js";

/** Answer a version request about `named` (the system the message names), else the conversation's canvas. */
export async function versionCommand(
  chat: BuilderChat,
  conv: string,
  req: VersionRequest,
  named: string | undefined,
): Promise<Dispatch> {
  const id = (req.kind === "rollback" && req.system && chat.d.host.library.get(req.system) ? req.system : named)!;
  if (!id || !chat.d.host.library.get(id))
    return chat.say(
      conv,
      `Which system? Name one that is deployed: ${chat.d.host.library.systems.map((s) => `\`${s.id}\``).join(", ") || "there are none"}.`,
      "idle",
    );
  const versions = chat.d.manager.versions;
  if (req.kind === "diff") {
    const a = await versions.get(id, req.from);
    const b = await versions.get(id, req.to);
    const last = (await versions.latest(id))?.number ?? 0;
    if (!a || !b)
      return chat.say(
        conv,
        `**${id}** has no version ${!a ? req.from : req.to} (its versions: ${last ? `1 to ${last}` : "none yet"}).`,
        "idle",
      );
    return chat.say(
      conv,
      `What changed in **${id}** from version ${a.number} to version ${b.number}:\n\n${diffText(diffVersions(a, b))}`,
      "idle",
    );
  }
  const check = await rollbackCheck({ ...args(chat, id), version: req.version });
  if (!check.ok) return chat.say(conv, check.message, "idle");
  const latest = (await versions.latest(id))!;
  await chat.ask(conv, { kind: "rollback", system: id, version: req.version, since: Date.now() });
  const changes = diffVersions(latest, check.target);
  return chat.say(
    conv,
    `Roll **${id}** back to version ${req.version}? It runs version ${latest.number} now; going back changes:\n\n${diffText(changes)}\n\nThe rollback is recorded as a new version (${latest.number + 1})${check.target.canvas ? ", and the canvas goes back to version " + req.version + "'s" : ""}. (yes / no)`,
    "idle",
  );
}

/** The yes to "roll back": do it, and say what runs now. */
export async function rollbackConfirmed(
  chat: BuilderChat,
  conv: string,
  system: string,
  version: number,
): Promise<Dispatch> {
  const res = await rollbackSystem({ ...args(chat, system), version });
  if (!res.ok) return chat.say(conv, res.message, res.code === "failed" ? "error" : "idle");
  return chat.say(
    conv,
    `Rolled **${system}** back to version ${version}: it now runs as version ${res.version.number} (rollback to ${version}). Runs already going finish on the version they started with. ${await chat.usage(system)}`,
    "completed",
  );
}

const args = (chat: BuilderChat, system: string) => ({
  store: chat.d.canvases,
  host: chat.d.host,
  dataDir: chat.d.dataDir,
  system,
});
