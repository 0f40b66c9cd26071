/**
 * What `clawbridge openclaw install` writes: OpenClaw's provider entry for this bridge, built from
 * the bridge configuration, and where OpenClaw keeps its files.
 *
 * OpenClaw's config schema is strict (an unknown key anywhere invalidates the WHOLE file), so only
 * keys that OpenClaw 2026.5.x and 2026.9.x both accept are written (checked against their zod
 * schemas: `ModelProviderSchema`, `ModelDefinitionSchema`, `ModelCompatSchema` in
 * dist/zod-schema.core-*.{js,mjs} of each release).
 *
 * The entry's `api` is one of the three doors the bridge has (`--api`):
 *
 *   openai-completions   POST <origin>/v1/chat/completions   baseUrl `<origin>/v1` (the default)
 *   openai-responses     POST <origin>/v1/responses          baseUrl `<origin>/v1` (OpenAI's client appends /responses)
 *   anthropic-messages   POST <origin>/v1/messages           baseUrl `<origin>` (Anthropic's client appends /v1/messages;
 *                                                            OpenClaw itself strips a trailing /v1 for this kind)
 *
 * Both generations accept all three in their `api` enum (`MODEL_APIS`). Their `ModelCompatSchema`
 * is one object for every api kind; each kind's transport reads only some of its keys, so each kind
 * gets only the keys its transport reads AND both generations accept (`compatFor`).
 *
 * `input` tells OpenClaw whether a model sees images (it only sends a photo, e.g. from Telegram, to
 * a model whose `input` includes "image"): `models[].input` when configured, else by backend type.
 */
import { homedir } from "node:os";
import path from "node:path";
import type { Config, ResolvedModel } from "../../core/config/schema.js";

export const DEFAULT_PROVIDER_ID = "clawbridge";
/** apiKey written when the bridge has no server.apiKeys (OpenClaw wants some key for the provider). */
export const PLACEHOLDER_API_KEY = "clawbridge-local";
/** The smallest provider timeout written: OpenClaw's HTTP request timeout for one model call. */
export const MIN_PROVIDER_TIMEOUT_SECONDS = 900;

/** The OpenClaw provider kinds (`api`) the bridge answers, one per door. */
export const OPENCLAW_API_KINDS = ["openai-completions", "openai-responses", "anthropic-messages"] as const;
export type OpenClawApiKind = (typeof OPENCLAW_API_KINDS)[number];
export const DEFAULT_API_KIND: OpenClawApiKind = "openai-completions";

/** Which door of the bridge each kind calls (for messages and docs). */
export const API_KIND_PATH: Readonly<Record<OpenClawApiKind, string>> = Object.freeze({
  "openai-completions": "/v1/chat/completions",
  "openai-responses": "/v1/responses",
  "anthropic-messages": "/v1/messages",
});

export function isApiKind(v: unknown): v is OpenClawApiKind {
  return typeof v === "string" && (OPENCLAW_API_KINDS as readonly string[]).includes(v);
}

/**
 * `compat` flags per model (OpenClaw `ModelCompatSchema` keys), only those the entry's api kind
 * reads. For Chat Completions the bridge is like a local server: no `store`, no `developer` role,
 * no `reasoning_effort`, no `strict` in tool definitions, `max_tokens` rather than
 * `max_completion_tokens`; it does report usage in the stream when asked.
 */
export interface OpenClawModelCompat {
  supportsStore?: boolean;
  supportsDeveloperRole?: boolean;
  supportsReasoningEffort?: boolean;
  supportsUsageInStreaming?: boolean;
  supportsStrictMode?: boolean;
  maxTokensField?: "max_tokens" | "max_completion_tokens";
}

/** What a model takes in, as OpenClaw's `input` (the bridge's doors carry text and images only). */
export type OpenClawInput = "text" | "image";

export interface OpenClawModelEntry {
  id: string;
  name: string;
  reasoning: boolean;
  input: OpenClawInput[];
  cost: { input: number; output: number; cacheRead: number; cacheWrite: number };
  contextWindow: number;
  maxTokens: number;
  /** Absent for a kind whose transport reads no key both generations accept (anthropic-messages). */
  compat?: OpenClawModelCompat;
}

export interface OpenClawProviderEntry {
  baseUrl: string;
  apiKey: string;
  api: OpenClawApiKind;
  timeoutSeconds: number;
  models: OpenClawModelEntry[];
}

/** CLI agents behind the bridge (their own tools, their own model APIs). */
export const CLI_BACKEND_TYPES = ["opencode", "claude-code", "gemini-cli", "codex", "qwen-code"] as const;

/**
 * Backend types whose models see images when `models[].input` does not say: every CLI (each takes
 * the person's images in its own way), `openai` (image parts passed on to the upstream), and the
 * router and the builder, which hand turns to other models (a model that cannot see an image gets
 * one line saying so from the bridge, never nothing).
 */
export const IMAGE_BACKEND_TYPES: readonly string[] = [...CLI_BACKEND_TYPES, "openai", "router", "builder"];

/**
 * The `compat` keys each kind's transport reads, with the bridge's values. Only keys in BOTH
 * generations' `ModelCompatSchema`:
 * - openai-completions: store, developer role, reasoning_effort, stream usage, strict, max tokens field.
 * - openai-responses: OpenClaw always sends `store: false` and `max_output_tokens` and asks for
 *   reasoning only of a `reasoning` model (never, here); it reads `supportsDeveloperRole` (system
 *   prompt role) and `supportsStrictMode` (tools' `strict`).
 * - anthropic-messages: its transport reads `supportsEagerToolInputStreaming`,
 *   `supportsLongCacheRetention`, `sendSessionAffinityHeaders` — none in 2026.5's schema — so none.
 */
const COMPAT_BY_KIND: Readonly<Record<OpenClawApiKind, Readonly<OpenClawModelCompat> | undefined>> = Object.freeze({
  "openai-completions": Object.freeze({
    supportsStore: false,
    supportsDeveloperRole: false,
    supportsReasoningEffort: false,
    supportsUsageInStreaming: true,
    supportsStrictMode: false,
    maxTokensField: "max_tokens",
  }),
  "openai-responses": Object.freeze({ supportsDeveloperRole: false, supportsStrictMode: false }),
  "anthropic-messages": undefined,
});

/**
 * compat flags for a model of this api kind served by a backend of this type. Every backend type
 * gets the same flags today: CLI backends answer through the bridge's own encoder, and `openai`
 * upstreams are local servers (vLLM, Ollama, llama.cpp) that reject `store`, `developer`,
 * `reasoning_effort`, `strict` and `max_completion_tokens` — the bridge rewrites those too, but
 * telling OpenClaw avoids them at the source.
 */
export function compatFor(api: OpenClawApiKind, _backendType: string): OpenClawModelCompat | undefined {
  const c = COMPAT_BY_KIND[api];
  return c ? { ...c } : undefined;
}

/** OpenClaw's `input` for a model: `models[].input` when configured, else by its backend's type. */
export function inputFor(model: Pick<ResolvedModel, "input">, backendType: string): OpenClawInput[] {
  const sees = model.input ? model.input.includes("image") : IMAGE_BACKEND_TYPES.includes(backendType);
  return sees ? ["text", "image"] : ["text"];
}

/** The bridge's origin as OpenClaw should call it: wildcard listen addresses become loopback. */
function bridgeOriginOf(config: Pick<Config, "server">): string {
  let host = config.server.host;
  if (host === "0.0.0.0" || host === "" || host === "::" || host === "[::]") host = "127.0.0.1";
  if (host.includes(":") && !host.startsWith("[")) host = `[${host}]`;
  return `http://${host}:${config.server.port}`;
}

/**
 * The URL OpenClaw should call for this api kind: `<origin>/v1` for the OpenAI kinds,
 * `<origin>` for anthropic-messages.
 */
export function bridgeBaseUrl(config: Pick<Config, "server">, api: OpenClawApiKind = DEFAULT_API_KIND): string {
  return baseUrlForKind(bridgeOriginOf(config), api);
}

/** A base URL (with or without `/v1`) in the form this api kind wants. */
export function baseUrlForKind(url: string, api: OpenClawApiKind): string {
  const origin = bridgeOrigin(url);
  if (api === "anthropic-messages") return origin;
  // An explicit URL of the OpenAI kinds is kept as given (a proxy may put the bridge elsewhere).
  return url === origin ? `${origin}/v1` : url.replace(/\/+$/, "");
}

/** The bridge's origin (`baseUrl` minus `/v1`), where `/health` lives. */
export function bridgeOrigin(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
}

/**
 * OpenClaw's request timeout for this provider: the longest backend turn plus the time a turn may
 * wait in the bridge's queue plus a minute, at least 15 minutes. OpenClaw needs a whole number.
 */
export function providerTimeoutSeconds(config: Pick<Config, "backends" | "server">): number {
  let longest = 300;
  for (const b of Object.values(config.backends)) {
    const t = (b.options as { timeoutSeconds?: unknown } | undefined)?.timeoutSeconds;
    if (typeof t === "number" && Number.isFinite(t)) longest = Math.max(longest, t);
  }
  return Math.max(MIN_PROVIDER_TIMEOUT_SECONDS, Math.ceil(longest + config.server.queueTimeoutSeconds + 60));
}

export interface ProviderEntryOptions {
  /** Key OpenClaw sends; default: the first of server.apiKeys, else the placeholder. */
  apiKey?: string;
  /** Override the URL (e.g. behind a reverse proxy); default from server.host/port. */
  baseUrl?: string;
  /** Which door OpenClaw calls (default openai-completions). */
  api?: OpenClawApiKind;
}

export function buildProviderEntry(config: Config, opts: ProviderEntryOptions = {}): OpenClawProviderEntry {
  const api = opts.api ?? DEFAULT_API_KIND;
  return {
    baseUrl: opts.baseUrl ? baseUrlForKind(opts.baseUrl, api) : bridgeBaseUrl(config, api),
    apiKey: opts.apiKey ?? config.server.apiKeys[0] ?? PLACEHOLDER_API_KEY,
    api,
    timeoutSeconds: providerTimeoutSeconds(config),
    models: config.models.map((m) => {
      const type = config.backends[m.backend]?.type ?? "";
      const compat = compatFor(api, type);
      return {
        id: m.id,
        name: m.name || m.id,
        reasoning: false,
        input: inputFor(m, type),
        cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
        contextWindow: m.contextWindow,
        maxTokens: m.maxTokens,
        ...(compat ? { compat } : {}),
      };
    }),
  };
}

/** Where OpenClaw keeps its files (mirrors OpenClaw's own resolution in src/core/config/paths.ts). */
export interface OpenClawPaths {
  /** State directory (`~/.openclaw`): agents/, the install record. */
  stateDir: string;
  /** The config file (`<stateDir>/openclaw.json` unless OPENCLAW_CONFIG_PATH says otherwise). */
  configPath: string;
  /** What `openclaw install` recorded (`<stateDir>/.clawbridge-install.json`). */
  markerPath: string;
}

function expandHome(p: string, home: string): string {
  return p === "~" ? home : p.startsWith("~/") ? path.join(home, p.slice(2)) : p;
}

/**
 * `openclawHome` (the `--openclaw-home <dir>` option) is OpenClaw's state directory, i.e. the
 * directory that holds openclaw.json. Without it: OPENCLAW_STATE_DIR, else
 * `$OPENCLAW_HOME/.openclaw` or `~/.openclaw`; the config file is OPENCLAW_CONFIG_PATH when set.
 */
export function resolveOpenClawPaths(opts: { openclawHome?: string; env?: NodeJS.ProcessEnv } = {}): OpenClawPaths {
  const env = opts.env ?? process.env;
  const home = env.OPENCLAW_HOME?.trim() || env.HOME?.trim() || homedir();
  let stateDir: string;
  let configPath: string;
  if (opts.openclawHome) {
    stateDir = path.resolve(expandHome(opts.openclawHome, home));
    configPath = path.join(stateDir, "openclaw.json");
  } else {
    stateDir = path.resolve(expandHome(env.OPENCLAW_STATE_DIR?.trim() || path.join(home, ".openclaw"), home));
    const override = env.OPENCLAW_CONFIG_PATH?.trim();
    configPath = override ? path.resolve(expandHome(override, home)) : path.join(stateDir, "openclaw.json");
  }
  return { stateDir, configPath, markerPath: path.join(stateDir, ".clawbridge-install.json") };
}

/** `<provider>/<model>`, the form `agents.*.model.primary` takes. */
export function modelRef(providerId: string, modelId: string): string {
  return `${providerId}/${modelId}`;
}
