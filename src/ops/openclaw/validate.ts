/**
 * Asking OpenClaw itself whether a config file is valid: `openclaw config validate --json`.
 * Its schema is strict and changes between releases, so its own verdict beats any copy of it.
 */
import { execFile } from "node:child_process";
import { readFileSync, realpathSync } from "node:fs";
import path from "node:path";
import { findOnPath } from "../../core/util/process.js";
import type { OpenClawPaths } from "./provider.js";

export interface ValidationIssue {
  path: string;
  message: string;
}

export interface ValidationResult {
  /** false: no openclaw CLI was found (or it could not run); nothing was checked. */
  ran: boolean;
  valid?: boolean;
  issues: ValidationIssue[];
  /** One line for people: what ran and what it said. */
  detail: string;
  bin?: string;
}

export type Validator = (paths: OpenClawPaths) => Promise<ValidationResult>;

/**
 * The openclaw CLI to use: `explicit` (--openclaw-bin), else `openclaw` on PATH. A `.mjs`/`.js`
 * entry file is run with `$OPENCLAW_NODE` (OpenClaw 2026.9 needs Node >= 24.16) or this Node.
 */
export async function findOpenClawBin(
  explicit: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string | undefined> {
  if (explicit) return explicit;
  return findOnPath("openclaw", env.PATH ?? "");
}

/**
 * The version of the OpenClaw package a CLI path belongs to, read from its package.json (no run):
 * `openclaw` on PATH is a link to `<pkg>/openclaw.mjs`. Undefined when it cannot be told.
 */
export function openclawVersionOf(bin: string | undefined): string | undefined {
  if (!bin) return undefined;
  let dir: string;
  try {
    dir = path.dirname(realpathSync(bin));
  } catch {
    return undefined;
  }
  for (let i = 0; i < 3; i++, dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")) as {
        name?: unknown;
        version?: unknown;
      };
      if (pkg.name === "openclaw" && typeof pkg.version === "string") return pkg.version;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

function command(bin: string, env: NodeJS.ProcessEnv): { file: string; args: string[] } {
  if (/\.(mjs|cjs|js)$/.test(bin)) return { file: env.OPENCLAW_NODE || process.execPath, args: [bin] };
  return { file: bin, args: [] };
}

function parseJsonOutput(stdout: string): Record<string, unknown> | undefined {
  const start = stdout.indexOf("{");
  const end = stdout.lastIndexOf("}");
  if (start < 0 || end < start) return undefined;
  try {
    return JSON.parse(stdout.slice(start, end + 1)) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/** Run `openclaw config validate --json` against the files in `paths` (never a shell; 90 s limit). */
export function validateWithOpenClaw(
  bin: string,
  paths: OpenClawPaths,
  env: NodeJS.ProcessEnv = process.env,
  timeoutMs = 90_000,
): Promise<ValidationResult> {
  const { file, args } = command(bin, env);
  const childEnv = {
    ...env,
    OPENCLAW_CONFIG_PATH: paths.configPath,
    OPENCLAW_STATE_DIR: paths.stateDir,
    NO_COLOR: "1",
  };
  return new Promise((resolve) => {
    execFile(
      file,
      [...args, "config", "validate", "--json"],
      { env: childEnv, timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024, killSignal: "SIGKILL" },
      (err, stdout, stderr) => {
        const parsed = parseJsonOutput(String(stdout));
        if (parsed && typeof parsed.valid === "boolean") {
          const issues = Array.isArray(parsed.issues)
            ? (parsed.issues as Array<{ path?: unknown; message?: unknown }>).map((i) => ({
                path: String(i.path ?? ""),
                message: String(i.message ?? ""),
              }))
            : [];
          resolve({
            ran: true,
            valid: parsed.valid,
            issues,
            bin,
            detail: parsed.valid
              ? `openclaw config validate: valid`
              : `openclaw config validate: INVALID: ${issues.map((i) => `${i.path || "(top level)"}: ${i.message}`).join("; ") || String((parsed.error as { message?: string } | undefined)?.message ?? "no details")}`,
          });
          return;
        }
        const code = (err as NodeJS.ErrnoException | null)?.code;
        const why =
          code === "ENOENT"
            ? `${file} not found`
            : (err as { killed?: boolean } | null)?.killed
              ? `no answer within ${Math.round(timeoutMs / 1000)} s`
              : `${String(stderr).trim().split("\n").slice(-3).join(" ").slice(0, 400) || (err as Error | null)?.message || "no JSON output"}`;
        resolve({ ran: false, issues: [], bin, detail: `could not run ${bin} config validate --json: ${why}` });
      },
    );
  });
}
