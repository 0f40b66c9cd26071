/**
 * What the bridge's stores are opened on: SQLite files in the data dir (the embedded default), or
 * one PostgreSQL shared by every instance (`store: { kind: postgres }`). Opened once at start by
 * src/request/http/start.ts (and by the CLI commands that read stores), passed to every store's
 * `open…` function, closed last.
 */
import { hostname } from "node:os";
import type { StoreConfig } from "../config/schema.js";
import type { PostgresDb } from "./postgres.js";

export type StoreBacking =
  | { kind: "sqlite"; dataDir: string }
  | {
      kind: "postgres";
      db: PostgresDb;
      dataDir: string;
      /** A run's lease in ms (store.leaseSeconds). */
      leaseMs: number;
    };

/** This instance's id when the config names none: host and process id. */
export function defaultInstanceId(): string {
  return `${hostname()
    .replace(/[^A-Za-z0-9_.-]/g, "-")
    .slice(0, 40)}:${process.pid}`;
}

export async function openBacking(cfg: { store: StoreConfig; dataDir: string }): Promise<StoreBacking> {
  if (cfg.store.kind === "sqlite") return { kind: "sqlite", dataDir: cfg.dataDir };
  const { PostgresDb } = await import("./postgres.js");
  const db = await PostgresDb.open({
    url: cfg.store.url!,
    poolSize: cfg.store.poolSize,
    instanceId: cfg.store.instanceId ?? defaultInstanceId(),
  });
  return { kind: "postgres", db, dataDir: cfg.dataDir, leaseMs: Math.round(cfg.store.leaseSeconds * 1000) };
}

export async function closeBacking(b: StoreBacking | undefined): Promise<void> {
  if (b?.kind === "postgres") await b.db.close();
}
