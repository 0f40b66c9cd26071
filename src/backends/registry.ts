/** The backend types this bridge knows. One file per backend; add new types here. */
import { childLogger } from "../core/log/logger.js";
import type { Logger } from "pino";
import type { Config } from "../core/config/schema.js";
import type { BackendDeps, BackendModule } from "./module.js";
import type { Backend } from "./contract/backend.js";
import { opencodeBackend } from "./opencode/backend.js";
import { openaiBackend } from "./openai/backend.js";
import { claudeCodeBackend } from "./claude-code/backend.js";
import { geminiCliBackend } from "./gemini-cli/backend.js";
import { qwenCodeBackend } from "./qwen-code/backend.js";
import { codexBackend } from "./codex/backend.js";
import { routerBackend } from "./router-backend.js";
import { builderBackend } from "./builder-backend.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const modules: BackendModule<any>[] = [
  opencodeBackend,
  openaiBackend,
  claudeCodeBackend,
  geminiCliBackend,
  qwenCodeBackend,
  codexBackend,
  routerBackend,
  builderBackend,
];

export function backendModule(type: string): BackendModule<unknown> | undefined {
  return modules.find((m) => m.type === type);
}

/** Backend types that can offer the client's tools to their agent (`tools.mode: bridge`). */
export function bridgeTypes(): string[] {
  return backendTypes().filter((t) => backendModule(t)?.clientTools);
}

export function backendTypes(): string[] {
  return modules.map((m) => m.type);
}

/** One Backend per `config.backends` entry, keyed by its name. */
export function createBackends(
  config: Config,
  logger: Logger,
  extra: Pick<BackendDeps, "router" | "builder" | "clientTools"> = {},
): Map<string, Backend> {
  const backends = new Map<string, Backend>();
  for (const [name, entry] of Object.entries(config.backends)) {
    const mod = backendModule(entry.type);
    if (!mod) throw new Error(`unknown backend type ${entry.type}`); // validated earlier
    backends.set(
      name,
      mod.create(name, entry.options, {
        logger: childLogger(logger, { backend: name }),
        dataDir: config.dataDir,
        ...extra,
      }),
    );
  }
  return backends;
}
