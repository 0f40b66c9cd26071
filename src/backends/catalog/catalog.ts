/**
 * The models each backend's CLI or server offers, known without asking on every request:
 * - asked at start-up in the background (`Backend.models`: `opencode models`, an upstream's
 *   `/models`, a CLI's documented aliases) and then every `discovery.refreshHours`;
 * - cached in `<dataDir>/models.json`, so a start without network (or with the CLI gone) still
 *   knows them; a failed refresh keeps what was known;
 * - a model the CLI says it does not have ("Model not found … Did you mean: …") is noted, with its
 *   suggestions as hints, until the next refresh.
 * `substitute` picks the live model that serves a configured or requested one the CLI no longer
 * offers (`remap.onMissing`, see choose.ts); each choice is logged once and listed by `remaps()`.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import type { Logger } from "pino";
import { type BackendModels, backendModelsSchema } from "../../core/config/schema.js";
import { writeFileAtomic } from "../../core/util/atomic-write.js";
import type { Backend, DiscoveredModel } from "../contract/backend.js";
import { chooseLive } from "./choose.js";

/** What is known of one backend's models. */
export interface BackendModelList {
  models: DiscoveredModel[];
  /** When they were listed (ms since the epoch). */
  at: number;
  /** `live`: listed by this process; `cache`: read from the data dir at start-up. */
  source: "live" | "cache";
  /** The backend refuses a model it does not list (`Backend.modelsComplete`): then a model not listed is missing. */
  complete: boolean;
  /** Why the last attempt to list them failed (the list is the one known before). */
  error?: string;
}

/** A configured or requested model served by another, live one. */
export interface ModelRemap {
  backend: string;
  /** What the config or the client named. */
  wanted: string;
  /** The live model that serves it. */
  using: string;
  why: string;
}

const CACHE_FILE = "models.json";
/** A backend's settings when none were given: the config's defaults. */
const DEFAULT_SETTINGS: BackendModels = backendModelsSchema.parse({});
/** The longest a request waits for a backend's first listing (only when nothing is cached). */
export const FIRST_LISTING_WAIT_MS = 15_000;

export class ModelCatalog {
  private readonly lists = new Map<string, BackendModelList>();
  private readonly pending = new Map<string, Promise<void>>();
  private readonly missing = new Map<string, Map<string, string[]>>();
  private readonly chosen = new Map<string, ModelRemap>();
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly life = new AbortController();

  constructor(
    private readonly deps: {
      backends: ReadonlyMap<string, Backend>;
      settings: Record<string, BackendModels | undefined>;
      dataDir: string;
      logger: Logger;
    },
  ) {}

  /** Read the cache, then list every backend that can in the background (and again every few hours). */
  start(): void {
    this.readCache();
    for (const [name, backend] of this.deps.backends) {
      const s = this.settingsOf(name);
      if (!backend.models || !s.discovery.enabled) continue;
      void this.refresh(name);
      const every = setInterval(() => void this.refresh(name), s.discovery.refreshHours * 3_600_000);
      every.unref?.();
      this.timers.push(every);
    }
  }

  close(): void {
    for (const t of this.timers) clearInterval(t);
    this.life.abort();
  }

  /** List a backend's models now (one listing at a time per backend). */
  refresh(name: string): Promise<void> {
    const running = this.pending.get(name);
    if (running) return running;
    const backend = this.deps.backends.get(name);
    if (!backend?.models) return Promise.resolve();
    const p = (async () => {
      try {
        const models = await backend.models!(this.life.signal);
        this.lists.set(name, { models, at: Date.now(), source: "live", complete: !!backend.modelsComplete });
        this.missing.delete(name);
        this.deps.logger.info({ backend: name, count: models.length }, "models listed");
        this.writeCache();
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        const known = this.lists.get(name);
        if (known) known.error = error;
        if (!this.life.signal.aborted)
          this.deps.logger.warn({ backend: name, reason: error }, "cannot list the backend's models");
      } finally {
        this.pending.delete(name);
      }
    })();
    this.pending.set(name, p);
    return p;
  }

  /** What is known of a backend's models (undefined: never listed, nothing cached). */
  list(name: string): BackendModelList | undefined {
    return this.lists.get(name);
  }

  /** Whether the backend's first listing is running (nothing known of its models yet). */
  firstListing(name: string): boolean {
    return this.pending.has(name) && !this.lists.has(name);
  }

  /** Wait (at most `ms`) for a backend's first listing when nothing is known yet. */
  async whenKnown(name: string, ms = FIRST_LISTING_WAIT_MS): Promise<void> {
    const p = this.pending.get(name);
    if (!p || this.lists.has(name)) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([p, new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
  }

  /** Whether the backend is known to offer `id` (undefined: not known either way). */
  offers(name: string, id: string): boolean | undefined {
    if (this.missing.get(name)?.has(id)) return false;
    const l = this.lists.get(name);
    if (!l?.models.length) return undefined;
    return l.models.some((m) => m.id === id) || (l.complete ? false : undefined);
  }

  /** The CLI said it has no `id` (its "Did you mean" suggestions are hints for the choice). */
  noteMissing(name: string, id: string, suggestions: string[]): void {
    let m = this.missing.get(name);
    if (!m) this.missing.set(name, (m = new Map()));
    m.set(id, suggestions);
  }

  /**
   * The live model that serves `wanted` on backend `name`, when its CLI is known not to offer it
   * and the backend's `remap.onMissing` allows one; undefined otherwise.
   */
  substitute(name: string, wanted: string): string | undefined {
    const policy = this.settingsOf(name).remap.onMissing;
    if (policy === "error" || this.offers(name, wanted) !== false) return undefined;
    const key = `${name}\u0000${wanted}`;
    const l = this.lists.get(name);
    const hints = this.missing.get(name)?.get(wanted) ?? [];
    // Nothing listed (yet): the CLI's own suggestions are the candidates (a `-free` one counts as free).
    const models = l?.models.length ? l.models : hints.map((id) => ({ id, free: /-free$/.test(id) }));
    const pick = chooseLive(models, policy, hints);
    if (!pick) return undefined;
    const before = this.chosen.get(key);
    if (before?.using !== pick.id) {
      const why = `${name} does not offer ${wanted}; remap.onMissing: ${policy}${hints.includes(pick.id) ? " (the CLI's own suggestion)" : ""}`;
      this.chosen.set(key, { backend: name, wanted, using: pick.id, why });
      this.deps.logger.warn(
        { backend: name, wanted, using: pick.id, policy },
        "model not offered: remapped to a live one",
      );
    }
    return pick.id;
  }

  /** Every remap chosen so far (for /health and doctor). */
  remaps(): ModelRemap[] {
    return [...this.chosen.values()];
  }

  /** Backends whose discovered models are served too (`expose: all`). */
  exposed(): Array<{ backend: string; models: DiscoveredModel[] }> {
    const out: Array<{ backend: string; models: DiscoveredModel[] }> = [];
    for (const [name, l] of this.lists) {
      if (this.deps.backends.has(name) && this.settingsOf(name).expose === "all")
        out.push({ backend: name, models: l.models });
    }
    return out;
  }

  private settingsOf(name: string): BackendModels {
    return this.deps.settings[name] ?? DEFAULT_SETTINGS;
  }

  private get cachePath(): string {
    return path.join(this.deps.dataDir, CACHE_FILE);
  }

  private readCache(): void {
    let j: { backends?: Record<string, { models?: unknown; at?: unknown }> };
    try {
      j = JSON.parse(readFileSync(this.cachePath, "utf8"));
    } catch {
      return; // none yet, or unreadable: listed afresh
    }
    for (const [name, entry] of Object.entries(j.backends ?? {})) {
      const backend = this.deps.backends.get(name);
      if (!backend || (entry as { type?: unknown }).type !== backend.type) continue;
      if (!Array.isArray(entry.models) || typeof entry.at !== "number") continue;
      const models = entry.models.filter(
        (m): m is DiscoveredModel => !!m && typeof m === "object" && typeof (m as DiscoveredModel).id === "string",
      );
      this.lists.set(name, { models, at: entry.at, source: "cache", complete: !!backend.modelsComplete });
    }
  }

  private writeCache(): void {
    const backends: Record<string, { type: string; models: DiscoveredModel[]; at: number }> = {};
    for (const [name, l] of this.lists)
      backends[name] = { type: this.deps.backends.get(name)?.type ?? "", models: l.models, at: l.at };
    try {
      writeFileAtomic(this.cachePath, `${JSON.stringify({ version: 1, backends }, null, 1)}\n`);
    } catch (err) {
      this.deps.logger.warn({ reason: (err as Error).message }, "cannot write the models cache");
    }
  }
}
