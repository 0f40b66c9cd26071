/**
 * Memory of a warm process: the resident set of its whole process group (a CLI may run helpers,
 * a language server, a model-routing child), read from /proc. Linux only; elsewhere undefined.
 * `groupRss` scans every process once (2-9 ms of CPU on a busy machine); `treeRss` follows one
 * process's children instead (~0.2 ms), for watching a process that is starting.
 *
 * One correction: a child that is a fork of its parent which has not run another program yet (the
 * same name, executable and command line as its parent: between `fork` and `exec`) is not counted. Its
 * resident set is its parent's pages, shared copy-on-write, and would count them twice: Claude Code
 * starts its helpers so, and on a loaded machine such a fork of a 290 MB claude stays visible for a
 * few hundred milliseconds, doubling what the group seems to hold while adding next to nothing.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";

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

interface Stat {
  /** The name of the program it runs (`comm`, what `exec` set). */
  name: string;
  parent: number;
  group: number;
}

/** Name, parent and process group of a pid (`/proc/<pid>/stat`). */
function statOf(pid: number): Stat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return {
      name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
      parent: Number(fields[1]),
      group: Number(fields[2]),
    };
  } catch {
    return undefined;
  }
}

/** The executable and command line of a pid (a fork before its `exec` has its parent's). */
export function programOf(pid: number): string | undefined {
  try {
    return `${readlinkSync(`/proc/${pid}/exe`)}\0${readFileSync(`/proc/${pid}/cmdline`, "latin1")}`;
  } catch {
    return undefined;
  }
}

/**
 * Whether `pid` is a fork of its parent that has not run another program yet (see the top of this
 * file). A child that runs the same program anew (Gemini CLI relaunching node with more memory)
 * has another command line, and counts.
 */
function unexecedFork(pid: number, stat: Stat, parent: Stat | undefined): boolean {
  if (!parent || parent.name !== stat.name) return false;
  const program = programOf(pid);
  return program !== undefined && program === programOf(stat.parent);
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
  const members = new Map<number, Stat>();
  for (const name of pids) {
    const pid = Number(name);
    const stat = statOf(pid);
    if (stat && wanted.has(stat.group)) members.set(pid, stat);
  }
  for (const [pid, stat] of members) {
    if (pid !== stat.group && unexecedFork(pid, stat, members.get(stat.parent))) continue;
    const rss = pidRss(pid);
    if (rss !== undefined) out.set(stat.group, (out.get(stat.group) ?? 0) + rss);
  }
  return out;
}

/** Resident bytes of `pid` and its descendants (their `/proc/<pid>/task/<tid>/children`), or undefined when it is gone. */
export function treeRss(pid: number, depth = 0, self = statOf(pid)): number | undefined {
  let total = pidRss(pid);
  if (total === undefined || depth > 8) return total;
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return total;
  }
  for (const tid of tids) {
    let kids: string[] = [];
    try {
      kids = readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim().split(" ").filter(Boolean);
    } catch {
      continue;
    }
    for (const kid of kids) {
      const k = Number(kid);
      const stat = statOf(k);
      if (!stat || unexecedFork(k, stat, self)) continue;
      total += treeRss(k, depth + 1, stat) ?? 0;
    }
  }
  return total;
}
