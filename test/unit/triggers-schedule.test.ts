/**
 * Schedules under a fake clock (src/workflows/triggers/schedule.ts): the library checks a
 * schedule's cron, time zone and inputs at load, naming the key; an every-minute schedule runs
 * twice in two minutes with its inputs (origin `schedule`, trigger `schedule:0`); a schedule that
 * was due while the bridge was down runs ONCE at start, or not at all with `catchUp: false`; a new
 * or changed schedule catches nothing up, nor one removed and added again; `rows` shows the next
 * and last run. The schedule cases run against SQLite and a real PostgreSQL (testkit/postgres.ts);
 * two instances on one store (two pools on one PostgreSQL, two connections to one SQLite file)
 * fire a due time, or catch a missed one up, once; a hook's signature is seen once by either.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import pino from "pino";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { type Sql, sqliteSqlOf } from "../../src/core/db/sql.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { EventBus } from "../../src/ops/events/bus.js";
import { openSystemsDb, type RunRecord } from "../../src/workflows/systems/db.js";
import { loadSystems, type SystemsLibrary } from "../../src/workflows/systems/library.js";
import type { StartRequest } from "../../src/workflows/systems/runner.js";
import type { Clock } from "../../src/workflows/triggers/clock.js";
import { Schedules } from "../../src/workflows/triggers/schedule.js";
import { TriggerState } from "../../src/workflows/triggers/state.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const root = mkdtempSync(path.join(tmpdir(), "cb-schedule-unit-"));
let pg: TestPostgres;
const opened: Array<{ close(): unknown }> = [];
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  for (const d of opened) await d.close();
  await pg?.stop();
  rmSync(root, { recursive: true, force: true });
});

type Engine = "sqlite" | "postgres";
let files = 0;
/**
 * A fresh store of the engine, and a second instance's handle on the same store: a second pool on
 * the PostgreSQL database, or a second connection to the SQLite file (another process would have one).
 */
async function freshStore(engine: Engine): Promise<{ sql: Sql; other(): Promise<Sql> }> {
  if (engine === "sqlite") {
    const file = path.join(root, `s${++files}.db`);
    const open = () => {
      const db = openSystemsDb(file);
      opened.push(db);
      return sqliteSqlOf(db);
    };
    return { sql: open(), other: async () => open() };
  }
  const url = await pg.database();
  const open = async () => {
    const db = await PostgresDb.open({ url });
    opened.push(db);
    return db;
  };
  return { sql: await open(), other: open };
}

const MODELS = new Map([["m", { router: false }]]);

const digest = (triggers: unknown[]) => ({
  id: "digest",
  name: "Daily digest",
  inputs: {
    type: "object",
    properties: { topic: { type: "string" }, size: { type: "integer", default: 3 } },
    required: ["topic"],
  },
  triggers,
  run: { kind: "model", model: "m", prompt: "news about ${inputs.topic}" },
});

async function library(triggers: unknown[]): Promise<SystemsLibrary> {
  const res = await loadSystems({ configSystems: [digest(triggers)], models: MODELS });
  assert.deepEqual(res.problems, []);
  return res.library;
}

/** A clock whose time moves only when told; its one timer fires when the time passes it. */
class FakeClock implements Clock {
  private timer?: { at: number; fn: () => void | Promise<void> };
  constructor(public t: number) {}
  now = () => this.t;
  setTimer(fn: () => void | Promise<void>, ms: number) {
    const timer = { at: this.t + ms, fn };
    this.timer = timer;
    return () => {
      if (this.timer === timer) this.timer = undefined;
    };
  }
  /** Move to `t`, firing the timer each time it is due (bounded). */
  async advanceTo(t: number): Promise<void> {
    for (let i = 0; i < 1000 && this.timer && this.timer.at <= t; i++) {
      const { at, fn } = this.timer;
      this.timer = undefined;
      this.t = Math.max(this.t, at);
      await fn();
    }
    this.t = t;
  }
  get armedAt(): number | undefined {
    return this.timer?.at;
  }
}

function harness(lib: SystemsLibrary, clock: FakeClock, sql: Sql) {
  const started: StartRequest[] = [];
  const events: BridgeEvent[] = [];
  const bus = new EventBus();
  bus.on((e) => events.push(e));
  const runs = {
    start: async (req: StartRequest) => {
      started.push(req);
      return { id: `run_${started.length}`, ...req } as unknown as RunRecord;
    },
    wait: (id: string) => Promise.resolve({ id } as RunRecord),
  };
  const schedules = new Schedules({
    library: lib,
    runs,
    state: new TriggerState(sql),
    bus,
    log: pino({ level: "silent" }),
    clock,
  });
  return { schedules, started, events, sql };
}

const T0 = Date.parse("2026-11-30T07:59:30Z"); // a Monday

test("the library checks a schedule's cron, time zone and inputs, naming the key", async () => {
  const res = await loadSystems({
    configSystems: [
      digest([
        { cron: "61 * * * *", inputs: { topic: "x" } },
        { cron: "0 8 * * *", timezone: "Mars/Olympus", inputs: { topic: "x" } },
        { cron: "0 8 * * *", inputs: {} },
        { cron: "0 8 * * *", inputs: { topic: "x", colour: "red" } },
      ]),
    ],
    models: MODELS,
  });
  const byKey = Object.fromEntries(res.problems.map((p) => [p.key, p.message]));
  assert.match(byKey["systems[0].triggers[0].cron"]!, /not a cron expression.*minute/);
  assert.match(byKey["systems[0].triggers[1].timezone"]!, /unknown time zone "Mars\/Olympus"/);
  assert.match(byKey["systems[0].triggers[2].inputs"]!, /missing topic/);
  assert.match(byKey["systems[0].triggers[3].inputs"]!, /colour: not a declared input/);
  assert.equal(res.library.get("digest"), undefined, "a system with a bad schedule is not loaded");
});

for (const engine of ["sqlite", "postgres"] as const)
  describe(`schedules (${engine})`, () => {
    test("an every-minute schedule runs once a minute with its inputs", async () => {
      const clock = new FakeClock(T0);
      const h = harness(
        await library([{ cron: "* * * * *", inputs: { topic: "tides" } }]),
        clock,
        (await freshStore(engine)).sql,
      );
      await h.schedules.rearm();
      assert.equal(h.started.length, 0, "a new schedule catches nothing up");
      assert.equal(clock.armedAt, Date.parse("2026-11-30T08:00:00Z"));
      await clock.advanceTo(Date.parse("2026-11-30T08:00:10Z"));
      await clock.advanceTo(Date.parse("2026-11-30T08:01:10Z"));
      assert.equal(h.started.length, 2);
      for (const r of h.started)
        assert.deepEqual(r, {
          system: "digest",
          inputs: { topic: "tides", size: 3 },
          origin: "schedule",
          trigger: "schedule:0",
        });
      const fired = h.events.filter((e) => e.type === "trigger.fired");
      assert.deepEqual(
        fired.map((e) => e.type === "trigger.fired" && [e.runId, e.dueAt, e.catchUp]),
        [
          ["run_1", Date.parse("2026-11-30T08:00:00Z"), false],
          ["run_2", Date.parse("2026-11-30T08:01:00Z"), false],
        ],
      );
      const [row] = await h.schedules.rows("digest");
      assert.equal(row!.last_run_id, "run_2");
      assert.equal(row!.last_run_at, Date.parse("2026-11-30T08:01:00Z"));
      assert.equal(row!.next_run_at, Date.parse("2026-11-30T08:02:00Z"));
      await h.schedules.close();
      assert.equal(clock.armedAt, undefined, "closed: no timer left");
    });

    for (const catchUp of [true, false]) {
      test(`a time missed while the bridge was down is run ${catchUp ? "once at start" : "never (catchUp: false)"}`, async () => {
        const lib = await library([{ cron: "0 8 * * 1-5", timezone: "UTC", inputs: { topic: "x" }, catchUp }]);
        const clock = new FakeClock(T0);
        const { sql } = await freshStore(engine);
        const first = harness(lib, clock, sql);
        await first.schedules.rearm();
        await first.schedules.close(); // the bridge stops before 08:00 …
        // … and starts again on Wednesday at noon: Monday's, Tuesday's and Wednesday's 08:00 were missed.
        await clock.advanceTo(Date.parse("2026-12-02T12:00:00Z"));
        const second = harness(lib, clock, sql);
        await second.schedules.rearm();
        assert.equal(second.started.length, catchUp ? 1 : 0);
        const kinds = second.events.map((e) => e.type);
        assert.deepEqual(kinds, catchUp ? ["trigger.fired"] : ["trigger.skipped"]);
        if (catchUp) assert.equal((second.events[0] as { catchUp?: boolean }).catchUp, true);
        // Nothing more until Thursday 08:00 (the timer wakes at least hourly), then one run.
        assert.equal((await second.schedules.rows("digest"))[0]!.next_run_at, Date.parse("2026-12-03T08:00:00Z"));
        assert.equal(clock.armedAt, Date.parse("2026-12-02T13:00:00Z"));
        await second.schedules.rearm();
        assert.equal(second.started.length, catchUp ? 1 : 0, "a second check at the same time runs nothing again");
        await clock.advanceTo(Date.parse("2026-12-03T08:00:01Z"));
        assert.equal(second.started.length, catchUp ? 2 : 1);
        await second.schedules.close();
      });
    }

    test("a changed schedule counts from the change, and a time zone moves its times", async () => {
      const clock = new FakeClock(T0);
      const { sql } = await freshStore(engine);
      const a = harness(await library([{ cron: "0 8 * * *", inputs: { topic: "x" } }]), clock, sql);
      await a.schedules.rearm();
      await a.schedules.close();
      await clock.advanceTo(Date.parse("2026-12-01T12:00:00Z"));
      const b = harness(
        await library([{ cron: "30 7 * * *", timezone: "Europe/Paris", inputs: { topic: "x" } }]),
        clock,
        sql,
      );
      await b.schedules.rearm();
      assert.equal(b.started.length, 0, "the changed schedule does not catch up the old one's times");
      assert.equal((await b.schedules.rows("digest"))[0]!.next_run_at, Date.parse("2026-12-02T06:30:00Z"));
      await b.schedules.close();
    });

    test("a schedule removed and added again later catches nothing up", async () => {
      const clock = new FakeClock(T0);
      const { sql } = await freshStore(engine);
      const daily = [{ cron: "0 8 * * *", timezone: "UTC", inputs: { topic: "x" } }];
      const a = harness(await library(daily), clock, sql);
      await a.schedules.rearm();
      await a.schedules.close();
      const none = harness(await library([]), clock, sql);
      await none.schedules.rearm(); // "stop the schedule"
      await none.schedules.close();
      await clock.advanceTo(Date.parse("2026-12-05T12:00:00Z"));
      const again = harness(await library(daily), clock, sql);
      await again.schedules.rearm();
      assert.equal(again.started.length, 0);
      assert.equal((await again.schedules.rows("digest"))[0]!.last_run_id, null);
      await again.schedules.close();
    });

    test("two instances on one store: each due time fires once, a missed one is caught up once", async () => {
      const lib = await library([{ cron: "* * * * *", inputs: { topic: "tides" } }]);
      const store = await freshStore(engine);
      const clockA = new FakeClock(T0);
      const clockB = new FakeClock(T0);
      const a = harness(lib, clockA, store.sql);
      const b = harness(lib, clockB, await store.other());
      await Promise.all([a.schedules.rearm(), b.schedules.rearm()]);
      // Both wake at every minute, at the same time; three minutes pass.
      for (const minute of ["08:00:05", "08:01:05", "08:02:05"]) {
        const t = Date.parse(`2026-11-30T${minute}Z`);
        await Promise.all([clockA.advanceTo(t), clockB.advanceTo(t)]);
      }
      const dues = [...a.events, ...b.events]
        .filter((e) => e.type === "trigger.fired")
        .map((e) => (e.type === "trigger.fired" ? new Date(e.dueAt!).toISOString().slice(11, 16) : ""))
        .sort();
      assert.deepEqual(dues, ["08:00", "08:01", "08:02"], "each due time fired by one of the two");
      assert.equal(a.started.length + b.started.length, 3);
      // Both stop, and start again an hour later: the missed time is caught up once, not twice.
      await Promise.all([a.schedules.close(), b.schedules.close()]);
      const later = Date.parse("2026-11-30T09:10:00Z");
      await Promise.all([clockA.advanceTo(later), clockB.advanceTo(later)]);
      const a2 = harness(lib, clockA, store.sql);
      const b2 = harness(lib, clockB, await store.other());
      await Promise.all([a2.schedules.rearm(), b2.schedules.rearm()]);
      const caught = [...a2.events, ...b2.events].filter((e) => e.type === "trigger.fired");
      assert.equal(caught.length, 1, "the catch-up ran once across both");
      assert.equal(a2.started.length + b2.started.length, 1);
      await Promise.all([a2.schedules.close(), b2.schedules.close()]);
    });

    test("a hook's signature is seen once across instances; old ones are forgotten", async () => {
      const store = await freshStore(engine);
      const one = new TriggerState(store.sql);
      const two = new TriggerState(await store.other());
      const now = T0;
      const seen = await Promise.all([
        one.firstSeen("digest", "sha256=aa", now, now - 600_000),
        two.firstSeen("digest", "sha256=aa", now, now - 600_000),
      ]);
      assert.deepEqual(seen.sort(), [false, true], "one of the two takes it; the other sees a replay");
      assert.equal(await two.firstSeen("other", "sha256=aa", now, now - 600_000), true, "per system");
      assert.equal(
        await one.firstSeen("digest", "sha256=aa", now + 700_000, now + 100_000),
        true,
        "forgotten once older than the window",
      );
    });
  });
