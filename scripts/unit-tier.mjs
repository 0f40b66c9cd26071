/**
 * The unit tier in one process: TypeScript (tsx) and the sources are loaded once, not once per
 * file. Each test file given as an argument is imported inside a suite named after it, so its
 * top-level hooks (`before`, `afterEach`, …) apply to its own tests only. Run by
 * scripts/run-tests.mjs as `node --import tsx scripts/unit-tier.mjs <files>`; a unit test must not
 * depend on running alone (no process-wide state left behind, ports from the OS).
 */
import { describe } from "node:test";
import path from "node:path";
import { pathToFileURL } from "node:url";

for (const file of process.argv.slice(2)) {
  describe(file, async () => {
    await import(pathToFileURL(path.resolve(file)).href);
  });
}
