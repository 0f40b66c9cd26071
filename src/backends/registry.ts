/**
 * The backend types this bridge knows; add new types here. Each type has a light descriptor
 * (`<type>/options.ts`: its option schema and session modes, all the config loader needs) kept here
 * statically, and an implementation (`<type>/backend.ts`, with undici, the warm pools, the CLI
 * drivers…) loaded with `import()` only when backends are made: `clawbridge config check` and the
 * other commands that only read the config never load one. The router and the builder are light
 * already (their engines load on their first turn), so they are their own descriptors.
 */
import type { Logger } from "pino";
import type { Config } from "../core/config/schema.js";
import type { BackendDeps, BackendDescriptor, BackendModule } from "./module.js";
import type { Backend } from "./contract/backend.js";
import { opencodeDescriptor } from "./opencode/options.js";
import { openaiDescriptor } from "./openai/options.js";
import { claudeCodeDescriptor } from "./claude-code/options.js";
import { geminiCliDescriptor } from "./gemini-cli/options.js";
import { qwenCodeDescriptor } from "./qwen-code/options.js";
import { codexDescriptor } from "./codex/options.js";
import { routerBackend } from "./router-backend.js";
import { builderBackend } from "./builder-backend.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const descriptors: BackendDescriptor<any>[] = [
  opencodeDescriptor,
  openaiDescriptor,
  claudeCodeDescriptor,
  geminiCliDescriptor,
  qwenCodeDescriptor,
  codexDescriptor,
  routerBackend,
  builderBackend,
];

/** Each type's implementation, loaded on first use. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const implementations: Record<string, () => Promise<BackendModule<any>>> = {
  opencode: async () => (await import("./opencode/backend.js")).opencodeBackend,
  openai: async () => (await import("./openai/backend.js")).openaiBackend,
  "claude-code": async () => (await import("./claude-code/backend.js")).claudeCodeBackend,
  "gemini-cli": async () => (await import("./gemini-cli/backend.js")).geminiCliBackend,
  "qwen-code": async () => (await import("./qwen-code/backend.js")).qwenCodeBackend,
  codex: async () => (await import("./codex/backend.js")).codexBackend,
  router: async () => routerBackend,
  builder: async () => builderBackend,
};

/** What the config needs of a backend type (schema, session modes, the client's tools), without its implementation. */
export function backendDescriptor(type: string): BackendDescriptor<unknown> | undefined {
  return descriptors.find((m) => m.type === type);
}

/** A backend type with its factory (its implementation loaded on the first call); undefined for an unknown type. */
export async function loadBackendModule(type: string): Promise<BackendModule<unknown> | undefined> {
  return Object.hasOwn(implementations, type) ? implementations[type]!() : undefined;
}

/** Backend types that can offer the client's tools to their agent (`tools.mode: bridge`). */
export function bridgeTypes(): string[] {
  return backendTypes().filter((t) => backendDescriptor(t)?.clientTools);
}

export function backendTypes(): string[] {
  return descriptors.map((m) => m.type);
}

/** One Backend per `config.backends` entry, keyed by its name (the implementations of their types loaded first). */
export async function createBackends(
  config: Config,
  logger: Logger,
  extra: Pick<BackendDeps, "router" | "builder" | "clientTools"> = {},
): Promise<Map<string, Backend>> {
  const entries = Object.entries(config.backends);
  const [{ childLogger }, mods] = await Promise.all([
    import("../core/log/logger.js"),
    Promise.all(entries.map(([, entry]) => loadBackendModule(entry.type))),
  ]);
  const backends = new Map<string, Backend>();
  entries.forEach(([name, entry], i) => {
    const mod = mods[i];
    if (!mod) throw new Error(`unknown backend type ${entry.type}`); // validated earlier
    backends.set(
      name,
      mod.create(name, entry.options, {
        logger: childLogger(logger, { backend: name }),
        dataDir: config.dataDir,
        ...extra,
      }),
    );
  });
  return backends;
}
