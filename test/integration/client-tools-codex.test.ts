/**
 * The client's own tools inside Codex (issue 17): the REAL `codex app-server` (warm), against the
 * fake Responses API, behind the real bridge, driven by the official `openai` client as OpenClaw
 * drives it. codex knows the bridge's MCP endpoint as `mcp_servers.openclaw` (`-c` overrides, the
 * token from an environment variable) and offers its tools to the model inside a `namespace` tool
 * `mcp__openclaw`; the fake model calls `session_status` in that namespace. The response ends with
 * that call as a real `tool_calls` delta, the client runs it and sends the result, and the SAME
 * codex process goes on with it into the next response.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { codexBackend } from "../../src/backends/codex/backend.js";
import {
  CODEX_CLIENT_TOOLS_TOKEN_ENV,
  codexAppServerArgs,
  codexOptionsSchema,
} from "../../src/backends/codex/cli-args.js";
import { cliCallTimeoutMs } from "../../src/backends/client-tools/types.js";
import {
  responsesText,
  startFakeResponses,
  type FakeResponses,
  type RecordedResponsesRequest,
} from "../../testkit/fakes/responses-api.js";
import { CODEX_BIN, codexEnv } from "../../testkit/fakes/cli-env.js";
import { cleanup, eventually, startTestBridge, tempDir, within, type TestBridge } from "../helpers/bridge.js";
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
const NS = "mcp__openclaw";

interface CallOutput {
  callId: string;
  text: string;
}

/** A `function_call_output`'s text (codex sends a string, or input_text parts after a "Wall time" line). */
function outputText(output: unknown): string {
  if (typeof output === "string") return output;
  if (!Array.isArray(output)) return "";
  return output
    .filter((p) => !(typeof p?.text === "string" && p.text.startsWith("Wall time:")))
    .map((p) => responsesText([p]))
    .join("");
}

const inputOf = (req: RecordedResponsesRequest): any[] => (Array.isArray(req.body?.input) ? req.body.input : []);

/** The function call outputs after the request's last user message: the results this model call is asked about. */
function trailingOutputs(req: RecordedResponsesRequest): CallOutput[] {
  const input = inputOf(req);
  let i = input.length - 1;
  while (i >= 0 && !(input[i]?.type === "message" && input[i]?.role === "user")) i--;
  return input
    .slice(i + 1)
    .filter((x) => x?.type === "function_call_output")
    .map((x) => ({ callId: String(x.call_id), text: outputText(x.output) }));
}

/** Every function call output in the request (the thread's history included). */
const allOutputs = (req: RecordedResponsesRequest): CallOutput[] =>
  inputOf(req)
    .filter((x) => x?.type === "function_call_output")
    .map((x) => ({ callId: String(x.call_id), text: outputText(x.output) }));

const call = (name: string, args: unknown, callId = `call_${randomUUID().replace(/-/g, "").slice(0, 12)}`) => ({
  name,
  namespace: NS,
  arguments: args,
  callId,
});

describe("client tools inside Codex (warm app-server, bridge mode)", () => {
  let fake: FakeResponses;
  let bridge: TestBridge;
  let home: string;
  let askHome: string;
  let askHome2: string;

  before(async () => {
    fake = await startFakeResponses((req) => {
      const results = trailingOutputs(req);
      const t = req.lastUserText;
      if (results.some((r) => r.text.includes("HANG"))) return { kind: "hang" };
      if (results.length)
        return { kind: "text", chunks: ["Used: ", results.map((r) => `${r.callId}=${r.text}`).join(" | ")] };
      // Results handed over as text (late) are used, not asked for again.
      if (t.includes("TOOL RESULT")) return { kind: "text", chunks: [`answer from text: ${t.slice(-40)}`] };
      if (t.includes("STATUS"))
        return { kind: "text", chunks: ["Let me check. "], functionCalls: [call("session_status", {})] };
      if (t.includes("TWO"))
        return {
          kind: "text",
          chunks: ["Two things. "],
          functionCalls: [
            call("message", { to: "general", text: "hi" }, "call_two1"),
            call("memory_search", { query: "plans" }, "call_two2"),
          ],
        };
      return { kind: "text", chunks: ["plain answer"] };
    });
    home = tempDir("cb-ctc-home-");
    askHome = tempDir("cb-ctc-ask-");
    askHome2 = tempDir("cb-ctc-ask2-");
    const askArgs = ["-c", 'mcp_servers.openclaw.tools.session_status.approval_mode="prompt"'];
    const backend = (h: string, extra: Record<string, unknown> = {}) => ({
      type: "codex",
      command: CODEX_BIN,
      env: codexEnv({ baseUrl: fake.url, home: h }),
      timeoutSeconds: 60,
      killGraceSeconds: 1,
      ...extra,
    });
    bridge = await startTestBridge({
      backends: {
        cx: backend(home),
        // A policy that lets codex ask, and our tool set to be asked about: the bridge approves it —
        // asked as an MCP elicitation (codex's default), or as `requestUserInput` (that feature off).
        cxask: backend(askHome, { approvalPolicy: "on-request", args: askArgs }),
        cxask2: backend(askHome2, {
          approvalPolicy: "on-request",
          args: [...askArgs, "-c", "features.tool_call_mcp_elicitation=false"],
        }),
      },
      models: [
        { id: "codex", backend: "cx", session: { mode: "resume" }, tools: { mode: "bridge" } },
        {
          id: "codex-short",
          backend: "cx",
          session: { mode: "resume" },
          tools: { mode: "bridge", pendingTimeoutSeconds: 2 },
        },
        { id: "codex-ask", backend: "cxask", session: { mode: "resume" }, tools: { mode: "bridge" } },
        { id: "codex-ask-input", backend: "cxask2", session: { mode: "resume" }, tools: { mode: "bridge" } },
      ],
    });
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    cleanup(home);
    cleanup(askHome);
    cleanup(askHome2);
    if (bridge) cleanup(bridge.dataDir);
  });

  const health = async (): Promise<any> => (await fetch(`${bridge.url}/health`)).json();
  /** The pid of the one busy warm process that was not there before. */
  const busyPid = async (before: Set<number>): Promise<number | undefined> =>
    (await health()).warm.list.find((w: any) => w.busy && !before.has(w.pid))?.pid;
  const pids = async (): Promise<Set<number>> => new Set((await health()).warm.list.map((w: any) => w.pid as number));

  test("a tool call ends the response with tool_calls; its result goes back to the same codex process, whose answer uses it", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctc-${randomUUID()}`, "codex", TOOLS);
    const before = await pids();
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls", JSON.stringify(r1));
    assert.equal(r1.calls.length, 1);
    const [c] = r1.calls;
    assert.equal(c!.name, "session_status", "the client's own tool name, without codex's namespace");
    assert.match(c!.id, /^[A-Za-z0-9]+$/, "an id of letters and digits");
    assert.deepEqual(JSON.parse(c!.arguments), {});
    assert.match(r1.text, /Let me check/);
    const pid = await busyPid(before);
    assert.ok(pid, "the warm codex process waits for the call");

    // The token reaches codex through its environment, never its command line.
    const token = readFileSync(`/proc/${pid}/environ`, "utf8")
      .split("\0")
      .find((e) => e.startsWith(`${CODEX_CLIENT_TOOLS_TOKEN_ENV}=`))
      ?.split("=")[1];
    assert.match(token ?? "", /^cbt/, "the conversation's token is in codex's environment");
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    assert.ok(!argv.includes(token!), "the token is not in argv");
    assert.match(argv, /mcp_servers\.openclaw\.url=/);

    const r2 = await chat.answer(["model=fake-codex tokens=42 STATUS-OK"]);
    assert.equal(r2.finish, "stop", r2.text);
    assert.match(r2.text, /Used: call_\w+=model=fake-codex tokens=42 STATUS-OK/, r2.text);
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid && !w.busy),
      "the same codex process went on, and is idle now",
    );

    // The model saw the client's tools in codex's namespace tool, with their schemas, minus `read`.
    const first = fake.responseCalls().find((r) => r.lastUserText.includes("STATUS please"))!;
    const ns = (first.body.tools as any[]).find((t) => t.type === "namespace" && t.name === NS);
    assert.ok(ns, `codex offers a namespace tool ${NS}: ${JSON.stringify(first.body.tools.map((t: any) => t.name))}`);
    const names = (ns.tools as any[]).map((t) => t.name);
    assert.ok(
      names.includes("session_status") && names.includes("message") && names.includes("memory_search"),
      names.join(","),
    );
    assert.ok(!names.includes("read"), "tools the agent has natively are excluded");
    const msgTool = ns.tools.find((t: any) => t.name === "message");
    assert.deepEqual(msgTool.parameters.required, ["to", "text"]);
    // codex passes on a subset of JSON Schema (0.169 drops `minLength`); the structure is the client's.
    assert.equal(msgTool.parameters.additionalProperties, false);
    assert.deepEqual(Object.keys(msgTool.parameters.properties).sort(), ["text", "to"]);

    // The conversation goes on normally on the same process.
    const r3 = await chat.say("and now plain");
    assert.equal(r3.finish, "stop");
    assert.match(r3.text, /plain answer/);
    assert.ok((await health()).warm.list.some((w: any) => w.pid === pid));
  });

  test("two calls in one reply: the calls codex makes come as contiguous tool_call deltas, and every result reaches the model", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctc-${randomUUID()}`, "codex", TOOLS);
    const results: Record<string, string> = { message: "SENT-OK", memory_search: "MEMORY-HIT" };
    const seen: string[] = [];
    let r = await chat.say("TWO things");
    let rounds = 0;
    for (; rounds < 4 && r.finish === "tool_calls"; rounds++) {
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
    assert.match(r.text, /call_two1=SENT-OK/);
    assert.match(r.text, /call_two2=MEMORY-HIT/);
    // codex runs a reply's calls together (the tools are read-only, supports_parallel_tool_calls): one round-trip.
    assert.equal(rounds, 1, "both calls in one response");
  });

  test("a wrong tool_call_id gets a clear 400; a new message instead answers the pending call saying so, then the person's message follows in it, and codex's turn goes on with it (issue 31 item 2)", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctc-${randomUUID()}`, "codex", TOOLS);
    const before = await pids();
    const r1 = await chat.say("STATUS again");
    assert.equal(r1.finish, "tool_calls");
    const pid = await busyPid(before);
    assert.ok(pid, "the warm process is busy with the pending call");
    await assert.rejects(chat.answer(["x"], ["callNOTPENDING000000000000"]), (err: any) => {
      assert.equal(err.status, 400);
      assert.match(err.message, /callNOTPENDING/);
      assert.match(
        err.message,
        new RegExp(`${r1.calls[0]!.id} \\(session_status\\)`),
        "it names the call that is pending",
      );
      return true;
    });
    chat.messages.pop(); // the wrong tool message
    const r2 = await chat.say("never mind, something plain");
    assert.equal(r2.finish, "stop");
    assert.match(r2.text, /No result: the person sent a new message instead/, r2.text);
    const req = fake.responseCalls().find((c) => allOutputs(c).some((o) => o.text.includes("never mind")))!;
    assert.ok(req, "the person's message reached the model");
    const closed = allOutputs(req);
    assert.equal(closed.length, 1, "the pending call was answered in codex's own history");
    assert.match(closed[0]!.text, /No result: the person sent a new message instead[\s\S]*never mind/, closed[0]!.text);
    assert.doesNotMatch(JSON.stringify(req.body.input), /turn_aborted/, "codex's turn was not interrupted");
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid),
      "the same process took the new message",
    );
    assert.ok(
      await eventually(async () => (await health()).warm.list.every((w: any) => !w.busy), 10_000),
      "nothing is left busy",
    );
  });

  test("a pending call not answered in time is given up: codex's turn ends, the conversation goes on, a late result arrives as text", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctc-${randomUUID()}`, "codex-short", TOOLS);
    const before = await pids();
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const pid = await busyPid(before);
    assert.ok(pid);
    assert.ok(
      await eventually(async () => (await health()).warm.list.some((w: any) => w.pid === pid && !w.busy), 10_000),
      "the turn ended after pendingTimeoutSeconds (2 s)",
    );
    const r2 = await chat.answer(["LATE-STATUS"]);
    assert.equal(r2.finish, "stop", r2.text);
    const req = fake.responseCalls().at(-1)!;
    assert.match(req.lastUserText, /had already ended/, "codex is told why the result comes as text");
    assert.match(req.lastUserText, /LATE-STATUS/);
    assert.ok(
      allOutputs(req).some((o) => /did not run the tool within 2 s/.test(o.text)),
      "the timed-out call was answered, saying so, in codex's history",
    );
    assert.ok(
      (await health()).warm.list.some((w: any) => w.pid === pid),
      "on the same process",
    );
    const r3 = await chat.say("plain after that");
    assert.equal(r3.finish, "stop");
    assert.match(r3.text, /plain answer/);
  });

  test("a client abort of the continuation interrupts codex's turn; the next message is answered", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctc-${randomUUID()}`, "codex", TOOLS);
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const ac = new AbortController();
    const hung = fake.responseCalls().length;
    const cut = chat.answer(["HANG"], undefined, ac.signal).catch(() => undefined);
    // Abort once the model call with the result is in flight (the fake hangs on it).
    assert.ok(await eventually(() => fake.responseCalls().length > hung, 10_000), "codex went on with the result");
    ac.abort();
    const got = await within(cut, 10_000, "the aborted request");
    assert.equal(got?.finish, undefined, "the answer was cut off by the abort");
    assert.ok(
      await eventually(async () => (await health()).warm.list.every((w: any) => !w.busy), 10_000),
      "the interrupted turn ended",
    );
    if (got) chat.messages.pop();
    chat.messages.push({ role: "assistant", content: "" });
    const r = await chat.say("plain again");
    assert.equal(r.finish, "stop");
    assert.match(r.text, /plain answer/);
    const req = fake.responseCalls().at(-1)!;
    assert.deepEqual(
      allOutputs(req).map((o) => o.text),
      ["HANG"],
      "codex's history kept the answered call",
    );
  });

  test("codex killed (SIGKILL) while a call is pending: the result still reaches the resumed thread as text", async () => {
    const chat = new ToolChat(bridge.baseURL, `ctc-${randomUUID()}`, "codex", TOOLS);
    const before = await pids();
    const r1 = await chat.say("STATUS please");
    assert.equal(r1.finish, "tool_calls");
    const pid = (await busyPid(before)) as number;
    assert.ok(pid, "this conversation's warm process waits for the call");
    process.kill(-pid, "SIGKILL");
    assert.ok(
      await eventually(async () => !(await health()).warm.list.some((w: any) => w.pid === pid), 10_000),
      "the dead process is forgotten",
    );
    const r2 = await chat.answer(["RESULT-AFTER-KILL"]);
    assert.equal(r2.finish, "stop", r2.text);
    const req = fake.responseCalls().at(-1)!;
    assert.match(req.lastUserText, /had already ended/);
    assert.match(req.lastUserText, /RESULT-AFTER-KILL/);
    assert.match(
      JSON.stringify(req.body.input),
      /STATUS please/,
      "the resumed thread still holds the message that led to the call",
    );
  });

  for (const [model, how] of [
    ["codex-ask", "an MCP elicitation"],
    ["codex-ask-input", "requestUserInput"],
  ] as const) {
    test(`codex asking to approve a call of the client's tools (${how}) is approved by the bridge`, async () => {
      const chat = new ToolChat(bridge.baseURL, `ctc-${randomUUID()}`, model, TOOLS);
      const r1 = await chat.say("STATUS please");
      assert.equal(r1.finish, "tool_calls", JSON.stringify(r1));
      assert.equal(r1.calls[0]?.name, "session_status");
      const r2 = await chat.answer(["APPROVED-STATUS"]);
      assert.equal(r2.finish, "stop");
      assert.match(r2.text, /=APPROVED-STATUS/, r2.text);
    });
  }
});

describe("codex's client tools: configuration", () => {
  test("the app-server is given the MCP server with -c overrides after the user's own flags, the token by name only, codex's call limit past the bridge's", () => {
    const opts = codexOptionsSchema.parse({ args: ["-c", 'mcp_servers.openclaw.url="http://elsewhere/"'] });
    const args = codexAppServerArgs(opts, {
      url: "http://127.0.0.1:9/mcp/client-tools",
      timeoutMs: cliCallTimeoutMs(600),
    });
    const overrides = args.filter((_, i) => args[i - 1] === "-c");
    const urls = overrides.filter((o) => o.startsWith("mcp_servers.openclaw.url="));
    assert.deepEqual(
      urls,
      [
        'mcp_servers.openclaw.url="http://elsewhere/"',
        'mcp_servers.openclaw.url="http://127.0.0.1:9/mcp/client-tools"',
      ],
      "ours comes last, so it wins",
    );
    assert.ok(overrides.includes(`mcp_servers.openclaw.bearer_token_env_var="${CODEX_CLIENT_TOOLS_TOKEN_ENV}"`));
    assert.ok(
      overrides.includes("mcp_servers.openclaw.tool_timeout_sec=660"),
      "pendingTimeoutSeconds (600) plus a minute: the bridge ends a call, not codex",
    );
    assert.ok(overrides.includes("mcp_servers.openclaw.supports_parallel_tool_calls=true"));
    assert.ok(!args.some((a) => /bearer_token=|cbt|Authorization/i.test(a)), "no token or header in argv");
    assert.deepEqual(codexAppServerArgs(opts), codexAppServerArgs(opts, undefined), "no client tools: no MCP server");
    assert.ok(!codexAppServerArgs(opts).some((a) => a.includes("bearer_token_env_var")));
  });

  test("bridge mode needs warm processes", () => {
    assert.equal(codexBackend.clientTools?.(codexOptionsSchema.parse({})), undefined);
    assert.match(
      codexBackend.clientTools?.(codexOptionsSchema.parse({ warm: { enabled: false } })) ?? "",
      /needs warm processes/,
    );
  });
});
