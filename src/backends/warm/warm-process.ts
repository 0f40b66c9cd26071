/**
 * A warm CLI process speaking JSON lines on stdio (Claude Code / Qwen Code stream-json, JSON-RPC
 * of ACP and Codex's app-server): stdin kept open for messages, every stdout line parsed once and
 * handed to whoever listens now (the turn being served, or a JSON-RPC client). The process is a
 * `CliProcess`: own process group, recorded for the orphan watcher and the start-up reaper, listed
 * (as warm) by `liveProcesses()`.
 */
import { childLogger } from "../../core/log/logger.js";
import type { Logger } from "pino";
import { CliProcess, type ProcessEnd } from "../../core/util/process.js";
import type { WarmWorker } from "./pool.js";

export interface WarmProcessSpec {
  label: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  killGraceMs: number;
  logger: Logger;
  /** Called once after the process ended (remove its private files...). */
  onEnd?: () => void;
}

/** What a listener receives: one parsed stdout object, or the end of the process. */
export type WarmMessage = { kind: "message"; message: Record<string, unknown> } | { kind: "end"; end: ProcessEnd };

/** How long a closing CLI may take to exit after its stdin was closed, before its group is ended. */
const CLOSE_POLITELY_MS = 500;

export class WarmProcess implements WarmWorker {
  readonly proc: CliProcess;
  readonly ended: Promise<void>;
  readonly log: Logger;
  /** A turn left it in a state not to reuse (an interrupt that did not finish). */
  broken = false;
  private listener: ((m: WarmMessage) => void) | undefined;
  private endInfo: ProcessEnd | undefined;
  private stderrMark = 0;

  constructor(readonly spec: WarmProcessSpec) {
    this.proc = new CliProcess({
      command: spec.command,
      args: spec.args,
      env: spec.env,
      cwd: spec.cwd,
      keepStdin: true,
      killGraceMs: spec.killGraceMs,
      label: spec.label,
      warm: true,
    });
    this.log = childLogger(spec.logger, { cli: spec.label, pid: this.proc.pid, warm: true });
    this.ended = this.pump();
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  get usable(): boolean {
    return !this.broken && this.proc.running;
  }

  /** How the process ended, once it has. */
  get end(): ProcessEnd | undefined {
    return this.endInfo;
  }

  /** Route every message (and the end) to `fn` from now on; undefined: drop them. */
  listen(fn: ((m: WarmMessage) => void) | undefined): void {
    this.listener = fn;
    if (fn && this.endInfo) fn({ kind: "end", end: this.endInfo });
  }

  /** Write one JSON message as a line. False when the process cannot take input any more. */
  send(message: unknown): boolean {
    return this.proc.write(`${JSON.stringify(message)}\n`);
  }

  /** Mark the start of a turn for `stderrOfTurn()`. */
  markTurn(): void {
    this.stderrMark = this.proc.stderrTotal;
  }

  /** stderr written since `markTurn()` (within the kept tail). */
  stderrOfTurn(): string {
    return this.proc.stderrSince(this.stderrMark);
  }

  private async pump(): Promise<void> {
    try {
      for await (const line of this.proc.lines()) {
        const trimmed = line.trim();
        if (!trimmed) continue;
        let msg: unknown;
        try {
          msg = JSON.parse(trimmed);
        } catch {
          this.log.debug({ line: trimmed.slice(0, 200) }, "warm cli printed a non-JSON line");
          continue;
        }
        if (msg && typeof msg === "object" && !Array.isArray(msg))
          this.listener?.({ kind: "message", message: msg as Record<string, unknown> });
      }
    } catch (err) {
      this.log.debug({ err }, "warm cli stdout failed");
    }
    // stdout closed: the process is ending (or has ended) — make sure of it, then tell.
    if (this.proc.running) await this.proc.terminate("aborted");
    const end = await this.proc.wait();
    this.endInfo = end;
    this.log.debug({ code: end.code, signal: end.signal, reason: end.reason }, "warm cli ended");
    try {
      this.spec.onEnd?.();
    } catch {
      /* cleanup is best effort */
    }
    this.listener?.({ kind: "end", end });
  }

  /** Close stdin (a CLI that reads to end-of-input exits), then end the group if it lingers. */
  async close(): Promise<void> {
    if (this.proc.running) {
      this.proc.endInput();
      let timer: NodeJS.Timeout | undefined;
      const exited = await Promise.race([
        this.ended.then(() => true),
        new Promise<false>((r) => {
          timer = setTimeout(() => r(false), CLOSE_POLITELY_MS);
        }),
      ]);
      if (timer) clearTimeout(timer);
      if (!exited) await this.proc.terminate("aborted");
    }
    await this.ended;
  }

  /** End the process group now (an interrupt that was not obeyed, a crash mid-turn). */
  async kill(): Promise<void> {
    this.broken = true;
    await this.proc.terminate("aborted");
    await this.ended;
  }
}

/**
 * The messages of one turn as an async sequence: a listener pushes, the turn pulls with a time
 * limit. Bounded: a CLI that floods without the turn reading is capped (oldest kept, the rest
 * counted as dropped — a turn reads as fast as it can, so this only guards against a runaway).
 */
export class Inbox<T extends { kind: string } = WarmMessage> {
  private readonly items: T[] = [];
  private waiter: (() => void) | undefined;
  dropped = 0;

  constructor(private readonly cap = 100_000) {}

  push = (m: T): void => {
    if (this.items.length >= this.cap && m.kind === "message") {
      this.dropped++;
      return;
    }
    this.items.push(m);
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  };

  /** The next message, or "timeout" after `ms`, or "aborted" once `signal` aborts (checked first). */
  async next(signal: AbortSignal | undefined, ms?: number): Promise<T | "timeout" | "aborted"> {
    for (;;) {
      const item = this.items.shift();
      if (item) return item;
      if (signal?.aborted) return "aborted";
      let timer: NodeJS.Timeout | undefined;
      let onAbort: (() => void) | undefined;
      const outcome = await new Promise<"item" | "timeout" | "aborted">((resolve) => {
        this.waiter = () => resolve("item");
        if (ms !== undefined) timer = setTimeout(() => resolve("timeout"), ms);
        if (signal) {
          onAbort = () => resolve("aborted");
          signal.addEventListener("abort", onAbort, { once: true });
        }
      });
      this.waiter = undefined;
      if (timer) clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
      if (outcome !== "item" && this.items.length === 0) return outcome;
    }
  }
}
