/**
 * Memory of a warm process: the resident set of its whole process group (a CLI may run helpers,
 * a language server, a model-routing child), read from /proc. Linux only; elsewhere undefined.
 */
import { readdirSync, readFileSync } from "node:fs";

const PAGE = 4096;

/** Resident bytes of one pid (`/proc/<pid>/statm`), or undefined when it is gone. */
export function pidRss(pid: number): number | undefined {
  try {
    const statm = readFileSync(`/proc/${pid}/statm`, "utf8").split(" ");
    return Number(statm[1]) * PAGE;
  } catch {
    return undefined;
  }
}

/** The process group id of a pid (field 5 of `/proc/<pid>/stat`). */
function groupOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[2]);
  } catch {
    return undefined;
  }
}

/** Resident bytes of every process in the groups led by `leaders` (one /proc scan for all). */
export function groupRss(leaders: number[]): Map<number, number> {
  const out = new Map<number, number>();
  if (leaders.length === 0) return out;
  const wanted = new Set(leaders);
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((n) => /^\d+$/.test(n));
  } catch {
    return out;
  }
  for (const name of pids) {
    const pid = Number(name);
    const group = groupOf(pid);
    if (group === undefined || !wanted.has(group)) continue;
    const rss = pidRss(pid);
    if (rss !== undefined) out.set(group, (out.get(group) ?? 0) + rss);
  }
  return out;
}
