/**
 * web_fetch: download an UNTRUSTED URL through the NetGuard (scheme, address after DNS, every
 * redirect), within byte and time limits, and turn it into compact readable text:
 * HTML → @mozilla/readability over linkedom → turndown markdown (links and images dropped);
 * text/plain, markdown, JSON, XML → passed through.
 */
import { Readability } from "@mozilla/readability";
import { parseHTML } from "linkedom";
import TurndownService from "turndown";
import type { Dispatcher } from "undici";
import type { FetchConfig } from "../intents/schema.js";
import { httpGet, ToolError } from "./http-get.js";
import type { NetGuard } from "../../core/net/netguard.js";

export interface FetchedPage {
  /** URL asked for. */
  url: string;
  /** URL after redirects. */
  finalUrl: string;
  contentType: string;
  title?: string;
  byline?: string;
  /** Readable content (compact markdown or text). */
  content: string;
  /** The download stopped at maxBytes. */
  truncated: boolean;
  bytes: number;
}

export interface FetchDeps {
  guard: NetGuard;
  dispatcher: Dispatcher;
}

/** The few DOM members used here (linkedom's element type is not exported usefully). */
interface DomEl {
  remove(): void;
  after(node: unknown): void;
  innerHTML: string;
  textContent: string | null;
}

let turndown: TurndownService | null = null;

function turndownService(): TurndownService {
  if (turndown) return turndown;
  const td = new TurndownService({
    headingStyle: "atx",
    bulletListMarker: "-",
    codeBlockStyle: "fenced",
    emDelimiter: "_",
    strongDelimiter: "**",
  });
  td.remove([
    "script",
    "style",
    "noscript",
    "iframe",
    "form",
    "button",
    "select",
    "svg",
    "canvas",
    "video",
    "audio",
  ] as never);
  // Compact: keep link text, drop the URL; drop images.
  td.addRule("link-text", { filter: "a", replacement: (content) => content });
  td.addRule("no-images", {
    filter: ["img", "picture", "figure"] as never,
    replacement: (_c, node) => {
      const cap = (
        node as unknown as { querySelector?: (s: string) => { textContent?: string } | null }
      ).querySelector?.("figcaption");
      return cap?.textContent ? `\n\n${cap.textContent.trim()}\n\n` : "";
    },
  });
  turndown = td;
  return td;
}

/** Tidy markdown/text: no control characters, no trailing spaces, at most one blank line. */
export function compactText(s: string): string {
  return s
    .replace(/\r\n?/g, "\n")
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\u200b\ufeff]/g, "")
    .replace(/\u00a0/g, " ")
    .split("\n")
    .map((l) => l.replace(/[ \t]+/g, " ").trimEnd())
    .filter((l, i, arr) => !(l.trim() === "" && (arr[i - 1] ?? "").trim() === ""))
    .join("\n")
    .replace(/^\s*[-*]\s*$/gm, "")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

export function htmlToCompactMarkdown(html: string): string {
  return compactText(turndownService().turndown(html));
}

function htmlToText(html: string): string {
  const { document } = parseHTML(`<!doctype html><html><body>${html}</body></html>`);
  for (const el of Array.from(
    document.querySelectorAll("p, div, li, h1, h2, h3, h4, h5, h6, br, tr, pre, blockquote"),
  ) as DomEl[]) {
    el.after(document.createTextNode("\n"));
  }
  return compactText(document.body?.textContent ?? "");
}

const NOISE = [
  "script",
  "style",
  "noscript",
  "template",
  "iframe",
  "svg",
  "nav",
  "header",
  "footer",
  "aside",
  "form",
  "[role=navigation]",
  "[role=banner]",
  "[role=contentinfo]",
  "[aria-hidden=true]",
  ".ad",
  ".ads",
  ".advert",
  ".advertisement",
  ".cookie",
  ".cookies",
  ".newsletter",
  ".share",
  ".social",
  ".sidebar",
  ".menu",
];

/**
 * Extract the readable part of an HTML page. Readability first; when it finds no article, the
 * body minus navigation/ads/scripts.
 */
export function extractReadable(
  html: string,
  format: "markdown" | "text",
): { title?: string; byline?: string; content: string } {
  const render = (fragment: string) => (format === "markdown" ? htmlToCompactMarkdown(fragment) : htmlToText(fragment));
  const { document } = parseHTML(html);
  const docTitle = compactText(document.querySelector("title")?.textContent ?? "") || undefined;
  let article: ReturnType<Readability["parse"]> = null;
  try {
    article = new Readability(document as unknown as ConstructorParameters<typeof Readability>[0], {
      charThreshold: 200,
    }).parse();
  } catch {
    article = null;
  }
  if (article?.content && (article.textContent ?? "").trim().length >= 80) {
    const title = compactText(article.title ?? "") || docTitle;
    const byline = compactText(article.byline ?? "") || undefined;
    return { ...(title ? { title } : {}), ...(byline ? { byline } : {}), content: render(article.content) };
  }
  const fresh = parseHTML(html).document;
  for (const sel of NOISE) for (const el of Array.from(fresh.querySelectorAll(sel)) as DomEl[]) el.remove();
  const body = fresh.querySelector("main, article, [role=main]") ?? fresh.body;
  const content = body ? render(body.innerHTML) : "";
  return { ...(docTitle ? { title: docTitle } : {}), content };
}

function kindOf(contentType: string, text: string): "html" | "text" | "json" | "xml" | "other" {
  const ct = contentType.split(";")[0]!.trim().toLowerCase();
  if (ct === "text/html" || ct === "application/xhtml+xml") return "html";
  if (ct === "application/json" || ct.endsWith("+json")) return "json";
  if (ct === "application/xml" || ct === "text/xml" || ct.endsWith("+xml")) return "xml";
  if (ct.startsWith("text/")) return "text";
  if (ct === "" || ct === "application/octet-stream") {
    const head = text.slice(0, 1024).trimStart().toLowerCase();
    if (head.startsWith("<!doctype html") || head.startsWith("<html") || /<(head|body)[\s>]/.test(head)) return "html";
    if (head.startsWith("{") || head.startsWith("[")) return "json";
    // Mostly printable text?
    const sample = text.slice(0, 2048);
    const bad = (sample.match(/[\u0000-\u0008\u000e-\u001f\ufffd]/g) ?? []).length;
    if (ct === "" && sample.length > 0 && bad / sample.length < 0.01) return "text";
  }
  return "other";
}

/** Fetch an untrusted URL and extract its readable content. Throws ToolError. */
export async function webFetch(
  url: string,
  cfg: FetchConfig,
  deps: FetchDeps,
  signal?: AbortSignal,
): Promise<FetchedPage> {
  const res = await httpGet(url, {
    timeoutMs: cfg.timeoutMs,
    maxBytes: cfg.maxBytes,
    maxRedirects: cfg.maxRedirects,
    guard: deps.guard,
    dispatcher: deps.dispatcher,
    ...(signal ? { signal } : {}),
  });
  const kind = kindOf(res.contentType, res.text);
  const base = { url, finalUrl: res.url, contentType: res.contentType, truncated: res.truncated, bytes: res.bytes };
  switch (kind) {
    case "html": {
      const page = extractReadable(res.text, cfg.format);
      if (page.content.trim().length === 0) throw new ToolError("EMPTY", "page has no readable text");
      return { ...base, ...page };
    }
    case "json":
    case "xml":
    case "text": {
      const content = compactText(res.text);
      if (!content) throw new ToolError("EMPTY", "empty document");
      return { ...base, content };
    }
    default:
      throw new ToolError("UNSUPPORTED", `content type ${res.contentType || "unknown"} is not supported`);
  }
}
