/**
 * Loading and validating configuration: a YAML or JSON file, or embedded defaults built from the
 * seed's environment variables. All problems are reported together, each naming its key.
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import path from "node:path";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
// The one deliberate upward import (config -> backend registry): each backend type owns and
// validates its own option schema, so config asks the registry instead of knowing them all. It
// reads only the types' light descriptors: no backend implementation is loaded here.
import { backendDescriptor, backendTypes, bridgeTypes } from "../../backends/registry.js";
import { CLIENT_TOOLS_OFF, type ClientToolsOptions } from "../../backends/client-tools/options.js";
import { warmConfigSchema } from "../../backends/warm/options.js";
import {
  backendBaseSchema,
  backendModelsSchema,
  configFileSchema,
  eventsSchema,
  imagesSchema,
  modelSchema,
  DEFAULT_CONTEXT,
  type Config,
  type ConfigFile,
  type ContextBudget,
  type ContextBudgetInput,
  type ResolvedModel,
} from "./schema.js";
import { formatPath } from "../../request/chat-api/schema.js";
import { mergeIntentsInput, parseIntentsConfig, type IntentsConfigInput } from "../../request/intents/schema.js";
import { isLoopbackListenHost } from "../net/ip.js";

/** Whether `server.host` listens on this machine only (every spelling of loopback). */
export { isLoopbackListenHost as isLoopbackHost } from "../net/ip.js";

export class ConfigError extends Error {
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(`invalid configuration (${source}):\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

export interface LoadOptions {
  /** Explicit config file (`--config`); falls back to env CLAWBRIDGE_CONFIG. */
  configPath?: string;
  env?: NodeJS.ProcessEnv;
  /** Command-line overrides; they win over the file and the environment. */
  overrides?: { host?: string; port?: number };
}

export const DEFAULT_MODEL = "opencode/minimax-m2.5-free";

/** The configuration used when no file is given: one OpenCode backend, the seed's env vars. */
export function embeddedDefaults(env: NodeJS.ProcessEnv): unknown {
  const model = env.ROUTER_MODEL?.trim() || DEFAULT_MODEL;
  const timeout = env.ROUTER_TIMEOUT ? Number(env.ROUTER_TIMEOUT) : 300;
  const port = env.ROUTER_PORT ? Number(env.ROUTER_PORT) : 4097;
  const models: Array<{ id: string; backend: string }> = [{ id: model, backend: "opencode" }];
  const remapTarget = "opencode/glm-5-free";
  if (model !== remapTarget) models.push({ id: remapTarget, backend: "opencode" });
  return {
    server: { host: "127.0.0.1", port },
    backends: {
      opencode: {
        type: "opencode",
        ...(env.OPENCODE_BIN ? { command: env.OPENCODE_BIN } : {}),
        timeoutSeconds: timeout,
        // OpenCode's free models come and go: serve every model it offers, and the seed's names
        // (gone from OpenCode by now) through a live free one.
        expose: "all",
        remap: { onMissing: "best-free" },
      },
    },
    models,
    remap: [{ match: "kimi", to: remapTarget }],
  };
}

function readFileConfig(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new ConfigError(file, [`cannot read the file: ${(err as Error).message}`]);
  }
  try {
    return file.endsWith(".json") ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ConfigError(file, [`not valid ${file.endsWith(".json") ? "JSON" : "YAML"}: ${(err as Error).message}`]);
  }
}

function zodProblems(error: z.ZodError, prefix = ""): string[] {
  return error.issues.map((issue) => {
    const where = formatPath(issue.path);
    const full = prefix && where ? `${prefix}.${where}` : prefix || where;
    let message = issue.message;
    if (issue.code === "unrecognized_keys")
      message = `unknown key${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
    return `${full || "(top level)"}: ${message}`;
  });
}

function rawSection(obj: unknown, key: string): unknown {
  return obj && typeof obj === "object" && !Array.isArray(obj) ? (obj as Record<string, unknown>)[key] : undefined;
}

function mergeContext(...layers: Array<ContextBudgetInput | undefined>): ContextBudget {
  const out: ContextBudget = { ...DEFAULT_CONTEXT };
  for (const layer of layers) {
    if (!layer) continue;
    for (const [k, v] of Object.entries(layer)) if (v !== undefined) (out as unknown as Record<string, unknown>)[k] = v;
  }
  return out;
}

/** Validate raw configuration data. Pure: no file or environment access. Reports every problem it can find in one pass. */
export function resolveConfig(raw: unknown, source: string, env: NodeJS.ProcessEnv = {}): Config {
  const problems: string[] = [];
  const obj = (raw ?? {}) as Record<string, unknown>;
  if (typeof obj !== "object" || Array.isArray(obj))
    throw new ConfigError(source, ["(top level): expected an object with server, backends, models"]);
  const known = Object.keys(configFileSchema.shape);
  const unknown = Object.keys(obj).filter((k) => !known.includes(k));
  if (unknown.length)
    problems.push(
      `(top level): unknown key${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => `"${k}"`).join(", ")} (known: ${known.join(", ")})`,
    );
  // Each section on its own, so one mistake does not hide the others.
  const section = <K extends keyof ConfigFile>(key: K): ConfigFile[K] | undefined => {
    const r = configFileSchema.shape[key].safeParse(obj[key]);
    if (r.success) return r.data as ConfigFile[K];
    problems.push(...zodProblems(r.error, key));
    return undefined;
  };
  const server = section("server");
  const logging = section("logging");
  const metrics = section("metrics");
  const dataDirIn = section("dataDir");
  const contextDefaults = section("context");
  const remap = section("remap") ?? [];
  const systems = section("systems") ?? [];
  const events = section("events");
  const images = section("images");
  const warm = section("warm");
  let store = section("store");
  if (store?.kind === "postgres") {
    const url = env.CLAWBRIDGE_STORE_URL || store.url; // empty = unset
    if (!url) problems.push("store.url: set the database URL (or CLAWBRIDGE_STORE_URL in the environment)");
    else if (!/^postgres(ql)?:\/\//.test(url))
      problems.push("store.url: CLAWBRIDGE_STORE_URL must be a postgres:// or postgresql:// URL");
    store = { ...store, url };
  }
  section("intents");

  const rawBackends = obj.backends;
  const backends: Config["backends"] = {};
  const backendTypesByName = new Map<string, string>();
  if (
    rawBackends === undefined ||
    rawBackends === null ||
    typeof rawBackends !== "object" ||
    Array.isArray(rawBackends)
  ) {
    problems.push(`backends: configure at least one backend (a map of name → { type, ... })`);
  } else {
    for (const [name, entryRaw] of Object.entries(rawBackends as Record<string, unknown>)) {
      if (!/^[A-Za-z0-9_.-]+$/.test(name)) problems.push(`backends.${name}: backend names use letters, digits, _ . -`);
      const base = backendBaseSchema.safeParse(entryRaw);
      if (!base.success) {
        problems.push(...zodProblems(base.error, `backends.${name}`));
        continue;
      }
      const entry = base.data;
      const mod = backendDescriptor(entry.type);
      if (!mod) {
        problems.push(
          `backends.${name}.type: unknown backend type "${entry.type}" (known: ${backendTypes().join(", ")})`,
        );
        continue;
      }
      backendTypesByName.set(name, entry.type);
      const { type: _type, expose, remap: onMissing, discovery, limits, ...rest } = entry;
      const catalog = backendModelsSchema.safeParse({ expose, remap: onMissing, discovery, limits });
      if (!catalog.success) problems.push(...zodProblems(catalog.error, `backends.${name}`));
      const opts = mod.schema.safeParse(rest);
      if (!opts.success) problems.push(...zodProblems(opts.error, `backends.${name}`));
      else if (catalog.success) backends[name] = { type: entry.type, options: opts.data, models: catalog.data };
    }
  }

  const models: ResolvedModel[] = [];
  const seen = new Set<string>();
  const rawModelList = obj.models;
  if (!Array.isArray(rawModelList) || rawModelList.length === 0)
    problems.push("models: configure at least one model (a list of { id, backend })");
  (Array.isArray(rawModelList) ? rawModelList : []).forEach((rm, i) => {
    const where = `models[${i}]`;
    const parsed = modelSchema.safeParse(rm);
    if (!parsed.success) {
      problems.push(...zodProblems(parsed.error, where));
      return;
    }
    const m = parsed.data;
    if (seen.has(m.id)) problems.push(`${where}.id: duplicate model id "${m.id}"`);
    seen.add(m.id);
    const type = backendTypesByName.get(m.backend);
    if (!type) {
      const names = [...backendTypesByName.keys()];
      if (!(rawBackends && typeof rawBackends === "object" && m.backend in (rawBackends as object))) {
        problems.push(`${where}.backend: no backend named "${m.backend}" (configured: ${names.join(", ") || "none"})`);
      }
      return;
    }
    const mod = backendDescriptor(type)!;
    const mode = m.session?.mode ?? mod.defaultSessionMode;
    if (!mod.sessionModes.includes(mode)) {
      problems.push(
        `${where}.session.mode: backend type "${mod.type}" supports ${mod.sessionModes.join(", ")}, not "${mode}"`,
      );
    }
    const context = mergeContext(contextDefaults, m.context);
    if (context.maxPromptChars < 1000) problems.push(`${where}.context.maxPromptChars: must be at least 1000`);
    let intents: IntentsConfigInput | undefined;
    // Merge what the user WROTE (not the parsed sections, whose filled-in defaults would
    // overwrite the top-level settings), then validate the result once.
    const rawTop = rawSection(raw, "intents");
    const rawModel = rawSection(rm, "intents");
    if (rawTop || rawModel) {
      intents = mergeIntentsInput(rawTop as IntentsConfigInput | undefined, rawModel as IntentsConfigInput | undefined);
      try {
        parseIntentsConfig(intents);
      } catch (err) {
        problems.push(`${where}.intents: ${(err as Error).message}`);
      }
    }
    const tools = m.tools ?? CLIENT_TOOLS_OFF;
    if (tools.mode === "bridge") {
      const why = mod.clientTools?.(backends[m.backend]?.options);
      if (!mod.clientTools)
        problems.push(
          `${where}.tools.mode: backend type "${mod.type}" cannot offer the client's tools ("bridge" works with ${bridgeTypes().join(", ")}); use "off"`,
        );
      else if (why) problems.push(`${where}.tools.mode: ${why}`);
      else if (mode !== "resume")
        problems.push(
          `${where}.tools.mode: "bridge" needs session.mode "resume" (a CLI turn waits for the client's tool results in a process kept for the conversation)`,
        );
    }
    models.push(resolvedModel(m.id, m.backend, m.model ?? m.id, mode, context, intents, m, tools));
  });

  // A remap target is a configured model id, or a model name given to a backend that takes any
  // model (the seed's `kimi` → `opencode/glm-5-free`): then it runs like the model it replaces.
  // A fallback chain names configured models, each once, never the model itself.
  (Array.isArray(rawModelList) ? rawModelList : []).forEach((rm, i) => {
    const chain = (rm as { fallback?: unknown })?.fallback;
    if (!Array.isArray(chain)) return;
    const self = (rm as { id?: unknown }).id;
    const ids = new Set(models.map((m) => m.id));
    chain.forEach((to, j) => {
      if (to === self) problems.push(`models[${i}].fallback[${j}]: "${to}" is the model itself`);
      else if (typeof to === "string" && !ids.has(to))
        problems.push(`models[${i}].fallback[${j}]: no model with id "${to}" (configured: ${[...ids].join(", ")})`);
      else if (chain.indexOf(to) !== j) problems.push(`models[${i}].fallback[${j}]: "${to}" is in the chain twice`);
    });
  });

  const remapTargets: Config["remapTargets"] = {};
  remap.forEach((r, i) => {
    if (seen.has(r.to)) return;
    const configured = rawBackends && typeof rawBackends === "object" ? Object.keys(rawBackends) : [];
    const backendName = r.backend ?? (configured.length === 1 ? configured[0] : undefined);
    if (!backendName) {
      problems.push(
        `remap[${i}].to: "${r.to}" is not a configured model id; name the backend that serves it with remap[${i}].backend`,
      );
      return;
    }
    const type = backendTypesByName.get(backendName);
    if (!type) {
      problems.push(`remap[${i}].backend: no backend named "${backendName}"`);
      return;
    }
    const mod = backendDescriptor(type)!;
    const base = models.find((m) => m.backend === backendName);
    remapTargets[r.to] = resolvedModel(
      r.to,
      backendName,
      r.to,
      base?.sessionMode ?? mod.defaultSessionMode,
      base?.context ?? mergeContext(contextDefaults),
      base?.intents,
      {},
      base?.tools,
    );
  });

  // A backend with `expose: all` serves the models it discovers like its first configured model
  // (or with its type's defaults when it has none).
  const exposeTemplates: Config["exposeTemplates"] = {};
  for (const [name, b] of Object.entries(backends)) {
    if (b.models.expose !== "all") continue;
    const base = models.find((m) => m.backend === name);
    const mod = backendDescriptor(b.type)!;
    exposeTemplates[name] = base
      ? { ...base, id: name, name, backendModel: name }
      : resolvedModel(name, name, name, mod.defaultSessionMode, mergeContext(contextDefaults), undefined, {});
  }

  if (server) {
    const isLoopback = isLoopbackListenHost(server.host);
    if (!isLoopback && server.apiKeys.length === 0 && !server.allowUnauthenticatedRemote) {
      problems.push(
        `server.host: "${server.host}" is reachable from other machines; set server.apiKeys (or allowUnauthenticatedRemote: true if you really mean it)`,
      );
    }
  }

  if (server && metrics?.requireKey && server.apiKeys.length === 0) {
    problems.push("metrics.requireKey: true needs server.apiKeys (the key a scraper sends as a bearer token)");
  }

  if (problems.length || !server || !logging) throw new ConfigError(source, problems);
  const dataDir = path.resolve(expandHome(dataDirIn ?? env.CLAWBRIDGE_DATA_DIR ?? path.join(homedir(), ".clawbridge")));
  return {
    server,
    logging: { ...logging, debugLog: logging.debugLog ? path.resolve(expandHome(logging.debugLog)) : null },
    metrics: { enabled: metrics?.enabled ?? true, requireKey: metrics?.requireKey ?? server.apiKeys.length > 0 },
    dataDir,
    backends,
    models,
    remap,
    remapTargets,
    exposeTemplates,
    systems,
    events: events ?? eventsSchema.parse({}),
    images: images ?? imagesSchema.parse({}),
    warm: warm ?? warmConfigSchema.parse({}),
    store: store ?? { kind: "sqlite" },
    source,
  };
}

function resolvedModel(
  id: string,
  backend: string,
  backendModel: string,
  sessionMode: ResolvedModel["sessionMode"],
  context: ContextBudget,
  intents: IntentsConfigInput | undefined,
  m: {
    name?: string;
    contextWindow?: number;
    maxTokens?: number;
    session?: { fallback?: "derived" | "stateless"; maxSeedChars?: number };
    fallback?: string[];
    fallbackNotice?: boolean;
    input?: string[];
  },
  tools: ClientToolsOptions = CLIENT_TOOLS_OFF,
): ResolvedModel {
  return {
    id,
    name: m.name ?? id,
    backend,
    backendModel,
    context,
    sessionMode,
    contextWindow: m.contextWindow ?? 200_000,
    maxTokens: m.maxTokens ?? 32_000,
    session: { fallback: m.session?.fallback ?? "derived", maxSeedChars: m.session?.maxSeedChars ?? 6000 },
    intents,
    tools,
    fallback: m.fallback ?? [],
    fallbackNotice: m.fallbackNotice ?? false,
    ...(m.input ? { input: m.input } : {}),
  };
}

/** The person's own config file (`clawbridge init` writes it): `$XDG_CONFIG_HOME/clawbridge/config.yaml`, else `~/.config/clawbridge/config.yaml`. */
export function userConfigPath(env: NodeJS.ProcessEnv = process.env): string {
  const home = env.HOME?.trim() || homedir();
  const xdg = env.XDG_CONFIG_HOME?.trim() || path.join(home, ".config");
  return path.join(xdg, "clawbridge", "config.yaml");
}

/** `--config`, else `$CLAWBRIDGE_CONFIG`, else the person's own config file when it exists, else none (the embedded defaults). */
export function configFileOf(configPath: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  if (configPath ?? env.CLAWBRIDGE_CONFIG) return configPath ?? env.CLAWBRIDGE_CONFIG;
  const own = userConfigPath(env);
  return existsSync(own) ? own : undefined;
}

export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const file = configFileOf(opts.configPath, env);
  let raw: unknown;
  let source: string;
  if (file) {
    source = path.resolve(file);
    raw = readFileConfig(source);
  } else {
    source = "embedded defaults";
    const envProblems: string[] = [];
    const timeout = Number(env.ROUTER_TIMEOUT);
    if (env.ROUTER_TIMEOUT && !(Number.isFinite(timeout) && timeout > 0))
      envProblems.push(`ROUTER_TIMEOUT: "${env.ROUTER_TIMEOUT}" is not a positive number of seconds`);
    if (env.ROUTER_PORT && !(/^\d+$/.test(env.ROUTER_PORT) && Number(env.ROUTER_PORT) <= 65535))
      envProblems.push(`ROUTER_PORT: "${env.ROUTER_PORT}" is not a port number (0-65535)`);
    if (envProblems.length) throw new ConfigError("environment", envProblems);
    raw = embeddedDefaults(env);
  }
  if (opts.overrides && raw && typeof raw === "object") {
    const obj = raw as Record<string, unknown>;
    const server = { ...((obj.server as Record<string, unknown>) ?? {}) };
    if (opts.overrides.host !== undefined) server.host = opts.overrides.host;
    if (opts.overrides.port !== undefined) server.port = opts.overrides.port;
    raw = { ...obj, server };
  }
  return resolveConfig(raw, source, env);
}

function expandHome(p: string): string {
  return p === "~" ? homedir() : p.startsWith("~/") ? path.join(homedir(), p.slice(2)) : p;
}
