/**
 * Shared parts of the stream-json CLI backends (Claude Code, Gemini CLI): the per-conversation
 * working directory, and one driver that runs a CLI turn, parses its JSON lines and turns the way
 * the process ended (timeout, abort, spawn failure) into bridge errors. The common option keys are
 * in ./options.ts.
 * The CLI-specific mapping of events lives in each backend.
 *
 * A cold turn ends on the CLI's own end-of-turn event, not on the process's exit (issue 34): a CLI
 * takes ~40 ms after its `result` line (Claude Code, Qwen Code), `result` (Gemini CLI),
 * `turn.completed` (Codex) or last `step_finish` (OpenCode) to exit, and the person would wait for
 * that. When the mapper says the event settled the turn with an answer (`settled()`), `done` goes
 * out at once; the process is still reaped — stdout read to its end, the exit waited for (bounded,
 * then the group ended), the exit code logged — before the generator returns, so the conversation's
 * next turn (its queue slot is released only then) never meets the previous process. Only a
 * SUCCESSFUL end settles a turn: every error (an error result, no result, a lost session, a limit
 * printed on stderr) still waits for the exit, since its wording and class come from the exit code
 * and the whole stderr (Gemini's exit 144 after a stream-json error, a limit only on stderr + exit 1).
 * No success today depends on the exit code: the end-of-turn event decides (docs/CLI_FORMATS.md).
 */
import { childLogger } from "../../core/log/logger.js";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import { TurnDeadline } from "../../core/util/cancel.js";
import { CliProcess, type ProcessEnd } from "../../core/util/process.js";
import { CliBinary } from "./resolve.js";
import type { BackendDeps } from "../module.js";
import { conversationWorkDir } from "../../core/util/workdir.js";
import type { Backend, BackendEvent, BackendHealth, DiscoveredModel, TurnInput } from "../contract/backend.js";

/**
 * The working directory of this turn's conversation, created if missing. Both Claude Code and
 * Gemini CLI tie their sessions to the directory they ran in, so it must be stable per conversation.
 */
export function conversationCwd(turn: TurnInput, dataDir: string, fixed?: string): string {
  const dir = fixed ?? turn.session.cwd ?? conversationWorkDir(dataDir, turn.session.key);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/** The last few meaningful stderr lines, for error messages (no stack frames, no colour codes). */
export function stderrTail(stderr: string, lines = 4, max = 600): string {
  return (
    stderr
      // eslint-disable-next-line no-control-regex
      .replace(/\x1b\[[0-9;]*m/g, "")
      .split("\n")
      .map((l) => l.trim())
      .filter(
        (l) =>
          l &&
          !/^at\s/.test(l) &&
          !/^[{}[\]]+,?$/.test(l) &&
          !/^\[STARTUP\]/.test(l) &&
          !/256-color|Ripgrep is not available/.test(l),
      )
      .slice(-lines)
      .join(" | ")
      .slice(0, max)
  );
}

/** How long a CLI may keep running after closing stdout before it is terminated. */
const LINGER_MS = 5000;

function running(proc: CliProcess): boolean {
  return proc.child.exitCode === null && proc.child.signalCode === null;
}

/** What a backend supplies to `runCliTurn`. */
export interface CliTurnMapper {
  /** One parsed JSON line → bridge events (text, reasoning, tool_activity, session). Must not emit done/error. */
  onEvent(ev: Record<string, unknown>): BackendEvent[];
  /** The process ended on its own (reason "exit"): decide the final events, ending with done or error. */
  finish(end: ProcessEnd): BackendEvent[];
  /**
   * Whether the line just mapped was the CLI's own end of a turn that SUCCEEDED, after which
   * nothing it prints or its exit can change the answer: the driver then ends the turn with
   * `finish` at once (exit code 0, the stderr so far) and reaps the process afterwards. Say no for
   * every error (they wait for the exit and the whole stderr). Without it, the turn ends on exit.
   */
  settled?(): boolean;
}

export interface CliTurnSpec {
  label: string;
  bin: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  stdin: string;
  /** The turn's cancellation (client gone, shutdown, or the pipeline's turn deadline: a `TurnDeadline` reason). */
  signal: AbortSignal;
  killGraceSeconds: number;
  logger: Logger;
  /** Called with the pid right after spawning (tests check the process is gone afterwards). */
  onSpawn?: (pid: number | undefined) => void;
}

/**
 * Run one CLI turn: spawn (argument array, prompt on stdin, own process group), map every JSON
 * line, and end with exactly one done or error event. The process is always terminated and reaped,
 * also when the consumer stops iterating early.
 */
export async function* runCliTurn(spec: CliTurnSpec, mapper: CliTurnMapper): AsyncGenerator<BackendEvent> {
  const proc = new CliProcess({
    command: spec.bin,
    args: spec.args,
    env: spec.env,
    cwd: spec.cwd,
    stdin: spec.stdin,
    signal: spec.signal,
    killGraceMs: spec.killGraceSeconds * 1000,
    label: spec.label,
  });
  spec.onSpawn?.(proc.pid);
  const log = childLogger(spec.logger, { cli: spec.label, pid: proc.pid });
  // Long values (the bootstrap) are not logged: they can hold a user's personal context.
  const shownArgs = spec.args.map((a) => (a.length > 120 ? `<${a.length} chars>` : a));
  log.debug({ args: shownArgs, cwd: spec.cwd, promptChars: spec.stdin.length }, "cli started");
  const lines = proc.lines();
  let stdoutClosed = false;
  /** The CLI's end-of-turn event settled the turn: its answer has ended; the process is reaped after. */
  let answered = false;
  try {
    for (;;) {
      const next = await lines.next();
      if (next.done) break;
      const ev = jsonLine(next.value, log);
      if (!ev) continue;
      if (spec.signal.aborted) break;
      for (const out of mapper.onEvent(ev)) yield out;
      if (mapper.settled?.()) {
        const final = mapper.finish({ code: 0, signal: null, reason: "exit", stderr: proc.stderrSince(0) });
        if (final.at(-1)?.type === "done") {
          answered = true;
          log.debug("cli ended its turn; the process is reaped after the answer");
          for (const out of final) yield out;
          return;
        }
      }
    }
    stdoutClosed = !spec.signal.aborted;
  } finally {
    // Answered: the rest of the process's life, bounded, also when the consumer stopped at `done`.
    if (answered) await reapAnswered(proc, lines, mapper, log);
    else {
      await lines.return(undefined);
      // The consumer stopped early, or the turn was aborted: never leave the process group behind,
      // also when its leader has exited and a child of it still holds stdout.
      if (!stdoutClosed) await proc.terminate("aborted");
    }
  }
  // stdout is closed: the CLI is finishing. Give it a moment to exit on its own, then end it.
  let lingered = false;
  if (running(proc)) {
    if (!(await exitsWithin(proc, LINGER_MS))) {
      lingered = true;
      log.debug("cli closed stdout but did not exit; terminating it");
      await proc.terminate("aborted");
    }
  }
  const end = await proc.wait();
  if (lingered && end.reason === "aborted" && !spec.signal.aborted) end.reason = "exit";
  log.debug({ code: end.code, signal: end.signal, reason: end.reason }, "cli ended");
  const reason: unknown = spec.signal.reason;
  if (spec.signal.aborted && reason instanceof TurnDeadline) {
    yield {
      type: "error",
      error: {
        code: "backend_timeout",
        message: `${spec.label} did not finish within ${reason.seconds}s and was stopped`,
        status: 504,
        retryable: true,
      },
    };
    return;
  }
  if (end.reason === "aborted" || spec.signal.aborted) {
    yield { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
    return;
  }
  if (end.reason === "spawn_error") {
    yield {
      type: "error",
      error: {
        code: "backend_unavailable",
        message: `cannot start ${spec.label} (${spec.bin}): ${end.spawnError?.message ?? "spawn failed"}`,
        status: 503,
      },
    };
    return;
  }
  const final = mapper.finish(end);
  for (const ev of final) yield ev;
}

/** One stdout line as a JSON object, or undefined (blank, not JSON, not an object). */
function jsonLine(line: string, log: Logger): Record<string, unknown> | undefined {
  const trimmed = line.trim();
  if (!trimmed) return undefined;
  let ev: unknown;
  try {
    ev = JSON.parse(trimmed);
  } catch {
    log.debug({ line: trimmed.slice(0, 200) }, "cli printed a non-JSON line");
    return undefined;
  }
  return ev && typeof ev === "object" && !Array.isArray(ev) ? (ev as Record<string, unknown>) : undefined;
}

/**
 * A CLI that has answered (its end-of-turn event settled the turn): read the rest of stdout (a CLI
 * blocked on a full pipe would never exit; what it maps to is logged, the answer has ended), give
 * it `LINGER_MS` to exit, then end its group, and log how it ended. A non-zero exit after a
 * successful end changes nothing the person got: it is logged for whoever looks.
 */
async function reapAnswered(
  proc: CliProcess,
  rest: AsyncGenerator<string>,
  mapper: CliTurnMapper,
  log: Logger,
): Promise<void> {
  const drained = (async () => {
    for await (const line of rest) {
      const ev = jsonLine(line, log);
      const late = ev ? mapper.onEvent(ev) : [];
      if (late.length)
        log.debug(
          { events: late.map((e) => e.type) },
          "cli printed events after its end of turn; not part of the answer",
        );
    }
  })();
  if (!(await exitsWithin(proc, LINGER_MS))) {
    log.debug("cli answered but did not exit; terminating it");
    await proc.terminate("aborted");
  }
  await drained;
  const end = await proc.wait();
  if (end.reason === "exit" && end.code !== 0)
    log.warn(
      { code: end.code, signal: end.signal, stderr: stderrTail(end.stderr) },
      "cli exited non-zero after answering (the answer stands: its end-of-turn event said it succeeded)",
    );
  else log.debug({ code: end.code, signal: end.signal, reason: end.reason }, "cli ended");
}

/** Whether the process exits within `ms` (it is left running either way). */
async function exitsWithin(proc: CliProcess, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const exited = await Promise.race([
    proc.wait().then(() => true),
    new Promise<false>((r) => {
      timer = setTimeout(() => r(false), ms);
    }),
  ]);
  clearTimeout(timer);
  return exited;
}

/** A short description of a tool's input for `tool_activity.detail` (a path, a pattern, a URL...). */
export function toolDetail(input: unknown): string | undefined {
  if (!input || typeof input !== "object") return undefined;
  const o = input as Record<string, unknown>;
  for (const k of [
    "file_path",
    "path",
    "absolute_path",
    "dir_path",
    "pattern",
    "url",
    "query",
    "command",
    "description",
    "prompt",
  ]) {
    const v = o[k];
    if (typeof v === "string" && v) return v.length > 200 ? `${v.slice(0, 197)}...` : v;
  }
  return undefined;
}

/** Text separator between two text blocks of different steps so words do not run together. */
export function joinSeparator(previous: string, next: string): string {
  if (!previous || /\s$/.test(previous) || /^\s/.test(next)) return "";
  return "\n\n";
}

/**
 * A private per-turn file under `<dataDir>/tmp` (mode 0600) for text too long or too personal for
 * argv (argv is capped at 128 KiB per argument and visible in `ps`). `remove()` deletes it.
 */
export function writeTurnFile(
  dataDir: string,
  prefix: string,
  name: string,
  content: string,
): { file: string; remove: () => void } {
  const base = path.join(dataDir, "tmp");
  mkdirSync(base, { recursive: true, mode: 0o700 });
  const dir = mkdtempSync(path.join(base, prefix));
  const file = path.join(dir, name);
  writeFileSync(file, content, { mode: 0o600 });
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * What every CLI backend shares: the binary (found once, `--version` health), its environment, and
 * the checks before a turn (binary missing → `backend_unavailable`, already aborted → `aborted`).
 * A backend implements `runTurn` with the CLI's own arguments and event mapping.
 */
export abstract class CliBackendBase<
  O extends { command: string; env: Record<string, string>; timeoutSeconds: number; killGraceSeconds: number },
> implements Backend
{
  abstract readonly type: string;
  /** Pid of the last CLI started (tests and diagnostics; not reliable with parallel turns). */
  lastPid: number | undefined;
  private cliCache: CliBinary | undefined;

  constructor(
    readonly name: string,
    protected readonly opts: O,
    protected readonly deps: BackendDeps,
    private readonly binary: { places: string[]; label: string; npmPackage: string },
  ) {}

  /** The turn deadline the pipeline enforces (`timeoutSeconds`). */
  get timeoutSeconds(): number {
    return this.opts.timeoutSeconds;
  }

  protected get cli(): CliBinary {
    return (this.cliCache ??= new CliBinary({
      command: this.opts.command,
      env: this.opts.env,
      ...this.binary,
      backendName: this.name,
    }));
  }

  protected env(): NodeJS.ProcessEnv {
    return this.cli.env();
  }

  health(): Promise<BackendHealth> {
    return this.cli.health();
  }

  /** Models a CLI documents (it lists none itself): offered when its binary is installed. */
  protected async documentedModels(models: readonly DiscoveredModel[]): Promise<DiscoveredModel[]> {
    const { path: bin, tried } = await this.cli.resolve();
    if (!bin) throw new Error(`not found (looked for ${tried.join(", ")})`);
    return models.map((m) => ({ ...m }));
  }

  async *run(turn: TurnInput): AsyncGenerator<BackendEvent> {
    const { path: bin, tried } = await this.cli.resolve();
    if (!bin) {
      yield this.cli.missing(tried);
      return;
    }
    if (turn.signal.aborted) {
      yield { type: "error", error: { code: "aborted", message: "the turn was cancelled", status: 499 } };
      return;
    }
    yield* this.runTurn(turn, bin);
  }

  /** Run one CLI turn with this backend's limits, logger and pid bookkeeping (prompt on stdin). */
  protected cliTurn(
    turn: TurnInput,
    spec: Pick<CliTurnSpec, "label" | "bin" | "args" | "env" | "cwd"> & { stdin?: string; logger?: Logger },
    mapper: CliTurnMapper,
  ): AsyncGenerator<BackendEvent> {
    return runCliTurn(
      {
        stdin: turn.prompt.text,
        logger: childLogger(this.deps.logger, { backend: this.name }),
        ...spec,
        signal: turn.signal,
        killGraceSeconds: this.opts.killGraceSeconds,
        onSpawn: (pid) => (this.lastPid = pid),
      },
      mapper,
    );
  }

  /** One turn with the resolved binary. */
  protected abstract runTurn(turn: TurnInput, bin: string): AsyncGenerator<BackendEvent>;
}
