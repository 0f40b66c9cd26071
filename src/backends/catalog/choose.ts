/**
 * Which live model serves a model its CLI no longer offers (`remap.onMissing` of the backend):
 * - `best-free`: a free one — the CLI's own "Did you mean" suggestions first, then models that
 *   call tools, then the largest context window, then by name (so the choice is stable);
 * - `first`: the first suggestion, else the first model the CLI lists;
 * - `error`: none (the CLI's own error is the answer).
 */
import type { DiscoveredModel } from "../contract/backend.js";

export type OnMissing = "best-free" | "first" | "error";

export function chooseLive(
  models: readonly DiscoveredModel[],
  policy: OnMissing,
  hints: readonly string[] = [],
): DiscoveredModel | undefined {
  if (policy === "error" || !models.length) return undefined;
  const hinted = hints.map((h) => models.find((m) => m.id === h)).filter((m): m is DiscoveredModel => !!m);
  if (policy === "first") return hinted[0] ?? models[0];
  const free = models.filter((m) => m.free);
  if (!free.length) return undefined;
  const fromHints = hinted.find((m) => m.free);
  if (fromHints) return fromHints;
  return [...free].sort(
    (a, b) =>
      Number(b.toolCalls ?? false) - Number(a.toolCalls ?? false) ||
      (b.contextWindow ?? 0) - (a.contextWindow ?? 0) ||
      a.id.localeCompare(b.id),
  )[0];
}

/** The suggestions in a CLI's (OpenCode's) "Model not found: x. Did you mean: a, b, c?" (as `provider/model` when the requested name had a provider). */
export function didYouMean(message: string): { missing: string; suggestions: string[] } | undefined {
  const m = /Model not found:\s*(\S+?)\.?\s+Did you mean:?\s*([^?\n]+)/i.exec(message);
  if (!m) return undefined;
  const missing = m[1]!;
  const slash = missing.indexOf("/");
  const provider = slash > 0 ? missing.slice(0, slash + 1) : "";
  const suggestions = m[2]!
    .split(",")
    .map((s) => s.trim().replace(/[.?]+$/, ""))
    .filter(Boolean)
    .map((s) => (s.includes("/") ? s : provider + s));
  return { missing, suggestions };
}
