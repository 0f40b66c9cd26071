/** Which code the bin and the plugin run: dist/ when its build is current, else src/ through tsx. */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { buildState, entryFile, STAMP, staleOutputs } from "../../scripts/build-state.mjs";

const roots: string[] = [];
after(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** A package root with src/ops/commands/main.ts (mtime `srcAt`) and, when `stampAt` is given, a build stamp. */
function pkg(srcAt: number, stampAt?: number): string {
  const root = mkdtempSync(path.join(tmpdir(), "cb-build-"));
  roots.push(root);
  mkdirSync(path.join(root, "src", "cli"), { recursive: true });
  const main = path.join(root, "src", "cli", "main.ts");
  writeFileSync(main, "export {};\n");
  utimesSync(main, srcAt, srcAt);
  for (const dir of [path.join(root, "src", "cli"), path.join(root, "src")]) utimesSync(dir, srcAt, srcAt);
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
const REPO = path.resolve(import.meta.dirname, "../..");

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
    const root = REPO;
    // The suite runs after `npm ci`, which builds; a developer who edited sources has a stale build.
    if (!buildState(root).fresh) return t.skip("sources changed since the last build");
    assert.ok(
      existsSync(entryFile(root, "ops/commands/main")),
      "dist/ops/commands/main.js is missing although the stamp says current",
    );
  });

  test("outputs whose source is gone are stale; the build's own files are not", () => {
    const root = pkg(T, T + 10);
    writeFileSync(path.join(root, "dist", "cli", "main.js"), "export {};\n");
    mkdirSync(path.join(root, "dist", "old"), { recursive: true });
    writeFileSync(path.join(root, "dist", "old", "gone.js"), "export {};\n");
    writeFileSync(path.join(root, "dist", ".tsbuildinfo"), "{}\n");
    assert.deepEqual(staleOutputs(root), [path.join("dist", "old", "gone.js")]);
  });
});

describe("npm run build (scripts/build.mjs, real tsc)", () => {
  test("compiles when stale, skips when current, and removes the output of a deleted source", () => {
    const root = mkdtempSync(path.join(tmpdir(), "cb-build-run-"));
    roots.push(root);
    mkdirSync(path.join(root, "scripts"));
    for (const f of ["build.mjs", "build-state.mjs", "dashboard-build.mjs"])
      copyFileSync(path.join(REPO, "scripts", f), path.join(root, "scripts", f));
    symlinkSync(path.join(REPO, "node_modules"), path.join(root, "node_modules"));
    writeFileSync(path.join(root, "package.json"), '{"type":"module"}\n');
    writeFileSync(
      path.join(root, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          skipLibCheck: true,
          types: [],
        },
      }),
    );
    writeFileSync(
      path.join(root, "tsconfig.build.json"),
      JSON.stringify({
        extends: "./tsconfig.json",
        compilerOptions: { rootDir: "src", outDir: "dist", incremental: true, tsBuildInfoFile: "dist/.tsbuildinfo" },
        include: ["src"],
      }),
    );
    mkdirSync(path.join(root, "src", "cli"), { recursive: true });
    mkdirSync(path.join(root, "src", "old"));
    writeFileSync(path.join(root, "src", "cli", "main.ts"), "export const main: number = 1;\n");
    writeFileSync(path.join(root, "src", "old", "gone.ts"), "export const gone: number = 2;\n");
    const build = () =>
      spawnSync(process.execPath, [path.join(root, "scripts", "build.mjs")], {
        cwd: root,
        encoding: "utf8",
        timeout: 120_000,
      });

    let r = build();
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /compiled to dist\/ .*\(no build yet\)/);
    assert.ok(existsSync(path.join(root, "dist", "cli", "main.js")));
    assert.ok(existsSync(path.join(root, "dist", "old", "gone.js")));
    assert.equal(buildState(root).fresh, true);

    r = build();
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stderr, "", "a current build is left alone");

    unlinkSync(path.join(root, "src", "old", "gone.ts"));
    assert.equal(buildState(root).fresh, false, "deleting a source makes the build stale");
    r = build();
    assert.equal(r.status, 0, r.stderr);
    assert.ok(existsSync(path.join(root, "dist", "cli", "main.js")));
    assert.ok(!existsSync(path.join(root, "dist", "old", "gone.js")), "the deleted source's output is removed");
    assert.ok(!existsSync(path.join(root, "dist", "old")), "and the folder it emptied");
  });
});
