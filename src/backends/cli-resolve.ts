/** Finding a CLI binary: an explicit path, PATH, well-known install places, then this package's own node_modules/.bin. */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { findOnPath, CliProcess } from "../util/process.js";
import type { BackendHealth } from "./types.js";

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Resolve `command` to an executable path, or undefined with the places tried. */
export async function resolveCli(command: string, extraPlaces: string[] = []): Promise<{ path?: string; tried: string[] }> {
  const tried: string[] = [];
  if (command.includes("/")) {
    tried.push(command);
    return { path: (await findOnPath(command)) ?? undefined, tried };
  }
  tried.push(`${command} on PATH`);
  const onPath = await findOnPath(command);
  if (onPath) return { path: onPath, tried };
  for (const place of [...extraPlaces.map((p) => p.replace(/^~(?=\/)/, homedir())), path.join(packageRoot, "node_modules", ".bin", command)]) {
    tried.push(place);
    if (existsSync(place)) {
      const found = await findOnPath(place);
      if (found) return { path: found, tried };
    }
  }
  return { tried };
}

/** Run `<bin> --version` with a short timeout: the cheapest proof a CLI can start. */
export async function cliVersionHealth(bin: string | undefined, tried: string[], env: NodeJS.ProcessEnv): Promise<BackendHealth> {
  if (!bin) return { usable: false, detail: `not found (looked for ${tried.join(", ")})` };
  const proc = new CliProcess({ command: bin, args: ["--version"], env, timeoutMs: 10_000, killGraceMs: 500 });
  let out = "";
  for await (const line of proc.lines()) out += (out ? "\n" : "") + line;
  const end = await proc.wait();
  if (end.reason === "spawn_error") return { usable: false, detail: `cannot start ${bin}: ${end.spawnError?.message}` };
  if (end.code !== 0) return { usable: false, detail: `${bin} --version exited ${end.code ?? end.signal}: ${end.stderr.trim().slice(-300)}` };
  const version = out.trim().split("\n")[0]?.slice(0, 100);
  return { usable: true, detail: bin, version };
}
