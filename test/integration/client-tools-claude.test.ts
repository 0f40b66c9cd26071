/**
 * The client's own tools inside Claude Code (issue 17): the REAL `claude` CLI, warm, against the
 * fake Anthropic API, behind the real bridge, driven by the official `openai` client as OpenClaw
 * drives it. The fake model calls `mcp__openclaw__<tool>`; the bridge ends the response with that
 * call as a real `tool_calls` delta, the client runs it and sends the result, and the SAME claude
 * process goes on with it into the next response.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { startFakeAnthropic, type FakeAnthropic, type RecordedRequest } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { tool, ToolChat } from "../helpers/tool-chat.js";

const TOOLS = [
  tool("session_status", "Show this session's status (model, tokens, channel).", {}),
  tool("message", "Send a message to a channel.", { to: { type: "string" }, text: { type: "string", minLength: 1 } }, [
    "to",
    "text",
  ]),
  tool("memory_search", "Search OpenClaw's memory.", { query: { type: "string" } }, ["query"]),
  tool("read", "Read a file (the agent has its own: excluded by default)."),
];

interface ToolResultBlock {
  tool_use_id: string;
  is_error?: boolean;
  text: string;
}

/** The tool_result blocks of the request's last user message. */
function toolResults(req: RecordedRequest): ToolResultBlock[] {
  const last = (req.body?.messages ?? []).filter((m: any) => m?.role === "user").at(-1);
  const content: any[] = Array.isArray(last?.content) ? last.content : [];
  return content
    .filter((b) => b?.type === "tool_result")
    .map((b) => ({
      tool_use_id: b.tool_use_id,
      is_error: b.is_error,
      text: typeof b.content === "string" ? b.content : (b.content ?? []).map((c: any) => c.text ?? "").join(""),
    }));
}

/** The newest text the model is asked about: the last text block of the request's last user message (the CLI may merge several user messages into one). */
function newestText(req: RecordedRequest): string {
  const last = (req.body?.messages ?? []).filter((m: any) => m?.role === "user").at(-1);
  if (typeof last?.content === "string") return last.content;
  const texts = (Array.isArray(last?.content) ? last.content : []).filter(
    (b: any) => b?.type === "text" && !/^\s*<system-reminder>/.test(b.text),
  );
  return texts.at(-1)?.text ?? "";
}

/** Tool uses in the request's history that no tool_result answers. */
function unanswered(req: RecordedRequest): string[] {
  const blocks = (req.body?.messages ?? []).flatMap((m: any) => (Array.isArray(m.content) ? m.content : []));
  const answered = new Set(blocks.filter((b: any) => b?.type === "tool_result").map((b: any) => b.tool_use_id));
  return blocks.filter((b: any) => b?.type === "tool_use" && !answered.has(b.id)).map((b: any) => b.id);
}

/** Claude Code's own words for a tool use the user refused or interrupted: never what happened here. */
function noRefusal(req: RecordedRequest): void {
  const all = JSON.stringify(req.body?.messages ?? []);
  assert.doesNotMatch(
    all,
    /doesn't want to proceed|tool use was rejected|Request interrupted by user/,
    all.slice(-1500),
  );
}

const toolNames = (req: RecordedRequest): string[] => (req.body?.tools ?? []).map((t: any) => t.name);

describe("client tools inside Claude Code (warm, bridge mode)", () => {
  let fake: FakeAnthropic;
  let bridge: TestBridge;
  let home: string;

  before(async () => {
    fake = await startFakeAnthropic((req) => {
      const results = toolResults(req);
      const t = newestText(req);
      if (t.includes("plain"))
        return {
          kind: "text",
          chunks: [
            `plain answer; tools seen: ${toolNames(req)
              .filter((n) => n.startsWith("mcp__"))
              .join(",")}`,
          ],
        };
      if (t.includes("same tool results again")) return { kind: "text", chunks: ["answered again from what I have"] };
      if (results.some((r) => r.text.includes("HANG"))) return { kind: "hang" };
      if (results.length)
        return {
          kind: "text",
          chunks: ["Used: ", results.map((r) => `${r.tool_use_id}=${r.is_error ? "ERROR " : ""}${r.text}`).join(" | ")],
        };
      // Results handed over as text (late) are used, not asked for again.
      if (t.includes("TOOL RESULT")) return { kind: "text", chunks: [`answer from text: ${t.slice(-40)}`] };
      if (t.includes("STATUS"))
        return {
          kind: "text",
          chunks: ["Let me check. "],
          toolUses: [{ id: `toolu_s${randomUUID().slice(0, 8)}`, name: "mcp__openclaw__session_status", input: {} }],
        };
      if (t.includes("SLOW"))
        return {
          kind: "text",
          chunks: ["Thinking", " slowly", " ..."],
          delayMs: 400,
          toolUses: [{ id: "toolu_slow", name: "mcp__openclaw__session_status", input: {} }],
        };
      if (t.includes("TWO")) {
        return {
          kind: "text",
          chunks: ["Two things. "],
          toolUses: [
            { id: "toolu_two1", name: "mcp__openclaw__message", input: { to: "general", text: "hi" } },
            { id: "toolu_two2", name: "mcp__openclaw__memory_search", input: { query: "plans" } },
          ],
        };
      }
      return {
        kind: "text",
        chunks: [
          `plain answer; tools seen: ${toolNames(req)
            .filter((n) => n.startsWith("mcp__"))
            .join(",")}`,
        ],
      };
    });
    home = tempDir("cb-ct-home-");
    bridge = await startTestBridge({
      backends: {
        cc: {
          type: "claude-code",
          command: CLAUDE_BIN,
          env: claudeEnv({ baseUrl: fake.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
        },
      },
      models: [
        { id: "claude", backend: "cc", session: { mode: "resume" }, tools: { mode: "bridge" } },
        {
          id: "claude-short",
          backend: "cc",
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

  test("a tool call ends the response with tool_calls; its result goes back to the same claude process, whose answer uses it", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls", JSON.stringify(r1));
    assert.equal(r1.calls.length, 1);
    const [call] = r1.calls;
    assert.equal(call!.name, "session_status", "the client's own tool name, without the MCP prefix");
    assert.match(call!.id, /^[A-Za-z0-9]+$/, "an id of letters and digits");
    assert.deepEqual(JSON.parse(call!.arguments), {});
    assert.match(r1.text, /Let me check/);
    const pidBefore = (await health()).warm.list[0]?.pid;

    const r2 = await chat.answer(["model=fake-claude tokens=42 STATUS-OK"]);
    assert.equal(r2.finish, "stop");
    assert.match(r2.text, /Used: toolu_s\w+=model=fake-claude tokens=42 STATUS-OK/, r2.text);
    const h = await health();
    assert.equal(h.warm.list.length, 1);
    assert.equal(h.warm.list[0].pid, pidBefore, "the same warm claude process went on");

    // The model saw the client's tools under the MCP server's names, with their schemas, minus `read`.
    const first = fake.messageCalls().find((c) => c.lastUserText.includes("STATUS please"))!;
    const names = toolNames(first);
    assert.ok(
      names.includes("mcp__openclaw__session_status") && names.includes("mcp__openclaw__message"),
      names.join(","),
    );
    assert.ok(!names.includes("mcp__openclaw__read"), "tools the agent has natively are excluded");
    const msgTool = first.body.tools.find((t: any) => t.name === "mcp__openclaw__message");
    assert.deepEqual(msgTool.input_schema.required, ["to", "text"]);
    assert.equal(msgTool.input_schema.properties.text.minLength, 1);

    // The conversation goes on normally on the same process.
    const r3 = await chat.say("and now plain");
    assert.equal(r3.finish, "stop");
    assert.match(r3.text, /plain answer/);
  });

  test("two calls in one reply: each response carries the calls the CLI made (contiguous deltas), and every result reaches the model", async () => {
    // Claude Code 2.1.197 runs a reply's MCP calls one at a time here, the next only after the first
    // is answered: so each round-trip carries the calls the CLI made, however many that is.
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const results: Record<string, string> = { message: "SENT-OK", memory_search: "MEMORY-HIT" };
    const seen: string[] = [];
    let r = await chat.say("TWO things");
    for (let round = 0; round < 4 && r.finish === "tool_calls"; round++) {
      const order = r.callDeltaOrder;
      assert.deepEqual(
        order,
        [...order].sort((a, b) => a - b),
        `each call's deltas together: ${order.join(",")}`,
      );
      seen.push(...r.calls.map((c) => c.name));
      r = await chat.answer(r.calls.map((c) => results[c.name] ?? "?"));
    }
    assert.deepEqual(seen.sort(), ["memory_search", "message"]);
    assert.equal(r.finish, "stop");
    assert.match(r.text, /toolu_two1=SENT-OK/);
    assert.match(r.text, /toolu_two2=MEMORY-HIT/);
  });

  test("a tool result with a wrong tool_call_id gets a clear 400; the right one still goes through", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const r1 = await chat.say("STATUS please");
    const id = r1.calls[0]!.id;
    await assert.rejects(chat.answer(["nope"], ["callWRONGid0000000000000000"]), (err: any) => {
      assert.equal(err.status, 400);
      assert.equal(err.error?.type ?? err.type, "invalid_request_error");
      assert.match(err.message, /callWRONGid0000000000000000/);
      assert.match(err.message, new RegExp(`${id} \\(session_status\\)`), "it names the call that is pending");
      return true;
    });
    chat.messages.pop(); // the wrong tool message
    const r2 = await chat.answer(["STATUS-RIGHT"]);
    assert.equal(r2.finish, "stop");
    assert.match(r2.text, /STATUS-RIGHT/);
  });

  test("a new message while a call is pending: the call is answered saying so, then the person's message follows in it, and the same process answers (issue 31 item 2)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const before = new Set((await health()).warm.list.map((w: any) => w.pid));
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const pid = (await health()).warm.list.find((w: any) => w.busy && !before.has(w.pid))?.pid;
    assert.ok(pid, "the warm process is busy with the pending call");
    const r2 = await chat.say("never mind, MSG-INSTEAD-7 please");
    assert.equal(r2.finish, "stop");
    assert.match(r2.text, /ERROR No result: the person sent a new message instead/, r2.text);
    const req = fake.messageCalls().find((c) => toolResults(c).some((r) => r.text.includes("MSG-INSTEAD-7")))!;
    assert.ok(req, "the person's message reached the model");
    const [closed] = toolResults(req);
    assert.equal(closed!.is_error, true, "the pending tool use is closed with an error in claude's own history");
    const said = closed!.text.indexOf("MSG-INSTEAD-7");
    const result = closed!.text.indexOf("No result: the person sent a new message instead");
    assert.ok(result >= 0 && said > result, `the result saying so, then the person's message: ${closed!.text}`);
    noRefusal(req);
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid),
      "the same process took the new message",
    );
    const r3 = await chat.say("and now plain");
    assert.match(r3.text, /plain answer/);
    noRefusal(fake.messageCalls().at(-1)!);
  });

  test("a tool result and a new message in one request: the result resolves the call, the message follows it (issue 31 item 3)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    chat.messages.push({ role: "tool", tool_call_id: r1.calls[0]!.id, content: "REAL-RESULT-42" });
    const r2 = await chat.say("MSG-MEANWHILE-9 by the way");
    assert.equal(r2.finish, "stop");
    assert.match(r2.text, /Used: toolu_s\w+=REAL-RESULT-42/, r2.text);
    const req = fake.messageCalls().find((c) => toolResults(c).some((r) => r.text.includes("REAL-RESULT-42")))!;
    const [res] = toolResults(req);
    assert.notEqual(res!.is_error, true, "the call was resolved with its real result");
    assert.ok(
      res!.text.indexOf("MSG-MEANWHILE-9") > res!.text.indexOf("REAL-RESULT-42"),
      `the real result, then the person's message: ${res!.text}`,
    );
    assert.doesNotMatch(
      JSON.stringify(req.body.messages),
      /TOOL RESULT/,
      "the result is not handed over again as text",
    );
    noRefusal(req);
    assert.equal(
      fake.messageCalls().filter((c) => JSON.stringify(c.body.messages).includes("REAL-RESULT-42")).length,
      1,
      "one model call answered both",
    );
  });

  test("a tool-result request sent again after it completed gets the same answer; the model reads the result once (issue 31 item 1)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const r2 = await chat.answer(["RESENT-RESULT-5"]);
    assert.equal(r2.finish, "stop");
    assert.match(r2.text, /Used: toolu_s\w+=RESENT-RESULT-5/, r2.text);
    const calls = fake.messageCalls().length;
    // The client retries the same request (as after a network error): the same answer, no model call.
    const again = await chat.resend();
    assert.equal(again.finish, "stop");
    assert.equal(again.text, r2.text, "the same answer");
    assert.equal(fake.messageCalls().length, calls, "the model was not asked again");
    const r3 = await chat.say("and now plain");
    assert.match(r3.text, /plain answer/);
    const req = fake.messageCalls().at(-1)!;
    const blocks = (req.body.messages as any[]).flatMap((m) => (Array.isArray(m.content) ? m.content : []));
    assert.equal(
      blocks.filter((b: any) => b.type === "tool_result" && JSON.stringify(b).includes("RESENT-RESULT-5")).length,
      1,
      "claude's history holds the result once",
    );
    assert.doesNotMatch(JSON.stringify(req.body.messages), /TOOL RESULT|had already ended/, "no late-result note");
  });

  test("a tool-result request whose answer was cut off, sent again: the CLI answers again from the result it has, not given it twice; a third send replays that (issue 31 item 1)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 1500);
    const cut = await chat.answer(["HANG-THEN-AGAIN"], undefined, ac.signal).catch(() => undefined);
    clearTimeout(timer);
    assert.equal(cut?.finish, undefined, "the answer was cut off");
    const again = await chat.resend();
    assert.equal(again.finish, "stop", again.text);
    assert.match(again.text, /answered again/, again.text);
    const req = fake.messageCalls().at(-1)!;
    const all = JSON.stringify(req.body.messages);
    assert.equal(
      all.split("HANG-THEN-AGAIN").length - 1,
      1,
      `the result is in claude's history once: ${all.slice(-1500)}`,
    );
    assert.match(req.lastUserText, /sent the same tool results again/);
    const calls = fake.messageCalls().length;
    const third = await chat.resend();
    assert.equal(third.text, again.text, "the answer given again is the one replayed");
    assert.equal(fake.messageCalls().length, calls);
  });

  test("a message that offers no tools while a call is pending ends the waiting turn at once and is answered", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    // The same conversation, its next request without `tools` (the pending timeout is 600 s).
    const bare = new ToolChat(bridge.baseURL, chat.key, "claude", []);
    bare.messages.push(...chat.messages);
    const started = Date.now();
    const r2 = await bare.say("something plain now");
    assert.equal(r2.finish, "stop");
    assert.match(r2.text, /plain answer/);
    assert.ok(Date.now() - started < 30_000, "it did not wait for the pending call's timeout");
    const req = fake.messageCalls().find((c) => c.lastUserText.includes("something plain now"))!;
    assert.deepEqual(
      unanswered(req),
      [],
      "no tool use is left without its result in claude's history (the API would refuse it)",
    );
    assert.match(JSON.stringify(req.body.messages), /went on without tools/, "the call's result says what happened");
    noRefusal(req);
    assert.ok(
      await eventually(async () => (await health()).warm.list.every((w: any) => !w.busy), 10_000),
      "no process still waits on the call",
    );
  });

  test("a pending call not answered in time is given up: the CLI's turn ends, the conversation goes on, a late result arrives as text", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude-short", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    assert.ok(
      await eventually(async () => (await health()).warm.list.every((w: any) => !w.busy), 10_000),
      "the turn ended after pendingTimeoutSeconds (2 s)",
    );
    // The model read what happened as the call's result (the turn went on, unseen, with it).
    const timedOut = fake
      .messageCalls()
      .find((c) => toolResults(c).some((r) => r.text.includes("did not run the tool within 2 s")));
    assert.ok(timedOut, "the timeout's result reached the model");
    assert.equal(toolResults(timedOut!)[0]!.is_error, true);
    noRefusal(timedOut!);
    const r2 = await chat.answer(["LATE-STATUS"]);
    assert.equal(r2.finish, "stop");
    noRefusal(fake.messageCalls().at(-1)!);
    const req = fake.messageCalls().at(-1)!;
    assert.match(req.lastUserText, /had already ended/, "the CLI is told why the result comes as text");
    assert.match(req.lastUserText, /LATE-STATUS/);
    const closed = (req.body.messages as any[])
      .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((b: any) => b.type === "tool_result");
    assert.ok(
      closed.some((b: any) => b.is_error),
      "the timed-out call was closed with an error in claude's history",
    );
  });

  test("a client abort of the continuation stops the CLI's turn; the next message is answered", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    await chat.say("STATUS please");
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 1500);
    const cut = await chat.answer(["HANG"], undefined, ac.signal).catch(() => undefined);
    clearTimeout(timer);
    assert.equal(cut?.finish, undefined, "the answer was cut off by the abort");
    assert.ok(
      await eventually(async () => (await health()).warm.list.every((w: any) => !w.busy), 10_000),
      "the interrupted turn ended",
    );
    if (cut) chat.messages.pop(); // the partial answer
    chat.messages.push({ role: "assistant", content: "" });
    const r = await chat.say("plain again");
    assert.equal(r.finish, "stop");
    assert.match(r.text, /plain answer/);
    const req = fake.messageCalls().at(-1)!;
    assert.deepEqual(
      toolResults(req).map((b) => b.text),
      ["HANG"],
      "claude's history kept the answered call",
    );
    assert.match(
      JSON.stringify(req.body.messages.at(-1)),
      /Request interrupted by user/,
      "and that its turn was interrupted",
    );
  });

  test("a client abort before the call is made leaves nothing pending", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 300);
    const cut = await chat.say("SLOW status", ac.signal).catch(() => undefined);
    clearTimeout(timer);
    assert.equal(cut?.finish, undefined, "the answer was cut off by the abort");
    assert.ok(await eventually(async () => (await health()).warm.list.every((w: any) => !w.busy), 10_000));
    if (cut) chat.messages.pop();
    chat.messages.push({ role: "assistant", content: "" });
    const r = await chat.say("plain after abort");
    assert.equal(r.finish, "stop", "no stale tool call comes back");
    assert.equal(r.calls.length, 0);
  });

  test("the CLI killed (SIGKILL) while a call is pending: the result still reaches a resumed session as text", async () => {
    const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
    const before = new Set((await health()).warm.list.map((w: any) => w.pid));
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const pid = (await health()).warm.list.find((w: any) => w.busy && !before.has(w.pid))?.pid as number;
    assert.ok(pid, "this conversation's warm process waits for the call");
    process.kill(-pid, "SIGKILL");
    assert.ok(
      await eventually(async () => !(await health()).warm.list.some((w: any) => w.pid === pid), 10_000),
      "the dead process is forgotten",
    );
    const r2 = await chat.answer(["RESULT-AFTER-KILL"]);
    assert.equal(r2.finish, "stop", r2.text);
    const req = fake.messageCalls().at(-1)!;
    assert.match(req.lastUserText, /had already ended/, JSON.stringify(req.body.messages).slice(-1500));
    assert.match(req.lastUserText, /RESULT-AFTER-KILL/);
    // The person's message is still there: in the resumed session's history or, when claude's
    // transcript lost the killed turn, in the seed of a new session.
    assert.match(
      JSON.stringify(req.body.messages),
      /STATUS please/,
      "the conversation still holds the message that led to the call",
    );
  });

  test("the MCP endpoint wants a conversation's own token: 401 without one or with a wrong one", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    for (const auth of [undefined, "Bearer cbtnot-a-real-token", "Bearer k"]) {
      const res = await fetch(`${bridge.url}/mcp/client-tools`, {
        method: "POST",
        body,
        headers: auth ? { ...headers, authorization: auth } : headers,
      });
      assert.equal(res.status, 401, String(auth));
      assert.equal(((await res.json()) as any).error.code, "invalid_token");
    }
  });

  async function health(): Promise<any> {
    return (await fetch(`${bridge.url}/health`)).json();
  }
});

describe("client tools across a bridge restart", () => {
  test("a call pending when the bridge stops: after the restart the result goes on in the resumed session, nothing left over", async () => {
    const fake = await startFakeAnthropic((req) => {
      const t = req.lastUserText;
      if (toolResults(req).length === 0 && t.includes("STATUS") && !t.includes("had already ended")) {
        return {
          kind: "text",
          chunks: ["Checking. "],
          toolUses: [{ id: "toolu_restart", name: "mcp__openclaw__session_status", input: {} }],
        };
      }
      return { kind: "text", chunks: [`answer to: ${t.slice(-60)}`] };
    });
    const home = tempDir("cb-ct-rs-home-");
    const dataDir = tempDir("cb-ct-rs-data-");
    const config = {
      dataDir,
      backends: {
        cc: {
          type: "claude-code",
          command: CLAUDE_BIN,
          env: claudeEnv({ baseUrl: fake.baseUrl, home }),
          timeoutSeconds: 60,
          killGraceSeconds: 1,
        },
      },
      models: [{ id: "claude", backend: "cc", session: { mode: "resume" }, tools: { mode: "bridge" } }],
    };
    let bridge = await startTestBridge(config);
    try {
      const chat = new ToolChat(bridge.baseURL, `ct-${randomUUID()}`, "claude", TOOLS);
      const r1 = await chat.say("STATUS before restart");
      assert.equal(r1.finish, "tool_calls");
      await bridge.close(0);
      bridge = await startTestBridge(config);
      const next = new ToolChat(bridge.baseURL, chat.key, "claude", TOOLS);
      next.messages.push(...chat.messages);
      const r2 = await next.answer(["RESULT-AFTER-RESTART"]);
      assert.equal(r2.finish, "stop", r2.text);
      const req = fake.messageCalls().at(-1)!;
      assert.match(req.lastUserText, /had already ended/);
      assert.match(req.lastUserText, /RESULT-AFTER-RESTART/);
      const r3 = await next.say("and after that");
      assert.equal(r3.finish, "stop");
      assert.match(r3.text, /answer to: .*and after that/);
    } finally {
      await bridge.close(0);
      await fake.close();
      cleanup(home);
      cleanup(dataDir);
    }
  });
});
