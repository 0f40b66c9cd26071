/**
 * The start-up reaper (issue 20, item 8): 24 process groups recorded under a run directory by a
 * bridge that was killed — some leaders alive, some dead with a helper left in the group, some
 * whose processes ignore SIGTERM — are all ended, with one shared grace period. Groups that are
 * not (or no longer) ours are left alone: a record whose pid now names another process (different
 * start time), a record from another boot, and a record of a bridge that is still running.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, test } from "node:test";
import { reapOrphans } from "../../src/core/util/process.js";
import { newRunOwner, procStat, startTime, writeRunRecord, type RunOwner } from "../../src/core/util/run-records.js";
import { cleanup, eventually, tempDir } from "../helpers/bridge.js";
import { exited, groupAlive, killGroups } from "../helpers/process-groups.js";

const spawned: ChildProcess[] = [];
const groups = new Set<number>();
const dirs: string[] = [];

/** A detached group (own session, like a CLI): `sh -c <body>`. */
function group(body: string): ChildProcess {
  const c = spawn("/bin/sh", ["-c", body], { detached: true, stdio: "ignore" });
  c.on("error", () => {});
  spawned.push(c);
  groups.add(c.pid!);
  return c;
}

/** Members of a group, leader excluded (its children have started). */
function helpers(pgid: number): number[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n) && Number(n) !== pgid)
    .filter((n) => procStat(Number(n))?.pgrp === pgid)
    .map(Number);
}

/** The records a bridge killed with SIGKILL leaves: its pid is gone. */
const deadBridge: RunOwner = { id: "killed-bridge", pid: 4_194_304 + 7, start: "12345" };

after(async () => {
  killGroups(groups);
  for (const c of spawned) c.kill("SIGKILL");
  await eventually(() => [...groups].every((g) => !groupAlive(g)), 5000);
  for (const d of dirs) cleanup(d);
});

test("24 orphaned groups, whatever their leaders did, are all ended with one shared grace period", async (t) => {
  const dir = tempDir("cb-reap-");
  dirs.push(dir);
  const live: number[] = [];
  const leaderDead: number[] = [];
  const stubborn: number[] = [];
  for (let i = 0; i < 24; i++) {
    // 0-9: leader and helper alive; 10-17: the leader is killed, its helper stays in the group;
    // 18-23: leader and helper ignore SIGTERM (they need the SIGKILL after the grace period).
    const body = i < 18 ? "sleep 30 & exec sleep 31" : "trap '' TERM; sleep 30 & exec sleep 31";
    const c = group(body);
    (i < 10 ? live : i < 18 ? leaderDead : stubborn).push(c.pid!);
  }
  assert.ok(
    await eventually(
      () =>
        [...live, ...leaderDead, ...stubborn].every((g) => helpers(g).length === 1 && procStat(g)?.start !== undefined),
      10_000,
    ),
    "every group has its helper",
  );
  for (const g of [...live, ...leaderDead, ...stubborn]) writeRunRecord(dir, deadBridge, g, "/usr/bin/fake-cli");
  for (const g of leaderDead) process.kill(g, "SIGKILL"); // the leader only
  assert.ok(await eventually(() => leaderDead.every(exited), 5000), "the leaders are dead");
  assert.ok(leaderDead.every(groupAlive), "their helpers live on in the groups");

  const t0 = Date.now();
  const ended = await reapOrphans(dir, 2000);
  const ms = Date.now() - t0;
  t.diagnostic(`reapOrphans ended ${ended} groups in ${ms} ms (grace 2000 ms; 6 groups needed SIGKILL)`);
  assert.equal(ended, 24);
  assert.ok(
    await eventually(() => [...live, ...leaderDead, ...stubborn].every((g) => !groupAlive(g)), 3000),
    "no process of any group is left",
  );
  assert.deepEqual(readdirSync(dir), [], "the records are removed");
  // One grace period for all groups: waiting for the 6 stubborn groups one at a time takes 12 s.
  assert.ok(ms < 6000, `one shared grace period (${ms} ms)`);
});

test("groups that are not ours are left alone: reused pid, another boot, a bridge still running", async () => {
  const dir = tempDir("cb-reap-");
  dirs.push(dir);
  const reused = group("exec sleep 30").pid!;
  const otherBoot = group("exec sleep 30").pid!;
  const runningBridge = group("exec sleep 30").pid!;
  const mine = group("sleep 30 & exec sleep 31").pid!;
  const bridgeProcess = group("exec sleep 30").pid!; // stands for a bridge that still runs
  assert.ok(
    await eventually(
      () => [reused, otherBoot, runningBridge, mine, bridgeProcess].every((p) => startTime(p) !== undefined),
      5000,
    ),
  );
  // The pid names a process with another start time: the recorded CLI is long gone.
  writeFileSync(
    path.join(dir, `${reused}.json`),
    JSON.stringify({ pid: reused, start: String(Number(startTime(reused)) - 1), owner: "x", command: "old" }),
  );
  // Recorded before a reboot.
  const rec = JSON.parse(readFileSync(writeRunRecord(dir, deadBridge, otherBoot, "cli")!, "utf8"));
  writeFileSync(
    path.join(dir, `${otherBoot}.json`),
    JSON.stringify({ ...rec, boot: "00000000-0000-0000-0000-000000000000" }),
  );
  // Recorded by another bridge process that is still running (same data directory).
  writeRunRecord(dir, { id: "alive", pid: bridgeProcess, start: startTime(bridgeProcess) }, runningBridge, "cli");
  // Ours, to show the reaper did run.
  writeRunRecord(dir, deadBridge, mine, "cli");
  // An unreadable record is dropped.
  writeFileSync(path.join(dir, "999999.json"), "{not json");

  assert.equal(await reapOrphans(dir, 2000), 1);
  assert.ok(await eventually(() => !groupAlive(mine), 3000), "our orphan is ended");
  for (const [what, pid] of [
    ["reused pid", reused],
    ["another boot", otherBoot],
    ["a running bridge's CLI", runningBridge],
  ] as const) {
    assert.ok(groupAlive(pid), `${what}: left alone`);
  }
  assert.ok(existsSync(path.join(dir, `${runningBridge}.json`)), "a running bridge keeps its record");
  assert.deepEqual(readdirSync(dir), [`${runningBridge}.json`], "the other records are removed");
});

test("a fresh owner carries this process's pid and start time", () => {
  const o = newRunOwner();
  assert.equal(o.pid, process.pid);
  assert.equal(o.start, startTime(process.pid));
  assert.notEqual(o.id, newRunOwner().id);
});
