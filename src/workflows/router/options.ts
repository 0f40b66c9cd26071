/** The options of a `type: router` backend, validated at start-up like every backend's. */
import { z } from "zod";

export const routerOptionsSchema = z
  .strictObject({
    /** Model id that classifies each message (one call per routed message). */
    classifier: z.string().min(1, "name the model id that classifies messages"),
    /** Model id that answers everything that is not a system (a transparent hand-over). */
    answer: z.string().min(1, "name the model id that answers ordinary messages"),
    thresholds: z
      .strictObject({
        /** Below it: an ordinary answer. */
        match: z.number().min(0).max(1).default(0.4),
        /** At or above it, with valid inputs and no side effects: run without asking. */
        trigger: z.number().min(0).max(1).default(0.75),
      })
      .default({ match: 0.4, trigger: 0.75 }),
    gathering: z
      .strictObject({
        /** Questions asked for missing inputs before the router gives up. */
        maxRounds: z.number().int().positive().default(4),
        /** Minutes any question of a conversation waits (default 60); one setting with a builder's `confirmMinutes`. */
        ttlMinutes: z.number().positive().optional(),
      })
      .default({ maxRounds: 4 }),
    /** After this long, the turn ends with the run id and the run goes on in the background. */
    detachAfterSeconds: z.number().positive().default(240),
    /** Limit for one classifier call. */
    classifierTimeoutSeconds: z.number().positive().default(30),
    /** Model id of a `type: builder` backend: making, changing, deploying and exporting systems is handed to it. */
    builder: z.string().min(1).optional(),
    /** Systems this router offers (ids); default all. */
    systems: z.array(z.string().min(1)).optional(),
    /** The turn deadline; default detachAfterSeconds + 60 (a run detaches before it). */
    timeoutSeconds: z.number().positive().optional(),
  })
  .refine((o) => o.thresholds.match <= o.thresholds.trigger, {
    message: "thresholds.match must not be above thresholds.trigger",
    path: ["thresholds"],
  });

export type RouterOptions = z.infer<typeof routerOptionsSchema>;
