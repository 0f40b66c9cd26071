/**
 * src/ops/metrics/cells.ts against prom-client itself: the same observations give the same exposition
 * text (and the same JSON) as prom-client's Counter and Histogram, in one registry beside them.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Counter, Histogram, Registry } from "prom-client";
import { CellCounter, CellHistogram } from "../../src/ops/metrics/cells.js";

const BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2];
/** Values on, between, below and above the bounds. */
const VALUES = [0, 0.05, 0.0500001, 0.07, 0.1, 0.3, 1, 1.5, 2, 2.0001, 99, 0.25];
const LABELS: Array<[string, string, string]> = [
  ["m1", "b1", "completed"],
  ["m2", "b1", "failed"],
  ["other", 'we"ird\\name\n', "aborted"],
];

function promClient(): Registry {
  const registry = new Registry();
  const registers = [registry];
  const turns = new Counter({
    name: "t_total",
    help: "Turns.",
    labelNames: ["model", "backend", "outcome"],
    registers,
  });
  const plain = new Counter({ name: "plain_total", help: "No labels.", registers });
  const untouched = new Counter({
    name: "untouched_total",
    help: "Labels, never incremented.",
    labelNames: ["model"],
    registers,
  });
  const duration = new Histogram({
    name: "d_seconds",
    help: "Duration.",
    labelNames: ["model", "backend", "outcome"],
    buckets: BUCKETS,
    registers,
  });
  const wait = new Histogram({ name: "w_seconds", help: "No labels.", buckets: BUCKETS, registers });
  const idle = new Histogram({ name: "idle_seconds", help: "No labels, never observed.", buckets: BUCKETS, registers });
  void untouched;
  void idle;
  VALUES.forEach((v, i) => {
    const [model, backend, outcome] = LABELS[i % LABELS.length]!;
    turns.inc({ model, backend, outcome });
    turns.inc({ model, backend, outcome }, i);
    plain.inc(v);
    duration.observe({ model, backend, outcome }, v);
    wait.observe(v);
  });
  return registry;
}

function cells(): Registry {
  const registry = new Registry();
  const turns = new CellCounter("t_total", "Turns.", ["model", "backend", "outcome"], registry);
  const plain = new CellCounter("plain_total", "No labels.", [], registry);
  new CellCounter("untouched_total", "Labels, never incremented.", ["model"], registry);
  const duration = new CellHistogram("d_seconds", "Duration.", ["model", "backend", "outcome"], BUCKETS, registry);
  const wait = new CellHistogram("w_seconds", "No labels.", [], BUCKETS, registry);
  new CellHistogram("idle_seconds", "No labels, never observed.", [], BUCKETS, registry);
  VALUES.forEach((v, i) => {
    const labels = LABELS[i % LABELS.length]!;
    turns.inc(1, ...labels);
    turns.inc(i, ...labels);
    plain.inc(v);
    duration.observe(v, ...labels);
    wait.observe(v);
  });
  return registry;
}

test("cells export the text and JSON prom-client exports for the same observations", async () => {
  const expected = await promClient().metrics();
  const actual = await cells().metrics();
  assert.match(expected, /d_seconds_bucket\{le="\+Inf",model="m1"/); // the comparison covers labelled buckets
  assert.equal(actual, expected);
  assert.deepEqual(await cells().getMetricsAsJSON(), await promClient().getMetricsAsJSON());
});

test("cells refuse what prom-client refuses: a counter going down, a value that is not a number, a wrong label count", () => {
  const registry = new Registry();
  const c = new CellCounter("c_total", "c", ["model"], registry);
  const h = new CellHistogram("h_seconds", "h", ["model"], BUCKETS, registry);
  assert.throws(() => c.inc(-1, "m"), /only goes up/);
  assert.throws(() => c.inc(Number.NaN, "m"), /only goes up/);
  assert.throws(() => h.observe(Number.POSITIVE_INFINITY, "m"), /not a valid number/);
  assert.throws(() => h.observe(1), /1 label values expected, got 0/);
  assert.throws(() => new CellHistogram("bad_seconds", "b", [], [1, 1], registry), /must increase/);
  assert.throws(() => new CellCounter("c_total", "again", [], registry), /already been registered/);
});
