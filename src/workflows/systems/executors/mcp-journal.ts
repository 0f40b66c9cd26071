/**
 * The `mcp` kind's call journal: a tool call that was sent and has not ended is written down in
 * the run's directory (`<dataDir>/runs/<runId>/mcp-calls/<step>.json`) before the request goes
 * out, and removed once the call has ended and its stdio server is reaped (whatever the outcome).
 * A file still there when the step is attempted again means a bridge stopped — was killed, crashed,
 * lost power — between sending the call and getting its answer: the call may have done its work
 * (only the answer was lost), may have been cut off half-way, or, if its server somehow survived,
 * may still be running.
 *
 * Such a step is not called again on its own: the attempt fails with a message that says when the
 * call was sent and that it may have done its work. For a tool with side effects (a payment, a
 * message sent, a deletion) doing it twice is the worse mistake, and only the person can look at
 * what happened; it is what an experienced user expects of a step with side effects: nothing
 * happens twice without being asked. The journal entry goes with that failure, so resuming the run once more — a
 * deliberate second decision, taken after reading the message — calls the tool again. Waiting was
 * not chosen: the server is gone by then (the orphan watcher ends it within seconds of the bridge's
 * death, the start-up reaper before the next bridge serves anything), so there is nothing to wait
 * for, and the unknown outcome stays unknown. Should the recorded server still run (same pid and
 * start time: its run record was lost), the entry is kept and the step fails naming its pid, so no
 * second call runs beside it however often the run is resumed.
 *
 * A call stopped by the bridge itself (timeout, pause, cancel, an orderly shutdown) has ended and
 * its server is reaped before the attempt ends, so it leaves no entry: those are retried or resumed
 * as every other kind is. The journal is kept only when the runner says which step is running
 * (`step` in the context); read-only lookups (`describeMcpTool`) have none.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { procStat } from "../../../core/util/run-records.js";
import { ExecError, type ExecContext } from "../step-executor.js";
import type { ServerIdentity } from "./mcp-stdio.js";

/** What an entry holds. */
interface CallEntry {
  tool: string;
  /** The server as named in messages (no secrets). */
  server: string;
  /** Epoch milliseconds when the call was sent. */
  sentAt: number;
  /** The stdio server that got it (pid = its process group, kernel start time). */
  pid?: number;
  start?: string;
  /** The bridge that sent it. */
  bridgePid: number;
}

export class CallJournal {
  private constructor(
    readonly file: string,
    private readonly step: string,
  ) {}

  /** The journal of this attempt's step, or undefined when the context names no step. */
  static of(ctx: ExecContext): CallJournal | undefined {
    if (!ctx.step) return undefined;
    return new CallJournal(path.join(ctx.workDir(), "mcp-calls", `${encodeURIComponent(ctx.step)}.json`), ctx.step);
  }

  /**
   * Before anything is started: an entry left by a call that never ended makes the attempt fail
   * (not retryable). The entry is consumed unless its server still runs, so a later resume calls.
   */
  refuseIfInterrupted(what: string): void {
    let text: string;
    try {
      text = readFileSync(this.file, "utf8");
    } catch {
      return; // none: the usual case
    }
    let e: Partial<CallEntry> = {};
    try {
      e = JSON.parse(text) as Partial<CallEntry>;
    } catch {
      /* a torn write: still a call that may have been sent */
    }
    const when = typeof e.sentAt === "number" ? new Date(e.sentAt).toISOString() : "an unknown time";
    const sent = `${what} was called at ${when} (step ${this.step}) by a bridge that stopped before the answer came`;
    if (e.pid && e.start && serverRuns(e.pid, e.start)) {
      throw new ExecError(
        "invalid",
        `${sent}, and its server (pid ${e.pid}) is still running: it is not called a second time beside it. ` +
          `End that process (or wait for it), then resume the run to call the tool again.`,
      );
    }
    rmSync(this.file, { force: true });
    throw new ExecError(
      "invalid",
      `${sent}: the call may have done its work, so it is not called again on its own. ` +
        `Check what it did; resume the run again to call it once more, or cancel the run.`,
    );
  }

  /** Write the entry just before the call is sent. False (and nothing written) when the disk refuses. */
  sent(entry: { tool: string; server: string; identity?: ServerIdentity }): boolean {
    const e: CallEntry = {
      tool: entry.tool,
      server: entry.server,
      sentAt: Date.now(),
      ...(entry.identity ? { pid: entry.identity.pid, start: entry.identity.start } : {}),
      bridgePid: process.pid,
    };
    try {
      mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
      writeFileSync(this.file, JSON.stringify(e), { mode: 0o600 });
      return true;
    } catch {
      return false;
    }
  }

  /** The call has ended and its server is reaped: remove the entry. */
  ended(): void {
    rmSync(this.file, { force: true });
  }
}

/** The recorded server process still runs (same pid and start time, not a zombie). */
function serverRuns(pid: number, start: string): boolean {
  const s = procStat(pid);
  return !!s && s.state !== "Z" && String(s.start) === start;
}
