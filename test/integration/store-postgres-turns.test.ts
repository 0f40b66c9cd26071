/**
 * Two bridge processes on one PostgreSQL (issue 36, item 2): one conversation's turns, sent
 * alternately to both bridges and several at once with the official `openai` client, run one at a
 * time — never two at once across the instances — and keep their resume binding: every turn
 * resumes the one Claude Code session the first turn started, whichever bridge answers, and the
 * turns are counted on that one binding in the shared store.
 *
 * Real parts: a real PostgreSQL (testkit/postgres.ts), two `bin/clawbridge.js serve` processes
 * (each its own data dir and pool), the real Claude Code from npm per turn (cold), against the fake
 * Anthropic API (testkit/fakes), the only faked part. Both bridges give Claude Code the same HOME and
 * working directory (the backend's `cwd`), as instances sharing a disk would, so either can resume
 * the session the other started. The fake records when each model call began and when its answer
 * ended: the calls of two turns never overlap, and each turn's call carries every earlier turn.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { openSessionStore } from "../../src/core/store/index.js";
import { type FakeAnthropic, startFakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { claudeEnv } from "../../testkit/fakes/cli-env.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";
import { cleanup, tempDir, within } from "../helpers/bridge.js";
import { serveBridge } from "../helpers/process-groups.js";

const CLAUDE = path.resolve("node_modules/.bin/claude");
/** Each answer streams for about CHUNKS × DELAY_MS: a window another turn's call would fall into. */
const CHUNKS = 5;
const DELAY_MS = 120;

describe("two bridge processes on one PostgreSQL: one conversation, one turn at a time", () => {
  let pg: TestPostgres;
  let url: string;
  let fake: FakeAnthropic;
  let root: string;
  const procs: ChildProcess[] = [];
  const origins: string[] = [];
  /** The fake's record of each turn's model call: its turn number, when it began and when its answer ended. */
  const calls: Array<{ turn: number; start: number; end: number; history: string }> = [];

  before(async () => {
    pg = await startPostgres();
    url = await pg.database();
    fake = await startFakeAnthropic((req) => {
      const m = /turn (\d+) of the shared conversation/.exec(req.lastUserText);
      if (m) {
        const start = Date.now();
        calls.push({
          turn: Number(m[1]),
          start,
          end: start + CHUNKS * DELAY_MS,
          history: JSON.stringify(req.body?.messages ?? []),
        });
      }
      return { kind: "text", chunks: Array.from({ length: CHUNKS }, (_, i) => `part ${i + 1}. `), delayMs: DELAY_MS };
    });
    root = tempDir("cb-pgturns-");
    const home = path.join(root, "claude-home");
    const work = path.join(root, "work");
    mkdirSync(work, { recursive: true });
    for (let i = 0; i < 2; i++) {
      const dir = path.join(root, `bridge-${i}`);
      mkdirSync(dir, { recursive: true });
      const config = path.join(dir, "clawbridge.json");
      writeFileSync(
        config,
        JSON.stringify({
          dataDir: path.join(dir, "data"),
          server: { port: 0, backendProbes: { enabled: false } },
          intents: { enabled: false },
          warm: { standby: 0 },
          store: { kind: "postgres", url, instanceId: `bridge-${i}` },
          backends: {
            cc: {
              type: "claude-code",
              command: CLAUDE,
              env: claudeEnv({ baseUrl: fake.baseUrl, home }),
              cwd: work,
              timeoutSeconds: 60,
              killGraceSeconds: 1,
              warm: { enabled: false },
              discovery: { enabled: false },
            },
          },
          models: [{ id: "claude", backend: "cc", model: "default", session: { mode: "resume" } }],
        }),
      );
      const { proc, url: origin } = await serveBridge(config, dir);
      procs.push(proc);
      origins.push(origin);
    }
  });

  after(async () => {
    for (const p of procs) {
      const exited = new Promise<void>((r) => {
        if (p.exitCode !== null || p.signalCode !== null) r();
        else p.once("exit", () => r());
      });
      try {
        process.kill(-p.pid!, "SIGTERM");
      } catch {
        /* gone */
      }
      await within(exited, 15_000, "a bridge to stop").catch(() => {
        try {
          process.kill(-p.pid!, "SIGKILL");
        } catch {
          /* gone */
        }
      });
    }
    await fake?.close();
    await pg?.stop();
    if (root) cleanup(root);
  });

  test("turns sent alternately to both bridges, several at once, never overlap and keep one binding", async () => {
    const session = `pg-turns-${randomUUID()}`;
    const clients = origins.map((o) => new OpenAI({ baseURL: `${o}/v1`, apiKey: "unused", maxRetries: 0 }));
    const turn = (i: number) =>
      clients[i % 2]!.chat.completions.create(
        // A resumed CLI is given only what is new: each turn's own words.
        { model: "claude", messages: [{ role: "user", content: `turn ${i} of the shared conversation` }] },
        { headers: { "x-session-id": session }, timeout: 90_000 },
      );

    // The first turn alone starts the conversation's session; then six at once, alternating (three
    // per bridge: one running and two waiting, the most one conversation may have waiting).
    const first = await within(turn(0), 60_000, "the first turn");
    assert.match(first.choices[0]?.message.content ?? "", /part 1\. .*part 5\./);
    const pending = [];
    for (let i = 1; i <= 6; i++) {
      pending.push(turn(i));
      await new Promise((r) => setTimeout(r, 40));
    }
    const answers = await within(Promise.all(pending), 120_000, "six turns");
    for (const a of answers) assert.match(a.choices[0]?.message.content ?? "", /part 1\. .*part 5\./);

    // The model's record: seven calls, one per turn, each begun after the one before had answered.
    const ordered = [...calls].sort((x, y) => x.start - y.start);
    assert.deepEqual(
      ordered.map((c) => c.turn).sort((a, b) => a - b),
      [0, 1, 2, 3, 4, 5, 6],
      "one model call per turn",
    );
    for (let i = 1; i < ordered.length; i++)
      assert.ok(
        ordered[i]!.start >= ordered[i - 1]!.end,
        `turn ${ordered[i]!.turn}'s call began at ${ordered[i]!.start}, before turn ${ordered[i - 1]!.turn}'s answer ended (${ordered[i - 1]!.end})`,
      );
    // Every call resumed the one session: it carries every turn before it, whichever bridge ran them.
    for (let i = 1; i < ordered.length; i++)
      for (const earlier of ordered.slice(0, i))
        assert.ok(
          ordered[i]!.history.includes(`turn ${earlier.turn} of the shared conversation`),
          `turn ${ordered[i]!.turn}'s call carries turn ${earlier.turn}`,
        );

    // The shared store: one binding, seven turns counted on it, bound once, never rebound.
    const db = await PostgresDb.open({ url, poolSize: 2 });
    try {
      const store = await openSessionStore({ kind: "postgres", db });
      const bindings = (await store.list()).filter((b) => b.key.includes(session));
      assert.equal(bindings.length, 1);
      const binding = bindings[0]!;
      assert.equal(binding.turns, 7);
      assert.equal(binding.lastError, null);
      assert.deepEqual(
        (await store.listEvents(binding.key)).map((e) => e.kind),
        ["bound"],
      );
      await store.close();
    } finally {
      await db.close();
    }
  });
});
