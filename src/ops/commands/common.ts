/**
 * Helpers shared by the commands (src/ops/commands/*.ts).
 *
 * Exit codes: 0 fine; 1 something is wrong (status/doctor found a failure, OpenClaw rejected the
 * change, systemctl failed); 2 bad input (invalid bridge config, unparsable OpenClaw config, ...).
 *
 * Every command file is loaded to register its commands (and for `--help`), so they and this file
 * import only commander and types at the top; what a command runs is imported when it runs
 * (`clawbridge --help` must not load the config schema, the HTTP server or SQLite).
 */
import type { LoadOptions } from "../../core/config/load.js";
import type { Config } from "../../core/config/schema.js";
import type { Validator } from "../openclaw/validate.js";
import type { SystemctlRunner } from "../service/systemd.js";

/** The bridge's configuration (src/core/config/load.ts, loaded on first use). */
export async function loadConfig(opts: LoadOptions): Promise<Config> {
  return (await import("../../core/config/load.js")).loadConfig(opts);
}

/** systemctl to run (CLAWBRIDGE_SYSTEMCTL: another binary, e.g. a wrapper). */
export async function systemctl(): Promise<SystemctlRunner> {
  const { defaultSystemctlRunner } = await import("../service/systemd.js");
  return defaultSystemctlRunner(process.env.CLAWBRIDGE_SYSTEMCTL || "systemctl");
}

export const out = (s: string) => void process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
const err = (s: string) => void process.stderr.write(s.endsWith("\n") ? s : `${s}\n`);

/**
 * An error of bad input, told by its name (ConfigError of src/core/config/load.ts, OpenClawSetupError
 * of src/ops/openclaw/edit-steps.ts) so that this file need not load those modules.
 */
const BAD_INPUT = new Set(["ConfigError", "OpenClawSetupError"]);

/** Bad input: print and exit 2. Anything else is a bug: print the stack, exit 1. */
export function fail(e: unknown): void {
  if (e instanceof Error && BAD_INPUT.has(e.name)) {
    err(`clawbridge: ${e.message}`);
    process.exitCode = 2;
    return;
  }
  if (e instanceof Error && /^(--env|service name|environment variable|service arguments)/.test(e.message)) {
    err(`clawbridge: ${e.message}`);
    process.exitCode = 2;
    return;
  }
  err(`clawbridge: ${(e as Error)?.stack ?? String(e)}`);
  process.exitCode = 1;
}

export interface OpenClawOpts {
  config?: string;
  openclawHome?: string;
  providerId?: string;
  openclawBin?: string;
  validate?: boolean;
  json?: boolean;
  dryRun?: boolean;
}

export async function makeValidator(opts: OpenClawOpts): Promise<Validator | null> {
  if (opts.validate === false) return null;
  const { findOpenClawBin, validateWithOpenClaw } = await import("../openclaw/validate.js");
  const bin = await findOpenClawBin(opts.openclawBin);
  if (!bin) return null;
  return (paths) => validateWithOpenClaw(bin, paths);
}
