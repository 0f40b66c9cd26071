/**
 * Deep nesting in a request (issue 20, item 5): the request schema bounds nesting (MAX_JSON_DEPTH)
 * before zod or anything else walks the body, with an issue that names the field; nothing on the
 * way to the upstream recurses on client data. Bodies are built as text: JSON.stringify of a
 * 10,000-deep value overflows the stack (that was the bug).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { buildUpstreamBody, openaiOptionsSchema } from "../../src/backends/openai/backend.js";
import {
  chatRequestSchema,
  describeIssues,
  MAX_JSON_DEPTH,
  nestedDeeperThan,
} from "../../src/request/chat-api/schema.js";

const DEPTH = 10_000;
const deepArray = (depth = DEPTH) => JSON.parse("[".repeat(depth) + "]".repeat(depth)) as unknown;
const deepObject = (depth = DEPTH) => JSON.parse('{"a":'.repeat(depth) + "1" + "}".repeat(depth)) as unknown;
/** `levels` arrays, one inside the other. */
const nested = (levels: number): unknown => {
  let v: unknown = "leaf";
  for (let i = 0; i < levels; i++) v = [v];
  return v;
};
const good = { model: "m", messages: [{ role: "user", content: "hi" }] };

describe("nestedDeeperThan", () => {
  test("counts arrays and objects, the value itself as level 1", () => {
    assert.equal(MAX_JSON_DEPTH, 64);
    assert.equal(nestedDeeperThan("x", 0), false, "a scalar has no depth");
    assert.equal(nestedDeeperThan(null, 0), false);
    assert.equal(nestedDeeperThan({}, 1), false);
    assert.equal(nestedDeeperThan({}, 0), true);
    assert.equal(nestedDeeperThan(nested(64), 64), false);
    assert.equal(nestedDeeperThan(nested(65), 64), true);
    assert.equal(nestedDeeperThan({ a: [1, { b: [] }], c: "x" }, 4), false);
    assert.equal(nestedDeeperThan({ a: [1, { b: [] }], c: "x" }, 3), true);
    assert.equal(nestedDeeperThan([[], [[]], {}, [{ x: [[]] }], "s"], 5), false, "wide is not deep");
    assert.equal(
      nestedDeeperThan([[], [[]], {}, [{ x: [[]] }], "s"], 4),
      true,
      "the deepest branch counts, wherever it is",
    );
  });

  test("any depth is safe (iterative): 10,000 and 1,000,000 levels", () => {
    assert.equal(nestedDeeperThan(deepArray(), 64), true);
    assert.equal(nestedDeeperThan(deepObject(), 64), true);
    assert.equal(nestedDeeperThan(deepArray(1_000_000), 2_000_000), false);
  });
});

describe("the request schema bounds nesting before it looks at the fields", () => {
  /** `param`: the field named; `objectParam` when a deep object (`{"a":{"a":…}}`) is named differently from a deep array. */
  const cases: Array<{ name: string; body: (deep: unknown) => object; param: string; objectParam?: string }> = [
    { name: "tool_choice", body: (deep) => ({ ...good, tool_choice: deep }), param: "tool_choice" },
    {
      name: "response_format",
      body: (deep) => ({ ...good, response_format: { type: "json_schema", json_schema: deep } }),
      param: "response_format",
    },
    {
      name: "a content part",
      body: (deep) => ({ ...good, messages: [{ role: "user", content: [{ type: "image_url", image_url: deep }] }] }),
      param: "messages[0].content[0].image_url",
    },
    {
      name: "a content part that is itself deep",
      body: (deep) => ({ ...good, messages: [{ role: "user", content: [deep] }] }),
      param: "messages[0].content[0]",
      objectParam: "messages[0].content[0].a",
    },
    {
      name: "a tool's parameters",
      body: (deep) => ({ ...good, tools: [{ type: "function", function: { name: "f", parameters: deep } }] }),
      param: "tools[0].function.parameters",
    },
    {
      name: "a tool call's function",
      body: (deep) => ({
        ...good,
        messages: [{ role: "assistant", tool_calls: [{ function: { name: "f", extra: deep } }] }, good.messages[0]],
      }),
      param: "messages[0].tool_calls[0].function.extra",
    },
    { name: "an unknown field", body: (deep) => ({ ...good, vendor_extension: deep }), param: "vendor_extension" },
    {
      name: "messages itself",
      body: (deep) => ({ ...good, messages: deep }),
      param: "messages[0]",
      objectParam: "messages",
    },
  ];
  for (const c of cases) {
    test(`10,000-deep ${c.name} → an issue naming ${c.param}, no exception`, () => {
      for (const [deep, field] of [
        [deepArray(), c.param],
        [deepObject(), c.objectParam ?? c.param],
      ] as const) {
        const r = chatRequestSchema.safeParse(c.body(deep));
        assert.equal(r.success, false);
        const { message, param } = describeIssues(r.error!);
        assert.equal(param, field);
        assert.equal(
          message,
          `${field}: nested more than 64 levels deep (arrays and objects, counted from the request body); flatten it`,
        );
        assert.equal(r.error!.issues.length, 1, "only the nesting is reported: the fields were not looked at");
      }
    });
  }

  test("a body within the limit is unchanged by the check (fields still validated, unknown fields kept)", () => {
    // body (1) → x (2..64): 63 levels under the body are allowed, 64 are not.
    const ok = chatRequestSchema.parse({
      ...good,
      x: nested(63),
      tool_choice: { type: "function", function: { name: "f" } },
    });
    assert.deepEqual(ok.x, nested(63));
    assert.deepEqual(ok.tool_choice, { type: "function", function: { name: "f" } });
    assert.equal(chatRequestSchema.safeParse({ ...good, x: nested(64) }).success, false);
    const bad = chatRequestSchema.safeParse({ ...good, temperature: 9 });
    assert.equal(describeIssues(bad.error!).param, "temperature");
  });
});

describe("buildUpstreamBody does not recurse on client data", () => {
  test("a 10,000-deep pass-through value (even under a key extraBody merges into) is passed on, not walked", () => {
    const options = openaiOptionsSchema.parse({
      baseUrl: "http://127.0.0.1:1/v1",
      extraBody: { tool_choice: { a: { b: 1 } }, options: { num_ctx: 8192 } },
    });
    const deep = deepObject() as Record<string, unknown>;
    const other = deepArray();
    const request = { ...good, tool_choice: deep, vendor_extension: other } as unknown as Parameters<
      typeof buildUpstreamBody
    >[1]["request"];
    const body = buildUpstreamBody(options, { model: "up", request });
    assert.equal(body.vendor_extension, other, "passed by reference");
    const merged = (body.tool_choice as { a: Record<string, unknown> }).a;
    assert.equal(merged.b, 1);
    assert.equal(
      merged.a,
      (deep.a as Record<string, unknown>).a,
      "extraBody's merge stops at its own depth: below it, the client's value as is",
    );
    assert.deepEqual(body.options, { num_ctx: 8192 });
  });
});
