/**
 * Suite "client-tools" (issue 17): how long OpenClaw waits from sending a tool result to the next
 * token of a warm Claude Code whose tool call the bridge handed to it, and how much of that is the
 * bridge's. The REAL `claude` (node_modules/.bin) against the fake Anthropic API (testkit/fakes,
 * instant), behind the built bridge as its own process (`node bin/clawbridge.js serve`), one model
 * with `tools: { mode: "bridge" }` per variant:
 *
 * - `plain`: the backend's command is claude itself — nothing between the bridge and the CLI. Its
 *   totals are the issue's figure.
 * - `tapped`: the command is bench/suites/client-tools/tap.mjs, which runs claude with the same
 *   arguments, relays its stdin/stdout and notes when the bridge's message reaches claude's stdin
 *   and when claude writes its first text; claude's MCP server is pointed at a TCP relay in the bench
 *   process that notes when the bridge's answer to the `tools/call` (the client's result) passes.
 *   Those notes split the time between the bridge and the CLI without touching the bridge's code.
 *
 * Each variant is one conversation on one warm claude process. Per round, in that conversation: a
 * plain message (a normal warm turn), a message the fake answers with a call of
 * `mcp__openclaw__session_status` (the response ends with `tool_calls`), then the tool result (the
 * pending MCP call is answered, claude goes on into that response). ROUNDS rounds after WARMUP
 * rounds; the variants alternate, round by round, which goes first.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { claudeEnv } from "../../testkit/fakes/cli-env.js";
import { openclawTools } from "../../testkit/openclaw-request.js";
import { loadClient } from "../load.js";
import { startService, type Service } from "../procs.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { ms, percentile, table } from "../stats.js";
import {
  firstAfter,
  now,
  readTap,
  RESULT_MARK,
  startMcpRelay,
  startStampedFake,
  STATUS_TOOL,
  streamChat,
  type McpRelay,
  type StampedFake,
  type StreamedReply,
} from "./client-tools/rig.js";

const ROUNDS = 20;
const WARMUP = 2;
const TARGET_MS = 50;

/** OpenClaw-size tools: session_status plus 20 of testkit's (read and exec among them: excluded by the bridge's default). */
const TOOLS = [
  {
    type: "function",
    function: {
      name: STATUS_TOOL,
      description: "Show this session's status (model, tokens, channel).",
      parameters: { type: "object", properties: {}, required: [], additionalProperties: false },
    },
  },
  ...openclawTools(20),
];

type Variant = "plain" | "tapped";
type Message = Record<string, unknown>;

/** One measured request; every field is ms from the request's send (`t0`), or a duration. */
interface Sample {
  /** Request sent → first content token at the client. */
  first?: number;
  /** Request sent → finish_reason at the client. */
  finish?: number;
  /** Request sent → the CLI's model call reached the fake (= the fake's first byte, same tick). */
  model?: number;
  /** tapped: request sent → the bridge's message reached claude's stdin. */
  stdin?: number;
  /** tapped: request sent → the bridge's MCP answer (the tool result) passed the relay. */
  mcpResult?: number;
  /** tapped: request sent → claude's `tools/call` passed the relay. */
  mcpCall?: number;
  /** tapped: request sent → claude wrote its first text_delta on stdout. */
  cliText?: number;
  /** tapped: request sent → claude wrote the `assistant` line holding its tool_use on stdout. */
  cliToolUse?: number;
}

interface VariantRun {
  key: string;
  model: string;
  messages: Message[];
  plain: Sample[];
  status: Sample[];
  result: Sample[];
  /** Bytes written to claude's stdin for a tool-result request (expected: none). */
  stdinOnResult: number;
  pids: Set<number>;
}

interface Rig {
  bridge: Service;
  fake: StampedFake;
  relay: McpRelay;
  tapLog: string;
}

async function request(
  pool: ReturnType<typeof loadClient>,
  run: VariantRun,
  rig: Rig,
  variant: Variant,
  kind: "plain" | "status" | "result",
  round: number,
): Promise<{ sample: Sample; reply: StreamedReply }> {
  if (kind === "plain")
    run.messages.push({ role: "user", content: `Round ${round}: a plain question, answer shortly.` });
  if (kind === "status") run.messages.push({ role: "user", content: `Round ${round}: STATUS please.` });
  if (kind === "result") {
    const last = run.messages.at(-1) as { tool_calls?: Array<{ id: string }> };
    for (const c of last.tool_calls ?? [])
      run.messages.push({
        role: "tool",
        tool_call_id: c.id,
        content: `${RESULT_MARK}${variant}-${round}: model=fake-claude tokens=42 channel=telegram`,
      });
  }
  const reply = await streamChat(pool, run.key, {
    model: run.model,
    messages: run.messages,
    tools: TOOLS,
    stream: true,
  });
  const t0 = reply.sentAt;
  const rel = (at: number | undefined) => (at === undefined ? undefined : at - t0);
  const sample: Sample = {
    first: rel(reply.firstContentAt),
    finish: rel(reply.finishAt),
    model: rel(firstAfter(rig.fake.calls, kind, t0)),
  };
  if (variant === "tapped") {
    const notes = readTap(rig.tapLog).filter((n) => n.at >= t0 && n.at <= reply.endAt);
    const modelAt = firstAfter(rig.fake.calls, kind, t0);
    sample.stdin = rel(notes.find((n) => n.kind === "in")?.at);
    sample.cliText = rel(notes.find((n) => n.kind === "text" && modelAt !== undefined && n.at >= modelAt)?.at);
    sample.cliToolUse = rel(notes.find((n) => n.kind === "tooluse")?.at);
    sample.mcpCall = rel(firstAfter(rig.relay.stamps, "call", t0));
    sample.mcpResult = rel(firstAfter(rig.relay.stamps, "result", t0));
    if (kind === "result") run.stdinOnResult += notes.filter((n) => n.kind === "in").length;
    for (const n of notes) run.pids.add(n.pid);
  }
  // The answer goes into the history as OpenClaw keeps it.
  run.messages.push(
    reply.calls.length
      ? {
          role: "assistant",
          content: reply.text || null,
          tool_calls: reply.calls.map((c) => ({
            id: c.id,
            type: "function",
            function: { name: c.name, arguments: c.arguments },
          })),
        }
      : { role: "assistant", content: reply.text },
  );
  const expect = kind === "status" ? "tool_calls" : "stop";
  if (reply.finish !== expect)
    throw new Error(
      `${variant} ${kind} round ${round}: finish_reason ${reply.finish}, expected ${expect} (text: ${reply.text.slice(0, 200)})`,
    );
  if (kind === "status" && (reply.calls.length !== 1 || reply.calls[0]!.name !== STATUS_TOOL))
    throw new Error(`${variant} round ${round}: expected one ${STATUS_TOOL} call, got ${JSON.stringify(reply.calls)}`);
  if (kind !== "status" && sample.first === undefined) throw new Error(`${variant} ${kind} round ${round}: no content`);
  if (sample.model === undefined)
    throw new Error(`${variant} ${kind} round ${round}: the fake saw no ${kind} model call`);
  return { sample, reply };
}

// ---- statistics over samples -------------------------------------------------------------------

type Field = (s: Sample) => number | undefined;
const values = (xs: Sample[], f: Field): number[] =>
  xs.map(f).filter((v): v is number => v !== undefined && Number.isFinite(v));
const p = (xs: Sample[], f: Field, q: number): number => percentile(values(xs, f), q);
const cells = (xs: Sample[], f: Field): string[] => {
  const v = values(xs, f);
  return v.length ? [ms(percentile(v, 50)), ms(percentile(v, 90)), String(v.length)] : ["–", "–", "0"];
};
const diff = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : a - b);
const sum = (...xs: Array<number | undefined>) =>
  xs.some((x) => x === undefined) ? undefined : xs.reduce<number>((s, x) => s + x!, 0);

/** The tapped variant's split of a turn that ends in content: the bridge's two stretches and the CLI's. */
const bridgeIn =
  (kind: "plain" | "result"): Field =>
  (s) =>
    kind === "plain" ? s.stdin : s.mcpResult;
const bridgeOut: Field = (s) => diff(s.first, s.cliText);
const cliBefore =
  (kind: "plain" | "result"): Field =>
  (s) =>
    diff(s.model, bridgeIn(kind)(s));
const cliAfter: Field = (s) => diff(s.cliText, s.model);
const bridgeTotal =
  (kind: "plain" | "result"): Field =>
  (s) =>
    sum(bridgeIn(kind)(s), bridgeOut(s));
const cliTotal =
  (kind: "plain" | "result"): Field =>
  (s) =>
    sum(cliBefore(kind)(s), cliAfter(s));
/**
 * The first response ends once the bridge has the call (MCP `tools/call`) AND the reply's count of
 * calls (claude's `assistant` line with the tool_use, on stdout): from the later of the two it is the bridge's.
 */
const bridgeOutCall: Field = (s) =>
  s.mcpCall === undefined || s.cliToolUse === undefined ? undefined : diff(s.finish, Math.max(s.mcpCall, s.cliToolUse));

// ---- the suite ---------------------------------------------------------------------------------

const suite: BenchSuite = {
  name: "client-tools",
  description:
    "OpenClaw's tools inside a warm Claude Code (issue 17): tool result → the CLI's next token, and the bridge's share of it",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const rounds = Math.min(ROUNDS, ctx.limits.maxRequests);
    const warmup = Math.min(WARMUP, ctx.limits.warmup);
    const base = mkdtempSync(path.join(tmpdir(), "cb-bench-ct-"));
    const claude = path.join(ctx.root, "node_modules/.bin/claude");
    const tapDir = path.join(base, "tap");
    mkdirSync(tapDir, { recursive: true });
    const tapLog = path.join(tapDir, "notes.log");
    writeFileSync(tapLog, "");
    // `exec`: the pid the bridge holds (and signals as a group) is the tap's own node process.
    const wrapper = path.join(base, "claude-tap.sh");
    writeFileSync(
      wrapper,
      `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(ctx.root, "bench/suites/client-tools/tap.mjs"))} "$@"\n`,
      { mode: 0o755 },
    );

    let fake: StampedFake | undefined;
    let relay: McpRelay | undefined;
    let bridge: Service | undefined;
    let pool: ReturnType<typeof loadClient> | undefined;
    const runs: Record<Variant, VariantRun> = {
      plain: {
        key: `bench-ct-plain-${process.pid}-${Date.now()}`,
        model: "claude/plain",
        messages: [],
        plain: [],
        status: [],
        result: [],
        stdinOnResult: 0,
        pids: new Set(),
      },
      tapped: {
        key: `bench-ct-tapped-${process.pid}-${Date.now()}`,
        model: "claude/tapped",
        messages: [],
        plain: [],
        status: [],
        result: [],
        stdinOnResult: 0,
        pids: new Set(),
      },
    };
    let health: { warm?: { list?: Array<{ backend: string; pid: number; rssBytes?: number }> } } = {};
    const startedAt = now();
    try {
      fake = await startStampedFake();
      relay = await startMcpRelay();
      const backend = (home: string, extra: Record<string, string> = {}, command = claude) => ({
        type: "claude-code",
        command,
        env: { ...claudeEnv({ baseUrl: fake!.fake.baseUrl, home }), ...extra },
        timeoutSeconds: 60,
        killGraceSeconds: 1,
        warm: { enabled: true },
      });
      const configFile = path.join(base, "clawbridge.json");
      writeFileSync(
        configFile,
        JSON.stringify({
          server: { host: "127.0.0.1", port: 0, heartbeatSeconds: 15 },
          logging: { level: "warn" },
          dataDir: path.join(base, "data"),
          intents: { enabled: false },
          backends: {
            "cc-plain": backend(path.join(base, "home-plain")),
            "cc-tapped": backend(
              path.join(base, "home-tapped"),
              { CB_TAP_TARGET: claude, CB_TAP_LOG: tapLog, CB_TAP_MCP: `127.0.0.1:${relay.port}` },
              wrapper,
            ),
          },
          models: [
            { id: "claude/plain", backend: "cc-plain", session: { mode: "resume" }, tools: { mode: "bridge" } },
            { id: "claude/tapped", backend: "cc-tapped", session: { mode: "resume" }, tools: { mode: "bridge" } },
          ],
        }),
      );
      bridge = await startService({
        name: "clawbridge",
        command: process.execPath,
        args: [path.join(ctx.root, "bin", "clawbridge.js"), "serve", "--config", configFile],
        cwd: ctx.root,
        env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
        readyPattern: /listening on (http:\/\/[^\s]+)/,
      });
      const origin = bridge.ready;
      relay.target = Number(new URL(origin).port);
      pool = loadClient(origin, 1);
      const rig: Rig = { bridge, fake, relay, tapLog };

      for (let r = -warmup; r < rounds; r++) {
        const order: Variant[] = (r + warmup) % 2 === 0 ? ["plain", "tapped"] : ["tapped", "plain"];
        for (const variant of order) {
          const run = runs[variant];
          for (const kind of ["plain", "status", "result"] as const) {
            const { sample } = await request(pool, run, rig, variant, kind, r);
            if (r >= 0) run[kind].push(sample);
          }
        }
        if (r === -1 || r === rounds - 1 || (r >= 0 && (r + 1) % 5 === 0))
          ctx.log(`client-tools: round ${r + 1}/${rounds} done`);
      }
      health = (await (await fetch(`${origin}/health`)).json()) as typeof health;
    } finally {
      await pool?.close().catch(() => {});
      await bridge?.stop(5000);
      await relay?.close();
      await fake?.fake.close();
      rmSync(base, { recursive: true, force: true });
    }
    const seconds = (now() - startedAt) / 1000;
    return report(runs, health, rounds, warmup, seconds);
  },
};

function report(
  runs: Record<Variant, VariantRun>,
  health: { warm?: { list?: Array<{ backend: string; pid: number; rssBytes?: number }> } },
  rounds: number,
  warmup: number,
  seconds: number,
): SuiteResult {
  const P = runs.plain;
  const T = runs.tapped;
  /** The target's figure: the tapped variant's bridge-in + bridge-out of a tool-result request. */
  const added = p(T.result, bridgeTotal("result"), 50);
  const added90 = p(T.result, bridgeTotal("result"), 90);
  const warm = health.warm?.list ?? [];
  const procs = (b: string) => warm.filter((w) => w.backend === b);
  const head = ["", "p50 (ms)", "p90 (ms)", "n"];

  const total = table(head, [
    ["tool result → next token, plain (the issue's figure)", ...cells(P.result, (s) => s.first)],
    ["tool result → next token, tapped", ...cells(T.result, (s) => s.first)],
    ["plain warm turn: message → first token, plain", ...cells(P.plain, (s) => s.first)],
    ["plain warm turn: message → first token, tapped", ...cells(T.plain, (s) => s.first)],
  ]);

  const fakeSplit = table(
    [
      "plain variant",
      "(a) request → the CLI's model call at the fake, p50",
      "p90",
      "(b) fake's first byte → client's first token, p50",
      "p90",
      "total p50",
      "total p90",
    ],
    [
      [
        "plain warm turn (message on stdin)",
        ms(p(P.plain, (s) => s.model, 50)),
        ms(p(P.plain, (s) => s.model, 90)),
        ms(p(P.plain, (s) => diff(s.first, s.model), 50)),
        ms(p(P.plain, (s) => diff(s.first, s.model), 90)),
        ms(p(P.plain, (s) => s.first, 50)),
        ms(p(P.plain, (s) => s.first, 90)),
      ],
      [
        "tool result (pending MCP call answered)",
        ms(p(P.result, (s) => s.model, 50)),
        ms(p(P.result, (s) => s.model, 90)),
        ms(p(P.result, (s) => diff(s.first, s.model), 50)),
        ms(p(P.result, (s) => diff(s.first, s.model), 90)),
        ms(p(P.result, (s) => s.first, 50)),
        ms(p(P.result, (s) => s.first, 90)),
      ],
      [
        "difference of the p50s (tool result − plain turn)",
        ms(p(P.result, (s) => s.model, 50) - p(P.plain, (s) => s.model, 50)),
        "",
        ms(p(P.result, (s) => diff(s.first, s.model), 50) - p(P.plain, (s) => diff(s.first, s.model), 50)),
        "",
        ms(p(P.result, (s) => s.first, 50) - p(P.plain, (s) => s.first, 50)),
        "",
      ],
    ],
  );

  const splitRows = (kind: "plain" | "result", xs: Sample[]) => {
    const label = kind === "plain" ? "plain warm turn" : "tool result";
    return [
      [
        `${label}: **bridge in** — request → ${kind === "plain" ? "message on claude's stdin" : "MCP result leaves for claude (at the relay)"}`,
        ...cells(xs, bridgeIn(kind)),
      ],
      [
        `${label}: CLI — ${kind === "plain" ? "stdin" : "MCP result"} → its model call at the fake`,
        ...cells(xs, cliBefore(kind)),
      ],
      [`${label}: CLI — fake's first byte → claude's first text_delta on stdout`, ...cells(xs, cliAfter)],
      [`${label}: **bridge out** — claude's first text_delta → client's first token`, ...cells(xs, bridgeOut)],
      [`${label}: **bridge total** (in + out, per request)`, ...cells(xs, bridgeTotal(kind))],
      [`${label}: CLI total`, ...cells(xs, cliTotal(kind))],
      [`${label}: end to end (tapped)`, ...cells(xs, (s) => s.first)],
    ];
  };
  const tapSplit = table(
    ["tapped variant", "p50 (ms)", "p90 (ms)", "n"],
    [...splitRows("result", T.result), ...splitRows("plain", T.plain)],
  );

  const firstResponse = table(head, [
    ["request → finish_reason tool_calls, plain", ...cells(P.status, (s) => s.finish)],
    ["request → finish_reason tool_calls, tapped", ...cells(T.status, (s) => s.finish)],
    ['request → first content ("Let me check."), plain', ...cells(P.status, (s) => s.first)],
    ["tapped: **bridge in** — request → message on claude's stdin", ...cells(T.status, (s) => s.stdin)],
    ["tapped: CLI — stdin → its model call at the fake", ...cells(T.status, (s) => diff(s.model, s.stdin))],
    [
      "tapped: CLI — model call → the `assistant` line with its tool_use on stdout",
      ...cells(T.status, (s) => diff(s.cliToolUse, s.model)),
    ],
    [
      "tapped: CLI — model call → its MCP `tools/call` (at the relay)",
      ...cells(T.status, (s) => diff(s.mcpCall, s.model)),
    ],
    [
      "tapped: **bridge out** — the later of the two → finish_reason tool_calls at the client",
      ...cells(T.status, bridgeOutCall),
    ],
    ["tapped: **bridge total** (in + out, per request)", ...cells(T.status, (s) => sum(s.stdin, bridgeOutCall(s)))],
  ]);

  const targets: TargetCheck[] = [
    {
      name: "bridge-added time: tool-result request → the CLI's next token (warm, instant fake model)",
      goal: `< ${TARGET_MS} ms (p50 and p90)`,
      measured: `${ms(added)} ms p50, ${ms(added90)} ms p90 (end to end ${ms(p(P.result, (s) => s.first, 50))} ms p50)`,
      pass: Number.isFinite(added90) && added < TARGET_MS && added90 < TARGET_MS,
    },
  ];

  const pidsOk =
    P.pids.size === 0 && T.pids.size <= 1 && procs("cc-plain").length === 1 && procs("cc-tapped").length === 1;
  const markdown = [
    `The real \`claude\` (node_modules/.bin) warm, against the fake Anthropic API (testkit/fakes; every reply at once, 6 text chunks, or "Let me check." and a \`mcp__openclaw__${STATUS_TOOL}\` call), behind the built bridge as its own process; a model with \`tools: { mode: "bridge" }\` and OpenClaw-size tools (${TOOLS.length}, of which \`read\` and \`exec\` are excluded by default). Per variant one conversation on one warm claude process; per round a plain message, a message that makes the model call the tool (response ends with \`tool_calls\`), and the tool result (the pending MCP call answered; claude goes on into that response). ${rounds} rounds after ${warmup} warm-up rounds; the two variants alternate which goes first. All on 127.0.0.1. From the fake's start to the bridge's exit (both claude processes started, every round, shutdown): ${seconds.toFixed(1)} s.`,
    "",
    `**In short** (p50): a tool result reaches the CLI's next token at the client in ${ms(p(P.result, (s) => s.first, 50))} ms (plain variant). Of that, the bridge's part is ${ms(added)} ms (tapped variant: request → the MCP answer leaves for claude, ${ms(p(T.result, bridgeIn("result"), 50))} ms, plus claude's first text on stdout → the client's token, ${ms(p(T.result, bridgeOut, 50))} ms; p90 ${ms(added90)} ms) against the ${TARGET_MS} ms target; claude's own work is ${ms(p(T.result, cliTotal("result"), 50))} ms and the fake model ~0. A plain warm turn on the same process takes ${ms(p(P.plain, (s) => s.first, 50))} ms, of which the bridge's is ${ms(p(T.plain, bridgeTotal("plain"), 50))} ms. The first response, the one that ends with \`tool_calls\`, takes ${ms(p(P.status, (s) => s.finish, 50))} ms (p90 ${ms(p(P.status, (s) => s.finish, 90))} ms) to its \`finish_reason\`.`,
    "",
    "- **plain**: the bridge runs claude itself. Its totals are the issue's figure.",
    "- **tapped**: the bridge runs `bench/suites/client-tools/tap.mjs`, which runs claude with the same arguments, relays stdin/stdout byte for byte and notes when the bridge's message reaches claude's stdin and when claude writes its first `text_delta`; claude's MCP server (the bridge's `/mcp/client-tools`) is reached through a TCP relay in the bench process that notes when claude's `tools/call` and the bridge's answer (the client's result) pass. All notes are on one clock (CLOCK_MONOTONIC) across processes.",
    "",
    "### Tool result → the CLI's next token",
    "",
    "Request sent by the client → first content token at the client.",
    "",
    total,
    "",
    "### Split at the fake model (plain variant): what the MCP hand-back adds over a plain warm turn",
    "",
    "(a) includes the bridge's request handling AND claude's own work before it asks the model (for a plain turn: read the stdin line and build the request; for a tool result: receive the MCP answer, add it to the history, build the request). (b) includes claude turning the model's stream into stream-json AND the bridge turning that into the client's SSE. The model itself takes ~0 (its call arrives with the body parsed and its first bytes leave in the same tick). Neither column is the bridge's alone; their difference between the two kinds of turn is what the hand-back costs, the bridge's and claude's parts together.",
    "",
    fakeSplit,
    "",
    "### Bridge against CLI (tapped variant)",
    "",
    "Each row is per request (percentiles of the per-request values, so the rows do not add up exactly). **Bridge in** (tool result): the client's request → the bridge has parsed and validated it, matched the results to the pending call and written the MCP answer, as seen at the relay. **Bridge out**: claude's first `text_delta` line (seen by the tap) → the client has the SSE content chunk. **Bridge-added time = bridge in + bridge out** — every other millisecond is claude's (the CLI columns) or the model's (~0). The tap and the relay each add one pass-through hop in Node. On the way in, the note is taken where the bridge's bytes arrive at the tap or relay, so the extra hop on to claude counts as claude's; on the way out, claude's bytes are noted at the tap (its first `text_delta`) or the relay (its `tools/call`), so the extra hop on to the bridge counts as the bridge's: the bridge-out figures are, if anything, pessimistic. The tapped totals next to the plain ones show what the taps cost in all.",
    "",
    tapSplit,
    "",
    "### The first response: request → `finish_reason: tool_calls`",
    "",
    "The message that makes the model call the tool. The bridge ends the response with the call once it has both claude's `tools/call` (on its MCP endpoint) and claude's `assistant` line with the tool_use (on stdout, where it counts how many calls the reply makes); whichever comes later is where claude's part ends and the bridge's begins.",
    "",
    firstResponse,
    "",
    "### Checks",
    "",
    `- Every request answered as expected (plain → \`stop\` with content; STATUS → exactly one \`${STATUS_TOOL}\` call and \`tool_calls\`; result → \`stop\` with content).`,
    `- One warm claude process per variant for the whole run: ${pidsOk ? "yes" : "**NO**"} (tap pids seen: ${[...T.pids].join(", ") || "none"}; /health warm list at the end: ${warm.map((w) => `${w.backend} pid ${w.pid}${w.rssBytes ? ` ${Math.round(w.rssBytes / 1048576)} MB` : ""}`).join("; ") || "empty"}; the tapped one's resident memory includes the tap's own Node process).`,
    `- Order on the first response: claude's \`tools/call\` reached the relay before its \`assistant\` tool_use line reached the tap in ${T.status.filter((s) => s.mcpCall !== undefined && s.cliToolUse !== undefined && s.mcpCall < s.cliToolUse).length} of ${T.status.length} requests (median gap, line − call: ${ms(p(T.status, (s) => diff(s.cliToolUse, s.mcpCall), 50))} ms).`,
    `- Writes to claude's stdin during tool-result requests (the result goes over MCP, not stdin): ${T.stdinOnResult}.`,
    "- The bridge was stopped (SIGTERM, reaped), the relay and the fake closed, the temporary directory removed.",
  ].join("\n");
  return { markdown, targets };
}

export default suite;
