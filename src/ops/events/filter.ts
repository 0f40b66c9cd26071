/**
 * What a watcher of `GET /v1/events` asks to see: the filter parsed from the query
 * (`?conversation=&run=&system=&types=`) and the test an event passes (src/ops/events/hub.ts
 * applies it, live and on replay).
 *
 * `conversation`, `run` and `system` are comma-separated lists of values; `types` lists exact
 * types or prefixes written `run.*`, `turn.*`, `node.*` (`*` alone: every type), checked against
 * the bus's types (`EVENT_TYPES`, src/wire/events.ts). Filters are ANDed, and an event without the
 * field filtered on is not shown (the hub gives a run's step and output events the conversation and
 * system of its `run.started`).
 */
import { EVENT_TYPES } from "../../wire/events.js";

/** What a subscriber wants to see. Each set, when present, must contain the event's value. */
export interface EventFilter {
  conversations?: ReadonlySet<string>;
  runs?: ReadonlySet<string>;
  systems?: ReadonlySet<string>;
  types?: { exact: ReadonlySet<string>; prefixes: readonly string[] };
}

/** The fields of an event a filter looks at. */
export interface Filterable {
  type: string;
  conversation?: string;
  runId?: string;
  system?: string;
}

/** A bad `?conversation=&run=&system=&types=` value. */
export class FilterError extends Error {
  constructor(
    readonly param: string,
    message: string,
  ) {
    super(message);
    this.name = "FilterError";
  }
}

/** Parse the query of `GET /v1/events`; throws `FilterError`. */
export function parseFilter(query: Record<string, unknown>): EventFilter {
  const list = (param: string): string[] | undefined => {
    const raw = query[param];
    if (raw === undefined) return undefined;
    const values = (Array.isArray(raw) ? raw : [raw])
      .flatMap((v) => String(v).split(","))
      .map((v) => v.trim())
      .filter(Boolean);
    if (!values.length) throw new FilterError(param, `?${param}= needs a value (a comma-separated list).`);
    return values;
  };
  const filter: EventFilter = {};
  const conversations = list("conversation");
  if (conversations) filter.conversations = new Set(conversations);
  const runs = list("run");
  if (runs) filter.runs = new Set(runs);
  const systems = list("system");
  if (systems) filter.systems = new Set(systems);
  const types = list("types");
  if (types) {
    const exact = new Set<string>();
    const prefixes: string[] = [];
    const known: readonly string[] = EVENT_TYPES;
    for (const t of types) {
      // Release 0.1.0's names (docs/EVENTS.md): said, so a watcher written for them is told what to ask for.
      const renamed = t.includes(":")
        ? " Release 0.1.0's names with a colon are gone: a build's execution:* events are now run.* and step.* (origin builder); node:* and edge:* are node.* and edge.*."
        : "";
      if (t === "*") prefixes.push("");
      else if (t.endsWith("*")) {
        const prefix = t.slice(0, -1);
        if (!known.some((k) => k.startsWith(prefix)))
          throw new FilterError(
            "types",
            `No event type starts with "${prefix}" (known: ${EVENT_TYPES.join(", ")}).${renamed}`,
          );
        prefixes.push(prefix);
      } else if (known.includes(t)) exact.add(t);
      else
        throw new FilterError(
          "types",
          `Unknown event type "${t}" (known: ${EVENT_TYPES.join(", ")}; a prefix is written like run.*).${renamed}`,
        );
    }
    filter.types = { exact, prefixes };
  }
  return filter;
}

/** Whether an event passes `f`. */
export function matches(f: EventFilter, e: Filterable): boolean {
  if (f.types && !f.types.exact.has(e.type) && !f.types.prefixes.some((p) => e.type.startsWith(p))) return false;
  if (f.conversations && (e.conversation === undefined || !f.conversations.has(e.conversation))) return false;
  if (f.runs && (e.runId === undefined || !f.runs.has(e.runId))) return false;
  if (f.systems && (e.system === undefined || !f.systems.has(e.system))) return false;
  return true;
}
