/**
 * The `warm` option every CLI backend accepts: keep the CLI running between turns instead of
 * starting it for each one. Validated with the backend's own options at start-up.
 */
import { z } from "zod";

export const warmOptionsSchema = z.strictObject({
  /** Keep CLI processes between turns. Default: on where the CLI has a long-lived mode. */
  enabled: z.boolean().optional(),
  /** An idle warm process is ended after this many seconds without a turn. */
  idleSeconds: z.number().positive().default(600),
  /** At most this many warm processes per backend; the least recently used idle one goes first. */
  maxProcesses: z.number().int().positive().default(4),
  /** After an abort, how long the CLI may take to stop its turn before its process group is killed. */
  interruptGraceSeconds: z.number().nonnegative().default(2),
});
export type WarmOptionsInput = z.input<typeof warmOptionsSchema>;
export type WarmOptions = Required<z.infer<typeof warmOptionsSchema>>;

/** The `warm` option of a backend whose CLI is warm by default (`on`) or cold by default. */
export function warmOption(on: boolean) {
  return warmOptionsSchema.prefault({}).transform((w): WarmOptions => ({ ...w, enabled: w.enabled ?? on }));
}
