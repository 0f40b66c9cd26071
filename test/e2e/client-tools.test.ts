/**
 * End to end with the REAL OpenClaw (both generations, see setup.ts): OpenClaw's own tools inside
 * the Claude Code CLI (issue 17, model option `tools: { mode: "bridge" }`).
 *
 * The bridge offers the request's `tools` to its warm claude process as the MCP server `openclaw`
 * (Claude sees `mcp__openclaw__<name>`). When the fake Anthropic API makes Claude call one, the
 * bridge answers OpenClaw with a real `tool_calls` delta under the tool's own name; OpenClaw runs
 * the tool and sends its `tool` message in the next request; the bridge hands that result to the
 * still-running claude process, and Claude's final answer quotes a piece of the REAL result.
 *
 * The tool is OpenClaw's read-only `session_status` (args `{}`; its card holds
 * "Session: <session key>" and "Model: <provider>/<model>"). What OpenClaw sends (measured with
 * `agent --local`, the same list through a gateway):
 *   2026.5.x  28 tools, `session_status` among them (so is `memory_search`): called directly.
 *   2026.9.x  Tool Search is on by default: 12 tools (apply_patch, edit, exec, ls, openclaw,
 *             process, read, sessions_yield, tool_call, tool_describe, tool_search, write);
 *             `session_status` is reached with `tool_call {id: "session_status", args: {}}`, whose
 *             result is a JSON envelope `{tool: {id, name, source}, result: {content, details}}`.
 *             With `tools.toolSearch: false` the 54 direct tools include `session_status` (F2).
 *
 * Only the model API is faked. Everything listens on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { BridgeEvent } from "../../src/wire/events.js";
import {
  anthropicText,
  startFakeAnthropic,
  type AnthropicReply,
  type FakeAnthropic,
  type RecordedRequest,
} from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, type TestBridge } from "../helpers/bridge.js";
import {
  agentReply,
  describeRun,
  openclawHome,
  openclawProvider,
  reapHome,
  runOpenClaw,
  selectedGenerations,
  writeJson,
  writeOpenClawConfig,
} from "./harness.js";
import type { OpenClawInstall } from "./setup.js";

const TEST_KEY = "e2e-test-key-0123456789";
const MODEL = "claude-tools";

/** What the fake makes Claude call for a message carrying `marker`. */
interface Plan {
  marker: string;
  toolUseId: string;
  /** The OpenClaw tool's own name (Claude sees `mcp__openclaw__<tool>`). */
  tool: string;
  input: unknown;
}

const bridged = (tool: string) => `mcp__openclaw__${tool}`;
const toolNames = (req: RecordedRequest): string[] =>
  Array.isArray(req.body?.tools) ? req.body.tools.map((t: any) => String(t?.name)) : [];

/** The plan whose marker the latest user text naming one carries (tool_result messages skipped). */
function planFor(req: RecordedRequest, plans: Plan[]): Plan | undefined {
  const messages: any[] = req.body?.messages ?? [];
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role !== "user") continue;
    const text = anthropicText(messages[i].content);
    const plan = plans.find((p) => text.includes(p.marker));
    if (plan) return plan;
  }
  return undefined;
}

/** The tool_result for `toolUseId` in the request's LAST message, if it is one. */
function toolResult(req: RecordedRequest, toolUseId: string): { text: string; isError: boolean } | undefined {
  const last = (req.body?.messages ?? []).at(-1);
  if (last?.role !== "user" || !Array.isArray(last.content)) return undefined;
  const block = last.content.find((b: any) => b?.type === "tool_result" && b.tool_use_id === toolUseId);
  if (!block) return undefined;
  return {
    text: typeof block.content === "string" ? block.content : anthropicText(block.content),
    isError: block.is_error === true,
  };
}

/** The session key and model a session_status card names (plain card, or inside 2026.9's tool_call envelope). */
function statusPieces(text: string): { session?: string; model?: string } {
  return { session: /Session: (agent:[\w:.-]+)/.exec(text)?.[1], model: /Model: ([\w.-]+\/[\w.-]+)/.exec(text)?.[1] };
}

/**
 * Fake Anthropic script: Claude's main call for a planned message calls the bridged tool (or says
 * NO-BRIDGED-TOOL when it is not offered); once its tool_result is back, the answer quotes it.
 * Anything else (side calls without tools) gets "ok".
 */
function anthropicScript(plans: Plan[]) {
  return (req: RecordedRequest): AnthropicReply => {
    const plan = planFor(req, plans);
    const names = toolNames(req);
    if (!plan || names.length === 0) return { kind: "text", chunks: ["ok"] };
    const result = toolResult(req, plan.toolUseId);
    if (result) {
      if (result.isError) return { kind: "text", chunks: [`TOOL-ERROR: ${result.text.slice(0, 300)}`] };
      const { session, model } = statusPieces(result.text);
      if (!session || !model) return { kind: "text", chunks: [`STATUS-UNPARSED: ${result.text.slice(0, 300)}`] };
      return { kind: "text", chunks: ["STATUS-SEEN: ", `session=${session} model=${model}`] };
    }
    const name = bridged(plan.tool);
    if (!names.includes(name))
      return {
        kind: "text",
        chunks: [`NO-BRIDGED-TOOL: ${name} is not among [${names.filter((n) => n.startsWith("mcp__")).join(", ")}]`],
      };
    return { kind: "text", chunks: ["Checking. "], toolUses: [{ id: plan.toolUseId, name, input: plan.input }] };
  };
}

for (const gen of selectedGenerations()) {
  // 2026.9 defers most tool schemas behind Tool Search: session_status goes through `tool_call`.
  const toolSearch = gen.gen !== "2026.5";
  const F1: Plan = toolSearch
    ? { marker: "E2E-F1", toolUseId: "toolu_e2ef01", tool: "tool_call", input: { id: "session_status", args: {} } }
    : { marker: "E2E-F1", toolUseId: "toolu_e2ef01", tool: "session_status", input: {} };
  const F2: Plan = { marker: "E2E-F2", toolUseId: "toolu_e2ef02", tool: "session_status", input: {} };

  describe(`real OpenClaw ${gen.gen}.x: its tools inside Claude Code (tools: bridge)`, {
    concurrency: false,
    timeout: 10 * 60_000,
  }, () => {
    let install: OpenClawInstall;
    let home: string;
    let env: NodeJS.ProcessEnv;
    let claudeHome: string;
    let configFile: string;
    let anthropic: FakeAnthropic;
    let bridge: TestBridge | undefined;
    const events: BridgeEvent[] = [];
    const timings: string[] = [];

    before(async () => {
      let workspace: string;
      ({ install, home, env, workspace } = await openclawHome(gen, "ct"));
      claudeHome = path.join(home, "claude-home");
      mkdirSync(claudeHome, { recursive: true });
      anthropic = await startFakeAnthropic(anthropicScript([F1, F2]));
      bridge = await startTestBridge({
        server: { apiKeys: [TEST_KEY] },
        backends: {
          cc: {
            type: "claude-code",
            command: CLAUDE_BIN,
            env: claudeEnv({ baseUrl: anthropic.baseUrl, home: claudeHome }),
            timeoutSeconds: 90,
            killGraceSeconds: 1,
          },
        },
        models: [
          { id: MODEL, backend: "cc", model: "default", session: { mode: "resume" }, tools: { mode: "bridge" } },
        ],
      });
      bridge.bus.on((e) => {
        if (e.type.startsWith("turn.")) events.push(e);
      });
      configFile = writeOpenClawConfig(home, {
        providers: { clawbridge: openclawProvider(bridge.baseURL, TEST_KEY, [MODEL]) },
        primary: `clawbridge/${MODEL}`,
        workspace,
      });
    });

    after(async () => {
      await bridge?.close(0);
      await anthropic?.close();
      if (home) {
        await reapHome(home, claudeHome);
        cleanup(home);
      }
      if (bridge) cleanup(bridge.dataDir);
      process.stderr.write(
        `[e2e client-tools ${gen.gen}] OpenClaw ${install?.openclawVersion} on Node ${install?.nodeVersion}: ${timings.join("; ")}\n`,
      );
    });

    /** One OpenClaw turn that makes Claude call `plan.tool` through the bridge; checks both halves. */
    const toolTurn = async (plan: Plan, sessionKey: string, message: string) => {
      const callsBefore = anthropic.messageCalls().length;
      const eventsBefore = events.length;
      const r = await runOpenClaw(
        install,
        env,
        [
          "agent",
          "--local",
          "--agent",
          "main",
          "--session-key",
          sessionKey,
          "--model",
          `clawbridge/${MODEL}`,
          "--message",
          message,
          "--json",
          "--timeout",
          "150",
        ],
        240_000,
      );
      timings.push(`${plan.marker}: ${(r.ms / 1000).toFixed(1)} s`);
      assert.equal(r.code, 0, describeRun(r));
      const reply = agentReply(r.stdout).text;
      const calls = anthropic
        .messageCalls()
        .slice(callsBefore)
        .filter((c) => planFor(c, [plan]));
      const turns = events.slice(eventsBefore).filter((e) => "backend" in e && e.backend === "cc");
      const summary = turns
        .map(
          (e) =>
            `${e.type}${"finishReason" in e ? `(${e.finishReason})` : ""}${"code" in e ? `(${e.code}: ${e.message})` : ""}`,
        )
        .join(", ");
      const why = `\n  OpenClaw's reply: ${reply.slice(0, 600)}\n  bridge turns: ${summary}`;

      // The first half: Claude was offered the tool under the bridge's MCP server, and called it.
      const offered = calls.find((c) => toolNames(c).includes(bridged(plan.tool)));
      assert.ok(
        offered,
        `claude was offered ${bridged(plan.tool)}; mcp tools seen: ${calls
          .map((c) =>
            toolNames(c)
              .filter((n) => n.startsWith("mcp__"))
              .join(","),
          )
          .join(" | ")}${why}`,
      );

      // The second half: the REAL result OpenClaw computed came back to the same claude turn.
      const withResult = calls.map((c) => toolResult(c, plan.toolUseId)).find((x) => x);
      assert.ok(withResult, `a tool_result for ${plan.toolUseId} reached the fake${why}`);
      assert.equal(
        withResult!.isError,
        false,
        `the tool_result is not an error: ${withResult!.text.slice(0, 500)}${why}`,
      );
      assert.match(
        withResult!.text,
        new RegExp(`Session: ${sessionKey}\\b`),
        `it is OpenClaw's real session_status card: ${withResult!.text.slice(0, 500)}${why}`,
      );
      assert.ok(
        reply.includes(`STATUS-SEEN: session=${sessionKey} model=clawbridge/${MODEL}`),
        `the final answer quotes the real result${why}`,
      );

      // OpenClaw's two requests to the bridge: one ended with tool_calls, the next with the answer.
      const done = turns.filter((e) => e.type === "turn.completed") as Extract<
        BridgeEvent,
        { type: "turn.completed" }
      >[];
      const first = done.findIndex((e) => e.finishReason === "tool_calls");
      assert.ok(first >= 0, `a bridge turn ended with finish_reason tool_calls${why}`);
      assert.ok(
        done.slice(first + 1).some((e) => e.finishReason === "stop" && e.conversation === done[first]!.conversation),
        `a later turn of the same conversation ended with stop${why}`,
      );
      assert.ok(
        !turns.some((e) => e.type === "turn.failed" || e.type === "turn.aborted"),
        `no bridge turn failed${why}`,
      );
    };

    test(`(f1) OpenClaw's default tool surface: claude calls ${bridged(F1.tool)} and answers from the real session_status result`, async () => {
      await toolTurn(F1, "agent:main:e2e-f1", "E2E-F1: what is my session status?");
    });

    test("(f2) direct tool schemas (tools.toolSearch: false): claude calls mcp__openclaw__session_status under its own name", {
      skip: toolSearch ? false : "2026.5 has no Tool Search: (f1) already called session_status under its own name",
    }, async () => {
      const cfg = JSON.parse(readFileSync(configFile, "utf8"));
      cfg.tools = { ...(cfg.tools ?? {}), toolSearch: false };
      writeJson(configFile, cfg);
      await toolTurn(F2, "agent:main:e2e-f2", "E2E-F2: what is my session status?");
    });

    test("closing the bridge leaves no claude process", async () => {
      assert.ok(bridge, "bridge running");
      await bridge!.close(0);
      const gone = await eventually(() => pidsWithEnv(`HOME=${claudeHome}`).length === 0, 15_000);
      assert.ok(gone, `no claude process left: ${pidsWithEnv(`HOME=${claudeHome}`).join(", ")}`);
    });
  });
}
