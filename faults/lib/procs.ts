/**
 * The fake CLIs' processes, found through /proc: every process a fake CLI starts (and its
 * children) carries `FAULTS_MARK=<mark>` in its environment (the harness sets it in the backend's
 * `env`). A process with the mark that is still alive after its turn is an orphan.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface MarkedProcess {
  pid: number;
  pgid: number;
  /** Kernel state letter (R, S, Z…). */
  state: string;
  cmd: string;
}

/** Every process id in /proc but this process's own (none when /proc cannot be read). */
function otherPids(): number[] {
  try {
    return readdirSync("/proc").flatMap((n) => (/^\d+$/.test(n) && Number(n) !== process.pid ? [Number(n)] : []));
  } catch {
    return [];
  }
}

function stat(pid: number): { state: string; pgid: number } | undefined {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return { state: f[0] ?? "?", pgid: Number(f[2]) };
  } catch {
    return undefined;
  }
}

/** Live (not zombie) processes whose environment holds `FAULTS_MARK=<mark>` exactly, or starting with `<mark>` when `prefix`. */
export function markedProcesses(mark: string, prefix = false): MarkedProcess[] {
  const needle = Buffer.from(`FAULTS_MARK=${mark}`);
  const out: MarkedProcess[] = [];
  for (const pid of otherPids()) {
    let env: Buffer;
    try {
      env = readFileSync(`/proc/${pid}/environ`);
    } catch {
      continue;
    }
    let at = env.indexOf(needle);
    let found = false;
    while (at >= 0) {
      const startsVar = at === 0 || env[at - 1] === 0;
      const end = at + needle.length;
      if (startsVar && (prefix || end === env.length || env[end] === 0)) {
        found = true;
        break;
      }
      at = env.indexOf(needle, at + 1);
    }
    if (!found) continue;
    const st = stat(pid);
    if (!st || st.state === "Z" || st.state === "X") continue;
    let cmd = "";
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
    } catch {
      /* gone */
    }
    out.push({ pid, pgid: st.pgid, state: st.state, cmd });
  }
  return out;
}

/** Distinct process groups among the processes. */
export const groupsOf = (ps: MarkedProcess[]) => new Set(ps.map((p) => p.pgid)).size;

/**
 * SIGKILL every marked process (its group when it leads one, else the process): the harness's own
 * clean-up after it has counted them. Never touches this process's group.
 */
export function killMarked(mark: string, prefix = false): number {
  const ps = markedProcesses(mark, prefix);
  const own = stat(process.pid)?.pgid;
  for (const p of ps) {
    try {
      if (p.pgid > 1 && p.pgid !== own && p.pgid === p.pid) process.kill(-p.pgid, "SIGKILL");
      else process.kill(p.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
  return ps.length;
}

export function alive(pid: number): boolean {
  const st = stat(pid);
  return st !== undefined && st.state !== "Z" && st.state !== "X";
}

/** Live processes (not this one) whose command line contains `text` (e.g. the run's temporary folder). */
export function processesNaming(text: string): MarkedProcess[] {
  const out: MarkedProcess[] = [];
  for (const pid of otherPids()) {
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim();
    } catch {
      continue;
    }
    if (!cmd.includes(text)) continue;
    const st = stat(pid);
    if (!st || st.state === "Z" || st.state === "X") continue;
    out.push({ pid, pgid: st.pgid, state: st.state, cmd });
  }
  return out;
}
