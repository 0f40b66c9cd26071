/**
 * Each inbound hook's secret: 32 random bytes (base64url) in `<dataDir>/hooks/<system>.secret`,
 * the folder 0700 and the file 0600, made by the bridge when a system with `hook` is loaded (or by
 * `clawbridge systems hook <id>`), replaced by `--rotate`. Read at every request, so a rotation
 * takes effect at once. Never logged, never sent by the bridge (only the CLI shows it).
 */
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";

export const hookSecretPath = (dataDir: string, system: string): string =>
  path.join(dataDir, "hooks", `${system}.secret`);

/** The secret, or undefined when none was made yet. */
function readHookSecret(dataDir: string, system: string): string | undefined {
  try {
    return readFileSync(hookSecretPath(dataDir, system), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The secret, made when there is none (or replaced, with `rotate`). */
export function ensureHookSecret(dataDir: string, system: string, rotate = false): string {
  const have = rotate ? undefined : readHookSecret(dataDir, system);
  if (have) return have;
  const file = hookSecretPath(dataDir, system);
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  chmodSync(path.dirname(file), 0o700);
  const secret = randomBytes(32).toString("base64url");
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, `${secret}\n`, { mode: 0o600 });
  renameSync(tmp, file);
  return secret;
}
