/**
 * The REAL Codex CLI (node_modules/.bin/codex, 0.169) as a CLIENT of the bridge's Responses API
 * door: a private CODEX_HOME whose config.toml has a `model_providers.clawbridge` entry (the
 * bridge's `/v1`, `wire_api = "responses"`, the bridge's API key from an env var), and `codex exec`
 * asked for something that needs its shell tool. The bridge routes the model to an `openai`
 * backend in front of the fake OpenAI upstream (testkit/fakes/openai-api.ts), which scripts the
 * call of the shell tool Codex offered; Codex runs it in its sandbox, sends the
 * `function_call_output`, and the fake answers. Only the model API is faked.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { CODEX_BIN } from "../../testkit/fakes/cli-env.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const MODEL = "bridge-model";
const KEY = "sk-clawbridge-codex-test";
const COMMAND = "echo hello-from-codex > out.txt";

let fake: FakeOpenAI;
let bridge: TestBridge;
let home: string;
let cwd: string;

/**
 * The call of whichever shell tool Codex offered (as chat tools, after the door's translation),
 * with arguments that tool takes: `exec_command` (0.169's unified exec), `shell_command`, `shell`.
 */
function shellCall(req: RecordedRequest): Reply {
  const names: string[] = (req.body?.tools ?? []).map((t: any) => t?.function?.name);
  const args: Record<string, unknown> = {
    exec_command: { cmd: COMMAND },
    shell_command: { command: COMMAND },
    shell: { command: ["bash", "-lc", COMMAND] },
  };
  const name = Object.keys(args).find((n) => names.includes(n));
  if (!name) return { kind: "error", status: 400, message: `no shell tool offered: ${names.join(", ")}` };
  return { kind: "tool_calls", calls: [{ id: "callshell1", name, arguments: args[name] }] };
}

before(async () => {
  fake = await startFakeOpenAI((req) =>
    req.body?.messages?.at(-1)?.role === "tool"
      ? // A pause before the answer: the bridge sends `: keep-alive` comments, which Codex must skip.
        { kind: "text", chunks: ["Done: ", "out.txt written."], firstDelayMs: 600 }
      : shellCall(req),
  );
  bridge = await startTestBridge({
    server: { apiKeys: [KEY], heartbeatSeconds: 0.2 },
    backends: { up: { type: "openai", baseUrl: fake.url } },
    models: [{ id: MODEL, backend: "up", model: "fake-model" }],
  });
  home = tempDir("cb-codexc-home-");
  cwd = tempDir("cb-codexc-cwd-");
});

after(async () => {
  await bridge?.close(0);
  await fake?.close();
  const left = await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 10_000);
  cleanup(home);
  cleanup(cwd);
  if (bridge) cleanup(bridge.dataDir);
  assert.ok(left, "no codex process left behind");
});

/** CODEX_HOME with the bridge as its model provider; update checks, analytics and plugins off (no network but the bridge). */
function codexHome(): Record<string, string> {
  const dir = path.join(home, ".codex");
  mkdirSync(dir, { recursive: true });
  mkdirSync(path.join(home, "tmp"), { recursive: true });
  writeFileSync(
    path.join(dir, "config.toml"),
    [
      `model = ${JSON.stringify(MODEL)}`,
      `model_provider = "clawbridge"`,
      `check_for_update_on_startup = false`,
      ``,
      `[model_providers.clawbridge]`,
      `name = "clawbridge"`,
      `base_url = ${JSON.stringify(bridge.baseURL)}`,
      `wire_api = "responses"`,
      `env_key = "CLAWBRIDGE_API_KEY"`,
      `request_max_retries = 0`,
      `stream_max_retries = 0`,
      ``,
      `[analytics]`,
      `enabled = false`,
      ``,
      `[features]`,
      `plugins = false`,
      ``,
    ].join("\n"),
  );
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: home,
    TMPDIR: path.join(home, "tmp"),
    CODEX_HOME: dir,
    CLAWBRIDGE_API_KEY: KEY,
    // A real key or login from the developer's own environment must not be used.
    OPENAI_API_KEY: "",
    CODEX_API_KEY: "",
    NO_COLOR: "1",
  };
}

/** Run `codex exec --json` to its end (bounded), its stdout as JSON events. */
function codexExec(
  prompt: string,
  env: Record<string, string>,
): Promise<{ code: number | null; events: any[]; stderr: string }> {
  return new Promise((resolve) => {
    let out = "";
    let err = "";
    const p = spawn(CODEX_BIN, ["exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write", prompt], {
      env,
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const timer = setTimeout(() => {
      try {
        process.kill(-p.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }, 60_000);
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    p.on("close", (code) => {
      clearTimeout(timer);
      const events = out
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l));
      resolve({ code, events, stderr: err });
    });
  });
}

test("codex exec with the bridge as its Responses provider: it runs the shell tool the model called and finishes", async () => {
  const { code, events, stderr } = await codexExec(`Run \`${COMMAND}\` in the shell.`, codexHome());
  const trace = `exit ${code}\n${events.map((e) => JSON.stringify(e)).join("\n")}\n${stderr.slice(-2000)}`;
  assert.equal(code, 0, trace);

  // Codex ran the command and finished with the model's final answer.
  const command = events.find((e) => e.type === "item.completed" && e.item?.type === "command_execution");
  assert.ok(command, trace);
  assert.equal(command.item.exit_code, 0, trace);
  const final = events.filter((e) => e.type === "item.completed" && e.item?.type === "agent_message").at(-1);
  assert.equal(final?.item?.text, "Done: out.txt written.", trace);
  assert.ok(
    events.some((e) => e.type === "turn.completed"),
    trace,
  );
  assert.equal(readFileSync(path.join(cwd, "out.txt"), "utf8"), "hello-from-codex\n");

  // The upstream: the first call offered Codex's tools as chat functions; the second carried the
  // call and its result after it.
  const calls = fake.mainRequests();
  assert.equal(calls.length, 2, `two model calls: ${calls.map((c) => c.lastUser.slice(0, 60)).join(" | ")}`);
  const offered = calls[0]!.body.tools.map((t: any) => t.function.name);
  assert.ok(offered.includes("exec_command"), offered.join(", "));
  const [asked, result] = calls[1]!.body.messages.slice(-2);
  assert.equal(asked.role, "assistant");
  assert.equal(asked.tool_calls[0].id, "callshell1");
  assert.equal(result.role, "tool");
  assert.equal(result.tool_call_id, "callshell1");
  assert.match(result.content, /exited with code 0|exit code: 0/i, result.content);
  assert.ok(existsSync(path.join(home, ".codex", "sessions")), "codex kept its session");
});
