/**
 * The model families of issue 18 beyond the corpus checks in toolcalls-extract.test.ts: the corpus
 * covers every family and samples every case taken from a public suite for the every-split test;
 * the exact chunkings those suites stream; and the bridge's translator turning extracted calls
 * into contiguous tool-call indices with alphanumeric ids and `finish_reason: "tool_calls"`.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StreamTranslator } from "../../src/backends/openai/translate.js";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import {
  extractToolCalls,
  ToolCallExtractor,
  type ExtractEvent,
  type ExtractorOptions,
} from "../../src/backends/openai/toolcalls/extract.js";
import { CORPUS, TOOLS } from "./toolcalls-corpus.js";
import { FAMILY_CASES } from "./toolcalls-corpus-families.js";

const FAMILIES = [
  "pythonic",
  "pythonic-list",
  "llama4-python_start",
  "lfm2-tool_call_start",
  "deepseek",
  "deepseek-v3",
  "deepseek-v31",
  "llama3-json-prose",
  "llama3-semicolons",
  "neg-json-lookalike",
  "xlam-array",
  "think-block",
  "tags-fences",
  "llamacpp-function-attr",
  "response-tag",
  "fence-xml-response",
  "fence-json-function_call-tag",
  "json-lines-trailing-commas",
  "name-collision",
  "python_tag-builtin",
  "kimi-k2",
  "glm45",
  "minimax",
  "minimax-m2",
  "granite",
  "phi4-functools",
  "internlm",
  "seed-oss",
  "harmony",
  "harmony-recipient-first",
];

describe("family corpus", () => {
  it("covers every family, with calls and with look-alikes that stay text", () => {
    const kinds = new Set(CORPUS.map((c) => c.kind));
    for (const k of FAMILIES) assert.ok(kinds.has(k), `corpus has ${k}`);
    for (const k of FAMILIES) {
      if (k.startsWith("neg-")) continue;
      assert.ok(
        CORPUS.some((c) => c.kind === k && c.calls.length > 0),
        `${k} has a case with calls`,
      );
    }
    assert.ok(FAMILY_CASES.filter((c) => c.calls.length === 0).length >= 60, "many negative family cases");
  });

  it("every case taken from a public suite names its source and is in the every-split sample", () => {
    for (const c of FAMILY_CASES) {
      assert.ok(c.source && c.source.length > 0, `${c.name} names its source`);
      assert.equal(c.sample, true, `${c.name} is in the every-split sample`);
    }
  });
});

interface Result {
  content: string;
  calls: { name: string; args: unknown }[];
}

function run(pieces: readonly string[], opts: ExtractorOptions): Result {
  const x = new ToolCallExtractor(opts);
  const ev: ExtractEvent[] = [];
  for (const p of pieces) ev.push(...x.push(p));
  ev.push(...x.end());
  let content = "";
  const calls: Result["calls"] = [];
  for (const e of ev) {
    if (e.type === "text") content += e.text;
    else {
      assert.match(e.call.id, /^[A-Za-z0-9]+$/);
      calls.push({ name: e.call.name, args: JSON.parse(e.call.arguments) });
    }
  }
  return { content, calls };
}

/** The chunkings the servers' own streaming tests use (markers split across chunks, tokens as their own chunks). */
const CHUNKINGS: {
  name: string;
  source: string;
  tools: string[];
  strip?: boolean;
  pieces: string[];
  content: string;
  calls: Result["calls"];
}[] = [
  {
    name: "DeepSeek, markers split across chunks",
    source: "ollama/ollama tools/tools_test.go (deepseek incremental)",
    tools: ["get_temperature"],
    pieces: [
      "<think>Wait",
      ", I need",
      " to call",
      " a tool</think><|too",
      "l▁calls▁begin",
      "|>",
      "<|tool▁call▁begin|>function<|tool▁sep|>get_temperature\n",
      "```json\n",
      '{"city": "Tokyo"}\n',
      "```",
      "<|tool▁c",
      "all▁end|>",
      "<|tool▁calls▁end|>",
    ],
    content: "<think>Wait, I need to call a tool</think>",
    calls: [{ name: "get_temperature", args: { city: "Tokyo" } }],
  },
  {
    name: "DeepSeek full-width tokens one by one, stripped",
    source: "vllm-project/vllm tests/tool_parsers/test_deepseekv3_tool_parser.py",
    tools: ["get_weather"],
    strip: true,
    pieces: [
      "Let me check.",
      "<｜tool▁calls▁begin｜>",
      "<｜tool▁call▁begin｜>",
      "function",
      "<｜tool▁sep｜>",
      "get_weather\n```json\n",
      '{"city": ',
      '"Paris"}\n```',
      "<｜tool▁call▁end｜>",
      "<｜tool▁calls▁end｜>",
      "<｜end▁of▁sentence｜>",
    ],
    content: "Let me check.",
    calls: [{ name: "get_weather", args: { city: "Paris" } }],
  },
  {
    name: "Llama 4 python_start split inside the token",
    source: "sgl-project/sglang test/registered/function_call/test_function_call_parser.py",
    tools: ["get_weather"],
    pieces: [
      "Here's a call: ",
      "<|python_",
      "start|>[get_weather(location=",
      "'Tokyo', data=[1, 2",
      ", 3])]<|python_end|>",
    ],
    content: "Here's a call:",
    calls: [{ name: "get_weather", args: { location: "Tokyo", data: [1, 2, 3] } }],
  },
  {
    name: "pythonic large steps",
    source: "vllm-project/vllm tests/tool_parsers/test_pythonic_tool_parser.py",
    tools: ["get_weather", "do_something_cool"],
    pieces: ["[get_weather(city='San", " Francisco', metric='celsius'), get_weather(), do_something_cool(steps=[])]"],
    content: "",
    calls: [
      { name: "get_weather", args: { city: "San Francisco", metric: "celsius" } },
      { name: "get_weather", args: {} },
      { name: "do_something_cool", args: { steps: [] } },
    ],
  },
  {
    name: "Kimi K2 tokens as their own chunks, stripped",
    source: "vllm-project/vllm tests/tool_parsers/test_kimi_k2_tool_parser.py",
    tools: ["get_weather"],
    strip: true,
    pieces: [
      "I'll help. ",
      "<|tool_calls_section_begin|>",
      "<|tool_call_begin|>",
      "functions.get_weather:0 ",
      "<|tool_call_argument_begin|>",
      '{"ci',
      'ty": "Beijing"} ',
      "<|tool_call_end|>",
      "<|tool_calls_section_end|>",
    ],
    content: "I'll help.",
    calls: [{ name: "get_weather", args: { city: "Beijing" } }],
  },
  {
    name: "GLM element by element",
    source: "vllm-project/vllm tests/tool_parsers/test_glm4_moe_tool_parser.py",
    tools: ["get_weather"],
    pieces: [
      "<tool_call>",
      "get_weather\n",
      "<arg_key>city</arg_key>",
      "\n<arg_value>",
      "Beijing",
      "</arg_value>\n",
      "</tool_call>",
    ],
    content: "",
    calls: [{ name: "get_weather", args: { city: "Beijing" } }],
  },
  {
    name: "MiniMax M2 element by element",
    source: "vllm-project/vllm tests/tool_parsers/test_minimax_m2_tool_parser.py",
    tools: ["get_weather"],
    pieces: [
      "<minimax:tool_call>",
      '<invoke name="get_weather">',
      '<parameter name="city">Seattle</parameter>',
      "</invoke></minimax:tool_call>",
    ],
    content: "",
    calls: [{ name: "get_weather", args: { city: "Seattle" } }],
  },
  {
    name: "Harmony header and body apart, stripped",
    source: "sgl-project/sglang python/sglang/srt/function_call/gpt_oss_detector.py",
    tools: ["get_weather"],
    strip: true,
    pieces: [
      "<|channel|>analysis<|message|>Need to check weather.<|end|>",
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json",
      '<|message|>{"location":',
      '"San Francisco"}',
      "<|call|>",
    ],
    content: "Need to check weather.",
    calls: [{ name: "get_weather", args: { location: "San Francisco" } }],
  },
  {
    name: "Llama 3 JSON, parallel, streamed in 7-character pieces",
    source: "vllm-project/vllm tests/tool_parsers/test_llama3_json_tool_parser.py",
    tools: ["searchTool", "getOpenIncidentsTool"],
    pieces:
      '{"name": "searchTool", "parameters": {"query": "test1"}};\n{"name": "getOpenIncidentsTool", "parameters": {}}'.match(
        /[\s\S]{1,7}/g,
      )!,
    content: "",
    calls: [
      { name: "searchTool", args: { query: "test1" } },
      { name: "getOpenIncidentsTool", args: {} },
    ],
  },
];

describe("the servers' own chunkings", () => {
  for (const k of CHUNKINGS) {
    it(`${k.name} (${k.source})`, () => {
      const opts = { tools: k.tools, stripSpecialTokens: k.strip === true };
      const r = run(k.pieces, opts);
      assert.deepEqual(r, { content: k.content, calls: k.calls });
      assert.deepEqual(run([k.pieces.join("")], opts), r, "one piece");
    });
  }
});

describe("through the bridge's translator", () => {
  /** Upstream content deltas of `size` characters, then a finish chunk. */
  function translate(input: string, tools: readonly string[], size: number): BackendEvent[] {
    const t = new StreamTranslator({ tools, extract: true, maxToolCalls: 64 });
    const out: BackendEvent[] = [];
    for (let i = 0; i < input.length; i += size)
      out.push(
        ...t.chunk({ choices: [{ index: 0, delta: { content: input.slice(i, i + size) }, finish_reason: null }] }),
      );
    out.push(...t.chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }));
    out.push(...t.finish());
    return out;
  }

  it("every family case: contiguous indices, alphanumeric ids, finish_reason tool_calls", () => {
    const failures: string[] = [];
    for (const c of FAMILY_CASES) {
      for (const size of [1, 5, 64]) {
        const ev = translate(c.input, c.tools ?? TOOLS, size);
        const calls = ev.filter((e): e is Extract<BackendEvent, { type: "tool_call" }> => e.type === "tool_call");
        const done = ev.find((e) => e.type === "done") as Extract<BackendEvent, { type: "done" }> | undefined;
        const ok =
          calls.length === c.calls.length &&
          calls.every((k, i) => k.index === i && /^[A-Za-z0-9]+$/.test(k.id ?? "") && k.name === c.calls[i]!.name) &&
          new Set(calls.map((k) => k.id)).size === calls.length &&
          done?.finishReason === (c.calls.length > 0 ? "tool_calls" : "stop");
        if (!ok)
          failures.push(
            `${c.name} (pieces of ${size}): ${JSON.stringify(calls.map((k) => [k.index, k.name]))} ${done?.finishReason}`,
          );
      }
    }
    assert.deepEqual(failures.slice(0, 5), []);
  });
});

describe("whole-text results match the corpus for the family cases", () => {
  it("extractToolCalls = expected", () => {
    for (const c of FAMILY_CASES) {
      const r = extractToolCalls(c.input, {
        tools: c.tools ?? TOOLS,
        stripSpecialTokens: c.stripSpecialTokens === true,
      });
      assert.equal(r.content, c.content, c.name);
      assert.deepEqual(
        r.calls.map((k) => ({ name: k.name, args: JSON.parse(k.arguments) as unknown })),
        c.calls.map((k) => ({ name: k.name, args: k.args })),
        c.name,
      );
    }
  });
});
