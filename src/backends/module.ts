/**
 * What a backend type provides to the registry: a light descriptor (its option schema and session
 * modes, read by the config loader; zod and small pure modules only) and, in a module the registry
 * loads only when backends are made, the factory.
 */
import type { z } from "zod";
import type { Logger } from "pino";
import type { Backend } from "./contract/backend.js";
import type { SessionMode } from "../core/config/schema.js";
import type { RouterRuntime } from "../workflows/router/outcomes.js";
import type { BuilderBase } from "../workflows/builder/backend-deps.js";
import type { ClientToolHub } from "./client-tools/sessions.js";

export interface BackendDeps {
  logger: Logger;
  /** The bridge's data directory (per-conversation working directories live below it). */
  dataDir: string;
  /** The systems library, runs, router state and event bus (present when systems or a router are configured). */
  router?: Omit<RouterRuntime, "log">;
  /** The builder room over the systems runtime (present when a builder backend is configured). */
  builder?: BuilderBase;
  /** The client's tools for CLI agents: pending calls per conversation and the MCP endpoint (src/backends/client-tools). */
  clientTools?: ClientToolHub;
}

/** What the config needs of a backend type, without its implementation (`<type>/options.ts`). */
export interface BackendDescriptor<Options = unknown> {
  /** The `type` value in configuration. */
  type: string;
  /** Options of this backend type (every key of the backend's config entry except `type`). */
  schema: z.ZodType<Options>;
  /** Session mode used by a model on this backend unless the model says otherwise. */
  defaultSessionMode: SessionMode;
  /** Session modes this backend can serve. */
  sessionModes: readonly SessionMode[];
  /**
   * Present when the backend can offer the client's tools to its agent (`tools.mode: bridge`):
   * given the backend's validated options, why it cannot with them (e.g. warm processes off), or
   * undefined.
   */
  clientTools?(options: Options): string | undefined;
}

/** A backend type with its implementation: the descriptor and the factory (`<type>/backend.ts`). */
export interface BackendModule<Options = unknown> extends BackendDescriptor<Options> {
  create(name: string, options: Options, deps: BackendDeps): Backend;
}
