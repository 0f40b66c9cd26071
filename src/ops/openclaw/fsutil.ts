/** File writes that never leave a half-written config behind. */
import { chmodSync, copyFileSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

/** Write via a temp file in the same directory and rename over the target. */
export function writeFileAtomic(file: string, text: string, mode = 0o600): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.clawbridge-${process.pid}-${Date.now()}.tmp`);
  try {
    writeFileSync(tmp, text, { mode });
    chmodSync(tmp, mode);
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** Copy a file and give the copy the same permission bits (configs hold secrets: often 0600). */
export function copyFileKeepMode(from: string, to: string): void {
  copyFileSync(from, to);
  chmodSync(to, statSync(from).mode & 0o777);
}

export function fileMode(file: string, fallback = 0o600): number {
  try {
    return statSync(file).mode & 0o777;
  } catch {
    return fallback;
  }
}
