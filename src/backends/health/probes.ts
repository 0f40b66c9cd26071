/**
 * Each backend's health and which coding-agent CLIs are installed, probed in the background: at
 * start-up, every `server.backendProbes.everySeconds`, and when asked (`refresh`). A probe asks every
 * backend (`Backend.health`) and looks for every known CLI with its `--version`; together that takes
 * seconds, so readers (`GET /v1/admin/backends`) take the last result with its time instead of
 * waiting. One probe runs at a time: a refresh asked while one is running gets that one.
 */
import type { Logger } from "pino";
import type { BackendRow, CliRow } from "../../wire/admin.js";
import { cliVersionHealth, KNOWN_CLIS, resolveCli } from "../cli/resolve.js";
import type { Backend, BackendHealth } from "../contract/backend.js";

/** What one probe found, and when it ended (ms since the epoch). */
export interface BackendProbe {
  backends: BackendRow[];
  clis: CliRow[];
  checkedAt: number;
}

export interface BackendProbesDeps {
  /** One probe (`probeBackends`). */
  probe(): Promise<BackendProbe>;
  /** Milliseconds between background probes. */
  everyMs: number;
  logger: Logger;
}

export class BackendProbes {
  private last: BackendProbe | undefined;
  private inFlight: Promise<BackendProbe> | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: BackendProbesDeps) {}

  /** The first probe now, then one every `everyMs` (the timer does not keep the process up). */
  start(): void {
    if (this.timer) return;
    this.probeInBackground();
    this.timer = setInterval(() => this.probeInBackground(), this.deps.everyMs);
    this.timer.unref();
  }

  private probeInBackground(): void {
    this.refresh().catch((err: Error) => this.deps.logger.warn({ err: err.message }, "backends not probed"));
  }

  /** No more background probes (one running ends on its own). */
  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** The last probe's result; undefined until the first one ends. */
  get latest(): BackendProbe | undefined {
    return this.last;
  }

  /** Whether probes run in the background (started, not closed). */
  get background(): boolean {
    return this.timer !== undefined;
  }

  /** Whether a probe is running now. */
  get probing(): boolean {
    return this.inFlight !== undefined;
  }

  /** A new probe, or the one running now: never two at once. */
  refresh(): Promise<BackendProbe> {
    const t0 = Date.now();
    this.inFlight ??= this.deps
      .probe()
      .then((p) => {
        this.deps.logger.debug({ ms: Date.now() - t0 }, "backends probed");
        return (this.last = p);
      })
      .finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }
}

/** Every backend's health (`Backend.health`) and every known CLI with its `--version`, at once. */
export async function probeBackends(
  backends: readonly Backend[],
  modelsOf: (backend: string) => string[],
): Promise<BackendProbe> {
  const [rows, clis] = await Promise.all([
    Promise.all(
      backends.map(async (b): Promise<BackendRow> => {
        const h: BackendHealth = await b.health().catch((e: Error) => ({ usable: false, detail: e.message }));
        return {
          name: b.name,
          type: b.type,
          usable: h.usable,
          detail: h.detail,
          version: h.version ?? null,
          models: modelsOf(b.name),
        };
      }),
    ),
    Promise.all(
      KNOWN_CLIS.map(async (c): Promise<CliRow> => {
        const { path: bin, tried } = await resolveCli(c.name, c.extraPlaces ?? []);
        const h = bin ? await cliVersionHealth(bin, tried, process.env) : undefined;
        return {
          name: c.name,
          backend_type: c.backendType,
          package: c.pkg,
          installed: !!bin,
          path: bin ?? null,
          usable: h?.usable ?? false,
          version: h?.version ?? null,
          detail: bin ? (h?.usable ? null : (h?.detail ?? null)) : `not found (npm i -g ${c.pkg})`,
          used_by: backends.filter((b) => b.type === c.backendType).map((b) => b.name),
        };
      }),
    ),
  ]);
  return { backends: rows, clis, checkedAt: Date.now() };
}
