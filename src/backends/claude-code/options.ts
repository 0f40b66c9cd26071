/**
 * Claude Code's options and what the config needs of the type (session modes, the client's tools):
 * the light half of the backend, read by the config loader without loading ./backend.ts.
 */
import { z } from "zod";
import { warmOption } from "../warm/options.js";
import { cliBaseOptions, agentCliDescriptor } from "../cli/options.js";
import type { BackendDescriptor } from "../module.js";

export const CLAUDE_PERMISSION_MODES = [
  "default",
  "acceptEdits",
  "auto",
  "bypassPermissions",
  "dontAsk",
  "plan",
] as const;

/** Read-only tools the agent may use without asking (it cannot be asked: -p is non-interactive). */
export const CLAUDE_SAFE_ALLOWED_TOOLS = ["Read", "Glob", "Grep", "WebSearch", "WebFetch"];
/** Tools removed from the agent entirely by default: running commands, writing files, scheduling. */
export const CLAUDE_SAFE_DISALLOWED_TOOLS = [
  "Bash",
  "Edit",
  "Write",
  "NotebookEdit",
  "EnterWorktree",
  "ExitWorktree",
  "CronCreate",
  "CronDelete",
  "ScheduleWakeup",
  "Workflow",
];

export const claudeCodeOptionsSchema = z.strictObject({
  ...cliBaseOptions("claude"),
  /** `append` keeps Claude Code's own system prompt and adds the bootstrap; `replace` uses only the bootstrap. */
  systemPromptMode: z.enum(["append", "replace"]).default("append"),
  /** `--permission-mode`. */
  permissionMode: z.enum(CLAUDE_PERMISSION_MODES).default("default"),
  /** `--allowedTools` (empty list: flag omitted). */
  allowedTools: z.array(z.string().min(1)).default(CLAUDE_SAFE_ALLOWED_TOOLS),
  /** `--disallowedTools` (empty list: flag omitted). */
  disallowedTools: z.array(z.string().min(1)).default(CLAUDE_SAFE_DISALLOWED_TOOLS),
  /** `--tools`: restrict the built-in tool set itself (omitted by default). */
  tools: z.array(z.string()).optional(),
  /**
   * Pass the bootstrap as a per-turn file (`--append-system-prompt-file` / `--system-prompt-file`):
   * no argv size limit, not visible in `ps`. false: the text itself as the flag's value.
   */
  systemPromptFile: z.boolean().default(true),
  /** Stream token deltas (`--include-partial-messages`); without it text arrives per message. */
  includePartialMessages: z.boolean().default(true),
  /** One long-lived `--input-format stream-json` process per conversation (src/backends/warm). */
  warm: warmOption(true),
});
export type ClaudeCodeOptions = z.infer<typeof claudeCodeOptionsSchema>;

export const claudeCodeDescriptor: BackendDescriptor<ClaudeCodeOptions> = agentCliDescriptor(
  "claude-code",
  claudeCodeOptionsSchema,
);
