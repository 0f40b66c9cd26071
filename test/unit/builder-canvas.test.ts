/**
 * Canvases: the pure edits (src/workflows/builder/canvas-ops.ts) and their store (src/workflows/builder/canvas-store.ts)
 * — ids from labels, the edge rules, recursive deletes, property keys, layouts; the store's
 * contract on both engines (a real SQLite and a real PostgreSQL): create/save/mutate, versions and
 * undo, two stores on one database editing at once; and persistence across reopening the file.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, afterEach, before, describe, test } from "node:test";
import type Database from "better-sqlite3";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { type Sql, SqliteSql } from "../../src/core/db/sql.js";
import {
  applyLayout,
  CanvasOpError,
  connectNodes,
  createNode,
  deleteNode,
  emptyCanvas,
  slugify,
  updateProperty,
} from "../../src/workflows/builder/canvas-ops.js";
import { CanvasStore } from "../../src/workflows/builder/canvas-store.js";
import { SandboxError } from "../../src/workflows/builder/sandbox.js";
import { CanvasTools, toToolError, ToolError } from "../../src/workflows/builder/canvas-tools.js";
import { EventBus } from "../../src/ops/events/bus.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import type { Canvas } from "../../src/wire/canvas.js";
import { openSystemsDb, systemsDbPath } from "../../src/workflows/systems/db.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const refused = (fn: () => unknown, code: string, message?: RegExp) =>
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof CanvasOpError, `a CanvasOpError, got ${String(e)}`);
    assert.equal(e.code, code);
    if (message) assert.match(e.message, message);
    return true;
  });

/** Build a canvas from [type, label, id?] triples and [from, to] edges. */
function canvasWith(nodes: Array<[string, string, string?]>, edges: Array<[string, string]> = []): Canvas {
  let c = emptyCanvas("demo");
  for (const [type, label, id] of nodes) c = createNode(c, { type, label, id }).canvas;
  for (const [from, to] of edges) c = connectNodes(c, { from, to }).canvas;
  return c;
}

describe("canvas ops", () => {
  test("emptyCanvas: a draft at version 0; an invalid system id is refused", () => {
    const c = emptyCanvas("news-digest", "News digest", "daily news");
    assert.equal(c.status, "draft");
    assert.equal(c.version, 0);
    assert.equal(c.name, "News digest");
    assert.deepEqual([c.nodes, c.edges, c.settings], [[], [], {}]);
    assert.equal(emptyCanvas("x").name, "x");
    refused(() => emptyCanvas("News Digest"), "invalid_system", /lower-case/);
    refused(() => emptyCanvas("../etc"), "invalid_system");
  });

  test("ids from labels: slug, -2/-3 on collision, the type when nothing is left; the input is not changed", () => {
    assert.equal(slugify("Fetch the News!"), "fetch-the-news");
    assert.equal(slugify("  Résumé  über  "), "resume-uber");
    const c0 = emptyCanvas("demo");
    const a = createNode(c0, { type: "agent", label: "Fetch News" });
    assert.equal(a.node.id, "fetch-news");
    assert.equal(c0.nodes.length, 0, "pure: the old canvas keeps its nodes");
    const b = createNode(a.canvas, { type: "agent", label: "fetch  news" });
    assert.equal(b.node.id, "fetch-news-2");
    const c = createNode(b.canvas, { type: "agent", label: "Fetch news?" });
    assert.equal(c.node.id, "fetch-news-3");
    const d = createNode(c.canvas, { type: "webhook", label: "!!!" });
    assert.equal(d.node.id, "webhook");
    const e = createNode(d.canvas, { type: "webhook", label: "???" });
    assert.equal(e.node.id, "webhook-2");
    const long = createNode(e.canvas, { type: "agent", label: "x".repeat(100) });
    assert.equal(long.node.id.length, 64);
    const long2 = createNode(long.canvas, { type: "agent", label: "x".repeat(100) });
    assert.equal(long2.node.id, `${"x".repeat(62)}-2`);
    assert.match(long2.node.id, /^[a-z0-9][a-z0-9_-]{0,63}$/);
  });

  test("explicit ids: valid and unused; unknown types list the types; label required", () => {
    const a = createNode(emptyCanvas("demo"), {
      type: "input",
      label: "Topic",
      id: "topic",
      properties: { type: "string" },
    });
    assert.equal(a.node.id, "topic");
    assert.deepEqual(a.node.properties, { type: "string" });
    refused(() => createNode(a.canvas, { type: "agent", label: "x", id: "topic" }), "duplicate_id", /already exists/);
    refused(() => createNode(a.canvas, { type: "agent", label: "x", id: "Bad Id" }), "invalid_id");
    refused(
      () => createNode(a.canvas, { type: "robot", label: "x" }),
      "unknown_type",
      /input, output, agent, webhook, command, mcp, approval, system/,
    );
    refused(() => createNode(a.canvas, { type: "agent", label: "  " }), "invalid_label");
    refused(
      () => createNode(a.canvas, { type: "agent", label: "x", properties: [] as unknown as Record<string, unknown> }),
      "invalid_properties",
    );
    refused(
      () =>
        createNode(a.canvas, { type: "agent", label: "x", properties: JSON.parse('{"__proto__": {"polluted": 1}}') }),
      "invalid_key",
    );
  });

  test("parent must exist; default positions fill a grid by creation order", () => {
    const c = canvasWith([
      ["agent", "A"],
      ["agent", "B"],
      ["agent", "C"],
      ["agent", "D"],
      ["agent", "E"],
    ]);
    assert.deepEqual(
      c.nodes.map((n) => n.position),
      [
        { x: 0, y: 0 },
        { x: 280, y: 0 },
        { x: 560, y: 0 },
        { x: 840, y: 0 },
        { x: 0, y: 140 },
      ],
    );
    refused(
      () => createNode(c, { type: "agent", label: "child", parent: "nope" }),
      "node_not_found",
      /parent node "nope".*Its nodes: a, b, c, d, e/,
    );
    const child = createNode(c, { type: "agent", label: "child", parent: "a", position: { x: 5, y: 6 } });
    assert.equal(child.node.parent, "a");
    assert.deepEqual(child.node.position, { x: 5, y: 6 });
    refused(
      () => createNode(c, { type: "agent", label: "x", position: { x: "1", y: 2 } as never }),
      "invalid_position",
    );
    // A spot taken by a placed node is skipped.
    const placed = createNode(emptyCanvas("demo"), { type: "agent", label: "p", position: { x: 280, y: 0 } }).canvas;
    assert.deepEqual(createNode(placed, { type: "agent", label: "q" }).node.position, { x: 560, y: 0 });
  });

  test("connect: edge ids, missing nodes, self-loop, duplicate, into input, out of output, cycle", () => {
    const c = canvasWith([
      ["input", "Topic"],
      ["agent", "Research"],
      ["agent", "Write"],
      ["output", "Result"],
    ]);
    const r = connectNodes(c, { from: "topic", to: "research" });
    assert.deepEqual(r.edge, { id: "e-topic-research", from: "topic", to: "research" });
    assert.equal(c.edges.length, 0, "pure");
    let k = r.canvas;
    k = connectNodes(k, { from: "research", to: "write" }).canvas;
    k = connectNodes(k, { from: "write", to: "result" }).canvas;
    refused(() => connectNodes(k, { from: "ghost", to: "write" }), "node_not_found", /ghost/);
    refused(() => connectNodes(k, { from: "write", to: "write" }), "self_loop");
    refused(() => connectNodes(k, { from: "research", to: "write" }), "duplicate_edge");
    refused(() => connectNodes(k, { from: "research", to: "topic" }), "edge_into_input", /input node/);
    refused(() => connectNodes(k, { from: "result", to: "research" }), "edge_from_output", /output node/);
    refused(() => connectNodes(k, { from: "write", to: "research" }), "cycle", /cycle/);
    const k2 = createNode(k, { type: "agent", label: "Edit" }).canvas;
    const k3 = connectNodes(k2, { from: "write", to: "edit" }).canvas;
    refused(() => connectNodes(k3, { from: "edit", to: "research" }), "cycle", /"research" already leads to "edit"/);
    assert.equal(
      connectNodes(k3, { from: "research", to: "edit" }).edge.id,
      "e-research-edit",
      "a diamond is no cycle",
    );
  });

  test("delete: the node, its edges, its children recursively and their edges", () => {
    let c = canvasWith([
      ["input", "In"],
      ["agent", "Group"],
      ["agent", "Other"],
      ["output", "Out"],
    ]);
    c = createNode(c, { type: "agent", label: "Child", parent: "group" }).canvas;
    c = createNode(c, { type: "agent", label: "Grandchild", parent: "child" }).canvas;
    c = connectNodes(c, { from: "in", to: "group" }).canvas;
    c = connectNodes(c, { from: "in", to: "other" }).canvas;
    c = connectNodes(c, { from: "child", to: "other" }).canvas;
    c = connectNodes(c, { from: "grandchild", to: "out" }).canvas;
    c = connectNodes(c, { from: "other", to: "out" }).canvas;
    const r = deleteNode(c, "group");
    assert.deepEqual(r.removedNodes, ["group", "child", "grandchild"]);
    assert.deepEqual(r.removedEdges.sort(), ["e-child-other", "e-grandchild-out", "e-in-group"]);
    assert.deepEqual(
      r.canvas.nodes.map((n) => n.id),
      ["in", "other", "out"],
    );
    assert.deepEqual(
      r.canvas.edges.map((e) => e.id),
      ["e-in-other", "e-other-out"],
    );
    assert.equal(c.nodes.length, 6, "pure");
    refused(() => deleteNode(c, "nope"), "node_not_found");
  });

  test("update: label, position, parent, properties, bare and dotted keys, null removes; id and type cannot change", () => {
    let c = canvasWith([
      ["agent", "Writer"],
      ["agent", "Group"],
      ["input", "Topic"],
    ]);
    const up = (key: string, value: unknown, node = "writer") => {
      const r = updateProperty(c, node, key, value);
      c = r.canvas;
      return r.node;
    };
    assert.equal(up("label", "  The writer ").label, "The writer");
    assert.deepEqual(up("position", { x: 10, y: 20 }).position, { x: 10, y: 20 });
    assert.deepEqual(up("position.y", 99).position, { x: 10, y: 99 });
    assert.equal(up("parent", "group").parent, "group");
    assert.equal(up("parent", null).parent, undefined);
    assert.deepEqual(up("properties", { model: "m1", prompt: "hi" }).properties, { model: "m1", prompt: "hi" });
    assert.deepEqual(up("properties.model", "m2").properties, { model: "m2", prompt: "hi" });
    assert.deepEqual(up("timeoutSeconds", 30).properties, { model: "m2", prompt: "hi", timeoutSeconds: 30 });
    assert.deepEqual(up("with.topic", "cats").properties.with, { topic: "cats" });
    assert.deepEqual(up("properties.with.lang", "en").properties.with, { topic: "cats", lang: "en" });
    assert.deepEqual(up("with.topic", null).properties.with, { lang: "en" });
    assert.equal("prompt" in up("prompt", null).properties, false, "null removes");
    assert.deepEqual(up("properties", null).properties, {});
    // A bare `type` is the property (an input's data type).
    assert.equal(up("type", "string", "topic").properties.type, "string");
    refused(() => updateProperty(c, "topic", "type", "agent"), "invalid_key", /type cannot change/);
    refused(() => updateProperty(c, "writer", "id", "new-id"), "invalid_key", /id cannot change/);
    refused(() => updateProperty(c, "writer", "label", null), "invalid_value");
    refused(() => updateProperty(c, "writer", "position.x", "5"), "invalid_value");
    refused(() => updateProperty(c, "writer", "parent", "writer"), "invalid_parent");
    refused(() => updateProperty(c, "writer", "parent", "ghost"), "node_not_found");
    refused(() => updateProperty(c, "writer", "a..b", 1), "invalid_key");
    refused(() => updateProperty(c, "writer", "__proto__.x", 1), "invalid_key");
    refused(() => updateProperty(c, "ghost", "label", "x"), "node_not_found");
    // A parent cannot become its own descendant's child.
    c = updateProperty(c, "writer", "parent", "group").canvas;
    refused(() => updateProperty(c, "group", "parent", "writer"), "invalid_parent", /children/);
    // Going through a non-object is refused, not silently replaced.
    c = updateProperty(c, "writer", "model", "m").canvas;
    refused(() => updateProperty(c, "writer", "model.name", "x"), "invalid_key", /not an object/);
    // The returned node is a copy.
    const n = updateProperty(c, "writer", "tags", ["a"]).node;
    (n.properties.tags as string[]).push("b");
    assert.deepEqual(c.nodes.find((x) => x.id === "writer")!.properties.tags, undefined);
  });

  test("layouts: layered columns by longest path; grid rows of 4", () => {
    const c = canvasWith(
      [
        ["input", "A"],
        ["input", "B"],
        ["agent", "C"],
        ["agent", "D"],
        ["output", "E"],
        ["agent", "Lone"],
      ],
      [
        ["a", "c"],
        ["b", "d"],
        ["c", "d"],
        ["d", "e"],
        ["a", "e"],
      ],
    );
    const pos = (k: Canvas) => Object.fromEntries(k.nodes.map((n) => [n.id, n.position]));
    assert.deepEqual(pos(applyLayout(c, "layered")), {
      a: { x: 0, y: 0 },
      b: { x: 0, y: 140 },
      c: { x: 280, y: 0 },
      d: { x: 560, y: 0 },
      e: { x: 840, y: 0 },
      lone: { x: 0, y: 280 },
    });
    assert.deepEqual(pos(applyLayout(c, "grid")), {
      a: { x: 0, y: 0 },
      b: { x: 280, y: 0 },
      c: { x: 560, y: 0 },
      d: { x: 840, y: 0 },
      e: { x: 0, y: 140 },
      lone: { x: 280, y: 140 },
    });
    refused(() => applyLayout(c, "circle" as never), "invalid_layout");
  });
});

/** A store operation refused with a CanvasOpError of `code`. */
const rejected = (p: Promise<unknown>, code: string) =>
  assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof CanvasOpError, `a CanvasOpError, got ${String(e)}`);
    assert.equal(e.code, code);
    return true;
  });

/** SQLite: systems.db with a CanvasStore over the one SqliteSql of it. */
const sqliteStore = (db: Database.Database) => new CanvasStore(new SqliteSql(db));

// The store's contract, the same cases on both engines of the systems floor's store.
for (const engine of ["sqlite", "postgres"] as const)
  describe(`canvas store (${engine})`, () => {
    let pg: TestPostgres | undefined;
    /** PostgreSQL: one database for the file (migrated), emptied after each test. */
    let url = "";
    let shared: PostgresDb | undefined;
    /** systems.db of each store (the system versions); closed after each test. */
    const dbs: Database.Database[] = [];
    before(async () => {
      if (engine !== "postgres") return;
      pg = await startPostgres();
      url = await pg.database();
      shared = await PostgresDb.open({ url });
    });
    afterEach(async () => {
      for (const db of dbs.splice(0)) db.close();
      await shared?.run("DELETE FROM canvases");
      await shared?.run("DELETE FROM canvas_versions");
    });
    after(async () => {
      await shared?.close();
      await pg?.stop();
    });

    const store = (sql?: Sql) => {
      const db = openSystemsDb(":memory:");
      dbs.push(db);
      return sql ? new CanvasStore(sql) : shared ? new CanvasStore(shared) : sqliteStore(db);
    };

    test("create, get, list, save; an existing id is refused", async () => {
      const s = store();
      const c = await s.create({ system: "digest", name: "Digest", description: "d" });
      assert.equal(c.version, 0);
      assert.equal(c.status, "draft");
      assert.deepEqual(await s.get("digest"), c);
      await rejected(s.create({ system: "digest" }), "canvas_exists");
      await rejected(s.create({ system: "Bad" }), "invalid_system");
      assert.equal(await s.get("nope"), undefined);
      const next = createNode(c, { type: "agent", label: "A" }).canvas;
      const saved = await s.save(next);
      assert.ok(saved.updatedAt > c.updatedAt, "save bumps updatedAt");
      assert.deepEqual(
        (await s.get("digest"))!.nodes.map((n) => n.id),
        ["a"],
      );
      await rejected(s.save(emptyCanvas("ghost")), "canvas_not_found");
      await s.create({ system: "other" });
      assert.deepEqual((await s.list()).map((x) => x.system).sort(), ["digest", "other"]);
      assert.equal(await s.delete("other"), true);
      assert.equal(await s.delete("other"), false);
      assert.deepEqual(await s.versions("other"), []);
    });

    test("mutate: one transaction; a throw writes nothing; create on demand; the id cannot change", async () => {
      const s = store();
      await rejected(
        s.mutate("fresh", (c) => c),
        "canvas_not_found",
      );
      const seen: boolean[] = [];
      const made = await s.mutate(
        "fresh",
        (c, created) => (seen.push(created), createNode(c, { type: "agent", label: "A" }).canvas),
        { create: {} },
      );
      assert.equal(made.nodes.length, 1);
      await s.mutate("fresh", (c, created) => (seen.push(created), c), { create: {} });
      assert.deepEqual(seen, [true, false], "fn is told whether the canvas was just created");
      await assert.rejects(
        s.mutate(
          "brand-new",
          () => {
            throw new Error("no");
          },
          { create: {} },
        ),
      );
      assert.equal(await s.get("brand-new"), undefined, "a throw writes nothing, not even the created canvas");
      assert.deepEqual(await s.versions("brand-new"), []);
      assert.deepEqual(
        (await s.versions("fresh")).map((v) => v.version),
        [0],
      );
      await assert.rejects(
        s.mutate("fresh", (c) => createNode(c, { type: "agent", label: "B", parent: "nope" }).canvas),
      );
      assert.equal((await s.get("fresh"))!.nodes.length, 1, "the failed edit left nothing");
      await rejected(
        s.mutate("fresh", (c) => ({ ...c, system: "other" })),
        "invalid_system",
      );
      // Edits in a row each see the previous one (no lost update).
      for (let i = 0; i < 10; i++) await s.mutate("fresh", (c) => createNode(c, { type: "agent", label: "n" }).canvas);
      assert.equal((await s.get("fresh"))!.nodes.length, 11);
    });

    test("two stores on one database (two handles, two bridges): concurrent mutations lose nothing", async () => {
      const file = path.join(mkdtempSync(path.join(tmpdir(), "cb-canvas-")), "systems.db");
      const [s1, s2] = await (async () => {
        if (engine === "sqlite") {
          const [db1, db2] = [openSystemsDb(file), openSystemsDb(file)];
          dbs.push(db1, db2);
          return [sqliteStore(db1), sqliteStore(db2)];
        }
        const other = await PostgresDb.open({ url });
        after(() => other.close());
        return [store(), store(other)];
      })();
      try {
        // Both create the canvas on their first edit: it is created once. PostgreSQL: all at once.
        // SQLite: in turns (two connections of one process would wait on each other synchronously:
        // the bridge keeps one per file; `clawbridge mcp` is another process).
        const edit = (i: number) =>
          (i % 2 ? s1 : s2).mutate("shared", (c) => createNode(c, { type: "agent", label: `n${i}` }).canvas, {
            create: {},
          });
        if (engine === "postgres") await Promise.all(Array.from({ length: 20 }, (_, i) => edit(i)));
        else for (let i = 0; i < 20; i++) await edit(i);
        assert.equal((await s1.get("shared"))!.nodes.length, 20);
        assert.equal((await s2.get("shared"))!.nodes.length, 20);
        assert.deepEqual(
          (await s2.versions("shared")).map((v) => v.version),
          [0],
        );
      } finally {
        rmSync(path.dirname(file), { recursive: true, force: true });
      }
    });

    test("commitVersion and undo: back one version, back to 0, then nothing to undo", async () => {
      const s = store();
      await s.create({ system: "v" });
      await s.mutate("v", (c) => createNode(c, { type: "agent", label: "A" }).canvas);
      assert.equal(await s.commitVersion("v", "add A"), 1);
      await s.mutate("v", (c) => createNode(c, { type: "agent", label: "B" }).canvas);
      assert.equal(await s.commitVersion("v", "add B"), 2);
      assert.equal((await s.get("v"))!.version, 2);
      assert.deepEqual(
        (await s.versions("v")).map((v) => [v.version, v.reason]),
        [
          [0, "created"],
          [1, "add A"],
          [2, "add B"],
        ],
      );
      assert.ok((await s.versions("v")).every((v) => typeof v.createdAt === "number" && v.createdAt > 0));
      await s.setStatus("v", "deployed");
      // An uncommitted edit is dropped by undo too.
      await s.mutate("v", (c) => createNode(c, { type: "agent", label: "C" }).canvas);
      const one = (await s.undo("v"))!;
      assert.equal(one.version, 1);
      assert.deepEqual(
        one.nodes.map((n) => n.id),
        ["a"],
      );
      assert.equal(one.status, "deployed", "status is not part of a snapshot");
      assert.deepEqual(
        (await s.versions("v")).map((v) => v.version),
        [0, 1],
      );
      const zero = (await s.undo("v"))!;
      assert.equal(zero.version, 0);
      assert.deepEqual(zero.nodes, []);
      assert.equal(await s.undo("v"), undefined, "nothing before version 0");
      assert.deepEqual(
        (await s.versions("v")).map((v) => v.version),
        [0],
      );
      // Committing again after an undo reuses the number.
      await s.mutate("v", (c) => createNode(c, { type: "agent", label: "Z" }).canvas);
      assert.equal(await s.commitVersion("v", "add Z"), 1);
      assert.deepEqual(
        (await s.versions("v")).map((v) => [v.version, v.reason]),
        [
          [0, "created"],
          [1, "add Z"],
        ],
      );
      await rejected(s.setStatus("v", "live" as never), "invalid_status");
      await rejected(s.commitVersion("ghost", "x"), "canvas_not_found");
    });
  });

describe("canvas store (sqlite file)", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "cb-canvas-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test("persists across reopening the file, in the same database as runs", async () => {
    const file = systemsDbPath(path.join(dir, "data"));
    let db = openSystemsDb(file);
    let store = sqliteStore(db);
    await store.create({ system: "kept", name: "Kept" });
    await store.mutate(
      "kept",
      (c) =>
        connectNodes(
          createNode(createNode(c, { type: "input", label: "In" }).canvas, { type: "agent", label: "Go" }).canvas,
          { from: "in", to: "go" },
        ).canvas,
    );
    await store.commitVersion("kept", "first");
    await store.setStatus("kept", "deployed");
    const before = (await store.get("kept"))!;
    db.close();
    db = openSystemsDb(file);
    try {
      const tables = (
        db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).all() as Array<{ name: string }>
      ).map((t) => t.name);
      assert.ok(
        tables.includes("runs") && tables.includes("canvases") && tables.includes("canvas_versions"),
        tables.join(","),
      );
      store = sqliteStore(db);
      assert.deepEqual(await store.get("kept"), before);
      assert.equal((await store.get("kept"))!.status, "deployed");
      assert.deepEqual(
        (await store.versions("kept")).map((v) => v.version),
        [0, 1],
      );
      assert.deepEqual((await store.undo("kept"))!.nodes, []);
    } finally {
      db.close();
    }
  });
});

describe("canvas tools", () => {
  test("errors: canvas and sandbox refusals are not retryable; a busy database or EMFILE is", () => {
    const op = toToolError(new CanvasOpError("cycle", "would loop"));
    assert.deepEqual([op.code, op.retryable, op.message], ["cycle", false, "would loop"]);
    const sb = toToolError(new SandboxError("escape", "outside"));
    assert.deepEqual([sb.code, sb.retryable], ["escape", false]);
    const busy = toToolError(Object.assign(new Error("database is locked"), { code: "SQLITE_BUSY" }));
    assert.deepEqual([busy.code, busy.retryable], ["busy", true]);
    assert.equal(
      toToolError(Object.assign(new Error("locked"), { code: "SQLITE_LOCKED_SHAREDCACHE" })).retryable,
      true,
    );
    assert.equal(toToolError(Object.assign(new Error("too many open files"), { code: "EMFILE" })).retryable, true);
    assert.equal(toToolError(Object.assign(new Error("again"), { code: "EAGAIN" })).retryable, true);
    const other = toToolError(Object.assign(new Error("constraint"), { code: "SQLITE_CONSTRAINT" }));
    assert.deepEqual([other.code, other.retryable], ["internal_error", false]);
    assert.equal(toToolError(new Error("boom")).retryable, false);
    const same = new ToolError("x", "y", true);
    assert.equal(toToolError(same), same);
  });

  test("direct calls: implicit canvas, events per change, ToolError on refusal", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "cb-tools-"));
    const db = openSystemsDb(":memory:");
    try {
      const bus = new EventBus();
      const events: BridgeEvent[] = [];
      bus.on((e) => void events.push(e));
      const tools = new CanvasTools({ store: sqliteStore(db), dataDir, bus });
      assert.equal((await tools.createNode("t", { type: "input", label: "In" })).canvasCreated, true);
      assert.equal((await tools.createNode("t", { type: "agent", label: "Go", parent: "in" })).canvasCreated, false);
      assert.equal((await tools.connectNodes("t", { from: "in", to: "go" })).edgeId, "e-in-go");
      assert.equal((await tools.updateProperty("t", { node: "go", key: " model ", value: "m" })).key, "model");
      await assert.rejects(
        tools.connectNodes("t", { from: "go", to: "in" }),
        (e: unknown) => e instanceof ToolError && e.code === "edge_into_input" && !e.retryable,
      );
      await assert.rejects(
        tools.createNode("Not Valid", { type: "agent", label: "x" }),
        (e: unknown) => e instanceof ToolError && e.code === "invalid_system",
      );
      assert.deepEqual((await tools.deleteNode("t", { node: "in" })).removedNodes, ["in", "go"]);
      assert.deepEqual(
        events.map((e) => e.type),
        [
          "node.created",
          "node.created",
          "edge.created",
          "node.updated",
          "edge.deleted",
          "node.deleted",
          "node.deleted",
        ],
      );
      assert.deepEqual(await tools.getState(), {
        canvases: [
          {
            system: "t",
            name: "t",
            description: "",
            status: "draft",
            version: 0,
            nodes: 0,
            edges: 0,
            updatedAt: (await tools.store.get("t"))!.updatedAt,
          },
        ],
      });
      assert.deepEqual(await tools.createFile("t", "a/b.txt", "hi"), { system: "t", path: "a/b.txt", bytes: 2 });
      await assert.rejects(
        tools.readFile("t", "../../x"),
        (e: unknown) => e instanceof ToolError && e.code === "escape" && !e.retryable,
      );
    } finally {
      db.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
