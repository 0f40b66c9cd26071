/**
 * Benchmark runner: `npm run bench` (all suites) or `npm run bench -- --suite openai`.
 *
 * Suites are the files in bench/suites/ (default export: a `BenchSuite`, see bench/suite.ts).
 * Each suite's report is printed and written to bench/results/<ISO date>-<slug>.md with the
 * machine and the exact command.
 *
 * Options:
 *   --suite <name[,name]>   run only these suites (repeatable)
 *   --list                  list the suites
 *   --requests <n>          measured requests per scenario (default 3000)
 *   --seconds <s>           time limit per scenario (default 10)
 *   --warmup <n>            warm-up requests per scenario (default 200; the openai suite warms
 *                           each path up with 5x that before each scenario)
 *   --scenario <id[,id]>    only these scenarios of a suite (the openai suite: stream-c1, stream-c32,
 *                           json-c1, json-c32, openclaw-c1), e.g. to profile one path
 *   --profile               run the bridge under --cpu-prof and report where its time goes
 *                           (written as <date>-<slug>-profile.md: the profiler slows the bridge)
 *   --no-write              print only
 *   --strict                exit 1 when a target is missed
 */
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { stopAll } from "./procs.js";
import type { BenchContext, BenchSuite, SuiteResult } from "./suite.js";
import { table } from "./stats.js";

const BENCH_DIR = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.dirname(BENCH_DIR);

interface Args {
  suites: string[];
  scenarios: string[];
  list: boolean;
  requests: number;
  seconds: number;
  warmup: number;
  profile: boolean;
  write: boolean;
  strict: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = {
    suites: [],
    scenarios: [],
    list: false,
    requests: 3000,
    seconds: 10,
    warmup: 200,
    profile: false,
    write: true,
    strict: false,
  };
  const num = (flag: string, v: string | undefined): number => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} needs a positive number`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.includes("=")
      ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)]
      : [arg, undefined];
    const value = () => inline ?? argv[++i];
    switch (flag) {
      case "--suite":
        a.suites.push(...(value() ?? "").split(",").filter(Boolean));
        break;
      case "--scenario":
        a.scenarios.push(...(value() ?? "").split(",").filter(Boolean));
        break;
      case "--list":
        a.list = true;
        break;
      case "--requests":
        a.requests = num(flag, value());
        break;
      case "--seconds":
        a.seconds = num(flag, value());
        break;
      case "--warmup":
        a.warmup = num(flag, value());
        break;
      case "--profile":
        a.profile = true;
        break;
      case "--no-write":
        a.write = false;
        break;
      case "--strict":
        a.strict = true;
        break;
      case "--help":
      case "-h":
        process.stdout.write(
          "npm run bench -- [--suite name[,name]] [--scenario id[,id]] [--list] [--requests n] [--seconds s] [--warmup n] [--profile] [--no-write] [--strict]\n",
        );
        process.exit(0);
      // falls through (exit)
      default:
        throw new Error(`unknown option ${arg} (try --help)`);
    }
  }
  return a;
}

/** Every bench/suites/*.ts file's default export, sorted by name. */
async function discoverSuites(): Promise<BenchSuite[]> {
  const dir = path.join(BENCH_DIR, "suites");
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))
    .sort();
  const suites: BenchSuite[] = [];
  for (const f of files) {
    const mod = (await import(pathToFileURL(path.join(dir, f)).href)) as { default?: BenchSuite };
    const s = mod.default;
    if (!s || typeof s.run !== "function" || typeof s.name !== "string")
      throw new Error(`bench/suites/${f} has no default export of a BenchSuite`);
    suites.push(s);
  }
  return suites;
}

export function machineLine(): string {
  const cpus = os.cpus();
  return `${cpus[0]?.model.trim() ?? "unknown CPU"}, ${cpus.length} core${cpus.length === 1 ? "" : "s"}, ${(os.totalmem() / 1024 ** 3).toFixed(1)} GB RAM, Node ${process.version}, ${os.platform()} ${os.release()} ${os.arch()}`;
}

function commandLine(): string {
  const args = process.argv.slice(2);
  return args.length ? `npm run bench -- ${args.join(" ")}` : "npm run bench";
}

const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(" / ");

function report(
  suite: BenchSuite,
  result: SuiteResult,
  startedAt: Date,
  seconds: number,
  loadBefore: string,
  busyBefore: boolean,
): string {
  const cores = os.cpus().length;
  const busyAfter = os.loadavg()[0]! > cores;
  const targets = result.targets.length
    ? table(
        ["target", "goal", "measured", "result"],
        result.targets.map((t) => [t.name, t.goal, t.measured, t.pass ? "PASS" : "**FAIL**"]),
      )
    : "(no targets)";
  return [
    `# Benchmark: ${suite.name} — ${suite.description}`,
    "",
    `- Date: ${startedAt.toISOString()} (suite ran ${seconds.toFixed(0)} s)`,
    `- Machine: ${machineLine()}`,
    `- Command: \`${commandLine()}\` (= \`node scripts/build.mjs && node --import tsx bench/run.ts${process.argv.length > 2 ? " " + process.argv.slice(2).join(" ") : ""}\`)`,
    cores <= 2
      ? `- Note: only ${cores} core${cores === 1 ? "" : "s"}: the load generator, the bridge and the fake upstream are separate processes that compete for them, so absolute numbers are low and noisy; compare the direct and bridge rows of the same run.`
      : `- Note: the load generator, the bridge and the fake upstream run as separate processes on ${cores} cores.`,
    `- Load average (1 / 5 / 15 min) before: ${loadBefore}; after: ${loadavg()}.${busyBefore || busyAfter ? ` **Other processes were using the machine (load above ${cores}): absolute numbers are pessimistic and noisy; direct and bridge alternate in rounds so their ratio stays comparable.**` : ""}`,
    "",
    "## Targets",
    "",
    targets,
    "",
    result.markdown,
    "",
  ].join("\n");
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const all = await discoverSuites();
  if (args.list) {
    for (const s of all) process.stdout.write(`${s.name.padEnd(12)} ${s.description}\n`);
    return 0;
  }
  const unknown = args.suites.filter((n) => !all.some((s) => s.name === n));
  if (unknown.length)
    throw new Error(`unknown suite ${unknown.join(", ")}; available: ${all.map((s) => s.name).join(", ")}`);
  const chosen = args.suites.length ? all.filter((s) => args.suites.includes(s.name)) : all;

  const resultsDir = path.join(BENCH_DIR, "results");
  const ctx: BenchContext = {
    root: ROOT,
    resultsDir,
    limits: { warmup: args.warmup, maxRequests: args.requests, maxSeconds: args.seconds },
    profile: args.profile,
    ...(args.scenarios.length ? { scenarios: args.scenarios } : {}),
    log: (m) => process.stderr.write(`[bench] ${m}\n`),
  };
  ctx.log(`machine: ${machineLine()}`);
  let missed = 0;
  let crashed = 0;
  for (const suite of chosen) {
    const startedAt = new Date();
    const loadBefore = loadavg();
    const busyBefore = os.loadavg()[0]! > os.cpus().length;
    ctx.log(`suite ${suite.name}: ${suite.description}`);
    let result: SuiteResult;
    try {
      result = await suite.run(ctx);
    } catch (err) {
      crashed++;
      ctx.log(`suite ${suite.name} failed: ${(err as Error).stack ?? err}`);
      await stopAll();
      continue;
    }
    const md = report(suite, result, startedAt, (Date.now() - startedAt.getTime()) / 1000, loadBefore, busyBefore);
    process.stdout.write(`\n${md}\n`);
    if (args.write) {
      mkdirSync(resultsDir, { recursive: true });
      const file = path.join(
        resultsDir,
        `${startedAt.toISOString().slice(0, 10)}-${suite.resultSlug ?? suite.name}${args.profile ? "-profile" : ""}.md`,
      );
      writeFileSync(file, md);
      ctx.log(`written: ${path.relative(ROOT, file)}`);
    }
    missed += result.targets.filter((t) => !t.pass).length;
  }
  if (crashed) return 2;
  return args.strict && missed ? 1 : 0;
}

const onSignal = () => {
  void stopAll().finally(() => process.exit(130));
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);

main().then(
  async (code) => {
    await stopAll();
    process.exit(code);
  },
  async (err) => {
    process.stderr.write(`bench: ${(err as Error).message}\n`);
    await stopAll();
    process.exit(2);
  },
);
