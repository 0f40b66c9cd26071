/** What every part of the fault suite gets and returns. */
import type { ServerKnobs } from "./bridge.js";

export interface PartContext {
  /** `--small`: seconds, not minutes. */
  small: boolean;
  seed: number;
  /** The run's temporary folder (each part makes its own sub-folder). */
  tmpRoot: string;
  /** Prefix of every FAULTS_MARK of this run. */
  runMark: string;
  knobs: ServerKnobs;
  log(message: string): void;
}

/** The "Done when" lines, in its order. */
export const DONE_LINES = [
  { id: "crashes", text: "0 crashes" },
  { id: "5xx", text: "0 5xx for client errors" },
  { id: "shape", text: "0 non-OpenAI-shaped error bodies" },
  { id: "orphans", text: "0 orphans, including after kill -9, within a few seconds and without a restart" },
  { id: "bindings", text: "0 lost bindings" },
  { id: "starvation", text: "every polite conversation served (honouring Retry-After) in the starvation scenario" },
  { id: "restart", text: "restart under 3 s with 24 orphaned groups" },
  { id: "shutdown", text: "shutdown with an idle keep-alive client under 1 s after the last turn ends" },
] as const;
export type DoneId = (typeof DONE_LINES)[number]["id"];

/** A figure a part contributes to a "Done when" line. */
export interface DoneFigure {
  /** Counted lines (crashes, 5xx, shape, orphans, bindings) are summed over parts; the others are stated by one part. */
  count?: number;
  measured: string;
  pass: boolean;
}

/** A further check tied to an item of the issue (not a "Done when" line). */
export interface Check {
  item: string;
  check: string;
  goal: string;
  measured: string;
  /** undefined: could not be measured here (e.g. the option is not configurable). */
  pass: boolean | undefined;
}

/** One row of the overview: what was sent and what was lost, leaked or crashed. */
export interface Tally {
  sent: string;
  crashes: number;
  fivexx: number;
  badShape: number;
  /** Resets and closes without an answer where an answer was due. */
  noAnswer: number;
  orphans: number;
  lost: number;
  notes: string;
}

export interface PartResult {
  name: string;
  title: string;
  tally: Tally;
  done: Partial<Record<DoneId, DoneFigure>>;
  checks: Check[];
  /** Markdown of the part's own tables. */
  details: string;
}

export interface Part {
  name: string;
  title: string;
  /** Done-when lines this part measures (a failed part marks them FAIL). */
  measures: DoneId[];
  run(ctx: PartContext): Promise<PartResult>;
}

export const emptyTally = (sent: string): Tally => ({
  sent,
  crashes: 0,
  fivexx: 0,
  badShape: 0,
  noAnswer: 0,
  orphans: 0,
  lost: 0,
  notes: "",
});
