/**
 * The backends' health probed in the background (src/backends/health/probes.ts) as
 * `GET /v1/admin/backends` serves it (src/request/http/admin-routes.ts), on a real Fastify app with
 * a probe the test holds open: the route answers at once from the last probe with its age while a
 * new one runs; `?refresh=1` starts a new probe and waits for it; one probe runs at a time however
 * often it is asked; the timer probes again and stops on close; with background probes off, each
 * request waits for a probe.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import Fastify from "fastify";
import pino from "pino";
import { type BackendProbe, BackendProbes } from "../../src/backends/health/probes.js";
import { EventBus } from "../../src/ops/events/bus.js";
import type { TurnScheduler } from "../../src/request/queue/scheduler.js";
import { registerAdminRoutes } from "../../src/request/http/admin-routes.js";
import type { BackendsInfo } from "../../src/wire/admin.js";

/** A probe that ends only when the test says so; counts how many were started and how many ran at once. */
function heldProbe() {
  const held: Array<() => void> = [];
  const s = { started: 0, running: 0, most: 0 };
  const probe = () => {
    s.started++;
    s.running++;
    s.most = Math.max(s.most, s.running);
    const n = s.started;
    return new Promise<BackendProbe>((resolve) =>
      held.push(() => {
        s.running--;
        resolve({
          backends: [{ name: "up", type: "openai", usable: true, detail: `probe ${n}`, version: null, models: ["m"] }],
          clis: [],
          checkedAt: Date.now(),
        });
      }),
    );
  };
  /** End the probes held now. */
  const release = () => {
    for (const end of held.splice(0)) end();
  };
  return { probe, release, s };
}

const until = async (what: string, ok: () => boolean) => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  assert.ok(ok(), what);
};

const apps: Array<{ close(): Promise<unknown> }> = [];
after(async () => {
  for (const a of apps) await a.close();
});

async function serve(probes: BackendProbes) {
  const app = Fastify();
  apps.push(app);
  registerAdminRoutes(app, { scheduler: {} as TurnScheduler, admin: { bus: new EventBus(), probes } });
  return async (query = "") => {
    const res = await app.inject({ method: "GET", url: `/v1/admin/backends${query}` });
    assert.equal(res.statusCode, 200, res.body);
    return res.json() as BackendsInfo;
  };
}

test("the route answers at once from the last probe with its age; refresh probes again; one probe at a time", async () => {
  const h = heldProbe();
  const probes = new BackendProbes({ probe: h.probe, everyMs: 3_600_000, logger: pino({ level: "silent" }) });
  const get = await serve(probes);
  probes.start();
  assert.equal(h.s.started, 1, "probed at start-up");

  // Before any probe ended, the first request waits for that one (no second probe).
  const first = get();
  await until("the request is waiting", () => probes.probing);
  h.release();
  const a = await first;
  assert.deepEqual([a.data[0]!.detail, a.probing, h.s.started], ["probe 1", false, 1]);
  assert.ok(a.age_ms >= 0 && a.age_ms < 1000, `age ${a.age_ms}`);

  // A refresh starts probe 2; while it runs, plain requests answer at once from probe 1, saying a probe runs.
  const refreshed = get("?refresh=1");
  await until("probe 2 started", () => h.s.started === 2);
  await new Promise((r) => setTimeout(r, 30));
  const meanwhile = await get();
  assert.deepEqual([meanwhile.data[0]!.detail, meanwhile.probing], ["probe 1", true]);
  assert.equal(meanwhile.checked_at, a.checked_at);
  assert.ok(meanwhile.age_ms >= 30, `the age grows: ${meanwhile.age_ms}`);
  // More refreshes while probe 2 runs join it.
  const again = [get("?refresh=1"), get("?refresh=1")];
  await new Promise((r) => setTimeout(r, 30));
  assert.deepEqual([h.s.started, h.s.most], [2, 1], "one probe in flight at a time");
  h.release();
  for (const r of [await refreshed, ...(await Promise.all(again))]) {
    assert.deepEqual([r.data[0]!.detail, r.probing], ["probe 2", false]);
  }
  assert.ok((await get()).checked_at > a.checked_at);
  probes.close();
});

test("the timer probes again, never two at once, and stops on close", async () => {
  const h = heldProbe();
  const probes = new BackendProbes({ probe: h.probe, everyMs: 20, logger: pino({ level: "silent" }) });
  probes.start();
  // Held for several periods: the timer does not start a second probe beside the first.
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual([h.s.started, h.s.most], [1, 1]);
  h.release();
  await until("probed again by the timer", () => h.s.started >= 2);
  h.release();
  probes.close();
  h.release();
  const n = h.s.started;
  await new Promise((r) => setTimeout(r, 100));
  h.release();
  assert.equal(h.s.started, n, "no probe after close");
  assert.equal(h.s.most, 1);
});

test("with background probes off (server.backendProbes.enabled: false), each request waits for a probe", async () => {
  const h = heldProbe();
  const probes = new BackendProbes({ probe: h.probe, everyMs: 20, logger: pino({ level: "silent" }) });
  const get = await serve(probes);
  for (const n of [1, 2]) {
    const r = get();
    await until(`probe ${n} started by the request`, () => h.s.started === n);
    h.release();
    assert.deepEqual([(await r).data[0]!.detail, (await r).probing], [`probe ${n}`, false]);
  }
  assert.equal(h.s.most, 1);
});
