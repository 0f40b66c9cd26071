/**
 * Imports between the rooms of `src/` point one way: down the request path, from the commands at
 * the top to the small shared rooms at the bottom. A room may import any room below it, never one
 * above. `src/` has six areas — ops (commands, doctor, OpenClaw set-up, service, metrics, events),
 * request (the HTTP doors and everything a request passes), backends (one folder per CLI, the warm
 * room, the backend contract), workflows (engine, systems, router, builder), core (config, store, util,
 * log, net) and wire (the shapes the bridge sends, which the dashboard type-checks against too: it
 * imports nothing) — and a room is a folder inside an area (`backends/codex`), or a single file named here
 * (`backends/registry.ts`), or an area's own files (`backends`). The one deliberate climb is
 * config → the backend registry (each backend type validates its own options, so the config loader
 * asks the registry for their schemas).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));

/** Top to bottom. A new room is added here at the height where it belongs. */
const LAYERS = [
  "ops/commands",
  "ops/init",
  "ops/doctor",
  "ops/openclaw",
  "ops/service",
  "request/http",
  "request/responses-api",
  "request/messages-api",
  "ops/metrics",
  "ops/usage",
  "request/pipeline",
  "request/identity",
  "request/context",
  "request/images",
  "request/queue",
  "request/models",
  "core/store",
  "request/encoder",
  "backends/catalog",
  "backends/health",
  "backends/registry.ts",
  "backends/qwen-code",
  "backends/claude-code",
  "backends/codex",
  "backends/gemini-cli",
  "backends/opencode",
  "backends/openai",
  "backends/cli",
  "backends",
  "workflows/builder",
  "request/web-tools",
  "workflows/router",
  "workflows/triggers",
  "workflows/conversation",
  "workflows/systems",
  "workflows/engine",
  "ops/cluster-events",
  "core/db",
  "backends/warm",
  "core/config",
  "backends/warm/options.ts",
  "backends/client-tools",
  "request/intents",
  "backends/contract",
  "ops/events",
  "request/chat-api",
  "core/log",
  "core/secrets",
  "ops/report",
  "core/net",
  "core/util",
  "core",
  "wire",
];

/** The top-level areas of src/; nothing else sits there. */
const AREAS = ["backends", "core", "ops", "request", "wire", "workflows"];

/** Upward imports made on purpose, each with its reason at the import. */
const ALLOWED_CLIMBS = new Set(["core/config/load.ts -> backends/registry.ts"]);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}

/** The room of a path under src/: the longest LAYERS entry it starts with, else its folder. */
function roomOf(rel: string): string {
  let best = "";
  for (const room of LAYERS) {
    if ((rel === room || rel.startsWith(`${room}/`)) && room.length > best.length) best = room;
  }
  return best || path.dirname(rel);
}

/** Every relative import (static, `export … from`, dynamic) of a source file, as a path under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  const out: string[] = [];
  for (const m of text.matchAll(
    /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"(\.[^"]+)"|import\(\s*"(\.[^"]+)"\s*\)/g,
  )) {
    const spec = m[1] ?? m[2]!;
    out.push(path.relative(SRC, path.resolve(path.dirname(file), spec)).replace(/\.js$/, ".ts"));
  }
  return out;
}

test("src/ holds only its areas, and every room has a place in the layer order", () => {
  assert.deepEqual(readdirSync(SRC).sort(), AREAS);
  const rooms = new Set(files(SRC).map((f) => roomOf(path.relative(SRC, f))));
  const missing = [...rooms].filter((f) => !LAYERS.includes(f));
  assert.deepEqual(missing, [], `add these rooms to LAYERS at their height: ${missing.join(", ")}`);
  const unused = LAYERS.filter((room) => !rooms.has(room));
  assert.deepEqual(unused, [], `rooms in LAYERS with no file: ${unused.join(", ")}`);
});

test("no two files of src/ share a folder-and-file name (cli/common.ts twice, hub.ts in two rooms)", () => {
  const seen = new Map<string, string>();
  const twins: string[] = [];
  for (const file of files(SRC)) {
    const rel = path.relative(SRC, file);
    const key = `${path.basename(path.dirname(rel))}/${path.basename(rel)}`;
    const other = seen.get(key);
    if (other) twins.push(`${other} ~ ${rel}`);
    seen.set(key, rel);
  }
  assert.deepEqual(twins, []);
});

test("imports between src/ rooms point down the request path (config → backends excepted)", () => {
  const climbs: string[] = [];
  let crossings = 0;
  for (const file of files(SRC)) {
    const from = path.relative(SRC, file);
    for (const to of importsOf(file)) {
      const a = roomOf(from);
      const b = roomOf(to);
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
  const load = readFileSync(path.join(SRC, "core/config/load.ts"), "utf8");
  const at = load.indexOf('from "../../backends/registry.js"');
  assert.ok(at > 0, "core/config/load.ts imports the backend registry");
  assert.match(
    load.slice(Math.max(0, at - 600), at),
    /deliberate|on purpose/i,
    "a comment at the import says why it climbs",
  );
});

test("src/wire imports nothing but itself, and only types (packages/dashboard compiles it too)", () => {
  const bad: string[] = [];
  for (const file of files(path.join(SRC, "wire"))) {
    const rel = path.relative(SRC, file);
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(
      /(?:^|\n)\s*(?:import|export)\s([^;]*?)\s*from\s+"([^"]+)"|import\s*\(?\s*"([^"]+)"/g,
    )) {
      const typeOnly = m[1] !== undefined && /^type\s/.test(m[1]);
      if (!typeOnly || !/^\.\/[^/]+\.js$/.test(m[2]!)) bad.push(`${rel}: ${m[0].trim()}`);
    }
    if (/\bNodeJS\.|\bBuffer\b/.test(text)) bad.push(`${rel}: a Node type`);
  }
  assert.deepEqual(bad, [], "src/wire's files import only types, and only from each other");
});
