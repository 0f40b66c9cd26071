/**
 * Standbys and the memory budget of warm CLI processes (issue 34), with the REAL `claude` against a
 * fake Anthropic API behind a real bridge: a new conversation's first turn starts on a standby,
 * which is replaced; the standby takes THAT conversation's bootstrap (never another's) and its
 * working directory becomes the conversation's; under the memory budget the standby goes first; a
 * turn that finds the budget without room runs cold and is answered; every process is reaped.
 * Four claude processes in all (the first conversation's, two standbys, one cold turn).
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readdirSync, readlinkSync, realpathSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import type { ClaudeCodeBackend } from "../../src/backends/claude-code/backend.js";
import { warmMemory } from "../../src/backends/warm/registry.js";
import { anthropicText, startFakeAnthropic, type FakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { pidGone } from "../helpers/backend-turn.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { Chat } from "../helpers/chat.js";
import { parseMetrics, value } from "../helpers/prometheus.js";

const MB = 1048576;

describe("standbys and the memory budget with the real Claude Code", () => {
  let fake: FakeAnthropic;
  let bridge: TestBridge;
  let home: string;
  let backend: ClaudeCodeBackend;
  const pids = new Set<number>();
  const run = randomUUID().slice(0, 8);
  let alpha: Chat;
  let beta: Chat;

  /** The system prompt of the model call that answered `text` (what the CLI gave the model). */
  const systemOf = (text: string): string => {
    const call = fake.messageCalls().findLast((c) => c.lastUserText.includes(text));
    assert.ok(call, `a model call for ${text}`);
    const sys = call.body.system;
    return Array.isArray(sys) ? sys.map((b: { text?: string }) => b.text ?? "").join("\n") : anthropicText(sys);
  };
  const standbys = () => backend.warm!.pool.list(false).filter((w) => w.standby && w.pid !== undefined);
  const health = async () => (await (await fetch(`${bridge.url}/health`)).json()) as any;

  before(async () => {
    fake = await startFakeAnthropic(() => ({ kind: "text", chunks: ["warm ", "reply"] }));
    home = tempDir("cb-sb-home-");
    bridge = await startTestBridge({
      warm: { standby: 1 },
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
    });
    backend = bridge.backends.get("cc") as ClaudeCodeBackend;
    alpha = new Chat(bridge.baseURL, `alpha-${run}`, "claude");
    beta = new Chat(bridge.baseURL, `beta-${run}`, "claude");
  });

  after(async () => {
    await bridge?.close(0);
    for (const pid of pids) assert.ok(pidGone(pid), `process ${pid} reaped`);
    await fake?.close();
    cleanup(home);
    if (bridge) cleanup(bridge.dataDir);
  });

  test("a new conversation's first turn starts on a standby, which is replaced; it gets that conversation's bootstrap and directory, never another's", async () => {
    const pool = backend.warm!.pool;
    assert.equal((await alpha.say("hello alpha")).text, "warm reply");
    pids.add(backend.lastPid!);
    assert.equal(pool.stats.started, 1, "the first turn of its kind: a process of its own (standbys start lazily)");
    assert.ok(await eventually(() => standbys().length === 1, 30_000), "a standby started after that turn");
    const s1 = standbys()[0]!.pid!;
    pids.add(s1);

    assert.equal((await beta.say("hello beta")).text, "warm reply");
    assert.equal(backend.lastPid, s1, "beta's first turn ran on the standby");
    assert.equal(pool.stats.standbyTaken, 1);
    assert.equal(pool.stats.started, 1, "no process was started for it");
    const sysBeta = systemOf("hello beta");
    assert.ok(sysBeta.includes(`beta-${run}`), "the standby was given beta's bootstrap");
    assert.ok(!sysBeta.includes(`alpha-${run}`), "and nothing of alpha's");
    // Its directory is beta's now: beta's path leads to where the process runs (and its session is kept).
    const sessions = (await (await fetch(`${bridge.url}/v1/admin/sessions`)).json()) as any;
    const binding = sessions.data.find((s: any) => s.key.includes(`beta-${run}`));
    assert.ok(binding, JSON.stringify(sessions.data.map((s: any) => s.key)));
    assert.equal(realpathSync(binding.cwd), readlinkSync(`/proc/${s1}/cwd`), "beta's folder is the standby's");
    assert.match(path.basename(realpathSync(binding.cwd)), /^standby-/);

    assert.ok(await eventually(() => standbys().some((w) => w.pid !== s1), 30_000), "the taken standby was replaced");
    for (const w of standbys()) pids.add(w.pid!);

    // Each conversation goes on on its own process with its own bootstrap.
    assert.equal((await alpha.say("again alpha")).text, "warm reply");
    assert.ok(systemOf("again alpha").includes(`alpha-${run}`));
    assert.ok(!systemOf("again alpha").includes(`beta-${run}`));
    assert.equal((await beta.say("again beta")).text, "warm reply");
    assert.equal(backend.lastPid, s1, "beta's next turn on the same (once standby) process");
    assert.ok(systemOf("again beta").includes(`beta-${run}`));
    const call = fake.messageCalls().findLast((c) => c.lastUserText.includes("again beta"))!;
    assert.ok(
      JSON.stringify(call.body.messages).includes("hello beta"),
      "beta's session goes on (its first turn is in the history)",
    );
    assert.equal(pool.stats.reused, 2);

    const h = await health();
    assert.equal(h.warm.standby, 1);
    assert.equal(h.warm.byBackend.cc.standby, 1);
    assert.ok(h.warm.memory.maxBytes > 0 && h.warm.memory.usedBytes > 100 * MB, JSON.stringify(h.warm.memory));
  });

  test("under the memory budget the standby goes first, no standby ends a conversation's process, and a turn with no room runs cold", async () => {
    const pool = backend.warm!.pool;
    const list = pool.list(true);
    const convs = list.filter((w) => !w.standby);
    assert.equal(convs.length, 2);
    const standby = list.find((w) => w.standby);
    assert.ok(standby?.pid);
    // Room for the two conversations' processes, not for a third.
    const used = convs.reduce((n, w) => n + (w.rssBytes ?? 0), 0);
    warmMemory.configure(Math.ceil((used + 60 * MB) / MB));
    try {
      await warmMemory.enforce();
      assert.ok(await eventually(() => pidGone(standby.pid!), 5000), "the standby was ended first");
      for (const w of convs) assert.ok(!pidGone(w.pid!), "the conversations' processes stay");
      assert.equal(pool.stats.memoryEvicted, 1);
      // A turn ends: a standby is wanted again, but it would not fit without ending a conversation's process.
      assert.equal((await alpha.say("third alpha")).text, "warm reply");
      await pool.settled();
      assert.equal(standbys().length, 0, "no standby started over the budget");
      for (const w of convs) assert.ok(!pidGone(w.pid!));

      // A budget too small for any process: a new conversation's turn runs cold, and is answered.
      warmMemory.configure(1);
      const gamma = new Chat(bridge.baseURL, `gamma-${run}`, "claude");
      assert.equal((await gamma.say("hello gamma")).text, "warm reply");
      pids.add(backend.lastPid!);
      assert.equal(pool.stats.memoryOverflow, 1, "no room: the turn ran cold");
      assert.ok(systemOf("hello gamma").includes(`gamma-${run}`));
      assert.ok(!pool.list(false).some((w) => w.pid === backend.lastPid), "its process was not kept");
      const scrape = parseMetrics(await (await fetch(`${bridge.url}/metrics`)).text());
      assert.equal(value(scrape, "clawbridge_warm_memory_budget_bytes", {}), MB);
      assert.equal(value(scrape, "clawbridge_warm_events_total", { backend: "cc", event: "memoryOverflow" }), 1);
      assert.equal(value(scrape, "clawbridge_warm_events_total", { backend: "cc", event: "standbyTaken" }), 1);
      const procs = (await (await fetch(`${bridge.url}/v1/admin/processes`)).json()) as any;
      assert.equal(procs.warm_memory.max_bytes, MB);
      // The standby that was never taken left no folder behind; beta's (taken) is beta's.
      const left = readdirSync(path.join(bridge.dataDir, "work")).filter((n) => n.startsWith("standby-"));
      assert.equal(left.length, 1, left.join(", "));
    } finally {
      warmMemory.configure(undefined);
    }
  });
});
