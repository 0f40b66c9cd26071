/**
 * The client's own tools inside the Gemini CLI (issue 17): the REAL `gemini --acp`, warm, against
 * the fake Gemini API, behind the real bridge, driven by the official `openai` client as OpenClaw
 * drives it. gemini gets the bridge's MCP server in its ACP session (`mcpServers`, type http) and
 * offers the tools to the model as `mcp_openclaw_<tool>`; the fake model calls one; the bridge
 * allows gemini's permission request for it, ends the response with that call as a `tool_calls`
 * delta, and the SAME gemini process goes on with the client's result into the next response.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { GEMINI_BIN, geminiEnv } from "../../testkit/fakes/cli-env.js";
import { startFakeGemini, type FakeGemini, type RecordedGeminiRequest } from "../../testkit/fakes/gemini-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { tool, ToolChat } from "../helpers/tool-chat.js";

const TOOLS = [
  tool("session_status", "Show this session's status (model, tokens, channel).", {}),
  tool("memory_search", "Search OpenClaw's memory.", { query: { type: "string" } }, ["query"]),
  tool("read", "Read a file (the agent has its own: excluded by default)."),
];

/** The function responses of the request's last content (gemini sends a tool's result as one). */
function functionResponses(req: RecordedGeminiRequest): Array<{ name: string; response: any }> {
  const last = (req.body?.contents ?? []).at(-1);
  if (last?.role !== "user") return [];
  return (last.parts ?? []).filter((p: any) => p?.functionResponse).map((p: any) => p.functionResponse);
}

/** Every function response anywhere in the request's history. */
function allFunctionResponses(req: RecordedGeminiRequest): Array<{ name: string; response: any }> {
  return (req.body?.contents ?? []).flatMap((c: any) =>
    (c?.parts ?? []).filter((p: any) => p?.functionResponse).map((p: any) => p.functionResponse),
  );
}

/** The function calls in the history gemini sends. */
function allFunctionCalls(req: RecordedGeminiRequest): Array<{ name: string }> {
  return (req.body?.contents ?? []).flatMap((c: any) =>
    (c?.parts ?? []).filter((p: any) => p?.functionCall).map((p: any) => p.functionCall),
  );
}

/** The function declarations gemini offered the model. */
const declared = (req: RecordedGeminiRequest): any[] =>
  (req.body?.tools ?? []).flatMap((t: any) => t?.functionDeclarations ?? []);

describe("client tools inside the Gemini CLI (warm, bridge mode)", () => {
  let fake: FakeGemini;
  let bridge: TestBridge;
  let home: string;

  before(async () => {
    fake = await startFakeGemini((req) => {
      if (req.action !== "streamGenerateContent") return { kind: "text", chunks: ["side"] };
      const t = req.lastUserText;
      const results = functionResponses(req);
      if (results.some((r) => JSON.stringify(r.response).includes("HANG"))) return { kind: "hang" };
      if (results.length)
        return {
          kind: "text",
          chunks: ["Used: ", results.map((r) => `${r.name}=${JSON.stringify(r.response)}`).join(" | ")],
        };
      if (t.includes("TOOL RESULT")) return { kind: "text", chunks: [`answer from text: ${t.slice(-40)}`] };
      if (t.includes("plain")) return { kind: "text", chunks: ["plain answer"] };
      if (t.includes("STATUS"))
        return {
          kind: "text",
          chunks: ["Let me check. "],
          functionCalls: [{ name: "mcp_openclaw_session_status", args: {} }],
        };
      return { kind: "text", chunks: ["plain answer"] };
    });
    home = tempDir("cb-ctg-home-");
    bridge = await startTestBridge({
      backends: {
        gm: {
          type: "gemini-cli",
          command: GEMINI_BIN,
          env: geminiEnv({ baseUrl: fake.baseUrl, home }),
          timeoutSeconds: 90,
          killGraceSeconds: 1,
        },
      },
      models: [
        { id: "gemini", backend: "gm", session: { mode: "resume" }, tools: { mode: "bridge" } },
        {
          id: "gemini-short",
          backend: "gm",
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
  const busyPids = async (): Promise<number[]> =>
    (await health()).warm.list.filter((w: any) => w.busy).map((w: any) => w.pid);

  test("a tool call ends the response with tool_calls; its result goes back to the same gemini process, whose answer uses it", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctg-${randomUUID()}`, "gemini", TOOLS);
    const n0 = fake.turnCalls().length;
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls", JSON.stringify(r1));
    assert.equal(r1.calls.length, 1);
    const [call] = r1.calls;
    assert.equal(call!.name, "session_status", "the client's own tool name, without gemini's MCP prefix");
    assert.match(call!.id, /^[A-Za-z0-9]+$/, "an id of letters and digits");
    assert.deepEqual(JSON.parse(call!.arguments), {});
    assert.match(r1.text, /Let me check/);
    const busy = await busyPids();
    assert.equal(busy.length, 1, "the warm gemini process waits for the call");
    const pid = busy[0]!;

    const r2 = await chat.answer(["model=fake-gemini tokens=42 STATUS-OK"]);
    assert.equal(r2.finish, "stop", r2.text);
    assert.match(r2.text, /Used: mcp_openclaw_session_status=.*model=fake-gemini tokens=42 STATUS-OK/, r2.text);
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid && !w.busy),
      "the same gemini process went on, and is idle again",
    );

    // The model request after the call carries the client's result as gemini's function response.
    const [q1, q2] = fake.turnCalls().slice(n0);
    assert.ok(q1 && q2, "two model calls");
    assert.deepEqual(
      functionResponses(q2).map((r) => r.name),
      ["mcp_openclaw_session_status"],
    );
    assert.match(JSON.stringify(functionResponses(q2)[0]!.response), /STATUS-OK/);
    // The model was offered the client's tools under gemini's MCP names, with their schemas, minus `read`.
    const names = declared(q1).map((d) => d.name);
    assert.ok(
      names.includes("mcp_openclaw_session_status") && names.includes("mcp_openclaw_memory_search"),
      names.join(","),
    );
    assert.ok(!names.includes("mcp_openclaw_read"), "tools the agent has natively are excluded");
    const search = declared(q1).find((d) => d.name === "mcp_openclaw_memory_search");
    assert.deepEqual((search.parametersJsonSchema ?? search.parameters)?.required, ["query"]);

    // The conversation goes on normally on the same process.
    const r3 = await chat.say("and now plain");
    assert.equal(r3.finish, "stop");
    assert.match(r3.text, /plain answer/);
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid),
      "still the same process",
    );
  });

  test("a new message while a call is pending answers the call saying so, then the person's message follows in it; gemini answers it (issue 31 item 2)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctg-${randomUUID()}`, "gemini", TOOLS);
    const before = new Set((await health()).warm.list.map((w: any) => w.pid));
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const pid = (await health()).warm.list.find((w: any) => w.busy && !before.has(w.pid))?.pid;
    assert.ok(pid, "the warm process is busy with the pending call");
    const r2 = await chat.say("never mind, something plain");
    assert.equal(r2.finish, "stop", r2.text);
    assert.match(r2.text, /No result: the person sent a new message instead/, r2.text);
    assert.equal(r2.calls.length, 0);
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid && !w.busy),
      "the same process took the new message, and is idle again",
    );
    const req = fake.turnCalls().find((c) => JSON.stringify(allFunctionResponses(c)).includes("never mind"))!;
    assert.ok(req, "the new message reached the model");
    assert.ok(
      !allFunctionResponses(req).some((r) => /STATUS-OK/.test(JSON.stringify(r.response))),
      "no result was made up for the cancelled call",
    );
    // Gemini's API refuses a history with a call and no response: the cancelled call has one (the bridge's error).
    assert.ok(allFunctionCalls(req).length >= 1, "the cancelled call is in gemini's history");
    assert.equal(allFunctionResponses(req).length, allFunctionCalls(req).length, JSON.stringify(req.body?.contents));
    assert.match(JSON.stringify(allFunctionResponses(req)), /No result: the person sent a new message instead/);
  });

  test("a pending call not answered in time is given up: gemini's turn ends, the conversation goes on, a late result arrives as text", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctg-${randomUUID()}`, "gemini-short", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    assert.ok((await busyPids()).length >= 1, "a process waits for the call");
    assert.ok(
      await eventually(async () => (await busyPids()).length === 0, 15_000),
      "the turn ended after pendingTimeoutSeconds (2 s)",
    );
    const r2 = await chat.answer(["LATE-STATUS"]);
    assert.equal(r2.finish, "stop", r2.text);
    assert.match(r2.text, /answer from text/);
    const req = fake.turnCalls().at(-1)!;
    assert.match(req.lastUserText, /had already ended/, "gemini is told why the result comes as text");
    assert.match(req.lastUserText, /LATE-STATUS/);
    const r3 = await chat.say("and plain again");
    assert.equal(r3.finish, "stop");
    assert.match(r3.text, /plain answer/);
  });

  test("a client abort of the resumed response cancels gemini's turn; the next message is answered on the same process", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctg-${randomUUID()}`, "gemini", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const [pid] = await busyPids();
    assert.ok(pid);
    const n0 = fake.turnCalls().length;
    const ac = new AbortController();
    const cut = chat.answer(["HANG"], undefined, ac.signal).catch(() => undefined);
    assert.ok(
      await eventually(() => fake.turnCalls().length > n0, 15_000),
      "gemini took the result to the model, which hangs",
    );
    ac.abort();
    const partial = await cut;
    assert.equal(partial?.finish, undefined, "the answer was cut off by the abort");
    assert.ok(await eventually(async () => (await busyPids()).length === 0, 10_000), "the cancelled turn ended");
    if (partial) chat.messages.pop();
    chat.messages.push({ role: "assistant", content: "" });
    const r = await chat.say("plain after the abort");
    assert.equal(r.finish, "stop", r.text);
    assert.equal(r.calls.length, 0, "no stale tool call comes back");
    assert.match(r.text, /plain answer/);
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid),
      "the same process took the next message",
    );
  });
});
