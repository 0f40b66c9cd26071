/**
 * The REAL Claude Code CLI (`@anthropic-ai/claude-code`, node_modules/.bin/claude) as an MCP host of
 * the builder's tools: a real bridge (startTestBridge, systems runtime opened by an empty
 * `<dataDir>/systems/`) serves `/mcp`; `claude -p --mcp-config <file>` connects to it over
 * Streamable HTTP with the bridge's bearer key; its model is the fake Anthropic Messages API
 * (testkit/fakes/anthropic-api.ts), scripted to answer with `tool_use` blocks for
 * `mcp__clawbridge__canvas_create_node` (twice) and `mcp__clawbridge__canvas_connect_nodes`, then
 * the text "done". The script decides from the conversation it is sent (how many tool_results it
 * already holds), not from a call counter, and answers any other request (one without the prompt's
 * marker) with plain text.
 * Checked: claude exits 0 with a successful `result`; the fake got 3 tool_results, none an error;
 * `GET /v1/canvases/cc-demo` shows both nodes and the edge; the bus told node.created twice and
 * edge.created once. With a WRONG key in the MCP config, `/mcp` answers 401, claude reports the
 * server `failed`, the scripted tool_use finds no such tool, and the canvas is unchanged.
 * Everything is on 127.0.0.1; claude runs with a private HOME, in its own process group, is killed
 * after 90 s at the latest and reaped in `finally`.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { BridgeEvent } from "../../src/wire/events.js";
import {
  startFakeAnthropic,
  type AnthropicReply,
  type FakeAnthropic,
  type RecordedRequest,
} from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

/** server.apiKeys entries must be at least 8 characters (src/core/config/schema.ts). */
const KEY = "k-test-key-1";
const WRONG_KEY = "k-wrong-key-9";
const SYSTEM = "cc-demo";
/** In the prompt: a request carrying it is the conversation being scripted; anything else is a side call. */
const MARKER = "CC-MCP-DEMO-7f3a";
const PROMPT = `${MARKER}: build the ${SYSTEM} canvas: an input "topic" feeding an agent "writer".`;
const TOOL_PREFIX = "mcp__clawbridge__";
const ALLOWED = [`${TOOL_PREFIX}canvas_create_node`, `${TOOL_PREFIX}canvas_connect_nodes`];
const RUN_TIMEOUT_MS = 90_000;
const MAX_OUTPUT = 8 * 1024 * 1024;

/** The model's moves, in order: the tool_use to send when the conversation holds `i` tool_results. */
const MOVES: { id: string; name: string; input: Record<string, unknown> }[] = [
  {
    id: "toolu_cc1",
    name: `${TOOL_PREFIX}canvas_create_node`,
    input: { system: SYSTEM, type: "input", label: "Topic", id: "topic" },
  },
  {
    id: "toolu_cc2",
    name: `${TOOL_PREFIX}canvas_create_node`,
    input: {
      system: SYSTEM,
      type: "agent",
      label: "Writer",
      id: "writer",
      properties: { model: "m1", prompt: "Write about {{topic}}" },
    },
  },
  {
    id: "toolu_cc3",
    name: `${TOOL_PREFIX}canvas_connect_nodes`,
    input: { system: SYSTEM, from: "topic", to: "writer" },
  },
];

interface ToolResult {
  tool_use_id: string;
  is_error?: boolean;
  content: unknown;
}

/** The tool_result blocks of a request's conversation, in order. */
function toolResults(req: RecordedRequest): ToolResult[] {
  const msgs: any[] = Array.isArray(req.body?.messages) ? req.body.messages : [];
  return msgs
    .flatMap((m) => (m?.role === "user" && Array.isArray(m.content) ? m.content : []))
    .filter((b: any) => b?.type === "tool_result");
}

const resultText = (r: ToolResult): string =>
  typeof r.content === "string"
    ? r.content
    : Array.isArray(r.content)
      ? r.content.map((b: any) => (typeof b?.text === "string" ? b.text : "")).join("")
      : "";

const isScripted = (req: RecordedRequest) => req.lastUserText.includes(MARKER);

/** Decided from the conversation alone: the next move, or "done" once all ran, or a stop after a failed tool. */
function script(req: RecordedRequest): AnthropicReply {
  if (!isScripted(req)) return { kind: "text", chunks: ["side answer"] };
  const results = toolResults(req);
  if (results.some((r) => r.is_error)) return { kind: "text", chunks: ["stopped: a tool failed"] };
  const move = MOVES[results.length];
  if (!move) return { kind: "text", chunks: ["done"] };
  return { kind: "text", chunks: [`Step ${results.length + 1}.`], toolUses: [move] };
}

interface ClaudeRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  events: any[];
  stderr: string;
  ms: number;
}

describe("the real Claude Code CLI builds a canvas through the bridge's /mcp", { timeout: 4 * RUN_TIMEOUT_MS }, () => {
  let dir: string;
  let bridge: TestBridge;
  let fake: FakeAnthropic;
  const bus: BridgeEvent[] = [];
  const homes: string[] = [];

  before(async () => {
    dir = tempDir("cb-claude-mcp-");
    const dataDir = path.join(dir, "data");
    // An (empty) systems folder is what opens the systems runtime, and with it the builder and /mcp.
    mkdirSync(path.join(dataDir, "systems"), { recursive: true });
    bridge = await startTestBridge({
      dataDir,
      server: { host: "127.0.0.1", apiKeys: [KEY] },
      backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } }, // never called
      models: [{ id: "m1", backend: "up" }],
    });
    bridge.bus.on((e) => void bus.push(e));
    fake = await startFakeAnthropic(script);
  });

  after(async () => {
    await fake?.close();
    await bridge?.close();
    if (dir) cleanup(dir);
  });

  const canvas = async () => {
    const res = await fetch(`${bridge.url}/v1/canvases/${SYSTEM}`, { headers: { authorization: `Bearer ${KEY}` } });
    return { status: res.status, body: (await res.json()) as any };
  };
  const canvasEvents = () =>
    bus.filter((e) => (e.type === "node.created" || e.type === "edge.created") && e.system === SYSTEM);

  /** Run `claude -p` once with an MCP config naming the bridge with `key`; always reaped. */
  async function runClaude(name: string, key: string): Promise<ClaudeRun> {
    const home = path.join(dir, `home-${name}`);
    const cwd = path.join(dir, `work-${name}`);
    mkdirSync(home, { recursive: true });
    mkdirSync(cwd, { recursive: true });
    homes.push(home);
    const mcpConfig = path.join(dir, `mcp-${name}.json`);
    writeFileSync(
      mcpConfig,
      JSON.stringify({
        mcpServers: {
          clawbridge: { type: "http", url: `${bridge.url}/mcp`, headers: { Authorization: `Bearer ${key}` } },
        },
      }),
    );
    const args = [
      "-p",
      "--mcp-config",
      mcpConfig,
      "--strict-mcp-config",
      "--allowedTools",
      ALLOWED.join(","),
      // Pre-approved tools run; anything else is denied instead of asked about.
      "--permission-mode",
      "dontAsk",
      // No built-in tools: the model sees only the bridge's.
      "--tools",
      "",
      "--no-session-persistence",
      "--output-format",
      "stream-json",
      "--verbose",
    ];
    // A minimal environment: nothing from the developer's own (keys, proxies, config dirs) leaks in.
    const env = {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      LANG: "C.UTF-8",
      NO_COLOR: "1",
      ...claudeEnv({ baseUrl: fake.baseUrl, home }),
    };
    const started = Date.now();
    const child = spawn(CLAUDE_BIN, args, { cwd, env, stdio: ["pipe", "pipe", "pipe"], detached: true });
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
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
      child.once("error", reject);
      child.once("close", (code, signal) => resolve({ code, signal }));
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      child.stdin.on("error", () => {});
      child.stdin.end(PROMPT);
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          killGroup();
          reject(
            new Error(`claude (${name}) did not finish within ${RUN_TIMEOUT_MS} ms; stderr: ${stderr.slice(-2000)}`),
          );
        }, RUN_TIMEOUT_MS);
      });
      const { code, signal } = await Promise.race([exited, timedOut]);
      const events = stdout
        .split("\n")
        .filter((l) => l.trim().startsWith("{"))
        .map((l) => JSON.parse(l));
      return { code, signal, events, stderr, ms: Date.now() - started };
    } finally {
      clearTimeout(timer);
      // Whatever happened: the whole group (claude and anything it started) goes, and is waited for.
      killGroup();
      let reapTimer: NodeJS.Timeout | undefined;
      await Promise.race([exited.catch(() => {}), new Promise((r) => (reapTimer = setTimeout(r, 5_000)))]);
      clearTimeout(reapTimer);
    }
  }

  const describeRun = (run: ClaudeRun) =>
    `exit ${run.code}/${run.signal}; stderr: ${run.stderr.slice(-1500)}; events: ${JSON.stringify(run.events).slice(-3000)}`;

  test("claude calls canvas_create_node twice and canvas_connect_nodes once; the canvas and the bus show them", async () => {
    const calls0 = fake.messageCalls().length;
    const run = await runClaude("ok", KEY);
    const info = describeRun(run);
    assert.equal(run.code, 0, info);

    const init = run.events.find((e) => e.type === "system" && e.subtype === "init");
    assert.ok(init, `an init event: ${info}`);
    assert.deepEqual(init.mcp_servers, [{ name: "clawbridge", status: "connected" }], info);
    for (const t of ALLOWED)
      assert.ok(init.tools.includes(t), `${t} offered to the model: ${JSON.stringify(init.tools)}`);
    const result = run.events.find((e) => e.type === "result");
    assert.ok(result, `a result event: ${info}`);
    assert.equal(result.is_error, false, info);
    assert.equal(result.result, "done", info);

    // What the model saw: the bridge's tools under Claude Code's mcp__<server>__<tool> names, then 3 good results.
    const calls = fake.messageCalls().slice(calls0);
    const scripted = calls.filter(isScripted);
    assert.equal(scripted.length, 4, `3 tool turns and the final answer: ${calls.length} calls`);
    const offered: string[] = (scripted[0]!.body.tools ?? []).map((t: any) => t.name);
    for (const t of ALLOWED) assert.ok(offered.includes(t), `${t} in the request's tools: ${offered.join(", ")}`);
    const results = toolResults(scripted.at(-1)!);
    assert.deepEqual(
      results.map((r) => r.tool_use_id),
      MOVES.map((m) => m.id),
      "one tool_result per tool_use, in order",
    );
    for (const r of results) assert.ok(!r.is_error, `${r.tool_use_id} failed: ${resultText(r)}`);
    const parsed = results.map((r) => JSON.parse(resultText(r)));
    assert.equal(parsed[0].nodeId, "topic");
    assert.equal(parsed[0].canvasCreated, true);
    assert.equal(parsed[1].nodeId, "writer");
    assert.equal(parsed[2].edgeId, "e-topic-writer");

    const { status, body } = await canvas();
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(body.system, SYSTEM);
    const nodes = new Map<string, any>(body.nodes.map((n: any) => [n.id, n]));
    assert.deepEqual([...nodes.keys()].sort(), ["topic", "writer"]);
    assert.equal(nodes.get("topic").type, "input");
    assert.equal(nodes.get("topic").label, "Topic");
    assert.equal(nodes.get("writer").type, "agent");
    assert.equal(nodes.get("writer").label, "Writer");
    assert.equal(nodes.get("writer").properties.model, "m1");
    assert.equal(nodes.get("writer").properties.prompt, "Write about {{topic}}");
    assert.deepEqual(
      body.edges.map((e: any) => [e.from, e.to]),
      [["topic", "writer"]],
    );

    const evs = canvasEvents();
    assert.deepEqual(
      evs.map((e) =>
        e.type === "node.created"
          ? `${e.type}:${e.node.id}`
          : e.type === "edge.created"
            ? `${e.type}:${e.edge.from}->${e.edge.to}`
            : e.type,
      ),
      ["node.created:topic", "node.created:writer", "edge.created:topic->writer"],
    );
    assert.equal(fake.unknown.length, 0, `unknown paths: ${fake.unknown.map((u) => u.path).join(", ")}`);
  });

  test("with a wrong key /mcp answers 401, claude reports the server failed, its tool does not exist, the canvas is unchanged", async () => {
    const before = await canvas();
    const events0 = canvasEvents().length;

    const plain = await fetch(`${bridge.url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${WRONG_KEY}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    assert.equal(plain.status, 401);
    assert.equal(plain.headers.get("www-authenticate"), "Bearer");
    await plain.arrayBuffer();

    const calls0 = fake.messageCalls().length;
    const run = await runClaude("wrong-key", WRONG_KEY);
    const info = describeRun(run);
    assert.equal(run.code, 0, info);
    const init = run.events.find((e) => e.type === "system" && e.subtype === "init");
    assert.ok(init, `an init event: ${info}`);
    assert.deepEqual(init.mcp_servers, [{ name: "clawbridge", status: "failed" }], info);
    assert.ok(
      !init.tools.some((t: string) => t.startsWith(TOOL_PREFIX)),
      `no bridge tools: ${JSON.stringify(init.tools)}`,
    );

    const scripted = fake.messageCalls().slice(calls0).filter(isScripted);
    assert.ok(scripted.length >= 1, "the model was asked");
    for (const req of scripted) {
      const offered: string[] = (req.body.tools ?? []).map((t: any) => t.name);
      assert.ok(!offered.some((t) => t.startsWith(TOOL_PREFIX)), `no bridge tools offered: ${offered.join(", ")}`);
    }
    // The scripted tool_use still came; claude answered it with an error, never with a result from the bridge.
    const results = scripted.flatMap(toolResults);
    assert.ok(results.length >= 1, "the scripted tool_use was answered");
    for (const r of results) {
      assert.equal(r.is_error, true, `${r.tool_use_id} should have failed: ${resultText(r)}`);
      assert.match(resultText(r), /No such tool available: mcp__clawbridge__canvas_create_node/);
    }

    assert.deepEqual(await canvas(), before, "the canvas is unchanged");
    assert.equal(canvasEvents().length, events0, "no canvas events");
  });

  test("no claude process is left behind", async () => {
    for (const home of homes) {
      const gone = await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 5_000);
      assert.ok(gone, `processes with HOME=${home} still running: ${pidsWithEnv(`HOME=${home}`).join(", ")}`);
    }
  });
});
