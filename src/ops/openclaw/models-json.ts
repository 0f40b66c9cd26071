/**
 * OpenClaw's per-agent `agents/<agent>/agent/models.json`: a file OpenClaw GENERATES from
 * openclaw.json on every run. In the default `models.mode: "merge"` it merges the file it finds
 * there: for a provider id present in both, the OLD file's `baseUrl` and (real, non-marker)
 * `apiKey` win over openclaw.json (OpenClaw 2026.9 `mergeWithExistingProviderSecrets`), and a
 * provider that is only in the old file is kept. So after the bridge's URL or key changed, or after
 * an uninstall, an old entry for our provider id keeps OpenClaw talking to the wrong place.
 *
 * The rule applied here: an agent's models.json is STALE for our provider when it has an entry
 * under our provider id whose `baseUrl` or `apiKey` differs from what openclaw.json now says (on
 * uninstall: when it has an entry under our id at all). Then only that entry is removed from the
 * file (after a timestamped backup); other providers stay, and OpenClaw rewrites our entry from
 * openclaw.json on its next run. Files without our provider id are never touched; a file that does
 * not parse is reported, not changed (OpenClaw itself ignores and regenerates it).
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { writeFileAtomic, copyFileKeepMode } from "./fsutil.js";
import { backupName } from "./config-diff.js";

export type ModelsJsonState = "no-entry" | "matches" | "stale" | "unreadable";

export interface ModelsJsonFinding {
  file: string;
  /** Agent id (the directory name under agents/), or the configured agentDir. */
  agent: string;
  state: ModelsJsonState;
  /** Why it is stale / unreadable, in words. */
  reason?: string;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Every models.json OpenClaw may use: `<stateDir>/agents/<agent>/agent/models.json` and configured `agents.list[].agentDir`. */
export function listModelsJsonFiles(
  stateDir: string,
  openclawConfig?: Record<string, unknown>,
): Array<{ file: string; agent: string }> {
  const out = new Map<string, string>();
  const agentsRoot = path.join(stateDir, "agents");
  try {
    for (const entry of readdirSync(agentsRoot, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const file = path.join(agentsRoot, entry.name, "agent", "models.json");
      if (existsSync(file)) out.set(file, entry.name);
    }
  } catch {
    /* no agents yet */
  }
  const list = isObject(openclawConfig?.agents) ? (openclawConfig.agents as Record<string, unknown>).list : undefined;
  if (Array.isArray(list)) {
    for (const a of list) {
      if (!isObject(a) || typeof a.agentDir !== "string") continue;
      const file = path.resolve(stateDir, a.agentDir.replace(/^~(?=\/)/, process.env.HOME ?? "~"), "models.json");
      if (existsSync(file) && !out.has(file)) out.set(file, String(a.id ?? a.agentDir));
    }
  }
  return [...out].map(([file, agent]) => ({ file, agent })).sort((a, b) => a.file.localeCompare(b.file));
}

/**
 * Compare one models.json with what openclaw.json says for our provider. `expected` undefined
 * means "our provider should not be there" (uninstall).
 */
export function inspectModelsJson(
  file: string,
  agent: string,
  providerId: string,
  expected: { baseUrl: string; apiKey?: unknown } | undefined,
): ModelsJsonFinding {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    return {
      file,
      agent,
      state: "unreadable",
      reason: `not valid JSON (${(err as Error).message.slice(0, 120)}); OpenClaw ignores and rewrites it`,
    };
  }
  const providers = isObject(data) && isObject(data.providers) ? data.providers : undefined;
  const entry = providers?.[providerId];
  if (!isObject(entry)) return { file, agent, state: "no-entry" };
  if (!expected)
    return {
      file,
      agent,
      state: "stale",
      reason: `still has provider "${providerId}" (baseUrl ${String(entry.baseUrl ?? "?")})`,
    };
  const reasons: string[] = [];
  if (entry.baseUrl !== expected.baseUrl)
    reasons.push(`baseUrl ${JSON.stringify(entry.baseUrl ?? null)} instead of ${JSON.stringify(expected.baseUrl)}`);
  if (typeof expected.apiKey === "string" && typeof entry.apiKey === "string" && entry.apiKey !== expected.apiKey)
    reasons.push("a different apiKey");
  return reasons.length
    ? { file, agent, state: "stale", reason: `provider "${providerId}" has ${reasons.join(" and ")}` }
    : { file, agent, state: "matches" };
}

export function inspectAllModelsJson(
  stateDir: string,
  providerId: string,
  expected: { baseUrl: string; apiKey?: unknown } | undefined,
  openclawConfig?: Record<string, unknown>,
): ModelsJsonFinding[] {
  return listModelsJsonFiles(stateDir, openclawConfig).map(({ file, agent }) =>
    inspectModelsJson(file, agent, providerId, expected),
  );
}

/** Back up `file` and remove `providers.<providerId>` from it, keeping everything else. Returns the backup path. */
export function removeProviderFromModelsJson(file: string, providerId: string, now: Date): string {
  const text = readFileSync(file, "utf8");
  const data = JSON.parse(text) as { providers?: Record<string, unknown> };
  const backup = backupName(file, now);
  copyFileKeepMode(file, backup);
  if (data.providers) delete data.providers[providerId];
  // OpenClaw writes this file as JSON.stringify(.., null, 2) + "\n"; keep its format.
  writeFileAtomic(file, `${JSON.stringify(data, null, 2)}\n`, statSync(file).mode & 0o777);
  return backup;
}
