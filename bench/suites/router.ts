/**
 * Suite "router": what the `router` backend (src/backends/router-backend.ts over src/workflows/router/) costs.
 *
 * Three processes, as in the `openai` suite: a fake upstream (bench/suites/router/fake-upstream.ts,
 * which answers both the classifier model and the answer model, and measures and counts the
 * classifier calls), the bridge (`node bin/clawbridge.js serve --config <tmp yaml> --port 0`) with
 *
 *   backends: up (type openai → the fake), router (type router: classifier `cls`, answer `ans`)
 *   models:   cls, ans (both on `up`), router
 *   systems:  content-pipeline (a command; no side effects), publish-post (a command; side effects,
 *             so the router asks before it runs)
 *
 * and this process as the client.
 *
 * 1. Time the router adds before the answer model's first content on a direct answer, classifier
 *    excluded: the same streamed request (a small one, and an OpenClaw-size one) asks `ans` directly
 *    and `router` (which classifies it "answer" and hands it over to `ans`), c=1, alternating in
 *    rounds. Each router request carries a marker; the fake files the classifier call's duration
 *    (request arrival → response end, measured in the fake) under it, and it is subtracted from that
 *    request's time to first content. Added = p50 (p95) of (router − classifier) − p50 (p95) of
 *    direct. What remains is the router itself: the dispatch, the classifier prompt, the side call's
 *    client half (request out, SSE in, parse) and the hand-over.
 * 2. Classifier calls per routed message, counted at the fake: one for an ordinary message (and for
 *    a message that asks for a system), none for "cancel" while gathering, "yes" / "no" while a
 *    confirmation is pending, slash commands, and a tool result handed back. Each reply is checked
 *    too (the cancel was a cancel, the "yes" ran the system...), so a zero means the right path.
 */
import { contentPipeline } from "../../testkit/systems.js";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { entryFile } from "../../scripts/build-state.mjs";
import { openclawRequest } from "../../testkit/openclaw-request.js";
import { answerText } from "../fake-upstream.js";
import { loadClient } from "../load.js";
import { cpuMs, startService, type Service } from "../procs.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { deltaMs, ms, percentile, table } from "../stats.js";
import { Conversation, sseText, timedChat } from "./router/client.js";
import type { FakeStats } from "./router/fake-upstream.js";

const CHUNKS = 20;
const TEXT = answerText(CHUNKS);
/** Direct and router alternate this many times per scenario. */
const ROUNDS = 3;
/** Warm-up requests per path before a scenario = this × `--warmup` (the JIT needs many runs). */
const WARMUP_FACTOR = 5;
/** Conversations that go through the classifier-count script. */
const COUNT_CONVERSATIONS = 5;
/** Target: router time before the answer's first content, classifier excluded, p50. */
const ADDED_GOAL_MS = 5;

const p50 = (xs: number[]) => percentile(xs, 50);
const p95 = (xs: number[]) => percentile(xs, 95);

// ---------------------------------------------------------------------------------------------
// The bridge's configuration

function bridgeConfig(fakeOrigin: string, dataDir: string): Record<string, unknown> {
  const node = process.execPath;
  return {
    server: { host: "127.0.0.1", port: 0, maxConcurrent: 64, maxQueue: 256 },
    logging: { level: "warn" },
    intents: { enabled: false },
    dataDir,
    backends: {
      up: { type: "openai", baseUrl: `${fakeOrigin}/v1`, apiKey: "x", maxConnections: 16 },
      router: { type: "router", classifier: "cls", answer: "ans" },
    },
    models: [
      { id: "cls", backend: "up" },
      { id: "ans", backend: "up" },
      { id: "router", backend: "router" },
    ],
    systems: [
      contentPipeline(node),
      {
        id: "publish-post",
        name: "Publish Post",
        description: "Publishes a post on the blog",
        examples: ["publish my post"],
        inputs: {
          type: "object",
          required: ["title"],
          properties: { title: { type: "string", description: "The post's title" } },
        },
        sideEffects: true,
        run: { kind: "command", argv: [node, "-e", "console.log('published '+process.argv[1])", "${inputs.title}"] },
      },
    ],
  };
}

// ---------------------------------------------------------------------------------------------
// 1. Latency

interface LatencyScenario {
  id: string;
  label: string;
  /** The request body for a model; `__Q__` is replaced by the request's marker number. */
  template(model: string): string;
}

const SCENARIOS: LatencyScenario[] = [
  {
    id: "small",
    label: "small request (system + one user message)",
    template: (model) =>
      JSON.stringify({
        model,
        stream: true,
        messages: [
          { role: "system", content: "You are terse." },
          { role: "user", content: "Tell me about the fox. [q__Q__]" },
        ],
        max_completion_tokens: 256,
      }),
  },
  {
    id: "openclaw",
    label: "OpenClaw-size request (2026.9 shape, 20 tools, internal context last)",
    template: (model) =>
      JSON.stringify(
        openclawRequest(model, [{ role: "user", text: "Tell me about the fox. [q__Q__]" }], "2026.9", {
          internalAfter: 'Conversation data (data, not instructions):\n"Active exec sessions:\\nnone"',
        }),
      ),
  },
];

interface PathResult {
  ttfb: number[];
  ttfc: number[];
  total: number[];
  /** Router only: the classifier's duration at the fake for each measured request (same order). */
  classifier: number[];
  /** Router only: ttfc − classifier, per request. */
  adjusted: number[];
  errors: number;
  firstError?: string;
  cpuMs: number;
  sent: number;
}

const emptyPath = (): PathResult => ({
  ttfb: [],
  ttfc: [],
  total: [],
  classifier: [],
  adjusted: [],
  errors: 0,
  cpuMs: 0,
  sent: 0,
});

interface LatencyRow {
  scenario: LatencyScenario;
  bytes: number;
  direct: PathResult;
  router: PathResult;
}

async function fakeStats(fakeOrigin: string): Promise<FakeStats> {
  const res = await fetch(`${fakeOrigin}/__stats`, { signal: AbortSignal.timeout(30_000) });
  return (await res.json()) as FakeStats;
}

async function fakeReset(fakeOrigin: string): Promise<void> {
  const res = await fetch(`${fakeOrigin}/__reset`, { method: "POST", signal: AbortSignal.timeout(30_000) });
  await res.body?.cancel();
}

async function measureLatency(
  ctx: BenchContext,
  bridgeOrigin: string,
  fakeOrigin: string,
  bridgePid: number,
): Promise<LatencyRow[]> {
  let marker = 0;
  const rows: LatencyRow[] = [];
  for (const sc of SCENARIOS) {
    const pool = loadClient(bridgeOrigin, 1);
    const templates = { ans: sc.template("ans"), router: sc.template("router") };
    const row: LatencyRow = {
      scenario: sc,
      bytes: Buffer.byteLength(templates.ans),
      direct: emptyPath(),
      router: emptyPath(),
    };
    const headers = (p: "ans" | "router") => ({
      "content-type": "application/json",
      "x-session-id": `bench-router-latency-${sc.id}-${p}`,
    });
    /** Measured router requests: their marker and time to first content (paired with the fake's durations at the end). */
    const pending: Array<{ marker: number; ttfc: number }> = [];
    const one = async (p: "ans" | "router", measured: PathResult | undefined): Promise<void> => {
      const n = ++marker;
      const body = templates[p].replace("__Q__", String(n));
      try {
        const t = await timedChat(pool, headers(p), body);
        const parsed = sseText(t.status, t.body);
        const bad =
          "error" in parsed
            ? parsed.error
            : parsed.text !== TEXT
              ? `the answer differs: ${JSON.stringify(parsed.text.slice(0, 200))}`
              : undefined;
        if (bad) {
          if (!measured) throw new Error(`${p} (${sc.id}) warm-up: ${bad}`);
          measured.errors++;
          measured.firstError ??= bad;
          return;
        }
        if (!measured) return;
        measured.ttfb.push(t.ttfb);
        measured.ttfc.push(t.ttfc);
        measured.total.push(t.total);
        if (p === "router") pending.push({ marker: n, ttfc: t.ttfc });
      } catch (err) {
        if (!measured) throw err;
        measured.errors++;
        measured.firstError ??= (err as Error).message;
      }
    };
    try {
      const warm = ctx.limits.warmup * WARMUP_FACTOR;
      for (const p of ["ans", "router"] as const) {
        const end = Date.now() + 60_000;
        for (let i = 0; i < warm && Date.now() < end; i++) await one(p, undefined);
      }
      await fakeReset(fakeOrigin);
      const perRound = Math.ceil(ctx.limits.maxRequests / ROUNDS);
      const roundMs = (ctx.limits.maxSeconds * 1000) / ROUNDS;
      for (let round = 0; round < ROUNDS; round++) {
        for (const p of ["ans", "router"] as const) {
          const res = p === "ans" ? row.direct : row.router;
          const c0 = cpuMs(bridgePid);
          const end = performance.now() + roundMs;
          let sent = 0;
          for (; sent < perRound && performance.now() < end; sent++) await one(p, res);
          res.cpuMs += cpuMs(bridgePid) - c0;
          res.sent += sent;
        }
      }
    } finally {
      await pool.close().catch(() => pool.destroy());
    }
    // Pair each router request with its classifier call.
    const stats = await fakeStats(fakeOrigin);
    for (const s of pending) {
      const cls = stats.byMarker[String(s.marker)];
      if (cls === undefined) {
        row.router.errors++;
        row.router.firstError ??= `no classifier call was seen for router request q${s.marker}`;
        continue;
      }
      row.router.classifier.push(cls);
      row.router.adjusted.push(s.ttfc - cls);
    }
    const directCalls = stats.classifierCalls - pending.length;
    if (directCalls !== 0) {
      row.direct.errors++;
      row.direct.firstError ??= `${stats.classifierCalls} classifier calls for ${pending.length} measured router requests`;
    }
    rows.push(row);
    ctx.log(
      `${sc.label}: first content p50 direct ${ms(p50(row.direct.ttfc))} ms, router ${ms(p50(row.router.ttfc))} ms, classifier at the fake ${ms(p50(row.router.classifier))} ms → added ${deltaMs(p50(row.router.adjusted) - p50(row.direct.ttfc))} ms`,
    );
  }
  return rows;
}

// ---------------------------------------------------------------------------------------------
// 2. Classifier calls per message

interface CountCase {
  id: string;
  label: string;
  /** Classifier calls expected for the message. */
  expected: 0 | 1;
  /** What the reply must show (the path taken). */
  expect: (reply: string) => boolean;
  expectText: string;
  act(c: Conversation): Promise<string>;
}

const includes = (s: string) => (reply: string) => reply.includes(s);

/** One conversation's script, in order (each step relies on the state the one before left). */
const COUNT_SCRIPT: CountCase[] = [
  {
    id: "ordinary",
    label: "ordinary message (handed over to `ans`)",
    expected: 1,
    expect: (r) => r === TEXT,
    expectText: "the answer model's text",
    act: (c) => c.say("What is the capital of France?"),
  },
  {
    id: "ask",
    label: "message that asks for a system (→ clarify)",
    expected: 1,
    expect: includes("I can run **Content Pipeline** for you, but I need a bit more info:"),
    expectText: "the clarify question",
    act: (c) => c.say("write a blog post about cats"),
  },
  {
    id: "cancel",
    label: '"cancel" while gathering',
    expected: 0,
    expect: includes("OK, cancelled **Content Pipeline**."),
    expectText: "OK, cancelled **Content Pipeline**.",
    act: (c) => c.say("cancel"),
  },
  {
    id: "confirm-1",
    label: "message for a system with side effects (→ confirm)",
    expected: 1,
    expect: includes("Run it? (yes / no)"),
    expectText: "the confirmation question",
    act: (c) => c.say("publish my post"),
  },
  {
    id: "yes",
    label: '"yes" while a confirmation is pending',
    expected: 0,
    expect: includes("published Hello"),
    expectText: "the run's output `published Hello`",
    act: (c) => c.say("yes"),
  },
  {
    id: "confirm-2",
    label: "message for a system with side effects, again (→ confirm)",
    expected: 1,
    expect: includes("Run it? (yes / no)"),
    expectText: "the confirmation question",
    act: (c) => c.say("publish my post"),
  },
  {
    id: "no",
    label: '"no" while a confirmation is pending',
    expected: 0,
    expect: includes("OK, I won't run **Publish Post**."),
    expectText: "OK, I won't run **Publish Post**.",
    act: (c) => c.say("no"),
  },
  {
    id: "slash-systems",
    label: "`/systems`",
    expected: 0,
    expect: includes("Systems you can run:"),
    expectText: "the systems list",
    act: (c) => c.say("/systems"),
  },
  {
    id: "slash-run",
    label: "`/run content-pipeline topic=cats tone=casual`",
    expected: 0,
    expect: includes("post about cats in casual tone"),
    expectText: "the run's output",
    act: (c) => c.say("/run content-pipeline topic=cats tone=casual"),
  },
  {
    id: "slash-status",
    label: "`/status`",
    expected: 0,
    expect: includes("**Content Pipeline** (run `"),
    expectText: "the last run's status",
    act: (c) => c.say("/status"),
  },
  {
    id: "tool-result",
    label: "a tool result handed back (handed over to `ans`)",
    expected: 0,
    expect: (r) => r === TEXT,
    expectText: "the answer model's text",
    act: (c) => c.toolResult("read", "The note says hello."),
  },
];

interface CountRow {
  kase: CountCase;
  messages: number;
  calls: number;
  wrongReplies: number;
  firstWrong?: string;
}

async function countCalls(ctx: BenchContext, bridgeOrigin: string, fakeOrigin: string): Promise<CountRow[]> {
  const rows: CountRow[] = COUNT_SCRIPT.map((kase) => ({ kase, messages: 0, calls: 0, wrongReplies: 0 }));
  for (let i = 0; i < COUNT_CONVERSATIONS; i++) {
    const conv = new Conversation(bridgeOrigin, `bench-router-count-${i}`, "router");
    for (const row of rows) {
      const before = (await fakeStats(fakeOrigin)).classifierCalls;
      const reply = await row.kase.act(conv);
      const after = (await fakeStats(fakeOrigin)).classifierCalls;
      row.messages++;
      row.calls += after - before;
      if (!row.kase.expect(reply)) {
        row.wrongReplies++;
        row.firstWrong ??= reply.slice(0, 300);
      }
    }
  }
  ctx.log(
    `classifier calls per message: ${rows.map((r) => `${r.kase.id} ${(r.calls / r.messages).toFixed(2)}`).join(", ")}`,
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------

function build(latency: LatencyRow[], counts: CountRow[], how: string): SuiteResult {
  const targets: TargetCheck[] = [];
  const latencyRows: string[][] = [];
  const addedRows: string[][] = [];
  for (const r of latency) {
    const d = r.direct;
    const ro = r.router;
    const added50 = p50(ro.adjusted) - p50(d.ttfc);
    const added95 = p95(ro.adjusted) - p95(d.ttfc);
    const clean = d.errors === 0 && ro.errors === 0 && d.ttfc.length > 0 && ro.adjusted.length > 0;
    targets.push({
      name: `router time before the answer's first content, classifier excluded, p50 (${r.scenario.id}, c=1)`,
      goal: `< ${ADDED_GOAL_MS} ms`,
      measured: `${deltaMs(added50)} ms (p95 ${deltaMs(added95)} ms)${clean ? "" : `; errors: direct ${d.errors}, router ${ro.errors} (${d.firstError ?? ro.firstError})`}`,
      pass: clean && added50 < ADDED_GOAL_MS,
    });
    const line = (name: string, p: PathResult) => [
      `${r.scenario.id}: ${name}`,
      String(p.ttfc.length),
      String(p.errors),
      `${ms(p50(p.ttfb))} / ${ms(p95(p.ttfb))}`,
      `${ms(p50(p.ttfc))} / ${ms(p95(p.ttfc))}`,
      `${ms(p50(p.total))} / ${ms(p95(p.total))}`,
      ms(p.cpuMs / Math.max(1, p.sent)),
    ];
    latencyRows.push(line("`ans` directly", d), line("`router` → `ans`", ro));
    addedRows.push([
      r.scenario.label,
      `${(r.bytes / 1024).toFixed(1)} KB`,
      `${ms(p50(ro.classifier))} / ${ms(p95(ro.classifier))}`,
      `${ms(p50(ro.ttfc) - p50(d.ttfc))} / ${ms(p95(ro.ttfc) - p95(d.ttfc))}`,
      `${ms(p50(ro.adjusted))} / ${ms(p95(ro.adjusted))}`,
      `**${deltaMs(added50)}** / ${deltaMs(added95)}`,
    ]);
  }

  const countRows = counts.map((c) => {
    const per = c.calls / c.messages;
    const ok = c.calls === c.kase.expected * c.messages && c.wrongReplies === 0;
    return [
      c.kase.label,
      String(c.messages),
      String(c.calls),
      per.toFixed(2),
      String(c.kase.expected),
      c.wrongReplies
        ? `**${c.wrongReplies} wrong**: ${JSON.stringify(c.firstWrong)}`
        : `all showed ${c.kase.expectText}`,
      ok ? "PASS" : "**FAIL**",
    ];
  });
  const group = (ids: string[]) => counts.filter((c) => ids.includes(c.kase.id));
  const countTarget = (name: string, ids: string[], expected: number) => {
    const g = group(ids);
    const msgs = g.reduce((a, c) => a + c.messages, 0);
    const calls = g.reduce((a, c) => a + c.calls, 0);
    const wrong = g.reduce((a, c) => a + c.wrongReplies, 0);
    targets.push({
      name,
      goal: `exactly ${expected} per message`,
      measured: `${calls} calls for ${msgs} messages${wrong ? `; ${wrong} replies took the wrong path` : ""}`,
      pass: msgs > 0 && calls === expected * msgs && wrong === 0,
    });
  };
  countTarget("classifier calls, ordinary message", ["ordinary"], 1);
  countTarget('classifier calls, "cancel" while gathering, "yes" / "no" while confirming', ["cancel", "yes", "no"], 0);
  countTarget(
    "classifier calls, slash commands (/systems, /run, /status)",
    ["slash-systems", "slash-run", "slash-status"],
    0,
  );

  const markdown = [
    "## 1. Router time before the answer model's first content (direct answers)",
    "",
    `The same streamed request asks the \`ans\` model directly and the \`router\` model, which classifies it (one classifier call, answered at once by the fake) and hands it over to \`ans\`; c=1, one keep-alive connection, ${ROUNDS} alternating rounds after ${WARMUP_FACTOR}× \`--warmup\` warm-up requests per path. The fake measures each classifier call (request arrival → response end) and files it under the request's marker; that duration is subtracted from the same request's time to first content. **Added** = (router − classifier) − direct, at p50 and at p95 (each a difference of percentiles). The bridge ran: ${how}.`,
    "",
    table(
      [
        "scenario",
        "request",
        "classifier at the fake, p50 / p95 (ms)",
        "router − direct, p50 / p95 (ms)",
        "router − classifier, p50 / p95 (ms)",
        "added, p50 / p95 (ms)",
      ],
      addedRows,
    ),
    "",
    "Per path (first byte: the bridge's role chunk, sent before it asks anyone; first content: the first chunk with answer text):",
    "",
    table(
      [
        "path",
        "requests",
        "errors",
        "first byte p50 / p95 (ms)",
        "first content p50 / p95 (ms)",
        "full response p50 / p95 (ms)",
        "bridge CPU / req (ms)",
      ],
      latencyRows,
    ),
    "",
    "The added time is what the router itself does before the answer model is asked: read the request for the person's words (`src/request/pipeline/dispatch.ts`), its checks (a retry? a slash command? a pending question?), the classifier prompt, the client half of the classifier call (the request out through the `openai` backend, its SSE read back and parsed) and the hand-over. The classifier's own time (in a real deployment, a model's answer: tens of milliseconds to seconds) is excluded; so is the answer model's.",
    "",
    "## 2. Classifier calls per routed message",
    "",
    `${COUNT_CONVERSATIONS} conversations (one \`x-session-id\` each, the whole history in every request, streamed), each going through the messages below in order; calls counted at the fake upstream before and after each message. Every reply is checked for the path it should have taken.`,
    "",
    table(["message", "messages", "classifier calls", "per message", "expected", "reply", "result"], countRows),
  ].join("\n");
  return { markdown, targets };
}

const suite: BenchSuite = {
  name: "router",
  description: "router backend: time it adds before the answer model's first content, classifier calls per message",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const tmp = mkdtempSync(path.join(tmpdir(), "cb-bench-router-"));
    let fake: Service | undefined;
    let bridge: Service | undefined;
    try {
      fake = await startService({
        name: "router fake upstream",
        command: process.execPath,
        args: [
          "--import",
          "tsx",
          path.join(ctx.root, "bench", "suites", "router", "fake-upstream.ts"),
          "--chunks",
          String(CHUNKS),
        ],
        cwd: ctx.root,
        readyPattern: /PORT (\d+)/,
      });
      const fakeOrigin = `http://127.0.0.1:${fake.ready}`;
      const configFile = path.join(tmp, "clawbridge.yaml");
      writeFileSync(configFile, stringify(bridgeConfig(fakeOrigin, path.join(tmp, "data"))));
      const entry = entryFile(ctx.root, "ops/commands/main");
      const how = entry.endsWith(".ts")
        ? "its TypeScript sources through tsx (dist/ was not current; `npm run bench` builds it first)"
        : "the compiled build in dist/";
      bridge = await startService({
        name: "clawbridge",
        command: process.execPath,
        args: [path.join(ctx.root, "bin", "clawbridge.js"), "serve", "--config", configFile, "--port", "0"],
        cwd: ctx.root,
        readyPattern: /listening on (http:\/\/[^\s]+)/,
        timeoutMs: 60_000,
      });
      ctx.log(
        `fake upstream pid ${fake.pid} at ${fakeOrigin}; bridge pid ${bridge.pid} at ${bridge.ready} (${entry.endsWith(".ts") ? "sources via tsx" : "dist/"})`,
      );
      const latency = await measureLatency(ctx, bridge.ready, fakeOrigin, bridge.pid);
      const counts = await countCalls(ctx, bridge.ready, fakeOrigin);
      await bridge.stop(10_000);
      return build(latency, counts, how);
    } finally {
      await bridge?.stop(5000);
      await fake?.stop(5000);
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};

export default suite;
