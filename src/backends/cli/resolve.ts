/** Finding a CLI binary: an explicit path, PATH, well-known install places, then this package's own node_modules/.bin. */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { findOnPath, CliProcess } from "../../core/util/process.js";
import type { BackendHealth } from "../contract/backend.js";

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

export interface KnownCli {
  /** Binary name. */
  name: string;
  /** Backend type that drives it. */
  backendType: string;
  /** npm package that installs it. */
  pkg: string;
  /** Install places besides PATH. */
  extraPlaces?: string[];
}

/** The coding-agent CLIs a backend can drive (`clawbridge doctor` and the dashboard look for each). */
export const KNOWN_CLIS: readonly KnownCli[] = [
  { name: "opencode", backendType: "opencode", pkg: "opencode-ai", extraPlaces: ["~/.opencode/bin/opencode"] },
  {
    name: "claude",
    backendType: "claude-code",
    pkg: "@anthropic-ai/claude-code",
    extraPlaces: ["~/.claude/local/claude", "~/.local/bin/claude"],
  },
  { name: "gemini", backendType: "gemini-cli", pkg: "@google/gemini-cli" },
  { name: "codex", backendType: "codex", pkg: "@openai/codex" },
  { name: "qwen", backendType: "qwen-code", pkg: "@qwen-code/qwen-code" },
];

/** Resolve `command` to an executable path, or undefined with the places tried. */
export async function resolveCli(
  command: string,
  extraPlaces: string[] = [],
): Promise<{ path?: string; tried: string[] }> {
  const tried: string[] = [];
  if (command.includes("/")) {
    tried.push(command);
    return { path: (await findOnPath(command)) ?? undefined, tried };
  }
  tried.push(`${command} on PATH`);
  const onPath = await findOnPath(command);
  if (onPath) return { path: onPath, tried };
  for (const place of [
    ...extraPlaces.map((p) => p.replace(/^~(?=\/)/, homedir())),
    path.join(packageRoot, "node_modules", ".bin", command),
  ]) {
    tried.push(place);
    if (existsSync(place)) {
      const found = await findOnPath(place);
      if (found) return { path: found, tried };
    }
  }
  return { tried };
}

/** Run `<bin> --version` with a short timeout: the cheapest proof a CLI can start. */
export async function cliVersionHealth(
  bin: string | undefined,
  tried: string[],
  env: NodeJS.ProcessEnv,
): Promise<BackendHealth> {
  if (!bin) return { usable: false, detail: `not found (looked for ${tried.join(", ")})` };
  const proc = new CliProcess({ command: bin, args: ["--version"], env, timeoutMs: 10_000, killGraceMs: 500 });
  let out = "";
  for await (const line of proc.lines()) out += (out ? "\n" : "") + line;
  const end = await proc.wait();
  if (end.reason === "spawn_error") return { usable: false, detail: `cannot start ${bin}: ${end.spawnError?.message}` };
  if (end.code !== 0)
    return {
      usable: false,
      detail: `${bin} --version exited ${end.code ?? end.signal}: ${end.stderr.trim().slice(-300)}`,
    };
  const version = out.trim().split("\n")[0]?.slice(0, 100);
  return { usable: true, detail: bin, version };
}

/**
 * Run `<bin> <args>` to list something (a CLI's models): its whole stdout, or a rejection naming
 * the exit and the end of stderr. Bounded by `timeoutMs` and `signal`; the process group is reaped.
 */
export async function cliOutput(
  bin: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  signal: AbortSignal,
  timeoutMs = 30_000,
): Promise<string> {
  const proc = new CliProcess({ command: bin, args, env, timeoutMs, killGraceMs: 500, signal });
  const out: string[] = [];
  for await (const line of proc.lines()) out.push(line);
  const end = await proc.wait();
  if (end.reason === "spawn_error") throw new Error(`cannot start ${bin}: ${end.spawnError?.message}`);
  if (end.code !== 0)
    throw new Error(
      `${path.basename(bin)} ${args.join(" ")} exited ${end.code ?? end.signal}: ${end.stderr.trim().slice(-300)}`,
    );
  return out.join("\n");
}

/**
 * One configured CLI binary: found once (lazily), run with the bridge's environment plus the
 * backend's own, health-checked with `--version`, and a clear error when it is missing.
 */
export class CliBinary {
  private found: Promise<{ path?: string; tried: string[] }> | undefined;

  constructor(
    private readonly spec: {
      command: string;
      env: Record<string, string>;
      /** Well-known install places tried after PATH (e.g. `~/.opencode/bin/opencode`). */
      places?: string[];
      /** Human name, e.g. "Claude Code CLI". */
      label: string;
      /** npm package that provides it (for the error message). */
      npmPackage: string;
      /** The backend's name in configuration (for the error message). */
      backendName: string;
    },
  ) {}

  resolve(): Promise<{ path?: string; tried: string[] }> {
    this.found ??= resolveCli(this.spec.command, this.spec.places ?? []);
    return this.found;
  }

  env(): NodeJS.ProcessEnv {
    return { ...process.env, ...this.spec.env };
  }

  async health(): Promise<BackendHealth> {
    const { path: bin, tried } = await this.resolve();
    return cliVersionHealth(bin, tried, this.env());
  }

  /** `<bin> <args>`'s stdout (see `cliOutput`); rejects when the binary is missing. */
  async output(args: string[], signal: AbortSignal, timeoutMs?: number): Promise<string> {
    const { path: bin, tried } = await this.resolve();
    if (!bin) throw new Error(`${this.spec.label} not found (looked for ${tried.join(", ")})`);
    return cliOutput(bin, args, this.env(), signal, timeoutMs);
  }

  /** The error event for a binary that cannot be found. */
  missing(tried: string[]): { type: "error"; error: { code: "backend_unavailable"; message: string; status: number } } {
    return {
      type: "error",
      error: {
        code: "backend_unavailable",
        message: `${this.spec.label} not found (looked for ${tried.join(", ")}); install ${this.spec.npmPackage} or set backends.${this.spec.backendName}.command`,
        status: 503,
      },
    };
  }
}
