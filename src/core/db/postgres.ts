/**
 * The PostgreSQL store (`store: { kind: postgres, url }`): several bridges on one database. One
 * `pg` pool per process; the schema is plain numbered SQL (src/core/db/pg-migrations.ts), applied
 * at start in one transaction under an advisory lock, so two instances starting together migrate
 * once; each applied migration is recorded, and a database with one this build does not know (a
 * newer clawbridge migrated it) is refused, as SQLite files are.
 *
 * What PostgreSQL gives the bridge beyond rows (we do not write our own cluster):
 * - advisory locks (`lock`): one conversation's turns one at a time across instances
 *   (src/request/queue/), a schedule fired once;
 * - `FOR UPDATE SKIP LOCKED` claims and leases: runs an instance that died are taken over;
 * - `LISTEN/NOTIFY` (`listen`, `notify`): events of every instance on every instance's stream.
 *
 * Integers come back as numbers (BIGINT and COUNT are parsed: every one of ours is an epoch ms or a
 * count, far below 2^53). The URL holds a password: it is never logged; `redactUrl` shows it safely.
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { PG_MIGRATIONS, type PgMigration } from "./pg-migrations.js";
import { numberPlaceholders, type Sql, type SqlQueries, type SqlRun } from "./sql.js";

/** `types` for the pool: int8 (COUNT, BIGINT) and numeric as JS numbers. */
const types = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === 20 || oid === 1700) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as "text");
  },
};

/** The URL with its password replaced by `***` (for messages and doctor). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(a URL that does not parse)";
  }
}

export interface PostgresOptions {
  url: string;
  /** Connections in the pool (turn locks hold one each while a turn runs elsewhere); default 10. */
  poolSize?: number;
  /** This instance's id (in events and leases); default a random one. */
  instanceId?: string;
  /** Migrations to apply (tests); default PG_MIGRATIONS. `false`: none, not even a check (doctor). */
  migrations?: readonly PgMigration[] | false;
}

/** Booleans as 1/0 (every store keeps flags in INTEGER columns, as in SQLite); undefined as null. */
function pgParams(params: readonly unknown[] | undefined): unknown[] | undefined {
  return params?.map((p) => (p === undefined ? null : typeof p === "boolean" ? (p ? 1 : 0) : p));
}

class PgQueries implements SqlQueries {
  readonly dialect = "postgres" as const;
  constructor(private readonly q: pg.Pool | pg.PoolClient) {}
  async all<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return (await this.q.query(numberPlaceholders(sql), pgParams(params))).rows as T[];
  }
  async get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined> {
    return (await this.q.query(numberPlaceholders(sql), pgParams(params))).rows[0] as T | undefined;
  }
  async run(sql: string, params?: readonly unknown[]): Promise<SqlRun> {
    return { changes: (await this.q.query(numberPlaceholders(sql), pgParams(params))).rowCount ?? 0 };
  }
}

/** A held lock; `release()` is idempotent. */
export interface HeldLock {
  release(): Promise<void>;
}

/** A lock held on `client`: released by unlocking it (a broken connection is dropped: its locks went with it). */
function heldLock(client: pg.PoolClient, key: string, quiet: () => void): HeldLock {
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      try {
        await client.query(numberPlaceholders(`SELECT pg_advisory_unlock(${LOCK_KEY_SQL})`), [key]);
        client.removeListener("error", quiet);
        client.release();
      } catch {
        client.removeListener("error", quiet);
        client.release(true);
      }
    },
  };
}

/** 64-bit advisory lock key of a text (namespace + name), as PostgreSQL computes it. */
const LOCK_KEY_SQL = "('x' || substr(md5(?), 1, 16))::bit(64)::bigint";

export class PostgresDb implements Sql {
  readonly dialect = "postgres" as const;
  readonly instanceId: string;
  private readonly q: PgQueries;
  private listener: pg.Client | undefined;
  private listenerStarting: Promise<pg.Client> | undefined;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
  /** The channels each listening connection has sent LISTEN for. */
  private readonly listening = new WeakMap<pg.Client, Set<string>>();
  private closed = false;

  private constructor(
    readonly pool: pg.Pool,
    private readonly url: string,
    instanceId: string,
  ) {
    this.q = new PgQueries(pool);
    this.instanceId = instanceId;
  }

  /** Connects, migrates, and checks the server answers. Rejects with a message that names the URL (redacted). */
  static async open(opts: PostgresOptions): Promise<PostgresDb> {
    const pool = new pg.Pool({
      connectionString: opts.url,
      max: opts.poolSize ?? 10,
      types,
      application_name: "clawbridge",
      connectionTimeoutMillis: 10_000,
    });
    // An idle client's error (the server restarted) must not crash the process; the pool drops it.
    pool.on("error", () => {});
    const db = new PostgresDb(pool, opts.url, opts.instanceId ?? randomUUID());
    try {
      if (opts.migrations !== false) await migratePostgres(db, opts.migrations ?? PG_MIGRATIONS);
      else await db.run("SELECT 1");
    } catch (err) {
      await pool.end().catch(() => {});
      throw new Error(`store.url ${redactUrl(opts.url)}: ${(err as Error).message}`, { cause: err });
    }
    return db;
  }

  all<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return this.q.all<T>(sql, params);
  }
  get<T = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<T | undefined> {
    return this.q.get<T>(sql, params);
  }
  run(sql: string, params?: readonly unknown[]): Promise<SqlRun> {
    return this.q.run(sql, params);
  }

  async tx<T>(fn: (q: SqlQueries) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      try {
        const out = await fn(new PgQueries(client));
        await client.query("COMMIT");
        return out;
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw err;
      }
    } finally {
      client.release();
    }
  }

  /**
   * A session advisory lock on `namespace:name`, waited for in PostgreSQL's own queue (first come,
   * first served) on a pooled connection held until `release()`. `signal` gives up the wait: it is
   * cancelled on the server (PostgreSQL's cancel request) and the promise rejects with its reason.
   */
  async lock(namespace: string, name: string, signal?: AbortSignal): Promise<HeldLock> {
    if (signal?.aborted) throw signal.reason ?? new Error("aborted");
    const client = await this.pool.connect();
    // A connection ended under a held or awaited lock reports here, not as an uncaught error.
    const quiet = (): void => {};
    client.on("error", quiet);
    let broken = false;
    const onAbort = (): void => {
      broken = true;
      // PostgreSQL's cancel request (a second connection, as libpq's PQcancel) ends the waiting
      // pg_advisory_lock at once: the server stops waiting, so the lock never goes to a waiter that
      // left, and this connection stays usable.
      const c = client as unknown as { activeQuery?: unknown };
      if (!c.activeQuery) return;
      const canceller = new pg.Client({ connectionString: this.url });
      (canceller as unknown as { connection: { on(e: string, f: () => void): void } }).connection.on("error", quiet);
      (canceller as unknown as { cancel(client: unknown, query: unknown): void }).cancel(client, c.activeQuery);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    const key = `${namespace}:${name}`;
    try {
      if (signal?.aborted) throw signal.reason ?? new Error("aborted");
      await client.query(numberPlaceholders(`SELECT pg_advisory_lock(${LOCK_KEY_SQL})`), [key]);
    } catch (err) {
      signal?.removeEventListener("abort", onAbort);
      client.removeListener("error", quiet);
      // Cancelled: the connection is fine; anything else may have broken it.
      client.release(broken && (err as { code?: string }).code === "57014" ? undefined : true);
      throw broken ? (signal?.reason ?? err) : err;
    }
    signal?.removeEventListener("abort", onAbort);
    const held = heldLock(client, key, quiet);
    if (signal?.aborted) {
      // The lock came just as the wait was given up: handed back at once.
      await held.release();
      throw signal.reason ?? new Error("aborted");
    }
    return held;
  }

  /** Takes the advisory lock on `namespace:name` if free; undefined when another session holds it. */
  async tryLock(namespace: string, name: string): Promise<HeldLock | undefined> {
    const client = await this.pool.connect();
    try {
      const r = await client.query(numberPlaceholders(`SELECT pg_try_advisory_lock(${LOCK_KEY_SQL}) AS ok`), [
        `${namespace}:${name}`,
      ]);
      if (!r.rows[0]?.ok) {
        client.release();
        return undefined;
      }
    } catch (err) {
      client.release(true);
      throw err;
    }
    const quiet = (): void => {};
    client.on("error", quiet);
    return heldLock(client, `${namespace}:${name}`, quiet);
  }

  /** `NOTIFY channel, payload` (payload under 8000 bytes). */
  async notify(channel: string, payload: string): Promise<void> {
    await this.q.run("SELECT pg_notify(?, ?)", [channel, payload]);
  }

  /**
   * Calls `handler` with every NOTIFY on `channel`, from any instance (this one too), over one
   * dedicated connection that is made again when it breaks. Returns the unsubscribe.
   */
  async listen(channel: string, handler: (payload: string) => void): Promise<() => void> {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`bad channel name ${JSON.stringify(channel)}`);
    let set = this.handlers.get(channel);
    const first = !set;
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
    }
    set.add(handler);
    try {
      await this.ensureListening(channel);
    } catch (err) {
      // Kept: the handler is called once a connection listens again (retried in the background).
      if (first && !this.closed) setTimeout(() => void this.relisten(), 2000).unref();
      throw err;
    }
    return () => {
      set!.delete(handler);
    };
  }

  /** `LISTEN channel` on the current listening connection, once per connection. */
  private async ensureListening(channel: string): Promise<void> {
    const client = await this.listenClient();
    let done = this.listening.get(client);
    if (!done) this.listening.set(client, (done = new Set()));
    if (done.has(channel)) return;
    await client.query(`LISTEN ${channel}`);
    done.add(channel);
  }

  private listenClient(): Promise<pg.Client> {
    if (this.listener) return Promise.resolve(this.listener);
    if (!this.listenerStarting) {
      this.listenerStarting = (async () => {
        const client = new pg.Client({ connectionString: this.url, types, application_name: "clawbridge-listen" });
        client.on("notification", (m) => {
          for (const h of this.handlers.get(m.channel) ?? []) {
            try {
              h(m.payload ?? "");
            } catch {
              /* a handler's failure is its own */
            }
          }
        });
        client.on("error", () => {
          if (this.listener === client) this.listener = undefined;
          client.end().catch(() => {});
          if (!this.closed) setTimeout(() => void this.relisten(), 500).unref();
        });
        await client.connect();
        this.listener = client;
        this.listenerStarting = undefined;
        return client;
      })().catch((err) => {
        this.listenerStarting = undefined;
        throw err;
      });
    }
    return this.listenerStarting;
  }

  private async relisten(): Promise<void> {
    if (this.closed || this.handlers.size === 0) return;
    try {
      for (const ch of this.handlers.keys()) await this.ensureListening(ch);
    } catch {
      if (!this.closed) setTimeout(() => void this.relisten(), 2000).unref();
    }
  }

  /** The database's clock (epoch ms). */
  async now(): Promise<number> {
    const r = await this.q.get<{ ms: number }>("SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS ms");
    return r!.ms;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const l = this.listener;
    this.listener = undefined;
    await l?.end().catch(() => {});
    await this.pool.end().catch(() => {});
  }
}

/** The migrations a database has had (empty: none of ours yet). */
export async function pgAppliedMigrations(q: SqlQueries): Promise<number[]> {
  const t = await q.get<{ t: string | null }>("SELECT to_regclass('clawbridge_migrations')::text AS t");
  if (!t?.t) return [];
  return (await q.all<{ version: number }>("SELECT version FROM clawbridge_migrations ORDER BY version")).map(
    (r) => r.version,
  );
}

/**
 * Applies each of `migrations` the database has not had, in order, in one transaction under an
 * advisory lock (two instances starting together migrate once). Each applied one is recorded in
 * `clawbridge_migrations`; one recorded that this build does not know means a newer clawbridge
 * migrated the database: refused. Returns the numbers applied now.
 */
export async function migratePostgres(db: PostgresDb, migrations: readonly PgMigration[]): Promise<number[]> {
  const known = new Set(migrations.map((m) => m.version));
  return db.tx(async (q) => {
    await q.run(`SELECT pg_advisory_xact_lock(${LOCK_KEY_SQL})`, ["clawbridge:migrate"]);
    await q.run(
      "CREATE TABLE IF NOT EXISTS clawbridge_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
    );
    const applied = await pgAppliedMigrations(q);
    const unknown = applied.filter((v) => !known.has(v));
    if (unknown.length)
      throw new Error(
        `the database has clawbridge migration ${unknown.join(", ")}, which this clawbridge does not know (a newer one migrated it); upgrade clawbridge`,
      );
    const done = new Set(applied);
    const now: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      try {
        await q.run(m.sql);
      } catch (err) {
        throw new Error(`migration ${m.version} (${m.name}) failed: ${(err as Error).message}`, { cause: err });
      }
      await q.run("INSERT INTO clawbridge_migrations (version, name, applied_at) VALUES (?, ?, ?)", [
        m.version,
        m.name,
        Date.now(),
      ]);
      now.push(m.version);
    }
    return now;
  });
}
