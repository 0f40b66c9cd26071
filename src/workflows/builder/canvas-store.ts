/**
 * Where canvases are kept: two tables in the systems database (`<dataDir>/systems.db`, the same
 * handle as runs and router state, src/workflows/systems/db.ts).
 *
 * - `canvases`: one row per system, its current state (the whole `Canvas` as JSON; `status`,
 *   `version` and `updated_at` are also columns, and win over the JSON when read);
 * - `canvas_versions`: snapshots. Version 0 is taken at creation; `commitVersion` takes version
 *   n+1 after a plan was applied; `undo` restores version n-1 as the current state and drops the
 *   snapshot n (edits since the last commit are dropped too). `status` (draft/deployed) is not part
 *   of a snapshot: `setStatus` owns it.
 *
 * Writes are synchronous (better-sqlite3). `mutate` reads, applies and writes in ONE immediate
 * transaction (the write lock is taken before the read), so two MCP hosts editing the same canvas
 * at once — two requests of the bridge, or the bridge and a `clawbridge mcp` process on the same
 * file — never lose an update.
 */
import type Database from "better-sqlite3";
import { CanvasOpError, emptyCanvas } from "./canvas-ops.js";
import type { Canvas, CanvasStatus, CanvasVersionInfo } from "../../wire/canvas.js";

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

/** A canvas as the named parameters of the insert and the update. */
const rowOf = (c: Canvas) => ({
  system: c.system,
  state: JSON.stringify(c),
  status: c.status,
  version: c.version,
  updatedAt: c.updatedAt,
});

export class CanvasStore {
  private readonly stmts;

  constructor(readonly db: Database.Database) {
    db.exec(SCHEMA);
    this.stmts = {
      all: db.prepare(`SELECT * FROM canvases ORDER BY updated_at DESC, system`),
      get: db.prepare(`SELECT * FROM canvases WHERE system = ?`),
      insert: db.prepare(
        `INSERT INTO canvases (system, state, status, version, updated_at) VALUES (@system, @state, @status, @version, @updatedAt)`,
      ),
      update: db.prepare(
        `UPDATE canvases SET state = @state, status = @status, version = @version, updated_at = @updatedAt WHERE system = @system`,
      ),
      snapshot: db.prepare(
        `INSERT OR REPLACE INTO canvas_versions (system, version, state, reason, created_at) VALUES (?, ?, ?, ?, ?)`,
      ),
      snapshotOf: db.prepare(`SELECT state FROM canvas_versions WHERE system = ? AND version = ?`),
      dropSnapshotsFrom: db.prepare(`DELETE FROM canvas_versions WHERE system = ? AND version >= ?`),
      versions: db.prepare(`SELECT version, reason, created_at FROM canvas_versions WHERE system = ? ORDER BY version`),
      delete: db.prepare(`DELETE FROM canvases WHERE system = ?`),
      deleteVersions: db.prepare(`DELETE FROM canvas_versions WHERE system = ?`),
    };
  }

  private fromRow(row: Row): Canvas {
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

  private mustRead(system: string): Canvas {
    const c = this.get(system);
    if (!c)
      throw new CanvasOpError(
        "canvas_not_found",
        `No canvas "${system}". Create a node on it to start one, or list the canvases with canvas_get_state.`,
      );
    return c;
  }

  /** The next updatedAt: now, but always after the previous one (so a change is always visible). */
  private stamp(prev?: number): number {
    const now = Date.now();
    return prev !== undefined && now <= prev ? prev + 1 : now;
  }

  private write(c: Canvas, prevUpdatedAt: number): Canvas {
    const saved: Canvas = { ...c, updatedAt: this.stamp(prevUpdatedAt) };
    this.stmts.update.run(rowOf(saved));
    return saved;
  }

  private insertNew(args: { system: string; name?: string; description?: string }): Canvas {
    const c = emptyCanvas(args.system, args.name, args.description);
    if (this.stmts.get.get(c.system))
      throw new CanvasOpError(
        "canvas_exists",
        `A canvas "${c.system}" exists already. Edit it, or pick another system id.`,
      );
    this.stmts.insert.run(rowOf(c));
    this.stmts.dropSnapshotsFrom.run(c.system, 0); // leftovers of an earlier canvas of that id
    this.stmts.snapshot.run(c.system, 0, JSON.stringify(c), "created", c.updatedAt);
    return c;
  }

  list(): Canvas[] {
    return (this.stmts.all.all() as Row[]).map((r) => this.fromRow(r));
  }

  get(system: string): Canvas | undefined {
    const row = this.stmts.get.get(system) as Row | undefined;
    return row ? this.fromRow(row) : undefined;
  }

  /** A new draft canvas at version 0 (snapshotted as version 0). An existing id is refused. */
  create(args: { system: string; name?: string; description?: string }): Canvas {
    return this.db.transaction(() => this.insertNew(args)).immediate();
  }

  /** Write `canvas` as the current state of its system (which must exist); returns it with the new updatedAt. */
  save(canvas: Canvas): Canvas {
    return this.db
      .transaction(() => {
        const cur = this.mustRead(canvas.system);
        return this.write(canvas, cur.updatedAt);
      })
      .immediate();
  }

  /**
   * Read the canvas, apply `fn`, write the result — one immediate transaction. `fn` gets a copy it
   * may change or replace; it must keep the system id. With `create`, a canvas that does not exist
   * yet is created (draft, version 0) first, in the same transaction, and `fn` is told so
   * (`created`). A throw in `fn` writes nothing (not even the created canvas).
   */
  mutate(
    system: string,
    fn: (c: Canvas, created: boolean) => Canvas,
    opts: { create?: { name?: string; description?: string } } = {},
  ): Canvas {
    return this.db
      .transaction(() => {
        let cur = this.get(system);
        let created = false;
        if (!cur && opts.create) {
          cur = this.insertNew({ system, ...opts.create });
          created = true;
        }
        if (!cur) cur = this.mustRead(system);
        const next = fn(structuredClone(cur), created);
        if (next.system !== cur.system)
          throw new CanvasOpError(
            "invalid_system",
            `A canvas cannot change its system id ("${cur.system}" → "${next.system}").`,
          );
        return this.write(next, cur.updatedAt);
      })
      .immediate();
  }

  /** Snapshot the current state as version+1 (with why); the canvas's version becomes that number. */
  commitVersion(system: string, reason: string): number {
    return this.db
      .transaction(() => {
        const cur = this.mustRead(system);
        const version = cur.version + 1;
        const saved = this.write({ ...cur, version }, cur.updatedAt);
        this.stmts.dropSnapshotsFrom.run(system, version);
        this.stmts.snapshot.run(system, version, JSON.stringify(saved), reason, saved.updatedAt);
        return version;
      })
      .immediate();
  }

  /**
   * Back one version: the snapshot of version-1 becomes the current state (status kept) and the
   * latest snapshot is dropped. At version 0 there is nothing to undo: undefined.
   */
  undo(system: string): Canvas | undefined {
    return this.db
      .transaction(() => {
        const cur = this.mustRead(system);
        if (cur.version <= 0) return undefined;
        const target = cur.version - 1;
        const snap = this.stmts.snapshotOf.get(system, target) as { state: string } | undefined;
        if (!snap)
          throw new CanvasOpError(
            "canvas_not_found",
            `Canvas "${system}" has no snapshot of version ${target} to go back to.`,
          );
        const prev = JSON.parse(snap.state) as Canvas;
        const restored = this.write(
          { ...prev, system, version: target, status: cur.status, settings: prev.settings ?? {} },
          cur.updatedAt,
        );
        this.stmts.dropSnapshotsFrom.run(system, cur.version);
        return restored;
      })
      .immediate();
  }

  versions(system: string): CanvasVersionInfo[] {
    return (this.stmts.versions.all(system) as Array<{ version: number; reason: string; created_at: number }>).map(
      (r) => ({
        version: Number(r.version),
        reason: r.reason,
        createdAt: Number(r.created_at),
      }),
    );
  }

  setStatus(system: string, status: CanvasStatus): Canvas {
    if (!STATUSES.includes(status))
      throw new CanvasOpError(
        "invalid_status",
        `Unknown canvas status "${String(status)}": use ${STATUSES.join(" or ")}.`,
      );
    return this.mutate(system, (c) => ({ ...c, status }));
  }

  /** Drop the canvas and its snapshots. Whether it existed. */
  delete(system: string): boolean {
    return this.db
      .transaction(() => {
        const n = this.stmts.delete.run(system).changes;
        this.stmts.deleteVersions.run(system);
        return n > 0;
      })
      .immediate();
  }
}
