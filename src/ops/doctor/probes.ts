/** Low-level probes for `clawbridge doctor`: who owns a port, is a PID alive, lock files, disk space. */
import { readdirSync, readFileSync, readlinkSync, statfsSync, existsSync, accessSync, constants } from "node:fs";
import net from "node:net";
import path from "node:path";

/** Is a process with this PID running? (EPERM: it exists but belongs to someone else.) */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A process's command line from /proc (Linux), shortened; undefined when unknown. */
export function processCommand(pid: number): string | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    const cmd = raw.split("\0").filter(Boolean).join(" ");
    return cmd ? (cmd.length > 160 ? `${cmd.slice(0, 157)}...` : cmd) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The PID listening on a TCP port, from /proc/net/tcp{,6} and /proc/<pid>/fd (Linux; only
 * processes this user may inspect). Undefined when it cannot be told.
 */
export function findListeningPid(port: number): number | undefined {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      const local = cols[1]!;
      const state = cols[3];
      const p = parseInt(local.slice(local.lastIndexOf(":") + 1), 16);
      if (state === "0A" && p === port) inodes.add(cols[9]!);
    }
  }
  if (!inodes.size) return undefined;
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`);
        const m = /^socket:\[(\d+)\]$/.exec(link);
        if (m && inodes.has(m[1]!)) return Number(pid);
      } catch {
        /* closed meanwhile */
      }
    }
  }
  return undefined;
}

/** Can we listen on host:port right now? (The test socket is closed at once.) */
export function canListen(host: string, port: number): Promise<{ free: boolean; code?: string }> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once("error", (err: NodeJS.ErrnoException) => resolve({ free: false, code: err.code }));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => resolve({ free: true })));
  });
}

export interface LockInfo {
  file: string;
  pid?: number;
  alive?: boolean;
  command?: string;
  /** The PID is alive but belongs to an unrelated program now (PID reuse): the lock is stale. */
  reused?: boolean;
  /** Could not be read or holds no PID. */
  problem?: string;
}

/** Read a lock file holding a PID: a bare number (first line) or JSON with `pid`. */
export function readLock(file: string): LockInfo {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    return { file, problem: `cannot read: ${(err as Error).message}` };
  }
  let pid: number | undefined;
  const t = text.trim();
  if (t.startsWith("{")) {
    try {
      const v = JSON.parse(t) as { pid?: unknown };
      if (typeof v.pid === "number") pid = v.pid;
      else if (typeof v.pid === "string" && /^\d+$/.test(v.pid)) pid = Number(v.pid);
    } catch {
      /* fall through */
    }
  } else {
    const m = /^(\d+)\b/.exec(t);
    if (m) pid = Number(m[1]);
  }
  if (!pid) return { file, problem: "holds no PID" };
  const alive = pidAlive(pid);
  if (!alive) return { file, pid, alive };
  const command = processCommand(pid);
  // A live PID that is not a node/openclaw/clawbridge process was reused by the system: stale
  // (the same rule the OpenClaw plugin applies to its plugin.lock).
  return { file, pid, alive, ...(command ? { command, reused: !/node|openclaw|clawbridge/i.test(command) } : {}) };
}

/** Lock files of the bridge and its OpenClaw plugin: `<dataDir>/*.lock` and `<tmpDir>/clawbridge-*.lock`. */
export function findLockFiles(dataDir: string | undefined, tmpDir: string): string[] {
  const out: string[] = [];
  if (dataDir) {
    try {
      for (const f of readdirSync(dataDir)) if (f.endsWith(".lock")) out.push(path.join(dataDir, f));
    } catch {
      /* no data dir yet */
    }
  }
  try {
    for (const f of readdirSync(tmpDir)) if (/^clawbridge-.*\.lock$/.test(f)) out.push(path.join(tmpDir, f));
  } catch {
    /* unreadable tmp */
  }
  return out.sort();
}

/** The directory itself, or its nearest existing parent. */
export function nearestExisting(dir: string): string {
  let d = path.resolve(dir);
  for (let i = 0; i < 100 && !existsSync(d); i++) d = path.dirname(d);
  return d;
}

export function freeBytes(dir: string): { free: number; total: number; at: string } {
  const at = nearestExisting(dir);
  const s = statfsSync(at);
  return { free: Number(s.bavail) * Number(s.bsize), total: Number(s.blocks) * Number(s.bsize), at };
}

export function writable(dir: string): boolean {
  try {
    accessSync(nearestExisting(dir), constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

export function formatBytes(n: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v >= 10 || u === 0 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}
