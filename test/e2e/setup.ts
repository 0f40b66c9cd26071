/**
 * Installs the REAL OpenClaw for the end-to-end tests, one folder per generation users run today,
 * each with the Node it needs (npm package `node`), in a cache OUTSIDE the clone keyed on the
 * generation, `~/.cache/clawbridge-e2e/<gen>/` (or `$CLAWBRIDGE_E2E_CACHE/<gen>/`), so a second
 * clone or CI run on the same machine reuses the 1.1 GB; a fresh machine installs it:
 *
 *   2026.5  openclaw@~2026.5.0 (latest 2026.5.x) + node@22, npm override linkedom 0.18.14
 *   2026.9  openclaw@~2026.9.0 (latest 2026.9.x) + node@24
 *
 * Idempotent: an install that is present (install.json + files, made for the generation's current
 * npm range) is reused without touching the registry. `--update` re-resolves the latest version of
 * each generation. An install is made in a folder of its own and renamed into place when complete,
 * so test files running in parallel never see half an install (two may both install; one wins).
 *
 *   node --import tsx test/e2e/setup.ts [--update] [--gen 2026.5|2026.9]
 *
 * Two npm steps per generation: first `node@<major>`, then openclaw with that node first on PATH
 * (openclaw's preinstall refuses an older Node, and npm runs it with the `node` on PATH). npm runs
 * with a private HOME (openclaw's postinstall writes into $HOME/.openclaw) but the user's npm cache
 * and npmrc (registry settings).
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const execFileP = promisify(execFile);

export const E2E_ROOT = process.env.CLAWBRIDGE_E2E_CACHE || path.join(homedir(), ".cache", "clawbridge-e2e");

export type GenerationId = "2026.5" | "2026.9";

export interface Generation {
  gen: GenerationId;
  /** npm range for openclaw: the latest release of the generation. */
  openclaw: string;
  /** npm range for the `node` package (the Node this generation needs). */
  node: string;
  /** npm overrides for the install. */
  overrides?: Record<string, string>;
}

export const GENERATIONS: Generation[] = [
  { gen: "2026.5", openclaw: "~2026.5.0", node: "22", overrides: { linkedom: "0.18.14" } },
  { gen: "2026.9", openclaw: "~2026.9.0", node: "24" },
];

export interface OpenClawInstall {
  gen: GenerationId;
  dir: string;
  /** The Node binary this generation runs on. */
  node: string;
  /** openclaw's entry script (run as `<node> <openclawMjs> ...`). */
  openclawMjs: string;
  openclawVersion: string;
  nodeVersion: string;
  installSeconds: number;
  bytes: number;
}

interface Marker {
  openclawVersion: string;
  nodeVersion: string;
  range: string;
  installSeconds: number;
  bytes: number;
  installedAt: string;
}

const paths = (gen: GenerationId, dir = path.join(E2E_ROOT, gen)) => {
  return {
    dir,
    home: path.join(dir, "home"),
    marker: path.join(dir, "install.json"),
    node: path.join(dir, "node_modules", "node", "bin", "node"),
    nodeBinDir: path.join(dir, "node_modules", ".bin"),
    openclawMjs: path.join(dir, "node_modules", "openclaw", "openclaw.mjs"),
  };
};

function readMarker(file: string): Marker | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Marker;
  } catch {
    return undefined;
  }
}

/** The install of `gen` if it is complete; nothing is downloaded. */
export function findOpenClaw(gen: GenerationId): OpenClawInstall | undefined {
  const p = paths(gen);
  const m = readMarker(p.marker);
  if (!m || !existsSync(p.node) || !existsSync(p.openclawMjs)) return undefined;
  // Made for another npm range (GENERATIONS changed): not this generation's install any more.
  const range = GENERATIONS.find((g) => g.gen === gen)?.openclaw;
  if (range && m.range !== range) return undefined;
  return {
    gen,
    dir: p.dir,
    node: p.node,
    openclawMjs: p.openclawMjs,
    openclawVersion: m.openclawVersion,
    nodeVersion: m.nodeVersion,
    installSeconds: m.installSeconds,
    bytes: m.bytes,
  };
}

/** The user's npm settings, which a private HOME would hide. */
async function npmUserSettings(): Promise<{ cache?: string; userconfig?: string }> {
  const get = async (key: string) => {
    try {
      const { stdout } = await execFileP("npm", ["config", "get", key], { timeout: 60_000 });
      const v = stdout.trim();
      return v && v !== "undefined" && v !== "null" ? v : undefined;
    } catch {
      return undefined;
    }
  };
  return { cache: await get("cache"), userconfig: await get("userconfig") };
}

async function npmInstall(dir: string, env: NodeJS.ProcessEnv, log: (s: string) => void): Promise<void> {
  try {
    await execFileP("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd: dir,
      env,
      timeout: 15 * 60_000,
      maxBuffer: 64 * 1024 * 1024,
    });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    const tail = `${e.stdout ?? ""}\n${e.stderr ?? ""}`.trim().split("\n").slice(-30).join("\n");
    log(tail);
    throw new Error(`npm install in ${dir} failed: ${e.message.split("\n")[0]}\n${tail}`);
  }
}

async function diskBytes(dir: string): Promise<number> {
  try {
    const { stdout } = await execFileP("du", ["-sb", dir], { timeout: 120_000 });
    return Number(stdout.split(/\s/)[0]) || 0;
  } catch {
    return 0;
  }
}

/**
 * The install of `g`, made if it is missing (or `update`). Throws with npm's output when the
 * registry cannot be reached or refuses.
 */
export async function ensureOpenClaw(
  g: Generation,
  opts: { update?: boolean; log?: (s: string) => void } = {},
): Promise<OpenClawInstall> {
  const log = opts.log ?? ((s: string) => process.stderr.write(`${s}\n`));
  if (!opts.update) {
    const found = findOpenClaw(g.gen);
    if (found) return found;
  }
  const final = paths(g.gen);
  // Installed in a folder of its own, renamed into place once complete.
  const p = paths(g.gen, `${final.dir}.partial-${process.pid}`);
  const started = Date.now();
  log(`[e2e setup] installing openclaw@${g.openclaw} with node@${g.node} into ${final.dir}`);
  rmSync(p.dir, { recursive: true, force: true });
  mkdirSync(p.home, { recursive: true });
  const npm = await npmUserSettings();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: p.home,
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
    ...(npm.cache ? { npm_config_cache: npm.cache } : {}),
    ...(npm.userconfig && existsSync(npm.userconfig) ? { npm_config_userconfig: npm.userconfig } : {}),
  };
  const pkg = (deps: Record<string, string>) => ({
    name: `clawbridge-e2e-openclaw-${g.gen.replace(".", "-")}`,
    private: true,
    description: "Real OpenClaw for clawbridge's end-to-end tests (test/e2e/setup.ts)",
    dependencies: deps,
    ...(g.overrides ? { overrides: g.overrides } : {}),
  });
  // 1. The Node this generation needs.
  writeFileSync(path.join(p.dir, "package.json"), JSON.stringify(pkg({ node: g.node }), null, 2) + "\n");
  await npmInstall(p.dir, env, log);
  if (!existsSync(p.node)) throw new Error(`node@${g.node} installed, but ${p.node} is missing`);
  // 2. OpenClaw, with that Node first on PATH (its install scripts check the version).
  writeFileSync(
    path.join(p.dir, "package.json"),
    JSON.stringify(pkg({ node: g.node, openclaw: g.openclaw }), null, 2) + "\n",
  );
  await npmInstall(p.dir, { ...env, PATH: `${p.nodeBinDir}${path.delimiter}${process.env.PATH ?? ""}` }, log);

  const { stdout: nodeV } = await execFileP(p.node, ["--version"], { timeout: 60_000 });
  const { stdout: ocV } = await execFileP(p.node, [p.openclawMjs, "--version"], {
    timeout: 120_000,
    env: {
      PATH: `${path.dirname(p.node)}${path.delimiter}${process.env.PATH ?? ""}`,
      HOME: p.home,
      OPENCLAW_NO_RESPAWN: "1",
      NO_COLOR: "1",
    },
  });
  const version = /(\d{4}\.\d+\.\d+[\w.-]*)/.exec(ocV)?.[1];
  if (!version) throw new Error(`openclaw --version printed no version: ${ocV.slice(0, 200)}`);
  const marker: Marker = {
    openclawVersion: version,
    nodeVersion: nodeV.trim(),
    range: g.openclaw,
    installSeconds: Math.round((Date.now() - started) / 1000),
    bytes: await diskBytes(p.dir),
    installedAt: new Date().toISOString(),
  };
  writeFileSync(p.marker, JSON.stringify(marker, null, 2) + "\n");
  const concurrent = opts.update ? undefined : findOpenClaw(g.gen);
  if (concurrent) {
    // Another process finished the same install first: keep its folder (tests may be using it).
    rmSync(p.dir, { recursive: true, force: true });
    return concurrent;
  }
  const old = `${final.dir}.old-${process.pid}`;
  if (existsSync(final.dir)) renameSync(final.dir, old);
  renameSync(p.dir, final.dir);
  rmSync(old, { recursive: true, force: true });
  const found = findOpenClaw(g.gen);
  if (!found) throw new Error(`install of ${g.gen} finished but is incomplete`);
  return found;
}

function mb(bytes: number): string {
  return `${Math.round(bytes / 1024 / 1024)} MB`;
}

async function main(argv: string[]): Promise<number> {
  const update = argv.includes("--update");
  const gi = argv.indexOf("--gen");
  const only = gi >= 0 ? argv[gi + 1] : undefined;
  const gens = GENERATIONS.filter((g) => !only || g.gen === only);
  if (!gens.length) {
    process.stderr.write(`unknown --gen ${only}; known: ${GENERATIONS.map((g) => g.gen).join(", ")}\n`);
    return 2;
  }
  let failed = 0;
  const t0 = Date.now();
  for (const g of gens) {
    const t = Date.now();
    try {
      const inst = await ensureOpenClaw(g, { update });
      const took = Math.round((Date.now() - t) / 1000);
      process.stdout.write(
        `OpenClaw ${inst.openclawVersion} on Node ${inst.nodeVersion}: ${inst.dir} (${mb(inst.bytes)}; installed in ${inst.installSeconds} s${took > 1 ? "" : ", already present"})\n`,
      );
    } catch (err) {
      failed++;
      process.stderr.write(`OpenClaw ${g.gen}: install FAILED: ${(err as Error).message}\n`);
    }
  }
  process.stdout.write(
    `e2e setup done in ${Math.round((Date.now() - t0) / 1000)} s${failed ? `, ${failed} failed` : ""}\n`,
  );
  return failed ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      process.stderr.write(`${(err as Error).stack ?? err}\n`);
      process.exit(1);
    },
  );
}
