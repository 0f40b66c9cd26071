/**
 * The doctor's check of the store (src/ops/doctor/doctor.ts runs it). SQLite: where the files are.
 * PostgreSQL (`store: { kind: postgres }`): the database is reachable (within the timeout), migrated
 * to this build's schema (doctor never migrates: the bridge does at start), not migrated by a newer
 * clawbridge, and the clocks agree: this machine's against the database's, and every instance seen
 * lately (their heartbeats, src/core/db/instances.ts) against each other. Leases are measured on the
 * database's clock; schedules fire on each instance's own, so a clock off by more than
 * `SKEW_WARN_MS` is a warning. The URL's password never appears in a finding.
 */
import type { Config } from "../../core/config/schema.js";
import { liveInstances, measureSkew } from "../../core/db/instances.js";
import { PG_MIGRATIONS } from "../../core/db/pg-migrations.js";
import { pgAppliedMigrations, PostgresDb, redactUrl } from "../../core/db/postgres.js";
import type { Finding } from "../../wire/admin.js";

/** Clock skew past this is a warning. */
export const SKEW_WARN_MS = 1000;
/** Instances whose last heartbeat is within this are "up". */
const LIVE_MS = 60_000;

export async function checkDatabase(config: Config, findings: Finding[], timeoutMs: number): Promise<void> {
  const store = config.store;
  if (store.kind === "sqlite") {
    findings.push({
      id: "store",
      status: "ok",
      title: `store: SQLite files in ${config.dataDir}`,
      detail: "one bridge per data directory; several bridges share nothing (store: { kind: postgres } to share)",
    });
    return;
  }
  const where = redactUrl(store.url!);
  let db: PostgresDb;
  try {
    db = await withTimeout(
      PostgresDb.open({ url: store.url!, poolSize: 1, migrations: false }),
      Math.max(timeoutMs, 3000),
      `no answer within ${Math.max(timeoutMs, 3000)} ms`,
    );
  } catch (err) {
    findings.push({
      id: "store:reachable",
      status: "fail",
      title: `store: PostgreSQL at ${where} cannot be reached`,
      detail: redactText((err as Error).message, store.url!),
      fix: "start PostgreSQL or correct store.url / CLAWBRIDGE_STORE_URL (the user, password, host, port and database in it)",
    });
    return;
  }
  try {
    findings.push({ id: "store:reachable", status: "ok", title: `store: PostgreSQL at ${where} answers` });
    const applied = new Set(await pgAppliedMigrations(db));
    const known = PG_MIGRATIONS.map((m) => m.version);
    const unknown = [...applied].filter((v) => !known.includes(v));
    const missing = known.filter((v) => !applied.has(v));
    if (unknown.length)
      findings.push({
        id: "store:migrated",
        status: "fail",
        title: `store: migrated by a newer clawbridge (migration ${unknown.join(", ")} unknown here)`,
        fix: "upgrade this clawbridge to the version the other instances run",
      });
    else if (missing.length)
      findings.push({
        id: "store:migrated",
        status: applied.size ? "warn" : "info",
        title: applied.size
          ? `store: ${missing.length} migration${missing.length === 1 ? "" : "s"} not applied yet (${missing.join(", ")})`
          : "store: the database is empty (not migrated yet)",
        fix: "start clawbridge once (it migrates the database at start, in one transaction)",
      });
    else
      findings.push({
        id: "store:migrated",
        status: "ok",
        title: `store: migrated (${known.length} migration${known.length === 1 ? "" : "s"})`,
      });

    const own = await measureSkew(db);
    const instances = applied.has(7) ? await liveInstances(db, LIVE_MS) : [];
    const skews = [
      { id: "this machine", skewMs: own.skewMs },
      ...instances.map((i) => ({ id: i.id, skewMs: i.skewMs })),
    ];
    const lo = Math.min(...skews.map((s) => s.skewMs));
    const hi = Math.max(...skews.map((s) => s.skewMs));
    const detail = [
      `this machine: ${signed(own.skewMs)} ms against the database's clock (round trip ${own.rttMs} ms)`,
      ...instances.map(
        (i) => `instance ${i.id} (${i.host}, pid ${i.pid}, ${i.version}): ${signed(i.skewMs)} ms at its last heartbeat`,
      ),
      instances.length ? "" : "no instance has written a heartbeat in the last minute (none is running on it)",
    ]
      .filter(Boolean)
      .join("\n");
    const off = skews.filter((s) => Math.abs(s.skewMs) > SKEW_WARN_MS);
    findings.push(
      hi - lo > SKEW_WARN_MS || off.length
        ? {
            id: "store:clock",
            status: "warn",
            title: `store: clocks disagree by up to ${Math.max(hi - lo, ...off.map((s) => Math.abs(s.skewMs)))} ms (${off.map((s) => s.id).join(", ") || "between instances"})`,
            detail,
            fix: "run NTP (systemd-timesyncd or chrony) on every machine: schedules fire on each instance's own clock",
          }
        : {
            id: "store:clock",
            status: "ok",
            title: `store: ${instances.length} instance${instances.length === 1 ? "" : "s"} up, clocks within ${Math.max(hi - lo, Math.abs(own.skewMs))} ms`,
            detail,
          },
    );
  } catch (err) {
    findings.push({
      id: "store:check",
      status: "fail",
      title: `store: PostgreSQL at ${where} answered, but a check failed`,
      detail: redactText((err as Error).message, store.url!),
    });
  } finally {
    await db.close();
  }
}

const signed = (n: number) => (n > 0 ? `+${n}` : String(n));

/** The message with the URL's password (if any) replaced. */
function redactText(text: string, url: string): string {
  try {
    const pw = decodeURIComponent(new URL(url).password);
    return pw ? text.split(pw).join("***") : text;
  } catch {
    return text;
  }
}

function withTimeout<T extends { close(): Promise<void> }>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let late = false;
  return Promise.race([
    p.then((v) => {
      if (late) void v.close();
      return v;
    }),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => {
        late = true;
        reject(new Error(what));
      }, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
