/**
 * A fresh, empty place in a test PostgreSQL (testkit/postgres.ts) for one test case, cheaper
 * than a database of its own (CREATE DATABASE copies a template: about a second on a busy machine;
 * CREATE SCHEMA a few ms): one database per server, one schema per call, and a URL whose
 * connections use that schema (`search_path`), so a store migrated through it sees only its own tables.
 */
import pg from "pg";
import type { TestPostgres } from "../../testkit/postgres.js";

const shared = new WeakMap<TestPostgres, Promise<string>>();
let seq = 0;

/** A URL whose tables live in a new empty schema of one database shared by the server's callers. */
export async function freshSchema(server: TestPostgres): Promise<string> {
  let base = shared.get(server);
  if (!base) {
    base = server.database();
    shared.set(server, base);
  }
  const url = await base;
  const schema = `s_${process.pid}_${++seq}`;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await c.end();
  }
  return `${url}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
}
