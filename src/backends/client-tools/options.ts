/**
 * A model's `tools` option: whether the client's own tools (OpenClaw's 20-30 tools sent with every
 * request) are offered to a CLI agent as MCP tools (`bridge`), or dropped as before (`off`).
 * Validated with the model's entry at start-up (src/core/config/load.ts).
 */
import { z } from "zod";

/**
 * OpenClaw tools a coding-agent CLI already has natively (files, shell, patches, its own web and
 * browser tools): offering OpenClaw's copies would make the agent work in OpenClaw's workspace
 * through the chat instead of in its own. Overridden by `tools.exclude`.
 */
export const DEFAULT_EXCLUDED_TOOLS = [
  "read",
  "write",
  "edit",
  "apply_patch",
  "exec",
  "process",
  "bash",
  "shell",
  "grep",
  "find",
  "ls",
  "glob",
] as const;

export const clientToolsOptionsSchema = z.strictObject({
  /** `bridge`: the request's tools become MCP tools of the CLI; `off`: they are dropped (text only). */
  mode: z.enum(["bridge", "off"]).default("off"),
  /** Tool names never offered (default: the ones CLI agents have natively). */
  exclude: z.array(z.string().min(1)).default([...DEFAULT_EXCLUDED_TOOLS]),
  /**
   * How long a tool call handed to the client may wait for its result (the client's next request)
   * before the call is answered with an error and the CLI's turn is ended.
   */
  pendingTimeoutSeconds: z.number().positive().max(86_400).default(600),
});
export type ClientToolsOptions = z.infer<typeof clientToolsOptionsSchema>;

export const CLIENT_TOOLS_OFF: ClientToolsOptions = clientToolsOptionsSchema.parse({});
