/**
 * A real PostgreSQL for a test file (or a benchmark): Debian's `postgresql` package (`.ci/run` installs it), `initdb`
 * into a temp dir, the server on a loopback port from the OS, stopped (and its dir removed) by
 * `stop()`. No mock. One server per process (shared by the files it runs, see `startPostgres`);
 * `database()` gives each test its own empty database.
 *
 * Run as root (CI, this machine), PostgreSQL refuses to start: the server then runs as the
 * `postgres` user the package creates, in a dir that user owns.
 *
 * Without PostgreSQL installed, `startPostgres` throws with the install line (the tests fail, they
 * are not skipped: CI installs it).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before } from "node:test";
import pg from "pg";
import { PostgresDb } from "../src/core/db/postgres.js";

export interface TestPostgres {
  /** `postgres://clawbridge@127.0.0.1:<port>/postgres` */
  url: string;
  port: number;
  /** A fresh database; its URL. */
  database(name?: string): Promise<string>;
  stop(): Promise<void>;
}

/** The directory of PostgreSQL's server programs (the newest installed version). */
export function postgresBinDir(): string {
  const env = process.env.CLAWBRIDGE_TEST_PG_BIN;
  if (env && existsSync(path.join(env, "initdb"))) return env;
  const base = "/usr/lib/postgresql";
  if (existsSync(base)) {
    const versions = readdirSync(base)
      .filter((v) => existsSync(path.join(base, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return path.join(base, versions[0], "bin");
  }
  throw new Error(
    "PostgreSQL's server is not installed (no /usr/lib/postgresql/*/bin/initdb): apt-get install postgresql",
  );
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

let seq = 0;

/**
 * The process's one server, shared by the test files it runs one after another (the unit tier runs
 * every unit file in one process: one server start, not one per file). Each caller gets its own
 * handle; the server stops LINGER_MS after the last handle's `stop()` unless another file asks for
 * it meanwhile, and is killed (group and dir) when the process exits, so none outlives the run.
 */
let shared: { server: Promise<TestPostgres>; users: number; timer?: NodeJS.Timeout } | undefined;
const LINGER_MS = 1500;

export async function startPostgres(): Promise<TestPostgres> {
  if (!shared) {
    const server = startServer();
    shared = { server, users: 0 };
    server.catch(() => {
      shared = undefined;
    });
  }
  const s = shared;
  if (s.timer) clearTimeout(s.timer);
  s.timer = undefined;
  s.users++;
  const server = await s.server;
  let stopped = false;
  return {
    url: server.url,
    port: server.port,
    database: (name) => server.database(name),
    async stop() {
      if (stopped) return;
      stopped = true;
      if (--s.users > 0) return;
      s.timer = setTimeout(() => {
        if (shared === s) shared = undefined;
        void server.stop();
      }, LINGER_MS);
      s.timer.unref();
    },
  };
}

async function startServer(): Promise<TestPostgres> {
  const bin = postgresBinDir();
  const dir = mkdtempSync(path.join(tmpdir(), "cb-pg-"));
  const data = path.join(dir, "data");
  const root = process.getuid?.() === 0;
  let ids: { uid: number; gid: number } | undefined;
  if (root) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    ids = { uid, gid };
    chownSync(dir, uid, gid);
  }
  execFileSync(
    path.join(bin, "initdb"),
    ["-D", data, "-U", "clawbridge", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"],
    { ...ids, stdio: "pipe", timeout: 60_000, cwd: dir },
  );
  let child: ChildProcess | undefined;
  let port = 0;
  let lastErr = "";
  for (let attempt = 0; attempt < 5 && !child; attempt++) {
    port = await freePort();
    const p = spawn(
      path.join(bin, "postgres"),
      [
        "-D",
        data,
        "-p",
        String(port),
        "-k",
        dir,
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "fsync=off",
        "-c",
        "synchronous_commit=off",
        "-c",
        "full_page_writes=off",
        "-c",
        "max_connections=200",
        "-c",
        "shared_buffers=32MB",
      ],
      { ...ids, cwd: dir, stdio: ["ignore", "ignore", "pipe"], detached: true },
    );
    let stderr = "";
    p.stderr!.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    const ready = await waitReady(port, p, 30_000);
    if (ready) child = p;
    else {
      lastErr = stderr;
      try {
        process.kill(-p.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }
  }
  if (!child) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`PostgreSQL did not start: ${lastErr}`);
  }
  const server = child;
  const url = `postgres://clawbridge@127.0.0.1:${port}/postgres`;
  let stopped = false;
  // However the process ends (a failed test, the runner's exit), the server and its dir go with it.
  const onExit = (): void => {
    try {
      process.kill(-server.pid!, "SIGKILL");
    } catch {
      /* gone */
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", onExit);
  return {
    url,
    port,
    async database(name?: string) {
      const db = name ?? `t_${process.pid}_${++seq}`;
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        await c.query(`CREATE DATABASE ${db}`);
      } finally {
        await c.end();
      }
      return `postgres://clawbridge@127.0.0.1:${port}/${db}`;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      const exited = new Promise<void>((r) => {
        if (server.exitCode !== null || server.signalCode !== null) r();
        else server.once("exit", () => r());
      });
      try {
        server.kill("SIGINT"); // fast shutdown: ends every connection
      } catch {
        /* gone */
      }
      const t = setTimeout(() => {
        try {
          process.kill(-server.pid!, "SIGKILL");
        } catch {
          /* gone */
        }
      }, 10_000);
      await exited;
      clearTimeout(t);
      try {
        process.kill(-server.pid!, "SIGKILL"); // any child the postmaster left behind
      } catch {
        /* gone, as it should be */
      }
      rmSync(dir, { recursive: true, force: true });
      process.removeListener("exit", onExit);
    },
  };
}

async function waitReady(port: number, p: ChildProcess, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (p.exitCode !== null || p.signalCode !== null) return false;
    const c = new pg.Client({ connectionString: `postgres://clawbridge@127.0.0.1:${port}/postgres` });
    try {
      await c.connect();
      await c.query("SELECT 1");
      await c.end();
      return true;
    } catch {
      await c.end().catch(() => {});
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return false;
}

/**
 * For a test file whose cases share one migrated database (and empty its tables between them): the
 * process's server and a database of it, opened before the file's tests and closed after them.
 * `url` opens another instance on the same database.
 */
export function sharedTestDatabase(): { readonly url: string; readonly db: PostgresDb } {
  let server: TestPostgres | undefined;
  const state: { url: string; db: PostgresDb } = { url: "", db: undefined as unknown as PostgresDb };
  before(async () => {
    server = await startPostgres();
    state.url = await server.database();
    state.db = await PostgresDb.open({ url: state.url });
  });
  after(async () => {
    await state.db?.close();
    await server?.stop();
  });
  return state;
}
