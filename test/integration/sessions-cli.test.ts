/**
 * `clawbridge sessions list | show | forget | import` against a real SQLite store in a temp data dir,
 * and against the configured PostgreSQL (`store: { kind: postgres }`) that the bridges share.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { defaultSessionStorePath, openSessionStore } from "../../src/core/store/index.js";
import { cleanup, tempDir } from "../helpers/bridge.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const execFileP = promisify(execFile);
const BIN = path.resolve("bin/clawbridge.js");

describe("clawbridge sessions", () => {
  let dataDir: string;
  const run = async (...args: string[]) => {
    try {
      const r = await execFileP(process.execPath, [BIN, "sessions", ...args], {
        env: { ...process.env, CLAWBRIDGE_DATA_DIR: dataDir, CLAWBRIDGE_CONFIG: "" },
        timeout: 60_000,
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err: any) {
      return { code: err.code as number, stdout: String(err.stdout), stderr: String(err.stderr) };
    }
  };

  before(async () => {
    dataDir = tempDir("cb-sessions-");
    const store = await openSessionStore({ kind: "sqlite", path: defaultSessionStorePath(dataDir) });
    const now = Date.now();
    await store.put({
      key: "openclaw:agent:main:main:a",
      backend: "cc",
      backendSessionId: "11111111-1111-4111-8111-111111111111",
      cwd: path.join(dataDir, "work", "a"),
      turns: 3,
      createdAt: now - 5000,
      updatedAt: now - 5000,
    });
    await store.put({
      key: "user:alex",
      backend: "gem",
      backendSessionId: "22222222-2222-4222-8222-222222222222",
      cwd: path.join(dataDir, "work", "b"),
      turns: 1,
      createdAt: now,
      updatedAt: now,
    });
    await store.close();
  });

  after(() => cleanup(dataDir));

  test("list shows every conversation, most recent first", async () => {
    const res = await run("list", "--json");
    assert.equal(res.code, 0, res.stderr);
    const list = JSON.parse(res.stdout);
    assert.deepEqual(
      list.map((b: { key: string }) => b.key),
      ["user:alex", "openclaw:agent:main:main:a"],
    );
    const text = await run("list");
    assert.match(text.stdout, /openclaw:agent:main:main:a {2}cc:11111111-1111-4111-8111-111111111111 {2}turns=3/);
  });

  test("show prints one binding; an unknown key is an error", async () => {
    const res = await run("show", "user:alex");
    assert.equal(res.code, 0, res.stderr);
    assert.equal(JSON.parse(res.stdout).binding.backendSessionId, "22222222-2222-4222-8222-222222222222");
    const missing = await run("show", "nobody");
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no conversation "nobody"/);
  });

  test("forget drops the binding (the next turn starts a new session) and records it", async () => {
    const res = await run("forget", "user:alex");
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /forgot user:alex/);
    const list = JSON.parse((await run("list", "--json")).stdout);
    assert.deepEqual(
      list.map((b: { key: string }) => b.key),
      ["openclaw:agent:main:main:a"],
    );
    const shown = JSON.parse((await run("show", "user:alex")).stdout);
    assert.equal(shown.binding, null);
    assert.ok(shown.events.some((e: { kind: string }) => e.kind === "deleted"));
    const again = await run("forget", "user:alex");
    assert.equal(again.code, 1);
  });

  test("import reads a seed-era sessions.json, tolerating a bare {}", async () => {
    const empty = path.join(dataDir, "empty.json");
    writeFileSync(empty, "{}");
    const none = await run("import", empty, "--backend", "cc");
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stdout, /imported 0 of 0/);
    const seed = path.join(dataDir, "sessions.json");
    writeFileSync(
      seed,
      JSON.stringify({
        sessions: [
          {
            openclawSessionKey: "agent:main:telegram:1",
            claudeSessionId: "33333333-3333-4333-8333-333333333333",
            workspace: path.join(dataDir, "work", "c"),
          },
          { nonsense: true },
        ],
      }),
    );
    const res = await run("import", seed, "--backend", "cc");
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /imported 1 of 2 \(0 already known, 1 skipped\)/);
    const shown = JSON.parse((await run("show", "agent:main:telegram:1")).stdout);
    assert.equal(shown.binding.backendSessionId, "33333333-3333-4333-8333-333333333333");
    assert.equal(shown.binding.backend, "cc");
  });
});

describe("clawbridge sessions on PostgreSQL (store: postgres)", () => {
  let pg: TestPostgres;
  let dir: string;
  let configFile: string;
  let url: string;
  const run = async (...args: string[]) => {
    try {
      const r = await execFileP(process.execPath, [BIN, "sessions", ...args, "--config", configFile], {
        env: { ...process.env, CLAWBRIDGE_CONFIG: "", CLAWBRIDGE_STORE_URL: url },
        timeout: 60_000,
      });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err: any) {
      return { code: err.code as number, stdout: String(err.stdout), stderr: String(err.stderr) };
    }
  };

  before(async () => {
    pg = await startPostgres();
    url = await pg.database();
    dir = tempDir("cb-sessions-pg-");
    configFile = path.join(dir, "clawbridge.json");
    // The URL comes from the environment, as a deployment keeps the password out of the file.
    writeFileSync(
      configFile,
      JSON.stringify({
        dataDir: path.join(dir, "data"),
        store: { kind: "postgres" },
        backends: { cc: { type: "claude-code", command: "/bin/false" } },
        models: [{ id: "claude", backend: "cc", session: { mode: "resume" } }],
      }),
    );
    const db = await PostgresDb.open({ url });
    const store = await openSessionStore({ kind: "postgres", db });
    await store.put({
      key: "user:sam",
      backend: "cc",
      backendSessionId: "44444444-4444-4444-8444-444444444444",
      cwd: path.join(dir, "work"),
      turns: 2,
      createdAt: Date.now(),
      updatedAt: Date.now(),
    });
    await store.close();
    await db.close();
  });

  after(async () => {
    await pg?.stop();
    if (dir) cleanup(dir);
  });

  test("list, show and forget read and write the shared database, not a sessions.db", async () => {
    const list = await run("list", "--json");
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(
      JSON.parse(list.stdout).map((b: { key: string; turns: number }) => [b.key, b.turns]),
      [["user:sam", 2]],
    );
    const forgot = await run("forget", "user:sam");
    assert.equal(forgot.code, 0, forgot.stderr);
    const shown = JSON.parse((await run("show", "user:sam")).stdout);
    assert.equal(shown.binding, null);
    assert.deepEqual(
      shown.events.map((e: { kind: string }) => e.kind),
      ["deleted", "bound"],
    );
    assert.ok(!existsSync(defaultSessionStorePath(path.join(dir, "data"))), "no SQLite file was made");
  });
});
