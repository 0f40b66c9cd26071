/**
 * Warm CLI processes seen from the outside of the bridge (issue 16): the real bridge with a warm
 * Claude Code backend (the REAL `claude` against a fake Anthropic API) shows its warm process in
 * /health, /metrics and /v1/admin/processes and ends it on close; 50 turns on one warm process do
 * not make it grow; and a warm `opencode serve` left behind by a bridge killed with SIGKILL is
 * ended — by the bridge's orphan watcher, or, when that is gone too, by the next bridge at start-up.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import {
  claudeCodeBackend,
  claudeCodeOptionsSchema,
  type ClaudeCodeBackend,
} from "../../src/backends/claude-code/backend.js";
import { resolveConfig } from "../../src/core/config/load.js";
import { runDoctor } from "../../src/ops/doctor/doctor.js";
import { createLogger } from "../../src/core/log/logger.js";
import { groupRss } from "../../src/backends/warm/rss.js";
import { startFakeAnthropic, type FakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { collect, pidGone, sessionOf, turnInput } from "../helpers/backend-turn.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";
import { parseMetrics, value } from "../helpers/prometheus.js";
import { bridgeListening, exited as gone, groupAlive, killGroups } from "../helpers/process-groups.js";

const logger = createLogger(process.env.CB_TEST_LOG ?? "silent");

/** A stream that keeps each log line. */
function lineSink(lines: string[]): Writable {
  return new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
}

describe("a warm Claude Code backend behind the bridge", () => {
  const logLines: string[] = [];
  let fake: FakeAnthropic;
  let bridge: TestBridge;
  let home: string;

  before(async () => {
    fake = await startFakeAnthropic(() => ({ kind: "text", chunks: ["warm ", "reply"] }));
    home = tempDir("cb-wb-home-");
    bridge = await startTestBridge(
      {
        backends: {
          cc: {
            type: "claude-code",
            command: CLAUDE_BIN,
            env: claudeEnv({ baseUrl: fake.baseUrl, home }),
            timeoutSeconds: 60,
            killGraceSeconds: 1,
          },
        },
        models: [{ id: "claude", backend: "cc", session: { mode: "resume" } }],
      },
      { logger: createLogger("warn", lineSink(logLines)) },
    );
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    cleanup(home);
    if (bridge) cleanup(bridge.dataDir);
  });

  test("its process shows in /health, /metrics and /v1/admin/processes, serves the conversation's turns, and ends with the bridge", async () => {
    const chat = new Chat(bridge.baseURL, `warm-${randomUUID()}`, "claude");
    assert.equal((await chat.say("hello")).text, "warm reply");
    assert.equal((await chat.say("again")).text, "warm reply");

    const health = (await (await fetch(`${bridge.url}/health`)).json()) as any;
    assert.equal(health.warm.processes, 1, JSON.stringify(health.warm));
    const [w] = health.warm.list;
    assert.equal(w.backend, "cc");
    assert.equal(w.busy, false);
    assert.equal(w.turns, 2, "both turns on the one warm process");
    assert.ok(w.rssBytes > 10 * 1048576, `its memory is read (${w.rssBytes} bytes)`);
    assert.equal(health.warm.byBackend.cc.processes, 1);
    assert.equal(health.turns.processes, 0, "no turn process is running between turns");

    const scrape = parseMetrics(await (await fetch(`${bridge.url}/metrics`)).text());
    assert.equal(value(scrape, "clawbridge_warm_processes", { backend: "cc", state: "idle" }), 1);
    assert.equal(value(scrape, "clawbridge_warm_processes", { backend: "cc", state: "busy" }), 0);
    assert.ok(value(scrape, "clawbridge_warm_memory_bytes", { backend: "cc" }) > 10 * 1048576);
    assert.equal(value(scrape, "clawbridge_warm_events_total", { backend: "cc", event: "started" }), 1);
    assert.equal(
      value(scrape, "clawbridge_warm_events_total", { backend: "cc", event: "reused" }),
      1,
      "turn 2 reused the process",
    );
    assert.equal(value(scrape, "clawbridge_warm_events_total", { backend: "cc", event: "died" }), 0);

    const procs = (await (await fetch(`${bridge.url}/v1/admin/processes`)).json()) as any;
    const row = procs.data.find((p: any) => p.pid === w.pid);
    assert.ok(row, JSON.stringify(procs.data));
    assert.equal(row.warm, true);
    assert.equal(row.backend, "cc");
    assert.equal(row.turns, 2);

    // `clawbridge doctor` names them from the running bridge's /health.
    const report = await runDoctor({
      config: resolveConfig(
        {
          server: { port: bridge.port },
          dataDir: bridge.dataDir,
          backends: { cc: { type: "claude-code", command: CLAUDE_BIN } },
          models: [{ id: "claude", backend: "cc" }],
        },
        "test",
      ),
      openclawHome: path.join(home, "no-openclaw"),
      validate: null,
      scanClis: false,
      tmpDir: home,
      env: { ...process.env, HOME: home },
    });
    const port = report.findings.find((f) => f.id === "port");
    assert.match(
      port?.detail ?? "",
      /warm CLI processes: 1, \d+ MB in all — cc 1 \(0 busy, \d+ MB\)/,
      JSON.stringify(port),
    );

    const backend = bridge.backends.get("cc") as ClaudeCodeBackend;
    await bridge.close(0);
    assert.ok(pidGone(w.pid), "the bridge's shutdown ended the warm process");
    // Recorded as the shutdown's doing, not as a death (and so never logged "ended unexpectedly").
    assert.equal(backend.warm?.pool.stats.closed, 1);
    assert.equal(backend.warm?.pool.stats.died, 0);
    assert.deepEqual(
      logLines.filter((l) => /ended unexpectedly/.test(l)),
      [],
    );
  });
});

test("50 turns on one warm claude process: the same process throughout, its memory flat beyond noise", async (t) => {
  const fake = await startFakeAnthropic(() => ({ kind: "text", chunks: ["short ", "answer ", "number"] }));
  const home = tempDir("cb-w50-home-");
  const dataDir = tempDir("cb-w50-data-");
  const backend = claudeCodeBackend.create(
    "claude",
    claudeCodeOptionsSchema.parse({
      command: CLAUDE_BIN,
      env: claudeEnv({ baseUrl: fake.baseUrl, home }),
      timeoutSeconds: 60,
      killGraceSeconds: 1,
    }),
    { logger, dataDir },
  ) as ClaudeCodeBackend;
  try {
    let sid: string | undefined;
    let pid: number | undefined;
    const rss: number[] = [];
    for (let i = 1; i <= 50; i++) {
      const evs = await collect(backend.run(turnInput("conv-50", `question ${i}`, { sessionId: sid, system: "boot" })));
      assert.equal(evs.at(-1)?.type, "done", `turn ${i}: ${JSON.stringify(evs.at(-1))}`);
      sid = sessionOf(evs) ?? sid;
      pid ??= backend.lastPid;
      assert.equal(backend.lastPid, pid, `turn ${i} on the same process`);
      if (i % 5 === 0) rss.push(groupRss([pid!]).get(pid!) ?? 0);
    }
    const mb = rss.map((b) => Math.round(b / 1048576));
    t.diagnostic(`RSS every 5 turns (MB): ${mb.join(" ")}`);
    // Node settles over the first ~25 turns (seen: 199 MB at turn 5, 221 at 25, 236 at 50, with the
    // CLI's own history growing each turn). After that it must not keep growing with each turn: the
    // readings of turns 30-50 stay within 30 MB of turn 25's (one garbage collection is 10-20 MB).
    const base = rss[4]!;
    for (const r of rss.slice(5))
      assert.ok(
        r - base < 30 * 1048576,
        `RSS grew from ${Math.round(base / 1048576)} to ${Math.round(r / 1048576)} MB`,
      );
    assert.equal(fake.messageCalls().length >= 50, true);
  } finally {
    await backend.close();
    await fake.close();
    cleanup(home);
    cleanup(dataDir);
  }
});

describe("a warm opencode serve left behind by a bridge killed with SIGKILL", () => {
  let fake: FakeOpenAI;
  let dir: string;
  let configFile: string;
  const groups = new Set<number>();
  const bridges: ChildProcess[] = [];

  before(async () => {
    fake = await startFakeOpenAI();
    fake.setScript(() => ({ kind: "text", chunks: ["served ", "warm"] }));
    dir = tempDir("cb-wkill-");
    const home = path.join(dir, "home");
    configFile = path.join(dir, "clawbridge.json");
    writeFileSync(
      configFile,
      JSON.stringify({
        server: { host: "127.0.0.1", port: 0, shutdownGraceSeconds: 1 },
        logging: { level: "warn" },
        dataDir: path.join(dir, "data"),
        intents: { enabled: false },
        backends: {
          oc: {
            type: "opencode",
            command: OPENCODE_BIN,
            env: opencodeEnv(fake.url, home),
            timeoutSeconds: 60,
            killGraceSeconds: 1,
          },
        },
        models: [{ id: "fake/m1", backend: "oc" }],
      }),
    );
  });

  after(async () => {
    for (const b of bridges) if (b.exitCode === null && b.signalCode === null) b.kill("SIGKILL");
    killGroups(groups);
    await fake?.close();
    cleanup(dir);
  });

  const runDir = () => path.join(dir, "data", "run");
  const startBridge = async () => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.CLAWBRIDGE_CONFIG;
    const proc = spawn(process.execPath, [path.resolve("bin/clawbridge.js"), "serve", "--config", configFile], {
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    bridges.push(proc);
    return { proc, url: await bridgeListening(proc).url };
  };
  /** One answered turn, then the warm server's process group (from the run records). */
  const warmUp = async (url: string): Promise<number> => {
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "fake/m1", messages: [{ role: "user", content: "hi" }] }),
      signal: AbortSignal.timeout(90_000),
    });
    const body = (await res.json()) as any;
    assert.equal(body.choices?.[0]?.message?.content, "served warm", JSON.stringify(body));
    const health = (await (await fetch(`${url}/health`)).json()) as any;
    assert.equal(health.warm.processes, 1, "the server stays warm after the turn");
    const pgid = health.warm.list[0].pid as number;
    assert.ok(
      readdirSync(runDir()).includes(`${pgid}.json`),
      "the warm process is recorded for the watcher and the reaper",
    );
    groups.add(pgid);
    return pgid;
  };
  /** The orphan watcher of the bridge (its argv names the run directory). */
  const watcherOf = (): number | undefined => {
    for (const n of readdirSync("/proc")) {
      if (!/^\d+$/.test(n)) continue;
      try {
        const argv = readFileSync(`/proc/${n}/cmdline`, "utf8").split("\0");
        if (argv.includes("clawbridge-orphan-watcher") && argv.includes(runDir()) && !gone(Number(n))) return Number(n);
      } catch {
        /* gone */
      }
    }
    return undefined;
  };

  test("the orphan watcher ends it within seconds", async () => {
    const { proc, url } = await startBridge();
    const pgid = await warmUp(url);
    proc.kill("SIGKILL");
    assert.ok(await eventually(() => !groupAlive(pgid), 10_000), "the warm server's group is gone without a restart");
  });

  test("with the watcher gone too, the next bridge ends it at start-up", async () => {
    const { proc, url } = await startBridge();
    const pgid = await warmUp(url);
    const watcher = watcherOf();
    assert.ok(watcher, "the bridge runs an orphan watcher");
    process.kill(watcher, "SIGKILL");
    assert.ok(await eventually(() => gone(watcher), 3000));
    proc.kill("SIGKILL");
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(groupAlive(pgid), "nothing ended the warm server yet");
    const next = await startBridge();
    assert.ok(
      await eventually(() => !groupAlive(pgid), 10_000),
      "the start-up reaper ended the warm server of the killed bridge",
    );
    next.proc.kill("SIGTERM");
    await eventually(() => next.proc.exitCode !== null || next.proc.signalCode !== null, 10_000);
  });
});
