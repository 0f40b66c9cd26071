/**
 * Fake web for the tool tests, served on 127.0.0.1 only: search providers shaped like the real
 * ones (DuckDuckGo HTML page, SearXNG JSON, Brave Search JSON) and web pages (article with noise,
 * redirects, slow, huge, non-HTML, errors). Every request is recorded.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { gzipSync } from "node:zlib";

export interface FakeRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage["headers"];
}

export interface FakeHit {
  title: string;
  url: string;
  snippet: string;
}

/** How the fake search providers answer. */
export type SearchMode = "normal" | "empty" | "garbage" | "challenge" | "error500" | "slow";

export const ARTICLE_TITLE = "Tallinn opens a new harbour bridge";
export const ARTICLE_SENTENCE = "The new bridge connects the old town with the harbour district";

export function articleHtml(): string {
  const para = (i: number) =>
    `<p>${ARTICLE_SENTENCE} and paragraph ${i} explains more about the construction, the costs and the opinions of ` +
    `residents who will cross it every day on their way to work, school and the market near the water.</p>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${ARTICLE_TITLE} | Example News</title>
<style>body{color:red}</style><script>window.tracking = "SCRIPT_NOISE";</script></head>
<body>
<header><div class="logo">Example News</div></header>
<nav class="menu"><a href="/">Home</a> <a href="/world">NAV_NOISE World</a> <a href="/sports">Sports</a></nav>
<div class="ad advertisement">ADS_NOISE Buy cheap watches now!</div>
<main><article>
<h1>${ARTICLE_TITLE}</h1>
<p class="byline">By Mari Maasikas</p>
${Array.from({ length: 12 }, (_, i) => para(i + 1)).join("\n")}
<ul><li>Length: 300 metres</li><li>Cost: 12 million euros</li></ul>
<p>Read more on <a href="https://example.org/more">the project page</a>.</p>
<img src="/photo.jpg" alt="IMAGE_ALT_NOISE">
</article></main>
<aside class="sidebar">SIDEBAR_NOISE Most read stories</aside>
<footer>FOOTER_NOISE Copyright 2026</footer>
</body></html>`;
}

function escapeHtml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** Default hits for a query: deterministic, 8 of them. */
export function defaultHits(q: string): FakeHit[] {
  return Array.from({ length: 8 }, (_, i) => ({
    title: `Result ${i + 1} about ${q}`,
    url: `https://site${i + 1}.example/page?id=${i + 1}`,
    snippet:
      `Snippet number ${i + 1} with useful details about ${q}. ` +
      "It goes on for a while with additional context words so that trimming has something to work with.",
  }));
}

/** A DuckDuckGo-HTML-shaped result page (structure of html.duckduckgo.com/html/). */
export function ddgPage(q: string, hits: FakeHit[], opts: { withAd?: boolean } = {}): string {
  const ad = opts.withAd
    ? `<div class="result results_links results_links_deep result--ad result--ad--small">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="https://duckduckgo.com/y.js?ad_domain=ads.example&amp;u3=x">AD_NOISE Sponsored result</a></h2>
    <a class="result__snippet" href="https://duckduckgo.com/y.js?x=1">Sponsored AD_NOISE snippet</a>
  </div></div>`
    : "";
  const results = hits
    .map(
      (h) => `<div class="result results_links results_links_deep web-result ">
  <div class="links_main links_deep result__body">
    <h2 class="result__title">
      <a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=${encodeURIComponent(h.url)}&amp;rut=abc123">${escapeHtml(h.title)}</a>
    </h2>
    <div class="result__extras"><div class="result__extras__url">
      <a class="result__url" href="//duckduckgo.com/l/?uddg=${encodeURIComponent(h.url)}">${escapeHtml(new URL(h.url).host)}</a>
    </div></div>
    <a class="result__snippet" href="//duckduckgo.com/l/?uddg=${encodeURIComponent(h.url)}">${escapeHtml(h.snippet).replace(/details/, "<b>details</b>")}</a>
    <div class="clear"></div>
  </div>
</div>`,
    )
    .join("\n");
  const empty = hits.length === 0 ? `<div class="no-results">No  results.</div>` : "";
  return `<!DOCTYPE html><html><head><title>${escapeHtml(q)} at DuckDuckGo</title></head><body>
<div id="header"><form action="/html/" method="post"><input name="q" value="${escapeHtml(q)}"></form></div>
<div id="links" class="results">
${ad}
${results}
${empty}
</div></body></html>`;
}

export class FakeWeb {
  readonly requests: FakeRequest[] = [];
  searchMode: SearchMode = "normal";
  /** Queries containing "site:" get no results (to exercise the news fallback). */
  emptyForSiteQueries = false;
  /** Custom hits for a query (exact match), used by all providers. */
  readonly hits = new Map<string, FakeHit[]>();
  private readonly sockets = new Set<Socket>();
  private readonly pending = new Set<ServerResponse>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Requests whose path starts with `prefix`. */
  requestsTo(prefix: string): FakeRequest[] {
    return this.requests.filter((r) => r.path.startsWith(prefix));
  }

  static async start(): Promise<FakeWeb> {
    let self: FakeWeb | undefined;
    const server = createServer((req, res) => self!.handle(req, res));
    server.on("connection", (s) => {
      self?.sockets.add(s);
      s.on("close", () => self?.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    self = new FakeWeb(server, (server.address() as AddressInfo).port);
    return self;
  }

  async close(): Promise<void> {
    for (const res of this.pending) res.destroy();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private hitsFor(q: string): FakeHit[] {
    if (this.searchMode === "empty") return [];
    if (this.emptyForSiteQueries && /\bsite:/.test(q)) return [];
    return this.hits.get(q) ?? defaultHits(q);
  }

  /** Shared failure modes of the search endpoints; true when the response was handled. */
  private searchFailure(res: ServerResponse): boolean {
    switch (this.searchMode) {
      case "error500":
        res.writeHead(500, { "content-type": "text/plain" }).end("internal error");
        return true;
      case "slow":
        this.pending.add(res); // never answered; destroyed on close()
        res.on("close", () => this.pending.delete(res));
        return true;
      case "garbage":
        res
          .writeHead(200, { "content-type": "text/html" })
          .end("<html><body><p>Totally unexpected page layout</p></body></html>");
        return true;
      case "challenge":
        res
          .writeHead(202, { "content-type": "text/html" })
          .end(
            `<html><body><div class="anomaly-modal">Unfortunately, bots use DuckDuckGo too.</div><form id="challenge-form"></form></body></html>`,
          );
        return true;
      default:
        return false;
    }
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", this.origin);
    this.requests.push({
      method: req.method ?? "GET",
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
    });
    const q = url.searchParams.get("q") ?? "";
    const p = url.pathname;

    // --- search providers ---
    if (p === "/ddg/html/") {
      if (this.searchFailure(res)) return;
      res
        .writeHead(200, { "content-type": "text/html; charset=utf-8" })
        .end(ddgPage(q, this.hitsFor(q), { withAd: true }));
      return;
    }
    if (p === "/searxng/search") {
      if (url.searchParams.get("format") !== "json") {
        res.writeHead(403).end("format not allowed");
        return;
      }
      if (this.searchFailure(res)) return;
      const results = this.hitsFor(q).map((h, i) => ({
        url: h.url,
        title: h.title,
        content: h.snippet,
        engine: "duckduckgo",
        score: 10 - i,
        ...(i === 0 ? { publishedDate: "2026-11-21T08:00:00" } : {}),
      }));
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ query: q, number_of_results: results.length, results }));
      return;
    }
    if (p === "/brave/res/v1/web/search") {
      if (req.headers["x-subscription-token"] !== "test-brave-key") {
        res
          .writeHead(401, { "content-type": "application/json" })
          .end(JSON.stringify({ type: "ErrorResponse", error: { code: "SUBSCRIPTION_TOKEN_INVALID" } }));
        return;
      }
      if (this.searchFailure(res)) return;
      const count = Number(url.searchParams.get("count") ?? "20");
      const results = this.hitsFor(q)
        .slice(0, count)
        .map((h, i) => ({
          title: h.title,
          url: h.url,
          description: h.snippet.replace(/details/, "<strong>details</strong>") + " &amp; more",
          ...(i === 0 ? { age: "2 hours ago" } : {}),
        }));
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ type: "search", query: { original: q }, web: { type: "search", results } }));
      return;
    }

    // --- pages ---
    switch (p) {
      case "/article":
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(articleHtml());
        return;
      case "/article-gzip":
        res
          .writeHead(200, { "content-type": "text/html; charset=utf-8", "content-encoding": "gzip" })
          .end(gzipSync(articleHtml()));
        return;
      case "/latin1":
        res
          .writeHead(200, { "content-type": "text/plain; charset=iso-8859-1" })
          .end(Buffer.from("Tere! Päike paistab ja õhk on värske, ütles Jüri.", "latin1"));
        return;
      case "/redirect": {
        const to = url.searchParams.get("to") ?? "/article";
        res.writeHead(302, { location: to }).end();
        return;
      }
      case "/slow":
        this.pending.add(res);
        res.on("close", () => this.pending.delete(res));
        return;
      case "/slow-body":
        res.writeHead(200, { "content-type": "text/html" });
        res.write("<html><body><p>first part of the page");
        this.pending.add(res);
        res.on("close", () => this.pending.delete(res));
        return;
      case "/huge": {
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
        res.write(`<html><head><title>Huge page</title></head><body><article>`);
        const para = `<p>${"Endless words in a huge document keep flowing here. ".repeat(20)}</p>\n`;
        let sent = 0;
        const total = 20 * 1024 * 1024;
        const pump = (): void => {
          while (sent < total) {
            sent += para.length;
            if (!res.write(para)) {
              res.once("drain", pump);
              return;
            }
          }
          res.end("</article></body></html>");
        };
        res.on("error", () => undefined);
        pump();
        return;
      }
      case "/slow-gzip": {
        // Half a gzip stream, then silence.
        const gz = gzipSync(articleHtml());
        res.writeHead(200, { "content-type": "text/html", "content-encoding": "gzip" });
        res.write(gz.subarray(0, Math.floor(gz.length / 2)));
        this.pending.add(res);
        res.on("close", () => this.pending.delete(res));
        return;
      }
      case "/text":
        res
          .writeHead(200, { "content-type": "text/plain; charset=utf-8" })
          .end("Plain   text\n\n\n\nwith   spacing.\nSecond line.");
        return;
      case "/json":
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify({ status: "ok", items: [1, 2, 3], note: "json passthrough" }));
        return;
      case "/image":
        res.writeHead(200, { "content-type": "image/png" }).end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0, 0]));
        return;
      case "/error500":
        res.writeHead(500, { "content-type": "text/html" }).end("<h1>Server error</h1>");
        return;
      case "/empty-html":
        res
          .writeHead(200, { "content-type": "text/html" })
          .end("<html><head><script>x()</script></head><body><nav></nav></body></html>");
        return;
      case "/echo-headers":
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ headers: req.headers }));
        return;
      default:
        res.writeHead(404, { "content-type": "text/plain" }).end("not found");
    }
  }
}
