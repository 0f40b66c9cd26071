/**
 * Resume mode end to end THROUGH THE BRIDGE with the REAL `opencode` CLI (npm opencode-ai) against
 * the fake OpenAI-compatible API: the resume contract every CLI keeps (test/helpers/resume-contract.ts:
 * only-new-messages turns with the bootstrap in the system prompt on every turn, conversation
 * identity, self-healing after a lost session, abort + retry without two CLIs, strict
 * per-conversation ordering). Only the model API is faked.
 *
 * Both paths: cold (`opencode run --session`) and warm (an `opencode serve` per conversation from
 * a warm pool; its own tests are in opencode-warm.test.ts).
 *
 * OpenCode names its session on the wire (the `x-session-id` header of every model request). It
 * keeps every session in ONE SQLite database (`$XDG_DATA_HOME/opencode/opencode.db`, with its -wal
 * and -shm files), so "the session's files" are that database's files while it holds the session,
 * and losing them loses the session (as a wiped or moved data directory would).
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import type http from "node:http";
import path from "node:path";
import Database from "better-sqlite3";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { lastLine } from "../helpers/resume.js";
import { resumeContract, type ResumeCli, type ResumeFake } from "../helpers/resume-contract.js";

// ---------------------------------------------------------------------------------------------
// helpers

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((p: any) => typeof p?.text === "string")
    .map((p: any) => p.text)
    .join("\n");
}

const messagesOf = (req: RecordedRequest): any[] => (Array.isArray(req.body?.messages) ? req.body.messages : []);

/** user/assistant messages of a model call as [role, text] (tool calls, tool results and empty ones skipped). */
function dialogue(req: RecordedRequest): [string, string][] {
  return messagesOf(req)
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m): [string, string] => [m.role, textOf(m.content).trim()])
    .filter(([, t]) => t !== "");
}

function lastUserText(req: RecordedRequest): string {
  const last = [...messagesOf(req)].reverse().find((m) => m.role === "user" && textOf(m.content).trim());
  return textOf(last?.content).trim();
}

/** The default script: answer naming the person's latest line, so answers are traceable. */
function replyScript(req: RecordedRequest): Reply {
  return { kind: "text", chunks: ["Reply to: ", lastLine(lastUserText(req))] };
}

/** The newest message, which must be the user's. */
function newUser(req: RecordedRequest): string {
  const last = messagesOf(req).at(-1);
  assert.equal(last?.role, "user");
  return textOf(last.content);
}

/** OpenCode's database under the private HOME (XDG_DATA_HOME of opencodeEnv). */
const dbPath = (home: string) => path.join(home, ".local", "share", "opencode", "opencode.db");

/** The database's files while it holds session `id` (read-only look; none when it does not). */
function sessionFiles(home: string, id: string): string[] {
  const file = dbPath(home);
  if (!existsSync(file)) return [];
  let found = false;
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      db.pragma("busy_timeout = 2000");
      found = db.prepare("SELECT 1 FROM session WHERE id = ?").get(id) !== undefined;
    } finally {
      db.close();
    }
  } catch {
    return []; // not there (yet), or being created
  }
  return found ? [file, `${file}-wal`, `${file}-shm`].filter((f) => existsSync(f)) : [];
}

/**
 * The fake answers a script's reply at once; the contract's may come later (a promise, e.g. held
 * by a gate): the stream opens at once and the text follows when it comes.
 */
function later(reply: Promise<Reply>, req: RecordedRequest): Reply {
  const id = `chatcmpl-later${Math.random().toString(36).slice(2, 10)}`;
  const model = String(req.body?.model ?? "fake-model");
  const frame = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  return {
    kind: "steps",
    steps: [
      frame({ role: "assistant", content: "" }),
      async (res: http.ServerResponse) => {
        const r = await reply;
        if (r.kind !== "text") {
          res.destroy(); // only text replies come late in the contract
          return;
        }
        for (const c of r.chunks) if (!res.destroyed) res.write(frame({ content: c }));
        if (!res.destroyed) res.write(frame({}, r.finishReason ?? "stop"));
      },
      "data: [DONE]\n\n",
    ],
  };
}

function resumeFake(fake: FakeOpenAI): ResumeFake<RecordedRequest, Reply> {
  return {
    setScript: (script) =>
      fake.setScript((req) => {
        const r = script(req);
        return r instanceof Promise ? later(r, req) : r;
      }),
    close: () => fake.close(),
  };
}

// ---------------------------------------------------------------------------------------------

let fake: FakeOpenAI;

/** OpenCode in the resume contract, warm (the default: an `opencode serve` per conversation) or cold. */
const opencodeCli = (warm: boolean): ResumeCli<RecordedRequest, Reply> => ({
  title: `OpenCode (${warm ? "warm" : "cold"})`,
  cli: "opencode",
  model: "opencode",
  backend: "oc",
  warm,
  async start(home) {
    fake = await startFakeOpenAI(replyScript);
    return {
      fake: resumeFake(fake),
      backend: {
        type: "opencode",
        command: OPENCODE_BIN,
        // The contract's model is "default": OpenCode's own default model, named in its config.
        // OpenCode 1.18 lists its built-in skill (customize-opencode) in its system prompt as
        // `<available_skills>`, the very tag by which the contract spots OpenClaw's whole system
        // prompt: with the skill tool denied that listing is gone, and any left would be OpenClaw's.
        env: opencodeEnv(fake.url, home, ["m1"], { model: "fake/m1", permission: { skill: "deny" } }),
        timeoutSeconds: 90,
        killGraceSeconds: 1,
        warm: { enabled: warm },
      },
    };
  },
  replyScript,
  hang: { kind: "hang" },
  // Title generation and other side calls left out.
  turns: () => fake.mainRequests(),
  isTurn: (req) => !req.side,
  dialogue,
  userTexts: (req) =>
    dialogue(req)
      .filter(([r]) => r === "user")
      .map(([, t]) => t),
  lastPrompt: lastUserText,
  systemOf: (req) =>
    messagesOf(req)
      .filter((m) => m.role === "system")
      .map((m) => textOf(m.content))
      .join("\n"),
  conversationJson: (req) => JSON.stringify(messagesOf(req).filter((m) => m.role !== "system")),
  newMessageBytes: (req) => Buffer.byteLength(newUser(req)),
  // OpenCode's own system prompt comes with the bootstrap (appended to it).
  systemIsBootstrapOnly: false,
  sessionOf: (req) => {
    const h = req.headers["x-session-id"];
    return typeof h === "string" ? h : undefined;
  },
  sessionFiles,
  lostSession: /Session not found/,
  reachModelMs: 60_000,
  // A second, parallel opencode would reach the fake within this time (a start takes ~2-3 s).
  parallelWindowMs: 4000,
});

resumeContract<RecordedRequest, Reply>(opencodeCli(false));
resumeContract<RecordedRequest, Reply>(opencodeCli(true));
