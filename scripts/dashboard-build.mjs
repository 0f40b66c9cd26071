#!/usr/bin/env node
/**
 * The dashboard's build (packages/dashboard → packages/dashboard/dist, served at /dashboard by
 * src/request/http/dashboard-route.ts). Run by scripts/build.mjs — so by `npm ci` / `npm install`
 * (`prepare`), `npm start` (`prestart`) and `npm run build` — when its sources changed since the
 * last build (stamp `packages/dashboard/dist/.build-stamp`, like the TypeScript build's), and by
 * itself with `--force`. It type-checks the sources (tsc), then bundles them with Vite.
 *
 * Without Vite installed (a production-only install: the dashboard's packages are dev
 * dependencies) nothing is built and /dashboard answers 503.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const DASHBOARD = path.join("packages", "dashboard");
export const DASHBOARD_STAMP = path.join(DASHBOARD, "dist", ".build-stamp");
/** What the build reads besides src/ (its type check also reads the shapes the bridge sends, src/wire). */
const INPUTS = ["index.html", "vite.config.ts", "tsconfig.json", "package.json", "public", "../../src/wire"];

function newestMtime(p) {
  const st = statSync(p);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const entry of readdirSync(p, { withFileTypes: true })) {
    if (entry.isDirectory() || entry.isFile()) newest = Math.max(newest, newestMtime(path.join(p, entry.name)));
  }
  return newest;
}

/** `{ present, fresh, reason }` of the dashboard in the package at `root`. */
export function dashboardState(root) {
  const dir = path.join(root, DASHBOARD);
  if (!existsSync(path.join(dir, "package.json")))
    return { present: false, fresh: true, reason: "no dashboard package" };
  let stamp;
  try {
    stamp = statSync(path.join(root, DASHBOARD_STAMP)).mtimeMs;
  } catch {
    return { present: true, fresh: false, reason: "no build yet" };
  }
  let newest = newestMtime(path.join(dir, "src"));
  for (const f of INPUTS) {
    try {
      newest = Math.max(newest, newestMtime(path.join(dir, f)));
    } catch {
      // an absent input cannot be newer
    }
  }
  return newest > stamp
    ? { present: true, fresh: false, reason: "sources changed since the last build" }
    : { present: true, fresh: true, reason: "current" };
}

/** A package's bin script, resolved from the dashboard's folder (workspace packages are hoisted to the root). */
function binOf(dir, pkg, name) {
  const require = createRequire(path.join(dir, "package.json"));
  const manifestPath = require.resolve(`${pkg}/package.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  const bin = typeof manifest.bin === "string" ? manifest.bin : manifest.bin?.[name];
  return path.join(path.dirname(manifestPath), bin);
}

/**
 * Build the dashboard when it is stale (or `force`). Returns `{ ok, built, message }`: ok is false
 * only when a build ran and failed; a missing Vite is `ok` (nothing to build with).
 */
export function buildDashboard(root, { force = false } = {}) {
  const state = dashboardState(root);
  if (!state.present) return { ok: true, built: false, message: state.reason };
  if (state.fresh && !force) return { ok: true, built: false, message: "current" };
  const dir = path.join(root, DASHBOARD);
  let vite, tsc;
  try {
    vite = binOf(dir, "vite", "vite");
    tsc = binOf(dir, "typescript", "tsc");
  } catch {
    return {
      ok: true,
      built: false,
      message: "Vite is not installed (npm ci installs it); /dashboard answers 503 until the dashboard is built.",
    };
  }
  rmSync(path.join(root, DASHBOARD_STAMP), { force: true });
  const started = Date.now();
  const check = spawnSync(process.execPath, [tsc, "-p", path.join(dir, "tsconfig.json"), "--noEmit"], {
    cwd: dir,
    stdio: "inherit",
  });
  if (check.status !== 0)
    return {
      ok: false,
      built: false,
      message: `the dashboard's type check failed (exit ${check.status ?? check.signal})`,
    };
  const r = spawnSync(process.execPath, [vite, "build", "--logLevel", "warn"], { cwd: dir, stdio: "inherit" });
  if (r.status !== 0 || !existsSync(path.join(dir, "dist", "index.html")))
    return { ok: false, built: false, message: `vite build failed (exit ${r.status ?? r.signal})` };
  writeFileSync(path.join(root, DASHBOARD_STAMP), `${new Date().toISOString()}\n`);
  return {
    ok: true,
    built: true,
    message: `packages/dashboard built into packages/dashboard/dist in ${((Date.now() - started) / 1000).toFixed(1)} s (${state.reason})`,
  };
}

// Run by itself (`npm run build -w packages/dashboard`): always build, fail loudly.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
  const r = buildDashboard(root, { force: process.argv.includes("--force") });
  console.error(`clawbridge dashboard: ${r.message}`);
  if (!r.ok) process.exit(1);
}
