/** A system's bundle written under `<dataDir>/exports/` (what an EXPORT request in chat makes). */
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { BuilderRoom } from "./service.js";

export async function writeExport(room: BuilderRoom, system: string): Promise<{ file: string; bytes: number }> {
  const data = await room.exportBundle(system);
  const dir = path.join(room.dataDir, "exports");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stamp = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*$/, "");
  const file = path.join(dir, `${system}-${stamp}.tar.gz`);
  writeFileSync(file, data, { mode: 0o600 });
  return { file, bytes: data.length };
}
