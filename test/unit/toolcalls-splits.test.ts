/**
 * Streamed = whole (issue 31 item 5): whatever the extractor finds in a whole answer it finds in the
 * same answer streamed, however it is split. For EVERY corpus fixture: the whole answer gives the
 * expected content and calls (names, arguments as JSON, order), and so does the answer streamed in
 * 1- and 3-character pieces, in two pieces at split points (a stride that rotates with the fixture,
 * so fixtures of one format cover each other's offsets), and in three pieces at sampled pairs. The
 * issue's five shapes (toolcalls-corpus-shapes.ts) are split at EVERY point. The sample cases get
 * every split point in toolcalls-extract.test.ts.
 *
 * `CLAWBRIDGE_TOOLCALLS_EVERY_SPLIT=1` splits every fixture at every point (about 920,000 two-piece
 * streams: ~20 s of CPU), for a full check after changing the extractor.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ToolCallExtractor, type ExtractorOptions } from "../../src/backends/openai/toolcalls/extract.js";
import { CORPUS, TOOLS, type CorpusCase } from "./toolcalls-corpus.js";
import { SHAPE_CASES } from "./toolcalls-corpus-shapes.js";

const EVERY = process.env.CLAWBRIDGE_TOOLCALLS_EVERY_SPLIT === "1";
/** Two-piece split points of a fixture: every STRIDE-th, from an offset that rotates per fixture. */
const STRIDE = EVERY ? 1 : 31;
/** Three-piece splits per fixture (random pairs). */
const PAIRS = 1;

interface Outcome {
  content: string;
  calls: { name: string; args: unknown }[];
}

function optsOf(c: CorpusCase): ExtractorOptions {
  return { tools: c.tools ?? TOOLS, stripSpecialTokens: c.stripSpecialTokens === true };
}

/** The pieces through one extractor; arguments parsed (key order kept: deepEqual on the parse). */
function run(pieces: readonly string[], opts: ExtractorOptions): Outcome {
  const x = new ToolCallExtractor(opts);
  let content = "";
  const calls: { name: string; args: unknown }[] = [];
  const take = (evs: ReturnType<ToolCallExtractor["push"]>): void => {
    for (const e of evs) {
      if (e.type === "text") content += e.text;
      else calls.push({ name: e.call.name, args: JSON.parse(e.call.arguments) as unknown });
    }
  };
  for (const p of pieces) take(x.push(p));
  take(x.end());
  return { content, calls };
}

function chunks(s: string, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
}

/** Deterministic PRNG (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const same = (a: Outcome, b: Outcome): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * Checks one fixture; returns the failures (at most a few) and counts the streams checked.
 * `stride` 1: every split point.
 */
function check(c: CorpusCase, index: number, stride: number, pairs: number, count: { streams: number }): string[] {
  const opts = optsOf(c);
  const input = c.input;
  const whole = run([input], opts);
  const expected: Outcome = { content: c.content, calls: c.calls.map((k) => ({ name: k.name, args: k.args })) };
  const fails: string[] = [];
  const show = (o: Outcome): string => JSON.stringify(o);
  if (!same(whole, expected)) fails.push(`${c.name}: whole ${show(whole)} != expected ${show(expected)}`);
  const tryPieces = (pieces: string[], label: string): void => {
    count.streams++;
    if (fails.length >= 3) return;
    const s = run(pieces, opts);
    if (!same(s, whole)) fails.push(`${c.name}: ${label}: streamed ${show(s)} != whole ${show(whole)}`);
  };
  tryPieces(chunks(input, 1), "1-char pieces");
  tryPieces(chunks(input, 3), "3-char pieces");
  for (let p = stride === 1 ? 0 : index % stride; p <= input.length; p += stride) {
    tryPieces([input.slice(0, p), input.slice(p)], `split at ${p}`);
  }
  const rand = rng(index + 7);
  for (let k = 0; k < pairs; k++) {
    const a = Math.floor(rand() * (input.length + 1));
    const b = a + Math.floor(rand() * (input.length + 1 - a));
    tryPieces([input.slice(0, a), input.slice(a, b), input.slice(b)], `split at ${a},${b}`);
  }
  return fails;
}

describe("streamed = whole for every fixture (issue 31 item 5)", () => {
  const kinds = [...new Set(CORPUS.map((c) => c.kind))];
  for (const kind of kinds) {
    const cases = CORPUS.map((c, i) => [c, i] as const).filter(([c]) => c.kind === kind);
    it(`${kind} (${cases.length} fixtures): expected whole, and streamed = whole`, () => {
      const count = { streams: 0 };
      const fails = cases.flatMap(([c, i]) => check(c, i, STRIDE, PAIRS, count));
      assert.equal(fails.length, 0, fails.slice(0, 5).join("\n"));
      assert.ok(count.streams >= cases.length * 3);
    });
  }
});

describe("the five shapes of issue 31: every split point", () => {
  it("each shape is a kind of its own with calls and a negative", () => {
    const kinds = new Set(SHAPE_CASES.map((c) => c.kind));
    assert.equal(kinds.size, 5);
    for (const k of kinds) {
      const own = SHAPE_CASES.filter((c) => c.kind === k);
      assert.ok(
        own.some((c) => c.calls.length > 0),
        `${k} has calls`,
      );
      assert.ok(
        own.some((c) => c.calls.length === 0),
        `${k} has a negative`,
      );
    }
    for (const c of SHAPE_CASES) assert.ok(CORPUS.includes(c), `${c.name} is in the corpus`);
  });

  for (const [i, c] of SHAPE_CASES.entries()) {
    it(c.name, () => {
      const count = { streams: 0 };
      const fails = check(c, i, 1, 60, count);
      assert.equal(fails.length, 0, fails.join("\n"));
      assert.ok(count.streams >= c.input.length + 1);
    });
  }
});
