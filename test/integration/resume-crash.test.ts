/**
 * The session store survives `kill -9` of the bridge in the middle of a turn. The bridge runs as a
 * CHILD PROCESS through its real command line (`clawbridge serve --config <file>`), answering with
 * the REAL `claude` CLI against a fake Anthropic API.
 *
 * A SIGKILLed bridge cannot reap its CLI itself: the process that was mid-turn runs in its own
 * process group (the bridge spawns every CLI detached so it can kill the whole group). The bridge
 * records every running CLI under <dataDir>/run; its orphan watcher ends them as soon as the bridge
 * dies, and a restarted bridge ends any leftover first.
 */
import assert from "node:assert/strict";
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import {
  anthropicText,
  startFakeAnthropic,
  type AnthropicReply,
  type FakeAnthropic,
  type RecordedRequest,
} from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { cleanup, eventually, pidsWithEnv, readSse, tempDir } from "../helpers/bridge.js";
import { bridgeListening } from "../helpers/process-groups.js";
import { openclawRequest, type OpenClawTurn } from "../../testkit/openclaw-request.js";

const MODEL = "claude";
const CLI_ENTRY = path.resolve("src/ops/commands/main.ts");
const execFileP = promisify(execFile);

let configFileForShow = "";
/** The store as the real `clawbridge sessions show` command reads it. */
async function sessionsShow(key: string): Promise<any> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CLAWBRIDGE_CONFIG;
  const { stdout } = await execFileP(
    process.execPath,
    ["--import", "tsx", CLI_ENTRY, "sessions", "show", key, "--config", configFileForShow],
    { env, timeout: 60_000 },
  );
  return JSON.parse(stdout);
}

function promptText(content: unknown): string {
  const blocks =
    typeof content === "string"
      ? [content]
      : Array.isArray(content)
        ? content.filter((b: any) => b?.type === "text").map((b: any) => String(b.text))
        : [];
  return blocks
    .filter((t) => !t.trimStart().startsWith("<system-reminder>"))
    .join("\n")
    .trim();
}

function dialogue(req: RecordedRequest): [string, string][] {
  const msgs: any[] = req.body?.messages ?? [];
  return msgs
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m): [string, string] => [m.role, m.role === "user" ? promptText(m.content) : anthropicText(m.content)])
    .filter(([, t]) => t !== "");
}

function sessionOf(req: RecordedRequest): string | undefined {
  try {
    return JSON.parse(String(req.body?.metadata?.user_id)).session_id;
  } catch {
    return undefined;
  }
}

function pgidOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[2]);
  } catch {
    return undefined;
  }
}

/** SIGKILL every process (and its process group) whose environment holds `needle`; returns how many were found. */
function killLeftovers(needle: string): number {
  const pids = pidsWithEnv(needle);
  for (const pid of pids) {
    const pg = pgidOf(pid);
    try {
      if (pg && pg !== process.pid && pg === pid) process.kill(-pg, "SIGKILL");
      else process.kill(pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  }
  return pids.length;
}

interface ChildBridge {
  proc: ChildProcess;
  url: string;
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `node --import tsx src/ops/commands/main.ts serve --config <file>`; resolves once it prints its URL. */
async function startChildBridge(configFile: string, marker: string): Promise<ChildBridge> {
  const env: NodeJS.ProcessEnv = { ...process.env, CB_CRASH_MARKER: marker };
  delete env.CLAWBRIDGE_CONFIG;
  const proc = spawn(process.execPath, ["--import", "tsx", CLI_ENTRY, "serve", "--config", configFile], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const { url, stderr } = bridgeListening(proc);
  return { proc, url: await url, stderr, exited };
}

async function stopChildBridge(b: ChildBridge | undefined): Promise<void> {
  if (!b || b.proc.exitCode !== null || b.proc.signalCode !== null) return;
  b.proc.kill("SIGTERM");
  const timer = setTimeout(() => b.proc.kill("SIGKILL"), 15_000);
  await b.exited;
  clearTimeout(timer);
}

async function chat(url: string, body: unknown, signal?: AbortSignal) {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  const { frames } = await readSse(res);
  const payloads = frames.filter((f) => f !== "[DONE]").map((f) => JSON.parse(f));
  return {
    status: res.status,
    key: res.headers.get("x-clawbridge-conversation"),
    text: payloads.map((p) => p.choices?.[0]?.delta?.content ?? "").join(""),
    error: payloads.find((p) => p.error)?.error,
  };
}

function integrity(dbFile: string): string {
  const db = new Database(dbFile, { readonly: true, fileMustExist: true });
  try {
    return (db.pragma("integrity_check", { simple: true }) as string) ?? "";
  } finally {
    db.close();
  }
}

function replyScript(req: RecordedRequest): AnthropicReply {
  const msgs: any[] = req.body?.messages ?? [];
  const lastUser = [...msgs].reverse().find((m) => m.role === "user" && promptText(m.content));
  return { kind: "text", chunks: ["Reply to: ", promptText(lastUser?.content).split("\n").at(-1) ?? ""] };
}

describe("resume mode: the store survives kill -9 of the bridge mid-turn", () => {
  let fake: FakeAnthropic;
  let home: string;
  let dataDir: string;
  let cfgDir: string;
  let configFile: string;
  const marker = randomUUID();
  let bridge: ChildBridge | undefined;

  before(async () => {
    fake = await startFakeAnthropic(replyScript);
    home = tempDir("cb-crash-home-");
    dataDir = tempDir("cb-crash-data-");
    cfgDir = tempDir("cb-crash-cfg-");
    configFile = path.join(cfgDir, "clawbridge.json");
    writeFileSync(
      configFile,
      JSON.stringify(
        {
          server: { host: "127.0.0.1", port: 0, heartbeatSeconds: 1, shutdownGraceSeconds: 1 },
          logging: { level: "warn" },
          dataDir,
          intents: { enabled: false },
          backends: {
            cc: {
              type: "claude-code",
              command: CLAUDE_BIN,
              env: claudeEnv({ baseUrl: fake.baseUrl, home }),
              timeoutSeconds: 60,
              killGraceSeconds: 1,
            },
          },
          models: [{ id: MODEL, backend: "cc", model: "default", session: { mode: "resume" } }],
        },
        null,
        2,
      ),
    );
  });

  after(async () => {
    await stopChildBridge(bridge);
    killLeftovers(`HOME=${home}`);
    await eventually(() => pidsWithEnv(`CB_CRASH_MARKER=${marker}`).length === 0, 10_000);
    killLeftovers(`CB_CRASH_MARKER=${marker}`);
    await fake?.close();
    for (const d of [home, dataDir, cfgDir]) if (d) cleanup(d);
  });

  test("kill -9 mid-turn, restart on the same data dir: the retried turn continues the SAME session; the DB is intact", async (t) => {
    const sid = randomUUID();
    const key = `openclaw:agent:main:main:${sid}`;
    const turns: OpenClawTurn[] = [{ role: "user", text: "remember the number 4217" }];
    bridge = await startChildBridge(configFile, marker);
    configFileForShow = configFile;

    const r1 = await chat(bridge.url, openclawRequest(MODEL, turns, "2026.9", { sessionId: sid }));
    assert.equal(r1.status, 200);
    assert.equal(r1.key, key);
    assert.equal(r1.text, "Reply to: remember the number 4217");
    turns.push({ role: "assistant", text: r1.text }, { role: "user", text: "what was the number?" });
    const firstCall = fake.messageCalls().at(-1)!;
    const session1 = sessionOf(firstCall);
    assert.ok(session1);

    // Turn 2: the model hangs; the bridge is killed with SIGKILL while the CLI waits for it.
    fake.setScript(() => ({ kind: "hang" }));
    const before2 = fake.messageCalls().length;
    const ac = new AbortController();
    const pending = chat(bridge.url, openclawRequest(MODEL, turns, "2026.9", { sessionId: sid }), ac.signal).catch(
      (err: Error) => err,
    );
    assert.ok(await eventually(() => fake.messageCalls().length > before2, 30_000), "turn 2 reached the model");
    assert.equal(sessionOf(fake.messageCalls().at(-1)!), session1, "turn 2 was resuming the session");
    assert.ok(pidsWithEnv(`HOME=${home}`).length > 0, "claude is mid-turn");

    bridge.proc.kill("SIGKILL");
    const end = await bridge.exited;
    assert.equal(end.signal, "SIGKILL");
    const lost = await pending;
    assert.ok(lost instanceof Error, "the client saw the connection drop");
    ac.abort();

    // The killed bridge could not reap its CLI; its orphan watcher ends it, without a restart.
    assert.ok(
      await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 10_000),
      "the orphan watcher ended the CLI of the killed bridge",
    );

    // The database as the crash left it.
    const dbFile = path.join(dataDir, "sessions.db");
    assert.equal(integrity(dbFile), "ok", "integrity_check right after the crash");
    const survived = await sessionsShow(key);
    assert.equal(survived.binding.backendSessionId, session1, "the confirmed binding survived kill -9");
    assert.equal(survived.binding.turns, 1);

    // Restart on the same data dir; OpenClaw retries turn 2 and the model answers now.
    fake.setScript(replyScript);
    bridge = await startChildBridge(configFile, marker);
    const before3 = fake.messageCalls().length;
    const r2 = await chat(bridge.url, openclawRequest(MODEL, turns, "2026.9", { sessionId: sid }));
    assert.equal(r2.status, 200);
    assert.equal(r2.error, undefined, JSON.stringify(r2.error));
    assert.equal(r2.key, key);
    assert.equal(r2.text, "Reply to: what was the number?");
    const retried = fake.messageCalls().slice(before3);
    assert.equal(retried.length, 1, "one model call for the retried turn");
    // Turn 2 was cut off mid-way and may already sit in session 1's own history (and the orphaned
    // CLI may still hold it): the retry of the same message starts a NEW session seeded with the
    // conversation, so nothing is asked twice and nothing is forgotten.
    assert.notEqual(sessionOf(retried[0]!), session1, "a new backend session");
    const d = dialogue(retried[0]!);
    t.diagnostic(`history the model saw on the retried turn: ${JSON.stringify(d)}`);
    assert.match(
      d[0]![1],
      /EARLIER IN THIS CONVERSATION[\s\S]*remember the number 4217[\s\S]*Reply to: remember the number 4217/,
      "turn 1 is in the new session's first message",
    );
    assert.ok(d.at(-1)![1].endsWith("what was the number?"), "the retried question comes last");

    // The store, read by the real `sessions show` command with the same config.
    const shown = await sessionsShow(key);
    assert.equal(shown.binding.backendSessionId, sessionOf(retried[0]!));
    assert.equal(shown.binding.turns, 1, "the new session's first turn");
    assert.ok(
      shown.events.some((e: { kind: string }) => e.kind === "reset"),
      "the reset is recorded",
    );

    await stopChildBridge(bridge);
    const stopped = await bridge.exited;
    assert.equal(stopped.code, 0, `clean exit on SIGTERM:\n${bridge.stderr().slice(-2000)}`);
    assert.equal(integrity(dbFile), "ok", "integrity_check after the restart");
    assert.ok(
      await eventually(() => pidsWithEnv(`CB_CRASH_MARKER=${marker}`).length === 0, 10_000),
      "nothing of either bridge is left",
    );
  });
});
