/**
 * The client's own tools inside OpenCode (issue 17): the REAL `opencode serve` (npm opencode-ai),
 * warm, against the fake OpenAI-compatible API, behind the real bridge, driven by the official
 * `openai` client as OpenClaw drives it. A resumed conversation has an `opencode serve` of its own,
 * given the bridge's MCP server through its API (`POST /mcp`, the conversation's token as a header);
 * OpenCode names the tools `openclaw_<tool>`, and the fake model calls them by those names. The
 * response ends with the call as a real `tool_calls` delta; the client's result goes back to the
 * SAME server, whose answer uses it. OpenCode is configured to ask permission for every tool
 * (`"*": "ask"`): the client's tools are approved by the bridge, any other is refused.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { conversationWorkDir } from "../../src/core/util/workdir.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { tool, ToolChat } from "../helpers/tool-chat.js";

const TOOLS = [
  tool("session_status", "Show this session's status (model, tokens, channel).", {}),
  tool("memory_search", "Search OpenClaw's memory.", { query: { type: "string" } }, ["query"]),
  tool("read", "Read a file (the agent has its own: excluded by default)."),
];

/** The request's trailing tool messages (the results of the assistant's last calls). */
function toolMessages(req: RecordedRequest): Array<{ tool_call_id: string; content: string }> {
  const msgs: any[] = req.body?.messages ?? [];
  const out: Array<{ tool_call_id: string; content: string }> = [];
  for (let i = msgs.length - 1; i >= 0 && msgs[i].role === "tool"; i--)
    out.unshift({ tool_call_id: msgs[i].tool_call_id, content: textOf(msgs[i].content) });
  return out;
}

function textOf(c: unknown): string {
  return typeof c === "string" ? c : Array.isArray(c) ? c.map((p: any) => p?.text ?? "").join("") : "";
}

const toolNames = (req: RecordedRequest): string[] => (req.body?.tools ?? []).map((t: any) => t.function?.name);

describe("client tools inside OpenCode (warm opencode serve, bridge mode)", () => {
  let fake: FakeOpenAI;
  let bridge: TestBridge;
  let home: string;

  before(async () => {
    fake = await startFakeOpenAI((req) => {
      const results = toolMessages(req);
      const t = req.lastUser;
      if (results.some((r) => r.content.includes("HANG"))) return { kind: "hang" };
      if (results.length)
        return { kind: "text", chunks: ["Used: ", results.map((r) => `${r.tool_call_id}=${r.content}`).join(" | ")] };
      // Results handed over as text (late) are used, not asked for again.
      if (t.includes("had already ended")) return { kind: "text", chunks: [`answer from text: ${t.slice(-40)}`] };
      if (t.includes("plain"))
        return {
          kind: "text",
          chunks: [
            `plain answer; tools seen: ${toolNames(req)
              .filter((n) => n.startsWith("openclaw_"))
              .join(",")}`,
          ],
        };
      if (t.includes("TWO")) {
        return {
          kind: "tool_calls",
          calls: [
            { id: "call_two1", name: "openclaw_session_status", arguments: {} },
            { id: "call_two2", name: "openclaw_memory_search", arguments: { query: "plans" } },
          ],
        };
      }
      if (t.includes("SHELL"))
        return {
          kind: "tool_calls",
          calls: [{ id: "call_sh", name: "bash", arguments: { command: "touch PWNED", description: "make a file" } }],
        };
      if (t.includes("STATUS"))
        return {
          kind: "tool_calls",
          content: "Let me check.",
          calls: [{ id: `call_s${randomUUID().slice(0, 8)}`, name: "openclaw_session_status", arguments: {} }],
        };
      return { kind: "text", chunks: ["plain answer"] };
    });
    home = tempDir("cb-cto-home-");
    bridge = await startTestBridge({
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          // Every tool asks first: nobody can answer, so only what the bridge approves runs.
          env: opencodeEnv(fake.url, home, ["m1"], { permission: { "*": "ask" } }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
        },
      },
      models: [
        { id: "oc", backend: "oc", model: "fake/m1", session: { mode: "resume" }, tools: { mode: "bridge" } },
        {
          id: "oc-short",
          backend: "oc",
          model: "fake/m1",
          session: { mode: "resume" },
          tools: { mode: "bridge", pendingTimeoutSeconds: 2 },
        },
        { id: "oc-resume", backend: "oc", model: "fake/m1", session: { mode: "resume" } },
      ],
    });
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    assert.ok(
      await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 15_000),
      "no opencode process left after the bridge closed",
    );
    cleanup(home);
    if (bridge) cleanup(bridge.dataDir);
  });

  const health = async (): Promise<any> => (await fetch(`${bridge.url}/health`)).json();
  const busyPids = async (): Promise<number[]> =>
    (await health()).warm.list.filter((w: any) => w.busy).map((w: any) => w.pid);
  const livePids = async (): Promise<number[]> => (await health()).warm.list.map((w: any) => w.pid);

  test("a tool call ends the response with tool_calls; its result goes back to the same opencode serve, whose answer uses it", async () => {
    const chat = new ToolChat(bridge.baseURL, `cto-${randomUUID()}`, "oc", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls", JSON.stringify(r1));
    assert.equal(r1.calls.length, 1);
    const [call] = r1.calls;
    assert.equal(call!.name, "session_status", "the client's own tool name, without OpenCode's server prefix");
    assert.match(call!.id, /^[A-Za-z0-9]+$/, "an id of letters and digits");
    assert.deepEqual(JSON.parse(call!.arguments), {});
    assert.match(r1.text, /Let me check/);
    const busy = await busyPids();
    assert.equal(busy.length, 1, "the conversation's opencode serve waits on the call");
    const pid = busy[0]!;

    const r2 = await chat.answer(["model=fake-oc tokens=42 STATUS-OK"]);
    assert.equal(r2.finish, "stop", r2.text);
    assert.match(
      r2.text,
      /^Used: call_s\w+=model=fake-oc tokens=42 STATUS-OK$/,
      "the model got the client's result, and the new response starts with its answer",
    );
    assert.ok((await livePids()).includes(pid), "the same opencode serve went on");

    // The model saw the client's tools under OpenCode's names, with their schemas, minus `read`.
    const first = fake.mainRequests().find((r) => r.lastUser.includes("STATUS please"))!;
    const names = toolNames(first);
    assert.ok(names.includes("openclaw_session_status") && names.includes("openclaw_memory_search"), names.join(","));
    assert.ok(!names.includes("openclaw_read"), "tools the agent has natively are excluded");
    const search = first.body.tools.find((t: any) => t.function.name === "openclaw_memory_search");
    assert.deepEqual(search.function.parameters.required, ["query"]);

    // The conversation goes on normally on the same server.
    const r3 = await chat.say("and now plain");
    assert.equal(r3.finish, "stop");
    assert.match(r3.text, /plain answer; tools seen: .*openclaw_session_status/);
    assert.ok((await livePids()).includes(pid));
    assert.ok(await eventually(async () => !(await busyPids()).includes(pid), 10_000), "nothing left busy");
  });

  test("two calls in one reply come in one response (contiguous deltas), and both results reach the model", async () => {
    const chat = new ToolChat(bridge.baseURL, `cto-${randomUUID()}`, "oc", TOOLS);
    const r1 = await chat.say("TWO things");
    assert.equal(r1.finish, "tool_calls", JSON.stringify(r1));
    assert.deepEqual(
      r1.calls.map((c) => c.name).sort(),
      ["memory_search", "session_status"],
      "OpenCode runs a reply's calls together: one response carries both",
    );
    const order = r1.callDeltaOrder;
    assert.deepEqual(
      order,
      [...order].sort((a, b) => a - b),
      `each call's deltas together: ${order.join(",")}`,
    );
    const search = r1.calls.find((c) => c.name === "memory_search")!;
    assert.deepEqual(JSON.parse(search.arguments), { query: "plans" });
    const results: Record<string, string> = { session_status: "STATUS-OK", memory_search: "MEMORY-HIT" };
    const r2 = await chat.answer(r1.calls.map((c) => results[c.name]!));
    assert.equal(r2.finish, "stop", r2.text);
    assert.match(r2.text, /call_two1=STATUS-OK/);
    assert.match(r2.text, /call_two2=MEMORY-HIT/);
  });

  test("a new message while a call is pending: the call is answered saying so, then the person's message follows in it, and the session's turn answers it (issue 31 item 2)", async () => {
    const chat = new ToolChat(bridge.baseURL, `cto-${randomUUID()}`, "oc", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const busy = await busyPids();
    assert.equal(busy.length, 1);
    const pid = busy[0]!;
    const r2 = await chat.say("never mind, something plain");
    assert.equal(r2.finish, "stop", r2.text);
    assert.match(r2.text, /No result: the person sent a new message instead/, r2.text);
    assert.ok((await livePids()).includes(pid), "the same opencode serve took the new message");
    const req = fake.mainRequests().find((r) => JSON.stringify(r.body.messages).includes("never mind"))!;
    const msgs: any[] = req.body.messages;
    const asked = msgs.find(
      (m) => m.role === "assistant" && m.tool_calls?.some((c: any) => c.function?.name === "openclaw_session_status"),
    );
    assert.ok(asked, "OpenCode's history kept the call");
    const closed = msgs.find((m) => m.role === "tool" && m.tool_call_id === asked.tool_calls[0].id);
    assert.ok(closed, "and closed it with a result");
    assert.doesNotMatch(textOf(closed.content), /STATUS-OK/);
    assert.match(
      textOf(closed.content),
      /No result: the person sent a new message instead[\s\S]*never mind/,
      textOf(closed.content),
    );
    assert.ok(await eventually(async () => !(await busyPids()).includes(pid), 10_000), "nothing left busy");
  });

  test("a pending call not answered in time is given up: OpenCode's turn ends, the conversation goes on, a late result arrives as text", async () => {
    const chat = new ToolChat(bridge.baseURL, `cto-${randomUUID()}`, "oc-short", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const busy = await busyPids();
    assert.equal(busy.length, 1);
    const pid = busy[0]!;
    assert.ok(
      await eventually(async () => !(await busyPids()).includes(pid), 10_000),
      "the turn ended after pendingTimeoutSeconds (2 s)",
    );
    assert.ok((await livePids()).includes(pid), "the server was not killed for it");
    const r2 = await chat.answer(["LATE-STATUS"]);
    assert.equal(r2.finish, "stop", r2.text);
    const req = fake.mainRequests().at(-1)!;
    assert.match(req.lastUser, /had already ended/, "the CLI is told why the result comes as text");
    assert.match(req.lastUser, /LATE-STATUS/);
    assert.match(r2.text, /answer from text/);
    assert.ok((await livePids()).includes(pid), "the same server went on");
    const r3 = await chat.say("and now plain");
    assert.equal(r3.finish, "stop");
    assert.match(r3.text, /plain answer/);
  });

  test("a client abort of the continuation aborts the session's turn; the next message is answered on the same server", async () => {
    const chat = new ToolChat(bridge.baseURL, `cto-${randomUUID()}`, "oc", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const pid = (await busyPids())[0]!;
    const n0 = fake.mainRequests().length;
    const ac = new AbortController();
    const cut = chat.answer(["HANG"], undefined, ac.signal).catch(() => undefined);
    // The result reached the model (which hangs): now the client goes away.
    assert.ok(
      await eventually(() => fake.mainRequests().length > n0 && fake.openConnections() > 0, 30_000),
      "the model was asked with the result",
    );
    ac.abort();
    const res = await cut;
    assert.equal(res?.finish, undefined, "the answer was cut off by the abort");
    assert.ok(
      await eventually(() => fake.openConnections() === 0, 10_000),
      "OpenCode dropped the model request (the resumed turn was aborted, on the new response's signal)",
    );
    assert.ok(await eventually(async () => !(await busyPids()).includes(pid), 10_000), "the interrupted turn ended");
    if (res) chat.messages.pop();
    chat.messages.push({ role: "assistant", content: "" });
    const r = await chat.say("plain again");
    assert.equal(r.finish, "stop", r.text);
    assert.match(r.text, /plain answer/);
    assert.ok((await livePids()).includes(pid), "the same server went on");
  });

  test("the conversation's server killed (SIGKILL) while a call is pending: the result reaches the session, resumed on a new server, as text", async () => {
    const chat = new ToolChat(bridge.baseURL, `cto-${randomUUID()}`, "oc", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const pid = (await busyPids())[0]!;
    process.kill(-pid, "SIGKILL");
    assert.ok(await eventually(async () => !(await livePids()).includes(pid), 10_000), "the dead server is forgotten");
    const r2 = await chat.answer(["RESULT-AFTER-KILL"]);
    assert.equal(r2.finish, "stop", r2.text);
    const req = fake.mainRequests().at(-1)!;
    assert.match(req.lastUser, /had already ended/);
    assert.match(req.lastUser, /RESULT-AFTER-KILL/);
    assert.match(
      JSON.stringify(req.body.messages),
      /STATUS please/,
      "the new server went on with the conversation's OpenCode session",
    );
    assert.ok(!(await livePids()).includes(pid));
  });

  test("resume mode without the client's tools: the next turn goes on in the same OpenCode session on the conversation's server, sent only the new message", async () => {
    const chat = new ToolChat(bridge.baseURL, `cto-${randomUUID()}`, "oc-resume", []);
    const r1 = await chat.say("first plain words");
    assert.equal(r1.finish, "stop", r1.text);
    assert.match(r1.text, /plain answer; tools seen: $/, "no client tools offered");
    const pids = await livePids();
    const r2 = await chat.say("second plain words");
    assert.equal(r2.finish, "stop", r2.text);
    const req = fake.mainRequests().at(-1)!;
    const msgs: any[] = req.body.messages;
    assert.match(req.lastUser, /second plain words/);
    assert.doesNotMatch(req.lastUser, /first plain words/, "only the new message is sent");
    assert.ok(
      msgs.some((m) => m.role === "user" && textOf(m.content).includes("first plain words")),
      "OpenCode's session holds the first turn",
    );
    assert.ok(
      msgs.some((m) => m.role === "assistant" && textOf(m.content).includes("plain answer")),
      "and its answer",
    );
    assert.deepEqual((await livePids()).sort(), pids.sort(), "the conversation's server served both turns");
  });

  test("OpenCode's own tools still need a permission nobody gives: a shell command the model asks for is refused", async () => {
    const key = `cto-${randomUUID()}`;
    const chat = new ToolChat(bridge.baseURL, key, "oc", TOOLS);
    const r = await chat.say("SHELL please");
    assert.equal(r.calls.length, 0, "OpenCode's own tool is not the client's: no tool_calls");
    assert.notEqual(r.finish, "tool_calls");
    const cwd = conversationWorkDir(bridge.dataDir, key);
    assert.ok(existsSync(cwd), "the conversation's directory");
    assert.ok(!existsSync(path.join(cwd, "PWNED")), `the command did not run (${readdirSync(cwd).join(",")})`);
    assert.ok(await eventually(async () => (await busyPids()).length === 0, 10_000), "nothing left busy");
  });
});
