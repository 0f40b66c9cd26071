/**
 * `npm run bench -- --suite openai` still works: the runner is started as a user starts it (tiny
 * limits, `--no-write`), and its printed report must hold every table with real figures. The
 * benchmark's figures themselves are not judged here (targets live in the benchmark, not in tests);
 * what is checked is that every scenario ran through every path without an error, that nothing was
 * written, and that the fake upstream, the bridge and the minimal proxies were all reaped.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { before, describe, test } from "node:test";

const REPO = path.resolve(import.meta.dirname, "../..");
const RESULTS = path.join(REPO, "bench", "results");
const TIME_LIMIT_MS = 120_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the bench runner in its own process group; the whole group is killed at the time limit. */
function runBench(args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(REPO, "bench", "run.ts"), ...args], {
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
      reject(new Error(`bench did not finish within ${TIME_LIMIT_MS} ms:\n${stderr}`));
    }, TIME_LIMIT_MS);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
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
      lines[i]!.split("|")
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

const num = (cell: string) => Number(cell.replace(/,/g, ""));

/** Command lines of the running processes that are one of the benchmark's own programs. */
function benchProcesses(): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
    } catch {
      continue;
    }
    if (
      ["fake-upstream.ts", "minimal-proxy.mjs", "minimal-stream-proxy.mjs"].some((f) =>
        cmd.includes(path.join(REPO, "bench", f)),
      )
    )
      found.push(`${pid}: ${cmd}`);
    else if (cmd.includes(path.join(REPO, "bin", "clawbridge.js")) && cmd.includes("cb-bench-"))
      found.push(`${pid}: ${cmd}`);
  }
  return found;
}

describe("npm run bench -- --suite openai (smoke run)", () => {
  let run: Run;
  let resultsBefore: string[];

  before(async () => {
    resultsBefore = readdirSync(RESULTS).sort();
    run = await runBench(["--suite", "openai", "--warmup", "20", "--requests", "40", "--seconds", "3", "--no-write"]);
  });

  test("exits 0 and prints the machine and the suite", () => {
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /\[bench\] machine: .+ cores?, .+ RAM, Node v\d+/);
    assert.match(run.stdout, /^# Benchmark: openai/m);
  });

  test("the seven targets are stated, each with a figure and PASS or FAIL", () => {
    const rows = tableRows(run.stdout, "target");
    assert.deepEqual(
      rows.map((r) => r[0]!.split(",")[0]),
      [
        "added time to first byte",
        "added time to first CONTENT delta",
        "added time to the full response",
        "non-streaming c=32 throughput",
        "bridge CPU / req as a multiple of the minimal streaming proxy's (streaming",
        "bridge CPU / req as a multiple of the minimal streaming proxy's (streaming",
        "bridge CPU / req as a multiple of the minimal proxy's (non-streaming",
      ],
    );
    for (const [name, goal, measured, result] of rows as [string, string, string, string][]) {
      assert.match(goal!, /^(< 1 ms|≥ 50%|≤ 1\.5×)$/, name);
      const figure = goal!.endsWith("ms")
        ? /^[+-]\d+\.\d+ ms$/
        : goal!.endsWith("%")
          ? /^\d+% \([\d,]+ vs [\d,]+ req\/s\); the minimal Node\.js proxy: \d+%$/
          : /^\d+\.\d+× \(\d+\.\d+ vs \d+\.\d+ ms\)$/;
      assert.match(measured!, figure, name);
      assert.match(result!, /^(PASS|\*\*FAIL\*\*)$/, name);
    }
  });

  test("every scenario ran direct and through the bridge, every request answered without an error", () => {
    const rows = tableRows(run.stdout, "scenario | path");
    assert.equal(rows.length, 10, "5 scenarios × 2 paths");
    let scenario = "";
    for (const [i, [name, pathName, requests, errors, rps, , , , cpu]] of rows.entries()) {
      scenario = name || scenario;
      const c32 = scenario.includes("c=32");
      assert.equal(pathName, i % 2 === 0 ? "direct" : "bridge", `row ${i}`);
      assert.equal(errors, "0", `${scenario} ${pathName}`);
      // 40 requests (400 at c=32) in 3 rounds, rounded up per round; the time limit may cut a slow run short.
      assert.ok(
        num(requests!) > 0 && num(requests!) <= (c32 ? 402 : 42),
        `${scenario} ${pathName}: ${requests} requests`,
      );
      assert.ok(num(rps!) > 0, `${scenario} ${pathName}: ${rps} req/s`);
      if (pathName === "bridge") assert.match(cpu!, /^\d+\.\d+ ms \(\d+% system\)$/, `${scenario}: bridge CPU ${cpu}`);
    }
  });

  test("the minimal proxy was measured beside direct and bridge", () => {
    const rows = tableRows(run.stdout, "path | req/s");
    assert.deepEqual(
      rows.map((r) => r[0]),
      ["direct", "minimal proxy", "bridge"],
    );
    for (const r of rows) assert.ok(num(r[1]!) > 0, `${r[0]}: ${r[1]} req/s`);
  });

  test("the bridge's CPU per request is set against the minimal proxies', measured in the same run", () => {
    const rows = tableRows(run.stdout, "scenario | minimal proxy");
    assert.deepEqual(
      rows.map((r) => [r[0], r[1]]),
      [
        ["streaming, c=1", "bench/minimal-stream-proxy.mjs"],
        ["streaming, c=32", "bench/minimal-stream-proxy.mjs"],
        ["non-streaming, c=32", "bench/minimal-proxy.mjs"],
      ],
    );
    for (const [scenario, , proxyCpu, bridgeCpu, multiple, rates] of rows as string[][]) {
      assert.match(proxyCpu!, /^\d+\.\d+ ms \(\d+% system\)$/, scenario);
      assert.match(bridgeCpu!, /^\d+\.\d+ ms \(\d+% system\)$/, scenario);
      assert.match(multiple!, /^\d+\.\d+×$/, scenario);
      const [proxy, bridge, direct] = rates!.split(" / ").map(num);
      assert.ok(proxy! > 0 && bridge! > 0 && direct! > 0, `${scenario}: ${rates}`);
    }
  });

  test("the bridge's memory is reported at three moments", () => {
    const rows = tableRows(run.stdout, "bridge process");
    assert.equal(rows.length, 3);
    for (const [when, rss, peak] of rows) {
      assert.ok(
        Number.parseFloat(rss!) > 10 && Number.parseFloat(peak!) >= Number.parseFloat(rss!),
        `${when}: ${rss} / ${peak}`,
      );
    }
  });

  test("--no-write writes nothing, and every process the bench started is gone", () => {
    assert.deepEqual(readdirSync(RESULTS).sort(), resultsBefore);
    assert.deepEqual(benchProcesses(), []);
  });
});
