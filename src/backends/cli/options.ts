/**
 * The option keys every CLI backend accepts, and the check shared by the CLI backends that offer the
 * client's tools only from warm processes. Light on purpose (zod only): the config loader reads
 * these through each backend type's descriptor without loading the backends.
 */
import { z } from "zod";
import type { BackendDescriptor } from "../module.js";

/** Option keys every CLI backend accepts. `command` defaults differ per backend. */
export function cliBaseOptions(defaultCommand: string) {
  return {
    /** Binary name or path. Looked up on PATH, then this package's node_modules/.bin. */
    command: z.string().min(1).default(defaultCommand),
    /** Extra arguments appended after the backend's own. */
    args: z.array(z.string()).default([]),
    /** Environment merged over the bridge's own for the CLI. */
    env: z.record(z.string(), z.string()).default({}),
    /** Whole-turn limit; the process group is killed when it fires. */
    timeoutSeconds: z.number().positive().default(300),
    /** Time between SIGTERM and SIGKILL. */
    killGraceSeconds: z.number().nonnegative().default(3),
    /**
     * One fixed working directory for every conversation. Default: each conversation has its own
     * (`TurnInput.session.cwd`, or `<dataDir>/work/<hash of the conversation key>`).
     */
    cwd: z.string().min(1).optional(),
    /** The model value that means "no --model flag, use the CLI's own default". */
    defaultModelName: z.string().default("default"),
  };
}

/** `clientTools` of a backend type whose agent gets the client's tools only in a warm process. */
export function clientToolsNeedWarm(options: { warm: { enabled: boolean } }): string | undefined {
  return options.warm.enabled
    ? undefined
    : "needs warm processes (this backend has warm.enabled: false): the agent's turn waits for the tool's result in a process kept between requests";
}

/**
 * The descriptor of a coding-agent CLI that keeps its own sessions (Claude Code, Codex, Gemini CLI,
 * Qwen Code): resume by default, stateless possible, the client's tools from warm processes.
 */
export function agentCliDescriptor<O extends { warm: { enabled: boolean } }>(
  type: string,
  schema: z.ZodType<O>,
): BackendDescriptor<O> {
  return {
    type,
    schema,
    defaultSessionMode: "resume",
    sessionModes: ["resume", "stateless"],
    clientTools: clientToolsNeedWarm,
  };
}
