/**
 * Shared by the resume-mode end-to-end tests (one file per CLI): a chat call that reads SSE or JSON,
 * an OpenClaw conversation as OpenClaw replays it, the CLI processes of a private HOME, and the real
 * `clawbridge sessions` command.
 */
import { execFile } from "node:child_process";
import { readFileSync, readlinkSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { pidsWithEnv, readSse } from "./bridge.js";
import { openclawRequest, type Generation, type OpenClawTurn } from "../../testkit/openclaw-request.js";

const execFileP = promisify(execFile);
const CLI_ENTRY = path.resolve("src/ops/commands/main.ts");

export interface ChatResult {
  status: number;
  key: string | null;
  source: string | null;
  text: string;
  error?: { message: string; code?: string };
  done: boolean;
}

export async function chat(
  baseURL: string,
  body: unknown,
  opts: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<ChatResult> {
  const res = await fetch(`${baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(opts.headers ?? {}) },
    body: JSON.stringify(body),
    signal: opts.signal,
  });
  const base = {
    status: res.status,
    key: res.headers.get("x-clawbridge-conversation"),
    source: res.headers.get("x-clawbridge-conversation-source"),
  };
  if (!(res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    const j = (await res.json()) as any;
    return { ...base, text: j?.choices?.[0]?.message?.content ?? "", error: j?.error, done: false };
  }
  const { frames } = await readSse(res);
  const payloads = frames.filter((f) => f !== "[DONE]").map((f) => JSON.parse(f));
  return {
    ...base,
    text: payloads.map((p) => p.choices?.[0]?.delta?.content ?? "").join(""),
    error: payloads.find((p) => p.error)?.error,
    done: frames.includes("[DONE]"),
  };
}

/** An OpenClaw conversation: turns as OpenClaw replays them (earlier assistant answers included). */
export class Conversation {
  readonly turns: OpenClawTurn[] = [];
  constructor(
    readonly model: string,
    readonly gen: Generation,
    readonly extra: { sessionId?: string; sessionKey?: string } = {},
  ) {}
  ask(text: string): Record<string, unknown> {
    this.turns.push({ role: "user", text });
    return openclawRequest(this.model, this.turns, this.gen, this.extra);
  }
  answered(text: string): void {
    this.turns.push({ role: "assistant", text });
  }
  /** The request for re-sending the last question (a retry), without adding a turn. */
  again(): Record<string, unknown> {
    return openclawRequest(this.model, this.turns, this.gen, this.extra);
  }
}

export function lastLine(s: string): string {
  return s.trim().split("\n").at(-1)!.trim();
}

/**
 * Process groups whose environment has this HOME: one per CLI process (the bridge starts each CLI in
 * its own group; a CLI's helpers and relaunches share it). Counting raw pids would count those as CLIs.
 */
export function cliGroups(home: string, cwd?: string): Set<number> {
  const groups = new Set<number>();
  for (const pid of pidsWithEnv(`HOME=${home}`)) {
    try {
      // Only the processes working in `cwd` (one conversation's, when warm processes of others stay).
      if (cwd !== undefined && readlinkSync(`/proc/${pid}/cwd`) !== cwd) continue;
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (fields[0] !== "Z") groups.add(Number(fields[2]));
    } catch {
      /* gone */
    }
  }
  return groups;
}

export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** The real `clawbridge sessions …` command, run as a child process against the bridge's data dir. */
export async function sessionsCli(dataDir: string, ...args: string[]): Promise<string> {
  const env: NodeJS.ProcessEnv = { ...process.env, CLAWBRIDGE_DATA_DIR: dataDir };
  delete env.CLAWBRIDGE_CONFIG;
  const { stdout } = await execFileP(process.execPath, ["--import", "tsx", CLI_ENTRY, "sessions", ...args], {
    env,
    timeout: 60_000,
  });
  return stdout;
}

export async function showSession(
  dataDir: string,
  key: string,
): Promise<{ binding: any; events: Array<{ kind: string; reason: string | null }> }> {
  return JSON.parse(await sessionsCli(dataDir, "show", key));
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
