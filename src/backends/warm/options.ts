/**
 * The `warm` option every CLI backend accepts: keep the CLI running between turns instead of
 * starting it for each one. Validated with the backend's own options at start-up. The bridge-wide
 * side (the memory budget over every backend's warm processes, the default number of standbys) is
 * the top-level `warm:` section of the configuration (src/core/config/schema.ts, `warmConfigSchema`).
 */
import { z } from "zod";

/** The most standbys one backend may keep per kind of turn (each is a whole CLI process). */
export const MAX_STANDBY = 4;

export const warmOptionsSchema = z.strictObject({
  /** Keep CLI processes between turns. Default: on where the CLI has a long-lived mode. */
  enabled: z.boolean().optional(),
  /** An idle warm process is ended after this many seconds without a turn. */
  idleSeconds: z.number().positive().default(600),
  /** At most this many warm processes per backend (standbys included); the least recently used idle one goes first. */
  maxProcesses: z.number().int().positive().default(4),
  /** After an abort, how long the CLI may take to stop its turn before its process group is killed. */
  interruptGraceSeconds: z.number().nonnegative().default(2),
  /**
   * Started, idle processes kept ready for NEW conversations (per kind of turn: model and options),
   * so a conversation's first turn does not wait for a CLI to start. Default: the top-level
   * `warm.standby` (1). 0: none.
   */
  standby: z
    .number({ error: "warm.standby must be a whole number from 0 to 4" })
    .int("warm.standby must be a whole number from 0 to 4")
    .min(0, "warm.standby must be a whole number from 0 to 4")
    .max(MAX_STANDBY, "warm.standby must be a whole number from 0 to 4")
    .optional(),
});
export type WarmOptionsInput = z.input<typeof warmOptionsSchema>;
export interface WarmOptions {
  enabled: boolean;
  idleSeconds: number;
  maxProcesses: number;
  interruptGraceSeconds: number;
  /** Undefined: the bridge-wide default (`warm.standby` at the top level of the configuration). */
  standby?: number;
}

/** The `warm` option of a backend whose CLI is warm by default (`on`) or cold by default. */
export function warmOption(on: boolean) {
  return warmOptionsSchema.prefault({}).transform(
    (w): WarmOptions => ({
      enabled: w.enabled ?? on,
      idleSeconds: w.idleSeconds,
      maxProcesses: w.maxProcesses,
      interruptGraceSeconds: w.interruptGraceSeconds,
      ...(w.standby !== undefined ? { standby: w.standby } : {}),
    }),
  );
}

/**
 * The top-level `warm:` section: what holds for the warm processes of every backend together.
 * - `maxMemoryMB`: the memory budget of all warm processes (their resident memory, whole process
 *   groups). Default: 40% of the machine's memory (or of the container's limit), see
 *   `defaultWarmMemoryBytes` (src/backends/warm/memory.ts).
 * - `standby`: standbys per backend and kind of turn, unless a backend's own `warm.standby` says otherwise.
 */
export const warmConfigSchema = z.strictObject({
  maxMemoryMB: z
    .number({ error: "warm.maxMemoryMB must be a number of megabytes (e.g. 800)" })
    .int("warm.maxMemoryMB must be a whole number of megabytes")
    .positive("warm.maxMemoryMB must be more than 0 (leave it out for the default: 40% of the machine's memory)")
    .optional(),
  standby: z
    .number({ error: "warm.standby must be a whole number from 0 to 4" })
    .int("warm.standby must be a whole number from 0 to 4")
    .min(0, "warm.standby must be a whole number from 0 to 4")
    .max(MAX_STANDBY, "warm.standby must be a whole number from 0 to 4")
    .default(1),
});
export type WarmConfig = z.infer<typeof warmConfigSchema>;
