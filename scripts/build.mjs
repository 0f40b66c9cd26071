#!/usr/bin/env node
/**
 * `npm run build` (also run by `npm ci` / `npm install` as `prepare`, and before `npm start`):
 * compile src/ to dist/ with tsc when the sources changed since the last build, then stamp it; the
 * same for the dashboard (packages/dashboard → packages/dashboard/dist, scripts/dashboard-build.mjs).
 * `--force` rebuilds anyway. Without TypeScript installed (a production-only install) nothing is
 * built and the bridge runs its sources through tsx.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildState, STAMP, staleOutputs } from "./build-state.mjs";
import { buildDashboard } from "./dashboard-build.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const force = process.argv.includes("--force");
// The dashboard (packages/dashboard, Vite) when its sources changed (scripts/dashboard-build.mjs). A
// failed dashboard build fails `npm run build`; under `npm ci` and `npm start` it only warns: the
// bridge runs without it (/dashboard answers 503 until a build succeeds).
const dashboard = buildDashboard(root, { force });
if (dashboard.built || !dashboard.ok || dashboard.message.startsWith("Vite"))
  console.error(`clawbridge build: ${dashboard.ok ? "" : "the dashboard was not built: "}${dashboard.message}`);
if (!dashboard.ok && process.env.npm_lifecycle_event === "build") process.exit(1);
const state = buildState(root);
if (state.fresh && !force) process.exit(0);

let tsc;
try {
  tsc = createRequire(path.join(root, "package.json")).resolve("typescript/bin/tsc");
} catch {
  console.error("clawbridge build: TypeScript is not installed; the bridge will run its sources through tsx.");
  process.exit(0);
}
const stampFile = path.join(root, STAMP);
rmSync(stampFile, { force: true });
const started = Date.now();
const r = spawnSync(process.execPath, [tsc, "-p", path.join(root, "tsconfig.build.json")], {
  cwd: root,
  stdio: "inherit",
});
if (r.status !== 0) {
  console.error(
    `clawbridge build: tsc failed (exit ${r.status ?? r.signal}); dist/ is not used until a build succeeds.`,
  );
  process.exit(1);
}
// tsc leaves the output of a deleted source behind: remove it (and the folders it empties).
for (const rel of staleOutputs(root)) {
  rmSync(path.join(root, rel), { force: true });
  for (
    let dir = path.dirname(path.join(root, rel));
    dir !== path.join(root, "dist") && readdirSync(dir).length === 0;
    dir = path.dirname(dir)
  )
    rmdirSync(dir);
}
mkdirSync(path.dirname(stampFile), { recursive: true });
writeFileSync(stampFile, `${new Date().toISOString()}\n`);
console.error(
  `clawbridge build: src/ compiled to dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s (${state.reason}).`,
);
