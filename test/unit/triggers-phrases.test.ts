/**
 * A schedule in words (src/workflows/triggers/phrases.ts) and the builder's CONFIGURE reading it
 * (src/workflows/builder/configure.ts): common phrasings to cron, stop, "also", and what is not a
 * schedule (nor, for the router's rule, a request for one); on a canvas: the trigger setting with its inputs, checked (a required input without a
 * default must be given), compiled into the system, and told back with the cron and next run.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Canvas } from "../../src/wire/canvas.js";
import { changesFromWords, checkChanges, scheduleText, withChanges } from "../../src/workflows/builder/configure.js";
import { compileCanvas } from "../../src/workflows/builder/compile.js";
import { asksForSchedule, scheduleFromWords } from "../../src/workflows/triggers/phrases.js";

test("common phrasings become cron expressions", () => {
  const cases: Array<[string, string, string]> = [
    ["run it every weekday at 8", "0 8 * * 1-5", "every weekday at 08:00"],
    ["run it every day at 7:30 instead", "30 7 * * *", "every day at 07:30"],
    ["daily at 6pm", "0 18 * * *", "every day at 18:00"],
    ["every monday and friday at 9am", "0 9 * * 1,5", "every Monday and Friday at 09:00"],
    ["every Tuesday", "0 9 * * 2", "every Tuesday at 09:00"],
    ["on weekends at noon", "0 12 * * 0,6", "every Saturday and Sunday at 12:00"],
    ["every day at midnight", "0 0 * * *", "every day at 00:00"],
    ["run it at 7:30 pm", "30 19 * * *", "every day at 19:30"],
    ["every hour", "0 * * * *", "every hour"],
    ["every 3 hours", "0 */3 * * *", "every 3 hours"],
    ["every 15 minutes", "*/15 * * * *", "every 15 minutes"],
    ["every minute", "* * * * *", "every minute"],
    ['schedule it with cron "5 4 * * sun"', "5 4 * * sun", "cron `5 4 * * sun`"],
  ];
  for (const [text, cron, words] of cases)
    assert.deepEqual(scheduleFromWords(text), { kind: "set", cron, words, also: false }, text);
  assert.equal((scheduleFromWords("also every sunday at 18:00") as { also: boolean }).also, true);
  for (const stop of ["stop the schedule", "remove the schedules", "unschedule it", "disable the schedule"])
    assert.deepEqual(scheduleFromWords(stop), { kind: "stop" }, stop);
  for (const none of [
    "set the default topic to cats",
    "deploy it",
    "every day at 25",
    "at 13pm every day",
    "can you run the daily report?",
    "show the weekdays report",
  ])
    assert.equal(scheduleFromWords(none), undefined, none);
  // The router's rule is narrower: the request leads, or "schedule" is said.
  for (const yes of [
    "run it every weekday at 8",
    "every day at 7:30 instead",
    "stop the schedule",
    "schedule it hourly",
  ])
    assert.ok(asksForSchedule(yes), yes);
  for (const no of ["I check my mail every hour", "build a system that sends news every day at 8"])
    assert.ok(!asksForSchedule(no), no);
});

const canvas = (required: boolean): Canvas => ({
  system: "digest",
  name: "Daily digest",
  description: "",
  status: "draft",
  version: 1,
  nodes: [
    {
      id: "topic",
      type: "input",
      label: "topic",
      properties: required ? {} : { default: "news" },
      position: { x: 0, y: 0 },
    },
    { id: "write", type: "agent", label: "write", properties: { model: "m" }, position: { x: 0, y: 0 } },
  ],
  edges: [{ id: "e1", from: "topic", to: "write" }],
  settings: {},
  updatedAt: 0,
});

test("CONFIGURE reads a schedule, checks it against the canvas, compiles it and tells it back", () => {
  const c = canvas(false);
  const changes = changesFromWords("run it every weekday at 8", c);
  assert.equal(changes.length, 1);
  assert.equal(changes[0]!.path, "triggers");
  const [t] = changes[0]!.value as Array<{ cron: string; timezone: string; inputs: object }>;
  assert.equal(t!.cron, "0 8 * * 1-5");
  assert.ok(t!.timezone, "the bridge's time zone is kept");
  assert.ok("changes" in checkChanges(changes, c));
  const compiled = compileCanvas(withChanges(c, changes));
  assert.ok(compiled.ok);
  assert.deepEqual((compiled.system as { triggers: unknown }).triggers, changes[0]!.value);
  const told = scheduleText([{ cron: "0 8 * * 1-5", timezone: "UTC" }], Date.parse("2026-11-28T10:00:00Z"));
  assert.equal(told, "Schedule: cron `0 8 * * 1-5` (UTC), next run Mon, 30 Nov 2026, 08:00.");

  // A required input without a default must be given.
  const strict = canvas(true);
  const refused = checkChanges(changesFromWords("run it every weekday at 8", strict), strict);
  assert.ok("errors" in refused && /must give topic/.test(refused.errors[0]!));
  const given = changesFromWords("run it every weekday at 8 with topic=tides", strict);
  assert.ok("changes" in checkChanges(given, strict));
  assert.deepEqual((given[0]!.value as Array<{ inputs: object }>)[0]!.inputs, { topic: "tides" });

  // "disable the schedule" empties the schedules and leaves the system enabled.
  assert.deepEqual(changesFromWords("disable the schedule", c), [{ path: "triggers", value: [] }]);
  // "also" keeps the others.
  const withOne = withChanges(c, changes);
  const two = changesFromWords("also every sunday at 18:00", withOne);
  assert.equal((two[0]!.value as unknown[]).length, 2);
});
