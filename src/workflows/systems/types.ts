/** A system as the rest of the bridge sees it once the library has loaded and checked it. */
import type { InputSchema } from "../../wire/runs.js";
import type { RunSpec, Trigger } from "./schema.js";

export interface LoadedSystem {
  id: string;
  /** Display name (defaults to the id). */
  name: string;
  description: string;
  examples: string[];
  keywords: string[];
  inputs: InputSchema;
  /** Whether running it changes something outside the bridge (configured, or inferred). */
  sideEffects: boolean;
  confirm: "auto" | "always" | "never";
  /** Offered by the router (false: runnable by id only). */
  enabled: boolean;
  run: RunSpec;
  /** Its schedules (src/workflows/triggers). */
  triggers: Trigger[];
  /** Its inbound hook, when it has one: requests a minute allowed. */
  hook?: { perMinute: number };
  /** Where it was declared: `config` or the YAML file's path. */
  source: string;
}
