/**
 * Codex's token counters: `codex exec` reports the THREAD's running total, so a turn's usage is the
 * total after it minus the total before it (kept in memory by the backend, or read from the
 * thread's rollout file). See src/backends/codex/backend.ts and docs/CLI_FORMATS.md.
 */
import { createReadStream } from "node:fs";
import { readdir } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import type { Usage } from "../contract/backend.js";

/** Codex's thread ids are UUIDs; anything else would be looked up as a thread NAME (and silently start a new thread). */
export const CODEX_THREAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Codex's token counters (`turn.completed.usage`, rollout `token_count.info.total_token_usage`). */
export interface CodexTotals {
  input_tokens: number;
  cached_input_tokens: number;
  output_tokens: number;
  reasoning_output_tokens: number;
}

export function totalsOf(u: unknown): CodexTotals | undefined {
  if (!u || typeof u !== "object") return undefined;
  const o = u as Record<string, unknown>;
  const n = (k: string) => (typeof o[k] === "number" && Number.isFinite(o[k]) ? (o[k] as number) : 0);
  if (typeof o.input_tokens !== "number" && typeof o.output_tokens !== "number") return undefined;
  return {
    input_tokens: n("input_tokens"),
    cached_input_tokens: n("cached_input_tokens"),
    output_tokens: n("output_tokens"),
    reasoning_output_tokens: n("reasoning_output_tokens"),
  };
}

/** This turn's usage: the running total after it minus the total before it. */
export function codexTurnUsage(after: CodexTotals, before: CodexTotals | undefined): Usage {
  const b = before ?? { input_tokens: 0, cached_input_tokens: 0, output_tokens: 0, reasoning_output_tokens: 0 };
  const d = (k: keyof CodexTotals) => Math.max(0, after[k] - b[k]);
  const promptTokens = d("input_tokens");
  const completionTokens = d("output_tokens");
  const usage: Usage = { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
  if (d("cached_input_tokens")) usage.cachedTokens = d("cached_input_tokens");
  if (d("reasoning_output_tokens")) usage.reasoningTokens = d("reasoning_output_tokens");
  return usage;
}

/**
 * The thread's running token total as recorded in its rollout file
 * (`<codexHome>/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, last `token_count` event).
 * Zero totals when the file has no count yet; undefined when the file is not found or unreadable.
 */
export async function codexRolloutTotals(codexHome: string, threadId: string): Promise<CodexTotals | undefined> {
  if (!CODEX_THREAD_ID.test(threadId)) return undefined;
  const file = await findRollout(path.join(codexHome, "sessions"), `-${threadId}.jsonl`);
  if (!file) return undefined;
  let last: CodexTotals = { input_tokens: 0, cached_input_tokens: 0, output_tokens: 0, reasoning_output_tokens: 0 };
  try {
    const rl = createInterface({ input: createReadStream(file, "utf8"), crlfDelay: Infinity });
    for await (const line of rl) {
      if (!line.includes('"token_count"')) continue;
      try {
        const t = totalsOf(JSON.parse(line)?.payload?.info?.total_token_usage);
        if (t) last = t;
      } catch {
        /* a partial line */
      }
    }
  } catch {
    return undefined;
  }
  return last;
}

async function sortedDirs(dir: string): Promise<string[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort()
      .reverse();
  } catch {
    return [];
  }
}

/** Newest day first; bounded: sessions/<year>/<month>/<day>/ only. */
async function findRollout(sessions: string, suffix: string): Promise<string | undefined> {
  for (const y of await sortedDirs(sessions)) {
    for (const m of await sortedDirs(path.join(sessions, y))) {
      for (const d of await sortedDirs(path.join(sessions, y, m))) {
        const dir = path.join(sessions, y, m, d);
        let names: string[] = [];
        try {
          names = await readdir(dir);
        } catch {
          continue;
        }
        const hit = names.find((n) => n.startsWith("rollout-") && n.endsWith(suffix));
        if (hit) return path.join(dir, hit);
      }
    }
  }
  return undefined;
}
