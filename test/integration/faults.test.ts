/**
 * The fault suite's small run inside `npm test` (issue 20): `faults/run.ts --small --no-write` is
 * started as a user starts it (a child process in its own process group), after the build
 * `npm run faults` also runs first (a no-op when dist/ is current), so that the BUILT bridge is
 * abused as the full suite does it. Every "Done when" line of its report must say PASS; nothing may
 * be written, and nothing it started may be left: no bridge, no fake CLI process (they carry the
 * run's FAULTS_MARK in their environment), no temporary folder.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { before, describe, test } from "node:test";

const REPO = path.resolve(import.meta.dirname, "../..");
const RESULTS = path.join(REPO, "bench", "results");
const TIME_LIMIT_MS = 240_000;

const DONE_WHEN = [
  "0 crashes",
  "0 5xx for client errors",
  "0 non-OpenAI-shaped error bodies",
  "0 orphans, including after kill -9, within a few seconds and without a restart",
  "0 lost bindings",
  "every polite conversation served (honouring Retry-After) in the starvation scenario",
  "restart under 3 s with 24 orphaned groups",
  "shutdown with an idle keep-alive client under 1 s after the last turn ends",
];
const PARTS = ["fuzz", "aborts", "kill9", "slow", "starvation", "shutdown"];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs the fault suite in its own process group; the whole group is killed at the time limit. */
function runFaults(args: string[]): Promise<Run> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(REPO, "faults", "run.ts"), ...args], {
      cwd: REPO,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* already gone */
      }
      reject(new Error(`the fault suite did not finish within ${TIME_LIMIT_MS} ms:\n${stderr}`));
    }, TIME_LIMIT_MS);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - t0 });
    });
  });
}

/** The rows of the markdown table whose header row starts with `| <first> |`. */
function tableRows(markdown: string, first: string): string[][] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((l) => l.startsWith(`| ${first} |`));
  assert.ok(start >= 0, `no table headed "${first}" in the report`);
  const rows: string[][] = [];
  for (let i = start + 2; i < lines.length && lines[i]!.startsWith("|"); i++) {
    rows.push(
      lines[i]!.split(/(?<!\\)\|/)
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

/** The fault suite's result files, with their modification times (other suites may write meanwhile). */
function faultsResults(): string[] {
  return readdirSync(RESULTS)
    .filter((f) => f.includes("-faults"))
    .sort()
    .map((f) => `${f} ${statSync(path.join(RESULTS, f)).mtimeMs}`);
}

/** Live processes whose environment holds FAULTS_MARK=<mark…>, or whose command line names `dir`. */
function leftovers(mark: string, dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) continue;
      const env = readFileSync(`/proc/${pid}/environ`, "utf8");
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
      if (env.split("\0").some((v) => v.startsWith(`FAULTS_MARK=${mark}`)) || cmd.includes(dir))
        found.push(`${pid}: ${cmd.slice(0, 160)}`);
    } catch {
      /* gone, or not ours to read */
    }
  }
  return found;
}

describe("npm run faults -- --small --no-write (issue 20's fault suite, small)", () => {
  let run: Run;
  let resultsBefore: string[];

  before(async () => {
    // `npm run faults` builds first: the suite abuses the compiled bridge (a no-op when dist/ is current).
    spawnSync(process.execPath, [path.join(REPO, "scripts", "build.mjs")], {
      cwd: REPO,
      stdio: "ignore",
      timeout: 180_000,
    });
    resultsBefore = faultsResults();
    run = await runFaults(["--small", "--no-write"]);
  });

  test("it ran every part and exited 0", () => {
    assert.equal(run.code, 0, run.stderr.slice(-4000));
    assert.match(run.stderr, /\[faults\] machine: .+ cores?, .+ RAM, Node v\d+/);
    assert.match(run.stdout, /^# Fault suite/m);
    const parts = tableRows(run.stdout, "part").map((r) => r[0]);
    assert.deepEqual(parts, PARTS);
    for (const p of PARTS) assert.match(run.stderr, new RegExp(`\\[faults\\] part ${p} done in`), p);
    process.stderr.write(`# fault suite (--small) took ${(run.ms / 1000).toFixed(1)} s\n`);
  });

  test('every "Done when" line of the issue is PASS', () => {
    const rows = tableRows(run.stdout, "line");
    assert.deepEqual(
      rows.map((r) => r[0]),
      DONE_WHEN,
    );
    const failed = rows
      .filter((r) => r[2] !== "PASS")
      .map(([line, measured, result]) => `${line}: ${result} — ${measured}`);
    assert.deepEqual(failed, [], `not PASS:\n${failed.join("\n")}`);
  });

  test("--no-write writes nothing, and nothing the suite started is left", () => {
    assert.deepEqual(faultsResults(), resultsBefore);
    const m = /\[faults\] run (\S+) in (\S+);/.exec(run.stderr);
    assert.ok(m, "the run names its mark and its temporary folder");
    const [, mark, dir] = m;
    assert.deepEqual(leftovers(mark!, dir!), []);
    assert.equal(existsSync(dir!), false, `${dir} was not removed`);
  });
});
