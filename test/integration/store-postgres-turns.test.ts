/**
 * Two bridges on one PostgreSQL (issue 36, item 2): one conversation's turns, sent alternately to
 * both bridges and several at once with the official `openai` client, run one at a time — never two
 * at once across the instances — and keep their resume binding: every turn resumes the one backend
 * session the first turn started, whichever bridge answers, and the turns are counted on that one
 * binding in the shared store.
 *
 * Real parts: a real PostgreSQL (testkit/postgres.ts), two in-process bridges (each its own
 * data dir and pool), a real CLI process per turn — testkit/fakes/fake-claude-cli.sh as the
 * `claude-code` backend, cold (no warm process), which keeps its sessions as files, answers
 * `--resume` of its own sessions, and writes each turn's start and end time (and any overlap it
 * sees) to `cli.log` in a directory both bridges share.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { openSessionStore } from "../../src/core/store/index.js";
import { cleanup, startTestBridge, tempDir, within, type TestBridge } from "../helpers/bridge.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const FAKE = path.resolve("testkit/fakes/fake-claude-cli.sh");

describe("two bridges on one PostgreSQL: one conversation, one turn at a time", () => {
  let pg: TestPostgres;
  let url: string;
  let cliDir: string;
  const dirs: string[] = [];
  const bridges: TestBridge[] = [];

  before(async () => {
    pg = await startPostgres();
    url = await pg.database();
    cliDir = tempDir("cb-pgturns-cli-");
    for (let i = 0; i < 2; i++) {
      const dataDir = tempDir(`cb-pgturns-data${i}-`);
      dirs.push(dataDir);
      bridges.push(
        await startTestBridge({
          dataDir,
          store: { kind: "postgres", url, instanceId: `bridge-${i}` },
          backends: {
            cc: {
              type: "claude-code",
              command: FAKE,
              env: { FAULTS_DIR: cliDir },
              timeoutSeconds: 30,
              killGraceSeconds: 1,
              warm: { enabled: false },
            },
          },
          models: [{ id: "claude", backend: "cc", session: { mode: "resume" } }],
        }),
      );
    }
  });

  after(async () => {
    for (const b of bridges) await b.close(1000).catch(() => {});
    await pg?.stop();
    for (const d of [cliDir, ...dirs]) if (d) cleanup(d);
  });

  test("turns sent alternately to both bridges, several at once, never overlap and keep one binding", async () => {
    const session = `pg-turns-${randomUUID()}`;
    const clients = bridges.map((b) => new OpenAI({ baseURL: b.baseURL, apiKey: "unused", maxRetries: 0 }));
    const turn = (i: number) =>
      clients[i % 2]!.chat.completions.create(
        {
          model: "claude",
          // Each turn's own words (a resumed CLI is given only what is new); FAULTMS makes a turn last a while.
          messages: [{ role: "user", content: `turn ${i} FAULTKEY-shared FAULTN-3 FAULTMS-120` }],
        },
        { headers: { "x-session-id": session } },
      );

    // The first turn alone starts the conversation's session; then six at once, alternating (three
    // per bridge: one running and two waiting, the most one conversation may have waiting).
    const first = await within(turn(0), 30_000, "the first turn");
    assert.equal(first.choices[0]?.message.content, "FAULTS-OK shared 1. FAULTS-OK shared 2. FAULTS-OK shared 3. ");
    const pending = [];
    for (let i = 1; i <= 6; i++) {
      pending.push(turn(i));
      await new Promise((r) => setTimeout(r, 40));
    }
    const answers = await within(Promise.all(pending), 60_000, "six turns");
    for (const a of answers) assert.match(a.choices[0]?.message.content ?? "", /^FAULTS-OK shared 1\. /);

    // The CLI's own record: seven turns, each started after the one before had ended.
    const log = readFileSync(path.join(cliDir, "cli.log"), "utf8").trim().split("\n");
    assert.deepEqual(
      log.filter((l) => l.startsWith("overlap")),
      [],
      "no CLI of the conversation started while another one ran",
    );
    const spans = new Map<string, { start: number; end?: number }>();
    for (const line of log) {
      const [kind, , pid, at] = line.split(" ");
      if (kind === "start") spans.set(pid!, { start: Number(at) });
      if (kind === "end") spans.get(pid!)!.end = Number(at);
    }
    const ordered = [...spans.values()].sort((x, y) => x.start - y.start);
    assert.equal(ordered.length, 7);
    for (let i = 1; i < ordered.length; i++) {
      assert.ok(ordered[i - 1]!.end !== undefined, "every turn ended");
      assert.ok(
        ordered[i]!.start >= ordered[i - 1]!.end!,
        `turn ${i} started at ${ordered[i]!.start}, before the turn before it ended (${ordered[i - 1]!.end})`,
      );
    }

    // One backend session for all seven, whichever bridge ran the turn: six of them resumed it.
    const sessions = readdirSync(path.join(cliDir, "sessions"));
    assert.equal(sessions.length, 1, "no turn started a second session");
    const sid = sessions[0]!;
    const lines = readFileSync(path.join(cliDir, "sessions", sid), "utf8")
      .trim()
      .split("\n");
    assert.equal(lines.length, 7, "every turn ran in the first turn's session");

    // The shared store: one binding, seven turns counted on it, bound once, never rebound.
    const db = await PostgresDb.open({ url, poolSize: 2 });
    try {
      const store = await openSessionStore({ kind: "postgres", db });
      const bindings = (await store.list()).filter((b) => b.key.includes(session));
      assert.equal(bindings.length, 1);
      const binding = bindings[0]!;
      assert.equal(binding.backendSessionId, sid);
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
