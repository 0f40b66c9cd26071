import { test } from "node:test";
import assert from "node:assert/strict";
import {
  ELLIPSIS,
  formatPageBlock,
  formatSearchBlock,
  pageHeader,
  rankResults,
  searchHeader,
  trimDocument,
  trimToWords,
} from "../../src/request/web-tools/format.js";
import type { SearchResult } from "../../src/request/web-tools/search.js";

const WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu";

/** Every word of `trimmed` (minus the ellipsis) is a whole word of `source`, in order. */
function assertWholeWords(trimmed: string, source: string): void {
  const kept = trimmed.replace(new RegExp(`${ELLIPSIS}$`), "").trim();
  if (!kept) return;
  assert.ok(source.startsWith(kept), `"${kept}" is not a prefix of the source`);
  const next = source[kept.length];
  assert.ok(next === undefined || /\s/.test(next), `cut mid-word after "${kept}"`);
}

test("trimToWords never cuts a word and never exceeds the limit", () => {
  for (let max = 0; max <= WORDS.length + 2; max++) {
    const t = trimToWords(WORDS, max);
    assert.ok(t.length <= max, `max ${max}: "${t}" (${t.length})`);
    assertWholeWords(t, WORDS);
    if (t && t !== WORDS) assert.ok(t.endsWith(ELLIPSIS));
  }
  assert.equal(trimToWords(WORDS, 100), WORDS);
  assert.equal(trimToWords("alpha beta", 6), `alpha${ELLIPSIS}`);
  assert.equal(trimToWords("supercalifragilistic", 10), ""); // one long word: nothing rather than half
  assert.equal(trimToWords("one, two, three", 9), `one${ELLIPSIS}`); // no dangling comma
});

test("trimDocument prefers paragraph, then sentence, then word boundaries", () => {
  const doc = `${"First paragraph sentence one. ".repeat(5).trim()}\n\n${"Second paragraph words. ".repeat(5).trim()}`;
  const para = trimDocument(doc, 200);
  assert.equal(para.truncated, true);
  assert.ok(para.text.length <= 200);
  assert.ok(para.text.startsWith("First paragraph") && !para.text.includes("Second"));

  const sentences = "One two three four. Five six seven eight. Nine ten eleven twelve thirteen fourteen.";
  const s = trimDocument(sentences, 60);
  assert.ok(s.text.length <= 60);
  assert.match(s.text, /eight\. …$/);

  const words = "word ".repeat(50).trim();
  const w = trimDocument(words, 33);
  assert.ok(w.text.length <= 33);
  assertWholeWords(w.text, words);

  assert.deepEqual(trimDocument("short", 100), { text: "short", truncated: false });
});

const results: SearchResult[] = [
  { title: "Generic page", url: "https://a.example/1", snippet: "nothing relevant here" },
  { title: "Tallinn weather forecast", url: "https://b.example/w", snippet: "Weather in Tallinn tomorrow: rain" },
  { title: "Duplicate of b", url: "https://www.b.example/w/#top", snippet: "same page again" },
  { title: "", url: "https://c.example/", snippet: "no title" },
  { title: "Other", url: "https://d.example/", snippet: "misc" },
];

test("rankResults: de-duplicates, drops untitled results, provider order plus query-term coverage", () => {
  const ranked = rankResults(results, "Tallinn weather", 10);
  assert.deepEqual(
    ranked.map((r) => r.url),
    ["https://b.example/w", "https://a.example/1", "https://d.example/"],
  );
  assert.equal(rankResults(results, "Tallinn weather", 2).length, 2);
  assert.deepEqual(rankResults([], "x", 5), []);
  // Without matching terms the provider's order is kept.
  assert.deepEqual(
    rankResults(results, "zzz", 10).map((r) => r.url),
    ["https://a.example/1", "https://b.example/w", "https://d.example/"],
  );
});

function manyResults(n: number, snippetWords: number): SearchResult[] {
  return Array.from({ length: n }, (_, i) => ({
    title: `Result title number ${i + 1}`,
    url: `https://r${i + 1}.example/page`,
    snippet: Array.from({ length: snippetWords }, (_, j) => `w${i + 1}x${j}`).join(" "),
  }));
}

test("formatSearchBlock: fits the budget, keeps titles/URLs whole, trims snippets at words", () => {
  const header = searchHeader({ fetchedAt: new Date("2026-11-21T09:13:00Z"), query: "test query" });
  assert.match(header, /^LIVE WEB SEARCH RESULTS \(fetched 2026-11-21T09:13:00\.000Z\) for "test query":\n/);
  const input = manyResults(6, 80);
  for (const max of [400, 700, 1000, 1500, 3000, 8000]) {
    const block = formatSearchBlock(header, input, max);
    assert.ok(block, `max ${max}`);
    assert.ok(block.length <= max, `max ${max}: got ${block.length}`);
    assert.ok(block.startsWith(header));
    // Titles and URLs of included results are whole; results are numbered in rank order.
    const numbered = [...block.matchAll(/^(\d+)\. (.*)\n {3}(https:\/\/\S+)$/gm)];
    assert.ok(numbered.length >= 1);
    numbered.forEach((m, i) => {
      assert.equal(Number(m[1]), i + 1);
      assert.equal(m[2], input[i]!.title);
      assert.equal(m[3], input[i]!.url);
    });
    // Each snippet line is a whole-word prefix of its source snippet.
    const snippetLines = block.split("\n").filter((l) => /^ {3}w\d/.test(l));
    for (const line of snippetLines) {
      const text = line.trim();
      const idx = Number(/^w(\d+)x/.exec(text)![1]) - 1;
      assertWholeWords(text, input[idx]!.snippet);
    }
  }
  // More room → more (or equal) results, never fewer.
  const count = (max: number) => (formatSearchBlock(header, input, max)!.match(/^\d+\. /gm) ?? []).length;
  assert.ok(count(700) <= count(1500) && count(1500) <= count(3000));
  assert.equal(count(8000), 6);
  // Short snippets leave their share to long ones.
  const mixed = [
    { title: "A", url: "https://a.example/", snippet: "tiny" },
    { title: "B", url: "https://b.example/", snippet: "long ".repeat(200).trim() },
  ];
  const block = formatSearchBlock(header, mixed, header.length + 600)!;
  assert.ok(block.includes("   tiny"));
  const bLine = block.split("\n").find((l) => l.startsWith("   long"))!;
  assert.ok(bLine.length > 400, `long snippet got ${bLine.length}`);
});

test("formatSearchBlock returns null when not even one result fits", () => {
  const header = "H".repeat(190);
  assert.equal(formatSearchBlock(header, manyResults(3, 10), 200), null);
});

test("formatPageBlock: header, title, trimmed content within the budget", () => {
  const header = pageHeader({ fetchedAt: new Date("2026-11-21T09:13:00Z"), url: "https://e.example/a" });
  assert.match(header, /^LIVE WEB DATA from https:\/\/e\.example\/a \(fetched 2026-11-21T09:13:00\.000Z\):\n/);
  const page = {
    url: "https://e.example/a",
    finalUrl: "https://e.example/b",
    contentType: "text/html",
    title: "A title",
    byline: "By Jaan Tamm",
    content: Array.from({ length: 40 }, (_, i) => `Paragraph ${i} has several words in it.`).join("\n\n"),
    truncated: true,
    bytes: 1234,
  };
  const block = formatPageBlock(header, page, 800)!;
  assert.ok(block.length <= 800);
  assert.match(block, /\(redirected to https:\/\/e\.example\/b\)/);
  assert.match(block, /Title: A title\nBy: Jaan Tamm/);
  assert.match(block, /only the first 1234 bytes/);
  assert.match(block, /Paragraph 0 has several words in it\./);
  assert.ok(block.endsWith("…"));
  assert.equal(formatPageBlock(header, page, header.length + 10), null);
});
