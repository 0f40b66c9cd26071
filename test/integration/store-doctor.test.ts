/**
 * `clawbridge doctor` on a PostgreSQL store (src/ops/doctor/database.ts), against a real PostgreSQL
 * (testkit/postgres.ts): unreachable (the password never shown), empty, migrated, a migration
 * this build does not know, instances' heartbeats and their clock skew; and the check in a whole
 * doctor run from a config file.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Config } from "../../src/core/config/schema.js";
import { InstanceHeartbeat } from "../../src/core/db/instances.js";
import { PostgresDb } from "../../src/core/db/postgres.js";
import { checkDatabase, SKEW_WARN_MS } from "../../src/ops/doctor/database.js";
import { runDoctor } from "../../src/ops/doctor/doctor.js";
import type { Finding } from "../../src/wire/admin.js";
import { cleanup, tempDir } from "../helpers/bridge.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

let pg: TestPostgres;
const open: PostgresDb[] = [];
const dirs: string[] = [];

before(async () => {
  pg = await startPostgres();
});
after(async () => {
  for (const db of open) await db.close();
  await pg?.stop();
  for (const d of dirs) cleanup(d);
});

const configOf = (url: string) =>
  ({ dataDir: "/nonexistent", store: { kind: "postgres", url, poolSize: 2, leaseSeconds: 30 } }) as unknown as Config;

async function check(url: string): Promise<Finding[]> {
  const findings: Finding[] = [];
  await checkDatabase(configOf(url), findings, 2000);
  return findings;
}
const byId = (f: Finding[], id: string) => f.find((x) => x.id === id);

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

describe("doctor: the PostgreSQL store", () => {
  it("an unreachable database fails with the fix, and never shows the password", async () => {
    const url = `postgres://clawbridge:Sup3rSecretPw@127.0.0.1:${await closedPort()}/nope`;
    const f = await check(url);
    const r = byId(f, "store:reachable");
    assert.equal(r?.status, "fail");
    assert.match(r!.title, /cannot be reached/);
    assert.match(r!.fix!, /store\.url/);
    assert.ok(!JSON.stringify(f).includes("Sup3rSecretPw"), JSON.stringify(f));
    assert.match(r!.title, /\*\*\*/);
  });

  it("empty, then migrated; a heartbeat's instance and its clock; a skewed instance warns", async () => {
    const url = await pg.database();
    let f = await check(url);
    assert.equal(byId(f, "store:reachable")?.status, "ok");
    assert.equal(byId(f, "store:migrated")?.status, "info");
    assert.match(byId(f, "store:migrated")!.title, /not migrated yet/);

    const db = await PostgresDb.open({ url, instanceId: "bridge-a" });
    open.push(db);
    const beat = new InstanceHeartbeat(db, { version: "9.9.9", everyMs: 60_000 });
    await beat.start();
    f = await check(url);
    assert.equal(byId(f, "store:migrated")?.status, "ok");
    const clock = byId(f, "store:clock")!;
    assert.equal(clock.status, "ok", JSON.stringify(clock));
    assert.match(clock.title, /1 instance up/);
    assert.match(clock.detail!, /instance bridge-a \(.*9\.9\.9\)/);

    // Another instance whose clock is 5 s ahead at its last heartbeat.
    await db.run(
      `INSERT INTO clawbridge_instances (id, host, pid, version, started_at, seen_at, skew_ms)
       VALUES ('bridge-b', 'h2', 1, '9.9.9', 0, (extract(epoch from clock_timestamp()) * 1000)::bigint, ?)`,
      [SKEW_WARN_MS * 5],
    );
    f = await check(url);
    const skewed = byId(f, "store:clock")!;
    assert.equal(skewed.status, "warn");
    assert.match(skewed.title, /bridge-b/);
    assert.match(skewed.fix!, /NTP/);

    // A clean stop removes the instance's row.
    await beat.stop();
    const rows = await db.all<{ id: string }>("SELECT id FROM clawbridge_instances ORDER BY id");
    assert.deepEqual(
      rows.map((r) => r.id),
      ["bridge-b"],
    );
  });

  it("a database migrated by a newer clawbridge fails, and the bridge refuses it too", async () => {
    const url = await pg.database();
    const db = await PostgresDb.open({ url });
    await db.run("INSERT INTO clawbridge_migrations (version, name, applied_at) VALUES (999, 'from the future', 0)");
    await db.close();
    const f = await check(url);
    assert.equal(byId(f, "store:migrated")?.status, "fail");
    assert.match(byId(f, "store:migrated")!.title, /newer clawbridge.*999/);
    await assert.rejects(PostgresDb.open({ url }), /migration 999.*upgrade clawbridge/);
  });

  it("is part of a whole doctor run from a config file", async () => {
    const url = await pg.database();
    const root = tempDir("cb-doctor-pg-");
    dirs.push(root);
    const configPath = path.join(root, "clawbridge.json");
    writeFileSync(
      configPath,
      JSON.stringify({
        server: { port: await closedPort() },
        dataDir: path.join(root, "data"),
        backends: { up: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
        models: [{ id: "m", backend: "up" }],
        store: { kind: "postgres" },
      }),
    );
    const report = await runDoctor({
      configPath,
      openclawHome: path.join(root, "openclaw"),
      tmpDir: root,
      unitDir: path.join(root, "units"),
      scanClis: false,
      validate: null,
      timeoutMs: 500,
      env: { ...process.env, HOME: root, CLAWBRIDGE_STORE_URL: url },
    });
    assert.equal(byId(report.findings, "store:reachable")?.status, "ok");
    assert.equal(byId(report.findings, "store:migrated")?.status, "info");
  });
});
