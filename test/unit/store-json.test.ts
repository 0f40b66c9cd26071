import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  EXPORT_FORMAT,
  exportSessionsJson,
  importSessionsJson,
  openSessionStore,
  parseSessionsJson,
  SessionImportError,
  writeFileAtomic,
  type SessionStore,
} from "../../src/core/store/index.js";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { freshSchema } from "../helpers/pg-schema.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

let dir: string;
let pg: TestPostgres;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "clawbridge-store-json-"));
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
async function fileWith(content: string): Promise<string> {
  const f = path.join(dir, `in-${++n}.json`);
  await writeFile(f, content);
  return f;
}

/** `fn` with a fresh store of `engine` (a new SQLite file, or a new schema of the test PostgreSQL). */
async function withStore(engine: "sqlite" | "postgres", fn: (s: SessionStore) => Promise<void>): Promise<void> {
  const db = engine === "postgres" ? await PostgresDb.open({ url: await freshSchema(pg), poolSize: 2 }) : undefined;
  const s = db
    ? await openSessionStore({ kind: "postgres", db })
    : await openSessionStore({ kind: "sqlite", path: path.join(dir, `db-${++n}`, "sessions.db") });
  try {
    await fn(s);
  } finally {
    await s.close();
    await db?.close();
  }
}

const NOW = () => 1_750_000_000_000;

describe("JSON import", () => {
  test("a map keyed by session key, sessionId / backendSessionId / cwd variants, entry backend wins", () => {
    const parsed = parseSessionsJson(
      JSON.stringify({
        version: 2,
        "agent:a": { sessionId: "s-a", cwd: "/a" },
        "agent:b": { backendSessionId: "s-b", workspace: "/b", backend: "gemini", model: "flash" },
        "agent:c": { key: "explicit:c", claudeSessionId: "s-c", workspaceDir: "/c" },
      }),
      { backend: "claude", now: NOW },
    );
    assert.equal(parsed.total, 3);
    assert.deepEqual(parsed.skipped, []);
    const byKey = Object.fromEntries(parsed.bindings.map((b) => [b.key, b]));
    assert.equal(byKey["agent:a"]?.backendSessionId, "s-a");
    assert.equal(byKey["agent:a"]?.backend, "claude");
    assert.equal(byKey["agent:a"]?.createdAt, NOW());
    assert.equal(byKey["agent:a"]?.turns, 0);
    assert.equal(byKey["agent:b"]?.backend, "gemini");
    assert.equal(byKey["agent:b"]?.model, "flash");
    assert.equal(byKey["agent:b"]?.cwd, "/b");
    assert.equal(byKey["explicit:c"]?.backendSessionId, "s-c");
    // {sessions: {key: entry}} works the same way
    const nested = parseSessionsJson(JSON.stringify({ sessions: { "agent:a": { sessionId: "s-a", cwd: "/a" } } }), {
      backend: "claude",
    });
    assert.equal(nested.bindings[0]?.key, "agent:a");
  });

  test("entries without a backend are skipped unless a default backend is given; defaultCwd fills in", () => {
    const text = JSON.stringify([{ key: "k", sessionId: "s" }]);
    const none = parseSessionsJson(text, {});
    assert.equal(none.bindings.length, 0);
    assert.match(none.skipped[0]?.reason ?? "", /no backend/);
    assert.equal(none.skipped[0]?.entry, "[0]");
    const filled = parseSessionsJson(text, { backend: "claude", defaultCwd: "/default" });
    assert.equal(filled.bindings[0]?.cwd, "/default");
  });
});

for (const engine of ["sqlite", "postgres"] as const) {
  describe(`JSON import into the ${engine} store`, () => {
    test("empty inputs import nothing: bare {}, empty file, {sessions: []}, {sessions: null}, []", async () => {
      await withStore(engine, async (s) => {
        for (const text of [
          "{}",
          "",
          "  \n",
          "\uFEFF{}",
          '{"sessions": []}',
          '{"sessions": null}',
          "[]",
          '{"version": 1}',
        ]) {
          const r = await importSessionsJson(s, await fileWith(text), { backend: "claude" });
          assert.deepEqual(r, { total: 0, imported: 0, existing: 0, skipped: [] }, `input ${JSON.stringify(text)}`);
          assert.deepEqual(await s.list(), []);
        }
      });
    });

    test("the seed's {sessions: [...]} file with claudeSessionId / workspace / openclawSessionKey", async () => {
      const text = JSON.stringify({
        sessions: [
          {
            openclawSessionKey: "agent:main:main",
            claudeSessionId: "bc1a7617-0651-443d-a8f1-efeb2957b8c2",
            workspace: "/home/u/.openclaw/workspace",
            createdAt: "2026-04-11T07:32:00.000Z",
            updatedAt: 1_775_900_000, // epoch seconds
            turns: 3,
          },
        ],
      });
      await withStore(engine, async (s) => {
        const r = await importSessionsJson(s, await fileWith(text), { backend: "claude", now: NOW });
        assert.deepEqual(r, { total: 1, imported: 1, existing: 0, skipped: [] });
        assert.deepEqual(await s.get("agent:main:main"), {
          key: "agent:main:main",
          backend: "claude",
          backendSessionId: "bc1a7617-0651-443d-a8f1-efeb2957b8c2",
          cwd: "/home/u/.openclaw/workspace",
          turns: 3,
          createdAt: Date.parse("2026-04-11T07:32:00.000Z"),
          updatedAt: 1_775_900_000_000,
          lastError: null,
          model: null,
        });
        assert.deepEqual(
          (await s.listEvents("agent:main:main")).map((e) => e.kind),
          ["imported", "bound"],
        );
      });
    });

    test("partial files: malformed entries are skipped with a reason, the rest is imported", async () => {
      const text = JSON.stringify({
        sessions: [
          { openclawSessionKey: "good-1", claudeSessionId: "c1", workspace: "/w/1" },
          "not an object",
          null,
          { claudeSessionId: "no-key", workspace: "/w" },
          { openclawSessionKey: "no-id", workspace: "/w" },
          { openclawSessionKey: "no-cwd", claudeSessionId: "c" },
          { openclawSessionKey: "rel-cwd", claudeSessionId: "c", workspace: "relative/path" },
          { openclawSessionKey: 42, claudeSessionId: "c", workspace: "/w" },
          { openclawSessionKey: "dup", claudeSessionId: "old", workspace: "/w", updatedAt: 1_000_000_000_000 },
          { openclawSessionKey: "dup", claudeSessionId: "new", workspace: "/w", updatedAt: 1_000_000_000_001 },
          { openclawSessionKey: "good-2", claudeSessionId: "c2", workspace: "/w/2", turns: -4 },
        ],
      });
      await withStore(engine, async (s) => {
        const r = await importSessionsJson(s, await fileWith(text), { backend: "claude" });
        assert.equal(r.total, 11);
        assert.equal(r.imported, 3);
        const reasons = Object.fromEntries(r.skipped.map((k) => [k.entry, k.reason]));
        assert.match(reasons["sessions[1]"] ?? "", /a string, not an object/);
        assert.match(reasons["sessions[2]"] ?? "", /null, not an object/);
        assert.match(reasons["sessions[3]"] ?? "", /no session key/);
        assert.match(reasons["sessions[4]"] ?? "", /no backend session id/);
        assert.match(reasons["sessions[5]"] ?? "", /no working directory/);
        assert.match(reasons["sessions[6]"] ?? "", /absolute path/);
        assert.match(reasons["sessions[7]"] ?? "", /key .* is not a string/);
        assert.match(reasons["sessions[8]"] ?? "", /duplicate key "dup"; kept the newer sessions\[9\]/);
        assert.equal(r.skipped.length, 8);
        assert.equal((await s.get("dup"))?.backendSessionId, "new");
        assert.equal((await s.get("good-2"))?.turns, 0, "an unusable turn count becomes 0");
        assert.deepEqual((await s.list()).map((b) => b.key).sort(), ["dup", "good-1", "good-2"]);
      });
    });

    test("existing bindings are kept unless overwrite is set", async () => {
      await withStore(engine, async (s) => {
        await s.put({
          key: "k",
          backend: "claude",
          backendSessionId: "live",
          cwd: "/w",
          turns: 9,
          createdAt: 1,
          updatedAt: 2,
        });
        const f = await fileWith(
          JSON.stringify({
            sessions: [
              { key: "k", sessionId: "stale", cwd: "/w" },
              { key: "j", sessionId: "j1", cwd: "/w" },
            ],
          }),
        );
        const r1 = await importSessionsJson(s, f, { backend: "claude" });
        assert.deepEqual({ ...r1, skipped: r1.skipped.length }, { total: 2, imported: 1, existing: 1, skipped: 0 });
        assert.equal((await s.get("k"))?.backendSessionId, "live");
        const r2 = await importSessionsJson(s, f, { backend: "claude", overwrite: true });
        assert.equal(r2.imported, 2);
        assert.equal((await s.get("k"))?.backendSessionId, "stale");
      });
    });

    test("garbage, wrong top-level types and missing files are clear SessionImportErrors", async () => {
      await withStore(engine, async (s) => {
        const cases: Array<[string, string, RegExp]> = [
          ["{not json", "PARSE", /not valid JSON/],
          ["\u0000\u0001binary", "PARSE", /not valid JSON/],
          ['{"sessions": 1', "PARSE", /not valid JSON/],
          ['"a string"', "SHAPE", /expected a JSON object or array, got string/],
          ["null", "SHAPE", /got null/],
          ["42", "SHAPE", /got number/],
          ['{"sessions": "x"}', "SHAPE", /"sessions" must be an array or an object/],
        ];
        for (const [text, code, re] of cases) {
          const f = await fileWith(text);
          await assert.rejects(
            importSessionsJson(s, f, { backend: "claude" }),
            (e: unknown) =>
              e instanceof SessionImportError &&
              e.code === code &&
              re.test(e.message) &&
              e.message.startsWith(f) &&
              e.file === f,
            `input ${JSON.stringify(text)}`,
          );
        }
        await assert.rejects(
          importSessionsJson(s, path.join(dir, "does-not-exist.json")),
          (e: unknown) => e instanceof SessionImportError && e.code === "ENOENT",
        );
        assert.deepEqual(await s.list(), [], "a failed import writes nothing");
      });
    });
  });
}

describe("atomic JSON export", () => {
  test("writeFileAtomic replaces the file whole, mode 0600, leaves no temp files", async () => {
    const sub = path.join(dir, "atomic");
    await mkdir(sub);
    const f = path.join(sub, "state.json");
    await writeFileAtomic(f, "first");
    assert.equal(await readFile(f, "utf8"), "first");
    assert.equal((await stat(f)).mode & 0o777, 0o600);
    await writeFileAtomic(f, "second, longer content");
    assert.equal(await readFile(f, "utf8"), "second, longer content");
    await writeFileAtomic(path.join(sub, "other.json"), new Uint8Array([123, 125]), { mode: 0o640 });
    assert.equal((await stat(path.join(sub, "other.json"))).mode & 0o777, 0o640);
    assert.deepEqual((await readdir(sub)).sort(), ["other.json", "state.json"]);
  });

  test("a failed write leaves the old file untouched and no temp file behind", async () => {
    const sub = path.join(dir, "atomic-fail");
    await mkdir(sub);
    const f = path.join(sub, "state.json");
    await writeFileAtomic(f, "old");
    // renaming a file over a non-empty directory fails after the temp file was written
    const blocker = path.join(sub, "blocker");
    await mkdir(blocker);
    await writeFile(path.join(blocker, "x"), "x");
    await assert.rejects(writeFileAtomic(blocker, "new"));
    assert.equal(await readFile(f, "utf8"), "old");
    assert.deepEqual((await readdir(sub)).sort(), ["blocker", "state.json"]);
  });

  test("exportSessionsJson round-trips through importSessionsJson (SQLite → PostgreSQL)", async () => {
    const out = path.join(dir, "export", "nested", "sessions.json");
    await withStore("sqlite", async (src) => {
      await src.put({
        key: "a",
        backend: "claude",
        backendSessionId: "sa",
        cwd: "/a",
        turns: 2,
        createdAt: 10,
        updatedAt: 30,
        lastError: "e",
        model: "m",
      });
      await src.put({
        key: "b",
        backend: "gemini",
        backendSessionId: "sb",
        cwd: "/b",
        turns: 0,
        createdAt: 10,
        updatedAt: 20,
      });
      assert.deepEqual(await exportSessionsJson(src, out), { count: 2 });
      const doc = JSON.parse(await readFile(out, "utf8")) as {
        format: string;
        version: number;
        sessions: Array<{ key: string }>;
      };
      assert.equal(doc.format, EXPORT_FORMAT);
      assert.equal(doc.version, 1);
      assert.deepEqual(
        doc.sessions.map((x) => x.key),
        ["a", "b"],
      );
      assert.equal((await stat(path.dirname(out))).mode & 0o777, 0o700);
      await withStore("postgres", async (dst) => {
        const r = await importSessionsJson(dst, out);
        assert.deepEqual(r, { total: 2, imported: 2, existing: 0, skipped: [] });
        assert.deepEqual(await dst.list(), await src.list());
      });
    });
  });
});
