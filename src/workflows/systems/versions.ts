/**
 * A system's versions: every deploy — and every load of a system from the config or a hand-written
 * file whose content changed — is an immutable, numbered version in the `system_versions` table
 * of the systems' store (the one `Sql` of the runtime, src/core/db/sql.ts: systems.db, or the
 * PostgreSQL every instance shares, where two instances loading the same content record it once). A version keeps the system
 * as the library checked it (`compiled`: what a run of that version executes, settings included),
 * its definition in the file form (`definition`: what a rollback writes back, and what a diff
 * compares), the builder's canvas when the builder deployed it, and the sha256 of each sandbox
 * file. Versions are never changed or deleted: a rollback to version 2 is a NEW version whose
 * definition is version 2's. A run records its version (`runs.version`) and runs that version's
 * plan, so a deploy never changes a run in progress, and a resumed run goes on where it was.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { type Sql, type SqlQueries, SqliteSql } from "../../core/db/sql.js";
import type { SystemsLibrary } from "./library.js";
import { sandboxDir } from "./paths.js";
import type { LoadedSystem } from "./types.js";

/** Who made a version: a load of the config or a file, the builder's deploy, or a rollback. */
export type VersionBy = "config" | "file" | "builder" | "rollback";

export interface SystemVersion {
  system: string;
  number: number;
  createdAt: number;
  /** Where the system was declared when the version was made: `config` or the file's path. */
  source: string;
  by: VersionBy;
  /** Why, in words ("rollback to 2", "deployed from canvas version 5"); "" when none. */
  note: string;
  /** sha256 of the compiled system (its source aside) and its sandbox files' hashes. */
  hash: string;
  /** The system in the form of a system file (what a rollback writes back). */
  definition: Record<string, unknown>;
  /** The system as the library checked it: a run of this version executes `compiled.run`. */
  compiled: LoadedSystem;
  /** The builder's canvas it was deployed from (null when it was not). */
  canvas: unknown;
  /** Sandbox file (relative path) → sha256. */
  files: Record<string, string>;
}

/** What the bridge knows of a version about to be recorded, beyond the system itself. */
export interface VersionMade {
  system: string;
  by: VersionBy;
  note?: string;
  canvas?: unknown;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS system_versions (
  system TEXT NOT NULL,
  number INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  source TEXT NOT NULL,
  made_by TEXT NOT NULL,
  note TEXT NOT NULL DEFAULT '',
  hash TEXT NOT NULL,
  definition TEXT NOT NULL,
  compiled TEXT NOT NULL,
  canvas TEXT,
  files TEXT NOT NULL,
  PRIMARY KEY (system, number)
);
`;

/** A sandbox of more files than this is hashed up to this many (the rest are counted under `…`). */
const MAX_FILES = 2000;

/** JSON with sorted keys: the same value always gives the same text (and hash). */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

/** A loaded system in the form of a system file (it loads back to the same system). */
export function definitionOf(s: LoadedSystem): Record<string, unknown> {
  return {
    id: s.id,
    name: s.name,
    description: s.description,
    examples: s.examples,
    keywords: s.keywords,
    inputs: s.inputs,
    sideEffects: s.sideEffects,
    confirm: s.confirm,
    enabled: s.enabled,
    run: s.run,
  };
}

/** sha256 of each file under the system's sandbox (relative paths, `/`-separated). */
export function sandboxHashes(dataDir: string, system: string): Record<string, string> {
  const root = sandboxDir(dataDir, system);
  const out: Record<string, string> = {};
  let n = 0;
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // no sandbox
    }
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) walk(full);
      else if (e.isFile()) {
        if (++n > MAX_FILES) return;
        out[path.relative(root, full).split(path.sep).join("/")] = createHash("sha256")
          .update(readFileSync(full))
          .digest("hex");
      }
    }
  };
  walk(root);
  return out;
}

function hashOf(s: LoadedSystem, files: Record<string, string>): string {
  return createHash("sha256")
    .update(canonicalJson({ system: definitionOf(s), files }))
    .digest("hex");
}

interface Row {
  system: string;
  number: number;
  created_at: number;
  source: string;
  made_by: string;
  note: string;
  hash: string;
  definition: string;
  compiled: string;
  canvas: string | null;
  files: string;
}

const fromRow = (r: Row): SystemVersion => ({
  system: r.system,
  number: Number(r.number),
  createdAt: Number(r.created_at),
  source: r.source,
  by: r.made_by as VersionBy,
  note: r.note,
  hash: r.hash,
  definition: JSON.parse(r.definition) as Record<string, unknown>,
  compiled: JSON.parse(r.compiled) as LoadedSystem,
  canvas: r.canvas === null ? null : (JSON.parse(r.canvas) as unknown),
  files: JSON.parse(r.files) as Record<string, string>,
});

const SELECT_LATEST = "SELECT * FROM system_versions WHERE system = ? ORDER BY number DESC LIMIT 1";

async function latestIn(q: SqlQueries, system: string): Promise<SystemVersion | undefined> {
  const r = await q.get<Row>(SELECT_LATEST, [system]);
  return r ? fromRow(r) : undefined;
}

/** Reads and records versions; rows are only ever inserted. */
export class VersionStore {
  constructor(
    readonly sql: Sql,
    readonly dataDir: string,
  ) {
    // SQLite's table is made here (PostgreSQL's by its migrations, src/core/db/pg-migrations.ts).
    if (sql instanceof SqliteSql) sql.db.exec(SCHEMA);
  }

  /** The version of the system as loaded now: its latest, or a new one when it differs (a library replaced without a sync). */
  async current(s: LoadedSystem): Promise<SystemVersion> {
    const last = await this.latest(s.id);
    if (last && canonicalJson(last.definition) === canonicalJson(definitionOf(s))) return last;
    return (await this.sync({ systems: [s] }))[0] ?? (await this.latest(s.id))!;
  }

  latest(system: string): Promise<SystemVersion | undefined> {
    return latestIn(this.sql, system);
  }

  async get(system: string, number: number): Promise<SystemVersion | undefined> {
    const r = await this.sql.get<Row>("SELECT * FROM system_versions WHERE system = ? AND number = ?", [
      system,
      number,
    ]);
    return r ? fromRow(r) : undefined;
  }

  async list(system: string): Promise<SystemVersion[]> {
    return (await this.sql.all<Row>("SELECT * FROM system_versions WHERE system = ? ORDER BY number", [system])).map(
      fromRow,
    );
  }

  /**
   * Record a version of each loaded system whose content differs from its latest version (every
   * system has one after this). `made` says who made the one being deployed or rolled back; the
   * others were loaded from the config or a file. Returns the versions recorded. Another instance
   * recording the same system at the same time takes the number first: the same content is then
   * not recorded again, other content takes the next number.
   */
  sync(library: Pick<SystemsLibrary, "systems">, made?: VersionMade): Promise<SystemVersion[]> {
    return this.sql.tx(async (q) => {
      const recorded: SystemVersion[] = [];
      for (const s of library.systems) {
        const files = sandboxHashes(this.dataDir, s.id);
        const hash = hashOf(s, files);
        const mine = made?.system === s.id ? made : undefined;
        // Bounded: each lost race means another instance recorded a version in between.
        for (let attempt = 0; attempt < 5; attempt++) {
          const last = await latestIn(q, s.id);
          if (last?.hash === hash) break;
          const v: SystemVersion = {
            system: s.id,
            number: (last?.number ?? 0) + 1,
            createdAt: Date.now(),
            source: s.source,
            by: mine?.by ?? (s.source === "config" ? "config" : "file"),
            note: mine?.note ?? "",
            hash,
            definition: definitionOf(s),
            compiled: s,
            canvas: mine?.canvas ?? null,
            files,
          };
          const put = await q.run(
            `INSERT INTO system_versions (system, number, created_at, source, made_by, note, hash, definition, compiled, canvas, files)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (system, number) DO NOTHING`,
            [
              v.system,
              v.number,
              v.createdAt,
              v.source,
              v.by,
              v.note,
              v.hash,
              JSON.stringify(v.definition),
              JSON.stringify(v.compiled),
              v.canvas === null ? null : JSON.stringify(v.canvas),
              JSON.stringify(files),
            ],
          );
          if (put.changes === 1) {
            recorded.push(v);
            break;
          }
        }
      }
      return recorded;
    });
  }
}

const stores = new WeakMap<Sql, VersionStore>();

/** The version store of a store's `Sql` (one per engine). */
export function versionsOf(sql: Sql, dataDir: string): VersionStore {
  let s = stores.get(sql);
  if (!s || s.dataDir !== dataDir) {
    s = new VersionStore(sql, dataDir);
    stores.set(sql, s);
  }
  return s;
}

/** One difference between two versions: the key (`run.steps[research].with.prompt`) and both sides. */
export interface VersionChange {
  key: string;
  change: "added" | "removed" | "changed";
  from?: unknown;
  to?: unknown;
}

/**
 * What changed from one version to another, key by key: plan steps are matched by their id (a
 * moved step is not a change), other arrays by position; sandbox files under `files.<path>`.
 */
export function diffVersions(a: SystemVersion, b: SystemVersion): VersionChange[] {
  const out: VersionChange[] = [];
  diffValue(a.definition, b.definition, "", out);
  diffValue(a.files, b.files, "files", out);
  return out;
}

const isObj = (v: unknown): v is Record<string, unknown> => Boolean(v) && typeof v === "object" && !Array.isArray(v);
const byIds = (v: unknown[]): Map<string, unknown> | undefined => {
  const m = new Map<string, unknown>();
  for (const x of v) {
    const id = isObj(x) && typeof x.id === "string" ? x.id : undefined;
    if (id === undefined || m.has(id)) return undefined;
    m.set(id, x);
  }
  return m;
};
const join = (prefix: string, key: string) => (prefix ? `${prefix}.${key}` : key);

function diffValue(a: unknown, b: unknown, key: string, out: VersionChange[]): void {
  if (canonicalJson(a) === canonicalJson(b)) return;
  if (a === undefined) return void out.push({ key, change: "added", to: b });
  if (b === undefined) return void out.push({ key, change: "removed", from: a });
  if (Array.isArray(a) && Array.isArray(b)) {
    const ma = byIds(a);
    const mb = byIds(b);
    if (ma && mb) {
      for (const [id, v] of ma) diffValue(v, mb.get(id), `${key}[${id}]`, out);
      for (const [id, v] of mb) if (!ma.has(id)) diffValue(undefined, v, `${key}[${id}]`, out);
      return;
    }
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) diffValue(a[i], b[i], `${key}[${i}]`, out);
    return;
  }
  if (isObj(a) && isObj(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) diffValue(a[k], b[k], join(key, k), out);
    return;
  }
  out.push({ key: key || "(top)", change: "changed", from: a, to: b });
}

/** A diff as lines a person reads (`- key: was → now`). */
export function diffText(changes: VersionChange[]): string {
  if (!changes.length) return "Nothing changed.";
  const show = (v: unknown) => {
    const t = typeof v === "string" ? JSON.stringify(v) : canonicalJson(v);
    return t.length > 160 ? `${t.slice(0, 157)}…` : t;
  };
  return changes
    .map((c) =>
      c.change === "added"
        ? `- \`${c.key}\` added: ${show(c.to)}`
        : c.change === "removed"
          ? `- \`${c.key}\` removed (was ${show(c.from)})`
          : `- \`${c.key}\`: ${show(c.from)} → ${show(c.to)}`,
    )
    .join("\n");
}
