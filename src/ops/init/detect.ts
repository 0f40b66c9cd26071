/**
 * What `clawbridge init` finds: each known coding-agent CLI (`KNOWN_CLIS`) found on PATH, in its
 * usual home or in this package's node_modules/.bin (`resolveCli`, as the backends find it), whether
 * it is logged in (logins.ts), and the models it offers (`discoverModels`: the backend made for the
 * question, asked, closed). The listings run side by side, each bounded.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Logger } from "pino";
import { chooseLive } from "../../backends/catalog/choose.js";
import { discoverModels } from "../../backends/catalog/discover.js";
import { KNOWN_CLIS, type KnownCli, resolveCli } from "../../backends/cli/resolve.js";
import type { DiscoveredModel } from "../../backends/contract/backend.js";
import { DEFAULT_MODEL } from "../../core/config/load.js";
import { type LoginStatus, loginStatus, tildify } from "./logins.js";

/** Human names of the CLIs, by backend type. */
export const CLI_LABELS: Record<string, string> = {
  opencode: "OpenCode",
  "claude-code": "Claude Code",
  "gemini-cli": "Gemini CLI",
  codex: "Codex",
  "qwen-code": "Qwen Code",
};

export interface FoundCli {
  cli: KnownCli;
  label: string;
  /** The binary, when installed. */
  path?: string;
  /** Where it was looked for, when not. */
  tried: string[];
  login: LoginStatus;
  /** What it offers ([] when not installed or when listing failed). */
  models: DiscoveredModel[];
  /** Why listing failed. */
  modelsError?: string;
}

/** The CLIs, installed or not, in `KNOWN_CLIS` order; models listed only for installed ones. */
export async function detectClis(opts: {
  logger: Logger;
  env?: NodeJS.ProcessEnv;
  /** Each listing's limit (default 30 s). */
  timeoutMs?: number;
}): Promise<FoundCli[]> {
  const env = opts.env ?? process.env;
  // Listing models writes nothing of ours, but a backend wants a data dir: a private one, removed after.
  const dataDir = mkdtempSync(path.join(tmpdir(), "clawbridge-init-"));
  try {
    return await Promise.all(
      KNOWN_CLIS.map(async (cli): Promise<FoundCli> => {
        const found = await resolveCli(cli.name, cli.extraPlaces ?? []);
        const base = {
          cli,
          label: CLI_LABELS[cli.backendType] ?? cli.name,
          tried: found.tried,
          login: loginStatus(cli.backendType, env),
        };
        if (!found.path) return { ...base, models: [] };
        try {
          const models = await discoverModels(
            cli.backendType,
            {},
            { dataDir, logger: opts.logger },
            AbortSignal.timeout(opts.timeoutMs ?? 30_000),
          );
          return { ...base, path: found.path, models };
        } catch (err) {
          return { ...base, path: found.path, models: [], modelsError: (err as Error).message.slice(0, 300) };
        }
      }),
    );
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * The model served by default: Claude Code `sonnet`; OpenCode the best free one (tools, then the
 * largest context, as `remap.onMissing: best-free` picks), else the embedded defaults' name, which
 * that remap then serves; the others their first listed model, else the CLI's own default.
 */
export function defaultModel(type: string, models: readonly DiscoveredModel[]): DiscoveredModel {
  if (type === "claude-code")
    return models.find((m) => m.id === "sonnet") ?? { id: "sonnet", name: "Claude Sonnet (newest)" };
  if (type === "opencode") return chooseLive(models, "best-free") ?? { id: DEFAULT_MODEL, free: true };
  return models[0] ?? { id: "default", name: "the CLI's own default model" };
}

/** Whether `init` offers the CLI as served by default: OpenCode always (free models), the others when logged in. */
export function servedByDefault(f: FoundCli): boolean {
  return !!f.path && (f.cli.backendType === "opencode" || f.login.loggedIn);
}

/** One line for the list `init` prints. */
export function describeFound(f: FoundCli, env: NodeJS.ProcessEnv = process.env): string {
  if (!f.path) return `${f.label}: not installed (npm install -g ${f.cli.pkg})`;
  const login = f.login.loggedIn
    ? `logged in: ${f.login.how}`
    : `not logged in (${f.login.how}; ${f.login.hint ?? ""})`;
  const models = f.modelsError
    ? `models not listed: ${f.modelsError}`
    : `${f.models.length} model${f.models.length === 1 ? "" : "s"}${f.models.some((m) => m.free) ? ` (${f.models.filter((m) => m.free).length} free)` : ""}`;
  return `${f.label}: ${tildify(f.path, env)}; ${login}; ${models}`;
}
