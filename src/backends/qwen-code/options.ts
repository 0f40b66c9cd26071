/**
 * Qwen Code's options and what the config needs of the type (session modes, the client's tools):
 * the light half of the backend, read by the config loader without loading ./backend.ts.
 */
import { z } from "zod";
import { warmOption } from "../warm/options.js";
import { cliBaseOptions, agentCliDescriptor } from "../cli/options.js";
import type { BackendDescriptor } from "../module.js";

/** Tools removed by default (`--exclude-tools`): running commands and writing files. */
export const QWEN_SAFE_EXCLUDED_TOOLS = ["run_shell_command", "write_file", "edit"];

export const qwenCodeOptionsSchema = z.strictObject({
  ...cliBaseOptions("qwen"),
  /**
   * `replace` (default): the bootstrap becomes qwen's main system prompt through a per-turn file
   * named by env QWEN_SYSTEM_MD (no argv size limit, not visible in `ps`). `append`: qwen keeps
   * its own prompt and gets the bootstrap through `--append-system-prompt <text>`.
   */
  systemPromptMode: z.enum(["replace", "append"]).default("replace"),
  /** `--approval-mode`. In a non-interactive run `default` denies every tool that needs approval. */
  approvalMode: z.enum(["plan", "default", "auto-edit", "yolo"]).default("default"),
  /** `--exclude-tools` (empty list: flag omitted). */
  excludeTools: z.array(z.string().min(1)).default(QWEN_SAFE_EXCLUDED_TOOLS),
  /** Stream token deltas (`--include-partial-messages`); without it text arrives per message. */
  includePartialMessages: z.boolean().default(true),
  /** One long-lived `--input-format stream-json` process per conversation (src/backends/warm). */
  warm: warmOption(true),
});
export type QwenCodeOptions = z.infer<typeof qwenCodeOptionsSchema>;

export const qwenCodeDescriptor: BackendDescriptor<QwenCodeOptions> = agentCliDescriptor(
  "qwen-code",
  qwenCodeOptionsSchema,
);
