/**
 * Warm mode of the Gemini CLI backend: one `gemini --acp` process per conversation (a `WarmPool`
 * keyed by the conversation), driven over the Agent Client Protocol by `src/warm/acp.ts`.
 *
 * - A process serves its conversation's next turn while the bootstrap, the model, the working
 *   directory and the prompt mode it was started with are unchanged (GEMINI_SYSTEM_MD is read
 *   from a per-process file, GEMINI.md when a session opens). Otherwise a new process replaces it
 *   and `session/load`s the conversation's session: the bootstrap reaches the model whenever it
 *   changes, and on every turn it is in the system instruction (`replace`) or the first user
 *   content (`context`) as the cold path gives it.
 * - The ACP session id is gemini's own session id: the cold `--resume` accepts it, so warm and
 *   cold turns can alternate on one conversation.
 * - gemini 0.61.0's `session/load` first starts a recording file named
 *   `session-<current minute>-<id8>.jsonl`; when the session's own file has that very name (it
 *   was written in the same minute), the new header clobbers its history and the load fails with
 *   "No previous sessions found". `guardSessionFile` renames such a file first.
 * - That recording is left behind holding only gemini's `<session_context>`: not resumable, and
 *   gemini's start-up session cleanup (`general.sessionRetention`) deletes a non-resumable file
 *   TOGETHER WITH every file of the same short id — the session's real history included — the
 *   next time a gemini on another session starts in that folder (a cold `--resume` leaves such a
 *   file too, harmless while every gemini there is on the same session). `removeLoadLeftovers`
 *   deletes them before a warm process starts and after each load.
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, unlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Logger } from "pino";
import { acpPermissionPolicy, acpTurn, AcpWorker, type AcpFailure } from "../warm/acp.js";
import type { WarmOptions } from "../warm/options.js";
import { WarmPool } from "../warm/pool.js";
import { runWarmTurn } from "../warm/turn.js";
import type { BackendError, BackendEvent, TurnInput } from "./types.js";

export interface GeminiWarmStart {
  bin: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** A private file the process reads for its whole life (GEMINI_SYSTEM_MD), removed when it ends. */
  file?: { remove(): void };
}

export interface GeminiWarmDeps {
  name: string;
  warm: WarmOptions;
  killGraceSeconds: number;
  approvalMode: "default" | "auto_edit" | "yolo" | "plan";
  logger: Logger;
  onWorker(pid: number | undefined): void;
  /** Map an ACP error answer to the turn's error. */
  error(failure: AcpFailure, stderr: string, resuming: boolean): BackendError;
}

/** How long `initialize`, `session/new` and `session/load` may take (gemini starts in 2-4 s). */
const SETUP_TIMEOUT_MS = 60_000;

export class GeminiWarm {
  readonly pool: WarmPool<AcpWorker>;

  constructor(private readonly d: GeminiWarmDeps) {
    this.pool = new WarmPool(d.name, d.warm, d.logger);
  }

  /**
   * One warm turn. `fingerprintOf`: what the process is started with besides the session;
   * `start` (only when a new process is needed) builds its arguments and files; `cold` runs the
   * same turn with a process of its own.
   */
  run(turn: TurnInput, fingerprintOf: unknown[], start: () => GeminiWarmStart, cold: () => AsyncGenerator<BackendEvent>): AsyncGenerator<BackendEvent> {
    const fingerprint = createHash("sha256").update(JSON.stringify(fingerprintOf)).digest("hex");
    const sessionId = turn.session.backendSessionId;
    let home: string | undefined;
    let cwd = "";
    const permission = acpPermissionPolicy(this.d.approvalMode === "yolo" ? "all" : this.d.approvalMode === "auto_edit" ? "edits" : "read-only");
    return runWarmTurn<AcpWorker>({
      pool: this.pool,
      key: turn.session.key,
      signal: turn.signal,
      // A process holding another session of the conversation can open this one (ACP sessions are per process).
      fits: (w) => w.fingerprint === fingerprint,
      start: async () => {
        const s = start();
        // Before gemini's own start-up cleanup runs in the new process.
        removeLoadLeftovers(s.env.GEMINI_CLI_HOME || s.env.HOME || os.homedir(), s.cwd, this.d.logger);
        return new AcpWorker({
          label: "gemini",
          command: s.bin,
          args: s.args,
          env: s.env,
          cwd: s.cwd,
          killGraceMs: this.d.killGraceSeconds * 1000,
          logger: this.d.logger,
          onEnd: () => s.file?.remove(),
          fingerprint,
          permission,
        });
      },
      drive: (lease) => {
        const env = lease.worker.spec.env;
        home = env.GEMINI_CLI_HOME || env.HOME || os.homedir();
        cwd = lease.worker.spec.cwd;
        return acpTurn(lease, {
          label: "gemini",
          cwd,
          sessionId,
          text: turn.prompt.text,
          signal: turn.signal,
          interruptGraceMs: this.d.warm.interruptGraceSeconds * 1000,
          setupTimeoutMs: SETUP_TIMEOUT_MS,
          beforeLoad: (id) => guardSessionFile(home!, cwd, id, this.d.logger),
          afterLoad: () => removeLoadLeftovers(home!, cwd, this.d.logger),
          // A failed load still starts a recording under the dead id (only gemini's context): remove
          // it now, and again once that process (not reused) has ended, in case it wrote it later.
          loadFailed: (id) => {
            removeStubsOf(home!, cwd, id, this.d.logger);
            void lease.worker.ended.then(() => removeStubsOf(home!, cwd, id, this.d.logger));
          },
          error: (f, stderr) => this.d.error(f, stderr, !!sessionId),
          toolName: geminiToolName,
        });
      },
      cold,
      onWorker: (w) => this.d.onWorker(w.pid),
    });
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** gemini's tool call ids are `<tool name>-<ms>-<random>` (`read_file-1795568625652-5db0a`). */
export function geminiToolName(u: { toolCallId: string; kind?: string | null }): string {
  const m = /^([A-Za-z][\w.]*?)(?:[-_]\d{6,}.*)?$/.exec(u.toolCallId);
  return m?.[1] && m[1] !== u.toolCallId ? m[1] : String(u.kind ?? "tool");
}

/** `YYYY-MM-DDTHH-MM` of a time (UTC), as gemini names its session files. */
function minuteStamp(t: number): string {
  return new Date(t).toISOString().slice(0, 16).replace(/:/g, "-");
}

/** The chats folders gemini may keep this cwd's sessions in (the project's, else all). */
function chatDirs(home: string, cwd: string): string[] {
  const root = path.join(home, ".gemini", "tmp");
  if (!existsSync(root)) return [];
  let projects: string[];
  try {
    const map = JSON.parse(readFileSync(path.join(home, ".gemini", "projects.json"), "utf8"))?.projects ?? {};
    projects = typeof map[cwd] === "string" ? [map[cwd]] : readdirSync(root);
  } catch {
    projects = readdirSync(root);
  }
  return projects.map((p) => path.join(root, p, "chats")).filter((d) => existsSync(d));
}

const SESSION_FILE = /^session-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2})-([^-]+)\.jsonl$/;

/**
 * Rename the session's file when gemini would reuse its name for the recording it starts while
 * loading (same minute, see the top of this file). The new name keeps `session-` and `-<id8>.jsonl`,
 * so gemini (listing by content) and the cold `--resume` still find it. Best effort.
 */
export function guardSessionFile(home: string, cwd: string, sessionId: string, log?: Logger): void {
  try {
    const id8 = sessionId.slice(0, 8);
    const now = Date.now();
    const near = new Set([minuteStamp(now - 60_000), minuteStamp(now), minuteStamp(now + 60_000)]);
    for (const chats of chatDirs(home, cwd)) {
      for (const f of readdirSync(chats)) {
        const m = SESSION_FILE.exec(f);
        if (!m || m[2] !== id8 || !near.has(m[1]!)) continue;
        const to = `session-${m[1]}-w${Date.now().toString(36)}-${id8}.jsonl`;
        renameSync(path.join(chats, f), path.join(chats, to));
        log?.debug({ from: f, to }, "gemini session file renamed before session/load");
      }
    }
  } catch (err) {
    log?.debug({ err }, "could not check gemini's session files before session/load");
  }
}

/** True when a session file holds a message of the person (not only gemini's session context). */
/** Whether a gemini recording holds a turn of its own (not only gemini's session context): a session to resume. */
export function resumable(file: string): boolean {
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (!line.includes('"user"')) continue;
    try {
      const rec = JSON.parse(line);
      const msgs: unknown[] = Array.isArray(rec?.$set?.messages) ? rec.$set.messages : [rec];
      for (const m of msgs as { type?: string; content?: unknown }[]) {
        if (m?.type !== "user") continue;
        const text = JSON.stringify(m.content ?? "");
        if (!text.includes("<session_context>")) return true;
      }
    } catch {
      /* a torn line */
    }
  }
  return false;
}

/** Delete the recordings of session `sessionId` that hold only gemini's session context (no turn of its own). */
export function removeStubsOf(home: string, cwd: string, sessionId: string, log?: Logger): void {
  const id8 = sessionId.slice(0, 8);
  try {
    for (const chats of chatDirs(home, cwd)) {
      for (const f of readdirSync(chats)) {
        if (!f.startsWith("session-") || !f.endsWith(`-${id8}.jsonl`)) continue;
        const file = path.join(chats, f);
        if (resumable(file)) continue;
        unlinkSync(file);
        log?.debug({ file: f }, "removed the recording a failed session/load left");
      }
    }
  } catch (err) {
    log?.debug({ err }, "could not clean gemini's session files");
  }
}

/**
 * Delete the recordings holding only gemini's session context that share a short id with a real
 * session file (what `session/load`, and a cold `--resume`, leave behind): gemini's start-up
 * cleanup would delete the real file with them (see the top of this file). Files whose short id
 * has no other file are left to gemini.
 */
export function removeLoadLeftovers(home: string, cwd: string, log?: Logger): void {
  try {
    for (const chats of chatDirs(home, cwd)) {
      const byId = new Map<string, string[]>();
      for (const f of readdirSync(chats)) {
        const id8 = /^session-.*-([^-]+)\.jsonl$/.exec(f)?.[1];
        if (id8) byId.set(id8, [...(byId.get(id8) ?? []), f]);
      }
      for (const files of byId.values()) {
        if (files.length < 2) continue;
        const kept = files.filter((f) => resumable(path.join(chats, f)));
        if (kept.length === 0) continue;
        for (const f of files) {
          if (kept.includes(f)) continue;
          unlinkSync(path.join(chats, f));
          log?.debug({ file: f }, "removed a gemini recording holding only the session context");
        }
      }
    }
  } catch (err) {
    log?.debug({ err }, "could not clean gemini's session files");
  }
}
