/**
 * What `clawbridge openclaw install` writes: OpenClaw's provider entry for this bridge, built from
 * the bridge configuration, and where OpenClaw keeps its files.
 *
 * OpenClaw's config schema is strict (an unknown key anywhere invalidates the WHOLE file), so only
 * keys that OpenClaw 2026.5.x and 2026.9.x both accept are written (checked against their zod
 * schemas: `ModelProviderSchema`, `ModelDefinitionSchema`, `ModelCompatSchema`).
 */
import { homedir } from "node:os";
import path from "node:path";
import type { Config } from "../../core/config/schema.js";

export const DEFAULT_PROVIDER_ID = "clawbridge";
/** apiKey written when the bridge has no server.apiKeys (OpenClaw wants some key for the provider). */
export const PLACEHOLDER_API_KEY = "clawbridge-local";
/** The smallest provider timeout written: OpenClaw's HTTP request timeout for one model call. */
export const MIN_PROVIDER_TIMEOUT_SECONDS = 900;

/**
 * `compat` flags per model (OpenClaw `ModelCompatSchema` keys). The bridge speaks Chat Completions
 * like a local server: no `store`, no `developer` role, no `reasoning_effort`, no `strict` in tool
 * definitions, `max_tokens` rather than `max_completion_tokens`; it does report usage in the
 * stream when asked (`stream_options.include_usage`).
 */
export interface OpenClawModelCompat {
  supportsStore: boolean;
  supportsDeveloperRole: boolean;
  supportsReasoningEffort: boolean;
  supportsUsageInStreaming: boolean;
  supportsStrictMode: boolean;
  maxTokensField: "max_tokens" | "max_completion_tokens";
}

export interface OpenClawModelEntry {
  id: string;
  name: string;
  reasoning: boolean;
  input: string[];
  cost: { input: number; output: number; cacheRead: number; cacheWrite: number };
  contextWindow: number;
  maxTokens: number;
  compat: OpenClawModelCompat;
}

export interface OpenClawProviderEntry {
  baseUrl: string;
  apiKey: string;
  api: "openai-completions";
  timeoutSeconds: number;
  models: OpenClawModelEntry[];
}

/** CLI agents behind the bridge (their own tools, their own model APIs). */
export const CLI_BACKEND_TYPES = ["opencode", "claude-code", "gemini-cli", "codex", "qwen-code"] as const;

const BRIDGE_COMPAT: Readonly<OpenClawModelCompat> = Object.freeze({
  supportsStore: false,
  supportsDeveloperRole: false,
  supportsReasoningEffort: false,
  supportsUsageInStreaming: true,
  supportsStrictMode: false,
  maxTokensField: "max_tokens",
});

/**
 * compat flags for a model served by a backend of this type. Every type gets the same flags today:
 * CLI backends answer through the bridge's own encoder, and `openai` upstreams are local servers
 * (vLLM, Ollama, llama.cpp) that reject `store`, `developer`, `reasoning_effort`, `strict` and
 * `max_completion_tokens` — the bridge rewrites those too, but telling OpenClaw avoids them at the source.
 */
export function compatForBackendType(_type: string): OpenClawModelCompat {
  return { ...BRIDGE_COMPAT };
}

/** The URL OpenClaw should call: wildcard listen addresses become loopback. */
export function bridgeBaseUrl(config: Pick<Config, "server">): string {
  let host = config.server.host;
  if (host === "0.0.0.0" || host === "" || host === "::" || host === "[::]") host = "127.0.0.1";
  if (host.includes(":") && !host.startsWith("[")) host = `[${host}]`;
  return `http://${host}:${config.server.port}/v1`;
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
}

export function buildProviderEntry(config: Config, opts: ProviderEntryOptions = {}): OpenClawProviderEntry {
  return {
    baseUrl: opts.baseUrl ?? bridgeBaseUrl(config),
    apiKey: opts.apiKey ?? config.server.apiKeys[0] ?? PLACEHOLDER_API_KEY,
    api: "openai-completions",
    timeoutSeconds: providerTimeoutSeconds(config),
    models: config.models.map((m) => ({
      id: m.id,
      name: m.name || m.id,
      reasoning: false,
      input: ["text"],
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      contextWindow: m.contextWindow,
      maxTokens: m.maxTokens,
      compat: compatForBackendType(config.backends[m.backend]?.type ?? ""),
    })),
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
