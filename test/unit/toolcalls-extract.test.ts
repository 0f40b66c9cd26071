import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  extractToolCalls,
  MAX_HELD,
  SpecialTokenStripper,
  stripSpecialTokens,
  ToolCallExtractor,
  type ExtractEvent,
  type ExtractorOptions,
} from "../../src/backends/openai/toolcalls/extract.js";
import { CORPUS, TOOLS, type CorpusCase } from "./toolcalls-corpus.js";

const ID_RE = /^[A-Za-z0-9]+$/;

function optsOf(c: CorpusCase): ExtractorOptions {
  return { tools: c.tools ?? TOOLS, stripSpecialTokens: c.stripSpecialTokens === true };
}

interface Result {
  content: string;
  calls: { name: string; arguments: string }[];
}

function collect(events: ExtractEvent[]): Result {
  let content = "";
  const calls: { name: string; arguments: string }[] = [];
  for (const e of events) {
    if (e.type === "text") {
      assert.ok(e.text.length > 0, "no empty text events");
      content += e.text;
    } else {
      assert.match(e.call.id, ID_RE);
      calls.push({ name: e.call.name, arguments: e.call.arguments });
    }
  }
  return { content, calls };
}

function stream(pieces: readonly string[], opts: ExtractorOptions): Result {
  const x = new ToolCallExtractor(opts);
  const events: ExtractEvent[] = [];
  for (const p of pieces) events.push(...x.push(p));
  events.push(...x.end());
  return collect(events);
}

function whole(text: string, opts: ExtractorOptions): Result {
  const r = extractToolCalls(text, opts);
  for (const c of r.calls) assert.match(c.id, ID_RE);
  return { content: r.content, calls: r.calls.map((c) => ({ name: c.name, arguments: c.arguments })) };
}

/** Deterministic PRNG (mulberry32) so failures reproduce. */
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

function randomPieces(text: string, rand: () => number): string[] {
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    const n = 1 + Math.floor(rand() * 12);
    out.push(text.slice(i, i + n));
    i += n;
  }
  return out;
}

function checkCase(c: CorpusCase, index: number): string | null {
  const opts = optsOf(c);
  const r = whole(c.input, opts);
  try {
    assert.equal(r.content, c.content, "content");
    assert.deepEqual(
      r.calls.map((k) => k.name),
      c.calls.map((k) => k.name),
      "call names",
    );
    r.calls.forEach((k, i) => assert.deepEqual(JSON.parse(k.arguments), c.calls[i]!.args, `arguments of call ${i}`));
    // Streaming in random pieces gives the same result.
    const s = stream(randomPieces(c.input, rng(index + 1)), opts);
    assert.deepEqual(s, r, "random-split streaming = whole text");
  } catch (e) {
    return `${c.name}: ${(e as Error).message}\n  input=${JSON.stringify(c.input)}\n  got content=${JSON.stringify(r.content)} calls=${JSON.stringify(r.calls)}`;
  }
  return null;
}

describe("tool-call corpus", () => {
  it("has hundreds of cases", () => {
    assert.ok(CORPUS.length >= 300, `corpus size ${CORPUS.length}`);
    assert.ok(CORPUS.filter((c) => c.calls.length === 0).length >= 100, "many negative cases");
  });

  const kinds = [...new Set(CORPUS.map((c) => c.kind))];
  for (const kind of kinds) {
    const cases = CORPUS.map((c, i) => [c, i] as const).filter(([c]) => c.kind === kind);
    it(`${kind} (${cases.length} cases): content and calls`, () => {
      const failures = cases.map(([c, i]) => checkCase(c, i)).filter((f): f is string => f !== null);
      assert.equal(failures.length, 0, failures.slice(0, 5).join("\n"));
    });
  }
});

describe("streaming equals whole text for every split", () => {
  const sample = CORPUS.filter((c) => c.sample);

  it("the sample covers every format and the negative kinds", () => {
    assert.ok(sample.length >= 30, `sample size ${sample.length}`);
    const kinds = new Set(sample.map((c) => c.kind));
    for (const k of new Set(CORPUS.map((c) => c.kind))) {
      if (k === "neg-no-tools" || k === "neg-partly-offered") continue; // covered below / trivially
      assert.ok(kinds.has(k), `sample covers ${k}`);
    }
  });

  for (const c of sample) {
    it(c.name, () => {
      const opts = optsOf(c);
      const ref = whole(c.input, opts);
      for (let p = 0; p <= c.input.length; p++) {
        const s = stream([c.input.slice(0, p), c.input.slice(p)], opts);
        assert.deepEqual(s, ref, `split at ${p}`);
      }
      assert.deepEqual(stream([...c.input.split("")], opts), ref, "1-char pieces");
      // Three pieces, every pair of positions for short inputs, random pairs otherwise.
      const rand = rng(c.input.length);
      for (let k = 0; k < 40; k++) {
        const a = Math.floor(rand() * (c.input.length + 1));
        const b = a + Math.floor(rand() * (c.input.length + 1 - a));
        assert.deepEqual(
          stream([c.input.slice(0, a), c.input.slice(a, b), c.input.slice(b)], opts),
          ref,
          `split at ${a},${b}`,
        );
      }
    });
  }

  it("no tools: every piece comes back at once, unchanged", () => {
    const x = new ToolCallExtractor({ tools: [] });
    for (const piece of [
      "<tool_call>",
      '\n{"name": "read", "arguments": {}}',
      "\n</tool_call>  ",
      "\n",
      "{",
      "[TOOL_CALLS]",
    ]) {
      assert.deepEqual(x.push(piece), [{ type: "text", text: piece }]);
    }
    assert.deepEqual(x.end(), []);
  });
});

describe("streaming latency: hold only what may be a call", () => {
  const tools = TOOLS;
  const texts = (ev: ExtractEvent[]): string =>
    ev.map((e) => (e.type === "text" ? e.text : `[call ${e.call.name}]`)).join("");

  it("prose flows through at once (only trailing blanks wait)", () => {
    const x = new ToolCallExtractor({ tools });
    assert.equal(texts(x.push("Hello world, this is")), "Hello world, this is");
    assert.equal(texts(x.push(" a test. ")), " a test.");
    assert.equal(texts(x.push("Next")), " Next");
    assert.equal(texts(x.push("\n\nPara")), "\n\nPara");
    assert.equal(texts(x.end()), "");
  });

  it("'<' waits only until it cannot be a call marker", () => {
    const x = new ToolCallExtractor({ tools });
    assert.equal(texts(x.push("a <")), "a");
    assert.equal(texts(x.push("b")), " <b");
    assert.equal(texts(x.push(" <tool")), "");
    assert.equal(texts(x.push("box")), " <toolbox");
  });

  it("mid-line '{' and '[' are not held; line-start ones are", () => {
    const x = new ToolCallExtractor({ tools });
    assert.equal(texts(x.push("x {a} [b]")), "x {a} [b]");
    assert.equal(texts(x.push("\n{")), "");
    assert.equal(texts(x.push('"ver')), "");
    assert.equal(texts(x.push('sion": 1')), '\n{"version": 1', "rejected as soon as the key is known");
  });

  it("a tag call is emitted as soon as its closing tag arrives", () => {
    const x = new ToolCallExtractor({ tools });
    assert.equal(texts(x.push("Reading.\n<tool_call>\n")), "Reading.");
    assert.equal(texts(x.push('{"name": "read", "arguments": {"path": "a"}}\n</tool_')), "");
    const ev = x.push("call>");
    assert.equal(ev.length, 1);
    assert.equal(ev[0]!.type, "call");
    assert.deepEqual(x.end(), []);
  });

  it("a bare call line is emitted when its line ends", () => {
    const x = new ToolCallExtractor({ tools });
    assert.deepEqual(x.push('{"name": "read", "arguments": {}}'), []);
    const ev = x.push("\nok");
    assert.deepEqual(
      ev.map((e) => e.type),
      ["call", "text"],
    );
    assert.equal(texts(ev.slice(1)), "ok");
  });

  it("a code fence of another language streams its content", () => {
    const x = new ToolCallExtractor({ tools });
    assert.equal(texts(x.push("```python")), "");
    assert.equal(texts(x.push("\nprint(1)")), "```python\nprint(1)");
    assert.equal(texts(x.push('\n{"name": "read", "arguments": {}}')), '\n{"name": "read", "arguments": {}}');
  });

  it("held text is bounded: an unclosed candidate is released once it passes the limit", () => {
    const x = new ToolCallExtractor({ tools });
    const head = '{"name": "write", "arguments": {"content": "';
    let released = texts(x.push(head));
    assert.equal(released, "");
    const chunk = "x".repeat(4096);
    let pushed = head.length;
    while (pushed <= MAX_HELD + 8192) {
      released += texts(x.push(chunk));
      pushed += chunk.length;
    }
    assert.ok(released.length >= MAX_HELD, `released ${released.length} before the end`);
    released += texts(x.end());
    assert.equal(released, head + chunk.repeat((pushed - head.length) / chunk.length));
  });

  it("a long call split into tiny pieces is handled (incremental scanning)", () => {
    const content = "line of text ✓\n".repeat(12000); // ~180 KB of arguments
    const call = JSON.stringify({ name: "write", arguments: { path: "big.txt", content } });
    const text = `Writing.\n<tool_call>\n${call}\n</tool_call>`;
    const pieces: string[] = [];
    for (let i = 0; i < text.length; i += 3) pieces.push(text.slice(i, i + 3));
    const r = stream(pieces, { tools });
    assert.equal(r.content, "Writing.");
    assert.equal(r.calls.length, 1);
    assert.deepEqual(JSON.parse(r.calls[0]!.arguments), { path: "big.txt", content });
  });

  it("push after end() is an error", () => {
    const x = new ToolCallExtractor({ tools });
    x.end();
    assert.throws(() => x.push("more"));
  });
});

describe("maxCalls", () => {
  const line = (i: number): string => JSON.stringify({ name: "read", arguments: { path: `f${i}` } });
  const text = "Reading many files.\n" + Array.from({ length: 25 }, (_, i) => line(i)).join("\n") + "\nDone.";

  it("defaults to 20; further calls are dropped, not turned into text, and counted", () => {
    const x = new ToolCallExtractor({ tools: TOOLS });
    const r = collect([...x.push(text), ...x.end()]);
    assert.equal(r.calls.length, 20);
    assert.deepEqual(JSON.parse(r.calls[19]!.arguments), { path: "f19" });
    assert.equal(r.content, "Reading many files.\nDone.");
    assert.equal(x.droppedCalls, 5);
  });

  it("a custom cap, also while streaming, and 0", () => {
    const x = new ToolCallExtractor({ tools: TOOLS, maxCalls: 2 });
    const events: ExtractEvent[] = [];
    for (const ch of text) events.push(...x.push(ch));
    events.push(...x.end());
    const r = collect(events);
    assert.equal(r.calls.length, 2);
    assert.equal(x.droppedCalls, 23);
    assert.equal(r.content, "Reading many files.\nDone.");
    const none = extractToolCalls(text, { tools: TOOLS, maxCalls: 0 });
    assert.equal(none.calls.length, 0);
    assert.equal(none.content, "Reading many files.\nDone.");
  });

  it("a looping model (leaked <|im_start|>) is capped", () => {
    const turn =
      '<tool_call>\n{"name": "exec", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>\n<|im_start|>assistant\n';
    const x = new ToolCallExtractor({ tools: TOOLS, stripSpecialTokens: true, maxCalls: 20 });
    const r = collect([...x.push(turn.repeat(60)), ...x.end()]);
    assert.equal(r.calls.length, 20);
    assert.equal(x.droppedCalls, 40);
    assert.equal(r.content, "");
  });
});

describe("ids", () => {
  it("default ids are 'call' + 24 letters/digits and unique", () => {
    const text = Array.from({ length: 20 }, (_, i) =>
      JSON.stringify({ name: "read", arguments: { path: `${i}` } }),
    ).join("\n");
    const seen = new Set<string>();
    for (let k = 0; k < 20; k++) {
      for (const c of extractToolCalls(text, { tools: ["read"] }).calls) {
        assert.match(c.id, /^call[A-Za-z0-9]{24}$/);
        seen.add(c.id);
      }
    }
    assert.equal(seen.size, 400);
  });

  it("a custom generator is used; characters other than letters/digits are removed", () => {
    let n = 0;
    const r = extractToolCalls('{"name": "read", "arguments": {}}\n{"name": "exec", "arguments": {}}', {
      tools: ["read", "exec"],
      newId: () => `call_${++n}-x`,
    });
    assert.deepEqual(
      r.calls.map((c) => c.id),
      ["call1x", "call2x"],
    );
    const r2 = extractToolCalls('{"name": "read"}', { tools: ["read"], newId: () => "___" });
    assert.match(r2.calls[0]!.id, /^call[A-Za-z0-9]{24}$/);
  });

  it("arguments are always JSON text of an object", () => {
    for (const input of [
      '{"name": "read"}',
      '{"name": "read", "arguments": null}',
      '{"name": "read", "arguments": "{\\"a\\": 1}"}',
      "<function=read>\n</function>",
    ]) {
      const r = extractToolCalls(input, { tools: ["read"] });
      assert.equal(r.calls.length, 1, input);
      const v: unknown = JSON.parse(r.calls[0]!.arguments);
      assert.ok(typeof v === "object" && v !== null && !Array.isArray(v), input);
    }
  });
});

describe("stripSpecialTokens", () => {
  const cases: [string, string][] = [
    ["Hello<|im_end|>", "Hello"],
    ["<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nthanks<|im_end|>", "Hi there\nthanks"],
    ["<|im_start|>assistant\r\nHi", "Hi"],
    ["Answer.<|eot_id|>", "Answer."],
    ["Answer.<|endoftext|><|end|>", "Answer."],
    ["<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\nHi!<|eot_id|>", "\n\nHi!"],
    ["Done<｜end▁of▁sentence｜>", "Done"],
    ["<start_of_turn>model\nHallo<end_of_turn>", "Hallo"],
    ["<|python_tag|>{}<|eom_id|>", "{}"],
    // Ordinary text is kept.
    ["a <| b |> c", "a <| b |> c"],
    ["x <|not a token|> y", "x <|not a token|> y"],
    ["if a<|b then", "if a<|b then"],
    ["<div>html</div> and a < b > c", "<div>html</div> and a < b > c"],
    ["<|im_start|>robot\nbeep", "robot\nbeep"],
    ["<|im_start|>assistant says hi", "assistant says hi"],
    ["<|start_header_id|>assistant and more", "assistant and more"],
    ["<|start_header_id|>assistant<|eot_id|>x", "assistantx"],
    ["||> <<|im_end|>", "||> <"],
    ["unfinished <|im_en", "unfinished <|im_en"],
    ["", ""],
    ["plain", "plain"],
    ["über 🚀 <|im_end|> 日本", "über 🚀  日本"],
  ];

  for (const [input, expected] of cases) {
    it(JSON.stringify(input), () => {
      assert.equal(stripSpecialTokens(input), expected);
      // Streaming, split at every position and in 1-char pieces.
      for (let p = 0; p <= input.length; p++) {
        const s = new SpecialTokenStripper();
        assert.equal(s.push(input.slice(0, p)) + s.push(input.slice(p)) + s.end(), expected, `split at ${p}`);
      }
      const s = new SpecialTokenStripper();
      let out = "";
      for (const ch of input) out += s.push(ch);
      assert.equal(out + s.end(), expected);
    });
  }

  it("the extractor option strips while streaming, and keeps <|python_tag|> as a call opener", () => {
    const input =
      '<|im_start|>assistant\nChecking.<|im_end|>\n<|python_tag|>{"name": "read", "parameters": {"path": "a"}}<|eom_id|>';
    const ref = whole(input, { tools: TOOLS, stripSpecialTokens: true });
    assert.equal(ref.content, "Checking.");
    assert.equal(ref.calls.length, 1);
    for (let p = 0; p <= input.length; p++) {
      assert.deepEqual(
        stream([input.slice(0, p), input.slice(p)], { tools: TOOLS, stripSpecialTokens: true }),
        ref,
        `split at ${p}`,
      );
    }
  });

  it("end() flushes mid-stream and the stripper stays usable", () => {
    const s = new SpecialTokenStripper();
    assert.equal(s.push("a<|im_"), "a");
    assert.equal(s.end(), "<|im_");
    assert.equal(s.push("b<|im_end|>c<"), "bc");
    assert.equal(s.push("|eot_id|>d"), "d");
    assert.equal(s.end(), "");
  });

  it("with no tools, the option still strips", () => {
    assert.deepEqual(whole("Hi<|im_end|>", { tools: [], stripSpecialTokens: true }), { content: "Hi", calls: [] });
  });
});

describe("options edge cases", () => {
  it("maxCalls NaN falls back to the default; Infinity means no cap", () => {
    const text = Array.from({ length: 30 }, (_, i) =>
      JSON.stringify({ name: "read", arguments: { path: `${i}` } }),
    ).join("\n");
    assert.equal(extractToolCalls(text, { tools: ["read"], maxCalls: Number.NaN }).calls.length, 20);
    assert.equal(extractToolCalls(text, { tools: ["read"], maxCalls: Number.POSITIVE_INFINITY }).calls.length, 30);
  });

  it("empty pushes and an empty reply produce no events", () => {
    const x = new ToolCallExtractor({ tools: TOOLS });
    assert.deepEqual(x.push(""), []);
    assert.deepEqual(x.end(), []);
    const y = new ToolCallExtractor({ tools: [] });
    assert.deepEqual(y.push(""), []);
    assert.deepEqual(y.end(), []);
  });
});
