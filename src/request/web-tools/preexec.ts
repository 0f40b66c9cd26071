/**
 * Tool pre-execution: many free/CLI models describe tools instead of calling them, so the bridge
 * runs the obvious tool BEFORE the model answers and puts the results into the prompt.
 *
 * `ToolRunner.preExecute(message)` detects an intent (src/request/intents/detect.ts), runs web_search /
 * news / web_fetch, and returns the live-data block — or `block: null` and a reason. It never
 * throws: timeouts, network errors, refused addresses and unparsable pages all become `error`.
 * Results are cached per (tool, parameter) for `cacheTtlSeconds`, and a retry that arrives while
 * the first fetch is still running shares it.
 */
import type { Logger } from "pino";
import type { Agent } from "undici";
import { detectIntent, resolveRules, type DetectedIntent } from "../intents/detect.js";
import { parseIntentsConfig, type IntentRule, type IntentsConfig, type IntentsConfigInput } from "../intents/schema.js";
import { TtlCache } from "./cache.js";
import { webFetch, type FetchedPage } from "./fetch.js";
import { formatPageBlock, formatSearchBlock, pageHeader, rankResults, searchHeader } from "./format.js";
import { guardedAgent, plainAgent, toToolError, ToolError } from "./http-get.js";
import { NetGuard, systemResolve, type ResolveFn } from "../../core/net/netguard.js";
import { createSearchProvider, type Freshness, type SearchProvider, type SearchResult } from "./search.js";

export interface ToolRunnerOptions {
  /** DNS resolver used for untrusted URLs (tests inject one; default: the system resolver). */
  resolve?: ResolveFn;
  /** Clock in ms (cache expiry and the "fetched" time). */
  now?: () => number;
  /** Environment for `search.apiKeyEnv` (default process.env). */
  env?: Record<string, string | undefined>;
  /** Overrides `maxToolResultChars` of the config (e.g. the model's context budget). */
  maxToolResultChars?: number;
  /** Share one cache between runners (e.g. one per model). */
  cache?: TtlCache<CachedToolResult>;
}

export interface PreExecuteResult {
  /** The live-data block for the prompt, or null. */
  block: string | null;
  /** What was detected (null: nothing to do). */
  intent: DetectedIntent | null;
  /** Why there is no block although an intent was detected (log it; never shown to users). */
  error?: string;
  /** True when every tool result came from the cache (or a shared in-flight fetch). */
  cached: boolean;
  /** Number of search results / 1 for a page, when a block was built. */
  resultCount?: number;
  /**
   * The same block split for src/request/context/stateless.ts `LiveData`: `${title}:\n${body}` === block.
   * Present exactly when `block` is.
   */
  live?: LiveBlock;
}

export interface LiveBlock {
  /** First line without its colon, e.g. `LIVE WEB SEARCH RESULTS (fetched …) for "q"`. */
  title: string;
  body: string;
}

/** Split a block into heading and body (the heading is its first line, minus the final colon). */
export function toLiveData(block: string): LiveBlock {
  const nl = block.indexOf("\n");
  const first = nl >= 0 ? block.slice(0, nl) : block;
  const body = nl >= 0 ? block.slice(nl + 1) : "";
  return { title: first.endsWith(":") ? first.slice(0, -1) : first, body };
}

function done(block: string, intent: DetectedIntent, cached: boolean, resultCount: number): PreExecuteResult {
  return { block, intent, cached, resultCount, live: toLiveData(block) };
}

export type CachedToolResult =
  | { type: "search"; results: SearchResult[]; fetchedAt: number }
  | { type: "page"; page: FetchedPage; fetchedAt: number };

type Log = Pick<Logger, "debug" | "warn">;

function aborted(): ToolError {
  return new ToolError("ABORTED", "aborted by the caller");
}

/** Wait for `p`, but give up (without cancelling `p`) when `signal` fires. */
function raceSignal<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) return Promise.reject(aborted());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(aborted());
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

export class ToolRunner {
  readonly config: IntentsConfig;
  readonly rules: IntentRule[];
  readonly guard: NetGuard;
  private readonly provider: SearchProvider;
  private readonly cache: TtlCache<CachedToolResult>;
  private readonly trusted: Agent;
  private readonly untrusted: Agent;
  private readonly life = new AbortController();
  private readonly now: () => number;
  private readonly maxChars: number;
  private readonly log: Log | undefined;

  constructor(config: IntentsConfigInput | IntentsConfig, logger?: Logger, options: ToolRunnerOptions = {}) {
    this.config = parseIntentsConfig(config);
    this.rules = resolveRules(this.config);
    this.log = logger;
    this.now = options.now ?? Date.now;
    this.maxChars = options.maxToolResultChars ?? this.config.maxToolResultChars;
    this.cache =
      options.cache ??
      new TtlCache<CachedToolResult>(this.config.cacheTtlSeconds * 1000, this.config.cacheMaxEntries, this.now);
    this.guard = new NetGuard({
      allowPrivateAddresses: this.config.fetch.allowPrivateAddresses,
      allowHosts: this.config.fetch.allowHosts,
    });
    this.untrusted = guardedAgent(this.guard, options.resolve ?? systemResolve, this.config.fetch.timeoutMs);
    this.trusted = plainAgent(this.config.search.timeoutMs);
    this.provider = createSearchProvider(this.config.search, {
      dispatcher: this.trusted,
      env: options.env ?? process.env,
    });
  }

  /** Intent of a message under this runner's rules (null when none or when disabled). */
  detect(message: string): DetectedIntent | null {
    return detectIntent(message, this.rules);
  }

  /**
   * Detect and run. Never throws; on failure `block` is null and `error` says why.
   * `signal` stops waiting (the download itself continues until its own timeout so that a retry
   * can use its result).
   */
  async preExecute(message: string, signal?: AbortSignal): Promise<PreExecuteResult> {
    let intent: DetectedIntent | null;
    try {
      intent = this.detect(message);
    } catch (err) {
      return {
        block: null,
        intent: null,
        cached: false,
        error: `intent detection failed: ${(err as Error)?.message ?? err}`,
      };
    }
    if (!intent) return { block: null, intent: null, cached: false };
    return this.run(intent, signal);
  }

  /** Run the tool for an already detected intent. Never throws. */
  async run(intent: DetectedIntent, signal?: AbortSignal): Promise<PreExecuteResult> {
    try {
      if (signal?.aborted) throw aborted();
      switch (intent.kind) {
        case "web_search":
          return await this.runSearch(intent, signal);
        case "news":
          return await this.runNews(intent, signal);
        case "web_fetch":
          return await this.runFetch(intent, signal);
      }
    } catch (err) {
      const e = toToolError(err, intent.kind, false, signal?.aborted ?? false);
      this.log?.debug(
        { tool: intent.kind, rule: intent.ruleId, code: e.code, reason: e.message },
        "tool pre-execution failed",
      );
      return { block: null, intent, cached: false, error: `${intent.kind}: ${e.message}` };
    }
  }

  /** web_search through the configured provider, cached. Throws ToolError. */
  async search(
    query: string,
    opts: { freshness?: Freshness; signal?: AbortSignal } = {},
  ): Promise<{ results: SearchResult[]; fetchedAt: Date; cached: boolean }> {
    const key = [
      "web_search",
      this.provider.name,
      this.config.search.baseUrl ?? "",
      JSON.stringify(this.config.search.params),
      opts.freshness ?? "",
      query.trim().toLowerCase(),
    ].join("\u0000");
    const { value, cached } = await raceSignal(
      this.cache.getOrCompute(key, async () => {
        const results = await this.provider.search({
          query,
          count: this.config.search.maxResults,
          signal: this.life.signal,
          ...(opts.freshness ? { freshness: opts.freshness } : {}),
        });
        return { type: "search", results, fetchedAt: this.now() } as CachedToolResult;
      }),
      opts.signal,
    );
    if (value.type !== "search") throw new ToolError("PARSE", "cache type mismatch");
    return { results: value.results, fetchedAt: new Date(value.fetchedAt), cached };
  }

  /** web_fetch of an untrusted URL through the guard, cached. Throws ToolError. */
  async fetchPage(url: string, signal?: AbortSignal): Promise<{ page: FetchedPage; fetchedAt: Date; cached: boolean }> {
    // The guard policy is part of the key: a shared cache must never hand a page fetched under a
    // relaxed policy to a runner with a stricter one.
    const f = this.config.fetch;
    const key = ["web_fetch", f.format, String(f.allowPrivateAddresses), f.allowHosts.join(","), url].join("\u0000");
    const { value, cached } = await raceSignal(
      this.cache.getOrCompute(key, async () => {
        const page = await webFetch(
          url,
          this.config.fetch,
          { guard: this.guard, dispatcher: this.untrusted },
          this.life.signal,
        );
        return { type: "page", page, fetchedAt: this.now() } as CachedToolResult;
      }),
      signal,
    );
    if (value.type !== "page") throw new ToolError("PARSE", "cache type mismatch");
    return { page: value.page, fetchedAt: new Date(value.fetchedAt), cached };
  }

  private async runSearch(
    intent: Extract<DetectedIntent, { kind: "web_search" }>,
    signal?: AbortSignal,
  ): Promise<PreExecuteResult> {
    const freshness = intent.rule.freshness;
    const r = await this.search(intent.query, { ...(freshness ? { freshness } : {}), ...(signal ? { signal } : {}) });
    const ranked = rankResults(r.results, intent.query, this.config.search.maxResults);
    if (ranked.length === 0) return { block: null, intent, cached: r.cached, error: "web_search: no results" };
    const block = formatSearchBlock(
      searchHeader({ fetchedAt: r.fetchedAt, query: intent.query }),
      ranked,
      this.maxChars,
    );
    if (!block)
      return { block: null, intent, cached: r.cached, error: "web_search: results do not fit maxToolResultChars" };
    this.log?.debug(
      { tool: "web_search", rule: intent.ruleId, results: ranked.length, cached: r.cached, chars: block.length },
      "tool pre-executed",
    );
    return done(block, intent, r.cached, ranked.length);
  }

  private async runNews(
    intent: Extract<DetectedIntent, { kind: "news" }>,
    signal?: AbortSignal,
  ): Promise<PreExecuteResult> {
    const sites = intent.rule.sites ?? this.config.news.sites;
    const freshness = intent.rule.freshness;
    const common = { ...(freshness ? { freshness } : {}), ...(signal ? { signal } : {}) };
    let cachedAll = true;
    let results: SearchResult[] = [];
    let fetchedAt = new Date(this.now());
    let fellBack = false;
    if (sites.length > 0) {
      const restricted = `${intent.query} ${sites.map((s) => `site:${s}`).join(" OR ")}`;
      const r = await this.search(restricted, common);
      cachedAll &&= r.cached;
      results = rankResults(r.results, intent.query, this.config.search.maxResults);
      fetchedAt = r.fetchedAt;
    }
    if (results.length === 0 && (sites.length === 0 || this.config.news.fallbackToGeneral)) {
      const r = await this.search(intent.query, common);
      cachedAll &&= r.cached;
      results = rankResults(r.results, intent.query, this.config.search.maxResults);
      fetchedAt = r.fetchedAt;
      fellBack = sites.length > 0;
    }
    if (results.length === 0) return { block: null, intent, cached: cachedAll, error: "news: no results" };
    const header = searchHeader({ fetchedAt, query: intent.query, ...(sites.length ? { sites, fellBack } : {}) });
    const block = formatSearchBlock(header, results, this.maxChars);
    if (!block) return { block: null, intent, cached: cachedAll, error: "news: results do not fit maxToolResultChars" };
    this.log?.debug(
      { tool: "news", rule: intent.ruleId, results: results.length, fellBack, cached: cachedAll },
      "tool pre-executed",
    );
    return done(block, intent, cachedAll, results.length);
  }

  private async runFetch(
    intent: Extract<DetectedIntent, { kind: "web_fetch" }>,
    signal?: AbortSignal,
  ): Promise<PreExecuteResult> {
    const r = await this.fetchPage(intent.url, signal);
    const block = formatPageBlock(pageHeader({ fetchedAt: r.fetchedAt, url: intent.url }), r.page, this.maxChars);
    if (!block)
      return { block: null, intent, cached: r.cached, error: "web_fetch: page does not fit maxToolResultChars" };
    this.log?.debug(
      { tool: "web_fetch", rule: intent.ruleId, bytes: r.page.bytes, cached: r.cached, chars: block.length },
      "tool pre-executed",
    );
    return done(block, intent, r.cached, 1);
  }

  /** Abort running downloads and close connections. */
  async close(): Promise<void> {
    this.life.abort();
    await Promise.allSettled([this.trusted.destroy(), this.untrusted.destroy()]);
  }
}
