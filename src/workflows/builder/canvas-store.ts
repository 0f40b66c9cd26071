/**
 * Where canvases are kept: two tables of the systems floor's store (the `Sql` of the systems
 * runtime, src/workflows/router/runtime.ts: `<dataDir>/systems.db`, the same SQLite handle as runs
 * and conversation states, or the PostgreSQL of `store: { kind: postgres }`, migration 5).
 *
 * - `canvases`: one row per system, its current state (the whole `Canvas` as JSON; `status`,
 *   `version` and `updated_at` are also columns, and win over the JSON when read);
 * - `canvas_versions`: snapshots. Version 0 is taken at creation; `commitVersion` takes version
 *   n+1 after a plan was applied; `undo` restores version n-1 as the current state and drops the
 *   snapshot n (edits since the last commit are dropped too). `status` (draft/deployed) is not part
 *   of a snapshot: `setStatus` owns it.
 *
 * `mutate` reads, applies and writes in ONE transaction that holds the canvas's row from the read
 * on (SQLite: an immediate transaction, the write lock taken before the read; PostgreSQL: the row
 * read `FOR UPDATE`, a canvas created by two at once inserted once), so two MCP hosts editing the
 * same canvas at once — two requests of the bridge, the bridge and a `clawbridge mcp` process on the
 * same file, or two bridges on one database — never lose an update.
 */
import { type Sql, type SqlQueries, SqliteSql } from "../../core/db/sql.js";
import { CanvasOpError, emptyCanvas } from "./canvas-ops.js";
import type { Canvas, CanvasStatus, CanvasVersionInfo } from "../../wire/canvas.js";

/** The SQLite tables (PostgreSQL's are migration 5 of src/core/db/pg-migrations.ts). */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS canvases (
  system TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'draft',
  version INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS canvas_versions (
  system TEXT NOT NULL,
  version INTEGER NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  created_at INTEGER NOT NULL,
  PRIMARY KEY (system, version)
);
`;

const STATUSES: readonly CanvasStatus[] = ["draft", "deployed"];

interface Row {
  system: string;
  state: string;
  status: string;
  version: number;
  updated_at: number;
}

/** The SQL of the store, one for both engines. */
const Q = {
  all: `SELECT * FROM canvases ORDER BY updated_at DESC, system`,
  get: `SELECT * FROM canvases WHERE system = ?`,
  insert: `INSERT INTO canvases (system, state, status, version, updated_at) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (system) DO NOTHING`,
  update: `UPDATE canvases SET state = ?, status = ?, version = ?, updated_at = ? WHERE system = ?`,
  snapshot: `INSERT INTO canvas_versions (system, version, state, reason, created_at) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (system, version) DO UPDATE SET state = excluded.state, reason = excluded.reason,
      created_at = excluded.created_at`,
  snapshotOf: `SELECT state FROM canvas_versions WHERE system = ? AND version = ?`,
  dropSnapshotsFrom: `DELETE FROM canvas_versions WHERE system = ? AND version >= ?`,
  versions: `SELECT version, reason, created_at FROM canvas_versions WHERE system = ? ORDER BY version`,
  delete: `DELETE FROM canvases WHERE system = ?`,
  deleteVersions: `DELETE FROM canvas_versions WHERE system = ?`,
};

function fromRow(row: Row): Canvas {
  const c = JSON.parse(row.state) as Canvas;
  return {
    ...c,
    system: row.system,
    status: row.status as CanvasStatus,
    version: Number(row.version),
    updatedAt: Number(row.updated_at),
    settings: c.settings ?? {},
  };
}

/** The next updatedAt: now, but always after the previous one (so a change is always visible). */
function stamp(prev: number): number {
  const now = Date.now();
  return now <= prev ? prev + 1 : now;
}

export class CanvasStore {
  /** `sql`: the systems floor's store (its SQLite tables are created here). */
  constructor(readonly sql: Sql) {
    if (sql instanceof SqliteSql) sql.db.exec(SCHEMA);
  }

  /** The canvas, its row held until the transaction `q` ends (PostgreSQL; SQLite's immediate transaction holds it all). */
  private async read(q: SqlQueries, system: string): Promise<Canvas | undefined> {
    const row = await q.get<Row>(q.dialect === "postgres" ? `${Q.get} FOR UPDATE` : Q.get, [system]);
    return row ? fromRow(row) : undefined;
  }

  private async mustRead(q: SqlQueries, system: string): Promise<Canvas> {
    const c = await this.read(q, system);
    if (!c)
      throw new CanvasOpError(
        "canvas_not_found",
        `No canvas "${system}". Create a node on it to start one, or list the canvases with canvas_get_state.`,
      );
    return c;
  }

  private async write(q: SqlQueries, c: Canvas, prevUpdatedAt: number): Promise<Canvas> {
    const saved: Canvas = { ...c, updatedAt: stamp(prevUpdatedAt) };
    await q.run(Q.update, [JSON.stringify(saved), saved.status, saved.version, saved.updatedAt, saved.system]);
    return saved;
  }

  /** A new canvas, or undefined when one of that id exists (it is left as it is). */
  private async insertNew(
    q: SqlQueries,
    args: { system: string; name?: string; description?: string },
  ): Promise<Canvas | undefined> {
    const c = emptyCanvas(args.system, args.name, args.description);
    const state = JSON.stringify(c);
    if ((await q.run(Q.insert, [c.system, state, c.status, c.version, c.updatedAt])).changes === 0) return undefined;
    await q.run(Q.dropSnapshotsFrom, [c.system, 0]); // leftovers of an earlier canvas of that id
    await q.run(Q.snapshot, [c.system, 0, state, "created", c.updatedAt]);
    return c;
  }

  async list(): Promise<Canvas[]> {
    return (await this.sql.all<Row>(Q.all)).map(fromRow);
  }

  async get(system: string): Promise<Canvas | undefined> {
    const row = await this.sql.get<Row>(Q.get, [system]);
    return row ? fromRow(row) : undefined;
  }

  /** A new draft canvas at version 0 (snapshotted as version 0). An existing id is refused. */
  create(args: { system: string; name?: string; description?: string }): Promise<Canvas> {
    return this.sql.tx(async (q) => {
      const c = await this.insertNew(q, args);
      if (!c)
        throw new CanvasOpError(
          "canvas_exists",
          `A canvas "${args.system}" exists already. Edit it, or pick another system id.`,
        );
      return c;
    });
  }

  /** Write `canvas` as the current state of its system (which must exist); returns it with the new updatedAt. */
  save(canvas: Canvas): Promise<Canvas> {
    return this.sql.tx(async (q) => {
      const cur = await this.mustRead(q, canvas.system);
      return this.write(q, canvas, cur.updatedAt);
    });
  }

  /**
   * Read the canvas, apply `fn`, write the result — one transaction. `fn` gets a copy it may change
   * or replace; it must keep the system id. With `create`, a canvas that does not exist yet is
   * created (draft, version 0) first, in the same transaction, and `fn` is told so (`created`). A
   * throw in `fn` writes nothing (not even the created canvas).
   */
  mutate(
    system: string,
    fn: (c: Canvas, created: boolean) => Canvas,
    opts: { create?: { name?: string; description?: string } } = {},
  ): Promise<Canvas> {
    return this.sql.tx(async (q) => {
      const made = opts.create ? await this.insertNew(q, { system, ...opts.create }) : undefined;
      const cur = made ?? (await this.mustRead(q, system));
      const next = fn(structuredClone(cur), made !== undefined);
      if (next.system !== cur.system)
        throw new CanvasOpError(
          "invalid_system",
          `A canvas cannot change its system id ("${cur.system}" → "${next.system}").`,
        );
      return this.write(q, next, cur.updatedAt);
    });
  }

  /** Snapshot the current state as version+1 (with why); the canvas's version becomes that number. */
  commitVersion(system: string, reason: string): Promise<number> {
    return this.sql.tx(async (q) => {
      const cur = await this.mustRead(q, system);
      const version = cur.version + 1;
      const saved = await this.write(q, { ...cur, version }, cur.updatedAt);
      await q.run(Q.dropSnapshotsFrom, [system, version]);
      await q.run(Q.snapshot, [system, version, JSON.stringify(saved), reason, saved.updatedAt]);
      return version;
    });
  }

  /**
   * Back one version: the snapshot of version-1 becomes the current state (status kept) and the
   * latest snapshot is dropped. At version 0 there is nothing to undo: undefined.
   */
  undo(system: string): Promise<Canvas | undefined> {
    return this.sql.tx(async (q) => {
      const cur = await this.mustRead(q, system);
      if (cur.version <= 0) return undefined;
      const target = cur.version - 1;
      const snap = await q.get<{ state: string }>(Q.snapshotOf, [system, target]);
      if (!snap)
        throw new CanvasOpError(
          "canvas_not_found",
          `Canvas "${system}" has no snapshot of version ${target} to go back to.`,
        );
      const prev = JSON.parse(snap.state) as Canvas;
      const restored = await this.write(
        q,
        { ...prev, system, version: target, status: cur.status, settings: prev.settings ?? {} },
        cur.updatedAt,
      );
      await q.run(Q.dropSnapshotsFrom, [system, cur.version]);
      return restored;
    });
  }

  async versions(system: string): Promise<CanvasVersionInfo[]> {
    const rows = await this.sql.all<{ version: number; reason: string; created_at: number }>(Q.versions, [system]);
    return rows.map((r) => ({ version: Number(r.version), reason: r.reason, createdAt: Number(r.created_at) }));
  }

  async setStatus(system: string, status: CanvasStatus): Promise<Canvas> {
    if (!STATUSES.includes(status))
      throw new CanvasOpError(
        "invalid_status",
        `Unknown canvas status "${String(status)}": use ${STATUSES.join(" or ")}.`,
      );
    return this.mutate(system, (c) => ({ ...c, status }));
  }

  /** Drop the canvas and its snapshots. Whether it existed. */
  delete(system: string): Promise<boolean> {
    return this.sql.tx(async (q) => {
      const n = (await q.run(Q.delete, [system])).changes;
      await q.run(Q.deleteVersions, [system]);
      return n > 0;
    });
  }
}
