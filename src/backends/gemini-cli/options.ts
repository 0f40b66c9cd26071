/**
 * Gemini CLI's options and what the config needs of the type (session modes, the client's tools):
 * the light half of the backend, read by the config loader without loading ./backend.ts.
 */
import { z } from "zod";
import { warmOption } from "../warm/options.js";
import { cliBaseOptions, agentCliDescriptor } from "../cli/options.js";
import type { BackendDescriptor } from "../module.js";

export const geminiCliOptionsSchema = z.strictObject({
  ...cliBaseOptions("gemini"),
  /** How the bootstrap reaches the model: `replace` (GEMINI_SYSTEM_MD) or `context` (GEMINI.md in the cwd). */
  systemPromptMode: z.enum(["replace", "context"]).default("replace"),
  /** `--approval-mode`. `default` leaves only read-only tools in non-interactive runs. */
  approvalMode: z.enum(["default", "auto_edit", "yolo", "plan"]).default("default"),
  /** Pass `--skip-trust` (headless gemini refuses untrusted folders; ours are created by the bridge). */
  skipTrust: z.boolean().default(true),
  /** Keep one `gemini --acp` process per conversation between turns (src/backends/gemini-cli/warm.ts). */
  warm: warmOption(true),
});
export type GeminiCliOptions = z.infer<typeof geminiCliOptionsSchema>;

export const geminiCliDescriptor: BackendDescriptor<GeminiCliOptions> = agentCliDescriptor(
  "gemini-cli",
  geminiCliOptionsSchema,
);
