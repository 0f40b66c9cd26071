import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  applyRequestCompat,
  deepMerge,
  LOCAL_SERVER_COMPAT,
  mergeCompat,
  type CompatOverride,
} from "../../src/backends/openai/compat.js";

type Body = Record<string, unknown>;

const msgs = [{ role: "user", content: "hi" }];
const tool = (fn: Body) => ({ type: "function", function: { name: "read", parameters: { type: "object" }, ...fn } });

interface Case {
  name: string;
  override?: CompatOverride;
  input: Body;
  expect: Body;
}

const cases: Case[] = [
  { name: "drops store", input: { model: "m", messages: msgs, store: false }, expect: { model: "m", messages: msgs } },
  {
    name: "keeps store when supported",
    override: { supportsStore: true },
    input: { messages: msgs, store: false },
    expect: { messages: msgs, store: false },
  },
  {
    name: "max_completion_tokens → max_tokens",
    input: { messages: msgs, max_completion_tokens: 512 },
    expect: { messages: msgs, max_tokens: 512 },
  },
  {
    name: "explicit max_tokens wins over max_completion_tokens",
    input: { messages: msgs, max_tokens: 100, max_completion_tokens: 512 },
    expect: { messages: msgs, max_tokens: 100 },
  },
  {
    name: "max_tokens → max_completion_tokens when the upstream wants that",
    override: { maxTokensField: "max_completion_tokens" },
    input: { messages: msgs, max_tokens: 64 },
    expect: { messages: msgs, max_completion_tokens: 64 },
  },
  {
    name: "null limits are dropped",
    input: { messages: msgs, max_tokens: null, max_completion_tokens: null },
    expect: { messages: msgs },
  },
  {
    name: "developer role → system",
    input: { messages: [{ role: "developer", content: "be brief" }, ...msgs] },
    expect: { messages: [{ role: "system", content: "be brief" }, ...msgs] },
  },
  {
    name: "developer role kept when supported",
    override: { supportsDeveloperRole: true },
    input: { messages: [{ role: "developer", content: "x" }] },
    expect: { messages: [{ role: "developer", content: "x" }] },
  },
  { name: "drops reasoning_effort", input: { messages: msgs, reasoning_effort: "high" }, expect: { messages: msgs } },
  {
    name: "keeps reasoning_effort when supported",
    override: { supportsReasoningEffort: true },
    input: { messages: msgs, reasoning_effort: "low" },
    expect: { messages: msgs, reasoning_effort: "low" },
  },
  {
    name: "drops strict in tool definitions",
    input: { messages: msgs, tools: [tool({ strict: false }), tool({ name: "exec" })] },
    expect: { messages: msgs, tools: [tool({}), tool({ name: "exec" })] },
  },
  {
    name: "keeps strict when supported",
    override: { supportsStrictMode: true },
    input: { messages: msgs, tools: [tool({ strict: true })] },
    expect: { messages: msgs, tools: [tool({ strict: true })] },
  },
  {
    name: "empty tools removed with tool_choice",
    input: { messages: msgs, tools: [], tool_choice: "auto", parallel_tool_calls: true },
    expect: { messages: msgs },
  },
  {
    name: "stream_options kept by default",
    input: { messages: msgs, stream: true, stream_options: { include_usage: true } },
    expect: { messages: msgs, stream: true, stream_options: { include_usage: true } },
  },
  {
    name: "stream_options dropped when unsupported",
    override: { supportsStreamOptions: false },
    input: { messages: msgs, stream: true, stream_options: { include_usage: true } },
    expect: { messages: msgs, stream: true },
  },
  {
    name: "dropFields removes named fields",
    override: { dropFields: ["parallel_tool_calls", "user"] },
    input: { messages: msgs, tools: [tool({})], parallel_tool_calls: false, user: "u1" },
    expect: { messages: msgs, tools: [tool({})] },
  },
  {
    name: "extraBody deep-merged last",
    override: { extraBody: { options: { num_ctx: 32768 }, top_k: 20 } },
    input: { messages: msgs, options: { temperature: 0.2 } },
    expect: { messages: msgs, options: { temperature: 0.2, num_ctx: 32768 }, top_k: 20 },
  },
  {
    name: "text-part arrays flattened when asked",
    override: { flattenTextContent: true },
    input: {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "text", text: "b" },
          ],
        },
      ],
    },
    expect: { messages: [{ role: "user", content: "a\nb" }] },
  },
  {
    name: "image parts are not flattened",
    override: { flattenTextContent: true },
    input: {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "image_url", image_url: { url: "x" } },
          ],
        },
      ],
    },
    expect: {
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "image_url", image_url: { url: "x" } },
          ],
        },
      ],
    },
  },
  {
    name: "OpenClaw 2026.5 request, all defaults at once",
    input: {
      model: "qwen",
      messages: [{ role: "developer", content: "sys" }, ...msgs],
      stream: true,
      store: false,
      max_completion_tokens: 8192,
      reasoning_effort: "medium",
      tools: [tool({ strict: false })],
    },
    expect: {
      model: "qwen",
      messages: [{ role: "system", content: "sys" }, ...msgs],
      stream: true,
      max_tokens: 8192,
      tools: [tool({})],
    },
  },
];

describe("applyRequestCompat", () => {
  for (const c of cases) {
    it(c.name, () => {
      const rules = mergeCompat(LOCAL_SERVER_COMPAT, c.override);
      const frozen = structuredClone(c.input);
      const out = applyRequestCompat(c.input, rules);
      assert.deepEqual(out, c.expect);
      assert.deepEqual(c.input, frozen, "input must not be modified");
    });
  }
});

describe("mergeCompat", () => {
  it("replaces flags, unions dropFields, deep-merges extraBody, leaves inputs alone", () => {
    const base = mergeCompat(LOCAL_SERVER_COMPAT, {
      dropFields: ["user"],
      extraBody: { options: { num_ctx: 8192, seed: 1 } },
    });
    const merged = mergeCompat(base, {
      supportsStore: true,
      dropFields: ["seed"],
      extraBody: { options: { num_ctx: 32768 } },
    });
    assert.equal(merged.supportsStore, true);
    assert.equal(merged.maxTokensField, "max_tokens");
    assert.deepEqual(merged.dropFields, ["user", "seed"]);
    assert.deepEqual(merged.extraBody, { options: { num_ctx: 32768, seed: 1 } });
    assert.deepEqual(base.dropFields, ["user"]);
    assert.deepEqual(base.extraBody, { options: { num_ctx: 8192, seed: 1 } });
    assert.equal(LOCAL_SERVER_COMPAT.supportsStore, false);
  });

  it("undefined override fields and a missing override change nothing", () => {
    assert.deepEqual(mergeCompat(LOCAL_SERVER_COMPAT, { supportsStore: undefined }), { ...LOCAL_SERVER_COMPAT });
    assert.deepEqual(mergeCompat(LOCAL_SERVER_COMPAT), { ...LOCAL_SERVER_COMPAT });
  });
});

describe("deepMerge", () => {
  it("replaces arrays and scalars, merges nested objects", () => {
    assert.deepEqual(deepMerge({ a: [1, 2], b: { c: 1, d: 2 }, e: 1 }, { a: [3], b: { d: 3 }, e: { x: 1 } }), {
      a: [3],
      b: { c: 1, d: 3 },
      e: { x: 1 },
    });
  });
});
