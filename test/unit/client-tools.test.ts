/** The client-tools room's pure parts (issue 17): the pending calls of a conversation and the model option's start-up checks. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ClientToolHub } from "../../src/backends/client-tools/sessions.js";
import { isBridgeCallId, offeredTools, trailingToolResults } from "../../src/backends/client-tools/types.js";
import { resolveConfig } from "../../src/core/config/load.js";
import { resultsThenMessage } from "../../src/request/pipeline/resume.js";
import { createLogger } from "../../src/core/log/logger.js";

const log = createLogger("silent");
const tools = [
  { name: "session_status", parameters: { type: "object" } },
  { name: "message", parameters: { type: "object" } },
];

function session() {
  const hub = new ClientToolHub(log);
  const s = hub.session("conv");
  s.tools = tools;
  const announced: string[] = [];
  s.listen((c) => {
    announced.push(c.id);
    s.announce(c.id);
  });
  return { hub, s, announced };
}

test("a call waits for the client's result; check() names the pending call for a wrong id or a missing result", async () => {
  const { hub, s, announced } = session();
  const ac = new AbortController();
  const pending = s.call("session_status", {}, ac.signal);
  assert.equal(announced.length, 1);
  const id = announced[0]!;
  assert.ok(isBridgeCallId(id) && /^[A-Za-z0-9]+$/.test(id));
  assert.match(s.check([{ id: "callX", text: "r" }])!, new RegExp(`callX.*${id} \\(session_status\\)`));
  assert.match(s.check([])!, /No tool message answers the pending call/);
  assert.equal(s.check([{ id, text: "r" }]), undefined);
  s.answer([{ id, text: "STATUS-OK" }]);
  assert.deepEqual(await pending, { content: [{ type: "text", text: "STATUS-OK" }] });
  assert.equal(hub.byToken(s.token), s, "the token finds its session");
  assert.equal(hub.byToken(`${s.token}x`), undefined);
});

test("an unknown tool, or no turn listening, is answered with an error at once", async () => {
  const { s } = session();
  const r = await s.call("exec", {}, new AbortController().signal);
  assert.equal(r.isError, true);
  s.listen(undefined);
  const r2 = await s.call("message", { to: "a" }, new AbortController().signal);
  assert.equal(r2.isError, true);
  assert.match(r2.content[0]!.text, /No turn is waiting/);
});

test("a call whose MCP request went away is joined by its repeat (same name and arguments), which gets the answer", async () => {
  const { s, announced } = session();
  const first = new AbortController();
  const p1 = s.call("message", { to: "a", text: "hi" }, first.signal);
  first.abort();
  assert.equal((await p1).isError, true, "the dropped request itself ends");
  const p2 = s.call("message", { to: "a", text: "hi" }, new AbortController().signal);
  assert.equal(announced.length, 1, "the repeat is the same call, not a new one");
  s.answer([{ id: announced[0]!, text: "SENT" }]);
  assert.equal((await p2).content[0]!.text, "SENT");
});

test("cancelAll answers every waiting call with the reason", async () => {
  const { s } = session();
  const p = s.call("session_status", {}, new AbortController().signal);
  s.cancelAll("the person moved on");
  assert.deepEqual(await p, { content: [{ type: "text", text: "the person moved on" }], isError: true });
});

test("the request's tools less the excluded ones; trailing tool results past ignored messages", () => {
  const req: any = {
    tools: [
      { type: "function", function: { name: "read", parameters: {} } },
      { type: "function", function: { name: "cron", description: "d" } },
    ],
  };
  assert.deepEqual(offeredTools(req, ["read"]), [
    { name: "cron", description: "d", parameters: { type: "object", properties: {} } },
  ]);
  const messages: any[] = [
    { role: "user", content: "hi" },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", function: { name: "cron" } }] },
    { role: "tool", tool_call_id: "c1", content: "done" },
    { role: "user", content: "INTERNAL" },
  ];
  assert.deepEqual(trailingToolResults(messages), [], "a person's message last: no results");
  assert.deepEqual(
    trailingToolResults(messages, (m) => m.content === "INTERNAL"),
    [{ id: "c1", name: "cron", text: "done" }],
  );
});

test("tool results followed by the person's new message: both, in order; the message alone or the results alone: none (issue 31 item 3)", () => {
  const asked: any[] = [
    { role: "user", content: "hi" },
    { role: "assistant", content: null, tool_calls: [{ id: "c1", function: { name: "cron" } }] },
  ];
  const both: any[] = [
    ...asked,
    { role: "tool", tool_call_id: "c1", content: "done" },
    { role: "user", content: "also this" },
    { role: "user", content: "and that" },
  ];
  assert.deepEqual(resultsThenMessage(both), {
    results: [{ id: "c1", name: "cron", text: "done" }],
    message: "also this\n\nand that",
  });
  assert.equal(resultsThenMessage([...asked, { role: "tool", tool_call_id: "c1", content: "done" }]), undefined);
  assert.equal(resultsThenMessage([...asked, { role: "user", content: "instead" }]), undefined);
  assert.equal(resultsThenMessage([{ role: "user", content: "hi" }]), undefined);
});

test("an answer with the person's message after it: the result, then the message, in one tool result", async () => {
  const { s, announced } = session();
  const pending = s.call("message", { text: "x" }, new AbortController().signal);
  assert.equal(announced.length, 1);
  s.announce(announced[0]!);
  s.answer([{ id: announced[0]!, text: "SENT" }], "MEANWHILE");
  assert.deepEqual(await pending, {
    content: [
      { type: "text", text: "SENT" },
      { type: "text", text: "MEANWHILE" },
    ],
  });
});

test("tools.mode bridge is checked at start-up: backend type, warm processes, resume mode", () => {
  const base =
    (backend: Record<string, unknown>, model: Record<string, unknown> = {}) =>
    () =>
      resolveConfig(
        { backends: { b: backend }, models: [{ id: "m", backend: "b", tools: { mode: "bridge" }, ...model }] },
        "test",
      );
  // An OpenAI-compatible upstream gets the tools themselves: "bridge" is for CLI agents.
  assert.throws(
    base({ type: "openai", baseUrl: "http://127.0.0.1:9/v1" }),
    /models\[0\]\.tools\.mode: backend type "openai" cannot offer the client's tools \("bridge" works with opencode, claude-code, gemini-cli, qwen-code, codex\)/,
  );
  for (const type of ["claude-code", "gemini-cli", "qwen-code", "codex", "opencode"]) {
    assert.throws(base({ type, warm: { enabled: false } }), /models\[0\]\.tools\.mode: needs warm processes/, type);
  }
  assert.throws(base({ type: "claude-code" }, { session: { mode: "stateless" } }), /needs session\.mode "resume"/);
  const ok = resolveConfig(
    {
      backends: { b: { type: "qwen-code" } },
      models: [{ id: "m", backend: "b", tools: { mode: "bridge", pendingTimeoutSeconds: 30 } }],
    },
    "test",
  );
  assert.equal(ok.models[0]!.tools.mode, "bridge");
  assert.equal(ok.models[0]!.tools.pendingTimeoutSeconds, 30);
  assert.ok(ok.models[0]!.tools.exclude.includes("exec"));
  assert.throws(
    () =>
      resolveConfig(
        { backends: { b: { type: "claude-code" } }, models: [{ id: "m", backend: "b", tools: { mode: "on" } }] },
        "test",
      ),
    /models\[0\]\.tools\.mode/,
  );
});
