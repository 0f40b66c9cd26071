/**
 * Crash safety and multi-process use of the SQLite session store, with real child processes
 * (test/fixtures/store/writer.ts) that are kill -9'd or run side by side.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { SqliteSessionStore } from "../../src/core/store/index.js";
import { expectedBinding } from "../fixtures/store/expected.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const WRITER = path.join(ROOT, "test", "fixtures", "store", "writer.ts");

let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "clawbridge-store-crash-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface ChildResult {
  lines: string[];
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

/**
 * Runs the writer fixture. With `killAfter`, sends SIGKILL once that many complete stdout lines
 * were seen. Only newline-terminated lines count. Always resolves after the child was reaped.
 */
function runWriter(args: string[], killAfter?: number): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", WRITER, ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const lines: string[] = [];
    let partial = "";
    let stderr = "";
    let killed = false;
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      const parts = (partial + chunk).split("\n");
      partial = parts.pop() ?? "";
      lines.push(...parts);
      if (killAfter !== undefined && !killed && lines.length >= killAfter) {
        killed = true;
        child.kill("SIGKILL");
      }
    });
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (c: string) => {
      stderr = (stderr + c).slice(-4000);
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ lines, code, signal, stderr }));
  });
}

function rawIntegrity(file: string): string[] {
  const db = new Database(file);
  try {
    return (db.pragma("integrity_check") as Array<{ integrity_check: string }>).map((r) => r.integrity_check);
  } finally {
    db.close();
  }
}

describe("session store crash safety (kill -9)", () => {
  const rounds: Array<{ killAfter: number; sync: "FULL" | "NORMAL" }> = [
    { killAfter: 1, sync: "FULL" },
    { killAfter: 40, sync: "FULL" },
    { killAfter: 250, sync: "FULL" },
    { killAfter: 120, sync: "NORMAL" },
  ];
  const MAX = 200_000; // the child's loop bound; it is always killed long before

  // Every round uses the same file: later rounds also prove an already-crashed file keeps working.
  const file = (): string => path.join(dir, "crash", "sessions.db");

  for (const [round, { killAfter, sync }] of rounds.entries()) {
    test(`round ${round + 1}: killed after ${killAfter} confirmed puts (synchronous=${sync}); every reported key is intact`, async () => {
      const prefix = `r${round}`;
      const res = await runWriter(["crash", file(), prefix, String(MAX), sync], killAfter);
      assert.equal(
        res.signal,
        "SIGKILL",
        `the child must be killed mid-loop (code ${res.code}, stderr: ${res.stderr})`,
      );
      const reported = res.lines.map((l) => {
        const m = /^WROTE (r\d+-(\d+))$/.exec(l);
        assert.ok(m, `unexpected child output line: ${JSON.stringify(l)}`);
        return { key: m[1]!, i: Number(m[2]) };
      });
      assert.ok(reported.length >= killAfter);
      assert.ok(reported.length < MAX);
      assert.ok(existsSync(`${file()}-wal`), "the killed child left its WAL behind (recovery is exercised)");

      assert.deepEqual(rawIntegrity(file()), ["ok"]);
      const store = SqliteSessionStore.open(file());
      try {
        for (const { key, i } of reported) {
          assert.deepEqual(await store.get(key), expectedBinding(prefix, i), `binding ${key} after kill -9`);
        }
        // Whatever else got in (the put in flight may or may not have committed) is intact too.
        const mine = (await store.list()).filter((b) => b.key.startsWith(`${prefix}-`));
        assert.ok(
          mine.length === reported.length || mine.length === reported.length + 1,
          `${mine.length} rows vs ${reported.length} reported`,
        );
        for (const b of mine) assert.deepEqual(b, expectedBinding(prefix, Number(b.key.slice(prefix.length + 1))));
        // Earlier rounds' data survived this round's crash as well.
        if (round > 0) assert.ok((await store.list()).some((b) => b.key.startsWith("r0-")));
        assert.deepEqual(await store.integrityCheck(), ["ok"]);
      } finally {
        await store.close();
      }
    });
  }
});

describe("session store shared by several processes", () => {
  test("three processes opening and migrating a fresh file at the same moment all succeed", async () => {
    // They race to switch the new file to WAL, which SQLite answers with SQLITE_BUSY at once (no
    // busy wait): the loser must open again, not fail. Before that was handled, about one open in
    // twenty failed here ("database is locked").
    const names = ["a", "b", "c"];
    for (let round = 0; round < 8; round++) {
      const file = path.join(dir, `fresh-${round}`, "sessions.db");
      const startAt = String(Date.now() + 1500); // after the children's start-up
      const results = await Promise.all(names.map((n) => runWriter(["keys", file, n, "20", startAt])));
      results.forEach((r, i) => {
        assert.equal(r.code, 0, `child ${names[i]}: ${r.stderr}`);
        assert.deepEqual(r.lines, ["DONE 20"]);
      });
      const store = SqliteSessionStore.open(file);
      try {
        assert.equal((await store.list()).length, 60);
        for (let i = 0; i < 20; i++)
          for (const n of names) assert.deepEqual(await store.get(`${n}-${i}`), expectedBinding(n, i));
        assert.deepEqual(await store.integrityCheck(), ["ok"]);
      } finally {
        await store.close();
      }
    }
  });

  test("two writer processes and this one share a file: no SQLITE_BUSY, no lost turn counts", async () => {
    const file = path.join(dir, "contend", "sessions.db");
    const SHARED = "agent:main:shared";
    const PER_CHILD = 150;
    const PARENT_TURNS = 60;
    const store = SqliteSessionStore.open(file);
    try {
      await store.put({
        key: SHARED,
        backend: "claude",
        backendSessionId: "shared-sid",
        cwd: "/w",
        turns: 0,
        createdAt: 1,
        updatedAt: 1,
      });
      const children = Promise.all([
        runWriter(["contend", file, "p", String(PER_CHILD), SHARED]),
        runWriter(["contend", file, "q", String(PER_CHILD), SHARED]),
      ]);
      // This process writes and reads the same rows meanwhile (bounded, yielding to the event loop).
      for (let i = 0; i < PARENT_TURNS; i++) {
        await store.recordTurn(SHARED, "shared-sid");
        await store.list({ limit: 3 });
        await new Promise((r) => setTimeout(r, 2));
      }
      const [p, q] = await children;
      assert.equal(p.code, 0, `child p: ${p.stderr}`);
      assert.equal(q.code, 0, `child q: ${q.stderr}`);
      assert.deepEqual(p.lines, [`DONE ${PER_CHILD}`]);
      assert.deepEqual(q.lines, [`DONE ${PER_CHILD}`]);
      assert.equal(
        (await store.get(SHARED))?.turns,
        2 * PER_CHILD + PARENT_TURNS,
        "every recordTurn counted exactly once",
      );
      for (let i = 0; i < PER_CHILD; i++) {
        assert.deepEqual(await store.get(`p-${i}`), expectedBinding("p", i));
        assert.deepEqual(await store.get(`q-${i}`), expectedBinding("q", i));
      }
      assert.deepEqual(await store.integrityCheck(), ["ok"]);
    } finally {
      await store.close();
    }
  });
});
