/**
 * Codex's options and what the config needs of the type (session modes, the client's tools): the
 * light half of the backend, read by the config loader without loading ./backend.ts. The command
 * lines the options become are in ./cli-args.ts.
 */
import { z } from "zod";
import { warmOption } from "../warm/options.js";
import { cliBaseOptions, agentCliDescriptor } from "../cli/options.js";
import type { BackendDescriptor } from "../module.js";

export const codexOptionsSchema = z.strictObject({
  ...cliBaseOptions("codex"),
  /** `sandbox_mode` for commands the agent runs. */
  sandbox: z.enum(["read-only", "workspace-write", "danger-full-access"]).default("read-only"),
  /** `approval_policy`. Nobody can answer an approval prompt in `exec`: keep `never`. */
  approvalPolicy: z.enum(["never", "on-request", "on-failure", "untrusted"]).default("never"),
  /** Offer codex's command tool (`exec_command`) to the model; it then runs inside `sandbox`. */
  shellTool: z.boolean().default(false),
  /** Pass `--skip-git-repo-check` (the bridge's per-conversation folders are not git repositories). */
  skipGitRepoCheck: z.boolean().default(true),
  /** Pass the bootstrap as `model_instructions_file` (replacing codex's own base instructions). false: never. */
  systemPromptFile: z.boolean().default(true),
  /** Keep one `codex app-server` per conversation between turns (token deltas); `enabled: false`: `codex exec` per turn. */
  warm: warmOption(true),
});
export type CodexOptions = z.infer<typeof codexOptionsSchema>;

export const codexDescriptor: BackendDescriptor<CodexOptions> = agentCliDescriptor("codex", codexOptionsSchema);
