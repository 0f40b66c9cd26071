/**
 * src/core/store/usage-ledger.ts and src/ops/usage/usage.ts, on both engines (a SQLite file and a
 * real PostgreSQL, testkit/postgres.ts): counts summed in memory and upserted per (day,
 * backend); the latest limit message and reset kept; 30 days kept (an injected clock moves through
 * them); the store survives closing and reopening; the recorder fed by a real EventBus counts turns,
 * tokens, limit hits (one per limit, whichever event reports it first) and fallbacks. On
 * PostgreSQL, two instances' ledgers add to the same rows.
 */
import assert from "node:assert/strict";
import { existsSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import Database from "better-sqlite3";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { KEEP_DAYS, MAX_MESSAGE_CHARS, UsageLedger, utcDay } from "../../src/core/store/usage-ledger.js";
import { EventBus } from "../../src/ops/events/bus.js";
import { UsageRecorder, type UsageOptions } from "../../src/ops/usage/usage.js";
import { tempDir } from "../helpers/bridge.js";
import { sharedTestDatabase } from "../../testkit/postgres.js";

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 10, 28, 12, 0, 0);

function clock(start = T0) {
  let t = start;
  return { now: () => t, set: (v: number) => (t = v), add: (ms: number) => (t += ms) };
}

/** One migrated database for the file (its tables emptied between cases). */
const shared = sharedTestDatabase();

/** Where a test's ledger lives: a SQLite file in a temp dir, or the file's PostgreSQL database, emptied. */
interface Place {
  /** The ledger's file (SQLite) or database (PostgreSQL). */
  open(opts?: { now?: () => number }): Promise<UsageLedger>;
  /** The recorder's options for it. */
  recorder: Pick<UsageOptions, "dataDir" | "sql">;
  /** Rows in the table, read beside the ledger. */
  rows(): Promise<number>;
  file?: string;
  done(): Promise<void>;
}

async function place(engine: "sqlite" | "postgres"): Promise<Place> {
  if (engine === "sqlite") {
    const dir = tempDir("cb-usage-");
    const file = path.join(dir, "sub", "usage.db");
    return {
      file,
      open: (o) => UsageLedger.open(file, o),
      recorder: { dataDir: path.dirname(file) },
      rows: async () => {
        const d = new Database(file, { readonly: true });
        try {
          return (d.prepare("SELECT COUNT(*) AS n FROM usage").get() as { n: number }).n;
        } finally {
          d.close();
        }
      },
      done: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  await shared.db.run("TRUNCATE usage");
  return {
    open: (o) => UsageLedger.open(shared.db, o),
    recorder: { sql: shared.db },
    rows: async () => (await shared.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM usage"))!.n,
    done: async () => {},
  };
}

const newBus = () =>
  new EventBus((err) => {
    throw err;
  });

for (const engine of ["sqlite", "postgres"] as const)
  describe(engine, () => {
    test("add sums in memory; flush upserts one row per day and backend; the latest limit wins", async () => {
      const p = await place(engine);
      try {
        const c = clock();
        const l = await p.open(c);
        if (p.file) assert.equal((statSync(p.file).mode & 0o777).toString(8), "600");
        l.add("claude", { turns: 1, tokensIn: 100, tokensOut: 10 });
        l.add("claude", { turns: 1, failed: 1 });
        l.add("gemini", { turns: 1, tokensIn: 5, tokensOut: 1 });
        assert.equal((await l.days(7)).length, 0, "nothing written before flush");
        assert.equal(l.pendingCount, 2);
        await l.flush();
        assert.equal(l.pendingCount, 0);
        l.add("claude", {
          turns: 2,
          tokensIn: 1,
          tokensOut: 2,
          limitHits: 1,
          limit: { message: "first", at: T0 + 1 },
        });
        l.add("claude", {
          limitHits: 1,
          limit: { message: "  usage\n limit   reached ", at: T0 + 5, resetAt: T0 + DAY },
        });
        l.add("claude", { limit: { message: "older", at: T0 + 2 } });
        l.add("claude", { fallbacks: 1, tokensIn: -5, turns: Number.NaN });
        await l.flush();
        const rows = await l.days(7);
        assert.deepEqual(
          rows.map((r) => [r.day, r.backend, r.turns, r.failed, r.tokensIn, r.tokensOut, r.limitHits, r.fallbacks]),
          [
            ["2026-11-28", "claude", 4, 1, 101, 12, 2, 1],
            ["2026-11-28", "gemini", 1, 0, 5, 1, 0, 0],
          ],
        );
        assert.equal(rows[0]!.lastLimitMessage, "usage limit reached", "whitespace folded");
        assert.equal(rows[0]!.lastLimitAt, T0 + 5);
        assert.equal(rows[0]!.resetAt, T0 + DAY);
        // An older limit written later does not replace the newer message.
        l.add("claude", { limit: { message: "stale", at: T0 } });
        await l.flush();
        assert.equal((await l.days(1))[0]!.lastLimitMessage, "usage limit reached");
        // A long message is clipped.
        l.add("gemini", { limitHits: 1, limit: { message: "x".repeat(5000), at: T0 + 9 } });
        await l.flush();
        assert.equal(
          (await l.days(1)).find((r) => r.backend === "gemini")!.lastLimitMessage!.length,
          MAX_MESSAGE_CHARS,
        );
        assert.deepEqual(
          (await l.limits()).map((s) => [s.backend, s.at, s.resetAt]),
          [
            ["claude", T0 + 5, T0 + DAY],
            ["gemini", T0 + 9, null],
          ],
        );
        await l.close();
        l.add("claude", { turns: 1 }); // closed: ignored, no throw
      } finally {
        await p.done();
      }
    });

    test("rows are kept 30 days: pruned at open and on the first flush of a new day", async () => {
      const p = await place(engine);
      try {
        const c = clock();
        let l = await p.open(c);
        for (let d = 0; d < 35; d++) l.add("b", { turns: d + 1 }, T0 - d * DAY);
        await l.flush();
        assert.equal((await l.days(KEEP_DAYS)).length, 30, "the days view shows 30 days");
        assert.equal((await l.days(7)).length, 7);
        assert.equal((await l.days(1))[0]!.day, utcDay(T0));
        // Rows older than 30 days were written too (from another clock) and go at the next day's flush.
        assert.equal(await p.rows(), 35);
        await l.flush();
        assert.equal(await p.rows(), 35, "pruned once a day, not on every flush");
        c.add(DAY);
        await l.flush();
        assert.equal(await p.rows(), 29, "the next day: 29 of the old days are still within 30 days");
        await l.close();
        // At open.
        c.add(10 * DAY);
        l = await p.open(c);
        assert.equal(await p.rows(), 19);
        assert.equal(await l.prune(), 0);
        await l.close();
      } finally {
        await p.done();
      }
    });

    test("the store survives closing and reopening (WAL for a file), counts keep adding up", async () => {
      const p = await place(engine);
      try {
        const c = clock();
        let l = await p.open(c);
        l.add("claude", { turns: 1, tokensIn: 10, tokensOut: 3, limitHits: 1, limit: { message: "m", at: T0 } });
        await l.close(); // close flushes
        if (p.file) {
          assert.ok(existsSync(p.file));
          const d = new Database(p.file, { readonly: true });
          assert.equal(String(d.pragma("journal_mode", { simple: true })), "wal");
          d.close();
        }
        l = await p.open(c);
        assert.deepEqual(
          (await l.days(7)).map((r) => [r.turns, r.tokensIn, r.tokensOut, r.limitHits, r.lastLimitMessage]),
          [[1, 10, 3, 1, "m"]],
        );
        l.add("claude", { turns: 2, tokensIn: 1 });
        await l.close();
        l = await p.open(c);
        assert.equal((await l.days(7))[0]!.turns, 3);
        assert.equal((await l.days(7))[0]!.tokensIn, 11);
        await l.close();
      } finally {
        await p.done();
      }
    });

    test("the recorder counts from the bus: turns, tokens, failed, limit hits once, fallbacks, the report", async () => {
      const p = await place(engine);
      const c = clock();
      const bus = newBus();
      const warnings: unknown[] = [];
      const rec = await UsageRecorder.open({
        bus,
        ...p.recorder,
        now: c.now,
        flushMs: 60_000,
        backends: ["claude", "gemini", "idle"],
        logger: { warn: (o: unknown) => void warnings.push(o) } as never,
      });
      try {
        const base = { conversation: "c", model: "m", ms: 10 };
        bus.emit({
          type: "turn.completed",
          turnId: "1",
          ...base,
          backend: "claude",
          promptTokens: 40,
          completionTokens: 4,
        });
        bus.emit({ type: "turn.completed", turnId: "2", ...base, backend: "claude" }); // replayed: no tokens
        bus.emit({ type: "turn.aborted", turnId: "3", ...base, backend: "claude", reason: "gone" }); // not counted
        // One limit, reported by both events: one hit.
        bus.emit({
          type: "backend.limited",
          backend: "claude",
          message: "5-hour limit reached",
          resetAt: T0 + 3600_000,
          until: T0 + 3600_000,
        });
        bus.emit({
          type: "turn.failed",
          turnId: "4",
          ...base,
          backend: "claude",
          code: "limit_reached",
          message: "limit",
        });
        bus.emit({
          type: "turn.fallback",
          turnId: "5",
          conversation: "c",
          model: "m",
          fromModel: "m",
          fromBackend: "claude",
          to: "g",
          toBackend: "gemini",
          reason: "limit_reached",
          resetAt: T0 + 3600_000,
        });
        bus.emit({
          type: "turn.completed",
          turnId: "5",
          ...base,
          backend: "gemini",
          promptTokens: 7,
          completionTokens: 2,
        });
        // A limit reported only by a failed turn counts; one other failure does not.
        bus.emit({
          type: "turn.failed",
          turnId: "6",
          ...base,
          backend: "gemini",
          code: "limit_reached",
          message: "quota",
        });
        bus.emit({
          type: "turn.failed",
          turnId: "7",
          ...base,
          backend: "gemini",
          code: "backend_timeout",
          message: "slow",
        });
        const r = await rec.report();
        assert.equal(r.object, "usage");
        assert.equal(r.days, 7);
        assert.equal(r.to, "2026-11-28");
        assert.equal(r.from, "2026-11-22");
        const claude = r.data.find((x) => x.backend === "claude")!;
        assert.deepEqual(
          [claude.turns, claude.failed, claude.tokens_in, claude.tokens_out, claude.limit_hits, claude.fallbacks],
          [3, 1, 40, 4, 1, 1],
        );
        assert.equal(
          claude.last_limit_message,
          "5-hour limit reached",
          "the backend's own words win over the failed turn's",
        );
        const gemini = r.data.find((x) => x.backend === "gemini")!;
        assert.deepEqual([gemini.turns, gemini.failed, gemini.tokens_in, gemini.limit_hits], [3, 2, 7, 1]);
        assert.deepEqual(r.totals, {
          turns: 6,
          failed: 3,
          tokens_in: 47,
          tokens_out: 6,
          limit_hits: 2,
          fallbacks: 1,
        });
        assert.deepEqual(
          r.backends.map((b) => b.backend),
          ["claude", "gemini", "idle"],
        );
        const cs = r.backends[0]!;
        assert.equal(cs.next_reset_at, T0 + 3600_000);
        assert.equal(cs.today.turns, 3);
        assert.equal(r.backends[2]!.total.turns, 0);
        // After the reset time it is no longer "next".
        c.add(2 * 3600_000);
        assert.equal((await rec.report()).backends[0]!.next_reset_at, null);
        assert.equal((await rec.report()).backends[0]!.last_limit_message, "5-hour limit reached");
        // days is clamped.
        assert.equal((await rec.report(99)).days, 30);
        assert.equal((await rec.report(0)).days, 1);
        // The limits and fallbacks since the start, newest first.
        assert.deepEqual(
          (await rec.report()).recent.map((x) => [x.kind, x.backend, x.to_backend, x.reason, x.message, x.reset_at]),
          [
            ["fallback", "claude", "gemini", "limit_reached", null, T0 + 3600_000],
            ["limited", "claude", null, null, "5-hour limit reached", T0 + 3600_000],
          ],
        );
        assert.deepEqual(warnings, []);
      } finally {
        await rec.close();
        await p.done();
      }
      // Closed: events are ignored without a throw (the bus's listener is gone).
      assert.equal(bus.listenerCount, 0);
    });

    test("the recorder's listener never throws: a closed ledger or a bad event is logged", async () => {
      const p = await place(engine);
      const bus = newBus();
      const warnings: unknown[] = [];
      const rec = await UsageRecorder.open({
        bus,
        ...p.recorder,
        logger: { warn: (o: unknown) => void warnings.push(o) } as never,
      });
      try {
        await rec.ledger.close(); // the store goes away under the recorder
        bus.emit({ type: "turn.completed", turnId: "1", conversation: "c", model: "m", backend: "b", ms: 1 });
        bus.emit({ type: "backend.limited", backend: "b", message: "x", until: 0 });
        await rec.flush();
        assert.equal((await rec.report()).data.length, 0);
      } finally {
        await rec.close();
        await p.done();
      }
    });

    test("a turn is counted on the backend that answered it: after a fallback, or a router's hand-over", async () => {
      const p = await place(engine);
      const bus = newBus();
      const rec = await UsageRecorder.open({
        bus,
        ...p.recorder,
        flushMs: 60_000,
        modelBackends: [
          ["claude/sonnet", "claude"],
          ["gemini/pro", "gemini"],
        ],
      });
      try {
        const base = { conversation: "c", model: "claude/sonnet", backend: "claude", ms: 10 };
        bus.emit({
          type: "turn.fallback",
          turnId: "t1",
          conversation: "c",
          model: "claude/sonnet",
          fromModel: "claude/sonnet",
          fromBackend: "claude",
          to: "gemini/pro",
          toBackend: "gemini",
          reason: "exhausted",
        });
        bus.emit({
          type: "turn.completed",
          turnId: "t1",
          ...base,
          promptTokens: 9,
          completionTokens: 3,
          answeredBy: "gemini/pro",
        });
        bus.emit({
          type: "turn.completed",
          turnId: "t2",
          ...base,
          model: "router",
          backend: "router",
          promptTokens: 1,
          answeredBy: "gemini/pro",
        });
        bus.emit({ type: "turn.completed", turnId: "t3", ...base, promptTokens: 2 });
        const rows = (await rec.report()).data.map((r) => [r.backend, r.turns, r.tokens_in, r.fallbacks]);
        assert.deepEqual(rows, [
          ["claude", 1, 2, 1],
          ["gemini", 2, 10, 0],
        ]);
      } finally {
        await rec.close();
        await p.done();
      }
    });
  });

test("postgres: two instances' ledgers add to the same rows; either reads the sum", async () => {
  await shared.db.run("TRUNCATE usage");
  const other = await PostgresDb.open({ url: shared.url });
  try {
    const c = clock();
    const a = await UsageLedger.open(shared.db, c);
    const b = await UsageLedger.open(other, c);
    for (let i = 0; i < 5; i++) {
      a.add("claude", { turns: 1, tokensIn: 10 });
      b.add("claude", { turns: 2, tokensIn: 1, limitHits: 1, limit: { message: `b${i}`, at: T0 + i } });
      await Promise.all([a.flush(), b.flush()]);
    }
    for (const l of [a, b]) {
      const [row] = await l.days(1);
      assert.deepEqual([row!.turns, row!.tokensIn, row!.limitHits, row!.lastLimitMessage], [15, 55, 5, "b4"]);
    }
    await Promise.all([a.close(), b.close()]);
  } finally {
    await other.close();
  }
});
