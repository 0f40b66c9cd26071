/**
 * Suite "cli": how long the `clawbridge` commands take, each as a whole process
 * (`node bin/clawbridge.js <args>`), against `node -e 0` (what any Node process costs).
 *
 * Measured in one run, interleaved in rounds (the order rotates each round, so drift of a shared
 * machine falls on all alike), N rounds (15; `--requests n` lowers it): `--help`, `config check`
 * with a config file and with the embedded defaults, `runs list`, `systems list`, `sessions list`,
 * `doctor` (three ways: its own work, with the backend's CLI a stub script that answers
 * `--version` at once; with the real OpenCode CLI of node_modules; and everything with the embedded
 * defaults, which asks every CLI found for its version), `mcp` (spawn → the answer to
 * `initialize`, and to `tools/list`) and `serve` (spawn → its first `/health` answer, port 0; then
 * SIGTERM and reaped). Each command is checked by its output. Every process gets its own fresh
 * HOME and data directory (CLAWBRIDGE_DATA_DIR) under one temp folder, so `runs list` and
 * `sessions list` create their database each time, as on a first run; everything is on
 * 127.0.0.1, every wait is bounded and every process reaped.
 *
 * Where the time goes: the modules each command loads (counted through a load hook,
 * bench/suites/cli/trace-loads.mjs), and what importing one package or module alone costs.
 *
 * Targets: every command's p50 within 300 ms of `node -e 0`'s p50 (the doctor's own work: the
 * stub-CLI row; the other doctor rows wait for real CLIs and are shown for information), `serve`
 * ready within 1 s (p50).
 */
import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { stringify } from "yaml";
import { buildState, entryFile } from "../../scripts/build-state.mjs";
import { startService, type Service } from "../procs.js";
import { ms, percentile, table } from "../stats.js";
import type { BenchContext, BenchSuite, SuiteResult, TargetCheck } from "../suite.js";

const ROUNDS = 15;
const TARGET_OVER_NODE_MS = 300;
const TARGET_SERVE_MS = 1000;
const RUN_TIMEOUT_MS = 60_000;
const IMPORT_ROUNDS = 5;

interface Env {
  root: string;
  tmp: string;
  bin: string;
  /** Config whose one backend is a stub OpenCode CLI (answers --version at once). */
  stubConfig: string;
  /** Config whose one backend is the real OpenCode CLI of node_modules. */
  realConfig: string;
  stubCli: string;
  n: number;
}

/** What one scenario measured in one round: ms per figure (one figure, or two for mcp). */
type Sample = Record<string, number>;

interface Scenario {
  id: string;
  /** Rows it adds: label per figure key. */
  rows: Array<{ key: string; label: string; target: boolean; note?: string }>;
  run(env: Env): Promise<Sample>;
  /** The command as a user types it, for the trace of what it loads (undefined: not traced). */
  trace?: (env: Env) => string[];
}

/** A fresh HOME and data directory for one process, and the environment to run it with. */
function processEnv(env: Env): { dir: string; vars: NodeJS.ProcessEnv } {
  const dir = path.join(env.tmp, `p${env.n++}`);
  mkdirSync(path.join(dir, "home"), { recursive: true });
  mkdirSync(path.join(dir, "data"), { recursive: true });
  const vars: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^(CLAWBRIDGE_|ROUTER_|OPENCODE_BIN$|OPENCLAW_|NODE_OPTIONS$|npm_)/.test(k)) vars[k] = v;
  vars.HOME = path.join(dir, "home");
  vars.CLAWBRIDGE_DATA_DIR = path.join(dir, "data");
  return { dir, vars };
}

/** Run `node <args>` to its end (bounded); ms from spawn to exit, and what it printed. */
function runNode(
  args: string[],
  env: Env,
  extraEnv: NodeJS.ProcessEnv = {},
  cwd?: string,
): Promise<{ ms: number; code: number | null; stdout: string; stderr: string }> {
  const { dir, vars } = processEnv(env);
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, {
      cwd: cwd ?? dir,
      env: { ...vars, ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (c: string) => void (stdout += c));
    child.stderr.setEncoding("utf8").on("data", (c: string) => void (stderr += c));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }, RUN_TIMEOUT_MS);
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      const took = performance.now() - t0;
      if (signal) reject(new Error(`node ${args.join(" ")} ended by ${signal} (timeout ${RUN_TIMEOUT_MS} ms)`));
      else resolve({ ms: took, code, stdout, stderr });
    });
  });
}

/** A scenario that runs `clawbridge <args>` to its end and checks its output. */
function command(
  id: string,
  label: string,
  args: (env: Env) => string[],
  expect: RegExp,
  opts: { target?: boolean; note?: string; codes?: number[] } = {},
): Scenario {
  return {
    id,
    rows: [{ key: id, label, target: opts.target ?? true, ...(opts.note ? { note: opts.note } : {}) }],
    trace: args,
    async run(env) {
      const r = await runNode([env.bin, ...args(env)], env);
      if (!expect.test(r.stdout) || !(opts.codes ?? [0]).includes(r.code ?? -1))
        throw new Error(
          `clawbridge ${args(env).join(" ")}: exit ${r.code}, expected ${expect} in its output\n${r.stdout.slice(-1500)}\n${r.stderr.slice(-1500)}`,
        );
      return { [id]: r.ms };
    },
  };
}

/** `clawbridge mcp`: spawn → the answer to initialize, and to tools/list; then stdin closes and it is reaped. */
async function mcpRound(env: Env): Promise<Sample> {
  const { dir, vars } = processEnv(env);
  const t0 = performance.now();
  const child = spawn(process.execPath, [env.bin, "mcp"], {
    cwd: dir,
    env: vars,
    stdio: ["pipe", "pipe", "pipe"],
    detached: true,
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (c: string) => void (stderr += c));
  const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
  const answers = new Map<number, { at: number; msg: Record<string, unknown> }>();
  let waiting: { id: number; resolve: () => void } | undefined;
  let buf = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    buf += c;
    for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        continue;
      }
      if (typeof msg.id === "number") answers.set(msg.id, { at: performance.now() - t0, msg });
      if (waiting && answers.has(waiting.id)) waiting.resolve();
    }
  });
  const answer = (id: number) =>
    new Promise<{ at: number; msg: Record<string, unknown> }>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`clawbridge mcp: no answer to request ${id} in 30 s. stderr:\n${stderr.slice(-1500)}`)),
        30_000,
      );
      const done = () => {
        clearTimeout(timer);
        waiting = undefined;
        resolve(answers.get(id)!);
      };
      if (answers.has(id)) done();
      else waiting = { id, resolve: done };
    });
  const send = (m: unknown) => child.stdin.write(`${JSON.stringify(m)}\n`);
  try {
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-03-26", capabilities: {}, clientInfo: { name: "bench", version: "1" } },
    });
    const init = await answer(1);
    if (!init.msg.result) throw new Error(`initialize failed: ${JSON.stringify(init.msg)}`);
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    const list = await answer(2);
    const tools = (list.msg.result as { tools?: unknown[] } | undefined)?.tools;
    if (!tools?.length) throw new Error(`tools/list answered no tools: ${JSON.stringify(list.msg).slice(0, 500)}`);
    return { "mcp-initialize": init.at, "mcp-tools": list.at };
  } finally {
    child.stdin.end();
    const killer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }, 5000);
    await exited;
    clearTimeout(killer);
  }
}

/** `clawbridge serve --port 0`: spawn → its first 200 from /health; then SIGTERM, reaped. */
async function serveRound(env: Env): Promise<Sample> {
  const { dir, vars } = processEnv(env);
  const t0 = performance.now();
  let bridge: Service | undefined;
  try {
    bridge = await startService({
      name: "clawbridge serve",
      command: process.execPath,
      args: [env.bin, "serve", "--config", env.stubConfig, "--port", "0"],
      cwd: dir,
      env: vars,
      readyPattern: /listening on (http:\/\/\S+)/,
      timeoutMs: 30_000,
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        const res = await fetch(`${bridge.ready}/health`, { signal: AbortSignal.timeout(5000) });
        await res.text();
        if (res.status === 200) break;
      } catch {
        /* not yet */
      }
      if (Date.now() > deadline) throw new Error(`serve: /health did not answer 200 within 10 s`);
      await new Promise((r) => setTimeout(r, 5));
    }
    return { serve: performance.now() - t0 };
  } finally {
    await bridge?.stop(5000);
  }
}

const SCENARIOS: Scenario[] = [
  {
    id: "node",
    rows: [{ key: "node", label: "`node -e 0`", target: false, note: "the floor: any Node process" }],
    async run(env) {
      return { node: (await runNode(["-e", "0"], env)).ms };
    },
  },
  command("help", "`clawbridge --help`", () => ["--help"], /Usage: clawbridge/),
  command(
    "config-file",
    "`clawbridge config check --config <file>`",
    (e) => ["config", "check", "--config", e.stubConfig],
    /configuration OK/,
  ),
  command(
    "config-defaults",
    "`clawbridge config check` (embedded defaults)",
    () => ["config", "check"],
    /configuration OK \(embedded defaults\)/,
  ),
  command("runs", "`clawbridge runs list`", () => ["runs", "list"], /no runs yet/),
  command("systems", "`clawbridge systems list`", () => ["systems", "list"], /no systems configured/),
  command("sessions", "`clawbridge sessions list`", () => ["sessions", "list"], /no conversations yet/),
  command(
    "doctor-stub",
    "`clawbridge doctor --no-validate --no-cli-scan`, stub CLI",
    (e) => ["doctor", "--config", e.stubConfig, "--no-validate", "--no-cli-scan"],
    /backend oc \(opencode\): usable/,
    { codes: [0, 1], note: "the doctor's own work: the backend's CLI is a script that answers `--version` at once" },
  ),
  command(
    "doctor-opencode",
    "`clawbridge doctor --no-validate --no-cli-scan`, real OpenCode",
    (e) => ["doctor", "--config", e.realConfig, "--no-validate", "--no-cli-scan"],
    /backend oc \(opencode\): usable/,
    {
      target: false,
      codes: [0, 1],
      note: "waits for `opencode --version` (node_modules/.bin/opencode)",
    },
  ),
  command(
    "doctor-full",
    "`clawbridge doctor` (embedded defaults, every check)",
    () => ["doctor"],
    /clawbridge doctor/,
    {
      target: false,
      codes: [0, 1],
      note: "asks every CLI found (node_modules/.bin) for its version, looks for openclaw",
    },
  ),
  {
    id: "mcp",
    rows: [
      { key: "mcp-initialize", label: "`clawbridge mcp`: answer to `initialize`", target: true },
      { key: "mcp-tools", label: "`clawbridge mcp`: answer to `tools/list`", target: true },
    ],
    run: mcpRound,
  },
  {
    id: "serve",
    rows: [{ key: "serve", label: "`clawbridge serve`: first `/health` answer", target: true }],
    run: serveRound,
  },
];

/** Modules and packages imported alone (`node --input-type=module -e "await import(…)"`), for where the time goes. */
const IMPORTS: Array<{ label: string; spec: string; repo?: boolean }> = [
  { label: "commander", spec: "commander" },
  { label: "zod", spec: "zod" },
  { label: "yaml", spec: "yaml" },
  { label: "undici", spec: "undici" },
  { label: "pino", spec: "pino" },
  { label: "fastify", spec: "fastify" },
  { label: "better-sqlite3", spec: "better-sqlite3" },
  { label: "@modelcontextprotocol/sdk (server/mcp.js)", spec: "@modelcontextprotocol/sdk/server/mcp.js" },
  { label: "core/config/schema", spec: "core/config/schema", repo: true },
  { label: "backends/registry (every backend)", spec: "backends/registry", repo: true },
  { label: "core/config/load (loadConfig)", spec: "core/config/load", repo: true },
  { label: "workflows/systems/db", spec: "workflows/systems/db", repo: true },
  { label: "workflows/router/runtime", spec: "workflows/router/runtime", repo: true },
  { label: "workflows/builder/mcp-server", spec: "workflows/builder/mcp-server", repo: true },
  { label: "ops/doctor/doctor", spec: "ops/doctor/doctor", repo: true },
  { label: "request/http/start (the server)", spec: "request/http/start", repo: true },
];

/** Group a loaded module's path: an npm package, the repo's area/room, or node itself. */
function group(line: string, root: string): string {
  const p = line.replace(/^file:\/\//, "");
  if (p.startsWith("node:") || !p.includes("/")) return "node core";
  const nm = p.lastIndexOf("/node_modules/");
  if (nm >= 0) {
    const rest = p.slice(nm + "/node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const rel = path.relative(root, p).split(path.sep);
  if (rel[0] === "dist" || rel[0] === "src") return rel.length > 3 ? `${rel[1]}/${rel[2]}` : rel.slice(1).join("/");
  return rel.join("/");
}

async function traceLoads(env: Env, args: string[]): Promise<{ total: number; groups: Array<[string, number]> }> {
  const file = path.join(env.tmp, `trace-${env.n}.txt`);
  await runNode(
    [
      "--import",
      pathToFileURL(path.join(env.root, "bench", "suites", "cli", "trace-loads.mjs")).href,
      env.bin,
      ...args,
    ],
    env,
    { CLAWBRIDGE_TRACE_LOADS: file },
  );
  const seen = new Set(
    readFileSync(file, "utf8")
      .split("\n")
      .filter((l) => l && !l.startsWith("node:") && l.includes("/")),
  );
  const groups = new Map<string, number>();
  for (const l of seen) {
    const g = group(l, env.root);
    groups.set(g, (groups.get(g) ?? 0) + 1);
  }
  return { total: seen.size, groups: [...groups.entries()].sort((a, b) => b[1] - a[1]) };
}

const suite: BenchSuite = {
  name: "cli",
  description:
    "each clawbridge command as a whole process against node -e 0 (help, config check, lists, doctor, mcp, serve)",
  async run(ctx: BenchContext): Promise<SuiteResult> {
    const rounds = Math.min(ROUNDS, ctx.limits.maxRequests);
    const picked = SCENARIOS.filter((s) => s.id === "node" || !ctx.scenarios?.length || ctx.scenarios.includes(s.id));
    const tmp = mkdtempSync(path.join(tmpdir(), "cb-bench-cli-"));
    try {
      const stubCli = path.join(tmp, "opencode-stub");
      writeFileSync(stubCli, '#!/bin/sh\necho "1.0.0"\n');
      chmodSync(stubCli, 0o755);
      const config = (bin: string) =>
        stringify({
          server: { host: "127.0.0.1", port: 4097 },
          logging: { level: "warn" },
          backends: { oc: { type: "opencode", command: bin } },
          models: [{ id: "a", backend: "oc" }],
        });
      const stubConfig = path.join(tmp, "stub.yaml");
      writeFileSync(stubConfig, config(stubCli));
      const realConfig = path.join(tmp, "real.yaml");
      writeFileSync(realConfig, config(path.join(ctx.root, "node_modules", ".bin", "opencode")));
      const env: Env = {
        root: ctx.root,
        tmp,
        bin: path.join(ctx.root, "bin", "clawbridge.js"),
        stubConfig,
        realConfig,
        stubCli,
        n: 0,
      };
      const entryBefore = entryFile(ctx.root, "ops/commands/main");

      // The check bin/clawbridge.js makes on every start: is dist/ current?
      const checks: number[] = [];
      for (let i = 0; i < 50; i++) {
        const t = performance.now();
        buildState(ctx.root);
        checks.push(performance.now() - t);
      }

      const samples = new Map<string, number[]>();
      for (let r = 0; r < rounds; r++) {
        // Rotate the order each round; `node -e 0` stays in the rotation like the others.
        const order = picked.map((_, i) => picked[(i + r) % picked.length]!);
        for (const sc of order) {
          const s = await sc.run(env);
          for (const [k, v] of Object.entries(s)) samples.set(k, [...(samples.get(k) ?? []), v]);
        }
        ctx.log(`round ${r + 1}/${rounds}`);
      }
      const entryAfter = entryFile(ctx.root, "ops/commands/main");

      // Where the time goes: what each command loads, and what importing one thing alone costs.
      const traced: string[][] = [];
      for (const sc of picked) {
        if (!sc.trace) continue;
        const t = await traceLoads(env, sc.trace(env));
        traced.push([
          sc.rows[0]!.label,
          String(t.total),
          t.groups
            .slice(0, 6)
            .map(([g, n]) => `${g} ${n}`)
            .join(", "),
        ]);
      }
      for (const [label, args] of [
        ["`clawbridge mcp` (to its end, stdin closed)", ["mcp"]],
        ["`clawbridge serve --help`", ["serve", "--help"]],
      ] as const) {
        const t = await traceLoads(env, [...args]);
        traced.push([
          label,
          String(t.total),
          t.groups
            .slice(0, 6)
            .map(([g, n]) => `${g} ${n}`)
            .join(", "),
        ]);
      }
      const fromDist = entryAfter.endsWith(".js");
      const importArgs = (spec: string, repo?: boolean): string[] => {
        if (!repo) return ["--input-type=module", "-e", `await import(${JSON.stringify(spec)})`];
        const file = fromDist ? path.join(ctx.root, "dist", `${spec}.js`) : path.join(ctx.root, "src", `${spec}.ts`);
        return [
          ...(fromDist ? [] : ["--import", "tsx"]),
          "--input-type=module",
          "-e",
          `await import(${JSON.stringify(pathToFileURL(file).href)})`,
        ];
      };
      // Two floors: a bare process for the packages, and the same with tsx for the repo's sources when dist/ is not current.
      const base = "(nothing: `node --input-type=module -e 0`)";
      const tsxBase = "(nothing, through tsx: `node --import tsx --input-type=module -e 0`)";
      const floors = [
        { label: base, args: ["--input-type=module", "-e", "0"] },
        ...(fromDist ? [] : [{ label: tsxBase, args: ["--import", "tsx", "--input-type=module", "-e", "0"] }]),
      ];
      const importSamples = new Map<string, number[]>();
      for (let r = 0; r < IMPORT_ROUNDS; r++) {
        for (const imp of [...floors, ...IMPORTS.map((i) => ({ label: i.label, args: importArgs(i.spec, i.repo) }))]) {
          // From the repository, where the bare names resolve.
          const res = await runNode(imp.args, env, {}, ctx.root);
          if (res.code !== 0) throw new Error(`${imp.label}: exit ${res.code}: ${res.stderr.slice(-800)}`);
          importSamples.set(imp.label, [...(importSamples.get(imp.label) ?? []), res.ms]);
        }
      }
      const floorOf = (label: string) => {
        const repo = IMPORTS.find((i) => i.label === label)?.repo;
        return percentile(importSamples.get(repo && !fromDist ? tsxBase : base)!, 50);
      };
      const importRows = [...importSamples.entries()].map(([label, s]) => [
        label.startsWith("(") ? label : `\`${label}\``,
        ms(percentile(s, 50)),
        label.startsWith("(") ? "–" : `+${ms(percentile(s, 50) - floorOf(label))}`,
      ]);

      const nodeP50 = percentile(samples.get("node") ?? [], 50);
      const rows: string[][] = [];
      const targets: TargetCheck[] = [];
      for (const sc of picked)
        for (const row of sc.rows) {
          const s = samples.get(row.key) ?? [];
          const p50 = percentile(s, 50);
          rows.push([
            row.label,
            ms(p50),
            ms(percentile(s, 90)),
            ms(Math.min(...s)),
            ms(Math.max(...s)),
            row.key === "node" ? "–" : `+${ms(p50 - nodeP50)}`,
            row.note ?? "",
          ]);
          if (!row.target) continue;
          if (row.key === "serve")
            targets.push({
              name: "`serve` ready (spawn → first /health answer)",
              goal: `p50 ≤ ${TARGET_SERVE_MS} ms`,
              measured: `${ms(p50)} ms`,
              pass: p50 <= TARGET_SERVE_MS,
            });
          else
            targets.push({
              name: row.label,
              goal: `p50 ≤ node -e 0 + ${TARGET_OVER_NODE_MS} ms`,
              measured: `+${ms(p50 - nodeP50)} ms (${ms(p50)} ms)`,
              pass: p50 - nodeP50 <= TARGET_OVER_NODE_MS,
            });
        }

      const how = (e: string) =>
        e.endsWith(".ts")
          ? "its TypeScript sources through tsx (dist/ was not current)"
          : "the compiled build in dist/ (current)";
      const markdown = [
        `${rounds} rounds, each command once per round in a rotating order; ms from spawn to exit (for \`mcp\` to each answer, for \`serve\` to the first /health 200). \`bin/clawbridge.js\` ran ${how(entryBefore)}${entryAfter !== entryBefore ? `, then ${how(entryAfter)}: the sources changed during the run` : ""}. Every process had a fresh HOME and CLAWBRIDGE_DATA_DIR (so \`runs list\` and \`sessions list\` created their database, as on a first run).`,
        "",
        table(["command", "p50 ms", "p90 ms", "min", "max", "p50 − node", "note"], rows),
        "",
        `The check \`bin/clawbridge.js\` makes on every start, whether dist/ is current (scripts/build-state.mjs walks src/): p50 ${ms(percentile(checks, 50))} ms, p90 ${ms(percentile(checks, 90))} ms in this process (50 times).`,
        "",
        "### Where the time goes",
        "",
        "Modules each command loads (one traced run through bench/suites/cli/trace-loads.mjs; files, with the biggest groups: an npm package, or area/room of the repo):",
        "",
        table(["command", "modules", "biggest groups"], traced),
        "",
        `Importing one thing alone, ${IMPORT_ROUNDS} rounds (p50 of \`node --input-type=module -e "await import(…)"\` minus the same with nothing, ${fromDist ? "repo modules from dist/" : "repo modules from src/ through tsx, minus tsx with nothing"}; what a module imports is counted with it, so the rows overlap):`,
        "",
        table(["import", "p50 ms", "added to its floor"], importRows),
      ].join("\n");
      return { markdown, targets };
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  },
};

export default suite;
