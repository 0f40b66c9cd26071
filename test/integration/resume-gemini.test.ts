/**
 * Resume mode end to end THROUGH THE BRIDGE with the REAL `gemini` CLI (node_modules/.bin) against a
 * fake Gemini API: the resume contract every CLI keeps (test/helpers/resume-contract.ts:
 * only-new-messages turns with the bootstrap (GEMINI_SYSTEM_MD) on every turn, conversation
 * identity, self-healing after a lost session file, abort + retry without two CLIs, strict
 * per-conversation ordering). Only the model API is faked.
 *
 * Both paths: cold (`gemini -o stream-json --resume`) and warm (`gemini --acp`, one process per
 * conversation; its own tests are in backend-gemini-warm.test.ts).
 *
 * Gemini CLI sends no session id to the model API: the session is identified through the store
 * (checked with the real `clawbridge sessions` command) and the session files under the private HOME.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { GEMINI_BIN, geminiEnv } from "../../testkit/fakes/cli-env.js";
import {
  geminiPartsText,
  startFakeGemini,
  type FakeGemini,
  type GeminiReply,
  type RecordedGeminiRequest,
} from "../../testkit/fakes/gemini-api.js";
import { lastLine } from "../helpers/resume.js";
import { resumeContract, type ResumeCli } from "../helpers/resume-contract.js";
import { resumable } from "../../src/backends/gemini-cli/warm.js";

// ---------------------------------------------------------------------------------------------
// helpers

/** The person's words in a content: Gemini CLI's own `<session_context>` part left out. */
function promptText(parts: unknown): string {
  if (!Array.isArray(parts)) return "";
  return parts
    .filter(
      (p: any) => typeof p?.text === "string" && !p.thought && !p.text.trimStart().startsWith("<session_context>"),
    )
    .map((p: any) => p.text)
    .join("")
    .trim();
}

/** user/model contents of a model call as [role, text], "model" named "assistant" (function calls/responses and empty ones skipped). */
function dialogue(req: RecordedGeminiRequest): [string, string][] {
  const contents: any[] = req.body?.contents ?? [];
  return contents
    .map((c): [string, string] => [
      c.role === "model" ? "assistant" : c.role,
      c.role === "user" ? promptText(c.parts) : geminiPartsText(c.parts),
    ])
    .filter(([, t]) => t !== "");
}

/** Answer naming the person's latest line (of the last text part: gemini may merge two user turns into one content). */
function replyScript(req: RecordedGeminiRequest): GeminiReply {
  const contents: any[] = req.body?.contents ?? [];
  const lastUser = [...contents].reverse().find((c) => c.role === "user" && promptText(c.parts));
  const parts: any[] = (lastUser?.parts ?? []).filter(
    (p: any) => typeof p?.text === "string" && !p.thought && p.text.trim(),
  );
  return { kind: "text", chunks: ["Reply to: ", lastLine(promptText(parts.slice(-1)))] };
}

/** Texts of every user text part (session context left out), in order. */
function userParts(req: RecordedGeminiRequest): string[] {
  const contents: any[] = req.body?.contents ?? [];
  return contents
    .filter((c) => c.role === "user")
    .flatMap((c) => (Array.isArray(c.parts) ? c.parts : []).map((p: any) => promptText([p])).filter(Boolean));
}

function lastPrompt(req: RecordedGeminiRequest): string {
  const contents: any[] = req.body?.contents ?? [];
  return promptText(contents.at(-1)?.parts);
}

/** Gemini CLI session files: `<home>/.gemini/tmp/<project>/chats/session-<time>-<first 8 of id>.jsonl`. */
function sessionFiles(home: string, id: string): string[] {
  const root = path.join(home, ".gemini", "tmp");
  const out: string[] = [];
  if (!existsSync(root)) return out;
  for (const project of readdirSync(root)) {
    const chats = path.join(root, project, "chats");
    if (!existsSync(chats) || !statSync(chats).isDirectory()) continue;
    for (const f of readdirSync(chats))
      if (f.startsWith("session-") && f.endsWith(`-${id.slice(0, 8)}.jsonl`)) out.push(path.join(chats, f));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

let fake: FakeGemini;

/** Gemini CLI in the resume contract, warm (the default: one `gemini --acp` per conversation) or cold. */
const geminiCli = (warm: boolean): ResumeCli<RecordedGeminiRequest, GeminiReply> => ({
  title: `Gemini CLI (${warm ? "warm" : "cold"})`,
  cli: "gemini",
  model: "gemini",
  backend: "gc",
  warm,
  async start(home) {
    fake = await startFakeGemini(replyScript);
    return {
      fake,
      backend: {
        type: "gemini-cli",
        command: GEMINI_BIN,
        env: geminiEnv({ baseUrl: fake.baseUrl, home }),
        timeoutSeconds: 90,
        killGraceSeconds: 1,
        warm: { enabled: warm },
      },
    };
  },
  replyScript,
  hang: { kind: "hang" },
  turns: () => fake.turnCalls(),
  // Model routing (model "auto") makes a side call with the same text: only streamGenerateContent is the turn.
  isTurn: (req) => req.action === "streamGenerateContent",
  dialogue,
  userTexts: userParts,
  lastPrompt,
  systemOf: (req) => req.systemText,
  conversationJson: (req) => JSON.stringify(req.body?.contents ?? []),
  newMessageBytes: (req) => Buffer.byteLength(JSON.stringify((req.body?.contents ?? []).at(-1)?.parts ?? [])),
  // GEMINI_SYSTEM_MD replaces Gemini CLI's own system prompt.
  systemIsBootstrapOnly: true,
  sessionFiles,
  // A failed session/load (warm) starts a recording under the dead id holding only gemini's context.
  stub: (file) => !resumable(file),
  lostSession: /No previous sessions found|Invalid session identifier|Error resuming session/,
  reachModelMs: 60_000,
  // A parallel gemini would reach the fake within this time.
  parallelWindowMs: 4000,
});

resumeContract<RecordedGeminiRequest, GeminiReply>(geminiCli(false));
resumeContract<RecordedGeminiRequest, GeminiReply>(geminiCli(true));
