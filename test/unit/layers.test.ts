/**
 * Imports between `src/` folders point one way: down the pipeline, from the commands at the top to
 * the small shared rooms at the bottom. A folder may import any folder below it, never one above.
 * The one deliberate climb is config → backends (each backend type validates its own options, so
 * the config loader asks the backend registry for their schemas).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));

/** Top to bottom. A new room is added here at the height where it belongs. */
const LAYERS = [
  "cli",
  "doctor",
  "openclaw",
  "service",
  "server",
  "metrics",
  "pipeline",
  "identity",
  "context",
  "queue",
  "routing",
  "store",
  "encoder",
  "backends",
  "builder",
  "tools",
  "router",
  "systems",
  "toolcalls",
  "warm",
  "config",
  "clienttools",
  "intent",
  "contract",
  "events",
  "openai",
  "log",
  "report",
  "util",
  "(root)",
];

/** Upward imports made on purpose, each with its reason at the import. */
const ALLOWED_CLIMBS = new Set(["config/load.ts -> backends/registry.ts"]);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}

const folderOf = (rel: string) => (rel.includes("/") ? rel.slice(0, rel.indexOf("/")) : "(root)");

/** Every relative import (static, `export … from`, dynamic) of a source file, as a path under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"(\.[^"]+)"|import\(\s*"(\.[^"]+)"\s*\)/g)) {
    const spec = m[1] ?? m[2]!;
    out.push(path.relative(SRC, path.resolve(path.dirname(file), spec)).replace(/\.js$/, ".ts"));
  }
  return out;
}

test("every src/ folder has a place in the layer order", () => {
  const folders = new Set(files(SRC).map((f) => folderOf(path.relative(SRC, f))));
  const missing = [...folders].filter((f) => !LAYERS.includes(f));
  assert.deepEqual(missing, [], `add these folders to LAYERS at their height: ${missing.join(", ")}`);
});

test("imports between src/ folders point down the pipeline (config → backends excepted)", () => {
  const climbs: string[] = [];
  let crossings = 0;
  for (const file of files(SRC)) {
    const from = path.relative(SRC, file);
    for (const to of importsOf(file)) {
      const a = folderOf(from);
      const b = folderOf(to);
      if (a === b) continue;
      crossings++;
      if (LAYERS.indexOf(b) > LAYERS.indexOf(a)) continue;
      if (!ALLOWED_CLIMBS.has(`${from} -> ${to}`)) climbs.push(`${from} -> ${to}`);
    }
  }
  assert.ok(crossings > 100, `the import scan found the imports (${crossings})`);
  assert.deepEqual(climbs, [], `imports that climb back up:\n${climbs.join("\n")}`);
});

test("the allowed climb is still there and says why", () => {
  const load = readFileSync(path.join(SRC, "config/load.ts"), "utf8");
  const at = load.indexOf('from "../backends/registry.js"');
  assert.ok(at > 0, "config/load.ts imports the backend registry");
  assert.match(load.slice(Math.max(0, at - 600), at), /deliberate|on purpose/i, "a comment at the import says why it climbs");
});
