/** File writes that never leave a half-written config behind. */
import { chmodSync, copyFileSync, statSync } from "node:fs";

export { writeFileAtomic } from "../../core/util/atomic-write.js";

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
