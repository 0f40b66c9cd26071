/**
 * Suite "warm-cpu" (issue 34, items 3 and 4): what a turn costs the bridge itself, with the real
 * Claude Code against the instant fake Anthropic API (testkit/fakes), OpenClaw-shaped requests
 * (testkit/openclaw-request.ts: the ~30 KB system prompt, 20 tools, a history that grows) and the
 * default configuration otherwise (intent detection on, the session store at FULL sync).
 * - **warm**: after WARMUP_CONVERSATIONS conversations not counted (the JIT), CONVERSATIONS
 *   conversations of TURNS turns on a warm backend; turn 1 of each starts the process and is not
 *   counted. Of the later turns (no process started): the bridge process's
 *   CPU per turn (/proc user + system, read before the second turn and after the last one plus a
 *   settle pause, so work moved after the answer is counted too), first token and [DONE].
 * - **cold**: COLD_TURNS turns on a cold backend (a `claude -p` per turn): the client's last
 *   content chunk → `[DONE]` (issue 34: a cold turn ends on the CLI's `result` line, not on its exit).
 *   Claude Code itself takes 5-25 ms from its last text delta to its `result` line; the same is
 *   measured with testkit/fakes/fake-claude-cli.sh, which prints its `result` right after its last
 *   delta and then takes LINGER_MS to exit as Claude Code does (~30-60 ms): the bridge's own share.
 * With `--profile` the bridge runs under `node --cpu-prof`; only samples inside the warm later
 * turns' windows count (bench/suites/doors/windows.ts), split by part of the bridge and by function,
 * in ms per turn.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { StackFrame } from "../profile.js";
import { cpuMs, startService, type Service } from "../procs.js";
import { ms, percentile, table } from "../stats.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";
import { startFakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { claudeEnv } from "../../testkit/fakes/cli-env.js";
import { openclawRequest, type OpenClawTurn } from "../../testkit/openclaw-request.js";
import { nowUs, profileByWindow, type Window } from "./doors/windows.js";

const CONVERSATIONS = 6;
const TURNS = 16;
/** Conversations run before the measured ones (not counted). */
const WARMUP_CONVERSATIONS = 2;
const COLD_TURNS = 6;
/** How long the fake CLI takes to exit after its result line. */
const LINGER_MS = 40;
const SETTLE_MS = 300;
const CPU_TARGET_MS = 5;
const DONE_TARGET_MS = 15;
const CHUNKS = ["The ", "warm ", "answer ", "comes ", "in ", "pieces."];

/** One streamed answer, timed at the client (performance.now()). */
interface Timed {
  text: string;
  sentAt: number;
  firstAt: number;
  lastContentAt: number;
  doneAt: number;
}

async function ask(origin: string, body: unknown): Promise<Timed> {
  const sentAt = performance.now();
  const res = await fetch(`${origin}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(120_000),
  });
  if (res.status !== 200 || !res.body) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let text = "";
  let firstAt = 0;
  let lastContentAt = 0;
  let doneAt = 0;
  for (let i = 0; i < 100_000 && !doneAt; i++) {
    const { done, value } = await reader.read();
    if (done) break;
    const at = performance.now();
    buf += dec.decode(value, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = block.startsWith("data: ") ? block.slice(6) : "";
      if (data === "[DONE]") doneAt = at;
      if (!data || data === "[DONE]") continue;
      const obj = JSON.parse(data) as {
        choices?: Array<{ delta?: { content?: string } }>;
        error?: { message: string };
      };
      if (obj.error) throw new Error(`stream error: ${obj.error.message}`);
      const c = obj.choices?.[0]?.delta?.content;
      if (c) {
        firstAt ||= at;
        lastContentAt = at;
        text += c;
      }
    }
  }
  await reader.cancel().catch(() => {});
  if (!firstAt || !doneAt) throw new Error(`no ${firstAt ? "[DONE]" : "content"} in the answer`);
  return { text, sentAt, firstAt, lastContentAt, doneAt };
}

/**
 * CPU time (ms) of each kind of thread of a process so far, by thread name (`/proc/<pid>/task/<tid>/stat`):
 * the main thread ("node"), V8's workers (GC, compiler), libuv's pool. Ticks of 10 ms.
 */
function threadCpu(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")).replace(/\d+$/, "");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const kind = tid === String(pid) ? "main thread" : name;
      out.set(kind, (out.get(kind) ?? 0) + (Number(f[11]) + Number(f[12])) * 10);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

/** The part of the bridge a sample belongs to: the innermost frame of the repo (or a library) that names one. */
function partOf(stack: StackFrame[]): string | undefined {
  for (const f of stack) {
    const a = f.area;
    if (f.functionName === "(garbage collector)") return "GC";
    if (a === "better-sqlite3" || /core\/store\//.test(a)) return "session store (SQLite)";
    if (/request\/intents\/|request\/web-tools\//.test(a) || /pipeline\/enrich/.test(a)) return "intents";
    if (a === "gpt-tokenizer" || /pipeline\/usage/.test(a)) return "tokenizer";
    if (/request\/context\//.test(a)) return "context (prompt, bootstrap)";
    if (/pipeline\/resume/.test(a)) return "pipeline: resume";
    if (/request\/pipeline\//.test(a)) return "pipeline";
    if (/backends\/warm\/|backends\/cli\/|backends\/claude-code\//.test(a)) return "warm process (JSON lines)";
    if (/request\/encoder\//.test(a)) return "encoder (SSE)";
    if (/request\/http\/|request\/chat-api\/|request\/identity\/|request\/models\//.test(a))
      return "door (HTTP, request)";
    if (a === "zod") return "zod";
    if (a === "pino" || /core\/log\//.test(a)) return "logging";
    if (/ops\//.test(a)) return "ops (events, metrics)";
  }
  for (const f of stack) if (f.coreModule) return `node core (${f.coreModule.replace(/^node:/, "")})`;
  return undefined;
}

const suite: BenchSuite = {
  name: "warm-cpu",
  resultSlug: "warm-turn-cpu",
  description:
    "Claude Code warm and cold: the bridge's CPU per warm later turn (OpenClaw-sized requests) and a cold turn's last token → [DONE]",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const base = mkdtempSync(path.join(tmpdir(), "cb-bench-warmcpu-"));
    const home = path.join(base, "home");
    mkdirSync(home, { recursive: true });
    const profileDir = ctx.profile ? path.join(base, "profile") : undefined;
    const fake = await startFakeAnthropic(() => ({ kind: "text", chunks: CHUNKS }));
    const backend = (warm: boolean) => ({
      type: "claude-code",
      command: path.join(ctx.root, "node_modules/.bin/claude"),
      env: claudeEnv({ baseUrl: fake.baseUrl, home }),
      timeoutSeconds: 120,
      killGraceSeconds: 1,
      warm: { enabled: warm },
    });
    const configFile = path.join(base, "clawbridge.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        server: { host: "127.0.0.1", port: 0, heartbeatSeconds: 15 },
        logging: { level: "warn" },
        dataDir: path.join(base, "data"),
        backends: {
          "claude-warm": backend(true),
          "claude-cold": backend(false),
          "fake-cold": {
            type: "claude-code",
            command: path.join(ctx.root, "testkit/fakes/fake-claude-cli.sh"),
            env: { FAULTS_DIR: path.join(base, "fake-cli") },
            timeoutSeconds: 60,
            killGraceSeconds: 1,
            warm: { enabled: false },
          },
        },
        models: [
          { id: "claude/warm", backend: "claude-warm", model: "default", session: { mode: "resume" } },
          { id: "claude/cold", backend: "claude-cold", model: "default", session: { mode: "resume" } },
          { id: "fake/cold", backend: "fake-cold", session: { mode: "resume" } },
        ],
      }),
    );
    let bridge: Service | undefined;
    const windows: Window[] = [];
    const warm = {
      cpuMs: 0,
      turns: 0,
      first: [] as number[],
      done: [] as number[],
      threads: new Map<string, number>(),
    };
    const cold = { lastToDone: [] as number[], first: [] as number[], fakeLastToDone: [] as number[] };
    let profileMd = "";
    try {
      bridge = await startService({
        name: "clawbridge",
        command: process.execPath,
        args: [
          ...(profileDir ? ["--cpu-prof", "--cpu-prof-dir", profileDir] : []),
          path.join(ctx.root, "bin", "clawbridge.js"),
          "serve",
          "--config",
          configFile,
        ],
        cwd: ctx.root,
        env: { ...process.env, CLAWBRIDGE_CONFIG: "" },
        readyPattern: /listening on (http:\/\/[^\s]+)/,
      });
      const origin = bridge.ready;
      const conversation = async (
        model: string,
        c: number,
        turns: number,
        measured: (t: Timed, i: number) => void,
        extra = "",
        expect = "pieces",
      ) => {
        const history: OpenClawTurn[] = [];
        const sessionId = `6f1c2a7e-${String(c).padStart(4, "0")}-4222-8333-${Date.now().toString(16).padStart(12, "0").slice(-12)}`;
        let from = 0;
        let cpu0 = 0;
        let threads0 = new Map<string, number>();
        for (let t = 0; t < turns; t++) {
          if (t === 1) {
            from = nowUs();
            cpu0 = cpuMs(bridge!.pid);
            threads0 = threadCpu(bridge!.pid);
          }
          history.push({
            role: "user",
            text: `question ${t + 1} of conversation ${c + 1}: tell me something short${extra}`,
          });
          const r = await ask(origin, openclawRequest(model, history, "2026.9", { sessionId }));
          if (!r.text.includes(expect)) throw new Error(`${model}: unexpected answer ${JSON.stringify(r.text)}`);
          history.push({ role: "assistant", text: r.text });
          measured(r, t);
        }
        await new Promise((r) => setTimeout(r, SETTLE_MS));
        const threads = threadCpu(bridge!.pid);
        for (const [k, v] of threads) threads.set(k, v - (threads0.get(k) ?? 0));
        return { fromUs: from, toUs: nowUs(), cpu: cpuMs(bridge!.pid) - cpu0, threads };
      };
      // Warm-up, not counted: the bridge's code is optimised by the JIT only once it has run many
      // times (a long-running bridge is measured, not its first minute).
      for (let c = 0; c < WARMUP_CONVERSATIONS; c++) await conversation("claude/warm", 50 + c, TURNS, () => {});
      ctx.log(`warm-up: ${WARMUP_CONVERSATIONS} conversations of ${TURNS} turns`);
      for (let c = 0; c < CONVERSATIONS; c++) {
        const w = await conversation("claude/warm", c, TURNS, (r, t) => {
          if (t === 0) return;
          warm.first.push(r.firstAt - r.sentAt);
          warm.done.push(r.doneAt - r.sentAt);
        });
        warm.cpuMs += w.cpu;
        for (const [k, v] of w.threads) warm.threads.set(k, (warm.threads.get(k) ?? 0) + v);
        warm.turns += TURNS - 1;
        windows.push({ key: "warm", fromUs: w.fromUs, toUs: w.toUs });
        ctx.log(`warm conversation ${c + 1}: ${(w.cpu / (TURNS - 1)).toFixed(2)} ms of bridge CPU per later turn`);
      }
      // Idle: what the bridge spends on nothing for as long (heartbeats, timers): read against the above.
      const idle0 = cpuMs(bridge.pid);
      await new Promise((r) => setTimeout(r, 2000));
      const idlePerSecond = (cpuMs(bridge.pid) - idle0) / 2;
      await conversation("claude/cold", 100, COLD_TURNS, (r) => {
        cold.lastToDone.push(r.doneAt - r.lastContentAt);
        cold.first.push(r.firstAt - r.sentAt);
      });
      ctx.log(`cold: last token → [DONE] p50 ${ms(percentile(cold.lastToDone, 50))}`);
      await conversation(
        "fake/cold",
        101,
        COLD_TURNS,
        (r) => cold.fakeLastToDone.push(r.doneAt - r.lastContentAt),
        ` FAULTKEY-bench FAULTN-6 FAULTLINGER-${LINGER_MS}`,
        "FAULTS-OK",
      );
      await bridge.stop(10_000);
      if (profileDir) {
        const files = readdirSync(profileDir).filter((f) => f.endsWith(".cpuprofile"));
        if (!files.length) profileMd = "(the bridge wrote no .cpuprofile)";
        else {
          const file = path.join(profileDir, files[0]!);
          const p = profileByWindow(file, ctx.root, windows, partOf).get("warm");
          // Whose code it is: the innermost frame of the repo (library and node frames count for their caller).
          const byFile = profileByWindow(file, ctx.root, windows, (stack) =>
            stack.find((f) => /^(src|dist)\//.test(f.area))?.area.replace(/^(src|dist)\//, ""),
          ).get("warm");
          const per = (v: number) => (v / warm.turns).toFixed(2);
          const rows = (m: Map<string, number>, n: number) =>
            [...m.entries()]
              .sort((a, b) => b[1] - a[1])
              .slice(0, n)
              .map(([k, v]) => [k.includes(" ") ? `\`${k}\`` : k, per(v)]);
          profileMd = p
            ? [
                `Samples inside the warm later turns only (${warm.turns} turns): ${per(p.busyMs)} ms busy per turn (the profiler samples wall time: a blocking fsync counts as busy here, not in /proc CPU).`,
                "",
                "By part of the bridge (innermost frame of the repo or a library that names one):",
                "",
                table(["part", "ms per turn"], rows(p.byPart, 30)),
                "",
                "By file of the repo (the innermost frame of the repo: what a library or node does is counted for the file that called it):",
                "",
                table(["file", "ms per turn"], byFile ? rows(byFile.byPart, 30) : []),
                "",
                "Top functions by self time:",
                "",
                table(["function", "ms per turn"], rows(p.byFunction, 30)),
              ].join("\n")
            : "(no samples inside the warm turns)";
        }
      }
      const cpuPerTurn = warm.cpuMs / warm.turns;
      const targets: TargetCheck[] = [
        {
          name: "bridge CPU per warm later turn (/proc, idle not subtracted)",
          goal: `≤ ${CPU_TARGET_MS} ms`,
          measured: ms(cpuPerTurn),
          pass: cpuPerTurn <= CPU_TARGET_MS,
        },
        {
          name: "cold turn: last token → [DONE] (p50)",
          goal: `≤ ${DONE_TARGET_MS} ms`,
          measured: ms(percentile(cold.lastToDone, 50)),
          pass: percentile(cold.lastToDone, 50) <= DONE_TARGET_MS,
        },
      ];
      const markdown = [
        `Claude Code (node_modules/.bin/claude) against the fake Anthropic API (answers at once, ${CHUNKS.length} chunks); the bridge as its own process (logging warn, intents on, store FULL sync); OpenClaw 2026.9 requests (~30 KB system prompt, 20 tools, growing history). Warm: ${WARMUP_CONVERSATIONS} conversations × ${TURNS} turns to warm the bridge up (not counted), then ${CONVERSATIONS} conversations × ${TURNS} turns, turn 1 of each not counted; cold: ${COLD_TURNS} turns of one conversation.`,
        "",
        table(
          ["", "value"],
          [
            ["warm later turns measured", String(warm.turns)],
            ["bridge CPU per warm later turn (/proc user+sys)", ms(cpuPerTurn)],
            ["bridge CPU while idle, per second (heartbeats, timers)", ms(idlePerSecond)],
            ["warm later turn: first token (p50)", ms(percentile(warm.first, 50))],
            ["warm later turn: [DONE] (p50)", ms(percentile(warm.done, 50))],
            ["cold turn: first token (p50)", ms(percentile(cold.first, 50))],
            ["cold turn: last token → [DONE] (p50)", ms(percentile(cold.lastToDone, 50))],
            ["cold turn: last token → [DONE] (max)", ms(Math.max(...cold.lastToDone))],
            [
              `cold turn of the fake CLI (result right after its last delta, exit ${LINGER_MS} ms later): last token → [DONE] (p50)`,
              ms(percentile(cold.fakeLastToDone, 50)),
            ],
          ],
        ),
        "",
        "The same CPU by thread of the bridge (ms per warm later turn; /proc/<pid>/task):",
        "",
        table(
          ["thread", "ms per turn"],
          [...warm.threads.entries()]
            .filter(([, v]) => v > 0)
            .sort((a, b) => b[1] - a[1])
            .map(([k, v]) => [k, ms(v / warm.turns)]),
        ),
        "",
        `CPU per turn is the bridge's user+system time from before each conversation's second turn to ${SETTLE_MS} ms after its last (so work done after the answer counts), divided by the turns (10 ms /proc ticks, summed over ${warm.turns} turns).`,
        ...(profileMd
          ? [
              "",
              "## CPU profile of the bridge (node --cpu-prof; the figures above include the profiler's overhead)",
              "",
              profileMd,
            ]
          : []),
      ].join("\n");
      return { markdown, targets };
    } finally {
      await bridge?.stop(5000);
      await fake.close();
      rmSync(base, { recursive: true, force: true });
    }
  },
};

export default suite;
