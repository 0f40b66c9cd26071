/**
 * OpenCode's options and what the config needs of the type (session modes, the client's tools):
 * the light half of the backend, read by the config loader without loading ./backend.ts.
 */
import { z } from "zod";
import { warmOption } from "../warm/options.js";
import { clientToolsNeedWarm } from "../cli/options.js";
import type { BackendDescriptor } from "../module.js";

export const opencodeOptionsSchema = z.strictObject({
  /** Binary name or path. Looked up on PATH, then ~/.opencode/bin, then this package's node_modules/.bin. */
  command: z.string().min(1).default("opencode"),
  /** Extra arguments placed after `run --format json -m <model>`. */
  args: z.array(z.string()).default([]),
  /** Environment added to the bridge's own for the CLI. */
  env: z.record(z.string(), z.string()).default({}),
  /** Whole-turn limit; the process group is killed when it fires. */
  timeoutSeconds: z.number().positive().default(300),
  /** Time between SIGTERM and SIGKILL. */
  killGraceSeconds: z.number().nonnegative().default(3),
  /** Working directory for the CLI (default: an empty folder in the data directory). */
  cwd: z.string().min(1).optional(),
  /** OpenCode agent to run (`--agent`), e.g. one with a custom prompt in opencode's config. */
  agent: z.string().min(1).optional(),
  /** Keep one `opencode serve` between turns (on by default); `enabled: false` runs `opencode run` per turn. */
  warm: warmOption(true),
});
export type OpencodeOptions = z.infer<typeof opencodeOptionsSchema>;

export const opencodeDescriptor: BackendDescriptor<OpencodeOptions> = {
  type: "opencode",
  schema: opencodeOptionsSchema,
  defaultSessionMode: "stateless",
  sessionModes: ["stateless", "resume"],
  clientTools: clientToolsNeedWarm,
};
