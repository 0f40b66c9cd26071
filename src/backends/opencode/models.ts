/**
 * OpenCode's models, as `opencode models --verbose` lists them: a `provider/model` line, then the
 * model's JSON (name, cost, limits, capabilities). Free models on OpenCode's own tier come and go
 * every few weeks, so the bridge asks instead of trusting a name (src/backends/catalog).
 */
import type { DiscoveredModel } from "../contract/backend.js";

interface OcModelJson {
  name?: string;
  status?: string;
  cost?: { input?: number; output?: number };
  limit?: { context?: number };
  capabilities?: { toolcall?: boolean; input?: Record<string, boolean> };
}

/** Parse `opencode models --verbose` (also plain `opencode models`: lines of ids). */
export function parseOpencodeModels(out: string): DiscoveredModel[] {
  const models: DiscoveredModel[] = [];
  const lines = out.split("\n");
  for (let i = 0; i < lines.length && models.length < 5000; i++) {
    const id = lines[i]!.trim();
    if (!/^[\w.@-]+\/\S+$/.test(id)) continue;
    const m: DiscoveredModel = { id };
    if (lines[i + 1]?.trim() === "{") {
      // The JSON block runs to the next line that is exactly "}".
      let j = i + 1;
      while (j < lines.length && lines[j] !== "}") j++;
      try {
        const info = JSON.parse(lines.slice(i + 1, j + 1).join("\n")) as OcModelJson;
        if (info.status && info.status !== "active") {
          i = j;
          continue;
        }
        if (info.name) m.name = info.name;
        if (info.cost) m.free = !info.cost.input && !info.cost.output;
        if (info.limit?.context) m.contextWindow = info.limit.context;
        const input = info.capabilities?.input;
        if (input) m.input = Object.keys(input).filter((k) => input[k]);
        if (info.capabilities?.toolcall !== undefined) m.toolCalls = info.capabilities.toolcall;
      } catch {
        /* a block we cannot read: the id alone */
      }
      i = j;
    }
    models.push(m);
  }
  return models;
}
