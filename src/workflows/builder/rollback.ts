/**
 * Rollback: a system goes back to one of its versions (src/workflows/systems/versions.ts). The
 * version's definition is written as the system's file again (only a file the builder wrote: the
 * bridge never rewrites the config, or a person's own file), the builder's canvas goes back to the
 * canvas of that version (as a new canvas version, so "undo" still works), and the library is
 * loaded again — which records a NEW version noting "rollback to <n>": versions are never changed.
 * Sandbox files are not restored (a version keeps only their hashes). A reload with problems (a
 * model it named is gone) puts everything back and says why.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { stringify } from "yaml";
import { writeFileAtomic } from "../../core/util/atomic-write.js";
import type { Canvas } from "../../wire/canvas.js";
import { systemsDir } from "../systems/paths.js";
import { canonicalJson, type SystemVersion } from "../systems/versions.js";
import type { CanvasStore } from "./canvas-store.js";
import { BUILDER_MARK, type SystemsHost, versionsFor } from "./deploy.js";

export type RollbackResult =
  | { ok: true; version: SystemVersion; to: number }
  | { ok: false; code: "not_found" | "refused" | "failed"; message: string };

type Args = { store: CanvasStore; host: SystemsHost; dataDir: string; system: string; version: number };

/** Why `system` cannot go back to `version`, or the version to go back to. */
export async function rollbackCheck(
  args: Args,
): Promise<{ ok: true; target: SystemVersion } | Extract<RollbackResult, { ok: false }>> {
  const { host, system, version } = args;
  const versions = versionsFor(args.store, args.dataDir, host);
  const current = host.library.get(system);
  if (!current) return { ok: false, code: "not_found", message: `There is no system "${system}".` };
  const latest = await versions.latest(system);
  const target = await versions.get(system, version);
  if (!target || !latest)
    return {
      ok: false,
      code: "not_found",
      message: `${system} has no version ${version} (its versions: ${latest ? `1 to ${latest.number}` : "none yet"}).`,
    };
  if (current.source === "config")
    return {
      ok: false,
      code: "refused",
      message: `${system} is declared in the config file, which the bridge does not rewrite. To go back to version ${version}, put its definition (GET /v1/systems/${system}/versions/${version}) in the config's \`systems:\` entry and restart the bridge.`,
    };
  const file = path.join(systemsDir(args.dataDir), `${system}.yaml`);
  if (current.source !== file || !existsSync(file) || !readFileSync(file, "utf8").startsWith(BUILDER_MARK))
    return {
      ok: false,
      code: "refused",
      message: `${system} is your own file ${current.source}, which the bridge does not rewrite. To go back to version ${version}, put its definition (GET /v1/systems/${system}/versions/${version}) in that file.`,
    };
  if (canonicalJson(target.definition) === canonicalJson(latest.definition))
    return {
      ok: false,
      code: "refused",
      message: `${system} is already as version ${version} was (its latest version, ${latest.number}, has the same definition).`,
    };
  return { ok: true, target };
}

export async function rollbackSystem(args: Args): Promise<RollbackResult> {
  const check = await rollbackCheck(args);
  if (!check.ok) return check;
  const { store, host, system, version } = args;
  const { target } = check;
  const file = path.join(systemsDir(args.dataDir), `${system}.yaml`);
  const previous = readFileSync(file, "utf8");
  writeFileAtomic(
    file,
    `${BUILDER_MARK} "${system}" (rollback to version ${version}). Edit it by chat, or remove this line to own it.\n${stringify(target.definition)}`,
  );
  const canvas = await store.get(system);
  const restoreCanvas = Boolean(canvas && target.canvas);
  if (restoreCanvas) {
    const old = target.canvas as Canvas;
    await store.mutate(system, (c) => ({
      ...old,
      system,
      status: "deployed",
      version: c.version,
      updatedAt: c.updatedAt,
    }));
    await store.commitVersion(system, `rollback to system version ${version}`);
  }
  const problems = await host.reload({
    system,
    by: "rollback",
    note: `rollback to ${version}`,
    canvas: restoreCanvas ? await store.get(system) : null,
  });
  if (problems.length) {
    writeFileAtomic(file, previous);
    if (restoreCanvas) await store.undo(system);
    await host.reload();
    return {
      ok: false,
      code: "failed",
      message: `${system} was not rolled back to version ${version}: ${problems.map((p) => `${p.where}: ${p.key}: ${p.message}`).join("; ")}`,
    };
  }
  const made = (await versionsFor(store, args.dataDir, host).latest(system))!;
  return { ok: true, version: made, to: version };
}
