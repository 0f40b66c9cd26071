/** Model routing: the requested model id → a configured model and its backend (with remap rules). */
import type { Backend } from "../../backends/contract/backend.js";
import type { Config, ResolvedModel } from "../../core/config/schema.js";

export interface Route {
  model: ResolvedModel;
  backend: Backend;
  /** The id the client asked for, when a remap rule changed it. */
  remappedFrom?: string;
}

export class ModelRouter {
  private readonly byId = new Map<string, ResolvedModel>();

  constructor(
    private readonly config: Config,
    private readonly backends: ReadonlyMap<string, Backend>,
  ) {
    for (const m of config.models) this.byId.set(m.id, m);
  }

  models(): readonly ResolvedModel[] {
    return this.config.models;
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
    if (!model) {
      // Clients sometimes send "<provider>/<model>": accept the part after the first slash.
      const slash = requested.indexOf("/");
      if (slash > 0) model = this.byId.get(requested.slice(slash + 1));
    }
    if (!model) return undefined;
    const backend = this.backends.get(model.backend);
    if (!backend) return undefined;
    return { model, backend, ...(remappedFrom ? { remappedFrom } : {}) };
  }
}
