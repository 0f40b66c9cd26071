/**
 * The client's own tools inside Qwen Code (issue 17): the REAL `qwen` CLI, warm, against the fake
 * OpenAI-compatible API, behind the real bridge, driven by the official `openai` client. Qwen knows
 * the bridge's MCP server from `--mcp-config` (`httpUrl`); the fake model calls
 * `mcp__openclaw__session_status` by name (qwen serves a deferred MCP tool called by name); the
 * response ends with that call; the result goes back to the same qwen process, whose answer uses it.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { QWEN_BIN, qwenEnv } from "../../testkit/fakes/cli-env.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { tool, ToolChat } from "../helpers/tool-chat.js";

const TOOLS = [
  tool("session_status", "Show this session's status."),
  tool("memory_search", "Search OpenClaw's memory.", { query: { type: "string" } }, ["query"]),
];

/** Words that would tell the model the person refused or interrupted the call: never what happened here. */
function noRefusal(req: RecordedRequest): void {
  const all = JSON.stringify(req.body?.messages ?? []);
  assert.doesNotMatch(
    all,
    /rejected|cancelled by user|Request interrupted by user|doesn't want to proceed/i,
    all.slice(-1500),
  );
}

/** The request's messages after the last one with the person's words. */
function toolMessages(req: RecordedRequest): Array<{ tool_call_id: string; content: string }> {
  const msgs: any[] = req.body?.messages ?? [];
  const out: Array<{ tool_call_id: string; content: string }> = [];
  for (let i = msgs.length - 1; i >= 0 && msgs[i].role === "tool"; i--) {
    const c = msgs[i].content;
    out.unshift({
      tool_call_id: msgs[i].tool_call_id,
      content: typeof c === "string" ? c : (c ?? []).map((p: any) => p.text ?? "").join(""),
    });
  }
  return out;
}

describe("client tools inside Qwen Code (warm, bridge mode)", () => {
  let fake: FakeOpenAI;
  let bridge: TestBridge;
  let home: string;

  before(async () => {
    fake = await startFakeOpenAI((req) => {
      const results = toolMessages(req);
      if (results.length)
        return { kind: "text", chunks: ["Used: ", results.map((r) => `${r.tool_call_id}=${r.content}`).join(" | ")] };
      if (req.lastUser.includes("STATUS"))
        return {
          kind: "tool_calls",
          calls: [{ id: "call_qs1", name: "mcp__openclaw__session_status", arguments: {} }],
        };
      return { kind: "text", chunks: ["plain answer"] };
    });
    home = tempDir("cb-ctq-home-");
    bridge = await startTestBridge({
      backends: {
        qw: {
          type: "qwen-code",
          command: QWEN_BIN,
          env: qwenEnv({ baseUrl: fake.url, home }),
          timeoutSeconds: 90,
          killGraceSeconds: 1,
        },
      },
      models: [
        { id: "qwen", backend: "qw", model: "fake-model", session: { mode: "resume" }, tools: { mode: "bridge" } },
        {
          id: "qwen-short",
          backend: "qw",
          model: "fake-model",
          session: { mode: "resume" },
          tools: { mode: "bridge", pendingTimeoutSeconds: 2 },
        },
      ],
    });
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    cleanup(home);
    if (bridge) cleanup(bridge.dataDir);
  });

  const health = async (): Promise<any> => (await fetch(`${bridge.url}/health`)).json();

  test("a tool call ends the response with tool_calls; its result goes back to the same qwen process, whose answer uses it", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctq-${randomUUID()}`, "qwen", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls", JSON.stringify(r1));
    assert.equal(r1.calls.length, 1);
    assert.equal(r1.calls[0]!.name, "session_status");
    assert.match(r1.calls[0]!.id, /^[A-Za-z0-9]+$/);
    const pid = (await health()).warm.list.find((w: any) => w.busy)?.pid;
    assert.ok(pid, "the warm qwen process waits for the call");

    const r2 = await chat.answer(["model=fake-qwen QWEN-STATUS-OK"]);
    assert.equal(r2.finish, "stop", r2.text);
    assert.match(r2.text, /Used: call_qs1=model=fake-qwen QWEN-STATUS-OK/);
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid),
      "the same qwen process went on",
    );

    // The model was offered the tool by qwen (listed as deferred, or loaded), under the MCP server's name.
    const first = fake.mainRequests().find((r) => r.lastUser.includes("STATUS please"))!;
    assert.match(JSON.stringify(first.body), /mcp__openclaw__session_status/);

    const r3 = await chat.say("and now plain");
    assert.equal(r3.finish, "stop");
    assert.match(r3.text, /plain answer/);
  });

  test("a wrong tool_call_id gets a clear 400; a new message instead answers the call saying so, then the person's message follows in it (issue 31 item 2); nothing is left busy", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctq-${randomUUID()}`, "qwen", TOOLS);
    const r1 = await chat.say("STATUS again");
    assert.equal(r1.finish, "tool_calls");
    await assert.rejects(
      chat.answer(["x"], ["callNOTPENDING000000000000"]),
      (err: any) => err.status === 400 && /callNOTPENDING/.test(err.message),
    );
    chat.messages.pop();
    const r2 = await chat.say("something plain instead QMSG-5");
    assert.equal(r2.finish, "stop");
    const req = fake.mainRequests().find((r) => toolMessages(r).some((t) => t.content.includes("QMSG-5")));
    assert.ok(req, `the person's message reached the model in the call's result: ${r2.text}`);
    const text = toolMessages(req!)[0]!.content;
    const result = text.indexOf("No result: the person sent a new message instead");
    assert.ok(result >= 0 && text.indexOf("QMSG-5") > result, text);
    noRefusal(req!);
    assert.ok(await eventually(async () => (await health()).warm.list.every((w: any) => !w.busy), 10_000));
  });

  test("a tool result and a new message in one request: the result resolves the call, the message follows it (issue 31 item 3)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctq-${randomUUID()}`, "qwen", TOOLS);
    const r1 = await chat.say("STATUS now");
    assert.equal(r1.finish, "tool_calls");
    chat.messages.push({ role: "tool", tool_call_id: r1.calls[0]!.id, content: "QREAL-RESULT-3" });
    const r2 = await chat.say("QMEANWHILE-4 too");
    assert.equal(r2.finish, "stop");
    assert.match(r2.text, /Used: call_qs1=QREAL-RESULT-3/, r2.text);
    const req = fake.mainRequests().find((r) => toolMessages(r).some((t) => t.content.includes("QREAL-RESULT-3")))!;
    const text = toolMessages(req)[0]!.content;
    assert.ok(text.indexOf("QMEANWHILE-4") > text.indexOf("QREAL-RESULT-3"), text);
    assert.doesNotMatch(JSON.stringify(req.body.messages), /TOOL RESULT/);
    noRefusal(req);
  });

  test("a tool-result request sent again after it completed gets the same answer; the model reads the result once (issue 31 item 1)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctq-${randomUUID()}`, "qwen", TOOLS);
    const r1 = await chat.say("STATUS twice");
    assert.equal(r1.finish, "tool_calls");
    const r2 = await chat.answer(["QRESENT-RESULT-8"]);
    assert.match(r2.text, /Used: call_qs1=QRESENT-RESULT-8/, r2.text);
    const calls = fake.mainRequests().length;
    const again = await chat.resend();
    assert.equal(again.finish, "stop");
    assert.equal(again.text, r2.text, "the same answer");
    assert.equal(fake.mainRequests().length, calls, "the model was not asked again");
    const r3 = await chat.say("plain after the resend");
    assert.equal(r3.finish, "stop");
    const req = fake.mainRequests().at(-1)!;
    assert.equal(
      (req.body.messages as any[]).filter(
        (m) => m.role === "tool" && JSON.stringify(m.content).includes("QRESENT-RESULT-8"),
      ).length,
      1,
      "qwen's history holds the result once",
    );
    assert.doesNotMatch(JSON.stringify(req.body.messages), /TOOL RESULT|had already ended/);
  });

  test("a pending call not answered in time: the model reads that it timed out as the call's result (issue 31 item 2)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctq-${randomUUID()}`, "qwen-short", TOOLS);
    const r1 = await chat.say("STATUS late");
    assert.equal(r1.finish, "tool_calls");
    assert.ok(
      await eventually(
        async () =>
          fake
            .mainRequests()
            .some((r) => toolMessages(r).some((t) => t.content.includes("did not run the tool within 2 s"))),
        15_000,
      ),
      "the timeout's result reached the model",
    );
    assert.ok(await eventually(async () => (await health()).warm.list.every((w: any) => !w.busy), 10_000));
    const r2 = await chat.say("plain after the timeout");
    assert.equal(r2.finish, "stop");
    noRefusal(fake.mainRequests().at(-1)!);
  });
});
