/** File writes that never leave a half-written file behind (configs, caches, state kept in the data dir). */
import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/** Write via a temp file in the same directory and rename over the target (the directory made 0700 when missing). */
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
