import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import type { IntentsConfigInput } from "../../src/request/intents/schema.js";
import { TtlCache } from "../../src/request/web-tools/cache.js";
import { ToolRunner, type CachedToolResult, type ToolRunnerOptions } from "../../src/request/web-tools/preexec.js";
import { ARTICLE_SENTENCE, FakeWeb } from "../fakes/web/server.js";

let web: FakeWeb;
const runners: ToolRunner[] = [];
const NOW = Date.parse("2026-11-21T09:13:00.000Z");
const logger = pino({ level: "silent" });

before(async () => {
  web = await FakeWeb.start();
});
after(async () => {
  await Promise.all(runners.map((r) => r.close()));
  await web.close();
});
beforeEach(() => {
  web.searchMode = "normal";
  web.emptyForSiteQueries = false;
  web.hits.clear();
  web.requests.length = 0;
});

function runner(cfg: IntentsConfigInput = {}, opts: ToolRunnerOptions = {}): ToolRunner {
  const r = new ToolRunner(
    {
      ...cfg,
      search: { baseUrl: `${web.origin}/ddg/html/`, timeoutMs: 3000, ...cfg.search },
      fetch: { allowHosts: ["127.0.0.1"], timeoutMs: 3000, ...cfg.fetch },
    },
    logger,
    { now: () => NOW, ...opts },
  );
  runners.push(r);
  return r;
}

async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((res) => srv.listen(0, "127.0.0.1", res));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((res) => srv.close(() => res()));
  return port;
}

test("web search: a live-data block with time, query, ranked results, within the budget", async () => {
  const r = runner();
  const res = await r.preExecute("search for best AI tools 2026");
  assert.equal(res.error, undefined);
  assert.equal(res.intent?.kind, "web_search");
  assert.equal(res.intent?.kind === "web_search" && res.intent.query, "best AI tools 2026");
  assert.equal(res.cached, false);
  assert.ok(res.block);
  assert.ok(
    res.block.startsWith('LIVE WEB SEARCH RESULTS (fetched 2026-11-21T09:13:00.000Z) for "best AI tools 2026":\n'),
  );
  assert.match(res.block, /live data fetched from the web just now/);
  assert.match(res.block, /^1\. Result 1 about best AI tools 2026\n {3}https:\/\/site1\.example\/page\?id=1$/m);
  assert.ok(!res.block.includes("AD_NOISE"));
  assert.ok(res.block.length <= 3000);
  assert.equal(res.resultCount, 6); // search.maxResults default
  assert.equal(web.requestsTo("/ddg/").length, 1);
  // The same block split for the context builder's LiveData.
  assert.equal(res.live?.title, 'LIVE WEB SEARCH RESULTS (fetched 2026-11-21T09:13:00.000Z) for "best AI tools 2026"');
  assert.equal(`${res.live!.title}:\n${res.live!.body}`, res.block);
});

test("budget: maxToolResultChars (config or runner option) bounds the block", async () => {
  const small = await runner({ maxToolResultChars: 700 }).preExecute("search for tiny budget");
  assert.ok(small.block && small.block.length <= 700);
  assert.ok((small.resultCount ?? 0) >= 1);
  const viaOption = await runner({}, { maxToolResultChars: 500 }).preExecute("search for option budget");
  assert.ok(viaOption.block && viaOption.block.length <= 500);
});

test("cache: a retry does not refetch; the block keeps the original fetch time", async () => {
  let now = NOW;
  const r = runner({ cacheTtlSeconds: 60 }, { now: () => now });
  const first = await r.preExecute("search for cached query");
  now += 30_000;
  const retry = await r.preExecute("Search for cached query!");
  assert.equal(first.cached, false);
  assert.equal(retry.cached, true);
  assert.equal(retry.block, first.block);
  assert.equal(web.requestsTo("/ddg/").length, 1);
  // After the TTL the result is fetched again.
  now += 31_000;
  const later = await r.preExecute("search for cached query");
  assert.equal(later.cached, false);
  assert.equal(web.requestsTo("/ddg/").length, 2);
  assert.match(later.block!, /fetched 2026-11-21T09:14:01\.000Z/);
});

test("cache: concurrent identical requests share one fetch; fetch results are cached too", async () => {
  const r = runner();
  const [a, b] = await Promise.all([r.preExecute("search for shared"), r.preExecute("search for shared")]);
  assert.equal(a.block, b.block);
  assert.equal([a.cached, b.cached].filter(Boolean).length, 1);
  assert.equal(web.requestsTo("/ddg/").length, 1);
  const url = `${web.origin}/article`;
  const p1 = await r.preExecute(`summarize ${url}`);
  const p2 = await r.preExecute(`what does ${url} say?`);
  assert.equal(p1.cached, false);
  assert.equal(p2.cached, true);
  assert.equal(web.requestsTo("/article").length, 1);
});

test("a shared cache never serves a page fetched under a relaxed policy to a strict runner", async () => {
  const cache = new TtlCache<CachedToolResult>(60_000, 10);
  const relaxed = runner({}, { cache });
  const strict = runner({ fetch: { allowHosts: [] } }, { cache });
  const url = `${web.origin}/article`;
  assert.ok((await relaxed.preExecute(`read ${url}`)).block);
  const res = await strict.preExecute(`read ${url}`);
  assert.equal(res.block, null);
  assert.match(res.error!, /loopback/);
  assert.equal(web.requestsTo("/article").length, 1);
});

test("errors are not cached: a retry after a failure fetches again", async () => {
  const r = runner();
  web.searchMode = "error500";
  const failed = await r.preExecute("search for flaky thing");
  assert.equal(failed.block, null);
  assert.match(failed.error!, /HTTP 500/);
  web.searchMode = "normal";
  const ok = await r.preExecute("search for flaky thing");
  assert.ok(ok.block);
  assert.equal(ok.cached, false);
  assert.equal(web.requestsTo("/ddg/").length, 2);
});

test("news: site-restricted search (sites from the rule data)", async () => {
  const res = await runner().preExecute("Tell me Estonian news for today");
  assert.equal(res.intent?.kind, "news");
  const reqs = web.requestsTo("/ddg/");
  assert.equal(reqs.length, 1);
  assert.equal(reqs[0]!.query.get("q"), "Estonian news for today site:err.ee OR site:postimees.ee OR site:delfi.ee");
  assert.ok(
    res.block!.startsWith(
      "LIVE WEB SEARCH RESULTS (fetched 2026-11-21T09:13:00.000Z) (news from err.ee, postimees.ee, delfi.ee)",
    ),
  );
});

test("news: falls back to a general search when the sites give nothing (or not, if configured)", async () => {
  web.emptyForSiteQueries = true;
  const res = await runner().preExecute("Eesti uudised");
  const qs = web.requestsTo("/ddg/").map((q) => q.query.get("q"));
  assert.deepEqual(qs, ["Eesti uudised site:err.ee OR site:postimees.ee OR site:delfi.ee", "Eesti uudised"]);
  assert.match(res.block!, /nothing found on err\.ee, postimees\.ee, delfi\.ee; general web search/);
  assert.match(res.block!, /Result 1 about Eesti uudised/);

  web.requests.length = 0;
  const strict = await runner({ news: { fallbackToGeneral: false } }).preExecute("Eesti uudised");
  assert.equal(strict.block, null);
  assert.equal(strict.error, "news: no results");
  assert.equal(web.requestsTo("/ddg/").length, 1);
});

test("news: a custom rule without sites uses news.sites from the config", async () => {
  const r = runner({
    preset: "none",
    news: { sites: ["lsm.lv"] },
    rules: [
      {
        id: "lv-news",
        kind: "news",
        all: [
          ["latvia*", "latvij*"],
          ["news", "ziņas"],
        ],
        freshness: "day",
      },
    ],
  });
  const res = await r.preExecute("Latvijas ziņas");
  assert.ok(res.block);
  const req = web.requestsTo("/ddg/")[0]!;
  assert.equal(req.query.get("q"), "Latvijas ziņas site:lsm.lv");
  assert.equal(req.query.get("df"), "d");
});

test("web fetch: LIVE WEB DATA block from the URL in the message", async () => {
  const url = `${web.origin}/article`;
  const res = await runner().preExecute(`Can you summarize ${url} for me?`);
  assert.equal(res.error, undefined);
  assert.equal(res.intent?.kind, "web_fetch");
  assert.ok(res.block!.startsWith(`LIVE WEB DATA from ${url} (fetched 2026-11-21T09:13:00.000Z):\n`));
  assert.match(res.block!, /readable content of that page/);
  assert.ok(res.block!.includes(ARTICLE_SENTENCE));
  assert.ok(!res.block!.includes("NAV_NOISE"));
  assert.ok(res.block!.length <= 3000);
});

test("search providers are selectable: searxng and brave", async () => {
  const sx = await runner({ search: { provider: "searxng", baseUrl: `${web.origin}/searxng` } }).preExecute(
    "search for searx thing",
  );
  assert.match(sx.block!, /Result 1 about searx thing/);
  assert.equal(web.requestsTo("/searxng/search").length, 1);
  const br = await runner(
    { search: { provider: "brave", baseUrl: `${web.origin}/brave/res/v1/web/search`, apiKeyEnv: "TEST_BRAVE" } },
    { env: { TEST_BRAVE: "test-brave-key" } },
  ).preExecute("search for brave thing");
  assert.match(br.block!, /Result 1 about brave thing \(2 hours ago\)/);
  assert.equal(web.requestsTo("/brave/").length, 1);
});

test("failures never throw: each gives no block and a reason", async () => {
  const port = await closedPort();
  const cases: Array<{ name: string; setup?: () => void; cfg?: IntentsConfigInput; message: string; error: RegExp }> = [
    {
      name: "search timeout",
      setup: () => (web.searchMode = "slow"),
      cfg: { search: { timeoutMs: 300 } },
      message: "search for slow",
      error: /^web_search: .*timed out/,
    },
    {
      name: "search refused",
      cfg: { search: { baseUrl: `http://127.0.0.1:${port}/html/` } },
      message: "search for refused",
      error: /^web_search: .*ECONNREFUSED/,
    },
    {
      name: "search 500",
      setup: () => (web.searchMode = "error500"),
      message: "search for five hundred",
      error: /^web_search: HTTP 500$/,
    },
    {
      name: "search unparsable",
      setup: () => (web.searchMode = "garbage"),
      message: "search for garbage",
      error: /^web_search: unrecognized DuckDuckGo result page$/,
    },
    {
      name: "search empty",
      setup: () => (web.searchMode = "empty"),
      message: "search for nothing at all",
      error: /^web_search: no results$/,
    },
    {
      name: "fetch blocked",
      cfg: { fetch: { allowHosts: [] } },
      message: `read ${web.origin}/article`,
      error: /^web_fetch: loopback address 127\.0\.0\.1 is not allowed$/,
    },
    {
      name: "fetch timeout",
      cfg: { fetch: { timeoutMs: 300 } },
      message: `read ${web.origin}/slow`,
      error: /^web_fetch: .*timed out/,
    },
    { name: "fetch 500", message: `read ${web.origin}/error500`, error: /^web_fetch: HTTP 500$/ },
    { name: "fetch refused", message: `read http://127.0.0.1:${port}/x`, error: /^web_fetch: .*ECONNREFUSED/ },
    {
      name: "fetch unsupported",
      message: `read ${web.origin}/image`,
      error: /^web_fetch: content type image\/png is not supported$/,
    },
    { name: "fetch unknown host", message: "read http://no-such-host.invalid/", error: /^web_fetch: .*ENOTFOUND/ },
    {
      name: "brave without key",
      cfg: { search: { provider: "brave", apiKeyEnv: "NOT_SET_ANYWHERE" } },
      message: "search for keyless",
      error: /^web_search: the brave provider needs/,
    },
  ];
  for (const c of cases) {
    web.searchMode = "normal";
    c.setup?.();
    // DNS is faked: nothing resolves (tests never leave 127.0.0.1).
    const noDns = async (host: string) => {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" });
    };
    const r = runner(c.cfg ?? {}, { env: {}, resolve: noDns });
    const res = await r.preExecute(c.message);
    assert.equal(res.block, null, c.name);
    assert.ok(res.intent, `${c.name}: intent`);
    assert.match(res.error ?? "", c.error, `${c.name}: ${res.error}`);
  }
});

test("no intent: nothing runs; disabled config detects nothing", async () => {
  const res = await runner().preExecute("what is 9 * 9");
  assert.deepEqual(res, { block: null, intent: null, cached: false });
  const off = await runner({ enabled: false }).preExecute("search for cats");
  assert.deepEqual(off, { block: null, intent: null, cached: false });
  assert.equal(web.requests.length, 0);
});

test("caller abort: stops waiting at once; the download finishes in the background for a retry", async () => {
  const r = runner({ search: { timeoutMs: 3000 } });
  const pre = new AbortController();
  pre.abort();
  const early = await r.preExecute("search for aborted early", pre.signal);
  assert.equal(early.block, null);
  assert.match(early.error!, /aborted/);
  assert.equal(web.requests.length, 0);

  web.searchMode = "slow";
  const ac = new AbortController();
  const pending = r.preExecute("search for aborted later", ac.signal);
  for (let i = 0; i < 200 && web.requestsTo("/ddg/").length === 0; i++) await sleep(10);
  assert.equal(web.requestsTo("/ddg/").length, 1);
  ac.abort();
  const res = await pending;
  assert.equal(res.block, null);
  assert.match(res.error!, /^web_search: aborted/);
});
