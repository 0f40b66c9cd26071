/**
 * Model routing: the requested model id → a configured model and its backend (with remap rules),
 * or a model a backend with `expose: all` discovered (`<backend>/<model>`). A model whose CLI no
 * longer offers it is served by a live one when the backend's `remap.onMissing` allows
 * (src/backends/catalog).
 */
import type { ModelCatalog } from "../../backends/catalog/catalog.js";
import type { Backend, DiscoveredModel } from "../../backends/contract/backend.js";
import type { Config, ResolvedModel } from "../../core/config/schema.js";

export interface Route {
  model: ResolvedModel;
  backend: Backend;
  /** The id the client asked for, when a remap rule changed it. */
  remappedFrom?: string;
}

/** A model of `/v1/models`. */
export interface ListedModel {
  id: string;
  /** The backend that serves it ("clawbridge" for a model of the config that is not one backend's own). */
  ownedBy: string;
  contextWindow?: number;
  /** What it takes in (`text`, `image`...): configured, else discovered, else what its backend passes on. */
  input: string[];
}

/** The id a discovered model is served under: `<backend>/<model>`, or the model's own id when it already starts so (`opencode/big-pickle`). */
export const exposedId = (backend: string, id: string): string =>
  id.startsWith(`${backend}/`) ? id : `${backend}/${id}`;

export class ModelRouter {
  private readonly byId = new Map<string, ResolvedModel>();

  constructor(
    private readonly config: Config,
    private readonly backends: ReadonlyMap<string, Backend>,
    private readonly catalog?: ModelCatalog,
  ) {
    for (const m of config.models) this.byId.set(m.id, m);
  }

  models(): readonly ResolvedModel[] {
    return this.config.models;
  }

  /** What `/v1/models` lists: the configured models (less those their CLI is known not to offer) and the exposed discovered ones. */
  listed(): ListedModel[] {
    const out: ListedModel[] = [];
    const seen = new Set<string>();
    for (const m of this.config.models) {
      if (this.catalog?.offers(m.backend, m.backendModel) === false) continue;
      const found = this.catalog?.list(m.backend)?.models.find((d) => d.id === m.backendModel);
      out.push(listedOf(m.id, m.backend, found, this.defaultInput(m.backend), m.input));
      seen.add(m.id);
    }
    for (const { backend, models } of this.catalog?.exposed() ?? []) {
      for (const d of models) {
        const id = exposedId(backend, d.id);
        if (seen.has(id)) continue;
        seen.add(id);
        out.push(listedOf(id, backend, d, this.defaultInput(backend)));
      }
    }
    return out;
  }

  /**
   * What a model takes in when neither its config nor its backend's listing says: images when its
   * backend passes them on, or hands turns to models that do (the router, the builder).
   */
  private defaultInput(backend: string): string[] {
    const b = this.backends.get(backend);
    return b?.imageInput || b?.dispatch ? ["text", "image"] : ["text"];
  }

  /** `resolve`, after waiting (bounded) for the first listing of the backends it may need. */
  async resolveLive(requested: string): Promise<Route | undefined> {
    const first = this.resolve(requested);
    const catalog = this.catalog;
    if (!catalog) return first;
    // Only a backend whose first listing is still running is waited for (once, at start-up).
    const waits = (first ? [first.model.backend] : Object.keys(this.config.exposeTemplates)).filter((b) =>
      catalog.firstListing(b),
    );
    if (!waits.length) return first;
    await Promise.all(waits.map((b) => catalog.whenKnown(b)));
    return this.resolve(requested);
  }

  resolve(requested: string): Route | undefined {
    let model = this.byId.get(requested);
    let remappedFrom: string | undefined;
    if (!model) {
      const lower = requested.toLowerCase();
      const rule = this.config.remap.find((r) => lower.includes(r.match.toLowerCase()));
      if (rule) {
        model = this.byId.get(rule.to) ?? this.config.remapTargets[rule.to];
        remappedFrom = requested;
      }
    }
    if (!model) model = this.exposed(requested);
    if (!model) {
      // Clients sometimes send "<provider>/<model>": accept the part after the first slash.
      const slash = requested.indexOf("/");
      if (slash > 0) model = this.byId.get(requested.slice(slash + 1));
    }
    if (!model) return undefined;
    const backend = this.backends.get(model.backend);
    if (!backend) return undefined;
    const live = this.catalog?.substitute(model.backend, model.backendModel);
    if (live) model = { ...model, backendModel: live };
    return { model, backend, ...(remappedFrom ? { remappedFrom } : {}) };
  }

  /** A discovered model of a backend with `expose: all`, served with that backend's template. */
  private exposed(requested: string): ResolvedModel | undefined {
    for (const { backend, models } of this.catalog?.exposed() ?? []) {
      const template = this.config.exposeTemplates[backend];
      if (!template) continue;
      const d = models.find((m) => exposedId(backend, m.id) === requested);
      if (d)
        return {
          ...template,
          id: requested,
          name: d.name ?? requested,
          backendModel: d.id,
          contextWindow: d.contextWindow ?? template.contextWindow,
        };
      // `<backend>/<a model it no longer offers>`: served by a live one when its remap allows
      // (`resolve` substitutes it), like a configured model that went away.
      const wanted = requested.startsWith(`${backend}/`) ? requested : undefined;
      if (wanted && this.config.backends[backend]?.models.remap.onMissing !== "error") {
        const own = models.some((m) => m.id.startsWith(`${backend}/`)) ? wanted : wanted.slice(backend.length + 1);
        if (this.catalog?.offers(backend, own) === false)
          return { ...template, id: requested, name: requested, backendModel: own };
      }
    }
    return undefined;
  }
}

/** A listed model: `configured` input (models[].input) wins over the discovered one, then the backend's default. */
function listedOf(
  id: string,
  backend: string,
  d: DiscoveredModel | undefined,
  fallbackInput: string[],
  configured?: string[],
): ListedModel {
  return {
    id,
    ownedBy: backend,
    ...(d?.contextWindow ? { contextWindow: d.contextWindow } : {}),
    input: configured ?? (d?.input?.length ? d.input : fallbackInput),
  };
}
