/**
 * The run directory (`<dataDir>/run`): one small file per running CLI process group, so that CLIs a
 * bridge could not end itself (it was killed with SIGKILL, or crashed) are ended by its orphan
 * watcher (`orphan-watcher.ts`) right away, or else by the next bridge's start-up reaper.
 *
 * A record is one line of JSON named `<pgid>.json`:
 * `{"pid":P,"start":"S","boot":"B","owner":"O","ownerPid":N,"ownerStart":"T","command":"c"}`
 * (the CLI was spawned detached, so its pid P is both its process-group and its session id; S is
 * its kernel start time; B the kernel's boot id; O the id of the bridge that started it, N/T that
 * bridge's pid and start time). The watcher is a /bin/sh script that finds its own records by the
 * `"owner":"O"` text and the leader's start time by the `"start":"S"` text: keep those two fields
 * in this form, and `command` last.
 */
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/** One process as /proc/<pid>/stat shows it. */
export interface ProcStat {
  pid: number;
  /** R, S, D, Z (zombie: already dead, waiting to be reaped by its parent), ... */
  state: string;
  pgrp: number;
  session: number;
  /** Start time in clock ticks since boot (field 22). */
  start: number;
}

/** /proc/<pid>/stat, or undefined when there is no such process. */
export function procStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // The command name (field 2) is in parentheses and may itself hold spaces and ")".
  const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const start = Number(f[19]);
  if (!f[0] || !Number.isFinite(start)) return undefined;
  return { pid, state: f[0], pgrp: Number(f[2]), session: Number(f[3]), start };
}

/** Kernel start time of a process as text (what records store), to tell a reused pid apart. */
export function startTime(pid: number): string | undefined {
  const s = procStat(pid);
  return s ? String(s.start) : undefined;
}

let bootIdCache: string | undefined | null = null;
/** The kernel's boot id: a record from before a reboot names pids that mean nothing now. */
export function bootId(): string | undefined {
  if (bootIdCache === null) {
    try {
      bootIdCache = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || undefined;
    } catch {
      bootIdCache = undefined;
    }
  }
  return bootIdCache;
}

/** Who writes records: one id per bridge (`newRunOwner()`), with its process for liveness checks. */
export interface RunOwner {
  id: string;
  pid: number;
  start: string | undefined;
}

export function newRunOwner(): RunOwner {
  return { id: randomUUID(), pid: process.pid, start: startTime(process.pid) };
}

interface RunRecord {
  pid: number;
  start?: string;
  boot?: string;
  owner?: string;
  ownerPid?: number;
  ownerStart?: string;
  command?: string;
}

/** Record a CLI's process group; returns the file (removed once the group is reaped), or undefined. */
export function writeRunRecord(
  dir: string,
  owner: RunOwner,
  pid: number,
  command: string,
  start = startTime(pid),
): string | undefined {
  const file = path.join(dir, `${pid}.json`);
  const rec: RunRecord = {
    pid,
    start,
    boot: bootId(),
    owner: owner.id,
    ownerPid: owner.pid,
    ownerStart: owner.start,
    command: path.basename(command),
  };
  try {
    writeFileSync(file, JSON.stringify(rec), { mode: 0o600 });
    return file;
  } catch {
    return undefined; // bookkeeping only
  }
}

/** Every process, read once (a few ms for a few hundred processes). */
function scanProcesses(): ProcStat[] {
  const out: ProcStat[] = [];
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const n of names) {
    if (n.charCodeAt(0) < 48 || n.charCodeAt(0) > 57) continue;
    const s = procStat(Number(n));
    if (s) out.push(s);
  }
  return out;
}

/** A record whose bridge still runs (another process) belongs to that bridge, not to us. */
function ownerAlive(rec: RunRecord): boolean {
  if (!rec.ownerPid || !rec.ownerStart || rec.ownerPid === process.pid) return false;
  const owner = procStat(rec.ownerPid);
  return !!owner && owner.state !== "Z" && String(owner.start) === rec.ownerStart;
}

/**
 * The processes of a recorded group that are still ours, by this rule:
 *
 * - the record must be from this boot (after a reboot every pid names someone else);
 * - if a process with the leader's pid lives, it must have the recorded start time — another start
 *   time means the pid was handed out again, which the kernel only does once nothing is left in
 *   our group or session, so nothing of ours remains;
 * - whatever the leader's state, ours are the live processes in the leader's group OR session
 *   (the leader called setsid(): its pid is the id of both; a helper that moved to a group of its
 *   own stays in the session, and no process outside can join a session) that started no earlier
 *   than the leader.
 *
 * The kernel never hands out a pid that is still some process's group or session id, so a live
 * group or session with the recorded id can only be foreign if all of ours ended, the pid counter
 * wrapped round pid_max, and a new process got exactly this pid, made its own session and started
 * children: the start-time floor does not rule that out, and it is accepted as negligible next to
 * leaving a CLI running. Zombies are ignored: they are dead already.
 */
function ownedProcesses(
  rec: RunRecord,
  procs: readonly ProcStat[],
  boot: string | undefined,
  self: ProcStat | undefined,
): ProcStat[] {
  if (!Number.isInteger(rec.pid) || rec.pid <= 1 || !rec.start) return [];
  // Never our own process, group or session (only possible with a reused pid, but fatal).
  if (rec.pid === process.pid || rec.pid === self?.pgrp || rec.pid === self?.session) return [];
  if (rec.boot && boot && rec.boot !== boot) return [];
  const floor = Number(rec.start);
  if (!Number.isFinite(floor)) return [];
  const leader = procs.find((p) => p.pid === rec.pid);
  if (leader && leader.start !== floor) return [];
  return procs.filter(
    (p) =>
      p.state !== "Z" && p.pid !== process.pid && (p.pgrp === rec.pid || p.session === rec.pid) && p.start >= floor,
  );
}

/** Still the same live process (not gone, not a zombie, not a reused pid)? */
function stillAlive(p: ProcStat): boolean {
  const now = procStat(p.pid);
  return !!now && now.start === p.start && now.state !== "Z";
}

function signal(target: number, sig: NodeJS.Signals): void {
  try {
    process.kill(target, sig);
  } catch {
    /* gone */
  }
}

/**
 * End the process groups a previous bridge left behind (recorded in the run directory, verified
 * as ours by `ownedProcesses`): SIGTERM to every group at once, one shared grace period, then
 * SIGKILL to what is left — so the wait is one grace period whatever the number of groups.
 * Records of a bridge that still runs (another process using the same data directory) are left
 * alone. Returns how many groups were ended. The bridge starts only after this, so the grace is
 * short: a CLI that obeys SIGTERM is gone in milliseconds, and the turn it was running is lost
 * anyway.
 */
export async function reapOrphans(dir: string, graceMs = 1000): Promise<number> {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".json"));
  } catch {
    return 0;
  }
  if (!names.length) return 0;
  const procs = scanProcesses();
  const boot = bootId();
  const self = procStat(process.pid);
  const groups: { pgid: number; rec: RunRecord; members: ProcStat[] }[] = [];
  const files: string[] = [];
  for (const name of names) {
    const file = path.join(dir, name);
    let rec: RunRecord | undefined;
    try {
      rec = JSON.parse(readFileSync(file, "utf8")) as RunRecord;
    } catch {
      /* unreadable record: just remove it */
    }
    if (rec && ownerAlive(rec)) continue;
    files.push(file);
    const members = rec ? ownedProcesses(rec, procs, boot, self) : [];
    if (rec && members.length) groups.push({ pgid: rec.pid, rec, members });
  }
  if (!groups.length) {
    for (const file of files) rmSync(file, { force: true });
    return 0;
  }
  const signalAll = (sig: NodeJS.Signals, members: (g: (typeof groups)[number]) => ProcStat[]) => {
    for (const g of groups) {
      const own = members(g);
      if (own.some((m) => m.pgrp === g.pgid)) signal(-g.pgid, sig);
      for (const m of own) if (m.pgrp !== g.pgid) signal(m.pid, sig); // moved to a group of its own
    }
  };
  signalAll("SIGTERM", (g) => g.members);
  // One grace period shared by every group.
  const deadline = Date.now() + graceMs;
  let left = groups.flatMap((g) => g.members);
  for (let i = 0; i < 1000 && left.length && Date.now() < deadline; i++) {
    await new Promise((r) => setTimeout(r, 50));
    left = left.filter(stillAlive);
  }
  // Look again (a process may have forked meanwhile) and SIGKILL whatever of ours is left.
  const now = scanProcesses();
  signalAll("SIGKILL", (g) => ownedProcesses(g.rec, now, boot, self));
  for (const file of files) rmSync(file, { force: true });
  return groups.length;
}
