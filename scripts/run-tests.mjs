#!/usr/bin/env node
// Runs every test/**/*.test.ts with node's test runner (Node 20 does not expand globs itself).
// Extra arguments are passed to `node --test` (e.g. a file list or --test-name-pattern); a folder
// argument limits the run to the tests under it (`npm run test:unit` is `test/unit`).
import { spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const failuresReporter = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), "failures-reporter.mjs")).href;

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

// A folder argument (`test/unit`) runs the tests under it only; file arguments run those files.
const raw = process.argv.slice(2);
const dirs = raw.filter((a) => !a.startsWith("-") && !a.endsWith(".ts") && existsSync(a) && statSync(a).isDirectory());
const args = raw.filter((a) => !dirs.includes(a));
const files = args.some((a) => a.endsWith(".ts")) ? [] : (dirs.length ? dirs : ["test"]).flatMap(find).sort();
const child = spawn(
  process.execPath,
  [
    "--import", "tsx", "--test", "--test-concurrency=1", "--test-timeout=600000",
    // TAP as before, then a list of the failed tests at the very end of the output.
    "--test-reporter=tap", "--test-reporter-destination=stdout",
    `--test-reporter=${failuresReporter}`, "--test-reporter-destination=stdout",
    ...args, ...files,
  ],
  { stdio: "inherit" },
);
const forward = (sig) => child.kill(sig);
process.on("SIGINT", forward);
process.on("SIGTERM", forward);
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
