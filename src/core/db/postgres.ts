/**
 * The PostgreSQL store (`store: { kind: postgres, url }`): several bridges on one database. One
 * `pg` pool per process; the schema is plain numbered SQL (src/core/db/pg-migrations.ts), applied
 * at start in one transaction under an advisory lock, so two instances starting together migrate
 * once. A database migrated by a newer clawbridge is refused, as SQLite files are.
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
  /** Migrations to apply (tests); default PG_MIGRATIONS. */
  migrations?: readonly PgMigration[];
}

class PgQueries implements SqlQueries {
  readonly dialect = "postgres" as const;
  constructor(private readonly q: pg.Pool | pg.PoolClient) {}
  async all<T>(sql: string, params?: readonly unknown[]): Promise<T[]> {
    return (await this.q.query(numberPlaceholders(sql), params as unknown[])).rows as T[];
  }
  async get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined> {
    return (await this.q.query(numberPlaceholders(sql), params as unknown[])).rows[0] as T | undefined;
  }
  async run(sql: string, params?: readonly unknown[]): Promise<SqlRun> {
    return { changes: (await this.q.query(numberPlaceholders(sql), params as unknown[])).rowCount ?? 0 };
  }
}

/** A held lock; `release()` is idempotent. */
export interface HeldLock {
  release(): Promise<void>;
}

/** 64-bit advisory lock key of a text (namespace + name), as PostgreSQL computes it. */
const LOCK_KEY_SQL = "('x' || substr(md5(?), 1, 16))::bit(64)::bigint";

/**
 * A client out of the pool: its errors (the server restarted, the network went, the connection was
 * dropped on purpose) must not end the process, and the pool listens only to idle clients. Returns
 * the function that gives it back (`drop`: destroyed instead of reused).
 */
function guard(client: pg.PoolClient): (drop: boolean) => void {
  const ignore = (): void => {};
  client.on("error", ignore);
  return (drop) => {
    client.removeListener("error", ignore);
    client.release(drop);
  };
}

/** The lock `text` held on `client` until `release()`; a connection that broke meanwhile took the lock with it and is dropped. */
function holding(client: pg.PoolClient, text: string, giveBack: (drop: boolean) => void): HeldLock {
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      try {
        await client.query(numberPlaceholders(`SELECT pg_advisory_unlock(${LOCK_KEY_SQL})`), [text]);
        giveBack(false);
      } catch {
        giveBack(true);
      }
    },
  };
}

export class PostgresDb implements Sql {
  readonly dialect = "postgres" as const;
  readonly instanceId: string;
  private readonly q: PgQueries;
  private listener: pg.Client | undefined;
  private listenerStarting: Promise<pg.Client> | undefined;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
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
      await migratePostgres(db, opts.migrations ?? PG_MIGRATIONS);
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
   * first served) on a pooled connection held until `release()`. `signal` gives up the wait: the
   * connection is dropped (its backend ends, and with it the wait) and the promise rejects.
   */
  async lock(namespace: string, name: string, signal?: AbortSignal): Promise<HeldLock> {
    if (signal?.aborted) throw signal.reason ?? new Error("aborted");
    const client = await this.pool.connect();
    const giveBack = guard(client);
    const text = `${namespace}:${name}`;
    let broken = false;
    const onAbort = (): void => {
      broken = true;
      // The server is told to stop the wait (it would notice a closed connection only once the lock
      // is granted), and the connection is dropped: whatever the race, nothing stays held or queued.
      const pid = (client as unknown as { processID?: number }).processID;
      if (pid) void this.q.run("SELECT pg_cancel_backend(?)", [pid]).catch(() => {});
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      await client.query(numberPlaceholders(`SELECT pg_advisory_lock(${LOCK_KEY_SQL})`), [text]);
      if (broken) throw signal?.reason ?? new Error("aborted");
    } catch (err) {
      giveBack(true);
      throw broken ? (signal?.reason ?? err) : err;
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
    return holding(client, text, giveBack);
  }

  /** Takes the advisory lock on `namespace:name` if free; undefined when another session holds it. */
  async tryLock(namespace: string, name: string): Promise<HeldLock | undefined> {
    const client = await this.pool.connect();
    const giveBack = guard(client);
    const text = `${namespace}:${name}`;
    try {
      const r = await client.query(numberPlaceholders(`SELECT pg_try_advisory_lock(${LOCK_KEY_SQL}) AS ok`), [text]);
      if (!r.rows[0]?.ok) {
        giveBack(false);
        return undefined;
      }
    } catch (err) {
      giveBack(true);
      throw err;
    }
    return holding(client, text, giveBack);
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
    const client = await this.listenClient();
    if (first) await client.query(`LISTEN ${channel}`);
    return () => {
      set!.delete(handler);
    };
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
      const client = await this.listenClient();
      for (const ch of this.handlers.keys()) await client.query(`LISTEN ${ch}`);
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

/** The schema version a database is at (0: none of ours yet). */
export async function pgSchemaVersion(q: SqlQueries): Promise<number> {
  const t = await q.get<{ t: string | null }>("SELECT to_regclass('clawbridge_meta')::text AS t");
  if (!t?.t) return 0;
  const r = await q.get<{ value: string }>("SELECT value FROM clawbridge_meta WHERE key = 'schema_version'");
  return r ? Number(r.value) : 0;
}

/** Applies what is missing of `migrations`, in order, in one transaction under an advisory lock. */
export async function migratePostgres(db: PostgresDb, migrations: readonly PgMigration[]): Promise<number> {
  const latest = migrations.reduce((m, x) => Math.max(m, x.version), 0);
  return db.tx(async (q) => {
    await q.run(`SELECT pg_advisory_xact_lock(${LOCK_KEY_SQL})`, ["clawbridge:migrate"]);
    await q.run("CREATE TABLE IF NOT EXISTS clawbridge_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
    const from = await pgSchemaVersion(q);
    if (from > latest)
      throw new Error(
        `the database has clawbridge schema version ${from}, newer than this clawbridge understands (${latest}); upgrade clawbridge`,
      );
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (m.version <= from) continue;
      try {
        await q.run(m.sql);
      } catch (err) {
        throw new Error(`migration ${m.version} (${m.name}) failed: ${(err as Error).message}`, { cause: err });
      }
    }
    await q.run(
      "INSERT INTO clawbridge_meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      [String(latest)],
    );
    return latest;
  });
}
