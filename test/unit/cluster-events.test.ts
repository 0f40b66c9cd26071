/**
 * The cluster's event log (src/ops/cluster-events/event-log.ts) with the hub
 * (src/ops/events/hub.ts), on a real PostgreSQL: two instances (a bus, a hub and a log each, on one
 * database). An event published on A reaches B's watcher with A's instance id under the same id;
 * in-process listeners see it at once; `Last-Event-ID` on B replays both instances' events in id
 * order, older than B's ring included (read from the log), and an instance started later goes on
 * from the log's ids; a batch too big for a notification read from the log; concurrent publishing on both gives one order, the same on both, each
 * instance's own order kept; the log keeps its bound (then `gap`); a database that refuses the
 * append leaves the event streamed on its own instance without an id, and appends pass again after.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { createLogger } from "../../src/core/log/logger.js";
import { ClusterEventLog, KEEP_RINGS } from "../../src/ops/cluster-events/event-log.js";
import { EventBus, type NewEvent } from "../../src/ops/events/bus.js";
import { EventHub, type EventSink } from "../../src/ops/events/hub.js";
import { eventually } from "../helpers/bridge.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

interface Frame {
  id?: number;
  event?: string;
  data?: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

class Sink implements EventSink {
  text = "";
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
  onDrain(): void {}
  end(last?: string): void {
    this.text += last ?? "";
  }
  events(): Frame[] {
    const out: Frame[] = [];
    for (const block of this.text.split("\n\n")) {
      const f: Frame = {};
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) f.id = Number(line.slice(4));
        else if (line.startsWith("event: ")) f.event = line.slice(7);
        else if (line.startsWith("data: ")) f.data = JSON.parse(line.slice(6));
      }
      if (f.event) out.push(f);
    }
    return out;
  }
}

interface Instance {
  db: PostgresDb;
  bus: EventBus;
  hub: EventHub;
  log: ClusterEventLog;
  close(): Promise<void>;
}

async function instance(url: string, id: string, ringSize = 100, includeText = false): Promise<Instance> {
  const db = await PostgresDb.open({ url, instanceId: id });
  const bus = new EventBus((err) => {
    throw err;
  });
  const log = new ClusterEventLog(db, { ringSize, logger: createLogger("silent") });
  const hub = new EventHub(bus, {
    ringSize,
    includeText,
    maxQueued: 10_000,
    heartbeatMs: 0,
    flushMs: 1,
    instance: id,
    log,
  });
  await log.start(hub);
  return {
    db,
    bus,
    hub,
    log,
    async close() {
      hub.close();
      await log.close();
      await db.close();
    },
  };
}

const turn = (turnId: string, conversation = "c1"): NewEvent => ({
  type: "turn.started",
  turnId,
  conversation,
  model: "m",
  backend: "b",
  mode: "stateless",
  queuedMs: 0,
});

const ids = (fs: Frame[]) => fs.map((f) => f.id);
const tick = () => new Promise((r) => setTimeout(r, 2));

let pg: TestPostgres;
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
});

describe("events across instances", () => {
  test("an event published on A reaches B's watcher with A's instance id, under the same id; A's bus listeners see it at once", async () => {
    const url = await pg.database();
    const [a, b] = [await instance(url, "inst-a"), await instance(url, "inst-b")];
    try {
      const [wa, wb] = [new Sink(), new Sink()];
      a.hub.subscribe(wa);
      b.hub.subscribe(wb);
      const seen: string[] = [];
      a.bus.on((e) => seen.push(e.type));
      a.bus.emit(turn("t1"));
      assert.deepEqual(seen, ["turn.started"], "in-process listeners are called synchronously");
      b.bus.emit(turn("t2", "c2"));
      assert.ok(await eventually(() => wa.events().length === 2 && wb.events().length === 2, 5000));
      const [fa, fb] = [wa.events(), wb.events()];
      assert.deepEqual(fa, fb, "the same frames, under the same ids, on both");
      assert.deepEqual(
        fb.map((f) => [f.data.turnId, f.data.instance]),
        [
          ["t1", "inst-a"],
          ["t2", "inst-b"],
        ],
      );
      assert.ok(fb[0]!.id! < fb[1]!.id!);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("Last-Event-ID on B: both instances' events after it, in id order, older than B's ring read from the log; a later instance goes on from the log's ids", async () => {
    const url = await pg.database();
    const [a, b] = [await instance(url, "inst-a", 3), await instance(url, "inst-b", 3)];
    try {
      const wa = new Sink();
      a.hub.subscribe(wa);
      for (let i = 0; i < 10; i++) {
        (i % 2 ? b : a).bus.emit(turn(`t${i}`));
        await tick();
      }
      assert.ok(
        await eventually(() => wa.events().length === 10 && b.hub.stats().lastId === a.hub.stats().lastId, 5000),
      );
      const all = wa.events();
      assert.equal(b.hub.stats().ring, 3, "B's ring holds 3");
      const from = all[1]!.id!;
      const replay = new Sink();
      b.hub.subscribe(replay, {}, from);
      assert.ok(await eventually(() => replay.events().length === 8, 5000), replay.text);
      assert.deepEqual(ids(replay.events()), ids(all.slice(2)), "no gap, no duplicate, in id order");
      assert.deepEqual(
        replay.events().map((f) => [f.data.turnId, f.data.instance]),
        all.slice(2).map((f) => [f.data.turnId, f.data.instance]),
      );
      assert.deepEqual(new Set(all.map((f) => f.data.instance)), new Set(["inst-a", "inst-b"]));
      // Live after the replay, without a duplicate.
      a.bus.emit(turn("t10"));
      assert.ok(await eventually(() => replay.events().length === 9, 5000));
      assert.equal(replay.events()[8]!.data.turnId, "t10");

      // A third instance started now has the last ring and the same ids; a replay from 0 reads the log.
      const c = await instance(url, "inst-c", 3);
      try {
        assert.equal(c.hub.stats().lastId, a.hub.stats().lastId);
        const wc = new Sink();
        c.hub.subscribe(wc, {}, 0);
        assert.ok(await eventually(() => wc.events().length === 11, 5000), wc.text);
        assert.deepEqual(ids(wc.events()), [...ids(all), replay.events()[8]!.id]);
      } finally {
        await c.close();
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("concurrent publishing on both: one order of ids, the same on both, each instance's own order kept", async () => {
    const url = await pg.database();
    const [a, b] = [await instance(url, "inst-a", 1000), await instance(url, "inst-b", 1000)];
    try {
      const [wa, wb] = [new Sink(), new Sink()];
      a.hub.subscribe(wa);
      b.hub.subscribe(wb);
      const N = 150;
      for (let i = 0; i < N; i++) {
        a.bus.emit(turn(`a${i}`));
        b.bus.emit(turn(`b${i}`));
        if (i % 10 === 0) await tick();
      }
      assert.ok(await eventually(() => wa.events().length === 2 * N && wb.events().length === 2 * N, 10_000));
      const [fa, fb] = [wa.events(), wb.events()];
      assert.deepEqual(
        fa.map((f) => [f.id, f.data.turnId]),
        fb.map((f) => [f.id, f.data.turnId]),
      );
      for (let i = 1; i < fa.length; i++) assert.ok(fa[i]!.id! > fa[i - 1]!.id!, "ids increase");
      for (const who of ["a", "b"]) {
        const own = fa.filter((f) => f.data.turnId.startsWith(who)).map((f) => f.data.turnId);
        assert.deepEqual(
          own,
          Array.from({ length: N }, (_, i) => `${who}${i}`),
        );
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a batch too big for a notification (8000 bytes) is read from the log: in order, nothing lost", async () => {
    const url = await pg.database();
    const [a, b] = [await instance(url, "inst-a", 100, true), await instance(url, "inst-b")];
    try {
      const wb = new Sink();
      b.hub.subscribe(wb);
      a.bus.emit(turn("small-1"));
      a.bus.emit({ type: "run.output", runId: "r1", step: "s", text: "x".repeat(9000) });
      a.bus.emit(turn("small-2"));
      await tick();
      a.bus.emit(turn("small-3"));
      assert.ok(await eventually(() => wb.events().length === 4, 5000), wb.text.slice(0, 300));
      assert.deepEqual(
        wb.events().map((f) => f.data.turnId ?? f.data.text.length),
        ["small-1", 9000, "small-2", "small-3"],
      );
    } finally {
      await a.close();
      await b.close();
    }
  });

  test(`the log keeps the newest ${KEEP_RINGS} rings' worth; a replay from before that starts with \`gap\``, async () => {
    const url = await pg.database();
    const a = await instance(url, "inst-a", 2);
    try {
      const w = new Sink();
      a.hub.subscribe(w);
      const n = KEEP_RINGS * 2 + 5;
      for (let i = 0; i < n; i++) {
        a.bus.emit(turn(`t${i}`));
        await tick();
      }
      assert.ok(await eventually(() => w.events().length === n, 5000));
      const last = w.events()[n - 1]!.id!;
      assert.equal(await a.log.prune(), n - KEEP_RINGS * 2);
      const r = new Sink();
      a.hub.subscribe(r, {}, 1);
      assert.ok(await eventually(() => r.events().length === KEEP_RINGS * 2 + 1, 5000), r.text);
      const [gap, ...rest] = r.events();
      assert.deepEqual(gap, {
        event: "gap",
        data: { lastEventId: 1, oldest: last - KEEP_RINGS * 2 + 1, lastId: last },
      });
      assert.equal(rest[0]!.id, last - KEEP_RINGS * 2 + 1);
      assert.equal(rest.at(-1)!.id, last);
    } finally {
      await a.close();
    }
  });

  test("a database that refuses the append: the event is streamed on its own instance without an id, in-process listeners unaffected; then appends pass again", async () => {
    const url = await pg.database();
    const [a, b] = [await instance(url, "inst-a"), await instance(url, "inst-b")];
    try {
      const [wa, wb] = [new Sink(), new Sink()];
      a.hub.subscribe(wa);
      b.hub.subscribe(wb);
      const seen: string[] = [];
      a.bus.on((e) => seen.push((e as { turnId: string }).turnId));
      await a.db.run("ALTER FUNCTION events_log_append RENAME TO events_log_append_away");
      a.bus.emit(turn("lost"));
      assert.deepEqual(seen, ["lost"]);
      assert.ok(await eventually(() => wa.events().length === 1, 5000));
      assert.deepEqual([wa.events()[0]!.id, wa.events()[0]!.data.turnId], [undefined, "lost"]);
      await a.db.run("ALTER FUNCTION events_log_append_away RENAME TO events_log_append");
      a.bus.emit(turn("kept"));
      assert.ok(await eventually(() => wa.events().length === 2 && wb.events().length === 1, 5000));
      assert.equal(wb.events()[0]!.data.turnId, "kept");
      assert.equal(typeof wb.events()[0]!.id, "number");
      assert.deepEqual(wa.events()[1], wb.events()[0]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
