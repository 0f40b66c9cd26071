/**
 * `<dataDir>/plugin.lock`: which gateway process runs the bridge. Created exclusively; a lock whose
 * PID is dead (or now belongs to a process that is not an OpenClaw/Node process) is stale and
 * replaced. Only the process that holds the lock removes it.
 */
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

export const LOCK_NAME = "plugin.lock";

export function lockPath(dataDir) {
  return path.join(dataDir, LOCK_NAME);
}

/** Is `pid` a live process (EPERM: alive, owned by someone else)? */
export function pidAlive(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err?.code === "EPERM";
  }
}

/** On Linux: does the live `pid` look like a process that could hold our lock (node / openclaw)? */
function plausibleHolder(pid) {
  let cmd;
  try {
    cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return true; // no /proc (macOS) or not readable: trust the PID
  }
  return /node|openclaw|clawbridge/i.test(cmd);
}

export function readLock(dataDir) {
  try {
    const v = JSON.parse(readFileSync(lockPath(dataDir), "utf8"));
    return v && typeof v === "object" ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Take the lock for this process.
 * @returns {{ ok: true, replaced?: object } | { ok: false, holder: object }}
 */
export function acquireLock(dataDir, info = {}) {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const file = lockPath(dataDir);
  const body = JSON.stringify({ pid: process.pid, startedAt: new Date().toISOString(), ...info }, null, 2) + "\n";
  let replaced;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      writeFileSync(file, body, { flag: "wx", mode: 0o600 });
      return replaced ? { ok: true, replaced } : { ok: true };
    } catch (err) {
      if (err?.code !== "EEXIST") throw err;
    }
    const holder = readLock(dataDir);
    const pid = holder?.pid;
    if (pid === process.pid) {
      // Left by an earlier start in this same process (the caller knows nothing runs): take it over.
      writeFileSync(file, body, { mode: 0o600 });
      return { ok: true, replaced: holder };
    }
    if (holder && pidAlive(pid) && plausibleHolder(pid)) return { ok: false, holder };
    // Stale (dead PID, unreadable or half-written file): move it aside atomically, then retry.
    replaced = holder ?? { unreadable: true };
    try {
      renameSync(file, `${file}.stale-${process.pid}`);
      rmSync(`${file}.stale-${process.pid}`, { force: true });
    } catch {
      /* someone else replaced it first: retry */
    }
  }
  const holder = readLock(dataDir);
  return { ok: false, holder: holder ?? { unreadable: true } };
}

/** Add fields to our lock (e.g. the URL once the bridge listens). */
export function updateLock(dataDir, info) {
  const cur = readLock(dataDir);
  if (cur?.pid !== process.pid) return;
  writeFileSync(lockPath(dataDir), JSON.stringify({ ...cur, ...info }, null, 2) + "\n", { mode: 0o600 });
}

/** Remove the lock if this process holds it. */
export function releaseLock(dataDir) {
  const cur = readLock(dataDir);
  if (cur?.pid === process.pid) rmSync(lockPath(dataDir), { force: true });
}
