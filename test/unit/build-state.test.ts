/** Which code the bin and the plugin run: dist/ when its build is current, else src/ through tsx. */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { buildState, entryFile, STAMP } from "../../scripts/build-state.mjs";

const roots: string[] = [];
after(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** A package root with src/cli/main.ts (mtime `srcAt`) and, when `stampAt` is given, a build stamp. */
function pkg(srcAt: number, stampAt?: number): string {
  const root = mkdtempSync(path.join(tmpdir(), "cb-build-"));
  roots.push(root);
  mkdirSync(path.join(root, "src", "cli"), { recursive: true });
  const main = path.join(root, "src", "cli", "main.ts");
  writeFileSync(main, "export {};\n");
  utimesSync(main, srcAt, srcAt);
  writeFileSync(path.join(root, "tsconfig.json"), "{}\n");
  utimesSync(path.join(root, "tsconfig.json"), srcAt - 100, srcAt - 100);
  if (stampAt !== undefined) {
    mkdirSync(path.join(root, "dist", "cli"), { recursive: true });
    writeFileSync(path.join(root, STAMP), "built\n");
    utimesSync(path.join(root, STAMP), stampAt, stampAt);
  }
  return root;
}

const T = 1_700_000_000; // seconds

describe("build state", () => {
  test("no build: the sources run", () => {
    const root = pkg(T);
    assert.deepEqual(buildState(root), { fresh: false, reason: "no build yet" });
    assert.equal(entryFile(root, "cli/main"), path.join(root, "src", "cli", "main.ts"));
  });

  test("a build newer than every source runs from dist/", () => {
    const root = pkg(T, T + 10);
    assert.equal(buildState(root).fresh, true);
    assert.equal(entryFile(root, "cli/main"), path.join(root, "dist", "cli", "main.js"));
  });

  test("a source edited after the build (in a nested folder) makes it stale", () => {
    const root = pkg(T, T + 10);
    mkdirSync(path.join(root, "src", "server"), { recursive: true });
    const f = path.join(root, "src", "server", "app.ts");
    writeFileSync(f, "export {};\n");
    utimesSync(f, T + 20, T + 20);
    assert.deepEqual(buildState(root), { fresh: false, reason: "sources changed since the last build" });
    assert.equal(entryFile(root, "cli/main"), path.join(root, "src", "cli", "main.ts"));
  });

  test("a changed build setting makes it stale too", () => {
    const root = pkg(T, T + 10);
    utimesSync(path.join(root, "tsconfig.json"), T + 30, T + 30);
    assert.equal(buildState(root).fresh, false);
  });

  test("this checkout: when the build is current, its entry file exists", (t) => {
    const root = path.resolve(import.meta.dirname, "../..");
    // The suite runs after `npm ci`, which builds; a developer who edited sources has a stale build.
    if (!buildState(root).fresh) return t.skip("sources changed since the last build");
    assert.ok(existsSync(entryFile(root, "cli/main")), "dist/cli/main.js is missing although the stamp says current");
  });
});
