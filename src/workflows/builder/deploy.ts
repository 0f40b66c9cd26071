/**
 * Deploy: a draft canvas becomes a system the router can match. The canvas is compiled
 * (src/workflows/builder/compile.ts), checked under the builder's policy (src/workflows/builder/policy.ts) and by the
 * systems library itself as if it were already there (every key of every problem named), then
 * written as `<dataDir>/systems/<id>.yaml` — the same place a person's own system files live — and
 * the library is loaded again. Undeploy removes the file (only one the builder wrote) and reloads.
 * A draft is never offered by the router: only what is in the library is.
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { stringify } from "yaml";
import { writeFileAtomic } from "../../core/util/atomic-write.js";
import type { LibraryProblem, SystemsLibrary } from "../systems/library.js";
import { systemsDir } from "../systems/paths.js";
import type { CanvasStore } from "./canvas-store.js";
import { compileCanvas } from "./compile.js";
import { policyProblems, type DeployPolicy } from "./policy.js";

/** What the builder needs of the systems runtime (src/workflows/router/runtime.ts provides it). */
export interface SystemsHost {
  library: SystemsLibrary;
  check(candidates: Array<{ where: string; value: unknown }>): Promise<LibraryProblem[]>;
  reload(): Promise<LibraryProblem[]>;
}

export const BUILDER_MARK = "# Written by the clawbridge builder from canvas";

export type Compiled = { ok: true; system: Record<string, unknown> } | { ok: false; problems: string[] };
export type DeployResult =
  | ({ ok: true; file: string } & Extract<Compiled, { ok: true }>)
  | Extract<Compiled, { ok: false }>;

/** The compiled system of a canvas, or the problems that stop it (for deploy, diff and export). */
export async function compiledSystem(
  store: CanvasStore,
  id: string,
  host: SystemsHost | undefined,
  policy: DeployPolicy,
): Promise<Compiled> {
  const canvas = store.get(id);
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
  const canvas = store.get(system)!;
  writeFileAtomic(
    file,
    `${BUILDER_MARK} "${system}" (version ${canvas.version}). Edit it by chat, or remove this line to own it.\n${stringify(res.system)}`,
  );
  const problems = await host.reload();
  if (problems.length) {
    // Put back what was there: a deploy never leaves the library unloadable.
    if (previous === undefined) rmSync(file, { force: true });
    else writeFileAtomic(file, previous);
    await host.reload();
    return { ok: false, problems: problems.map((p) => `${p.where}: ${p.key}: ${p.message}`) };
  }
  store.setStatus(system, "deployed");
  return { ok: true, file, system: res.system };
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
  if (args.store.get(args.system)) args.store.setStatus(args.system, "draft");
  const problems = await args.host.reload();
  return problems.length
    ? { ok: false, message: problems.map((p) => `${p.where}: ${p.key}: ${p.message}`).join("\n") }
    : { ok: true, message: `**${args.system}** is a draft again; the router no longer offers it.` };
}
