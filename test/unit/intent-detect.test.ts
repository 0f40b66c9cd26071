import { test } from "node:test";
import assert from "node:assert/strict";
import { detectIntent, extractUrls, normalizeMessage, resolveRules } from "../../src/request/intents/detect.js";
import { intentRuleSchema, parseIntentsConfig, type IntentRuleInput } from "../../src/request/intents/schema.js";

const preset = resolveRules(parseIntentsConfig({}));

type Expect = null | { kind: "web_search" | "news"; query: string; rule?: string } | { kind: "web_fetch"; url: string };

function check(message: string, expected: Expect, rules = preset): void {
  const got = detectIntent(message, rules);
  if (expected === null) {
    assert.equal(
      got,
      null,
      `expected no intent for ${JSON.stringify(message)}, got ${JSON.stringify(got && { ...got, rule: undefined })}`,
    );
    return;
  }
  assert.ok(got, `expected ${expected.kind} for ${JSON.stringify(message)}`);
  assert.equal(got.kind, expected.kind, JSON.stringify(message));
  if (expected.kind === "web_fetch") {
    assert.equal(got.kind === "web_fetch" && got.url, expected.url);
  } else {
    assert.equal("query" in got ? got.query : undefined, expected.query, JSON.stringify(message));
    if (expected.rule) assert.equal(got.ruleId, expected.rule);
  }
}

const PRESET_CASES: Array<[string, Expect]> = [
  // web search: imperative at the start of a sentence, trigger words stripped
  ["search for best AI tools 2026", { kind: "web_search", query: "best AI tools 2026", rule: "web-search" }],
  ["Search the web for rust async runtimes", { kind: "web_search", query: "rust async runtimes" }],
  ["search best pizza in Tartu", { kind: "web_search", query: "best pizza in Tartu" }],
  ["look up the population of Tartu", { kind: "web_search", query: "the population of Tartu" }],
  ["Can you google the capital of Peru for me?", { kind: "web_search", query: "the capital of Peru" }],
  ["Please research quantum error correction.", { kind: "web_search", query: "quantum error correction" }],
  ["Hey, find me a cheap flight to Riga", { kind: "web_search", query: "a cheap flight to Riga" }],
  ["Find out who won the 2026 World Cup", { kind: "web_search", query: "who won the 2026 World Cup" }],
  [
    "Could you please look up the weather in Tallinn tomorrow?",
    { kind: "web_search", query: "the weather in Tallinn tomorrow" },
  ],
  ['Thanks! Now search for "rust async book" please.', { kind: "web_search", query: "rust async book" }],
  ["Search: node 22 release notes", { kind: "web_search", query: "node 22 release notes" }],
  ["SEARCH FOR NODE 22 RELEASE", { kind: "web_search", query: "NODE 22 RELEASE" }],
  [
    "I read about it yesterday. Search for the original paper please",
    { kind: "web_search", query: "the original paper" },
  ],
  ["[Sat 2026-11-21 09:13 UTC] look up weather in Tallinn", { kind: "web_search", query: "weather in Tallinn" }],
  ["find information about the Baltic Way", { kind: "web_search", query: "the Baltic Way" }],
  // news: "estonia"/"eesti" AND a news word, anywhere; site-restricted by the rule's data
  ["Tell me Estonian news for today", { kind: "news", query: "Estonian news for today", rule: "news-estonia" }],
  ["Mis on täna Eesti uudised?", { kind: "news", query: "täna Eesti uudised" }],
  ["eesti uudised", { kind: "news", query: "eesti uudised" }],
  ["What's the latest news from Estonia?", { kind: "news", query: "the latest news from Estonia" }],
  ["search for Estonia news today", { kind: "news", query: "Estonia news today" }],
  ["Anything happening in Eestis today?", { kind: "news", query: "Anything happening in Eestis today" }],
  // URL → fetch (first URL, trailing punctuation removed, fetch wins over search)
  ["summarize https://example.com/a/b?x=1.", { kind: "web_fetch", url: "https://example.com/a/b?x=1" }],
  ["what's on (https://example.com/page)?", { kind: "web_fetch", url: "https://example.com/page" }],
  ["see [docs](https://x.com/wiki/Foo_(bar))", { kind: "web_fetch", url: "https://x.com/wiki/Foo_(bar)" }],
  ["check www.example.org/news please", { kind: "web_fetch", url: "https://www.example.org/news" }],
  ["look up https://example.com/x and tell me more", { kind: "web_fetch", url: "https://example.com/x" }],
  ["is http://[::1]:8080/x up?", { kind: "web_fetch", url: "http://[::1]:8080/x" }],
  ["read https://a.example/1 then https://b.example/2", { kind: "web_fetch", url: "https://a.example/1" }],
  // negatives: no imperative, the user's own things, non-web work, mentions
  ["I can't find my keys", null],
  ["Can you find my keys?", null],
  ["Find my phone charger", null],
  ["I will research this later", null],
  ["Research shows that sleep matters", null],
  ["Search is broken on my phone", null],
  ["Google's new phone looks nice", null],
  ["google it", null],
  ["find the bug in this code", null],
  ["Search this repo for TODO comments", null],
  ["Where did I put my search history?", null],
  ["The findings were surprising", null],
  ["what is 9 * 9", null],
  ["I live in Estonia", null],
  ["Estonian history is long", null],
  ["search", null],
  ["", null],
  ["   ", null],
  ["ftp://example.com/file", null],
  // text in code or quotes is material, not a request
  ["```\nsearch for foo\n```\nwhat does this snippet do?", null],
  ["What does `curl https://example.com` print?", null],
  ["> search for foo\nwhy would someone write that?", null],
  ["<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nsee https://internal.example/x\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>", null],
  [
    "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nctx\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>\nsearch for real question",
    { kind: "web_search", query: "real question" },
  ],
];

for (const [message, expected] of PRESET_CASES) {
  test(`preset: ${JSON.stringify(message)} → ${expected ? expected.kind : "none"}`, () => check(message, expected));
}

test("preset: a long message (pasted document) never triggers a search", () => {
  const long = `Search for the meaning of this text. ${"Lorem ipsum dolor sit amet. ".repeat(60)}`;
  assert.ok(long.length > 1000);
  check(long, null);
});

test("preset: the extracted query is capped at a word boundary", () => {
  const got = detectIntent(`search for ${"word ".repeat(80)}end`, preset);
  assert.ok(got && got.kind === "web_search");
  assert.ok(got.query.length <= 200);
  assert.match(got.query, /^(word )+word$/);
});

// --- custom rules in other languages -------------------------------------------------------

const rule = (r: IntentRuleInput) => intentRuleSchema.parse(r);

const GERMAN = [
  rule({
    id: "de-suche-verb-end",
    kind: "web_search",
    // German puts the verb last: "Kannst du bitte nach dem Wetter in Berlin suchen?"
    patterns: ["^(?:kannst du |könntest du )?(?:bitte )?(?:im internet )?nach (?<query>.+?) (?:suchen|googeln)\\b"],
  }),
  rule({
    id: "de-suche",
    kind: "web_search",
    triggers: ["suche", "such", "suche nach", "such mal nach", "recherchiere", "google"],
    lead: ["bitte", "hey", "kannst du", "könntest du"],
    fillers: ["nach", "bitte", "im internet", "über", "mal"],
    exclude: ["^(?:mein|meine|meinen|meinem|meiner)\\b"],
  }),
];

const SPANISH = [
  rule({
    id: "es-busca",
    kind: "web_search",
    triggers: ["busca", "buscar", "búscame", "investiga", "googlea"],
    lead: ["por favor", "oye", "puedes", "podrías"],
    fillers: ["en internet", "en la web", "sobre", "información sobre", "por favor"],
    exclude: ["^(?:mis?|tus?)\\b"],
  }),
];

const ESTONIAN = [
  rule({
    id: "et-otsi",
    kind: "web_search",
    triggers: ["otsi", "leia", "guugelda"],
    lead: ["palun", "kas sa saaksid", "kas saad"],
    fillers: ["palun", "internetist", "kohta", "infot"],
    exclude: ["^(?:mu|minu|oma)\\b"],
  }),
  rule({
    id: "et-ilm",
    kind: "web_search",
    all: [
      ["ilm*", "weather"],
      ["homme", "tomorrow"],
    ],
    query: "ilmateade homme",
  }),
];

const CUSTOM_CASES: Array<[string, Expect, ReturnType<typeof rule>[]]> = [
  [
    "Kannst du bitte nach dem Wetter in Berlin suchen?",
    { kind: "web_search", query: "dem Wetter in Berlin", rule: "de-suche-verb-end" },
    GERMAN,
  ],
  [
    "Suche nach den besten Restaurants in München",
    { kind: "web_search", query: "den besten Restaurants in München", rule: "de-suche" },
    GERMAN,
  ],
  ["Such mal nach Bundesliga Ergebnissen", { kind: "web_search", query: "Bundesliga Ergebnissen" }, GERMAN],
  ["Bitte recherchiere die Geschichte von Lübeck.", { kind: "web_search", query: "die Geschichte von Lübeck" }, GERMAN],
  ["Ich suche meine Schlüssel", null, GERMAN],
  ["Suche meine Brille", null, GERMAN],
  [
    "Busca los mejores restaurantes en Madrid",
    { kind: "web_search", query: "los mejores restaurantes en Madrid" },
    SPANISH,
  ],
  ["¿Puedes buscar el clima en Barcelona?", { kind: "web_search", query: "el clima en Barcelona" }, SPANISH],
  [
    "Por favor, búscame información sobre la inflación en España",
    { kind: "web_search", query: "la inflación en España" },
    SPANISH,
  ],
  ["No encuentro mis llaves", null, SPANISH],
  ["Busca mis llaves", null, SPANISH],
  [
    "Otsi internetist parimad restoranid Tallinnas",
    { kind: "web_search", query: "parimad restoranid Tallinnas" },
    ESTONIAN,
  ],
  ["Palun leia infot Tartu ülikooli kohta", { kind: "web_search", query: "Tartu ülikooli" }, ESTONIAN],
  ["Ma ei leia oma võtmeid", null, ESTONIAN],
  ["Milline on ilm homme?", { kind: "web_search", query: "ilmateade homme", rule: "et-ilm" }, ESTONIAN],
  ["Milline ilm täna on?", null, ESTONIAN], // only one of the two AND-groups matches
];

for (const [message, expected, rules] of CUSTOM_CASES) {
  test(`custom rules: ${JSON.stringify(message)} → ${expected ? expected.kind : "none"}`, () =>
    check(message, expected, rules));
}

// --- rule semantics -------------------------------------------------------------------------

test("anchor: start only looks at the first sentence, sentence at every sentence, anywhere inside", () => {
  const base = { id: "s", kind: "web_search" as const, triggers: ["search"], fillers: ["for"] };
  const msg = "Thanks a lot. search for cheap flights";
  check(msg, null, [rule({ ...base, anchor: "start" })]);
  check(msg, { kind: "web_search", query: "cheap flights" }, [rule({ ...base, anchor: "sentence" })]);
  const inside = "I want you to search for cheap flights";
  check(inside, null, [rule({ ...base, anchor: "sentence" })]);
  check(inside, { kind: "web_search", query: "cheap flights" }, [rule({ ...base, anchor: "anywhere" })]);
});

test("all: every group needs one keyword (AND of OR-groups); prefix keywords end with *", () => {
  const r = [
    rule({
      id: "n",
      kind: "news",
      all: [
        ["latvia*", "latvij*"],
        ["news", "ziņas"],
      ],
      sites: ["lsm.lv"],
    }),
  ];
  check("Latvian news please", { kind: "news", query: "Latvian news please" }, r);
  check("Latvijas ziņas", { kind: "news", query: "Latvijas ziņas" }, r);
  check("Latvia is nice", null, r);
  check("news about Lithuania", null, r);
  // A keyword without * matches whole words only.
  check("newsletter from Latvia", null, r);
});

test("triggers + all: both must hold", () => {
  const r = [rule({ id: "x", kind: "web_search", triggers: ["find"], all: [["flight", "flights"]] })];
  check("find flights to Oslo", { kind: "web_search", query: "flights to Oslo" }, r);
  check("find hotels in Oslo", null, r);
});

test("patterns: named group, first group, or the sentence when there is no group", () => {
  check("weather: Tartu", { kind: "web_search", query: "Tartu" }, [
    rule({ id: "a", kind: "web_search", patterns: ["^weather:\\s*(?<query>.+)$"] }),
  ]);
  check("wetter in Graz", { kind: "web_search", query: "Graz" }, [
    rule({ id: "b", kind: "web_search", patterns: ["^wetter in (\\S+)"] }),
  ]);
  check("Stock price of ACME?", { kind: "web_search", query: "Stock price of ACME" }, [
    rule({ id: "c", kind: "web_search", patterns: ["\\bstock price\\b"] }),
  ]);
});

test("exclude and excludeMessage cancel a rule; rule.query replaces the extracted query", () => {
  const base = { id: "e", kind: "web_search" as const, triggers: ["search"], fillers: ["for"] };
  check("search for cats", null, [rule({ ...base, exclude: ["^cats$"] })]);
  check("search for cats", null, [rule({ ...base, excludeMessage: ["\\bcats\\b"] })]);
  check("search for cats", { kind: "web_search", query: "dogs" }, [rule({ ...base, query: "dogs" })]);
});

test("web_fetch rules can require trigger words besides the URL", () => {
  const r = [rule({ id: "f", kind: "web_fetch", triggers: ["summarize", "summarise", "tl;dr"], anchor: "anywhere" })];
  check("please summarize https://example.com/a", { kind: "web_fetch", url: "https://example.com/a" }, r);
  check("https://example.com/a is my site", null, r);
  check("summarize this for me", null, r);
});

test("rules are tried in order: the first match wins; disabled rules never match", () => {
  const a = rule({ id: "a", kind: "web_search", triggers: ["search"], query: "from-a" });
  const b = rule({ id: "b", kind: "news", triggers: ["search"], query: "from-b" });
  check("search anything", { kind: "web_search", query: "from-a", rule: "a" }, [a, b]);
  check("search anything", { kind: "news", query: "from-b", rule: "b" }, [b, a]);
  check("search anything", { kind: "news", query: "from-b", rule: "b" }, [{ ...a, enabled: false }, b]);
});

test("detectIntent never throws on odd input", () => {
  const odd = [
    "\u0000\u0001",
    "🙂".repeat(500),
    "[".repeat(1000),
    "http://",
    "https://[::1",
    "www.",
    "search ".repeat(300),
  ];
  for (const m of odd) assert.doesNotThrow(() => detectIntent(m, preset));
});

test("normalizeMessage drops timestamps, code and quotes; extractUrls finds http(s) only", () => {
  assert.equal(normalizeMessage("[Sat 2026-11-21 09:13 UTC] hello   world"), "hello world");
  assert.equal(normalizeMessage("a\n```js\nx()\n```\nb"), "a\nb");
  assert.deepEqual(extractUrls("x https://a.example/p, y http://b.example. z ftp://c.example mailto:d@e.example"), [
    "https://a.example/p",
    "http://b.example/",
  ]);
  assert.deepEqual(extractUrls("dup https://a.example/ and https://a.example/"), ["https://a.example/"]);
});
