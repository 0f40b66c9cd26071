/**
 * The builder's canvas tools over the systems floor's store (`sql`: the one `SqliteSql` over an open
 * systems database, src/workflows/systems/db.ts, whose canvas tables are created in that same
 * handle, or the PostgreSQL; `db`: systems.db, for the system versions), the sandboxes under
 * `<dataDir>/sandboxes/`. The bridge
 * (src/request/http/start.ts) passes the result to buildApp as `builderTools` (served at `/mcp`);
 * `clawbridge mcp` serves the same over stdio.
 */
import type Database from "better-sqlite3";
import type { Sql } from "../../core/db/sql.js";
import type { EventBus } from "../../ops/events/bus.js";
import { CanvasStore } from "./canvas-store.js";
import type { SandboxLimits } from "./sandbox.js";
import { CanvasTools } from "./canvas-tools.js";

export function openBuilderTools(args: {
  sql: Sql;
  db: Database.Database;
  dataDir: string;
  bus?: EventBus;
  sandboxLimits?: Partial<SandboxLimits>;
}): CanvasTools {
  return new CanvasTools({
    store: new CanvasStore(args.sql),
    dataDir: args.dataDir,
    bus: args.bus,
    sandboxLimits: args.sandboxLimits,
  });
}
