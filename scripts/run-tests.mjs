#!/usr/bin/env node
/**
 * Runs the suite with node's test runner (Node 20 does not expand globs itself), tier by tier:
 *
 * - unit (test/unit): ONE process loads TypeScript once and runs every unit file, each inside a
 *   suite of its own (scripts/unit-tier.mjs), so a file's hooks stay its own; with two cores or
 *   more, two such processes side by side (the files that start a PostgreSQL in one, the rest in
 *   the other), each one's output written whole when it ends.
 * - the rest (test/integration, test/e2e, test/browser): files in parallel, `--jobs` at a time
 *   (default: one more than the cores; `CLAWBRIDGE_TEST_JOBS` sets it too), longest first, each test isolated (its
 *   own ports from the OS, its own HOME and data dir); then the files of SERIAL one at a time.
 *
 *   node scripts/run-tests.mjs                        every tier
 *   node scripts/run-tests.mjs test/unit              one folder (`npm run test:unit`)
 *   node scripts/run-tests.mjs test/x.test.ts …       these files
 *   node scripts/run-tests.mjs --jobs 4 --test-name-pattern=… test/integration
 *
 * Other arguments go to node's test runner. Each tier prints its time, the last line counts all of
 * them ("N passed, N failed"); every tier's output closes with its slowest files and a list of the
 * failed tests.
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const failuresReporter = pathToFileURL(path.join(root, "scripts", "failures-reporter.mjs")).href;
const timingsReporter = pathToFileURL(path.join(root, "scripts", "timings-reporter.mjs")).href;
const unitTier = path.join(root, "scripts", "unit-tier.mjs");

/**
 * Files that cannot share the machine with other test files, each with the reason; they run one at
 * a time after the parallel group.
 */
const SERIAL = new Map([
  // Measures CPU per request against a minimal proxy: another file's load skews the ratio it checks.
  ["test/integration/bench-openai.test.ts", "compares CPU time of two servers"],
  // Asserts that tokens arrive at the model's pace and that a warm turn's first token comes within
  // 2 s: under three busy files on two cores `opencode serve` handed over three deltas at once and
  // took 2.07 s (a CI rehearsal with other test runs on the machine).
  ["test/integration/opencode-warm.test.ts", "measures token pacing and first-token time"],
]);

/**
 * The parallel tier starts the longest files first (so no long file starts last and runs alone):
 * files matching these, in this order, then the rest by name. From the timings reporter's list.
 */
const LONGEST_FIRST = [/^test\/e2e\//, /resume-/, /-warm\.test/, /opencode/, /client-tools-/, /backend-/];
const rank = (f) => {
  const i = LONGEST_FIRST.findIndex((re) => re.test(f));
  return i < 0 ? LONGEST_FIRST.length : i;
};

function find(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    if (name.startsWith(".") || name === "node_modules" || name === "fixtures") continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...find(p));
    else if (name.endsWith(".test.ts")) out.push(p);
  }
  return out;
}

const raw = process.argv.slice(2);
// One more than the cores: the integration files wait on CLIs and sockets part of the time.
let jobs = Number(process.env.CLAWBRIDGE_TEST_JOBS) || availableParallelism() + 1;
const passThrough = [];
const targets = [];
for (let i = 0; i < raw.length; i++) {
  const a = raw[i];
  if (a === "--jobs") jobs = Number(raw[++i]);
  else if (a.startsWith("--jobs=")) jobs = Number(a.slice(7));
  else if (!a.startsWith("-") && existsSync(a)) targets.push(a);
  else passThrough.push(a);
}
if (!Number.isInteger(jobs) || jobs < 1) {
  console.error("run-tests: --jobs takes a whole number of at least 1");
  process.exit(2);
}

const rel = (f) => path.relative(root, path.resolve(f)).split(path.sep).join("/");
const files = [
  ...new Set(
    (targets.length ? targets : ["test"]).flatMap((t) => (statSync(t).isDirectory() ? find(t) : [t])).map(rel),
  ),
].sort();
const unit = files.filter((f) => f.startsWith("test/unit/"));
const rest = files.filter((f) => !f.startsWith("test/unit/"));
const parallel = rest.filter((f) => !SERIAL.has(f)).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
const serial = rest.filter((f) => SERIAL.has(f));

const reporters = [
  "--test-reporter=tap",
  "--test-reporter-destination=stdout",
  `--test-reporter=${timingsReporter}`,
  "--test-reporter-destination=stdout",
  `--test-reporter=${failuresReporter}`,
  "--test-reporter-destination=stdout",
];

const totals = { pass: 0, fail: 0, skipped: 0 };
const children = new Set();

/**
 * Runs one tier, passing its output through and adding its closing counts to the totals. With
 * `buffered` (tiers that run side by side) its output is written whole when it ends.
 */
function tier(name, args, buffered = false) {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "inherit"] });
    children.add(child);
    // The runner's own closing counts ("# pass N" at the start of a line, unindented).
    const counts = {};
    let partial = "";
    const held = [];
    child.stdout.on("data", (chunk) => {
      if (buffered) held.push(chunk);
      else process.stdout.write(chunk);
      const lines = (partial + chunk.toString()).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        const m = /^# (pass|fail|cancelled|skipped) (\d+)$/.exec(line);
        if (m) counts[m[1]] = Number(m[2]);
      }
    });
    child.on("close", (code, signal) => {
      children.delete(child);
      for (const chunk of held) process.stdout.write(chunk);
      totals.pass += counts.pass ?? 0;
      totals.fail += (counts.fail ?? 0) + (counts.cancelled ?? 0);
      totals.skipped += counts.skipped ?? 0;
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      console.log(`# tier ${name}: ${seconds} s (exit ${code ?? signal})`);
      resolve(code === 0 ? 0 : 1);
    });
  });
}

const forward = (sig) => {
  for (const c of children) c.kill(sig);
};
process.on("SIGINT", forward);
process.on("SIGTERM", forward);

const common = ["--import", "tsx", ...reporters];
let status = 0;
// The unit tier in two processes side by side on a machine with two cores or more: the files that
// start a PostgreSQL (testkit/postgres.ts, one server per process) in one, the others in the other.
const usesPostgres = (f) => readFileSync(path.join(root, f), "utf8").includes("testkit/postgres");
const unitShards =
  availableParallelism() > 1 && unit.some(usesPostgres) && !unit.every(usesPostgres)
    ? [unit.filter(usesPostgres), unit.filter((f) => !usesPostgres(f))]
    : [unit];
if (unit.length) {
  const codes = await Promise.all(
    unitShards.map((shard, i) =>
      tier(
        unitShards.length > 1 ? `unit ${i + 1}/${unitShards.length} (${shard.length} files)` : "unit",
        [...common, ...passThrough, unitTier, ...shard],
        unitShards.length > 1,
      ),
    ),
  );
  status |= codes.reduce((a, b) => a | b, 0);
}
if (parallel.length) {
  status |= await tier(`parallel (${parallel.length} files, ${jobs} at a time)`, [
    ...common,
    "--test",
    `--test-concurrency=${jobs}`,
    "--test-timeout=600000",
    ...passThrough,
    ...parallel,
  ]);
}
if (serial.length) {
  status |= await tier(`serial (${serial.length} files)`, [
    ...common,
    "--test",
    "--test-concurrency=1",
    "--test-timeout=600000",
    ...passThrough,
    ...serial,
  ]);
}
console.log(`\n${totals.pass} passed, ${totals.fail} failed, ${totals.skipped} skipped`);
process.exit(status);
