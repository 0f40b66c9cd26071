/**
 * Helpers shared by the `openclaw`, `service` and `doctor` commands (src/ops/commands/openclaw.ts,
 * src/ops/commands/service.ts, src/ops/commands/doctor.ts).
 *
 * Exit codes: 0 fine; 1 something is wrong (status/doctor found a failure, OpenClaw rejected the
 * change, systemctl failed); 2 bad input (invalid bridge config, unparsable OpenClaw config, ...).
 */
import { ConfigError } from "../../core/config/load.js";
import { OpenClawSetupError } from "../openclaw/edit-steps.js";
import { findOpenClawBin, validateWithOpenClaw, type Validator } from "../openclaw/validate.js";
import { defaultSystemctlRunner } from "../service/systemd.js";

/** systemctl to run (CLAWBRIDGE_SYSTEMCTL: another binary, e.g. a wrapper). */
export const systemctl = () => defaultSystemctlRunner(process.env.CLAWBRIDGE_SYSTEMCTL || "systemctl");

export const out = (s: string) => void process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
const err = (s: string) => void process.stderr.write(s.endsWith("\n") ? s : `${s}\n`);

/** Bad input: print and exit 2. Anything else is a bug: print the stack, exit 1. */
export function fail(e: unknown): void {
  if (e instanceof ConfigError || e instanceof OpenClawSetupError) {
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
  const bin = await findOpenClawBin(opts.openclawBin);
  if (!bin) return null;
  return (paths) => validateWithOpenClaw(bin, paths);
}
