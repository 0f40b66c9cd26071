/**
 * Deploy: a draft canvas becomes a system the router can match. The canvas is compiled
 * (src/workflows/builder/compile.ts), checked under the builder's policy (src/workflows/builder/policy.ts) and by the
 * systems library itself as if it were already there (every key of every problem named), then
 * written as `<dataDir>/systems/<id>.yaml` — the same place a person's own system files live — and
 * the library is loaded again. Undeploy removes the file (only one the builder wrote) and reloads.
 * A draft is never offered by the router: only what is in the library is. Each deploy that changes
 * the system records a version of it with the canvas (src/workflows/systems/versions.ts, made by
 * the reload); `deployState` tells a canvas being edited from the version deployed.
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { stringify } from "yaml";
import { writeFileAtomic } from "../../core/util/atomic-write.js";
import type { LibraryProblem, SystemsLibrary } from "../systems/library.js";
import { systemsDir } from "../systems/paths.js";
import type { Sql } from "../../core/db/sql.js";
import { canonicalJson, type VersionMade, type VersionStore, versionsOf } from "../systems/versions.js";
import type { Canvas } from "../../wire/canvas.js";
import type { CanvasStore } from "./canvas-store.js";
import { compileCanvas } from "./compile.js";
import { policyProblems, type DeployPolicy } from "./policy.js";

/** What the builder needs of the systems runtime (src/workflows/router/runtime.ts provides it). */
export interface SystemsHost {
  library: SystemsLibrary;
  check(candidates: Array<{ where: string; value: unknown }>): Promise<LibraryProblem[]>;
  /** Load the library again; `made`: who made the version of the system deployed or rolled back. */
  reload(made?: VersionMade): Promise<LibraryProblem[]>;
  /** The systems' store (the runtime's one `Sql`), which holds their versions; default the canvases' database. */
  sql?: Sql;
}

/** The systems' versions: in the host's store, else beside the canvases (the same database). */
export function versionsFor(store: CanvasStore, dataDir: string, host?: Pick<SystemsHost, "sql">): VersionStore {
  return versionsOf(host?.sql ?? store.sql, dataDir);
}

export const BUILDER_MARK = "# Written by the clawbridge builder from canvas";

export type Compiled = { ok: true; system: Record<string, unknown> } | { ok: false; problems: string[] };
/** `version`: the system's version now deployed; `changed`: whether the deploy made it (else it was already that). */
export type DeployResult =
  | ({ ok: true; file: string; version: number; changed: boolean } & Extract<Compiled, { ok: true }>)
  | Extract<Compiled, { ok: false }>;

/** The compiled system of a canvas, or the problems that stop it (for deploy, diff and export). */
export async function compiledSystem(
  store: CanvasStore,
  id: string,
  host: SystemsHost | undefined,
  policy: DeployPolicy,
): Promise<Compiled> {
  const canvas = await store.get(id);
  if (!canvas) return { ok: false, problems: [`there is no canvas "${id}"`] };
  const compiled = compileCanvas(canvas);
  if (!compiled.ok)
    return {
      ok: false,
      problems: compiled.problems.map((p) => `${p.node === "canvas" ? "" : `node ${p.node}: `}${p.message}`),
    };
  const problems = await policyProblems(compiled.system, policy);
  if (host) {
    const where = `canvas ${id}`;
    for (const p of await host.check([{ where, value: compiled.system }])) {
      problems.push(p.where === where ? `${p.key}: ${p.message}` : `${p.where}: ${p.key}: ${p.message}`);
    }
  }
  if (problems.length) return { ok: false, problems };
  return { ok: true, system: compiled.system };
}

export async function deployCanvas(args: {
  store: CanvasStore;
  host: SystemsHost;
  dataDir: string;
  policy: DeployPolicy;
  system: string;
}): Promise<DeployResult> {
  const { store, host, dataDir, system } = args;
  const res = await compiledSystem(store, system, host, args.policy);
  if (!res.ok) return res;
  const dir = systemsDir(dataDir);
  const file = path.join(dir, `${system}.yaml`);
  if (existsSync(file) && !readFileSync(file, "utf8").startsWith(BUILDER_MARK)) {
    return {
      ok: false,
      problems: [`${file} exists and was not written by the builder; choose another system id or remove that file`],
    };
  }
  const previous = existsSync(file) ? readFileSync(file, "utf8") : undefined;
  const canvas = (await store.get(system))!;
  writeFileAtomic(
    file,
    `${BUILDER_MARK} "${system}" (version ${canvas.version}). Edit it by chat, or remove this line to own it.\n${stringify(res.system)}`,
  );
  const versions = versionsFor(store, dataDir, host);
  const before = (await versions.latest(system))?.number;
  const problems = await host.reload({
    system,
    by: "builder",
    note: `deployed from canvas version ${canvas.version}`,
    canvas,
  });
  if (problems.length) {
    // Put back what was there: a deploy never leaves the library unloadable.
    if (previous === undefined) rmSync(file, { force: true });
    else writeFileAtomic(file, previous);
    await host.reload();
    return { ok: false, problems: problems.map((p) => `${p.where}: ${p.key}: ${p.message}`) };
  }
  await store.setStatus(system, "deployed");
  const version = (await versions.latest(system))?.number ?? 0;
  return { ok: true, file, system: res.system, version, changed: version !== before };
}

/** The part of a canvas a deploy makes live (not its status, version counter or time stamp). */
const liveShape = (c: Canvas) =>
  canonicalJson({
    name: c.name,
    description: c.description,
    nodes: c.nodes,
    edges: c.edges,
    settings: c.settings ?? {},
  });

export interface DeployState {
  deployedVersion: number | null;
  changedSinceDeploy: boolean;
}

/**
 * The system version a deployed canvas runs as, and whether the canvas changed since that version
 * was deployed (an edit or undo that was not deployed). A draft: null and false.
 */
export async function deployState(
  store: CanvasStore,
  dataDir: string,
  c: Canvas,
  host?: Pick<SystemsHost, "sql">,
): Promise<DeployState> {
  const v = c.status === "deployed" ? await versionsFor(store, dataDir, host).latest(c.system) : undefined;
  if (!v) return { deployedVersion: null, changedSinceDeploy: false };
  return {
    deployedVersion: v.number,
    changedSinceDeploy: v.canvas !== null && liveShape(v.canvas as Canvas) !== liveShape(c),
  };
}

export async function undeployCanvas(args: {
  store: CanvasStore;
  host: SystemsHost;
  dataDir: string;
  system: string;
}): Promise<{ ok: boolean; message: string }> {
  const file = path.join(systemsDir(args.dataDir), `${args.system}.yaml`);
  if (existsSync(file)) {
    if (!readFileSync(file, "utf8").startsWith(BUILDER_MARK))
      return { ok: false, message: `${file} was not written by the builder; it stays` };
    rmSync(file, { force: true });
  }
  if (await args.store.get(args.system)) await args.store.setStatus(args.system, "draft");
  const problems = await args.host.reload();
  return problems.length
    ? { ok: false, message: problems.map((p) => `${p.where}: ${p.key}: ${p.message}`).join("\n") }
    : { ok: true, message: `**${args.system}** is a draft again; the router no longer offers it.` };
}
