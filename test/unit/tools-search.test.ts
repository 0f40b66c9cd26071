import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { parseIntentsConfig, type IntentsConfigInput } from "../../src/request/intents/schema.js";
import { plainAgent, ToolError } from "../../src/request/web-tools/http-get.js";
import {
  createSearchProvider,
  htmlFragmentToText,
  parseBraveJson,
  parseDuckDuckGoHtml,
  parseSearxngJson,
} from "../../src/request/web-tools/search.js";
import { ddgPage, FakeWeb } from "../fakes/web/server.js";

let web: FakeWeb;
const agent = plainAgent(2000);

before(async () => {
  web = await FakeWeb.start();
});
after(async () => {
  await agent.close();
  await web.close();
});
beforeEach(() => {
  web.searchMode = "normal";
  web.emptyForSiteQueries = false;
  web.hits.clear();
  web.requests.length = 0;
});

function provider(search: IntentsConfigInput["search"]) {
  return createSearchProvider(parseIntentsConfig({ search }).search, {
    dispatcher: agent,
    env: { MY_BRAVE_KEY: "test-brave-key" },
  });
}

test("duckduckgo: parses the HTML page, decodes redirect links, drops ads, sends q and df", async () => {
  web.hits.set("best AI tools 2026", [
    {
      title: "Best AI tools & apps",
      url: "https://tools.example/best?a=1&b=2",
      snippet: "A list of details about tools",
    },
    { title: "Second", url: "https://second.example/", snippet: "More details" },
  ]);
  const p = provider({ baseUrl: `${web.origin}/ddg/html/`, params: { kl: "ee-et" } });
  const res = await p.search({ query: "best AI tools 2026", count: 5, freshness: "week" });
  assert.deepEqual(res, [
    {
      title: "Best AI tools & apps",
      url: "https://tools.example/best?a=1&b=2",
      snippet: "A list of details about tools",
    },
    { title: "Second", url: "https://second.example/", snippet: "More details" },
  ]);
  const req = web.requestsTo("/ddg/html/")[0]!;
  assert.equal(req.query.get("q"), "best AI tools 2026");
  assert.equal(req.query.get("df"), "w");
  assert.equal(req.query.get("kl"), "ee-et");
  assert.equal(req.headers.authorization, undefined);
  assert.equal(req.headers.cookie, undefined);
  assert.match(String(req.headers["user-agent"]), /clawbridge/);
});

test("duckduckgo: count limits results; an empty result page is [] (not an error)", async () => {
  const p = provider({ baseUrl: `${web.origin}/ddg/html/` });
  assert.equal((await p.search({ query: "x", count: 3 })).length, 3);
  web.searchMode = "empty";
  assert.deepEqual(await p.search({ query: "x", count: 3 }), []);
});

test("duckduckgo: unrecognized page and bot challenge are PARSE errors; 500 is HTTP", async () => {
  const p = provider({ baseUrl: `${web.origin}/ddg/html/` });
  web.searchMode = "garbage";
  await assert.rejects(
    p.search({ query: "x", count: 3 }),
    (e: unknown) => e instanceof ToolError && e.code === "PARSE" && /unrecognized/.test(e.message),
  );
  web.searchMode = "challenge";
  await assert.rejects(
    p.search({ query: "x", count: 3 }),
    (e: unknown) => e instanceof ToolError && e.code === "PARSE" && /bot challenge/.test(e.message),
  );
  web.searchMode = "error500";
  await assert.rejects(
    p.search({ query: "x", count: 3 }),
    (e: unknown) => e instanceof ToolError && e.code === "HTTP" && e.message === "HTTP 500",
  );
});

test("searxng: /search?format=json, time_range, results parsed", async () => {
  const p = provider({ provider: "searxng", baseUrl: `${web.origin}/searxng` });
  const res = await p.search({ query: "riga weather", count: 4, freshness: "day" });
  assert.equal(res.length, 4);
  assert.equal(res[0]!.title, "Result 1 about riga weather");
  assert.equal(res[0]!.url, "https://site1.example/page?id=1");
  assert.equal(res[0]!.published, "2026-11-21T08:00:00");
  const req = web.requestsTo("/searxng/search")[0]!;
  assert.equal(req.query.get("format"), "json");
  assert.equal(req.query.get("time_range"), "day");
  // A base URL that already ends with /search is used as is.
  const p2 = provider({ provider: "searxng", baseUrl: `${web.origin}/searxng/search` });
  assert.equal((await p2.search({ query: "q", count: 2 })).length, 2);
});

test("brave: API key header from apiKeyEnv, count/freshness params, tags stripped", async () => {
  const p = provider({
    provider: "brave",
    baseUrl: `${web.origin}/brave/res/v1/web/search`,
    apiKeyEnv: "MY_BRAVE_KEY",
  });
  const res = await p.search({ query: "tartu", count: 3, freshness: "day" });
  assert.equal(res.length, 3);
  assert.equal(
    res[0]!.snippet,
    "Snippet number 1 with useful details about tartu. It goes on for a while with additional context words so that trimming has something to work with. & more",
  );
  assert.equal(res[0]!.published, "2 hours ago");
  const req = web.requestsTo("/brave/")[0]!;
  assert.equal(req.headers["x-subscription-token"], "test-brave-key");
  assert.equal(req.query.get("count"), "3");
  assert.equal(req.query.get("freshness"), "pd");
  assert.equal(req.headers.authorization, undefined);
});

test("brave: a wrong key is an HTTP error; a missing key is a CONFIG error (no request made)", async () => {
  const wrong = provider({ provider: "brave", baseUrl: `${web.origin}/brave/res/v1/web/search`, apiKey: "nope" });
  await assert.rejects(
    wrong.search({ query: "x", count: 3 }),
    (e: unknown) => e instanceof ToolError && e.message === "HTTP 401",
  );
  const missing = provider({
    provider: "brave",
    baseUrl: `${web.origin}/brave/res/v1/web/search`,
    apiKeyEnv: "UNSET_VAR",
  });
  const before = web.requests.length;
  await assert.rejects(
    missing.search({ query: "x", count: 3 }),
    (e: unknown) => e instanceof ToolError && e.code === "CONFIG",
  );
  assert.equal(web.requests.length, before);
});

test("parsers reject malformed answers and skip unusable entries", () => {
  assert.throws(() => parseSearxngJson("<html>"), /did not return JSON/);
  assert.throws(() => parseSearxngJson("{}"), /no results array/);
  assert.deepEqual(
    parseSearxngJson(
      JSON.stringify({
        results: [
          { url: "javascript:alert(1)", title: "x" },
          { url: "https://ok.example/", title: "ok", content: "<b>c</b>" },
        ],
      }),
    ),
    [{ title: "ok", url: "https://ok.example/", snippet: "c" }],
  );
  assert.throws(() => parseBraveJson("nope"), /did not return JSON/);
  assert.deepEqual(parseBraveJson(JSON.stringify({ type: "search" })), []);
  assert.throws(() => parseBraveJson(JSON.stringify({ web: { results: 5 } })), /web\.results/);
  // DDG: relative uddg links decoded; non-http targets dropped; ads dropped.
  const html = ddgPage(
    "q",
    [
      { title: "Good", url: "https://good.example/a b", snippet: "s" },
      { title: "Bad", url: "javascript:alert(1)", snippet: "s" },
    ],
    { withAd: true },
  );
  assert.deepEqual(parseDuckDuckGoHtml(html), [{ title: "Good", url: "https://good.example/a%20b", snippet: "s" }]);
  assert.equal(
    htmlFragmentToText("a <strong>b</strong> &amp; c &#x27;d&#39; &#0; &bogus;"),
    "a b & c 'd' &#0; &bogus;",
  );
});
