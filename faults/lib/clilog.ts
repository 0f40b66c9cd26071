/** The fake CLIs' trail (`<FAULTS_DIR>/cli.log`): one line per start, end and overlap. */
import { readFileSync } from "node:fs";
import path from "node:path";

export interface CliLog {
  starts: number;
  ends: number;
  /** A process of a conversation started while an earlier one of the same conversation was alive. */
  overlaps: Array<{ key: string; pid: number; earlier: number }>;
  /** Started processes per key, in order. */
  startsByKey: Map<string, number[]>;
}

export function readCliLog(faultsDir: string): CliLog {
  let text = "";
  try {
    text = readFileSync(path.join(faultsDir, "cli.log"), "utf8");
  } catch {
    /* no CLI ran */
  }
  const log: CliLog = { starts: 0, ends: 0, overlaps: [], startsByKey: new Map() };
  for (const line of text.split("\n")) {
    const [kind, key, pid, a] = line.split(" ");
    if (!kind || !key) continue;
    if (kind === "start") {
      log.starts++;
      const list = log.startsByKey.get(key) ?? [];
      list.push(Number(pid));
      log.startsByKey.set(key, list);
    } else if (kind === "end") log.ends++;
    else if (kind === "overlap") log.overlaps.push({ key, pid: Number(pid), earlier: Number(a) });
  }
  return log;
}
