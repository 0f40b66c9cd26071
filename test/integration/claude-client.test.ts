/**
 * The REAL Claude Code CLI as a CLIENT of the bridge's Anthropic Messages door: `ANTHROPIC_BASE_URL`
 * at the bridge, `ANTHROPIC_API_KEY` the bridge's key, every model env var at the one model the
 * bridge serves, which is an `openai` backend in front of the fake OpenAI-compatible upstream
 * (testkit/fakes/openai-api.ts, the only faked part). Asked to read notes.txt, Claude Code gets a
 * scripted call to the `Read` tool it offered (as a Chat Completions tool, upstream), runs it
 * itself, sends the tool_result back; the upstream gets it as a tool message and answers with the
 * file's content quoted, which Claude Code gives as its final result. So a non-Anthropic model
 * drives Claude Code's own tools through the bridge.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const KEY = "sk-bridge-claude";
const MODEL = "bridge-model";
const SECRET = "the launch code is PELICAN-7731";
const RUN_TIMEOUT_MS = 90_000;
const MAX_OUTPUT = 4 * 1024 * 1024;

let fake: FakeOpenAI;
let bridge: TestBridge;
let dir: string;

/** The file path argument the offered tool's schema names (`file_path` in Claude Code 2.1). */
function pathArg(req: RecordedRequest): string | undefined {
  const read = (req.body.tools ?? []).find((t: any) => t.function?.name === "Read");
  const props = Object.keys(read?.function?.parameters?.properties ?? {});
  return props.find((p) => /path/i.test(p));
}

before(async () => {
  dir = tempDir("cb-claude-client-");
  mkdirSync(path.join(dir, "work"));
  writeFileSync(path.join(dir, "work", "notes.txt"), `${SECRET}\n`);
  fake = await startFakeOpenAI((req) => {
    const last = req.body.messages.at(-1);
    if (last.role === "tool") {
      const content = typeof last.content === "string" ? last.content : JSON.stringify(last.content);
      return {
        kind: "text",
        chunks: ["notes.txt holds: ", content.trim()],
        usage: { prompt_tokens: 50, completion_tokens: 12 },
      };
    }
    const arg = pathArg(req);
    if (!arg) return { kind: "text", chunks: ["No Read tool was offered."] };
    return {
      kind: "tool_calls",
      content: "Reading it.",
      calls: [{ id: "call_read_1", name: "Read", arguments: { [arg]: path.join(dir, "work", "notes.txt") } }],
    };
  });
  bridge = await startTestBridge({
    server: { apiKeys: [KEY] },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: MODEL, backend: "up", model: "upstream-model" }],
  });
});

after(async () => {
  await bridge?.close(0);
  await fake?.close();
  if (bridge) cleanup(bridge.dataDir);
  if (dir) cleanup(dir);
});

interface ClaudeRun {
  code: number | null;
  events: any[];
  stderr: string;
}

/** `claude -p` in `<dir>/work`, the prompt on stdin; the whole process group is ended and reaped after. */
async function runClaude(prompt: string): Promise<ClaudeRun> {
  const home = path.join(dir, "home");
  mkdirSync(home, { recursive: true });
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    LANG: "C.UTF-8",
    NO_COLOR: "1",
    ...claudeEnv({ baseUrl: bridge.url, home }),
    ANTHROPIC_API_KEY: KEY,
    // Every model Claude Code may ask for (the main one, the small/fast one for side requests) is the bridge's.
    ANTHROPIC_MODEL: MODEL,
    ANTHROPIC_SMALL_FAST_MODEL: MODEL,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: MODEL,
    ANTHROPIC_DEFAULT_SONNET_MODEL: MODEL,
    ANTHROPIC_DEFAULT_OPUS_MODEL: MODEL,
  };
  const args = [
    "-p",
    // Only the Read tool runs without asking (the least that lets it work in -p).
    "--allowedTools",
    "Read",
    "--no-session-persistence",
    "--output-format",
    "stream-json",
    "--verbose",
  ];
  const child = spawn(CLAUDE_BIN, args, {
    cwd: path.join(dir, "work"),
    env,
    stdio: ["pipe", "pipe", "pipe"],
    detached: true,
  });
  const killGroup = () => {
    try {
      if (child.pid) process.kill(-child.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
  };
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (c: Buffer) => {
    if (stdout.length < MAX_OUTPUT) stdout += c.toString("utf8");
  });
  child.stderr.on("data", (c: Buffer) => {
    if (stderr.length < MAX_OUTPUT) stderr += c.toString("utf8");
  });
  const exited = new Promise<number | null>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve(code));
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    child.stdin.on("error", () => {});
    child.stdin.end(prompt);
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        killGroup();
        reject(new Error(`claude did not finish within ${RUN_TIMEOUT_MS} ms; stderr: ${stderr.slice(-2000)}`));
      }, RUN_TIMEOUT_MS);
    });
    const code = await Promise.race([exited, timedOut]);
    const events = stdout
      .split("\n")
      .filter((l) => l.trim().startsWith("{"))
      .map((l) => JSON.parse(l));
    return { code, events, stderr };
  } finally {
    clearTimeout(timer);
    killGroup();
    let reapTimer: NodeJS.Timeout | undefined;
    await Promise.race([exited.catch(() => {}), new Promise((r) => (reapTimer = setTimeout(r, 5_000)))]);
    clearTimeout(reapTimer);
  }
}

test("claude -p reads notes.txt with its own Read tool, called by a non-Anthropic model through the bridge", async () => {
  const run = await runClaude("Read the file notes.txt and tell me exactly what it holds.");
  const describe = () =>
    `exit ${run.code}; stderr: ${run.stderr.slice(-1500)}; events: ${JSON.stringify(run.events).slice(-3000)}`;
  const result = run.events.find((e) => e.type === "result");
  assert.ok(result, `a result event: ${describe()}`);
  assert.equal(result.is_error, false, describe());
  assert.ok(String(result.result).includes(SECRET), `the final result quotes the file: ${describe()}`);

  // Claude Code ran Read itself: its tool_result is in its own stream.
  const toolResult = run.events
    .filter((e) => e.type === "user")
    .flatMap((e) => e.message?.content ?? [])
    .find((b: any) => b.type === "tool_result");
  assert.ok(toolResult, `Claude Code sent a tool_result: ${describe()}`);
  assert.match(toolResult.tool_use_id, /^toolu_/);

  // The upstream: first the question with Claude Code's tools (Read among them), then the file as a tool message.
  const calls = fake.mainRequests();
  assert.ok(calls.length >= 2, `two upstream calls at least: ${calls.length}`);
  const first = calls[0]!;
  assert.equal(first.body.model, "upstream-model");
  assert.equal(first.body.messages[0].role, "system");
  assert.ok(pathArg(first), "the Read tool, with its file path parameter, was offered upstream");
  const withResult = calls.find((r) => r.body.messages.at(-1).role === "tool");
  assert.ok(withResult, "an upstream request ends with the tool message");
  const toolMsg = withResult.body.messages.at(-1);
  assert.ok(String(toolMsg.content).includes(SECRET), `the tool message holds the file: ${JSON.stringify(toolMsg)}`);
  // Its id is the one the upstream issued (the backend's id, round-tripped through toolu_…).
  const assistant = withResult.body.messages.at(-2);
  assert.equal(assistant.role, "assistant");
  assert.equal(assistant.tool_calls[0].function.name, "Read");
  assert.equal(toolMsg.tool_call_id, assistant.tool_calls[0].id);
});
