/**
 * Warm Codex without a process: the app-server notifications of one turn (as codex 0.169.0 sends
 * them) mapped to bridge events, and the small JSON-RPC client over JSON lines.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { codexAppServerArgs, codexOptionsSchema } from "../../src/backends/codex/cli-args.js";
import type { BackendError, BackendEvent } from "../../src/backends/contract/backend.js";
import { codexErrorStatus, codexUsage, CodexTurnMapper } from "../../src/backends/codex/app-server-events.js";
import {
  classify,
  JsonRpcAborted,
  JsonRpcClient,
  JsonRpcClosed,
  JsonRpcError,
  JsonRpcTimeout,
} from "../../src/backends/warm/jsonrpc.js";

const THREAD = "01a21039-8e99-7cc0-8bbd-b300843b89a4";
const TURN = "01a21039-8eb2-78d2-b744-b83dabf8e32b";
const errorOf = (message: string, httpStatus?: number): BackendError => ({
  code: "upstream_error",
  message: `codex: ${message}${httpStatus ? ` [${httpStatus}]` : ""}`,
  status: 502,
});

function mapper(): CodexTurnMapper {
  const m = new CodexTurnMapper("codex", THREAD, errorOf);
  m.turnId = TURN;
  return m;
}

/** Feed [method, params] pairs; params get the thread and turn ids unless they carry their own. */
function feed(m: CodexTurnMapper, notes: [string, Record<string, unknown>][]): BackendEvent[] {
  const out: BackendEvent[] = [];
  for (const [method, params] of notes)
    out.push(...m.onNotification(method, { threadId: THREAD, turnId: TURN, ...params }));
  if (m.finished) out.push(...m.final());
  return out;
}

const agent = (id: string, text: string) => ({ item: { type: "agentMessage", id, text, phase: null } });
const usage = (total: [number, number], last: [number, number], cached = 0) => ({
  tokenUsage: {
    total: {
      totalTokens: total[0] + total[1],
      inputTokens: total[0],
      cachedInputTokens: cached,
      cacheWriteInputTokens: 0,
      outputTokens: total[1],
      reasoningOutputTokens: 0,
    },
    last: {
      totalTokens: last[0] + last[1],
      inputTokens: last[0],
      cachedInputTokens: 0,
      cacheWriteInputTokens: 0,
      outputTokens: last[1],
      reasoningOutputTokens: 0,
    },
    modelContextWindow: 258400,
  },
});
const completed = (status: string, error: unknown = null) => ({ turn: { id: TURN, items: [], status, error } });

test("text and reasoning deltas stream as they come; usage is this turn's share; done last", () => {
  const evs = feed(mapper(), [
    ["turn/started", { turn: { id: TURN, status: "inProgress" } }],
    ["item/started", { item: { type: "userMessage", id: "u1", content: [] } }],
    ["item/started", { item: { type: "reasoning", id: "rs1", summary: [], content: [] } }],
    ["item/reasoning/summaryPartAdded", { itemId: "rs1", summaryIndex: 0 }],
    ["item/reasoning/summaryTextDelta", { itemId: "rs1", delta: "Let me ", summaryIndex: 0 }],
    ["item/reasoning/summaryTextDelta", { itemId: "rs1", delta: "think.", summaryIndex: 0 }],
    ["item/completed", { item: { type: "reasoning", id: "rs1", summary: ["Let me think."], content: [] } }],
    ["item/started", agent("msg1", "")],
    ["item/agentMessage/delta", { itemId: "msg1", delta: "The " }],
    ["item/agentMessage/delta", { itemId: "msg1", delta: "answer." }],
    ["item/completed", agent("msg1", "The answer.")],
    // Turn 2 of the thread: codex reports the thread's total (200/18) and the last call (100/9).
    ["thread/tokenUsage/updated", usage([200, 18], [100, 9])],
    ["turn/completed", completed("completed")],
  ]);
  assert.deepEqual(evs, [
    { type: "reasoning", text: "Let me " },
    { type: "reasoning", text: "think." },
    { type: "text", text: "The " },
    { type: "text", text: "answer." },
    { type: "usage", usage: { promptTokens: 100, completionTokens: 9, totalTokens: 109 } },
    { type: "done", finishReason: "stop" },
  ]);
});

test("usage over several model calls of one turn (a tool loop) adds up from the first call's baseline", () => {
  const evs = feed(mapper(), [
    ["thread/tokenUsage/updated", usage([150, 14], [50, 5])],
    ["thread/tokenUsage/updated", usage([220, 21], [70, 7], 40)],
    ["turn/completed", completed("completed")],
  ]);
  assert.deepEqual(evs[0], {
    type: "usage",
    usage: { promptTokens: 120, completionTokens: 12, totalTokens: 132, cachedTokens: 40 },
  });
  assert.deepEqual(
    codexUsage(
      { inputTokens: 10, cachedInputTokens: 0, outputTokens: 2, reasoningOutputTokens: 1 },
      { inputTokens: 4, cachedInputTokens: 0, outputTokens: 1, reasoningOutputTokens: 0 },
    ),
    {
      promptTokens: 6,
      completionTokens: 1,
      totalTokens: 7,
      reasoningTokens: 1,
    },
  );
});

test("separate agent messages are joined with a blank line; a completed item adds only what no delta carried", () => {
  const evs = feed(mapper(), [
    ["item/agentMessage/delta", { itemId: "m1", delta: "Let me look" }],
    ["item/completed", agent("m1", "Let me look.")],
    ["item/completed", agent("m2", "Found it.")],
    ["item/agentMessage/delta", { itemId: "m3", delta: " already spaced" }],
    ["turn/completed", completed("completed")],
  ]);
  assert.deepEqual(
    evs.filter((e) => e.type === "text").map((e) => (e as { text: string }).text),
    ["Let me look", ".", "\n\nFound it.", " already spaced"],
  );
  assert.deepEqual(evs.at(-1), { type: "done", finishReason: "stop" });
});

test("command, MCP, web search and file change items become tool_activity like the cold path", () => {
  const m = mapper();
  const evs = feed(m, [
    [
      "item/started",
      {
        item: {
          type: "commandExecution",
          id: "c1",
          command: "/bin/bash -lc 'cat notes.txt'",
          status: "inProgress",
          exitCode: null,
        },
      },
    ],
    [
      "item/completed",
      {
        item: {
          type: "commandExecution",
          id: "c1",
          command: "/bin/bash -lc 'cat notes.txt'",
          status: "completed",
          exitCode: 0,
          aggregatedOutput: "hi",
        },
      },
    ],
    [
      "item/completed",
      {
        item: {
          type: "commandExecution",
          id: "c2",
          command: "touch x",
          status: "failed",
          exitCode: 1,
          aggregatedOutput: "Read-only file system",
        },
      },
    ],
    [
      "item/started",
      { item: { type: "mcpToolCall", id: "p1", server: "canvas", tool: "add_node", status: "inProgress" } },
    ],
    [
      "item/completed",
      {
        item: {
          type: "mcpToolCall",
          id: "p1",
          server: "canvas",
          tool: "add_node",
          status: "failed",
          error: { message: "no such node" },
        },
      },
    ],
    ["item/completed", { item: { type: "webSearch", id: "w1", query: "weather tallinn" } }],
    [
      "item/completed",
      {
        item: { type: "fileChange", id: "f1", changes: [{ path: "a.txt", kind: "add", diff: "" }], status: "declined" },
      },
    ],
    ["turn/completed", completed("completed")],
  ]);
  assert.deepEqual(
    evs.filter((e) => e.type === "tool_activity").map((e) => [(e as any).name, (e as any).status, (e as any).detail]),
    [
      ["shell", "started", "/bin/bash -lc 'cat notes.txt'"],
      ["shell", "completed", undefined],
      ["shell", "started", "touch x"],
      ["shell", "failed", "Read-only file system"],
      ["canvas.add_node", "started", undefined],
      ["canvas.add_node", "failed", "no such node"],
      ["web_search", "started", "weather tallinn"],
      ["web_search", "completed", undefined],
      ["apply_patch", "started", "a.txt"],
      ["apply_patch", "failed", "declined"],
    ],
  );
  assert.ok(m.produced);
});

test("a failed turn ends with the model API's message; retry notices do not end it", () => {
  const body = '{"error":{"message":"fake refused xyz","type":"invalid_request_error","param":null,"code":null}}';
  const m = mapper();
  const evs = feed(m, [
    [
      "error",
      {
        error: {
          message: "Reconnecting... 1/5",
          codexErrorInfo: { responseStreamDisconnected: { httpStatusCode: null } },
        },
        willRetry: true,
      },
    ],
    ["error", { error: { message: body, codexErrorInfo: "other" }, willRetry: false }],
    ["turn/completed", completed("failed", { message: body, codexErrorInfo: "other", additionalDetails: null })],
  ]);
  assert.deepEqual(evs, [{ type: "error", error: { code: "upstream_error", message: `codex: ${body}`, status: 502 } }]);
  assert.deepEqual(m.notes, ["Reconnecting... 1/5"]);
  const e429 = feed(mapper(), [
    [
      "turn/completed",
      completed("failed", {
        message: "exceeded retry limit",
        codexErrorInfo: { responseTooManyFailedAttempts: { httpStatusCode: 429 } },
      }),
    ],
  ]);
  assert.match((e429[0] as any).error.message, /\[429\]/, "the status codex names reaches the classifier");
  assert.equal(codexErrorStatus("unauthorized"), 401);
  assert.equal(codexErrorStatus({ httpConnectionFailed: { httpStatusCode: 503 } }), 503);
  assert.equal(codexErrorStatus("other"), undefined);
});

test("notifications of another thread or turn are ignored; an interrupt we did not ask for is an error", () => {
  const m = mapper();
  assert.deepEqual(
    m.onNotification("item/agentMessage/delta", { threadId: "other", turnId: TURN, itemId: "x", delta: "no" }),
    [],
  );
  assert.deepEqual(
    m.onNotification("item/agentMessage/delta", { threadId: THREAD, turnId: "old-turn", itemId: "x", delta: "no" }),
    [],
  );
  assert.deepEqual(
    m.onNotification("turn/completed", { threadId: THREAD, turn: { id: "old-turn", status: "completed" } }),
    [],
  );
  assert.equal(m.finished, false);
  m.onNotification("turn/completed", { threadId: THREAD, turn: { id: TURN, status: "interrupted" } });
  assert.equal(m.final()[0]?.type, "error");
  // The turn id is learnt from turn/started when turn/start's answer has not come yet.
  const early = new CodexTurnMapper("codex", THREAD, errorOf);
  early.onNotification("turn/started", { threadId: THREAD, turn: { id: TURN } });
  assert.equal(early.turnId, TURN);
});

test("JSON-RPC client: ids, answers, errors, server requests, bounded waits and the end of the process", async () => {
  const sent: any[] = [];
  let open = true;
  const rpc = new JsonRpcClient((m) => {
    if (open) sent.push(m);
    return open;
  }, 50);
  const a = rpc.request("initialize", { clientInfo: {} });
  const b = rpc.request("thread/resume", { threadId: "x" });
  assert.deepEqual(
    sent.map((m) => [m.id, m.method]),
    [
      [1, "initialize"],
      [2, "thread/resume"],
    ],
  );
  assert.equal(sent[0].jsonrpc, undefined, "codex's JSON-RPC lite: no jsonrpc member");
  for (const raw of [
    { id: 2, error: { code: -32600, message: "no rollout found for thread id x" } },
    { id: 1, result: { userAgent: "ua" } },
  ]) {
    const c = classify(raw);
    assert.equal(c.kind, "response");
    if (c.kind === "response") assert.ok(rpc.handleResponse(c));
  }
  assert.deepEqual(await a, { userAgent: "ua" });
  await assert.rejects(b, (e) => e instanceof JsonRpcError && e.code === -32600 && /no rollout/.test(e.message));
  assert.equal(classify({ id: 7, method: "item/commandExecution/requestApproval", params: {} }).kind, "request");
  assert.equal(classify({ method: "turn/started", params: {} }).kind, "notification");
  assert.equal(rpc.handleResponse({ kind: "response", id: 99, result: null }), false, "an answer nobody waits for");

  await assert.rejects(rpc.request("turn/start", {}), JsonRpcTimeout);
  const ac = new AbortController();
  const c = rpc.request("turn/start", {}, { signal: ac.signal, timeoutMs: 10_000 });
  ac.abort();
  await assert.rejects(c, JsonRpcAborted);
  const d = rpc.request("turn/interrupt", {}, { timeoutMs: 10_000 });
  rpc.close("codex exited (SIGKILL)");
  await assert.rejects(d, (e) => e instanceof JsonRpcClosed && /SIGKILL/.test(e.message));
  await assert.rejects(rpc.request("thread/start", {}), JsonRpcClosed);
  assert.equal(rpc.waiting, 0, "nothing left pending");
  open = false;
  const rpc2 = new JsonRpcClient(() => false, 10_000);
  await assert.rejects(rpc2.request("initialize", {}), JsonRpcClosed, "a process that cannot take input fails at once");
});

test("codex app-server argv: the cold path's safe settings; of the extra args only config flags", () => {
  const base = codexAppServerArgs(codexOptionsSchema.parse({}));
  assert.deepEqual(base, [
    "app-server",
    "-c",
    'sandbox_mode="read-only"',
    "-c",
    'approval_policy="never"',
    "-c",
    "features.shell_tool=false",
  ]);
  const extra = codexAppServerArgs(
    codexOptionsSchema.parse({
      shellTool: true,
      args: [
        "--full-auto",
        "-c",
        'model_reasoning_effort="low"',
        "--enable=web_search",
        "--disable",
        "plugins",
        "--oss",
      ],
    }),
  );
  assert.deepEqual(
    extra.slice(5),
    ["-c", 'model_reasoning_effort="low"', "--enable=web_search", "--disable", "plugins"],
    "exec-only flags are not given to app-server",
  );
  assert.ok(!extra.includes("features.shell_tool=false"));
  assert.equal(codexOptionsSchema.parse({}).warm.enabled, true, "warm by default");
  assert.equal(codexOptionsSchema.parse({ warm: { enabled: false } }).warm.enabled, false);
});
