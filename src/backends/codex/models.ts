/**
 * Codex's model catalog, as `codex debug models --bundled` prints it (JSON: `models[]` with
 * `slug`, `display_name`, `context_window`, `input_modalities`, `visibility`). `--bundled` is the
 * catalog shipped with the binary: listing it needs no network and no login.
 */
import type { DiscoveredModel } from "../contract/backend.js";

interface CodexModelJson {
  slug?: unknown;
  display_name?: unknown;
  context_window?: unknown;
  input_modalities?: unknown;
  visibility?: unknown;
}

/** The listed models (hidden ones left out). */
export function parseCodexModels(out: string): DiscoveredModel[] {
  const j = JSON.parse(out) as { models?: CodexModelJson[] };
  const models: DiscoveredModel[] = [];
  for (const m of Array.isArray(j.models) ? j.models : []) {
    if (typeof m.slug !== "string" || !m.slug || (m.visibility !== undefined && m.visibility !== "list")) continue;
    const d: DiscoveredModel = { id: m.slug, toolCalls: true };
    if (typeof m.display_name === "string") d.name = m.display_name;
    if (typeof m.context_window === "number" && m.context_window > 0) d.contextWindow = m.context_window;
    if (Array.isArray(m.input_modalities))
      d.input = m.input_modalities.filter((x): x is string => typeof x === "string");
    models.push(d);
  }
  return models;
}
