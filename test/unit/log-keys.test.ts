/**
 * No log line carries a key twice (src/core/log/logger.ts): a child made with `childLogger` leaves
 * out what its parent is bound to, and src/ makes no child logger any other way (a `.child(` call
 * would bring the duplicates back). test/integration/shutdown-log.test.ts reads a real run's log.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { childLogger, createLogger } from "../../src/core/log/logger.js";
import { lazyChild } from "../../src/core/log/lazy.js";

/** A logger writing into an array of raw lines. */
function capture() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(...String(chunk).split("\n").filter(Boolean));
      done();
    },
  });
  return { logger: createLogger("debug", sink), lines };
}

/** Every key of a JSON line, as written (JSON.parse would hide a repeat). */
function rawKeys(line: string): string[] {
  return [...line.matchAll(/"([^"\\]+)":/g)].map((m) => m[1]!);
}

const repeated = (keys: string[]) => keys.filter((k, i) => keys.indexOf(k) !== i);

test("the backend chain (registry → backend → warm process) writes each key once", async () => {
  const { logger, lines } = capture();
  const registry = childLogger(logger, { backend: "cc" });
  const backend = childLogger(registry, { backend: "cc", warm: "codex" });
  const proc = childLogger(backend, { cli: "codex", pid: 42, warm: true });
  proc.warn({ err: "boom" }, "opencode serve did not start; running turns cold for a while");
  lazyChild(backend, () => ({ backend: "cc", turn: "t1" })).info("turn started");
  logger.flush();
  await new Promise((r) => setImmediate(r));
  assert.equal(lines.length, 2);
  for (const line of lines) assert.deepEqual(repeated(rawKeys(line)), [], line);
  const first = JSON.parse(lines[0]!);
  assert.equal(first.backend, "cc");
  assert.equal(first.warm, "codex", "the parent's binding stays");
  assert.equal(first.pid, 42);
  assert.equal(first.err, "boom");
  assert.equal(JSON.parse(lines[1]!).turn, "t1");
});

test("a child with nothing new to bind is its parent", () => {
  const { logger } = capture();
  const bound = childLogger(logger, { backend: "cc" });
  assert.equal(childLogger(bound, { backend: "cc" }), bound);
  assert.equal(childLogger(logger, {}), logger);
});

test("src/ makes child loggers only through childLogger", () => {
  const src = fileURLToPath(new URL("../../src/", import.meta.url));
  const files = (dir: string): string[] =>
    readdirSync(dir).flatMap((n) => {
      const p = path.join(dir, n);
      return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
    });
  const direct = files(src)
    .filter((f) => !f.endsWith(path.join("core", "log", "logger.ts")))
    .filter((f) => /\.child\(/.test(readFileSync(f, "utf8")))
    .map((f) => path.relative(src, f));
  assert.deepEqual(direct, []);
});
