import { test } from "node:test";
import assert from "node:assert/strict";
import { detectIntent, presetRules, resolveRules } from "../../src/request/intents/detect.js";
import { DEFAULT_PRESET_RULES } from "../../src/request/intents/preset.js";
import {
  DEFAULT_INTENTS_CONFIG,
  intentsConfigSchema,
  mergeIntentsInput,
  parseIntentsConfig,
} from "../../src/request/intents/schema.js";

test("defaults: enabled, default preset, DuckDuckGo, guarded fetch, cache, 3000-char budget", () => {
  const c = parseIntentsConfig(undefined);
  assert.deepEqual(c, DEFAULT_INTENTS_CONFIG);
  assert.equal(c.enabled, true);
  assert.equal(c.preset, "default");
  assert.deepEqual(c.rules, []);
  assert.deepEqual(c.disableRules, []);
  assert.equal(c.search.provider, "duckduckgo");
  assert.equal(c.search.baseUrl, undefined);
  assert.equal(c.search.maxResults, 6);
  assert.equal(c.search.timeoutMs, 8000);
  assert.deepEqual(c.news, { sites: [], fallbackToGeneral: true });
  assert.deepEqual(c.fetch, {
    timeoutMs: 10000,
    maxBytes: 2 * 1024 * 1024,
    maxRedirects: 5,
    allowPrivateAddresses: false,
    allowHosts: [],
    format: "markdown",
  });
  assert.equal(c.cacheTtlSeconds, 300);
  assert.equal(c.cacheMaxEntries, 200);
  assert.equal(c.maxToolResultChars, 3000);
  // Parsing the parsed output again changes nothing.
  assert.deepEqual(parseIntentsConfig(c), c);
});

test("the preset is data: every rule validates, and the Estonian sites live in the rule", () => {
  assert.equal(presetRules().length, DEFAULT_PRESET_RULES.length);
  const ids = presetRules().map((r) => r.id);
  assert.deepEqual(ids, ["news-estonia", "web-fetch-url", "web-search"]);
  const news = presetRules().find((r) => r.id === "news-estonia")!;
  assert.deepEqual(news.sites, ["err.ee", "postimees.ee", "delfi.ee"]);
});

test("resolveRules: user rules first, same id replaces, disableRules, preset none, enabled false", () => {
  const mine = { id: "mine", kind: "web_search" as const, triggers: ["otsi"] };
  let rules = resolveRules(parseIntentsConfig({ rules: [mine] }));
  assert.deepEqual(
    rules.map((r) => r.id),
    ["mine", "news-estonia", "web-fetch-url", "web-search"],
  );

  rules = resolveRules(parseIntentsConfig({ rules: [{ id: "web-search", kind: "web_search", triggers: ["hae"] }] }));
  assert.deepEqual(
    rules.map((r) => r.id),
    ["web-search", "news-estonia", "web-fetch-url"],
  );
  assert.equal(detectIntent("search for cats", rules), null);
  assert.equal(detectIntent("hae kissat", rules)?.kind, "web_search");

  rules = resolveRules(parseIntentsConfig({ disableRules: ["news-estonia"] }));
  assert.deepEqual(
    rules.map((r) => r.id),
    ["web-fetch-url", "web-search"],
  );
  assert.equal(detectIntent("Eesti uudised", rules), null);

  // Turning one preset rule off by redefining it with enabled: false.
  rules = resolveRules(parseIntentsConfig({ rules: [{ id: "web-fetch-url", kind: "web_fetch", enabled: false }] }));
  assert.deepEqual(
    rules.map((r) => r.id),
    ["news-estonia", "web-search"],
  );

  rules = resolveRules(parseIntentsConfig({ preset: "none", rules: [mine] }));
  assert.deepEqual(
    rules.map((r) => r.id),
    ["mine"],
  );

  assert.deepEqual(resolveRules(parseIntentsConfig({ enabled: false, rules: [mine] })), []);
});

test("validation: bad regex, rule without matchers, unknown keys, provider requirements", () => {
  const errs = (input: unknown) => {
    const r = intentsConfigSchema.safeParse(input);
    assert.equal(r.success, false, JSON.stringify(input));
    return r.error!.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("\n");
  };
  assert.match(
    errs({ rules: [{ id: "x", kind: "web_search", patterns: ["(unclosed"] }] }),
    /rules\.0\.patterns\.0: invalid regular expression/,
  );
  assert.match(errs({ rules: [{ id: "x", kind: "web_search" }] }), /needs triggers, patterns or all/);
  assert.match(errs({ rules: [{ id: "x", kind: "news", all: [[]] }] }), /rules\.0\.all\.0/);
  assert.match(errs({ rules: [{ id: "bad id", kind: "web_fetch" }] }), /rule ids/);
  assert.match(errs({ serch: {} }), /serch|Unrecognized/i);
  assert.match(errs({ search: { provider: "searxng" } }), /search\.baseUrl: the searxng provider needs baseUrl/);
  assert.match(errs({ search: { provider: "brave" } }), /search\.apiKey: the brave provider needs apiKey or apiKeyEnv/);
  assert.match(errs({ search: { baseUrl: "ftp://x.example/" } }), /search\.baseUrl/);
  assert.match(errs({ maxToolResultChars: 50 }), /maxToolResultChars/);
  // A web_fetch rule needs no matcher (the URL is its trigger).
  assert.equal(intentsConfigSchema.safeParse({ rules: [{ id: "u", kind: "web_fetch" }] }).success, true);
  assert.equal(intentsConfigSchema.safeParse({ search: { provider: "brave", apiKeyEnv: "BRAVE_KEY" } }).success, true);
});

test("mergeIntentsInput: per-model section merges over the global one", () => {
  const merged = mergeIntentsInput(
    {
      search: { provider: "searxng", baseUrl: "http://127.0.0.1:8888" },
      fetch: { timeoutMs: 5000 },
      rules: [{ id: "a", kind: "web_fetch" }],
    },
    { fetch: { allowPrivateAddresses: true }, rules: [{ id: "b", kind: "web_fetch" }], maxToolResultChars: 1500 },
  );
  const c = parseIntentsConfig(merged);
  assert.equal(c.search.provider, "searxng");
  assert.equal(c.fetch.timeoutMs, 5000);
  assert.equal(c.fetch.allowPrivateAddresses, true);
  assert.deepEqual(
    c.rules.map((r) => r.id),
    ["b"],
  ); // arrays are replaced, not concatenated
  assert.equal(c.maxToolResultChars, 1500);
  assert.deepEqual(mergeIntentsInput(undefined, undefined), {});
});
