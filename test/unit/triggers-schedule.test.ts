/**
 * Schedules under a fake clock (src/workflows/triggers/schedule.ts): the library checks a
 * schedule's cron, time zone and inputs at load, naming the key; an every-minute schedule runs
 * twice in two minutes with its inputs (origin `schedule`, trigger `schedule:0`); a schedule that
 * was due while the bridge was down runs ONCE at start, or not at all with `catchUp: false`; a new
 * or changed schedule catches nothing up, nor one removed and added again; `rows` shows the next
 * and last run.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import pino from "pino";
import type { BridgeEvent } from "../../src/wire/events.js";
import { EventBus } from "../../src/ops/events/bus.js";
import { openSystemsDb, type RunRecord } from "../../src/workflows/systems/db.js";
import { loadSystems, type SystemsLibrary } from "../../src/workflows/systems/library.js";
import type { StartRequest } from "../../src/workflows/systems/runner.js";
import type { Clock } from "../../src/workflows/triggers/clock.js";
import { Schedules } from "../../src/workflows/triggers/schedule.js";
import { TriggerState } from "../../src/workflows/triggers/state.js";

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
  private timer?: { at: number; fn: () => void };
  constructor(public t: number) {}
  now = () => this.t;
  setTimer(fn: () => void, ms: number) {
    const timer = { at: this.t + ms, fn };
    this.timer = timer;
    return () => {
      if (this.timer === timer) this.timer = undefined;
    };
  }
  /** Move to `t`, firing the timer each time it is due (bounded). */
  advanceTo(t: number): void {
    for (let i = 0; i < 1000 && this.timer && this.timer.at <= t; i++) {
      const { at, fn } = this.timer;
      this.timer = undefined;
      this.t = Math.max(this.t, at);
      fn();
    }
    this.t = t;
  }
  get armedAt(): number | undefined {
    return this.timer?.at;
  }
}

/** Lets a schedule's started run be recorded (the run manager's `start` is async). */
const settle = () => new Promise<void>((r) => setImmediate(r));

function harness(lib: SystemsLibrary, clock: FakeClock, db = openSystemsDb(":memory:")) {
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
    state: new TriggerState(db),
    bus,
    log: pino({ level: "silent" }),
    clock,
  });
  return { schedules, started, events, db };
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

test("an every-minute schedule runs once a minute with its inputs", async () => {
  const clock = new FakeClock(T0);
  const h = harness(await library([{ cron: "* * * * *", inputs: { topic: "tides" } }]), clock);
  h.schedules.rearm();
  await settle();
  assert.equal(h.started.length, 0, "a new schedule catches nothing up");
  assert.equal(clock.armedAt, Date.parse("2026-11-30T08:00:00Z"));
  clock.advanceTo(Date.parse("2026-11-30T08:00:10Z"));
  await settle();
  clock.advanceTo(Date.parse("2026-11-30T08:01:10Z"));
  await settle();
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
  const [row] = h.schedules.rows("digest");
  assert.equal(row!.last_run_id, "run_2");
  assert.equal(row!.last_run_at, Date.parse("2026-11-30T08:01:00Z"));
  assert.equal(row!.next_run_at, Date.parse("2026-11-30T08:02:00Z"));
  h.schedules.close();
  assert.equal(clock.armedAt, undefined, "closed: no timer left");
});

for (const catchUp of [true, false]) {
  test(`a time missed while the bridge was down is run ${catchUp ? "once at start" : "never (catchUp: false)"}`, async () => {
    const lib = await library([{ cron: "0 8 * * 1-5", timezone: "UTC", inputs: { topic: "x" }, catchUp }]);
    const clock = new FakeClock(T0);
    const first = harness(lib, clock);
    first.schedules.rearm();
    await settle();
    first.schedules.close(); // the bridge stops before 08:00 …
    // … and starts again on Wednesday at noon: Monday's, Tuesday's and Wednesday's 08:00 were missed.
    clock.advanceTo(Date.parse("2026-12-02T12:00:00Z"));
    await settle();
    const second = harness(lib, clock, first.db);
    second.schedules.rearm();
    await settle();
    assert.equal(second.started.length, catchUp ? 1 : 0);
    const kinds = second.events.map((e) => e.type);
    assert.deepEqual(kinds, catchUp ? ["trigger.fired"] : ["trigger.skipped"]);
    if (catchUp) assert.equal((second.events[0] as { catchUp?: boolean }).catchUp, true);
    // Nothing more until Thursday 08:00 (the timer wakes at least hourly), then one run.
    assert.equal(second.schedules.rows("digest")[0]!.next_run_at, Date.parse("2026-12-03T08:00:00Z"));
    assert.equal(clock.armedAt, Date.parse("2026-12-02T13:00:00Z"));
    second.schedules.rearm();
    await settle();
    assert.equal(second.started.length, catchUp ? 1 : 0, "a second check at the same time runs nothing again");
    clock.advanceTo(Date.parse("2026-12-03T08:00:01Z"));
    await settle();
    assert.equal(second.started.length, catchUp ? 2 : 1);
    second.schedules.close();
  });
}

test("a changed schedule counts from the change, and a time zone moves its times", async () => {
  const clock = new FakeClock(T0);
  const db = openSystemsDb(":memory:");
  const a = harness(await library([{ cron: "0 8 * * *", inputs: { topic: "x" } }]), clock, db);
  a.schedules.rearm();
  await settle();
  a.schedules.close();
  clock.advanceTo(Date.parse("2026-12-01T12:00:00Z"));
  await settle();
  const b = harness(
    await library([{ cron: "30 7 * * *", timezone: "Europe/Paris", inputs: { topic: "x" } }]),
    clock,
    db,
  );
  b.schedules.rearm();
  await settle();
  assert.equal(b.started.length, 0, "the changed schedule does not catch up the old one's times");
  assert.equal(b.schedules.rows("digest")[0]!.next_run_at, Date.parse("2026-12-02T06:30:00Z"));
  b.schedules.close();
});

test("a schedule removed and added again later catches nothing up", async () => {
  const clock = new FakeClock(T0);
  const db = openSystemsDb(":memory:");
  const daily = [{ cron: "0 8 * * *", timezone: "UTC", inputs: { topic: "x" } }];
  const a = harness(await library(daily), clock, db);
  a.schedules.rearm();
  await settle();
  a.schedules.close();
  const none = harness(await library([]), clock, db);
  none.schedules.rearm(); // "stop the schedule"
  await settle();
  none.schedules.close();
  clock.advanceTo(Date.parse("2026-12-05T12:00:00Z"));
  await settle();
  const again = harness(await library(daily), clock, db);
  again.schedules.rearm();
  await settle();
  assert.equal(again.started.length, 0);
  assert.equal(again.schedules.rows("digest")[0]!.last_run_id, null);
  again.schedules.close();
});
