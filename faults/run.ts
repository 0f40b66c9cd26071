/**
 * The fault suite (issue 20): `npm run faults` (= `node scripts/build.mjs && node --import tsx
 * faults/run.ts`). Each part starts the BUILT bridge as its own process with fake CLIs and fake
 * upstreams on 127.0.0.1, abuses it, bounded in count and time, and counts what was lost, leaked or
 * crashed:
 *   fuzz        ≥ 10,000 hostile requests (JSON, nesting, huge strings, invalid UTF-8, HTTP-level abuse, pipelining)
 *   aborts      ≥ 1,000 client aborts at random points, on a CLI backend and on an upstream backend
 *   kill9       kill -9 cycles in resume mode, each with an MCP stdio server mid-call; restart with 24 orphaned process groups
 *   slow        slow-header and slow-body connections, 401 / 413 bodies, the connection cap
 *   starvation  5 aggressive conversations against 20 light ones that honour Retry-After
 *   shutdown    SIGTERM in the middle of turns (finishing, too long, double SIGTERM)
 * The report (markdown: "Done when" with PASS/FAIL, what was sent and lost, further checks, each
 * part's tables) is printed and written to bench/results/<date>-faults.md.
 *
 * Options:
 *   --small          seconds, not minutes (500 fuzzed requests, 50 aborts, 2 kill rounds…): what npm test runs
 *   --no-write       print only
 *   --strict         exit 1 when a "Done when" line FAILs (default: exit 0 unless the harness itself failed)
 *   --seed <n>       seed of the fuzz and of every random choice (default 20)
 *   --part <a[,b]>   run only these parts (repeatable)
 *   --list           list the parts
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { stopAll } from "../bench/procs.js";
import { bridgeEntry, serverKnobs } from "./lib/bridge.js";
import type { Part, PartContext } from "./lib/part.js";
import { killMarked, markedProcesses, processesNaming } from "./lib/procs.js";
import { ROOT, eventually } from "./lib/util.js";
import { abortsPart } from "./parts/aborts.js";
import { fuzzPart } from "./parts/fuzz.js";
import { kill9Part } from "./parts/kill9.js";
import { shutdownPart } from "./parts/shutdown.js";
import { slowPart } from "./parts/slow.js";
import { starvationPart } from "./parts/starvation.js";
import { loadavg, machineLine, report, type Outcome } from "./report.js";

const PARTS: Part[] = [fuzzPart, abortsPart, kill9Part, slowPart, starvationPart, shutdownPart];

interface Args {
  small: boolean;
  write: boolean;
  strict: boolean;
  seed: number;
  parts: string[];
  list: boolean;
}

function parseArgs(argv: string[]): Args {
  const a: Args = { small: false, write: true, strict: false, seed: 20, parts: [], list: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const [flag, inline] = arg.includes("=")
      ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)]
      : [arg, undefined];
    const value = () => inline ?? argv[++i] ?? "";
    switch (flag) {
      case "--small":
        a.small = true;
        break;
      case "--no-write":
        a.write = false;
        break;
      case "--strict":
        a.strict = true;
        break;
      case "--seed": {
        const n = Number(value());
        if (!Number.isInteger(n) || n < 0) throw new Error("--seed needs a non-negative integer");
        a.seed = n;
        break;
      }
      case "--part":
        a.parts.push(...value().split(",").filter(Boolean));
        break;
      case "--list":
        a.list = true;
        break;
      case "--help":
      case "-h":
        process.stdout.write(
          "npm run faults -- [--small] [--no-write] [--strict] [--seed n] [--part name[,name]] [--list]\n",
        );
        process.exit(0);
      // falls through (exit)
      default:
        throw new Error(`unknown option ${arg} (try --help)`);
    }
  }
  return a;
}

let tmpRoot: string | undefined;
let runMark: string | undefined;

async function cleanUp(): Promise<void> {
  await stopAll();
  if (runMark) killMarked(runMark, true);
  if (tmpRoot) rmSync(tmpRoot, { recursive: true, force: true });
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  if (args.list) {
    for (const p of PARTS) process.stdout.write(`${p.name.padEnd(11)} ${p.title}\n`);
    return 0;
  }
  const unknown = args.parts.filter((n) => !PARTS.some((p) => p.name === n));
  if (unknown.length)
    throw new Error(`unknown part ${unknown.join(", ")}; parts: ${PARTS.map((p) => p.name).join(", ")}`);
  const chosen = args.parts.length ? PARTS.filter((p) => args.parts.includes(p.name)) : PARTS;

  const log = (m: string) => process.stderr.write(`[faults] ${m}\n`);
  tmpRoot = mkdtempSync(path.join(tmpdir(), "cb-faults-"));
  runMark = `cbf-${process.pid}-${Date.now().toString(36)}`;
  const knobs = serverKnobs();
  const entry = bridgeEntry();
  const knobsLine = [
    `body / idle / header timeouts: ${knobs.timeouts.length ? knobs.timeouts.map((k) => `\`server.${k.key}\``).join(", ") : "not configurable"}`,
    `connection cap: ${knobs.connectionCap ? `\`server.${knobs.connectionCap}\`` : "not configurable"}`,
    `per-conversation queue cap: ${knobs.perConversationQueue ? `\`server.${knobs.perConversationQueue}\` (default kept)` : "not configurable"}`,
  ].join("; ");
  log(`machine: ${machineLine()}`);
  log(`run ${runMark} in ${tmpRoot}; bridge runs ${entry}; ${knobsLine}`);
  const startedAt = new Date();
  const loadBefore = loadavg();
  const ctx: PartContext = { small: args.small, seed: args.seed, tmpRoot, runMark, knobs, log };
  const outcomes: Outcome[] = [];
  for (const part of chosen) {
    const t0 = Date.now();
    log(`part ${part.name}: ${part.title}`);
    try {
      const result = await part.run(ctx);
      outcomes.push({ part, result, seconds: (Date.now() - t0) / 1000 });
    } catch (err) {
      log(`part ${part.name} failed: ${(err as Error).stack ?? err}`);
      outcomes.push({ part, error: (err as Error).message, seconds: (Date.now() - t0) / 1000 });
      await stopAll();
    }
    // Whatever a part left (it counted it already): gone before the next part starts.
    killMarked(runMark, true);
    log(`part ${part.name} done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  }
  // Anything of this run still alive now (bridges, their orphan watchers, fake CLIs) was left
  // behind by the bridge or the harness: reported, then ended.
  const ours = () => {
    const byPid = new Map([...markedProcesses(runMark!, true), ...processesNaming(tmpRoot!)].map((p) => [p.pid, p]));
    return [...byPid.values()];
  };
  await eventually(() => (ours().length === 0 ? true : undefined), 3000, 100);
  const left = ours();
  for (const p of left) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      /* gone */
    }
  }
  if (left.length) log(`left behind at the end: ${left.map((p) => `${p.pid} ${p.cmd.slice(0, 100)}`).join("; ")}`);
  const extra = process.argv.slice(2);
  const command = `npm run faults${extra.length ? ` -- ${extra.join(" ")}` : ""}`;
  const equivalent = `node scripts/build.mjs && node --import tsx faults/run.ts${extra.length ? " " + extra.join(" ") : ""}`;
  const { markdown, verdicts } = report({
    outcomes,
    startedAt,
    seconds: (Date.now() - startedAt.getTime()) / 1000,
    command,
    equivalent,
    small: args.small,
    seed: args.seed,
    entry,
    knobsLine,
    loadBefore,
    leftBehind: left.map((p) => p.cmd.replace(tmpRoot!, "<tmp>").slice(0, 120)),
  });
  process.stdout.write(`\n${markdown}\n`);
  if (args.write) {
    const dir = path.join(ROOT, "bench", "results");
    mkdirSync(dir, { recursive: true });
    const file = path.join(
      dir,
      `${startedAt.toISOString().slice(0, 10)}-faults${args.small ? "-small" : ""}${args.parts.length ? `-${chosen.map((p) => p.name).join("-")}` : ""}.md`,
    );
    writeFileSync(file, markdown);
    log(`written: ${path.relative(ROOT, file)}`);
  }
  const failed = verdicts.filter((v) => v.pass === false).length;
  log(
    `done when: ${verdicts.filter((v) => v.pass).length} PASS, ${failed} FAIL${verdicts.some((v) => v.pass === undefined) ? `, ${verdicts.filter((v) => v.pass === undefined).length} not run` : ""}`,
  );
  if (outcomes.some((o) => !o.result)) return 2;
  return args.strict && failed ? 1 : 0;
}

const onSignal = () => {
  void cleanUp().finally(() => process.exit(130));
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);

main().then(
  async (code) => {
    await cleanUp();
    process.exit(code);
  },
  async (err) => {
    process.stderr.write(`faults: ${(err as Error).stack ?? err}\n`);
    await cleanUp();
    process.exit(2);
  },
);
