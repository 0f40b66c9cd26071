/**
 * Warm mode of the Gemini CLI backend: one `gemini --acp` process per conversation (a `WarmPool`
 * keyed by the conversation), driven over the Agent Client Protocol by `src/backends/gemini-cli/acp.ts`.
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
 * - The client's tools (`tools: bridge`): each ACP session is opened with the bridge's MCP endpoint
 *   as an `http` entry of `mcpServers` (gemini advertises `mcpCapabilities.http`). gemini names
 *   them `mcp_openclaw_<tool>` for the model and asks `session/request_permission` before each
 *   call (an ACP entry cannot say `trust`): only calls of those names are allowed, everything else
 *   keeps the approval mode's policy. gemini gives an MCP call 10 minutes (its default; an ACP
 *   entry cannot set `timeout`), so the bridge gives a pending call up before that.
 * - Standbys (`GeminiStandby`, the pool's `warm.standby`): `gemini --acp` processes started and
 *   `initialize`d with the backend's options and model but for no conversation — in a folder of
 *   their own (`<dataDir>/work/standby`, or the fixed `cwd`), with a private, empty
 *   GEMINI_SYSTEM_MD in `replace` mode — taken by a conversation's turn without client tools. What
 *   differs per conversation reaches them when taken, because gemini reads it per ACP session, not
 *   per process: the working directory is `session/new`'s (or `session/load`'s) `cwd` (gemini
 *   builds each session's config, project and recordings from it), and the bootstrap is read when
 *   the session's chat starts (GEMINI_SYSTEM_MD, written into the standby's own file just before;
 *   GEMINI.md in the conversation's folder in `context` mode). So a standby also serves a
 *   conversation whose session is to be loaded, not only new ones.
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, unlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Logger } from "pino";
import type * as acp from "@agentclientprotocol/sdk";
import { CLIENT_TOOLS_SERVER, type ClientToolDef } from "../client-tools/types.js";
import { acpTurn } from "./acp.js";
import { acpPermissionPolicy, AcpWorker, type AcpFailure, type AcpPermissionPolicy } from "./acp-worker.js";
import { parkIn, warmTurnWithClientTools } from "../warm/client-tool-turns.js";
import type { WarmOptions } from "../warm/options.js";
import { WarmPool, type StandbyKind } from "../warm/pool.js";
import { runWarmTurn } from "../warm/warm-turn.js";
import type { WarmClientTools } from "../cli/stream-json-warm.js";
import type { BackendError, BackendEvent, TurnInput } from "../contract/backend.js";

export interface GeminiWarmStart {
  bin: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** A private file the process reads for its whole life (GEMINI_SYSTEM_MD), removed when it ends. */
  file?: { remove(): void };
}

/**
 * How the backend's standbys are made and given a conversation (see the top of this file). Passed
 * with a turn that could start on one (no client tools).
 */
export interface GeminiStandby {
  /** What the standbys share (the CLI, model, options, whether a system prompt file is read): hashed into the pool's kind. */
  kind: unknown[];
  /** A standby's start: arguments, env (with its own GEMINI_SYSTEM_MD file when `bootstrapFile` is set), files. */
  start(): GeminiWarmStart & { bootstrapFile?: string };
  /**
   * Give a taken standby the conversation: its bootstrap where gemini reads it when the session
   * opens (`bootstrapFile`: the standby's own GEMINI_SYSTEM_MD). False: this standby cannot serve it.
   */
  adopt(bootstrapFile: string | undefined): boolean;
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

/**
 * gemini 0.61's limit for one MCP call (`MCP_DEFAULT_TIMEOUT_MSEC`, 10 minutes, not reset by
 * progress notifications); an ACP `mcpServers` entry cannot raise it. A pending client tool call
 * is given up by the bridge this much earlier, so gemini never goes on alone with a timed-out call.
 */
const GEMINI_MCP_CALL_LIMIT_SECONDS = 600;
const GEMINI_MCP_CALL_MARGIN_SECONDS = 15;

/** How long a client tool call of a gemini turn may stay pending. */
export function geminiPendingTimeoutSeconds(configured: number): number {
  return Math.min(configured, GEMINI_MCP_CALL_LIMIT_SECONDS - GEMINI_MCP_CALL_MARGIN_SECONDS);
}

export class GeminiWarm {
  readonly pool: WarmPool<AcpWorker>;

  constructor(private readonly d: GeminiWarmDeps) {
    this.pool = new WarmPool(d.name, d.warm, d.logger);
  }

  /**
   * One warm turn. `fingerprintOf`: what the process is started with besides the session;
   * `start` (only when a new process is needed) builds its arguments and files; `cold` runs the
   * same turn with a process of its own. `ct`: the conversation's client tools, which the
   * process's sessions are given as an MCP server (then a turn may suspend on a call and be
   * resumed by the client's next request).
   */
  run(
    turn: TurnInput,
    cwd: string,
    fingerprintOf: unknown[],
    start: () => GeminiWarmStart,
    cold: () => AsyncGenerator<BackendEvent>,
    ct?: WarmClientTools,
    standby?: GeminiStandby,
  ): AsyncGenerator<BackendEvent> {
    // The MCP entry (endpoint and the conversation's token) is in the sessions the process opens.
    const fingerprint = createHash("sha256")
      .update(JSON.stringify([...fingerprintOf, ct ? [ct.entry.url, ct.session.token] : null]))
      .digest("hex");
    if (!ct) return this.turn(turn, cwd, fingerprint, start, cold, undefined, turn.prompt.text, standby);
    return warmTurnWithClientTools({
      session: ct.session,
      spec: ct.spec,
      backend: this.d.name,
      signal: turn.signal,
      continuing: !!turn.session.backendSessionId,
      text: turn.prompt.text,
      fresh: (text) => this.turn(turn, cwd, fingerprint, start, cold, ct, text ?? turn.prompt.text),
    });
  }

  private turn(
    turn: TurnInput,
    cwd: string,
    fingerprint: string,
    start: () => GeminiWarmStart,
    cold: () => AsyncGenerator<BackendEvent>,
    ct: WarmClientTools | undefined,
    text: string,
    standby?: GeminiStandby,
  ): AsyncGenerator<BackendEvent> {
    const sessionId = turn.session.backendSessionId;
    let home: string | undefined;
    const base = acpPermissionPolicy(
      this.d.approvalMode === "yolo" ? "all" : this.d.approvalMode === "auto_edit" ? "edits" : "read-only",
    );
    const permission = ct ? geminiClientToolsPermission(base, ct.spec.tools) : base;
    const mcpServers: acp.McpServer[] = ct ? [geminiMcpServer(ct.entry)] : [];
    return runWarmTurn<AcpWorker>({
      pool: this.pool,
      key: turn.session.key,
      signal: turn.signal,
      // A process holding another session of the conversation can open this one (ACP sessions are per process).
      fits: (w) => w.fingerprint === fingerprint,
      ...(standby && !ct ? { standby: this.standbyKind(standby, fingerprint, cwd) } : {}),
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
      drive: (lease, ctl) => {
        const env = lease.worker.spec.env;
        home = env.GEMINI_CLI_HOME || env.HOME || os.homedir();
        return acpTurn(
          lease,
          {
            label: "gemini",
            cwd,
            sessionId,
            text,
            ...(turn.images?.length ? { images: turn.images } : {}),
            interruptGraceMs: this.d.warm.interruptGraceSeconds * 1000,
            setupTimeoutMs: SETUP_TIMEOUT_MS,
            mcpServers,
            ...(ct ? { tools: ct.session } : {}),
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
          },
          ctl,
        );
      },
      cold,
      onWorker: (w) => this.d.onWorker(w.pid),
      // gemini keeps no response for a call its turn was cancelled on (the API refuses that history).
      ...(ct
        ? {
            onPark: parkIn<AcpWorker>(
              ct.session,
              this.d.name,
              geminiPendingTimeoutSeconds(ct.spec.pendingTimeoutSeconds),
            ),
            answerFirst: true,
          }
        : {}),
    });
  }

  /** The pool's view of this turn's standbys: their kind, how one starts, how the conversation takes one. */
  private standbyKind(sb: GeminiStandby, fingerprint: string, cwd: string): StandbyKind<AcpWorker> {
    const base = acpPermissionPolicy(
      this.d.approvalMode === "yolo" ? "all" : this.d.approvalMode === "auto_edit" ? "edits" : "read-only",
    );
    return {
      kind: createHash("sha256").update(JSON.stringify(sb.kind)).digest("hex"),
      start: async () => {
        const s = sb.start();
        const w = new AcpWorker({
          label: "gemini",
          command: s.bin,
          args: s.args,
          env: s.env,
          cwd: s.cwd,
          killGraceMs: this.d.killGraceSeconds * 1000,
          logger: this.d.logger,
          onEnd: () => s.file?.remove(),
          fingerprint: "standby",
          permission: base,
        });
        standbyFiles.set(w, s.bootstrapFile);
        try {
          await w.initialize();
        } catch (err) {
          const why = w.proc.stderrOfTurn().trim().split("\n").slice(-2).join(" | ");
          await w.kill();
          throw new Error(`the gemini standby did not initialize: ${(err as Error).message}${why ? `: ${why}` : ""}`);
        }
        return w;
      },
      adopt: (w) => {
        if (!sb.adopt(standbyFiles.get(w))) return false;
        const env = w.spec.env;
        // As before a new process starts in the folder (gemini's start-up cleanup, see the top of this file).
        removeLoadLeftovers(env.GEMINI_CLI_HOME || env.HOME || os.homedir(), cwd, this.d.logger);
        w.fingerprint = fingerprint;
        return true;
      },
    };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** The GEMINI_SYSTEM_MD file each standby was started with (written when a conversation takes it). */
const standbyFiles = new WeakMap<AcpWorker, string | undefined>();

/**
 * gemini's tool call ids: `<tool name>__<call id>` for the model's calls in 0.61
 * (`mcp_openclaw_session_status__mcp_openclaw_session_status_1795586037799_0`), else
 * `<tool name>-<ms>-<random>` (`read_file-1795568625652-5db0a`).
 */
export function geminiToolName(u: { toolCallId: string; kind?: string | null }): string {
  const sep = u.toolCallId.indexOf("__");
  if (sep > 0) return u.toolCallId.slice(0, sep);
  const m = /^([A-Za-z][\w.]*?)(?:[-_]\d{6,}.*)?$/.exec(u.toolCallId);
  return m?.[1] && m[1] !== u.toolCallId ? m[1] : String(u.kind ?? "tool");
}

/** The ACP `mcpServers` entry of the client's tools: the bridge's endpoint with the conversation's token. */
export function geminiMcpServer(entry: { url: string; headers: Record<string, string> }): acp.McpServer {
  return {
    type: "http",
    name: CLIENT_TOOLS_SERVER,
    url: entry.url,
    headers: Object.entries(entry.headers).map(([name, value]) => ({ name, value })),
  };
}

/**
 * The name gemini gives an MCP server's tool for the model (its `generateValidName` of
 * `<server>_<tool>` in 0.61): `mcp_openclaw_session_status`.
 */
export function geminiMcpToolName(server: string, tool: string): string {
  let name = `${server}_${tool}`;
  name = name.startsWith("mcp_") ? name : `mcp_${name}`;
  name = name.replace(/[^a-zA-Z0-9_\-.:]/g, "_");
  if (/^[^a-zA-Z_]/.test(name)) name = `_${name}`;
  if (name.length > 63) name = `${name.slice(0, 30)}...${name.slice(-30)}`;
  return name;
}

/**
 * The permission policy of a process given the client's tools: gemini asks before every call of an
 * MCP tool it was not told to trust, and an ACP entry cannot say `trust`. A call of one of OUR
 * tools is allowed — recognised by its call id, which gemini 0.61 builds as `<tool name>__<id>`
 * from the name it resolved the tool by (the model cannot make another tool's call look like
 * ours) — and anything else is left to the approval mode's policy.
 */
export function geminiClientToolsPermission(
  base: AcpPermissionPolicy,
  tools: readonly ClientToolDef[],
): AcpPermissionPolicy {
  const prefixes = tools.map((t) => `${geminiMcpToolName(CLIENT_TOOLS_SERVER, t.name)}__`);
  return (req) => {
    const id = String(req.toolCall?.toolCallId ?? "");
    if ((req.toolCall?.kind ?? "other") === "other" && prefixes.some((p) => id.startsWith(p))) return "allow";
    return base(req);
  };
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
