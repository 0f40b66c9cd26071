/** Every path under a folder (files, links, folders), relative and sorted: what a test compares before and after. */
import { existsSync, lstatSync, readdirSync } from "node:fs";
import path from "node:path";

export function walk(dir: string, rel = ""): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    const r = rel ? `${rel}/${name}` : name;
    out.push(r);
    if (lstatSync(p).isDirectory()) out.push(...walk(p, r));
  }
  return out.sort();
}
