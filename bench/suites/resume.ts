/**
 * Suite "resume": what resume mode forwards to a CLI agent, and what the bridge adds to the time to
 * first token. Per backend (claude-code, gemini-cli), real CLIs from node_modules/.bin answer from a
 * local fake model API (testkit/fakes; the per-CLI parts are in bench/suites/resume/clis.ts); the
 * bridge runs in this process with a debug logger whose "cli started" lines give the moment each
 * CLI was spawned.
 *
 * Conversations are OpenClaw-shaped (testkit/openclaw-request.ts, 2026.9 generation) and grown
 * to ~80 KB per request: a ~45 KB system prompt (extra Project Context files), 22 tool definitions,
 * earlier turns replayed.
 *
 * Bytes forwarded per turn are measured twice:
 *   - computed: `buildResumeTurn()` on the request (bootstrap = system text, stdin = text), exactly
 *     what the pipeline hands the backend;
 *   - observed: in the fake model API's recorded request, the bootstrap block (Claude: the appended
 *     system block; Gemini: `systemInstruction`) and the newest user content.
 * Latency: request → first content chunk through the bridge, against the same CLI run directly with
 * the same argv/stdin/env (spawn → first text delta), alternating, p50 over the turns.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { resolveConfig } from "../../src/core/config/load.js";
import type { ResolvedModel } from "../../src/core/config/schema.js";
import { buildResumeTurn } from "../../src/request/context/resume.js";
import { buildStatelessPrompt } from "../../src/request/context/stateless.js";
import { createLogger } from "../../src/core/log/logger.js";
import { chatRequestSchema } from "../../src/request/chat-api/schema.js";
import { startBridge, type Bridge } from "../../src/request/http/start.js";
import {
  openclawRequest,
  openclawSystemPrompt,
  openclawTools,
  type OpenClawTurn,
} from "../../testkit/openclaw-request.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { int, ms, percentile, table } from "../stats.js";
import { ADAPTERS, type Adapter, type Observed } from "./resume/clis.js";
import { readChatStream } from "../chat-stream.js";

/** Conversations per backend, and turns per conversation. */
const CONVERSATIONS = 2;
const TURNS = 6;
/** Request size the OpenClaw-shaped turn-1 request is grown to. */
const TARGET_REQUEST_BYTES = 80 * 1024;
/** Target: a later turn forwards less than this plus the person's own text. */
const LATER_TURN_OVERHEAD_LIMIT = 2048;
const MODEL = "resume-bench";

const QUESTIONS = [
  "Can you remind me what I planned for the weekend trip to Tartu? I think I wrote it down somewhere last week.",
  "Also, what time does the bus leave on Saturday morning, and how long is the ride?",
  "Please draft a short message to Maria saying I will be there around noon and ask if she needs anything from Tallinn.",
  "Make it a bit warmer and add that I'm bringing the board game we talked about.",
  "What should I pack if the forecast says rain on Sunday?",
  "Summarise everything we decided in three bullet points so I can pin it.",
  "One more thing: remind me to buy a birthday card on Friday evening.",
  "Thanks! What was the name of that café near the river you mentioned?",
];

const bytes = (s: string) => Buffer.byteLength(s, "utf8");
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
const median = (xs: number[]) => percentile(xs, 50);

// ---------------------------------------------------------------------------------------------
// The ~80 KB OpenClaw request

const MEMORY_LINE = (i: number) =>
  `- 2026-${String((i % 12) + 1).padStart(2, "0")}-${String((i % 28) + 1).padStart(2, "0")}: ` +
  [
    "Alex prefers trains to buses when the ride is under three hours.",
    "Maria's birthday is in December; she likes dark chocolate.",
    "The Tartu flat has no washing machine.",
    "Weekly review on Sunday evenings.",
    "Board game night: Carcassonne and Azul are favourites.",
  ][i % 5] +
  ` (note ${i})`;

/** OpenClaw's system prompt with MEMORY.md / TOOLS.md context files added, `memoryLines` long. */
function bigSystemPrompt(memoryLines: number): string {
  const base = openclawSystemPrompt();
  const ws = "/home/someone/.openclaw/workspace";
  const memory = `## ${ws}/MEMORY.md\n\n# MEMORY.md\n\n${Array.from({ length: memoryLines }, (_, i) => MEMORY_LINE(i)).join("\n")}\n`;
  const tools = `## ${ws}/TOOLS.md\n\n# TOOLS.md - local notes\n\n${Array.from({ length: 40 }, (_, i) => `- camera ${i}: front door, rtsp on the NAS; ssh host box-${i} (user alex)`).join("\n")}\n`;
  return base.replace("## Silent Replies", `${memory}\n${tools}\n## Silent Replies`);
}

interface RequestShape {
  memoryLines: number;
  tools: number;
}

function request(turns: OpenClawTurn[], sessionId: string, shape: RequestShape): Record<string, unknown> {
  const body = openclawRequest(MODEL, turns, "2026.9", { sessionId }) as Record<string, any>;
  body.messages[0] = { role: "system", content: bigSystemPrompt(shape.memoryLines) };
  body.tools = openclawTools(shape.tools);
  return body;
}

/** Grow the system prompt until turn 1's request is ~80 KB. */
function shapeFor80k(): RequestShape {
  const shape: RequestShape = { memoryLines: 0, tools: 22 };
  for (let i = 0; i < 2000; i++) {
    const size = bytes(
      JSON.stringify(request([{ role: "user", text: QUESTIONS[0]! }], "00000000-0000-4000-8000-000000000000", shape)),
    );
    if (size >= TARGET_REQUEST_BYTES) break;
    shape.memoryLines += 10;
  }
  return shape;
}

// ---------------------------------------------------------------------------------------------
// Log capture: the moment each CLI was spawned

class SpawnLog extends Writable {
  readonly spawns: number[] = [];
  private rest = "";
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    const text = this.rest + chunk.toString("utf8");
    const lines = text.split("\n");
    this.rest = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.includes('"cli started"')) continue;
      try {
        const o = JSON.parse(line) as { time?: number; msg?: string };
        if (o.msg === "cli started" && typeof o.time === "number") this.spawns.push(o.time);
      } catch {
        /* not JSON */
      }
    }
    cb();
  }
  /** First spawn at or after `t`. */
  after(t: number): number | undefined {
    return this.spawns.find((s) => s >= t);
  }
}

// ---------------------------------------------------------------------------------------------
// One turn through the bridge, one turn directly

interface BridgeTurn {
  text: string;
  requestToFirstMs: number;
  requestToSpawnMs: number | undefined;
}

async function bridgeTurn(bridge: Bridge, body: unknown, spawns: SpawnLog): Promise<BridgeTurn> {
  const t0 = Date.now();
  const res = await fetch(`${bridge.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const { text, firstAt: first } = await readChatStream(res, "bridge", Date.now);
  const spawned = spawns.after(t0);
  return { text, requestToFirstMs: first - t0, requestToSpawnMs: spawned === undefined ? undefined : spawned - t0 };
}

interface DirectTurn {
  session?: string;
  spawnToFirstMs: number;
}

/** Run the CLI like the backend does (argv, stdin, env, cwd) and time spawn → first text delta. */
function directTurn(
  bin: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  cwd: string,
  stdin: string,
  adapter: Adapter,
  timeoutMs: number,
): Promise<DirectTurn> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const child = spawn(bin, args, { cwd, env, stdio: ["pipe", "pipe", "pipe"], detached: true });
    let first: number | undefined;
    let session: string | undefined;
    let rest = "";
    let err = "";
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }, timeoutMs);
    child.stdout.on("data", (d: Buffer) => {
      const lines = (rest + d.toString("utf8")).split("\n");
      rest = lines.pop() ?? "";
      for (const l of lines) {
        if (!l.trim().startsWith("{")) continue;
        try {
          const r = adapter.line(JSON.parse(l));
          if (r.session) session ??= r.session;
          if (r.text && first === undefined) first = Date.now();
        } catch {
          /* not JSON */
        }
      }
    });
    child.stderr.on("data", (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      if (first === undefined)
        reject(new Error(`${path.basename(bin)} exited ${code} without text: ${err.slice(-600)}`));
      else resolve({ session, spawnToFirstMs: first - t0 });
    });
    child.stdin.end(stdin);
  });
}

// ---------------------------------------------------------------------------------------------

interface TurnRow {
  conversation: number;
  turn: number;
  requestBytes: number;
  userBytes: number;
  systemBytes: number;
  textBytes: number;
  statelessBytes: number;
  observed?: Observed;
  bridge: BridgeTurn;
  direct: DirectTurn;
}

async function runBackend(
  ctx: BenchContext,
  adapter: Adapter,
  shape: RequestShape,
): Promise<{ rows: TurnRow[]; model: ResolvedModel }> {
  const fake = await adapter.start();
  const base = mkdtempSync(path.join(tmpdir(), "cb-bench-resume-"));
  const home = path.join(base, "home");
  mkdirSync(home, { recursive: true });
  const cliEnv = adapter.env(fake.baseUrl, home);
  const spawns = new SpawnLog();
  const config = resolveConfig(
    {
      server: { port: 0, heartbeatSeconds: 15 },
      logging: { level: "debug" },
      dataDir: path.join(base, "data"),
      intents: { enabled: false },
      // Cold: the latency compared is the bridge against the same CLI started directly (warm: bench/suites/warm.ts).
      backends: {
        cli: {
          type: adapter.type,
          command: adapter.bin,
          env: cliEnv,
          timeoutSeconds: 120,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      models: [{ id: MODEL, backend: "cli", model: "default", session: { mode: "resume" } }],
    },
    "bench",
  );
  const model = config.models[0]!;
  const bridge = await startBridge(config, { logger: createLogger("debug", spawns) });
  const rows: TurnRow[] = [];
  try {
    for (let c = 0; c < CONVERSATIONS; c++) {
      const sessionId = `6f1c2a7e-${String(c).padStart(4, "0")}-4222-8333-${Date.now().toString(16).slice(-12).padStart(12, "0")}`;
      const key = `openclaw:agent:main:main:${sessionId}`;
      const turns: OpenClawTurn[] = [];
      const directCwd = path.join(base, `direct-${c}`);
      mkdirSync(directCwd, { recursive: true });
      let directSession: string | undefined;
      for (let t = 0; t < TURNS; t++) {
        turns.push({ role: "user", text: QUESTIONS[(t + c) % QUESTIONS.length]! });
        const body = request(turns, sessionId, shape);
        const requestBytes = bytes(JSON.stringify(body));
        const messages = chatRequestSchema.parse(body).messages;
        const built = buildResumeTurn(messages, {
          budget: model.context,
          conversationKey: key,
          continuing: t > 0,
          maxSeedChars: model.session.maxSeedChars,
        });
        const stateless = buildStatelessPrompt(messages, model.context, []);

        const before = fake.count();
        const b = await bridgeTurn(bridge, body, spawns);
        const observed = fake.observe(before, key, built.prompt.system);

        // The same turn, run directly: same argv shape, stdin and environment, its own session.
        const sysDir = mkdtempSync(path.join(base, "sys-"));
        const sysFile = path.join(sysDir, "system.md");
        writeFileSync(sysFile, built.prompt.system, { mode: 0o600 });
        const run = adapter.direct(built.prompt, directSession, sysFile);
        const d = await directTurn(
          adapter.bin,
          run.args,
          { ...process.env, ...cliEnv, ...run.env },
          directCwd,
          built.prompt.text,
          adapter,
          120_000,
        );
        rmSync(sysDir, { recursive: true, force: true });
        directSession ??= d.session;

        turns.push({ role: "assistant", text: b.text });
        rows.push({
          conversation: c + 1,
          turn: t + 1,
          requestBytes,
          userBytes: bytes(built.userText),
          systemBytes: bytes(built.prompt.system),
          textBytes: bytes(built.prompt.text),
          statelessBytes: bytes(stateless.prompt.system) + bytes(stateless.prompt.text),
          observed,
          bridge: b,
          direct: d,
        });
        ctx.log(
          `${adapter.name} c${c + 1} t${t + 1}: request ${kb(requestBytes)}, forwarded ${int(bytes(built.prompt.system) + bytes(built.prompt.text))} B, bridge→first ${b.requestToFirstMs} ms, direct→first ${d.spawnToFirstMs} ms`,
        );
      }
    }
  } finally {
    await bridge.close(0);
    await fake.close();
    rmSync(base, { recursive: true, force: true });
  }
  return { rows, model };
}

function summarise(adapter: Adapter, rows: TurnRow[]): { md: string; targets: TargetCheck[] } {
  const first = rows.filter((r) => r.turn === 1);
  const later = rows.filter((r) => r.turn > 1);
  const fwd = (r: TurnRow) => r.systemBytes + r.textBytes;
  const over = (r: TurnRow) => fwd(r) - r.userBytes;
  const obsFwd = (r: TurnRow) => (r.observed ? r.observed.bootstrapBytes + r.observed.newMessageBytes : NaN);
  const obsOver = (r: TurnRow) => obsFwd(r) - r.userBytes;
  const maxOf = (xs: number[]) => (xs.length ? Math.max(...xs) : NaN);

  const perTurn = table(
    [
      "conv",
      "turn",
      "OpenClaw request",
      "person's text",
      "bootstrap (system)",
      "stdin text",
      "forwarded",
      "over the text",
      "at model API: bootstrap + new msg",
      "stateless would forward",
      "model request (CLI's own)",
    ],
    rows.map((r) => [
      String(r.conversation),
      String(r.turn),
      kb(r.requestBytes),
      `${int(r.userBytes)} B`,
      `${int(r.systemBytes)} B`,
      `${int(r.textBytes)} B`,
      `${int(fwd(r))} B`,
      `${int(over(r))} B`,
      r.observed ? `${int(r.observed.bootstrapBytes)} + ${int(r.observed.newMessageBytes)} B` : "not seen",
      `${int(r.statelessBytes)} B`,
      r.observed ? kb(r.observed.modelRequestBytes) : "–",
    ]),
  );

  const sum = (label: string, rs: TurnRow[]) => [
    label,
    String(rs.length),
    kb(median(rs.map((r) => r.requestBytes))),
    `${int(median(rs.map(fwd)))} B (max ${int(maxOf(rs.map(fwd)))})`,
    `${int(maxOf(rs.map(over)))} B`,
    `${int(maxOf(rs.map(obsOver)))} B`,
    `${((100 * median(rs.map(fwd))) / median(rs.map((r) => r.requestBytes))).toFixed(1)} %`,
  ];
  const bytesTable = table(
    [
      "turns",
      "n",
      "OpenClaw request (p50)",
      "forwarded to the CLI (p50)",
      "max over the person's text (computed)",
      "max over the text (at model API)",
      "forwarded / request",
    ],
    [sum("first turn (new session)", first), sum("later turns (resumed)", later)],
  );

  const lat = (label: string, rs: TurnRow[]) => {
    const viaBridge = median(rs.map((r) => r.bridge.requestToFirstMs));
    const direct = median(rs.map((r) => r.direct.spawnToFirstMs));
    const spawnDelay = rs.map((r) => r.bridge.requestToSpawnMs).filter((x): x is number => x !== undefined);
    const paired = median(rs.map((r) => r.bridge.requestToFirstMs - r.direct.spawnToFirstMs));
    return [
      label,
      String(rs.length),
      ms(viaBridge),
      ms(direct),
      ms(viaBridge - direct),
      ms(paired),
      ms(median(spawnDelay)),
      ms(maxOf(spawnDelay)),
    ];
  };
  const latTable = table(
    [
      "turns",
      "n",
      "request → first token via bridge (p50 ms)",
      "CLI run directly: spawn → first token (p50 ms)",
      "difference of the p50s",
      "p50 of per-turn differences",
      "request → CLI spawned (p50 ms)",
      "request → CLI spawned (max ms)",
    ],
    [lat("first turn", first), lat("later turns", later)],
  );

  const laterMaxComputed = maxOf(later.map(over));
  const laterMaxObserved = maxOf(later.map(obsOver));
  const seenAll = later.every((r) => r.observed);
  const targets: TargetCheck[] = [
    {
      name: `${adapter.name}: later turn forwards < 2 KB + the person's text (computed)`,
      goal: `forwarded − text < ${LATER_TURN_OVERHEAD_LIMIT} B`,
      measured: `max ${int(laterMaxComputed)} B over ${later.length} turns`,
      pass: later.length > 0 && laterMaxComputed < LATER_TURN_OVERHEAD_LIMIT,
    },
    {
      name: `${adapter.name}: later turn forwards < 2 KB + the person's text (at the model API)`,
      goal: `bootstrap + new message − text < ${LATER_TURN_OVERHEAD_LIMIT} B`,
      measured: seenAll
        ? `max ${int(laterMaxObserved)} B over ${later.length} turns`
        : "some turns not seen at the fake API",
      pass: seenAll && later.length > 0 && laterMaxObserved < LATER_TURN_OVERHEAD_LIMIT,
    },
  ];
  const md = [
    `## ${adapter.name}`,
    "",
    "### Bytes forwarded to the CLI per turn",
    "",
    bytesTable,
    "",
    "### Latency to first token (bridge vs the same CLI run directly)",
    "",
    latTable,
    "",
    "<details><summary>Every turn</summary>",
    "",
    perTurn,
    "",
    "</details>",
    "",
  ].join("\n");
  return { md, targets };
}

export async function runResumeSuiteWith(ctx: BenchContext): Promise<SuiteResult> {
  const shape = shapeFor80k();
  const sample = request(
    [{ role: "user", text: QUESTIONS[0]! }],
    "00000000-0000-4000-8000-000000000000",
    shape,
  ) as Record<string, any>;
  const sampleBytes = bytes(JSON.stringify(sample));
  const systemBytes = bytes(String(sample.messages[0].content));
  const toolBytes = bytes(JSON.stringify(sample.tools));
  ctx.log(
    `resume: OpenClaw-shaped request ${kb(sampleBytes)} (system ${kb(systemBytes)}, ${sample.tools.length} tools ${kb(toolBytes)})`,
  );

  const parts: string[] = [
    `Request: OpenClaw 2026.9-shaped, turn 1 = ${kb(sampleBytes)} (system prompt ${kb(systemBytes)}, ${sample.tools.length} tool definitions ${kb(toolBytes)}); later turns also replay the earlier turns. ` +
      `${CONVERSATIONS} conversations × ${TURNS} turns per backend; the first turn of each conversation starts a new CLI session, the others resume it.`,
    "",
    '"forwarded" = what the bridge hands the CLI: the bootstrap (system text: Claude `--append-system-prompt-file`, Gemini `GEMINI_SYSTEM_MD`) plus the prompt on stdin, computed with `buildResumeTurn()` exactly as the pipeline does. ' +
      '"at model API" = the same two parts found in the request the CLI sent to the fake model API. "model request" is the CLI\'s whole request (its own system prompt, tools and the session history it keeps), for scale. ' +
      '"stateless would forward" = the compact prompt the stateless mode would build for the same request.',
    "",
    'Latency: "via bridge" is measured by the client from sending the request to the first non-empty `delta.content`; "directly" runs the same CLI with the same argv, stdin and environment (its own session, same turn) from `spawn()` to the first text delta, alternating with the bridge turn. ' +
      "\"request → CLI spawned\" comes from the bridge's own debug log line `cli started`: it is the bridge's own work before the CLI runs (HTTP, parsing the ~80 KB body, identity, store lookup, turn building, bootstrap file, spawn) and the most stable measure of what the bridge adds; " +
      "the direct/bridge differences also carry CLI start-up noise (start-up dominates and varies with machine load). After the first token the bridge relays each CLI line as it arrives.",
    "",
  ];
  const targets: TargetCheck[] = [];
  for (const make of ADAPTERS) {
    const adapter = make(ctx.root);
    ctx.log(`resume: ${adapter.name}`);
    const { rows } = await runBackend(ctx, adapter, shape);
    const s = summarise(adapter, rows);
    parts.push(s.md);
    targets.push(...s.targets);
  }
  return { markdown: parts.join("\n"), targets };
}

/** Standalone form (title + markdown) for runners without the BenchSuite interface. */
export async function runResumeSuite(): Promise<{ title: string; markdown: string }> {
  const root = path.resolve(import.meta.dirname, "../..");
  const ctx: BenchContext = {
    root,
    resultsDir: path.join(root, "bench", "results"),
    limits: { warmup: 0, maxRequests: 0, maxSeconds: 0 },
    profile: false,
    log: (m) => process.stderr.write(`[bench] ${m}\n`),
  };
  const r = await runResumeSuiteWith(ctx);
  const t = r.targets
    .map((x) => `- ${x.pass ? "PASS" : "FAIL"}: ${x.name} — ${x.measured} (goal ${x.goal})`)
    .join("\n");
  return { title: "resume: bytes forwarded per turn and added latency", markdown: `${t}\n\n${r.markdown}` };
}

export const resumeSuite: BenchSuite = {
  name: "resume",
  description: "resume mode: bytes forwarded to Claude Code / Gemini CLI per turn, bridge-added latency to first token",
  resultSlug: "resume",
  run: runResumeSuiteWith,
};

export default resumeSuite;
