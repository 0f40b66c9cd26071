/**
 * The configuration contract. Validated once at start-up; everything downstream receives the
 * resolved, typed `Config`. Backend types add their own option schemas (src/backends/registry.ts).
 */
import { z } from "zod";
import { clientToolsOptionsSchema, type ClientToolsOptions } from "../../backends/client-tools/options.js";
import { intentsConfigSchema, type IntentsConfigInput } from "../../request/intents/schema.js";
import { warmConfigSchema, type WarmConfig } from "../../backends/warm/options.js";

export const SESSION_MODES = ["stateless", "resume", "passthrough"] as const;
export type SessionMode = (typeof SESSION_MODES)[number];

const positiveInt = z.number().int().positive();

/** What a model may take in (`models[].input`). */
export const INPUT_KINDS = ["text", "image", "audio", "video", "pdf"] as const;
const nonNegInt = z.number().int().nonnegative();

export const contextBudgetSchema = z.strictObject({
  maxSystemChars: nonNegInt.optional(),
  maxHistoryChars: nonNegInt.optional(),
  maxToolResultChars: nonNegInt.optional(),
  maxPromptChars: positiveInt.optional(),
  /** Text placed at the top of the compressed system prompt. No persona is built in. */
  preamble: z.string().optional(),
});
export type ContextBudgetInput = z.infer<typeof contextBudgetSchema>;

export interface ContextBudget {
  maxSystemChars: number;
  maxHistoryChars: number;
  maxToolResultChars: number;
  maxPromptChars: number;
  preamble: string;
}

export const DEFAULT_PREAMBLE =
  "You are the assistant described below, answering through a chat app. " +
  "Be direct and concise. Do the task instead of describing what you could do. " +
  "When live data or tool output is included, use it to answer.";

export const DEFAULT_CONTEXT: ContextBudget = {
  maxSystemChars: 2000,
  maxHistoryChars: 2500,
  maxToolResultChars: 3000,
  maxPromptChars: 10000,
  preamble: DEFAULT_PREAMBLE,
};

export const serverSchema = z.strictObject({
  host: z.string().min(1).default("127.0.0.1"),
  port: z.number().int().min(0).max(65535).default(4097),
  /** Bearer keys accepted on /v1/*. Empty = no authentication (only allowed on loopback). */
  apiKeys: z.array(z.string().min(8, "API keys must be at least 8 characters")).default([]),
  /** Largest request body accepted, in bytes. */
  bodyLimitBytes: positiveInt.default(16 * 1024 * 1024),
  /** Seconds a client has to send a whole request (headers and body); slower → 408 and the connection closes. Not the answer: a turn may take longer. */
  requestTimeoutSeconds: z.number().positive().default(30),
  /** Seconds a client has to send the request line and headers (capped at requestTimeoutSeconds); slower → 408 and the connection closes. */
  headersTimeoutSeconds: z.number().positive().default(10),
  /** Seconds a keep-alive connection may sit idle between requests before it is closed. */
  idleTimeoutSeconds: z.number().positive().default(30),
  /** Connections open at once. Past it a new connection gets 503 (Retry-After: 1) and is closed; past twice it, it is closed unanswered. */
  maxConnections: positiveInt.default(256),
  /** Turns that may run at the same time across all conversations. */
  maxConcurrent: positiveInt.default(4),
  /** Turns that may wait for a free slot; more get 429 at once. */
  maxQueue: nonNegInt.default(32),
  /** Turns of ONE conversation that may wait (it runs one at a time); more get 429 for that conversation only. */
  maxQueuedPerConversation: nonNegInt.default(2),
  /** How long a turn may wait for a free slot before it gets 429. */
  queueTimeoutSeconds: z.number().positive().default(60),
  /** Seconds of backend silence after which an empty content chunk is streamed. */
  heartbeatSeconds: z.number().positive().default(15),
  /** Extra request header that carries a conversation key (checked first). */
  sessionHeader: z.string().min(1).optional(),
  /** Seconds to let in-flight turns finish on SIGTERM before they are aborted. */
  shutdownGraceSeconds: z.number().nonnegative().default(10),
  /** Each backend's health and the CLIs installed, probed in the background for `GET /v1/admin/backends` (src/backends/health). */
  backendProbes: z
    .strictObject({
      /** Probe at start-up and every `everySeconds`; `false`: each request to the route waits for a probe. */
      enabled: z.boolean().default(true),
      everySeconds: z
        .number()
        .min(5, "must be at least 5 seconds (a probe starts every CLI's --version)")
        .max(86_400, "must be at most 86400 seconds (a day)")
        .default(60),
    })
    .default({ enabled: true, everySeconds: 60 }),
  /** Allow listening on a non-loopback address without API keys (not recommended). */
  allowUnauthenticatedRemote: z.boolean().default(false),
  /** The Responses API's stored responses (`previous_response_id`, `GET /v1/responses/:id`): `<dataDir>/responses.db`. */
  responses: z
    .strictObject({
      /** Days a conversation's responses are kept after it was last continued. */
      keepDays: z.number().positive("must be a positive number of days").default(30),
      /** Responses kept at most; past it the least recently used conversations go first. */
      maxStored: positiveInt.default(10_000),
    })
    .default({ keepDays: 30, maxStored: 10_000 }),
});

export const loggingSchema = z.strictObject({
  level: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** Human-readable debug log (intent, prompt size, response size, HTTP line). null = off. */
  debugLog: z.string().min(1).nullable().default(null),
});

/** `GET /metrics` (Prometheus text, src/ops/metrics/). */
export const metricsSchema = z.strictObject({
  /** Serve `GET /metrics`; off → 404 like any unknown route. */
  enabled: z.boolean().default(true),
  /** Whether `/metrics` needs one of server.apiKeys (a scraper sends it as a bearer token). Default: true when server.apiKeys is set. */
  requireKey: z.boolean().optional(),
});

/** `GET /v1/events`: the live event stream (src/ops/events/hub.ts, src/request/http/events-route.ts). */
export const eventsSchema = z.strictObject({
  /** Events kept in memory for `Last-Event-ID` replay. */
  ringSize: positiveInt.max(1_000_000).default(1000),
  /** Stream prompts, answers, run outputs and error texts as they are (default: each replaced with `[redacted: N chars]`). */
  includeText: z.boolean().default(false),
  /** A comment line is sent on every stream after this many seconds. */
  heartbeatSeconds: z.number().positive().default(15),
  /** Events a subscriber whose connection is not draining may have waiting; past it (or 4 MiB) it is dropped. */
  maxQueued: positiveInt.default(1000),
});
export type EventsConfig = z.infer<typeof eventsSchema>;

/** Images in requests (src/request/images): how big, how many, and whether image URLs are fetched. */
export const imagesSchema = z.strictObject({
  /** Largest image accepted, in bytes (decoded); a larger one is a 400 that says so. */
  maxBytes: positiveInt.default(10 * 1024 * 1024),
  /** Most images in one request. */
  maxPerRequest: positiveInt.default(20),
  /** http(s) image URLs are fetched by the bridge through its network guard (no private addresses unless allowed here). */
  fetch: z
    .strictObject({
      /** Off: an image URL is refused (send the image as data). */
      enabled: z.boolean().default(true),
      timeoutSeconds: z.number().positive().default(15),
      allowPrivateAddresses: z.boolean().default(false),
      /** CIDRs, addresses or hostnames (`nas.lan`, `*.lan`) allowed although private. */
      allowHosts: z.array(z.string().min(1)).default([]),
    })
    .default({ enabled: true, timeoutSeconds: 15, allowPrivateAddresses: false, allowHosts: [] }),
});
export type ImagesConfig = z.infer<typeof imagesSchema>;

export const backendBaseSchema = z.looseObject({
  type: z.string().min(1, "every backend needs a type"),
});

/** What a backend offers beyond its configured models, and what happens to a model its CLI no longer offers (src/backends/catalog). */
export const backendModelsSchema = z.strictObject({
  /** `all`: /v1/models also lists every model the backend's CLI or server offers, as `<backend>/<model>`, and serves them. */
  expose: z.enum(["configured", "all"]).default("configured"),
  /** A configured or requested model its CLI no longer offers: `best-free` (a free live one), `first` (the first live one), `error` (answer the CLI's error). */
  remap: z
    .strictObject({ onMissing: z.enum(["best-free", "first", "error"]).default("error") })
    .default({ onMissing: "error" }),
  /** Ask the CLI or server for its models at start-up and then every `refreshHours`; `enabled: false` never asks. */
  discovery: z
    .strictObject({ enabled: z.boolean().default(true), refreshHours: z.number().positive().default(6) })
    .default({ enabled: true, refreshHours: 6 }),
  /** A backend at its limit is skipped until its reset; `backoffSeconds` when it did not say when (src/request/pipeline/fallback.ts). */
  limits: z.strictObject({ backoffSeconds: z.number().positive().default(300) }).default({ backoffSeconds: 300 }),
});
export type BackendModels = z.infer<typeof backendModelsSchema>;

export const modelSchema = z.strictObject({
  /** What clients ask for. */
  id: z.string().min(1),
  /** Name of an entry in `backends`. */
  backend: z.string().min(1),
  /** What the backend is given (defaults to id). */
  model: z.string().min(1).optional(),
  /** Display name for /v1/models and OpenClaw set-up. */
  name: z.string().optional(),
  context: contextBudgetSchema.optional(),
  session: z
    .strictObject({
      mode: z.enum(SESSION_MODES).optional(),
      /**
       * What to do when a request names no conversation (no header, no `user`, no OpenClaw Runtime
       * line): `derived` keys it on the conversation's first user message as sent (OpenClaw's
       * timestamp/message-id metadata makes that unique); `stateless` answers it statelessly.
       */
      fallback: z.enum(["derived", "stateless"]).optional(),
      /** Characters of earlier conversation given to a NEW backend session (first turn or healed). */
      maxSeedChars: nonNegInt.optional(),
    })
    .optional(),
  /** Tool pre-execution (live web data) for this model, merged over the top-level `intents`. */
  intents: intentsConfigSchema.partial().optional(),
  /** The client's own tools offered to a CLI agent over MCP (src/backends/client-tools): `{mode: bridge | off, exclude, pendingTimeoutSeconds}`. */
  tools: clientToolsOptionsSchema.optional(),
  /** Advertised context window and output limit (for OpenClaw's provider entry). */
  contextWindow: positiveInt.optional(),
  maxTokens: positiveInt.optional(),
  /**
   * Model ids tried in order when this model's backend fails before any output with a limit, an
   * expired login, or is down or missing (src/request/pipeline/fallback.ts).
   */
  fallback: z.array(z.string().min(1)).optional(),
  /** Add one short line to an answer a fallback model gave ("(Claude is at its limit until 04:20; Gemini answered.)"). */
  fallbackNotice: z.boolean().optional(),
  /**
   * What the model takes in, for /v1/models and for images (src/request/images): `[text]` says it
   * cannot see images, so each image is replaced by one line saying so. Default: what its backend
   * reports, else what its backend type can pass on.
   */
  input: z.array(z.enum(INPUT_KINDS)).min(1).optional(),
});
export type ModelInput = z.infer<typeof modelSchema>;

export const remapSchema = z.strictObject({
  /** Case-insensitive substring of the requested model id. */
  match: z.string().min(1),
  /** Model id (from `models`) to use instead, or a model name for `backend`. */
  to: z.string().min(1),
  /** When `to` is not a configured model id: the backend that serves it (default: the only backend). */
  backend: z.string().min(1).optional(),
});

/**
 * Where everything durable lives (src/core/store/): `sqlite` (default: files in the data dir, one
 * person, one machine) or `postgres` (several bridges on one database, docs/MULTI_INSTANCE.md).
 */
export const storeSchema = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("sqlite") }),
  z.strictObject({
    kind: z.literal("postgres"),
    /** `postgres://user:password@host:5432/db`; `CLAWBRIDGE_STORE_URL` overrides it (keeps the password out of the file). */
    url: z
      .string()
      .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL")
      .optional(),
    /** Connections in this instance's pool; a turn waiting for its conversation holds one. */
    poolSize: positiveInt.max(500).default(20),
    /** This instance's id in events and run leases; default: hostname and process id. */
    instanceId: z
      .string()
      .regex(/^[A-Za-z0-9_.:-]{1,64}$/, "letters, digits, _ . : - (at most 64)")
      .optional(),
    /** A run's lease: renewed every third of it; another instance takes the run over after it lapses. */
    leaseSeconds: z.number().min(3, "must be at least 3 seconds").max(3600).default(30),
  }),
]);
export type StoreConfig = z.infer<typeof storeSchema>;

export const configFileSchema = z.strictObject({
  server: serverSchema.default(serverSchema.parse({})),
  logging: loggingSchema.default(loggingSchema.parse({})),
  metrics: metricsSchema.default(metricsSchema.parse({})),
  /** Where the bridge keeps its state (sessions, work dirs, logs). */
  dataDir: z.string().min(1).optional(),
  /** Defaults for every model's context budget. */
  context: contextBudgetSchema.optional(),
  backends: z.record(
    z.string().regex(/^[A-Za-z0-9_.-]+$/, "backend names use letters, digits, _ . -"),
    backendBaseSchema,
  ),
  models: z.array(modelSchema).min(1, "configure at least one model"),
  remap: z.array(remapSchema).default([]),
  /** Tool pre-execution defaults for every model (see src/request/intents/schema.ts). */
  intents: intentsConfigSchema.partial().optional(),
  /**
   * The person's own systems (webhooks, commands, MCP tools, models, plans) that a `router`
   * backend can run. Checked at start-up by src/workflows/systems/library.ts, together with the files in
   * `<dataDir>/systems/`.
   */
  systems: z.array(z.unknown()).default([]),
  events: eventsSchema.default(eventsSchema.parse({})),
  images: imagesSchema.default(imagesSchema.parse({})),
  /** Every backend's warm CLI processes together: their memory budget, the default number of standbys (src/backends/warm). */
  warm: warmConfigSchema.default(warmConfigSchema.parse({})),
  store: storeSchema.default({ kind: "sqlite" }),
});
export type ConfigFile = z.infer<typeof configFileSchema>;
export type ServerConfig = z.infer<typeof serverSchema>;
export type LoggingConfig = z.infer<typeof loggingSchema>;
/** The resolved `metrics:` section (`requireKey` decided). */
export interface MetricsConfig {
  enabled: boolean;
  requireKey: boolean;
}

export interface ResolvedModel {
  id: string;
  name: string;
  backend: string;
  backendModel: string;
  context: ContextBudget;
  sessionMode: SessionMode;
  contextWindow: number;
  maxTokens: number;
  session: { fallback: "derived" | "stateless"; maxSeedChars: number };
  /** Merged tool pre-execution settings (undefined: the defaults). */
  intents: IntentsConfigInput | undefined;
  /** The client's tools for CLI agents (`off` unless configured). */
  tools: ClientToolsOptions;
  /** Model ids tried in order when this one's backend fails before any output (checked to exist). */
  fallback: string[];
  fallbackNotice: boolean;
  /** `models[].input` as configured (undefined: what the backend reports or its type can pass on). */
  input?: string[];
}

export interface Config {
  server: ServerConfig;
  logging: LoggingConfig;
  metrics: MetricsConfig;
  dataDir: string;
  /** Backend options, validated by each backend type's own schema. */
  backends: Record<string, { type: string; options: unknown; models: BackendModels }>;
  /** Per backend with `expose: all`: the model settings a discovered model is served with. */
  exposeTemplates: Record<string, ResolvedModel>;
  models: ResolvedModel[];
  remap: Array<{ match: string; to: string; backend?: string }>;
  /** Remap targets that are model names on a backend rather than configured model ids. */
  remapTargets: Record<string, ResolvedModel>;
  /** Raw `systems:` entries (validated by src/workflows/systems/library.ts). */
  systems: unknown[];
  /** The live event stream (`GET /v1/events`). */
  events: EventsConfig;
  /** Images in requests (src/request/images). */
  images: ImagesConfig;
  /** The warm CLI processes of every backend: memory budget, default standbys (src/backends/warm). */
  warm: WarmConfig;
  /** Where everything durable lives: SQLite files in dataDir, or one PostgreSQL (its URL resolved). */
  store: StoreConfig;
  /** Where the configuration came from (file path or "embedded defaults"). */
  source: string;
}
