/**
 * The bridge side of the "warm" suite (bench/suites/warm.ts): one streamed turn with its timings,
 * what `/health` and `/metrics` say of the warm processes, waiting for a ready standby, and a
 * sampler of the memory the bridge's CLI processes hold (read from /proc by this process, not
 * taken from the bridge's own account).
 */
import { readdirSync, readFileSync } from "node:fs";
import { pidRss, programOf } from "../../../src/backends/warm/rss.js";
import { readChatStream } from "../../chat-stream.js";

export interface TurnTimes {
  /** Request → the CLI's model request reached the fake (the CLI's own share before the model). */
  modelMs?: number;
  firstMs: number;
  /** The last content chunk → `data: [DONE]` at the client. */
  lastToDoneMs?: number;
  chunks: number;
  text: string;
}

/** One streamed turn through the bridge: time to the first content chunk, chunk count, last chunk → [DONE]. */
export async function streamedTurn(
  origin: string,
  model: string,
  key: string,
  messages: Array<{ role: string; content: string }>,
  modelAt: () => number,
): Promise<TurnTimes> {
  const t0 = performance.now();
  const res = await fetch(`${origin}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": key },
    body: JSON.stringify({ model, messages, stream: true }),
    signal: AbortSignal.timeout(180_000),
  });
  const a = await readChatStream(res, model, () => performance.now());
  const at = modelAt();
  return {
    firstMs: a.firstAt - t0,
    chunks: a.chunks,
    text: a.text,
    ...(a.doneAt !== undefined ? { lastToDoneMs: a.doneAt - a.lastAt } : {}),
    ...(at >= t0 ? { modelMs: at - t0 } : {}),
  };
}

export interface HealthWarm {
  processes: number;
  standby: number;
  memory: {
    maxBytes: number;
    usedBytes: number;
    backends?: Record<string, { startBytes: number; settledBytes: number }>;
  };
  list: Array<{
    backend: string;
    pid?: number;
    busy: boolean;
    standby?: boolean;
    startedAt: number;
    rssBytes?: number;
  }>;
}

export async function warmHealth(origin: string): Promise<HealthWarm> {
  const h = (await (await fetch(`${origin}/health`)).json()) as { warm: HealthWarm };
  return h.warm;
}

/**
 * Wait until `backend` has a standby up for `readyMs` at least (started and past the CLI's own
 * start-up: gemini, codex and qwen are listed once initialized, claude once spawned). False after `timeoutMs`.
 */
export async function standbyReady(
  origin: string,
  backend: string,
  readyMs: number,
  timeoutMs = 90_000,
): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  for (let i = 0; i < 10_000 && Date.now() < end; i++) {
    const w = await warmHealth(origin);
    if (w.list.some((p) => p.backend === backend && p.standby && Date.now() - p.startedAt >= readyMs)) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

/** A standby of `backend` listed now: its pid and resident memory (the bridge's account). */
export async function standbyOf(
  origin: string,
  backend: string,
): Promise<{ pid: number; rssBytes: number } | undefined> {
  const w = (await warmHealth(origin)).list.find((p) => p.backend === backend && p.standby && p.pid);
  return w ? { pid: w.pid!, rssBytes: w.rssBytes ?? 0 } : undefined;
}

/** CPU time (user + system, ms) every process in the group led by `leader` has used so far, from /proc (children it waited for included). */
export function groupCpuMs(leader: number): number {
  const tick = 10;
  let total = 0;
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(f[2]) !== leader) continue;
      // utime, stime, cutime, cstime (fields 14-17 of /proc/<pid>/stat), in clock ticks of 10 ms.
      total += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * tick;
    } catch {
      /* gone */
    }
  }
  return total;
}

/** `clawbridge_warm_events_total` of one backend, by event. */
export async function warmEvents(origin: string, backend: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const out: Record<string, number> = {};
  const re = /^clawbridge_warm_events_total\{([^}]*)\} ([0-9.e+]+)$/gm;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (labels.backend === backend && labels.event) out[labels.event] = Number(m[2]);
  }
  return out;
}

interface ProcStat {
  pid: number;
  ppid: number;
  pgid: number;
  rss: number;
  comm: string;
}

function procStats(): ProcStat[] {
  const out: ProcStat[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const statm = readFileSync(`/proc/${name}/statm`, "utf8").split(" ");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      out.push({ pid: Number(name), ppid: Number(f[1]), pgid: Number(f[2]), rss: Number(statm[1]) * 4096, comm });
    } catch {
      /* gone */
    }
  }
  return out;
}

/**
 * Samples, every `everyMs`, the resident memory of the process groups the bridge started (its
 * CLIs, each in a group of its own), in all and of the warm ones only (the groups led by a pid the
 * bridge's `/health` lists, polled every `healthEveryMs`). A child that is a fork of its parent
 * not yet running another program (same name, executable and command line) holds its parent's
 * pages copy-on-write: it is counted once (`maxWarm`) — and also as the plain sum (`maxWarmRaw`).
 */
export class MemorySampler {
  maxWarm = 0;
  /** The plain sum of every warm process's RSS, forks before their exec included. */
  maxWarmRaw = 0;
  /** The warm groups' sizes at the highest sample. */
  atMaxWarm = "";
  maxAll = 0;
  samples = 0;
  private warmLeaders = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  private healthTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly bridgePid: number,
    private readonly origin: string,
    private readonly everyMs = 100,
    private readonly healthEveryMs = 300,
  ) {}

  start(): void {
    const poll = async () => {
      try {
        const w = await warmHealth(this.origin);
        this.warmLeaders = new Set(w.list.flatMap((p) => (p.pid ? [p.pid] : [])));
      } catch {
        /* the bridge is busy or gone */
      }
    };
    void poll();
    this.healthTimer = setInterval(() => void poll(), this.healthEveryMs);
    this.timer = setInterval(() => this.sample(), this.everyMs);
  }

  sample(): void {
    const all = procStats();
    const children = new Map<number, number[]>();
    for (const p of all) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p.pid]);
    // The bridge's descendants (a CLI's helpers included), grouped by process group.
    const mine = new Set<number>();
    const todo = [...(children.get(this.bridgePid) ?? [])];
    for (let i = 0; i < todo.length && i < 10_000; i++) {
      const pid = todo[i]!;
      mine.add(pid);
      todo.push(...(children.get(pid) ?? []));
    }
    const groups = new Set(all.filter((p) => mine.has(p.pid)).map((p) => p.pgid));
    groups.delete(this.bridgePid);
    let warm = 0;
    let warmRaw = 0;
    let total = 0;
    const byGroup = new Map<number, ProcStat[]>();
    const byPid = new Map(all.map((p) => [p.pid, p]));
    for (const p of all) {
      if (!groups.has(p.pgid)) continue;
      let fork = false;
      if (p.pid !== p.pgid && byPid.get(p.ppid)?.comm === p.comm) {
        // Looked at again now: a fork may have run its program since its first reading (then its
        // memory is read anew, as the bridge reads it: after this check).
        const program = programOf(p.pid);
        fork = program !== undefined && program === programOf(p.ppid);
        if (!fork) p.rss = pidRss(p.pid) ?? 0;
      }
      total += fork ? 0 : p.rss;
      if (this.warmLeaders.has(p.pgid)) {
        warmRaw += p.rss;
        if (fork) continue;
        warm += p.rss;
        byGroup.set(p.pgid, [...(byGroup.get(p.pgid) ?? []), p]);
      }
    }
    this.maxWarmRaw = Math.max(this.maxWarmRaw, warmRaw);
    if (warm > this.maxWarm)
      this.atMaxWarm = [...byGroup.values()]
        .map((ps) => {
          const mb = (n: number) => Math.round(n / 1048576);
          const parts = ps.map((p) => `${p.comm} ${mb(p.rss)}`).join(", ");
          return `${mb(ps.reduce((n, p) => n + p.rss, 0))} MB${ps.length > 1 ? ` (${parts})` : ""}`;
        })
        .join(" + ");
    this.maxWarm = Math.max(this.maxWarm, warm);
    this.maxAll = Math.max(this.maxAll, total);
    this.samples++;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.healthTimer) clearInterval(this.healthTimer);
  }
}
