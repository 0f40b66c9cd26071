/**
 * web_search providers: DuckDuckGo's HTML endpoint (keyless default), SearXNG (JSON API) and the
 * Brave Search API (key). Base URLs are operator configuration (trusted); the result URLs they
 * return are untrusted and are only listed, never fetched here.
 */
import { parseHTML } from "linkedom";
import type { Dispatcher } from "undici";
import type { SearchConfig, SearchProviderName } from "../intents/schema.js";
import { httpGet, ToolError } from "./http-get.js";

interface DomEl {
  getAttribute(name: string): string | null;
  querySelector(selector: string): DomEl | null;
  textContent: string | null;
}

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
  /** Publication date/age when the provider gives one. */
  published?: string;
}

export type Freshness = "day" | "week" | "month" | "year";

export interface SearchRequest {
  query: string;
  count: number;
  freshness?: Freshness;
  signal?: AbortSignal;
}

export interface SearchProvider {
  readonly name: SearchProviderName;
  search(req: SearchRequest): Promise<SearchResult[]>;
}

export const DEFAULT_BASE_URLS: Record<SearchProviderName, string | undefined> = {
  duckduckgo: "https://html.duckduckgo.com/html/",
  searxng: undefined,
  brave: "https://api.search.brave.com/res/v1/web/search",
};

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " ", "#39": "'" };

/** Strip tags and decode entities of a short HTML fragment (snippets, titles). */
export function htmlFragmentToText(s: string): string {
  return s
    .replace(/<[^>]*>/g, "")
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+\d*);/gi, (m, name: string) => {
      const n = name.toLowerCase();
      if (n.startsWith("#x")) return safeCodePoint(parseInt(n.slice(2), 16)) ?? m;
      if (n.startsWith("#")) return safeCodePoint(parseInt(n.slice(1), 10)) ?? m;
      return ENTITIES[n] ?? m;
    })
    .replace(/\s+/g, " ")
    .trim();
}

function safeCodePoint(n: number): string | undefined {
  if (!Number.isFinite(n) || n < 0x20 || n > 0x10ffff || (n >= 0xd800 && n <= 0xdfff)) return undefined;
  return String.fromCodePoint(n);
}

function cleanText(s: string | null | undefined): string {
  return (s ?? "")
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, "")
    .replace(/\s+/g, " ")
    .trim();
}

function httpUrl(s: string | undefined | null): string | null {
  if (!s) return null;
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:" ? u.toString() : null;
  } catch {
    return null;
  }
}

/** Resolve DuckDuckGo's redirect links (//duckduckgo.com/l/?uddg=<target>) to the target. */
function ddgTarget(href: string | null): string | null {
  if (!href) return null;
  let u: URL;
  try {
    u = new URL(href, "https://duckduckgo.com/");
  } catch {
    return null;
  }
  if (/(^|\.)duckduckgo\.com$/i.test(u.hostname)) {
    if (u.pathname === "/y.js") return null; // ad click-through
    const target = u.searchParams.get("uddg");
    return target ? httpUrl(target) : null;
  }
  return httpUrl(u.toString());
}

/**
 * Parse a DuckDuckGo HTML result page. Ads are dropped. Throws ToolError PARSE for a page that is
 * not a result page (e.g. a bot challenge) — an empty result page gives [].
 */
export function parseDuckDuckGoHtml(html: string): SearchResult[] {
  const { document } = parseHTML(html);
  const nodes = Array.from(document.querySelectorAll(".result, .web-result")) as DomEl[];
  const out: SearchResult[] = [];
  const seen = new Set<string>();
  for (const node of nodes) {
    const cls = node.getAttribute("class") ?? "";
    if (/\bresult--ad\b/.test(cls)) continue;
    const a = node.querySelector("a.result__a, .result__title a");
    if (!a) continue;
    const url = ddgTarget(a.getAttribute("href"));
    if (!url || seen.has(url)) continue;
    seen.add(url);
    const title = cleanText(a.textContent);
    const snippet = cleanText(node.querySelector(".result__snippet")?.textContent);
    if (!title) continue;
    out.push({ title, url, snippet });
  }
  if (out.length > 0) return out;
  if (document.querySelector(".no-results") || /No\s+results\./i.test(document.body?.textContent ?? "")) return [];
  if (document.querySelector(".anomaly-modal, #challenge-form, .challenge-form") || /anomaly/i.test(html)) {
    throw new ToolError("PARSE", "DuckDuckGo answered with a bot challenge instead of results");
  }
  if (nodes.length > 0 || document.querySelector("#links, .serp__results, .results")) return [];
  throw new ToolError("PARSE", "unrecognized DuckDuckGo result page");
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ToolError("PARSE", `${what} did not return JSON`);
  }
}

/** Parse a SearXNG `format=json` answer. */
export function parseSearxngJson(text: string): SearchResult[] {
  const data = parseJson(text, "SearXNG") as { results?: unknown };
  if (!data || typeof data !== "object" || !Array.isArray(data.results)) {
    throw new ToolError("PARSE", "SearXNG answer has no results array");
  }
  const out: SearchResult[] = [];
  for (const r of data.results as Array<Record<string, unknown>>) {
    const url = httpUrl(typeof r.url === "string" ? r.url : null);
    const title = cleanText(typeof r.title === "string" ? r.title : "");
    if (!url || !title) continue;
    const published = typeof r.publishedDate === "string" ? r.publishedDate : undefined;
    out.push({
      title,
      url,
      snippet: cleanText(typeof r.content === "string" ? htmlFragmentToText(r.content) : ""),
      ...(published ? { published } : {}),
    });
  }
  return out;
}

/** Parse a Brave Search API web search answer. */
export function parseBraveJson(text: string): SearchResult[] {
  const data = parseJson(text, "Brave Search") as { web?: { results?: unknown }; type?: string };
  if (!data || typeof data !== "object") throw new ToolError("PARSE", "Brave Search answer is not an object");
  const results = data.web?.results;
  if (results === undefined) return [];
  if (!Array.isArray(results)) throw new ToolError("PARSE", "Brave Search answer has no web.results array");
  const out: SearchResult[] = [];
  for (const r of results as Array<Record<string, unknown>>) {
    const url = httpUrl(typeof r.url === "string" ? r.url : null);
    const title = typeof r.title === "string" ? htmlFragmentToText(r.title) : "";
    if (!url || !title) continue;
    const age = typeof r.age === "string" ? r.age : typeof r.page_age === "string" ? r.page_age : undefined;
    out.push({
      title: cleanText(title),
      url,
      snippet: cleanText(typeof r.description === "string" ? htmlFragmentToText(r.description) : ""),
      ...(age ? { published: age } : {}),
    });
  }
  return out;
}

export interface ProviderDeps {
  dispatcher: Dispatcher;
  env?: Record<string, string | undefined>;
}

const DDG_FRESHNESS: Record<Freshness, string> = { day: "d", week: "w", month: "m", year: "y" };
const BRAVE_FRESHNESS: Record<Freshness, string> = { day: "pd", week: "pw", month: "pm", year: "py" };

/** Build the provider selected in config. Throws ToolError CONFIG when it cannot work. */
export function createSearchProvider(cfg: SearchConfig, deps: ProviderDeps): SearchProvider {
  const base = cfg.baseUrl ?? DEFAULT_BASE_URLS[cfg.provider];
  const get = (url: URL, signal: AbortSignal | undefined, headers?: Record<string, string>) =>
    httpGet(url.toString(), {
      timeoutMs: cfg.timeoutMs,
      maxBytes: cfg.maxBytes,
      maxRedirects: 0,
      dispatcher: deps.dispatcher,
      ...(headers ? { headers } : {}),
      ...(signal ? { signal } : {}),
    });
  const withParams = (url: URL) => {
    for (const [k, v] of Object.entries(cfg.params)) url.searchParams.set(k, v);
    return url;
  };

  switch (cfg.provider) {
    case "duckduckgo":
      return {
        name: "duckduckgo",
        async search(req) {
          const url = withParams(new URL(base!));
          url.searchParams.set("q", req.query);
          if (req.freshness) url.searchParams.set("df", DDG_FRESHNESS[req.freshness]);
          const res = await get(url, req.signal, { accept: "text/html" });
          return parseDuckDuckGoHtml(res.text).slice(0, req.count);
        },
      };
    case "searxng":
      return {
        name: "searxng",
        async search(req) {
          if (!base) throw new ToolError("CONFIG", "search.baseUrl is required for the searxng provider");
          const root = new URL(base);
          const url = withParams(
            /\/search\/?$/.test(root.pathname) ? root : new URL("search", root.toString().replace(/\/?$/, "/")),
          );
          url.searchParams.set("q", req.query);
          url.searchParams.set("format", "json");
          if (req.freshness) url.searchParams.set("time_range", req.freshness);
          let res;
          try {
            res = await get(url, req.signal, { accept: "application/json" });
          } catch (err) {
            if (err instanceof ToolError && err.message === "HTTP 403") {
              throw new ToolError("HTTP", "HTTP 403 (is the json format enabled in the SearXNG settings?)");
            }
            throw err;
          }
          return parseSearxngJson(res.text).slice(0, req.count);
        },
      };
    case "brave":
      return {
        name: "brave",
        async search(req) {
          const key = cfg.apiKey ?? (cfg.apiKeyEnv ? deps.env?.[cfg.apiKeyEnv] : undefined);
          if (!key) throw new ToolError("CONFIG", "the brave provider needs search.apiKey or search.apiKeyEnv");
          const url = withParams(new URL(base!));
          url.searchParams.set("q", req.query);
          url.searchParams.set("count", String(Math.min(20, req.count)));
          if (req.freshness) url.searchParams.set("freshness", BRAVE_FRESHNESS[req.freshness]);
          const res = await get(url, req.signal, { accept: "application/json", "x-subscription-token": key });
          return parseBraveJson(res.text).slice(0, req.count);
        },
      };
  }
}
