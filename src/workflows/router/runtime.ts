/**
 * Everything systems and routers need, opened once at start-up (and only when the config has
 * systems, a `<dataDir>/systems/` folder, or a router backend): the secrets systems may name
 * (src/core/secrets/: a secrets file readable by others stops the start), the checked systems library, the
 * systems database (runs, every conversation's state), the run manager, and runs left `running` by
 * a bridge that stopped marked `interrupted`, and the triggers (schedules and inbound hooks,
 * src/workflows/triggers; armed by start-up once the models are reachable). Also the start-up checks that span the config: a
 * router's `classifier` and `answer` name models that are not routers; one conversation TTL.
 */
import type { StoreBacking } from "../../core/db/backing.js";
import { type Sql, sqliteSqlOf } from "../../core/db/sql.js";
import { childLogger } from "../../core/log/logger.js";
import type Database from "better-sqlite3";
import type { Logger } from "pino";
import type { Config } from "../../core/config/schema.js";
import type { EventBus } from "../../ops/events/bus.js";
import { openSystemsDb, RunStore, systemsDbPath } from "../systems/db.js";
import type { ModelCaller } from "../systems/step-executor.js";
import { loadSystems, type LibraryProblem, type SystemsLibrary, type ToolFacts } from "../systems/library.js";
import { systemsDir } from "../systems/paths.js";
import { SecretStore, secretsFile } from "../../core/secrets/store.js";
import { RunManager } from "../systems/runner.js";
import type { McpServer } from "../systems/schema.js";
import { type VersionMade, versionsOf } from "../systems/versions.js";
import { ConversationMachine, conversationTtl } from "../conversation/machine.js";
import { Triggers } from "../triggers/triggers.js";
import { routerOptionsSchema } from "./options.js";

export { systemsDir, wantsSystems } from "../systems/paths.js";

/** Problems of the router backends' model references, each naming its key. */
export function routerProblems(config: Config): string[] {
  const problems: string[] = [];
  const models = new Map(config.models.map((m) => [m.id, m]));
  for (const [name, entry] of Object.entries(config.backends)) {
    if (entry.type !== "router") continue;
    const opts = routerOptionsSchema.parse(entry.options);
    for (const key of ["classifier", "answer", "builder"] as const) {
      if (opts[key] === undefined) continue;
      const m = models.get(opts[key]);
      if (!m)
        problems.push(
          `backends.${name}.${key}: no model "${opts[key]}" in models (models: ${[...models.keys()].join(", ")})`,
        );
      else if (config.backends[m.backend]?.type === "router")
        problems.push(
          `backends.${name}.${key}: "${opts[key]}" is itself a router model; name the model that does the work`,
        );
      else if (key === "builder" && config.backends[m.backend]?.type !== "builder")
        problems.push(
          `backends.${name}.builder: "${opts[key]}" is served by a ${config.backends[m.backend]?.type} backend; name a model of a type: builder backend`,
        );
      else if (key !== "builder" && config.backends[m.backend]?.type === "builder")
        problems.push(`backends.${name}.${key}: "${opts[key]}" is a builder model; name the model that answers`);
    }
  }
  return problems;
}

/** Read an MCP tool's schema and annotations at start-up (loads the MCP client only then); the server's secrets filled in. */
async function describeTool(server: McpServer, tool: string, secrets: SecretStore): Promise<ToolFacts> {
  const [{ describeMcpTool }, { renderServer }] = await Promise.all([
    import("../systems/executors/mcp.js"),
    import("../systems/executors/mcp-connect.js"),
  ]);
  const filled = renderServer(server, { inputs: {}, secret: (n) => secrets.value(n) });
  return describeMcpTool(filled, tool, { timeoutMs: 15_000 });
}

/** Load and check the systems (config + files). Used by start-up and `clawbridge systems validate`. */
export async function loadLibrary(
  config: Config,
  opts: { askMcp?: boolean; candidates?: Array<{ where: string; value: unknown }> } = {},
): Promise<{ library: SystemsLibrary; problems: LibraryProblem[]; secrets: SecretStore }> {
  const models = new Map(config.models.map((m) => [m.id, { router: config.backends[m.backend]?.type === "router" }]));
  // The secrets systems may name (<dataDir>/secrets, CLAWBRIDGE_SECRET_*): a refused file is a problem of its own.
  const loaded = SecretStore.load(config.dataDir);
  const secrets = "problems" in loaded ? SecretStore.empty(secretsFile(config.dataDir)) : loaded;
  const res = await loadSystems({
    configSystems: config.systems,
    dir: systemsDir(config.dataDir),
    models,
    describeTool: opts.askMcp === false ? undefined : (s, tool) => describeTool(s, tool, secrets),
    candidates: opts.candidates,
    secrets,
  });
  if ("problems" in loaded)
    res.problems.unshift(...loaded.problems.map((p) => ({ where: p.file, key: p.key, message: p.message })));
  // A router that offers systems by id: each must exist.
  for (const [name, entry] of Object.entries(config.backends)) {
    if (entry.type !== "router") continue;
    const o = routerOptionsSchema.parse(entry.options);
    for (const id of o.systems ?? []) {
      if (!res.library.get(id))
        res.problems.push({ where: "config", key: `backends.${name}.systems`, message: `no (valid) system "${id}"` });
    }
  }
  return { ...res, secrets };
}

export interface RouterRuntimeHandle {
  library: SystemsLibrary;
  runs: RunManager;
  /** Every conversation's state and open question, the router's and the builder's. */
  conversations: ConversationMachine;
  bus: EventBus;
  callModel: ModelCaller;
  /** systems.db (SQLite): the engine under `sql` unless the store is PostgreSQL; the builder moves its 0.1.0 `builds` table out of it. */
  db: Database.Database;
  /**
   * Where the systems floor keeps its rows (runs and steps, approvals, versions, trigger state,
   * canvases, conversation states): the one `SqliteSql` over systems.db (every store shares it, so
   * its transactions are serialised), or the PostgreSQL of `store: { kind: postgres }`.
   */
  sql: Sql;
  /** The schedules and inbound hooks; `triggers.reload()` arms them (start-up, after every reload). */
  triggers: Triggers;
  /**
   * Check the library as it would be with these systems added or replaced (a canvas about to be
   * deployed); nothing changes. Returns the problems, each naming where and which key.
   */
  check(candidates: Array<{ where: string; value: unknown }>): Promise<LibraryProblem[]>;
  /**
   * Load the config and `<dataDir>/systems/` again and take the result (after a deploy or removal),
   * recording a version of each system that changed (`made`: who made the one deployed or rolled
   * back). Problems leave the library as it was.
   */
  reload(made?: VersionMade): Promise<LibraryProblem[]>;
  close(): Promise<void>;
}

export class SystemsConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(
      `the systems configuration has ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems.map((p) => `  - ${p}`).join("\n")}`,
    );
    this.name = "SystemsConfigError";
  }
}

export function formatProblem(p: LibraryProblem): string {
  return `${p.where === "config" ? "" : `${p.where}: `}${p.key}: ${p.message}`;
}

export async function openRouterRuntime(args: {
  config: Config;
  bus: EventBus;
  callModel: ModelCaller;
  logger: Logger;
  dbFile?: string;
  retryBaseMs?: number;
  /** The store backing (src/core/db/backing.ts); default SQLite in config.dataDir. */
  backing?: StoreBacking;
}): Promise<RouterRuntimeHandle> {
  const { config, bus, callModel, logger } = args;
  const problems = routerProblems(config);
  const { library, problems: libProblems, secrets: loadedSecrets } = await loadLibrary(config);
  // The secrets runs read: those of the last load (a reload reads the file again).
  let secrets = loadedSecrets;
  problems.push(...libProblems.map(formatProblem));
  const ttl = conversationTtl(config.backends);
  if ("problem" in ttl) problems.push(ttl.problem);
  if (problems.length || "problem" in ttl) throw new SystemsConfigError(problems);
  const db = openSystemsDb(args.dbFile ?? systemsDbPath(config.dataDir));
  const sql: Sql = args.backing?.kind === "postgres" ? args.backing.db : sqliteSqlOf(db);
  const runs = new RunManager({
    store: new RunStore(sql),
    // PostgreSQL: runs are claimed with a lease (src/workflows/systems/runner.ts).
    lease:
      args.backing?.kind === "postgres" ? { owner: args.backing.db.instanceId, ms: args.backing.leaseMs } : undefined,
    library,
    bus,
    callModel,
    dataDir: config.dataDir,
    secret: (name) => secrets.value(name),
    log: childLogger(logger, { room: "systems" }),
    retryBaseMs: args.retryBaseMs,
    versions: versionsOf(sql, config.dataDir),
  });
  await runs.recover();
  const triggers = new Triggers({
    library,
    runs,
    sql,
    bus,
    log: childLogger(logger, { room: "triggers" }),
    dataDir: config.dataDir,
    secret: (name) => secrets.value(name),
  });
  const recordVersions = async (made?: VersionMade) => {
    for (const v of await runs.versions.sync(library, made))
      bus.emit({ type: "system.version", system: v.system, version: v.number, by: v.by, note: v.note });
  };
  await recordVersions();
  logger.info({ systems: library.systems.map((s) => s.id) }, "systems loaded");
  return {
    library,
    runs,
    conversations: new ConversationMachine(sql, ttl.minutes * 60_000, bus),
    bus,
    callModel,
    db,
    sql,
    triggers,
    async check(candidates) {
      return (await loadLibrary(config, { candidates })).problems;
    },
    async reload(made) {
      const next = await loadLibrary(config);
      if (next.problems.length) return next.problems;
      library.replace(next.library);
      secrets = next.secrets;
      await recordVersions(made);
      await triggers.reload();
      logger.info({ systems: library.systems.map((s) => s.id) }, "systems reloaded");
      return [];
    },
    async close() {
      await triggers.close();
      await runs.close();
      db.close();
    },
  };
}
