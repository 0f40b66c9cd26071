/**
 * The HTTP server: the turn-taking doors (`POST /v1/chat/completions`, `/v1/responses`, `/v1/messages`)
 * go to the door runner, src/request/http/door-route.ts (plain node:http);
 * Fastify serves the models, health and unknown routes. Neither knows which backend it talks to.
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { Logger } from "pino";
import type { Backend, BackendHealth } from "../../backends/contract/backend.js";
import type { Config } from "../../core/config/schema.js";
import type { DebugLog } from "../../core/log/debug-log.js";
import type { ChatPipeline } from "../pipeline/chat.js";
import type { TurnScheduler } from "../queue/scheduler.js";
import type { ListedModel, ModelRouter } from "../models/routes.js";
import type { ModelCatalog } from "../../backends/catalog/catalog.js";
import { liveProcesses } from "../../core/util/process.js";
import { warmSummary } from "../../backends/warm/registry.js";
import { VERSION } from "../../core/version.js";
import { ApiKeys } from "./auth.js";
import { chatDoor } from "./chat-route.js";
import { doorRoute, type DoorRouteDeps } from "./door-route.js";
import type { Door } from "./door.js";
import type { ImageResolver } from "../images/resolve.js";
import { HttpFront, lingerAfterAnswer, UNAUTHENTICATED_LINGER_BYTES } from "./http-front.js";
import { ApiError, internalError, unauthorized } from "../chat-api/errors.js";
import type { RouterRuntimeHandle } from "../../workflows/router/runtime.js";
import { isSystemsRoute, leftOutJson, registerSystemsRoutes } from "./systems-routes.js";
import { isHooksRoute, registerHooksRoute } from "./hooks-route.js";
import { isMcpRoute, registerMcpRoute } from "./mcp-route.js";
import { isClientToolsRoute, registerClientToolsRoute } from "./client-tools-route.js";
import type { ClientToolHub } from "../../backends/client-tools/sessions.js";
import type { CanvasTools } from "../../workflows/builder/canvas-tools.js";
import type { BuilderBase } from "../../workflows/builder/backend-deps.js";
import { registerBuilderRoutes } from "./builder-routes.js";
import type { BridgeMetrics } from "../../ops/metrics/metrics.js";
import { registerMetricsRoute } from "./metrics-route.js";
import { sendApiError } from "./reply.js";
import type { EventBus } from "../../ops/events/bus.js";
import type { EventHub } from "../../ops/events/hub.js";
import { registerEventsRoute } from "./events-route.js";
import { registerDashboardRoute } from "./dashboard-route.js";
import { registerAdminRoutes, type AdminDeps } from "./admin-routes.js";
import { registerResponsesRoutes } from "./responses-routes.js";
import type { ResponseStore } from "../../core/store/responses.js";
import { isCountTokensRoute, registerMessagesRoutes, sendMessagesError } from "./messages-routes.js";

export interface AppDeps {
  config: Config;
  pipeline: ChatPipeline;
  router: ModelRouter;
  scheduler: TurnScheduler;
  backends: ReadonlyMap<string, Backend>;
  logger: Logger;
  debugLog: DebugLog;
  /** Systems, runs and router state, when configured (src/request/http/systems-routes.ts). */
  systems?: RouterRuntimeHandle;
  /** The builder's canvas and sandbox tools, served over MCP at `/mcp` (src/request/http/mcp-route.ts); without them /mcp is 404. */
  builderTools?: CanvasTools;
  /** The builder room (canvases, builds, export), when systems are on (src/request/http/builder-routes.ts). */
  builder?: BuilderBase;
  /** The bus (backend health changes are published on it) and the hub behind `GET /v1/events` (src/request/http/events-route.ts). */
  bus?: EventBus;
  events?: EventHub;
  /** What the dashboard's `/v1/admin/*` routes read (src/request/http/admin-routes.ts). */
  admin?: AdminDeps;
  /** The built dashboard (default packages/dashboard/dist; src/request/http/dashboard-route.ts). */
  dashboardDir?: string;
  /** Prometheus metrics, served at `GET /metrics` (src/request/http/metrics-route.ts); without them /metrics is 404. */
  metrics?: BridgeMetrics;
  /** Client tool calls of CLI agents, served over MCP at `/mcp/client-tools` (src/request/http/client-tools-route.ts); without them 404. */
  clientTools?: ClientToolHub | undefined;
  /** The models each backend offers (listed in `/health`: what was found, what was remapped). */
  catalog?: ModelCatalog;
  /** More turn-taking doors than Chat Completions (the Responses API, Anthropic Messages: src/request/http/door.ts). */
  doors?: Door[];
  /** Fetches and checks the requests' images (src/request/images). */
  images?: ImageResolver;
  /** The Responses API's stored responses, served at `GET/DELETE /v1/responses/:id` (src/request/http/responses-routes.ts). */
  responses?: ResponseStore;
}

const HEALTH_TTL_MS = 30_000;

/** The Fastify app and the HTTP front under it (connections, timeouts, shutdown: src/request/http/http-front.ts). */
export interface BuiltApp {
  app: FastifyInstance;
  front: HttpFront;
}

export function buildApp(deps: AppDeps): BuiltApp {
  const { config, pipeline, router, scheduler, backends, logger, debugLog } = deps;
  const startedAt = Date.now();
  const keys = new ApiKeys(config.server.apiKeys);
  // Every response names the bridge, so a second instance (and `doctor`) recognises one on a port
  // cheaply.
  const SERVER = `clawbridge/${VERSION}`;
  let front!: HttpFront;
  const doorDeps: DoorRouteDeps = {
    config,
    pipeline,
    router,
    keys,
    logger,
    debugLog,
    closesAfter: (req) => front.closesAfter(req),
    server: SERVER,
    lingerBytes: () => front.lingerBytes,
    ...(deps.images ? { images: deps.images } : {}),
  };
  // The turn-taking doors, each with its handler (Chat Completions first: most requests are its).
  const doors: ReadonlyArray<readonly [Door, ReturnType<typeof doorRoute>]> = [chatDoor, ...(deps.doors ?? [])].map(
    (door) => [door, doorRoute(door, doorDeps)] as const,
  );
  const app = Fastify({
    logger: false,
    // POST /v1/chat/completions, the route every turn takes, is served on plain node:http
    // (src/request/http/door-route.ts); Fastify serves the rest. Both sit behind the HTTP front
    // (timeouts, connection cap, HTTP-level errors, shutdown).
    serverFactory: (fastifyHandler) => {
      front = new HttpFront(
        {
          serverHeader: SERVER,
          headersTimeoutMs: config.server.headersTimeoutSeconds * 1000,
          requestTimeoutMs: config.server.requestTimeoutSeconds * 1000,
          idleTimeoutMs: config.server.idleTimeoutSeconds * 1000,
          maxConnections: config.server.maxConnections,
          bodyLimitBytes: config.server.bodyLimitBytes,
        },
        (req, res, expectsContinue) => {
          // A door writes its own `server` header.
          for (const [door, handle] of doors)
            if (door.matches(req.method, req.url)) return handle(req, res, expectsContinue);
          res.setHeader("server", SERVER);
          // Only the systems and runs routes and /mcp read a body: one sent anyway elsewhere is not
          // read past a small budget, and the connection closes after the answer.
          if (
            isSystemsRoute(req.method, req.url) ||
            isHooksRoute(req.method, req.url) ||
            isMcpRoute(req.method, req.url) ||
            isClientToolsRoute(req.method, req.url) ||
            isCountTokensRoute(req.method, req.url)
          ) {
            if (expectsContinue) res.writeContinue();
          } else if (
            req.headers["transfer-encoding"] !== undefined ||
            (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0")
          ) {
            res.setHeader("connection", "close");
            lingerAfterAnswer(req, UNAUTHENTICATED_LINGER_BYTES);
          } else if (expectsContinue) res.writeContinue();
          fastifyHandler(req, res);
        },
      );
      return front.server;
    },
    return503OnClosing: true,
    // On close, idle keep-alive sockets are closed at once (running turns still finish).
    forceCloseConnections: "idle",
    // node:http's parser errors and request timeouts, answered OpenAI-shaped (Fastify's own
    // answer is `{"error":"Bad Request",...}`).
    clientErrorHandler: (err, socket) => front.onClientError(err, socket),
    // Errors Fastify raises before routing (a malformed URL...) are OpenAI-shaped too.
    frameworkErrors: (err, _req, reply) => {
      const body = new ApiError(400, "invalid_request_error", "bad_request", `Bad request: ${err.message}`).body();
      (reply as FastifyReply).code(400).type("application/json").send(body);
    },
  });

  // No Fastify route reads a body (the chat route parses its own) except the systems routes,
  // which register their own JSON parser.
  app.removeAllContentTypeParsers();
  registerSystemsRoutes(app, deps.systems);
  registerHooksRoute(app, deps.systems);
  registerMcpRoute(app, { keys, tools: deps.builderTools });
  registerClientToolsRoute(app, deps.clientTools);
  registerBuilderRoutes(app, deps.builder);
  registerEventsRoute(app, deps.events);
  registerDashboardRoute(app, { dir: deps.dashboardDir });
  registerAdminRoutes(app, deps);
  registerMetricsRoute(app, { metrics: deps.metrics, keys, requireKey: config.metrics.requireKey });
  registerResponsesRoutes(app, { store: deps.responses });
  registerMessagesRoutes(app, { bodyLimitBytes: config.server.bodyLimitBytes, logger });

  const sendError = sendApiError;

  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
    if (err instanceof ApiError) return sendError(reply, err);
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return sendError(
        reply,
        new ApiError(err.statusCode, "invalid_request_error", err.code ?? "bad_request", err.message),
      );
    }
    logger.error({ err }, "unexpected error");
    return sendError(reply, internalError());
  });

  app.setNotFoundHandler((req, reply) =>
    sendError(
      reply,
      new ApiError(
        404,
        "not_found_error",
        "not_found",
        `No route ${req.method} ${req.url}. Try POST /v1/chat/completions or GET /v1/models.`,
      ),
    ),
  );

  if (keys.required) {
    app.addHook("onRequest", async (req, reply) => {
      if (!req.url.startsWith("/v1/")) return;
      // An inbound hook proves itself by its signature (src/workflows/triggers/hooks.ts), not a key.
      if (isHooksRoute(req.method, req.url)) return;
      if (!keys.check(ApiKeys.presented(req.headers))) {
        // An Anthropic client reads Anthropic's error shape.
        if (isCountTokensRoute(req.method, req.url)) return sendMessagesError(reply, unauthorized());
        return sendError(reply, unauthorized());
      }
    });
  }

  app.addHook("preClose", (done) => {
    front.shutdown();
    done();
  });

  if (debugLog.enabled) {
    app.addHook("onResponse", async (req, reply) => {
      debugLog.line(`HTTP: "${req.method} ${req.url} HTTP/${req.raw.httpVersion}" ${reply.statusCode} -`);
    });
  }

  let healthCache: { at: number; value: Array<BackendHealth & { name: string; type: string }> } | undefined;
  const healthSeen = new Map<string, boolean>();
  const backendHealth = async () => {
    if (!healthCache || Date.now() - healthCache.at > HEALTH_TTL_MS) {
      const value = await Promise.all(
        [...backends.values()].map(async (b) => {
          const h = await b.health().catch((e: Error) => ({ usable: false, detail: e.message }));
          return { name: b.name, type: b.type, ...h };
        }),
      );
      healthCache = { at: Date.now(), value };
      // A backend's health on the bus when it is first checked and whenever `usable` changes.
      for (const h of value) {
        if (healthSeen.get(h.name) === h.usable) continue;
        healthSeen.set(h.name, h.usable);
        deps.bus?.emit({ type: "backend.health", backend: h.name, usable: h.usable, detail: h.detail });
      }
    }
    return healthCache.value;
  };

  const status = async () => {
    const list = await backendHealth();
    return {
      status: list.every((b) => b.usable) ? "ok" : list.some((b) => b.usable) ? "degraded" : "unusable",
      name: "clawbridge",
      version: VERSION,
      uptimeSeconds: Math.round((Date.now() - startedAt) / 1000),
      backends: list,
      models: router.models().map((m) => ({ id: m.id, backend: m.backend, mode: m.sessionMode })),
      // Models a backend's CLI no longer offers, served by a live one (remap.onMissing), and what each backend offers.
      remappedModels: deps.catalog?.remaps() ?? [],
      discoveredModels: Object.fromEntries(
        [...backends.keys()].flatMap((name) => {
          const l = deps.catalog?.list(name);
          return l
            ? [
                [
                  name,
                  {
                    count: l.models.length,
                    listedAt: new Date(l.at).toISOString(),
                    source: l.source,
                    ...(l.error ? { error: l.error } : {}),
                  },
                ],
              ]
            : [];
        }),
      ),
      // Processes of turns running now; warm ones (kept between turns) are listed apart.
      turns: { ...scheduler.stats(), processes: liveProcesses().filter((p) => !p.warm).length },
      warm: warmSummary(),
      // Systems: how many loaded, and each file of <dataDir>/systems/ left out with its problems.
      ...(deps.systems
        ? {
            systems: {
              loaded: deps.systems.library.systems.length,
              left_out: deps.systems.library.leftOut.map(leftOutJson),
            },
          }
        : {}),
    };
  };
  // With API keys set, the details (backends, models, load) need the key; liveness does not.
  const health = async (req: FastifyRequest) => {
    if (keys.required && !keys.check(ApiKeys.presented(req.headers))) {
      return { status: "ok", name: "clawbridge", version: VERSION, detail: "send the API key for backend details" };
    }
    return status();
  };
  app.get("/", health);
  app.get("/health", health);

  const modelJson = (m: ListedModel) => ({
    id: m.id,
    object: "model",
    created: Math.floor(startedAt / 1000),
    owned_by: m.ownedBy,
    ...(m.contextWindow ? { context_window: m.contextWindow } : {}),
    // `input` as OpenClaw's model entries name it; `input_modalities` as OpenAI-style listings do.
    input: m.input,
    input_modalities: m.input,
  });
  app.get("/v1/models", async () => ({ object: "list", data: router.listed().map(modelJson) }));
  app.get<{ Params: { "*": string } }>("/v1/models/*", async (req, reply) => {
    const id = req.params["*"];
    const m = router.listed().find((x) => x.id === id);
    if (!m)
      return sendError(
        reply,
        new ApiError(404, "invalid_request_error", "model_not_found", `The model "${id}" is not served here.`, "model"),
      );
    return modelJson(m);
  });

  return { app, front };
}
