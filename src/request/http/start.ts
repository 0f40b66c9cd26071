/** Wiring: configuration → backends → pipeline → HTTP server. Also graceful shutdown. */
import { childLogger } from "../../core/log/logger.js";
import { mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { createBackends } from "../../backends/registry.js";
import { ClientToolHub } from "../../backends/client-tools/sessions.js";
import { CLIENT_TOOLS_PATH } from "./client-tools-route.js";
import type { Backend } from "../../backends/contract/backend.js";
import type { Config } from "../../core/config/schema.js";
import { DebugLog } from "../../core/log/debug-log.js";
import { createLogger } from "../../core/log/logger.js";
import { ChatPipeline, type Enricher } from "../pipeline/chat.js";
import { TurnScheduler } from "../queue/scheduler.js";
import { PgConversationLocks } from "../queue/conversation-locks.js";
import { ModelCatalog } from "../../backends/catalog/catalog.js";
import { BackendProbes, probeBackends } from "../../backends/health/probes.js";
import { ModelRouter } from "../models/routes.js";
import { reapOrphans, setRunDir, terminateAll } from "../../core/util/process.js";
import { configureWarm, sumWarmStats, warmEventSources } from "../../backends/warm/registry.js";
import { startOrphanWatcher } from "../../core/util/orphan-watcher.js";
import { PreExecutor } from "../pipeline/enrich.js";
import { InstanceHeartbeat } from "../../core/db/instances.js";
import { VERSION } from "../../core/version.js";
import { openLimitBook } from "../../core/store/limits.js";
import { closeBacking, defaultInstanceId, openBacking, type StoreBacking } from "../../core/db/backing.js";
import type { SessionStore } from "../../core/store/types.js";
import { existsSync, renameSync } from "node:fs";
import path from "node:path";
import { buildApp } from "./app.js";
import { messagesDoor } from "./messages-routes.js";
import { responsesDoor } from "../responses-api/door.js";
import { Images } from "../images/resolve.js";
import { EventBus } from "../../ops/events/bus.js";
import { EventHub } from "../../ops/events/hub.js";
import { sideCaller } from "../pipeline/side-call.js";
import type { RouterRuntimeHandle } from "../../workflows/router/runtime.js";
import { wantsSystems } from "../../workflows/systems/paths.js";
import type { BuilderBase } from "../../workflows/builder/backend-deps.js";
import type { AdminDoctor } from "./admin-routes.js";
import type { BridgeMetrics } from "../../ops/metrics/metrics.js";

export interface Bridge {
  url: string;
  port: number;
  host: string;
  backends: ReadonlyMap<string, Backend>;
  pipeline: ChatPipeline;
  /** Every routing decision, state change and run step (src/ops/events). */
  bus: EventBus;
  /** The bus as a stream (`GET /v1/events`): ids, the replay ring, redaction, subscribers (src/ops/events/hub.ts). */
  events: EventHub;
  /** Systems, runs and router state (undefined when nothing configures systems or a router). */
  systems?: RouterRuntimeHandle;
  /** Prometheus metrics served at `GET /metrics` (undefined when `metrics.enabled` is false). */
  metrics?: BridgeMetrics;
  /**
   * Answer new requests 503 (Retry-After), let running turns finish (up to the grace period), abort
   * the rest (a non-streamed one is answered 503 too), reap children, then stop listening and close
   * every connection (idle and finished ones at once).
   */
  close(graceMs?: number): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  enricher?: Enricher;
  /** Systems database file (default `<dataDir>/systems.db`; `:memory:` in tests). */
  systemsDb?: string;
  /** First retry delay of a failing run step (default 1000 ms). */
  retryBaseMs?: number;
  /** `clawbridge doctor` for the dashboard's Backends view (`GET /v1/admin/doctor`; the CLI passes it: the doctor sits above the server). */
  doctor?: AdminDoctor;
  /** Where the built dashboard is (default packages/dashboard/dist). */
  dashboardDir?: string;
}

export class PortInUseError extends Error {
  constructor(host: string, port: number, owner: string) {
    super(`${host}:${port} is already in use${owner}. Stop the other process, or start with --port <another>.`);
    this.name = "PortInUseError";
  }
}

/** Ask whatever holds the port whether it is a clawbridge (for a clear start-up message). */
async function describePortOwner(host: string, port: number): Promise<string> {
  try {
    const h = host.includes(":") ? `[${host}]` : host;
    // Any path answers with the Server header; an unknown one answers fastest (no backend checks).
    const res = await fetch(`http://${h}:${port}/.well-known/clawbridge`, { signal: AbortSignal.timeout(3000) });
    await res.body?.cancel();
    const m = /^clawbridge\/(\S+)/.exec(res.headers.get("server") ?? "");
    if (m) return ` by another clawbridge ${m[1]} (an old process or a service?)`;
  } catch {
    /* not an HTTP server we know */
  }
  return " by another program";
}

/**
 * The session store, opened when a model runs in resume mode: `<dataDir>/sessions.db`, or the
 * tables of the backing's PostgreSQL (shared by every instance). A seed-era `sessions.json` found in
 * the data directory is imported once (into either) and renamed so it is not imported again.
 */
async function openStoreIfNeeded(
  config: Config,
  backing: StoreBacking,
  logger: Logger,
): Promise<SessionStore | undefined> {
  const resumeModels = config.models.filter((m) => m.sessionMode === "resume");
  if (!resumeModels.length) return undefined;
  // Loaded only when a model runs in resume mode.
  const { importSessionsJson, openSessionStore, sessionStoreOn } = await import("../../core/store/index.js");
  const store = await openSessionStore(sessionStoreOn(backing));
  const legacy = path.join(config.dataDir, "sessions.json");
  if (existsSync(legacy)) {
    try {
      const res = await importSessionsJson(store, legacy, { backend: resumeModels[0]!.backend });
      renameSync(legacy, `${legacy}.imported-${Date.now()}`);
      logger.info(
        { file: legacy, imported: res.imported, skipped: res.skipped.length },
        "imported sessions.json into the session store",
      );
    } catch (err) {
      logger.warn(
        { file: legacy, err: (err as Error).message },
        "could not import sessions.json; it was left in place",
      );
    }
  }
  return store;
}

/** How a local CLI reaches this bridge: the address it listens on, or loopback when it listens on all addresses. */
function loopbackUrl(addr: AddressInfo): string {
  if (addr.address === "0.0.0.0") return `http://127.0.0.1:${addr.port}`;
  if (addr.address === "::") return `http://[::1]:${addr.port}`;
  return addr.family === "IPv6" ? `http://[${addr.address}]:${addr.port}` : `http://${addr.address}:${addr.port}`;
}

export async function startBridge(config: Config, opts: StartOptions = {}): Promise<Bridge> {
  const logger = opts.logger ?? createLogger(config.logging.level);
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  // Where everything durable lives: SQLite files in the data dir, or one PostgreSQL shared by every
  // instance (migrated here; a database that cannot be reached ends the start, naming store.url).
  const backing = await openBacking(config);
  // On PostgreSQL, this instance's heartbeat (who is up, their clocks: clawbridge doctor reads it).
  const heartbeat =
    backing.kind === "postgres"
      ? new InstanceHeartbeat(backing.db, {
          version: VERSION,
          onError: (err) => logger.warn({ err: err.message }, "instance heartbeat not written"),
        })
      : undefined;
  await heartbeat?.start().catch(async (err: Error) => {
    await closeBacking(backing);
    throw err;
  });
  if (backing.kind === "postgres")
    logger.info({ instance: backing.db.instanceId }, "store: PostgreSQL (shared with every instance on it)");
  // Backends at their limit: <dataDir>/limits.json, or on the PostgreSQL shared by every instance
  // (loaded now; a limit one instance meets, every instance skips).
  const limits = await openLimitBook(backing, {
    onError: (err) => logger.warn({ err: err.message }, "limit book not written; the limit stays in memory"),
  }).catch(async (err: unknown) => {
    await heartbeat?.stop();
    await closeBacking(backing);
    throw err;
  });
  // CLIs a previous bridge could not reap (it was killed with SIGKILL) are ended now; ours are
  // recorded, and ended by the orphan watcher should this bridge be killed in turn.
  const runDir = path.join(config.dataDir, "run");
  const reapStart = Date.now();
  const orphans = await reapOrphans(runDir);
  if (orphans)
    logger.warn(
      { groups: orphans, ms: Date.now() - reapStart },
      "ended CLI processes left running by a bridge that was killed",
    );
  const watcher = startOrphanWatcher(runDir, setRunDir(runDir));
  logger.debug({ pid: watcher.pid }, "orphan watcher started");
  const debugLog = new DebugLog(config.logging.debugLog);
  const bus = new EventBus((err) => logger.warn({ err }, "event listener failed"));
  // The hub listens from the start, so a watcher that connects later can replay what it missed.
  // With PostgreSQL it streams every instance's events, numbered in the shared event log.
  const eventLog =
    backing.kind === "postgres"
      ? await import("../../ops/cluster-events/event-log.js").then(
          (m) =>
            new m.ClusterEventLog(backing.db, {
              ringSize: config.events.ringSize,
              logger: childLogger(logger, { room: "events" }),
            }),
        )
      : undefined;
  const events = new EventHub(bus, {
    ...config.events,
    heartbeatMs: config.events.heartbeatSeconds * 1000,
    instance: backing.kind === "postgres" ? backing.db.instanceId : defaultInstanceId(),
    log: eventLog,
  });
  await eventLog?.start(events);
  // Prometheus metrics listen from the start (runs found interrupted at start-up count); the queue
  // is read at scrape time. prom-client is loaded only when they are on.
  const metrics = config.metrics.enabled
    ? await import("../../ops/metrics/metrics.js").then(
        (m) => new m.BridgeMetrics({ bus, scheduler: { stats: () => scheduler.stats() }, ...m.metricsLabels(config) }),
      )
    : undefined;
  // Models are reached by id for the router's classifier and systems' model steps; the routes
  // exist once the backends do (the router backend itself is built with the runtime).
  let router: ModelRouter | undefined;
  const resolveModel = (id: string) => router?.resolve(id);
  const callModel = sideCaller(resolveModel);
  let systems: RouterRuntimeHandle | undefined;
  if (wantsSystems(config)) {
    // Loaded only when systems or a router are configured.
    const { openRouterRuntime } = await import("../../workflows/router/runtime.js");
    systems = await openRouterRuntime({
      config,
      bus,
      callModel,
      logger,
      dbFile: opts.systemsDb,
      backing,
      retryBaseMs: opts.retryBaseMs,
    }).catch(async (err: unknown) => {
      // A refused config ends this start: the watcher (a child process) must not outlive it.
      await watcher.stop();
      throw err;
    });
    // A bad file in <dataDir>/systems/ leaves only its system out: named here, in /health and doctor.
    for (const l of systems.library.leftOut)
      logger.warn(
        { file: l.file, system: l.id, problems: l.problems.map((p) => `${p.key}: ${p.message}`) },
        "system file left out; the other systems and chat are served (clawbridge systems validate names its problems)",
      );
  }
  // The builder room (canvases, sandboxes, builds; the tools served at /mcp) lives beside the systems.
  let builder: BuilderBase | undefined;
  if (systems) {
    const [{ openBuilderRoom }, { builderProblems }, { SystemsConfigError }] = await Promise.all([
      import("../../workflows/builder/service.js"),
      import("../../workflows/builder/options.js"),
      import("../../workflows/router/runtime.js"),
    ]);
    const problems = builderProblems(config);
    if (problems.length) {
      await systems.close();
      await watcher.stop();
      throw new SystemsConfigError(problems);
    }
    const room = openBuilderRoom({ sql: systems.sql, db: systems.db, dataDir: config.dataDir, bus, host: systems });
    const engines = new Map<string, () => Promise<import("../../workflows/builder/builder.js").BuilderEngine>>();
    // A build resumed outside a chat (/v1/runs/:id/resume, after a restart) runs with the first builder backend's tools.
    systems.runs.register("builder", async (rec) => {
      const [load] = engines.values();
      if (!load) throw new Error("no builder backend is configured to carry the build out");
      return (await load()).program(rec);
    });
    builder = {
      room,
      bus,
      callModel,
      host: systems,
      runs: systems.runs.store,
      conversations: systems.conversations,
      manager: systems.runs,
      dataDir: config.dataDir,
      models: config.models.map((m) => ({ id: m.id, kind: config.backends[m.backend]?.type ?? "unknown" })),
      engines,
    };
  }
  // Pending client tool calls and the MCP endpoint CLI agents reach them through (models in tools.mode: bridge).
  const clientTools = config.models.some((m) => m.tools.mode === "bridge")
    ? new ClientToolHub(childLogger(logger, { room: "clienttools" }))
    : undefined;
  // The warm processes' memory budget and default standbys, for every backend (src/backends/warm).
  configureWarm(config.warm, childLogger(logger, { room: "warm" }));
  const backends = await createBackends(config, logger, {
    ...(systems ? { router: systems } : {}),
    ...(builder ? { builder } : {}),
    ...(clientTools ? { clientTools } : {}),
  });
  // What each backend's CLI or server offers, listed in the background (src/backends/catalog).
  const catalog = new ModelCatalog({
    backends,
    settings: Object.fromEntries(Object.entries(config.backends).map(([n, b]) => [n, b.models])),
    dataDir: config.dataDir,
    logger: childLogger(logger, { room: "catalog" }),
  });
  catalog.start();
  // Each backend's health and the CLIs installed, probed in the background (src/backends/health).
  const probes = new BackendProbes({
    probe: () =>
      probeBackends([...backends.values()], (name) => config.models.filter((m) => m.backend === name).map((m) => m.id)),
    everyMs: config.server.backendProbes.everySeconds * 1000,
    logger: childLogger(logger, { room: "probes" }),
  });
  if (config.server.backendProbes.enabled) probes.start();
  router = new ModelRouter(config, backends, catalog);
  const scheduler = new TurnScheduler({
    maxConcurrent: config.server.maxConcurrent,
    maxQueue: config.server.maxQueue,
    queueTimeoutMs: config.server.queueTimeoutSeconds * 1000,
    maxQueuedPerConversation: config.server.maxQueuedPerConversation,
  });
  const store = await openStoreIfNeeded(config, backing, logger);
  // Several instances on one PostgreSQL: a turn also holds its conversation's lock there, on a pooled
  // connection of its own while it runs (src/request/queue/conversation-locks.ts).
  const locks =
    backing.kind === "postgres" ? new PgConversationLocks(backing.db, () => scheduler.retryAfter()) : undefined;
  if (config.store.kind === "postgres" && config.store.poolSize <= config.server.maxConcurrent)
    logger.warn(
      { poolSize: config.store.poolSize, maxConcurrent: config.server.maxConcurrent },
      "store.poolSize should be larger than server.maxConcurrent: every running turn holds one connection for its conversation's lock, and the stores need the rest",
    );
  const preexec = new PreExecutor(logger, debugLog);
  const enricher =
    opts.enricher ?? ((text, route, signal, log, report) => preexec.enrich(text, route, signal, log, report));
  const pipeline = new ChatPipeline({
    config,
    scheduler,
    logger,
    debugLog,
    enricher,
    store,
    resolveModel,
    bus,
    ...(clientTools ? { clientTools } : {}),
    catalog,
    limits,
    ...(locks ? { locks } : {}),
  });
  // Usage per backend per day (src/ops/usage): <dataDir>/usage.db (or the shared PostgreSQL: the
  // whole cluster's), fed by the bus before any turn, read by GET /v1/admin/usage. A ledger that
  // cannot be opened is logged; the bridge runs without it.
  const usage = await import("../../ops/usage/usage.js")
    .then((u) =>
      u.UsageRecorder.open({
        bus,
        ...(backing.kind === "postgres" ? { sql: backing.db } : { dataDir: config.dataDir }),
        logger,
        backends: Object.keys(config.backends),
        modelBackends: config.models.map((m) => [m.id, m.backend] as const),
      }),
    )
    .catch((err: Error) => {
      logger.warn({ err: err.message }, "usage ledger not opened; usage is not recorded");
      return undefined;
    });
  // Images in requests: data URLs checked, image URLs fetched through the network guard.
  const images = new Images(config.images);
  // The Responses API's stored responses (previous_response_id, GET /v1/responses/:id):
  // <dataDir>/responses.db, or the shared PostgreSQL (a chain continues on any instance). One that
  // cannot be opened is logged, and responses are kept in memory until the bridge stops; when SQLite
  // itself cannot load (a host process on another Node.js, as the OpenClaw gateway may be), none
  // are kept and the door still answers.
  const responses = await import("../../core/store/responses.js")
    .then(async (r) => {
      const opts = {
        ...config.server.responses,
        onError: (err: Error, n: number) => logger.warn({ err: err.message, responses: n }, "responses not stored"),
      };
      try {
        return await r.ResponseStore.open(
          backing.kind === "postgres" ? backing.db : r.defaultResponseStorePath(config.dataDir),
          opts,
        );
      } catch (err) {
        logger.warn({ err: (err as Error).message }, "response store not opened; responses are kept in memory only");
        return await r.ResponseStore.open(":memory:", opts);
      }
    })
    .catch((err: Error) => {
      logger.warn({ err: err.message }, "responses cannot be kept here; previous_response_id is not served");
      return undefined;
    });
  const { app, front } = buildApp({
    config,
    pipeline,
    router,
    scheduler,
    backends,
    logger,
    debugLog,
    systems,
    builder,
    builderTools: builder?.room.tools,
    bus,
    events,
    metrics,
    admin: { bus, store, doctor: opts.doctor, usage, probes },
    dashboardDir: opts.dashboardDir,
    clientTools,
    catalog,
    images,
    doors: [messagesDoor, responsesDoor({ store: responses, logger })],
    ...(responses ? { responses } : {}),
  });

  try {
    await app.listen({ host: config.server.host, port: config.server.port });
  } catch (err) {
    catalog.close();
    probes.close();
    metrics?.close();
    await usage?.close();
    await responses?.close();
    await limits.close();
    events.close();
    await Promise.all([...backends.values()].map((b) => b.close?.()));
    // The CLIs started before listening (the catalog's listings, the health probes' `--version`)
    // end with this start, as at a shutdown: none may outlive the process.
    await terminateAll();
    await watcher.stop();
    await preexec.close();
    await images.close();
    await systems?.close();
    await store?.close();
    await heartbeat?.stop();
    await eventLog?.close();
    await closeBacking(backing);
    await debugLog.close();
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") {
      throw new PortInUseError(
        config.server.host,
        config.server.port,
        await describePortOwner(config.server.host, config.server.port),
      );
    }
    throw err;
  }
  const addr = app.server.address() as AddressInfo;
  const hostForUrl = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  const url = `http://${hostForUrl}:${addr.port}`;
  if (clientTools) clientTools.endpoint = `${loopbackUrl(addr)}${CLIENT_TOOLS_PATH}`;
  logger.info({ url, config: config.source, models: config.models.map((m) => m.id) }, "clawbridge listening");
  // Schedules start once the models are reachable (a missed run caught up now may call one at once).
  await systems?.triggers.reload();

  let closing: Promise<void> | undefined;
  return {
    url,
    port: addr.port,
    host: addr.address,
    backends,
    pipeline,
    bus,
    events,
    systems,
    metrics,
    close(graceMs = config.server.shutdownGraceSeconds * 1000) {
      closing ??= (async () => {
        // New requests get 503 (the port stays open while turns drain, so clients get an answer).
        front.shutdown();
        // No background probe of backends that are about to close.
        probes.close();
        // Runs attached to a draining turn are not cancelled by it: they end `interrupted` below.
        systems?.triggers.close();
        systems?.runs.beginClose();
        await pipeline.drain(graceMs);
        await systems?.runs.close();
        // The backends end their own processes first (a warm process is recorded as closed, not as
        // died); whatever is left after that (a cold turn past the grace, a system's command) is ended.
        const warmCounters = warmEventSources();
        await Promise.all([...backends.values()].map((b) => b.close?.()));
        await terminateAll();
        await watcher.stop();
        // Event streams end (`event: shutdown`) once the turns are over, so none holds the close up.
        events.close();
        // Tool calls still waiting for a client are answered, so their MCP requests do not hold the server open.
        await clientTools?.close();
        // Stop listening; idle and finished connections are closed at once.
        await front.close(() => app.close());
        await preexec.close();
        await images.close();
        await systems?.close();
        await store?.close();
        await debugLog.close();
        metrics?.close();
        await usage?.close();
        await responses?.close();
        await limits.close();
        catalog.close();
        await heartbeat?.stop();
        await eventLog?.close();
        await closeBacking(backing);
        // What became of the warm processes, per backend (closed by this shutdown, or died before it).
        const warm = Object.fromEntries(sumWarmStats(warmCounters));
        logger.info(Object.keys(warm).length ? { warm } : {}, "clawbridge stopped");
      })();
      return closing;
    },
  };
}
