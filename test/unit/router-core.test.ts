/**
 * The router's pure decision helpers (src/workflows/router/inputs.ts, classifier.ts, fallback.ts,
 * replies.ts, messages.ts): input checking and coercion, the classifier prompt and reply reader,
 * slash commands and the whole-word keyword fallback, short replies, and the router's texts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  classifierPrompt,
  parseClassifierReply,
  retryMessage,
  type ClassifierReply,
} from "../../src/workflows/router/classifier.js";
import { fallbackMatch, parseSlash, words } from "../../src/workflows/router/keyword-fallback.js";
import { checkInputs, fieldsOf, inputsHash, mergeInputs, schemaProblem } from "../../src/workflows/systems/inputs.js";
import {
  cancelledText,
  clarifyText,
  confirmText,
  declinedText,
  giveUpText,
  runningLine,
  stepLine,
  systemsListText,
} from "../../src/workflows/router/messages.js";
import { replyKind } from "../../src/workflows/conversation/replies.js";
import type { LoadedSystem } from "../../src/workflows/systems/types.js";
import type { InputSchema } from "../../src/wire/runs.js";

function sys(p: Partial<LoadedSystem> & { id: string }): LoadedSystem {
  return {
    name: p.id,
    description: "",
    examples: [],
    keywords: [],
    inputs: { type: "object", properties: {} },
    sideEffects: false,
    confirm: "auto",
    enabled: true,
    run: { kind: "model", model: "m", prompt: "p" },
    triggers: [],
    source: "config",
    ...p,
  };
}

const CONTENT: InputSchema = {
  type: "object",
  properties: {
    topic: { type: "string", description: "The blog post topic" },
    tone: { type: "string", enum: ["formal", "casual", "technical"], description: "Writing tone" },
    words: { type: "integer", minimum: 100, description: "Word count" },
    draft: { type: "boolean" },
    tags: { type: "array", items: { type: "string" } },
    counts: { type: "array", items: { type: "integer" } },
    zip: { type: "string", pattern: "^\\d{5}$" },
    level: { enum: [1, 2, 3] },
    ratio: { type: "number" },
    either: { type: ["string", "integer"] },
  },
  required: ["topic", "tone"],
};

// ---------------------------------------------------------------------------------------------
// inputs.ts

test("fieldsOf: declared order, types, allowed values, descriptions, required", () => {
  const schema: InputSchema = {
    type: "object",
    properties: {
      b: { type: ["string", "null"] },
      a: { description: "no type given" },
      tone: { $ref: "#/$defs/Tone" },
      maybe: { anyOf: [{ type: "number" }, { type: "null" }] },
      titled: { type: "string", title: "Only a title" },
    },
    required: ["a"],
    $defs: { Tone: { type: "string", enum: ["x", "y"] } },
  };
  assert.deepEqual(fieldsOf(schema), [
    { name: "b", type: "string|null", required: false },
    { name: "a", type: "string", description: "no type given", required: true },
    { name: "tone", type: "string", enum: ["x", "y"], required: false },
    { name: "maybe", type: "number|null", required: false },
    { name: "titled", type: "string", description: "Only a title", required: false },
  ]);
  assert.deepEqual(fieldsOf({ type: "object", properties: {} }), []);
});

test("checkInputs: coercions and enum matching, one value at a time", () => {
  const cases: Array<[string, unknown, unknown]> = [
    ["words", "800", 800],
    ["words", " 800 ", 800],
    ["words", "800.0", 800],
    ["words", 800, 800],
    ["ratio", "8.5", 8.5],
    ["ratio", "1e3", 1000],
    ["ratio", "-0.25", -0.25],
    ["draft", "true", true],
    ["draft", "yes", true],
    ["draft", "Yes", true],
    ["draft", "y", true],
    ["draft", "on", true],
    ["draft", "false", false],
    ["draft", "no", false],
    ["draft", "OFF", false],
    ["draft", false, false],
    ["tone", "casual", "casual"],
    ["tone", "Casual", "casual"],
    ["tone", "  TECHNICAL ", "technical"],
    ["level", "2", 2],
    ["level", 3, 3],
    ["zip", 12345, "12345"],
    ["zip", " 12345 ", "12345"],
    ["tags", "a, b ,c", ["a", "b", "c"]],
    ["tags", '["x","y z"]', ["x", "y z"]],
    ["tags", ["p", "q"], ["p", "q"]],
    ["tags", "solo", ["solo"]],
    ["counts", "1, 2", [1, 2]],
    ["counts", ["3", 4], [3, 4]],
    ["either", "800", "800"], // valid as given: kept as given
    ["either", 800, 800],
    ["topic", "  spaced  ", "  spaced  "], // text that is valid is not altered
  ];
  for (const [field, given, expected] of cases) {
    const r = checkInputs(CONTENT, { topic: "t", tone: "formal", [field]: given });
    assert.deepEqual(r.values[field], expected, `${field} = ${JSON.stringify(given)}`);
    assert.deepEqual(r.invalid, [], `${field} = ${JSON.stringify(given)}`);
    assert.equal(r.complete, true, `${field} = ${JSON.stringify(given)}`);
  }
});

test("checkInputs: invalid values are left out and explained", () => {
  const cases: Array<[string, unknown, string]> = [
    ["words", "8.5", "must be an integer"],
    ["words", "lots", "must be an integer"],
    ["words", "1,000", "must be an integer"],
    ["words", 50, "must be at least 100"],
    ["words", "50", "must be at least 100"],
    ["ratio", "abc", "must be a number"],
    ["draft", "maybe", "must be true or false"],
    ["tone", "loud", "must be one of formal, casual, technical"],
    ["level", "4", "must be one of 1, 2, 3"],
    ["zip", "1234", "must match the pattern ^\\d{5}$"],
    ["counts", "1, x", "must be an integer (at item 2)"],
    ["ratio", true, "must be a number"],
    ["either", { a: 1 }, "must be text or an integer"],
  ];
  for (const [field, given, problem] of cases) {
    const r = checkInputs(CONTENT, { topic: "t", tone: "formal", [field]: given });
    assert.equal(field in r.values, false, `${field} = ${JSON.stringify(given)} must not be kept`);
    assert.equal(r.invalid.length, 1, `${field} = ${JSON.stringify(given)}`);
    assert.equal(r.invalid[0]!.field.name, field);
    assert.equal(r.invalid[0]!.value, given);
    assert.equal(r.invalid[0]!.problem, problem, `${field} = ${JSON.stringify(given)}`);
    assert.equal(r.complete, false, "an invalid value, even of an optional field, blocks the run");
  }
});

test("checkInputs: empty means not given; unknown keys dropped; missing lists required fields", () => {
  for (const empty of ["", "   ", null, undefined]) {
    const r = checkInputs(CONTENT, { topic: empty, tone: "formal", words: empty });
    assert.deepEqual(r.values, { tone: "formal" }, JSON.stringify(empty));
    assert.deepEqual(
      r.missing.map((f) => f.name),
      ["topic"],
      JSON.stringify(empty),
    );
    assert.deepEqual(r.invalid, [], `${JSON.stringify(empty)} is not an invalid value, just absent`);
    assert.equal(r.complete, false);
  }
  const r = checkInputs(CONTENT, { topic: "AI", tone: "casual", hacker: "x", constructor: "y", toString: 1 });
  assert.deepEqual(r.values, { topic: "AI", tone: "casual" });
  assert.equal(r.complete, true);
  assert.deepEqual(
    checkInputs(CONTENT, {}).missing.map((f) => f.name),
    ["topic", "tone"],
  );
});

test("checkInputs: a required field with an invalid value is both missing and invalid", () => {
  const r = checkInputs(CONTENT, { topic: "AI", tone: "loud" });
  assert.deepEqual(
    r.missing.map((f) => f.name),
    ["tone"],
  );
  assert.deepEqual(
    r.invalid.map((i) => i.field.name),
    ["tone"],
  );
  assert.deepEqual(r.values, { topic: "AI" });
  assert.equal(r.complete, false);
});

test("checkInputs: values keep declared order and the whole schema decides completeness", () => {
  const r = checkInputs(CONTENT, { words: "900", tone: "Formal", topic: "AI" });
  assert.deepEqual(Object.keys(r.values), ["topic", "tone", "words"]);
  assert.deepEqual(r.problems, []);

  const cond: InputSchema = {
    type: "object",
    properties: {
      kind: { enum: ["email", "sms"] },
      to: { type: "string", format: "email" },
      a: { type: "string" },
      b: { type: "string" },
    },
    anyOf: [{ required: ["a"] }, { required: ["b"] }],
    if: { properties: { kind: { const: "email" } }, required: ["kind"] },
    then: { required: ["to"] },
  };
  const c1 = checkInputs(cond, { kind: "EMAIL" });
  assert.deepEqual(c1.values, { kind: "email" });
  assert.deepEqual(
    c1.missing.map((f) => f.name),
    ["to"],
    "a conditional requirement is asked for like any other",
  );
  assert.deepEqual(c1.problems, ["needs one of a, b"]);
  assert.equal(c1.complete, false);
  const c2 = checkInputs(cond, { kind: "email", to: "nope", b: "1" });
  assert.equal(c2.invalid[0]?.problem, "must be an email address");
  assert.equal(c2.complete, false);
  const c3 = checkInputs(cond, { kind: "sms", b: "1" });
  assert.equal(c3.complete, true);
  assert.deepEqual(c3.problems, []);
});

test("checkInputs: $refs resolve, dialects and $id schemas compile, no inputs is complete", () => {
  const withRef: InputSchema = {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: { t: { $ref: "#/$defs/T" } },
    $defs: { T: { enum: ["alpha", "beta"] } },
    required: ["t"],
  };
  assert.deepEqual(checkInputs(withRef, { t: "ALPHA" }).values, { t: "alpha" });
  assert.equal(checkInputs(withRef, { t: "gamma" }).invalid[0]?.problem, "must be one of alpha, beta");
  const draft7: InputSchema = {
    type: "object",
    properties: { n: { $ref: "#/definitions/N" } },
    definitions: { N: { type: "integer" } },
  };
  assert.deepEqual(checkInputs(draft7, { n: "7" }).values, { n: 7 });
  // Two distinct objects declaring the same $id must not collide inside ajv.
  const a: InputSchema = { $id: "https://example.com/same", type: "object", properties: { x: { type: "integer" } } };
  const b: InputSchema = { $id: "https://example.com/same", type: "object", properties: { x: { type: "string" } } };
  assert.deepEqual(checkInputs(a, { x: "1" }).values, { x: 1 });
  assert.deepEqual(checkInputs(b, { x: "1" }).values, { x: "1" });
  // The same object checked again gives the same answer (compiled once, cached).
  assert.deepEqual(checkInputs(a, { x: "2" }).values, { x: 2 });
  const none = checkInputs({ type: "object", properties: {} }, { stray: 1 });
  assert.deepEqual(none, { values: {}, missing: [], invalid: [], complete: true, problems: [] });
});

test("schemaProblem: accepts object schemas, names what is wrong otherwise", () => {
  assert.equal(schemaProblem(CONTENT), undefined);
  assert.equal(schemaProblem({ type: "object", properties: {} }), undefined);
  assert.equal(schemaProblem({ properties: { a: { type: "string" } } }), undefined, "no type: an object schema");
  assert.equal(
    schemaProblem({ type: "object", properties: { a: { type: "string", "x-ui": "textarea" } }, "x-owner": "me" }),
    undefined,
    "unknown x- keywords are ignored",
  );
  assert.equal(
    schemaProblem({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: { a: { type: "string" } },
    }),
    undefined,
  );
  assert.equal(
    schemaProblem({ $schema: "http://json-schema.org/draft-07/schema#", type: "object", properties: {} }),
    undefined,
  );
  assert.equal(
    schemaProblem({ $schema: "http://json-schema.org/draft-04/schema#", type: "object", properties: {} }),
    undefined,
    "older drafts are read as draft-07",
  );
  const same = { $id: "https://example.com/s", type: "object", properties: {} };
  assert.equal(schemaProblem(same), undefined);
  assert.equal(schemaProblem({ ...same }), undefined, "a second schema with the same $id is fine");

  const bad: Array<[unknown, RegExp]> = [
    [null, /must be a JSON Schema object, got null/],
    [[], /got a list/],
    ["string", /got string/],
    [{ type: "array" }, /must describe an object.*"array"/],
    [{ type: "object", properties: [] }, /properties must be a mapping/],
    [{ type: "object", properties: { a: true } }, /properties\.a must be a schema/],
    [{ type: "object", properties: { a: { type: "strng" } } }, /properties\.a\.type: unknown type "strng"/],
    [{ type: "object", properties: { a: { type: ["string", 3] } } }, /unknown type 3/],
    [{ type: "object", properties: { a: { enum: [] } } }, /properties\.a\.enum must be a non-empty list/],
    [{ type: "object", properties: {}, required: "a" }, /required must be a list/],
    [
      { type: "object", properties: { a: {} }, required: ["a", "b"] },
      /required names "b", not in properties \(declared: a\)/,
    ],
    [{ type: "object", properties: { a: { minLength: "x" } } }, /not a valid JSON Schema: .*minLength must be integer/],
    [{ type: "object", properties: { a: { $ref: "#/nope" } } }, /does not compile: .*#\/nope/],
  ];
  for (const [schema, re] of bad) {
    const p = schemaProblem(schema);
    assert.ok(p, `expected a problem for ${JSON.stringify(schema)}`);
    assert.match(p, re);
  }
});

test("mergeInputs: new values win, empty ones do not erase", () => {
  assert.deepEqual(
    mergeInputs({ a: 1, b: "x", c: "keep" }, { a: 2, b: "", c: null, d: "new", e: undefined, f: "  " }),
    { a: 2, b: "x", c: "keep", d: "new" },
  );
  assert.deepEqual(mergeInputs({}, {}), {});
  const merged = mergeInputs({}, JSON.parse('{"__proto__": {"polluted": true}}') as Record<string, unknown>);
  assert.equal(Object.getPrototypeOf(merged), Object.prototype, "a __proto__ key stays a plain key");
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test("inputsHash: stable across key order, sensitive to system and values", () => {
  const h1 = inputsHash("blog", { b: 1, a: { d: [1, { y: 2, x: 1 }], c: "3" } });
  const h2 = inputsHash("blog", { a: { c: "3", d: [1, { x: 1, y: 2 }] }, b: 1 });
  assert.equal(h1, h2);
  assert.match(h1, /^[0-9a-f]{16}$/);
  assert.notEqual(inputsHash("other", { b: 1, a: { d: [1, { y: 2, x: 1 }], c: "3" } }), h1);
  assert.notEqual(inputsHash("blog", { b: 2, a: { d: [1, { y: 2, x: 1 }], c: "3" } }), h1);
  assert.notEqual(inputsHash("blog", { n: 1 }), inputsHash("blog", { n: "1" }));
  assert.notEqual(inputsHash("blog", { d: [1, 2] }), inputsHash("blog", { d: [2, 1] }), "list order matters");
  assert.equal(inputsHash("blog", { a: 1, u: undefined }), inputsHash("blog", { a: 1 }));
});

// ---------------------------------------------------------------------------------------------
// classifier.ts

function tenSystems(): LoadedSystem[] {
  const out: LoadedSystem[] = [];
  const topics = [
    "blog posts",
    "weekly reports",
    "invoices",
    "server backups",
    "news digests",
    "social posts",
    "meeting notes",
    "sales leads",
    "support tickets",
    "release notes",
  ];
  topics.forEach((t, i) => {
    out.push(
      sys({
        id: `system-${i}`,
        name: `System ${i} ${t}`,
        description: `Creates or processes ${t} for the team and posts the result where it belongs, with a short summary.`,
        examples: [
          `make ${t} about X`,
          `run the ${t} for Y`,
          `please do ${t} now`,
          `a fourth example that is never shown`,
        ],
        inputs: {
          type: "object",
          properties: {
            topic: { type: "string", description: `What the ${t} are about` },
            tone: { type: "string", enum: ["formal", "casual", "technical"], description: "Writing tone" },
            count: { type: "integer", description: "How many" },
          },
          required: ["topic"],
        },
      }),
    );
  });
  return out;
}

test("classifierPrompt: lists systems and rules, stays compact", (t) => {
  const systems = tenSystems();
  const p = classifierPrompt({ systems, userText: "write a blog post about AI", recent: [] });
  for (const s of systems) {
    assert.ok(p.system.includes(`- ${s.id} "${s.name}": ${s.description}`), s.id);
  }
  assert.ok(
    p.system.includes('e.g. "make blog posts about X"; "run the blog posts for Y"; "please do blog posts now"'),
  );
  assert.ok(!p.system.includes("a fourth example"), "at most three examples per system");
  assert.ok(
    p.system.includes(
      "inputs: topic (string, required) What the blog posts are about; tone (string: formal|casual|technical) Writing tone; count (integer) How many",
    ),
  );
  for (const word of [
    "answer:",
    "run:",
    "cancel:",
    "status:",
    "Never invent",
    "ONLY a JSON object",
    '"confidence":0..1',
  ])
    assert.ok(p.system.includes(word), word);
  assert.ok(!p.system.includes("Now collecting"), "no gathering block when not gathering");
  assert.equal(p.user, "Message:\nwrite a blog post about AI");
  const size = p.system.length + p.user.length;
  t.diagnostic(`classifier prompt for 10 systems: ${size} characters`);
  assert.ok(size < 6000, `prompt for 10 systems is ${size} characters`);
});

test("classifierPrompt: recent turns clipped and limited; gathering block; systems without inputs", () => {
  const systems = [
    sys({ id: "backup", name: "Backup", description: "Backs up the server" }),
    ...tenSystems().slice(0, 1),
  ];
  const recent = Array.from({ length: 9 }, (_, i) => ({
    role: (i % 2 ? "assistant" : "user") as "user" | "assistant",
    text: `turn ${i} ${"x".repeat(1000)}`,
  }));
  const p = classifierPrompt({
    systems,
    userText: "casual please",
    recent,
    gathering: { system: systems[1]!, collected: { topic: "AI" }, missing: ["tone"] },
  });
  assert.ok(p.system.includes('- backup "Backup": Backs up the server\n  inputs: none'));
  assert.ok(p.system.includes('Now collecting inputs for system-0. Collected: {"topic":"AI"}. Missing: tone.'));
  assert.ok(p.system.includes("clearly an unrelated question"));
  const lines = p.user.split("\n");
  assert.equal(lines[0], "Recent turns:");
  const turnLines = lines.filter((l) => /^(user|assistant): turn/.test(l));
  assert.equal(turnLines.length, 6);
  assert.ok(turnLines[0]!.startsWith("assistant: turn 3 "), "the last six turns are kept");
  for (const l of turnLines) assert.ok(l.length <= "assistant: ".length + 400, `clipped: ${l.length}`);
  assert.ok(p.user.endsWith("Message:\ncasual please"));
  const long = classifierPrompt({ systems, userText: `${"a".repeat(5000)}END`, recent: [] });
  assert.ok(long.user.includes("characters left out"));
  assert.ok(long.user.endsWith("END"), "the end of a long message is kept");
});

test("parseClassifierReply: reads JSON in fences, prose, nested objects and strings with braces", () => {
  const known = new Set(["content-pipeline", "backup"]);
  const cases: Array<[string, ClassifierReply]> = [
    [
      '{"action":"run","system":"content-pipeline","confidence":0.9,"inputs":{"topic":"AI"}}',
      { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { topic: "AI" } },
    ],
    [
      '```json\n{"action":"answer","system":null,"confidence":0.8,"inputs":{}}\n```',
      { action: "answer", confidence: 0.8, inputs: {} },
    ],
    [
      'Sure! Here is my answer: {"action": "RUN", "system": "Content-Pipeline", "confidence": "0.8", "inputs": {"topic": "a {curly} topic", "meta": {"deep": {"x": 1}}}} Hope that helps {',
      {
        action: "run",
        system: "content-pipeline",
        confidence: 0.8,
        inputs: { topic: "a {curly} topic", meta: { deep: { x: 1 } } },
      },
    ],
    [
      '{"action":"run","system":"backup","confidence":85,"inputs":{}}',
      { action: "run", system: "backup", confidence: 0.85, inputs: {} },
    ],
    [
      '{"action":"run","system":"backup","confidence":"85%","inputs":{}}',
      { action: "run", system: "backup", confidence: 0.85, inputs: {} },
    ],
    [
      '{"action":"run","system":"backup","confidence":250,"inputs":{}}',
      { action: "run", system: "backup", confidence: 1, inputs: {} },
    ],
    [
      '{"action":"run","system":"backup","confidence":-3,"inputs":{}}',
      { action: "run", system: "backup", confidence: 0, inputs: {} },
    ],
    [
      '{"action":"run","system":"backup","inputs":{}}',
      { action: "run", system: "backup", confidence: 0.5, inputs: {} },
    ],
    ['{"action":"answer"}', { action: "answer", confidence: 0, inputs: {} }],
    [
      '{"action":"trigger","system":"backup","confidence":0.7,"inputs":"none"}',
      { action: "run", system: "backup", confidence: 0.7, inputs: {} },
    ],
    [
      '{"action":"execute","system":"backup","confidence":0.7,"inputs":[1]}',
      { action: "run", system: "backup", confidence: 0.7, inputs: {} },
    ],
    ['{"action":"direct-answer","confidence":0.9}', { action: "answer", confidence: 0.9, inputs: {} }],
    ['{"action":"direct_answer","confidence":0.9}', { action: "answer", confidence: 0.9, inputs: {} }],
    ['{"action":"Direct","confidence":0.9}', { action: "answer", confidence: 0.9, inputs: {} }],
    ['{"action":"chat","confidence":0.9}', { action: "answer", confidence: 0.9, inputs: {} }],
    ['{"action":"cancel","confidence":0.95}', { action: "cancel", confidence: 0.95, inputs: {} }],
    [
      '{"action":"status","system":"backup","confidence":0.6}',
      { action: "status", system: "backup", confidence: 0.6, inputs: {} },
    ],
    // invented ids
    [
      '{"action":"run","system":"blog-writer","confidence":0.99,"inputs":{"topic":"AI"}}',
      { action: "answer", confidence: 0, inputs: {} },
    ],
    [
      '{"action":"run","system":null,"confidence":0.9,"inputs":{"topic":"AI"}}',
      { action: "answer", confidence: 0, inputs: {} },
    ],
    ['{"action":"run","confidence":0.9}', { action: "answer", confidence: 0, inputs: {} }],
    ['{"action":"cancel","system":"made-up","confidence":0.9}', { action: "cancel", confidence: 0.9, inputs: {} }],
    // reasoning blocks and objects before the answer
    [
      '<think>maybe {"action":"cancel"}?</think>{"action":"run","system":"backup","confidence":0.9,"inputs":{}}',
      { action: "run", system: "backup", confidence: 0.9, inputs: {} },
    ],
    [
      'Schema: {"x": 1}. Mine: {"action":"answer","confidence":0.4,"inputs":{}}',
      { action: "answer", confidence: 0.4, inputs: {} },
    ],
    ['{not json {"action":"answer","confidence":0.3}}', { action: "answer", confidence: 0.3, inputs: {} }],
    [
      '{"action":"run","system":"backup","confidence":0.9,"inputs":{"q":"say \\"hi\\" }"}}',
      { action: "run", system: "backup", confidence: 0.9, inputs: { q: 'say "hi" }' } },
    ],
  ];
  for (const [text, expected] of cases) assert.deepEqual(parseClassifierReply(text, known), expected, text);
});

test("parseClassifierReply: unreadable replies are errors", () => {
  const known = new Set(["backup"]);
  const bad: Array<[string, RegExp]> = [
    ["", /no JSON object/],
    ["I think you want the backup system.", /no JSON object/],
    ['{"action": "run", "system": "backup",}', /no JSON object/],
    ["{'action': 'run'}", /no JSON object/],
    ['{"action":"run"', /no JSON object/],
    ['{"system":"backup","confidence":1}', /no action/],
    ['{"action":"dance","confidence":1}', /unknown action "dance"/],
    ['{"action":42}', /unknown action 42/],
  ];
  for (const [text, re] of bad) {
    const r = parseClassifierReply(text, known);
    assert.ok("error" in r, `expected an error for ${JSON.stringify(text)}`);
    assert.match(r.error, re, text);
  }
});

test("retryMessage asks again for the JSON object only", () => {
  const m = retryMessage("I believe the answer is the backup system");
  assert.match(m, /could not be read/);
  assert.match(m, /I believe the answer is the backup system/);
  assert.match(m, /ONLY one JSON object/);
  assert.match(m, /"action":"answer\|run\|cancel\|status"/);
  assert.ok(retryMessage("x".repeat(5000)).length < 500, "the previous reply is clipped");
  assert.match(retryMessage(""), /empty/);
});

// ---------------------------------------------------------------------------------------------
// fallback.ts

test("parseSlash: commands, quoting, errors, and ordinary text", () => {
  const ok: Array<[string, unknown]> = [
    ["/cancel", { cmd: "cancel" }],
    ["  /CANCEL now ", { cmd: "cancel" }],
    ["/status", { cmd: "status" }],
    ["/status run_abc123", { cmd: "status", runId: "run_abc123" }],
    ["/systems", { cmd: "systems" }],
    ["/runs", { cmd: "runs" }],
    ["/run backup", { cmd: "run", system: "backup", inputs: {} }],
    ["/run Content-Pipeline topic=AI", { cmd: "run", system: "content-pipeline", inputs: { topic: "AI" } }],
    [
      "/run blog topic=\"two words\" tone='casual' words=800",
      { cmd: "run", system: "blog", inputs: { topic: "two words", tone: "casual", words: "800" } },
    ],
    ['/run blog q="say \\"hi\\"" r=\'it\\\'s\'', { cmd: "run", system: "blog", inputs: { q: 'say "hi"', r: "it's" } }],
    [
      "/run blog expr=a=b url=https://x.test/?a=1&b=2",
      { cmd: "run", system: "blog", inputs: { expr: "a=b", url: "https://x.test/?a=1&b=2" } },
    ],
    ['/run blog k="" path=C:\\temp\\x', { cmd: "run", system: "blog", inputs: { k: "", path: "C:\\temp\\x" } }],
    [
      "/run blog topic=“smart quotes” n=‘one two’",
      { cmd: "run", system: "blog", inputs: { topic: "smart quotes", n: "one two" } },
    ],
    ['/run blog topic=pre"fix more"', { cmd: "run", system: "blog", inputs: { topic: "prefix more" } }],
    ["/run blog a=1 a=2", { cmd: "run", system: "blog", inputs: { a: "2" } }],
    ["/run blog note=multi\\ word", { cmd: "run", system: "blog", inputs: { note: "multi word" } }],
  ];
  for (const [text, expected] of ok) assert.deepEqual(parseSlash(text), expected, text);

  const errors: Array<[string, RegExp]> = [
    ["/run", /usage: \/run <system>/],
    ["/run   ", /usage/],
    ["/run topic=AI", /name the system first/],
    ["/run blog topic", /expected name=value, got "topic"/],
    ["/run blog =x", /expected name=value, got "=x"/],
    ["/run blog 9a=1", /expected name=value/],
    ['/run blog topic="unclosed', /unclosed quote/],
  ];
  for (const [text, re] of errors) {
    const r = parseSlash(text);
    assert.ok(r && "error" in r, `expected an error for ${text}`);
    assert.match(r.error, re, text);
  }

  for (const text of ["run backup", "hello /run backup", "/running late", "/runner", "/statusx", "/help", "", "/"]) {
    assert.equal(parseSlash(text), null, text);
  }
});

test("words: whole words, possessives, apostrophes", () => {
  assert.deepEqual(words("Today's NEWS: don't add—the address!"), ["today", "news", "don't", "add", "the", "address"]);
  assert.deepEqual(words("Crème brûlée, naïve café 42"), ["crème", "brûlée", "naïve", "café", "42"]);
});

test("fallbackMatch: word boundaries only", () => {
  const add = sys({ id: "adder", name: "Adder", keywords: ["add"] });
  const news = sys({ id: "digest", name: "Digest", keywords: ["new"] });
  const how = sys({ id: "explainer", name: "Explainer", keywords: ["how"] });
  const all = [add, news, how];
  assert.equal(fallbackMatch("what is the address of the office?", all), null, "address is not add");
  assert.equal(fallbackMatch("any news today?", all), null, "news is not new");
  assert.equal(fallbackMatch("show me the dashboard", all), null, "show is not how");
  assert.equal(fallbackMatch("additional info please", all), null, "additional is not add");
  assert.equal(fallbackMatch("add 3 items", all)?.system, "adder");
  assert.equal(fallbackMatch("what's new?", all)?.system, "digest");
  assert.equal(fallbackMatch("How does it work", all)?.system, "explainer");
});

test("fallbackMatch: ids, names, keyword phrases and examples; ties give null; confidence in [0.4, 0.7]", () => {
  const blog = sys({
    id: "content-pipeline",
    name: "Content Pipeline",
    keywords: ["blog post", "article"],
    examples: ["write a blog post about X", "draft an article on <topic>"],
  });
  const backup = sys({
    id: "backup",
    name: "Server Backup",
    keywords: ["backup", "snapshot"],
    examples: ["back up the production database"],
  });
  const systems = [blog, backup];

  const byId = fallbackMatch("please run the content pipeline", systems);
  assert.equal(byId?.system, "content-pipeline");
  assert.match(byId!.matched, /id "content-pipeline"/);

  const byName = fallbackMatch("start a server backup", systems);
  assert.equal(byName?.system, "backup");
  assert.match(byName!.matched, /name "Server Backup"/);
  assert.match(byName!.matched, /keyword "backup"/);

  const byExample = fallbackMatch("back up production database tonight", systems);
  assert.equal(byExample?.system, "backup");
  assert.match(byExample!.matched, /example "back up the production database"/);

  const strong = fallbackMatch("write a blog post about the content pipeline article", systems);
  assert.equal(strong?.system, "content-pipeline");
  assert.equal(strong!.confidence, 0.7, "capped at 0.7");

  const weak = fallbackMatch("an article", systems);
  assert.deepEqual(weak, { system: "content-pipeline", confidence: 0.4, matched: 'keyword "article"' });

  const phrase = sys({ id: "p1", keywords: ["blog post"] });
  const single = sys({ id: "p2", keywords: ["post"] });
  assert.deepEqual(
    fallbackMatch("a blog post", [phrase, single]),
    { system: "p1", confidence: 0.5, matched: 'keyword "blog post"' },
    "a two-word phrase counts two: the more specific match wins",
  );
  assert.equal(fallbackMatch("post it", [phrase, single])?.system, "p2");
  assert.equal(
    fallbackMatch("blog post", systems)?.confidence,
    0.6,
    "keyword phrase (2) and a strong example overlap (1)",
  );

  // Placeholders and common words do not make an overlap.
  assert.equal(fallbackMatch("write about X", [sys({ id: "zz", examples: ["write a blog post about X"] })]), null);

  assert.equal(fallbackMatch("hello there", systems), null);
  assert.equal(fallbackMatch("", systems), null);
  assert.equal(fallbackMatch("backup", []), null);

  // Equal evidence for two systems: ambiguous, no guess.
  const a = sys({ id: "alpha", keywords: ["report"] });
  const b = sys({ id: "beta", keywords: ["report"] });
  assert.equal(fallbackMatch("send the report", [a, b]), null);
  assert.equal(fallbackMatch("send the report alpha", [a, b])?.system, "alpha");

  for (const text of [
    "content pipeline",
    "blog post article content pipeline backup",
    "snapshot",
    "write a blog post about cats",
    "back up the production database now",
  ]) {
    const m = fallbackMatch(text, systems);
    if (m) assert.ok(m.confidence >= 0.4 && m.confidence <= 0.7, `${text}: ${m.confidence}`);
  }
});

test("fallbackMatch: a chat-built system (an id of the request's words, the Architect's examples) is found by its examples' words", () => {
  // As the builder deploys one: an id and name that a person does not say, examples with real values.
  const built = sys({
    id: "research-topic-write",
    name: "Research & Blog",
    examples: ["write a blog post about solar power", "research electric cars and blog about them"],
  });
  const other = sys({ id: "poem", name: "Poet", examples: ["write me a poem about the sea"] });
  const m = fallbackMatch("write me a blog post about wind turbines", [built, other]);
  assert.deepEqual(m, {
    system: "research-topic-write",
    confidence: 0.4,
    matched: 'example "write a blog post about solar power"',
  });
  // Common words alone ("write me a", "about") match no example.
  assert.equal(fallbackMatch("write me a note about it", [built, other]), null);
  assert.equal(fallbackMatch("research it and write about them", [built]), null);
});

// ---------------------------------------------------------------------------------------------
// replies.ts

test("replyKind: whole-message short replies only", () => {
  const table: Array<[string, "yes" | "no" | "cancel" | null]> = [
    ["yes", "yes"],
    ["Yes!", "yes"],
    ["y", "yes"],
    ["yeah", "yes"],
    ["yep.", "yes"],
    ["yup", "yes"],
    ["sure", "yes"],
    ["OK", "yes"],
    ["okay", "yes"],
    ["go", "yes"],
    ["go ahead", "yes"],
    ["Go ahead!", "yes"],
    ["do it", "yes"],
    ["run it", "yes"],
    ["confirm", "yes"],
    ["confirmed", "yes"],
    ["please do", "yes"],
    ["sounds good", "yes"],
    ["yes please", "yes"],
    ["yes, please!", "yes"],
    ["ok thanks", "yes"],
    ["yes, go ahead", "yes"],
    ["👍", "yes"],
    ["👍🏽", "yes"],
    ["yes 👍", "yes"],
    ["  **Yes**  ", "yes"],
    ["no", "no"],
    ["No.", "no"],
    ["n", "no"],
    ["nope", "no"],
    ["nah", "no"],
    ["don't", "no"],
    ["Don’t", "no"],
    ["do not", "no"],
    ["not now", "no"],
    ["no thanks", "no"],
    ["no, thank you", "no"],
    ["👎", "no"],
    ["no no", "no"],
    ["cancel", "cancel"],
    ["Cancel.", "cancel"],
    ["never mind", "cancel"],
    ["nevermind", "cancel"],
    ["stop", "cancel"],
    ["STOP!", "cancel"],
    ["forget it", "cancel"],
    ["abort", "cancel"],
    ["quit", "cancel"],
    ["please stop", "cancel"],
    ["no, stop", "cancel"],
    // carries new information, or is not a reply at all
    ["no, make it casual", null],
    ["yes but change the tone", null],
    ["yes, with tone casual", null],
    ["don't stop", null],
    ["yes no", null],
    ["👍 no", null],
    ["yes, cancel", null],
    ["please", null],
    ["thanks", null],
    ["", null],
    ["?", null],
    ["do", null],
    ["yesterday", null],
    ["notification", null],
    ["go to the address", null],
    ["okay so what does this do", null],
    [`yes ${"please ".repeat(20)}`, null],
  ];
  for (const [text, expected] of table) assert.equal(replyKind(text), expected, JSON.stringify(text));
});

// ---------------------------------------------------------------------------------------------
// messages.ts

test("clarifyText: the seed's format, byte for byte", () => {
  const tone = fieldsOf(CONTENT).find((f) => f.name === "tone")!;
  assert.equal(
    clarifyText("Content Pipeline", [tone], []),
    "I can run **Content Pipeline** for you, but I need a bit more info:\n\n- **tone** (string: formal, casual, technical): Writing tone\n\nPlease provide the missing details.",
  );
  const check = checkInputs(CONTENT, { words: "lots", draft: "maybe" });
  assert.equal(
    clarifyText("Content Pipeline", check.missing, check.invalid),
    [
      "I can run **Content Pipeline** for you, but I need a bit more info:",
      "",
      "- **topic** (string): The blog post topic",
      "- **tone** (string: formal, casual, technical): Writing tone",
      '- **words** (integer): Word count — you gave "lots", which must be an integer',
      '- **draft** (boolean) — you gave "maybe", which must be true or false',
      "",
      "Please provide the missing details.",
    ].join("\n"),
  );
  // A required field with an invalid value is listed once, with the value given.
  const again = checkInputs(CONTENT, { topic: "AI", tone: "loud", words: 50 });
  assert.equal(
    clarifyText("Content Pipeline", again.missing, again.invalid),
    [
      "I can run **Content Pipeline** for you, but I need a bit more info:",
      "",
      '- **tone** (string: formal, casual, technical): Writing tone — you gave "loud", which must be one of formal, casual, technical',
      "- **words** (integer): Word count — you gave 50, which must be at least 100",
      "",
      "Please provide the missing details.",
    ].join("\n"),
  );
  assert.match(clarifyText("X", [], [], ["needs one of a, b"]), /\n- Needs one of a, b\n/);
});

test("confirmText: exactly the inputs that will run, a reason, the question", () => {
  assert.equal(
    confirmText("Content Pipeline", { topic: "AI agents", words: 800, draft: true, tags: ["a", "b"] }, "side_effects"),
    [
      "Ready to run **Content Pipeline** with:",
      "",
      "- **topic**: AI agents",
      "- **words**: 800",
      "- **draft**: true",
      '- **tags**: ["a","b"]',
      "",
      "It changes things outside this chat, so I'm checking first.",
      "",
      "Run it? (yes / no)",
    ].join("\n"),
  );
  assert.equal(
    confirmText("Backup", {}, "always"),
    "Ready to run **Backup** (it takes no inputs).\n\nThis system always asks before it runs.\n\nRun it? (yes / no)",
  );
  assert.match(confirmText("B", { a: 1 }, "unsure"), /not sure this is what you meant/);
  const long = confirmText("B", { body: `line one\nline two ${"z".repeat(500)}` }, "unsure");
  const bodyLine = long.split("\n").find((l) => l.startsWith("- **body**"))!;
  assert.ok(bodyLine.startsWith("- **body**: line one line two zzz"), "one line");
  assert.ok(bodyLine.endsWith("… (518 characters)"), bodyLine.slice(-40));
  assert.ok(bodyLine.length < 260);
});

test("running and step lines", () => {
  assert.equal(runningLine("Content Pipeline"), "Running **Content Pipeline**…");
  assert.equal(stepLine({ kind: "completed", step: "fetch", ms: 1234 }), "- ✓ `fetch` done (1.2 s)");
  assert.equal(stepLine({ kind: "completed", step: "fetch" }), "- ✓ `fetch` done");
  assert.equal(
    stepLine({ kind: "retry", step: "fetch", error: "timeout", delayMs: 1000, attempt: 2, maxAttempts: 4 }),
    "- ↻ `fetch` failed: timeout — retrying in 1.0 s (attempt 2 of 4)",
  );
  assert.equal(
    stepLine({ kind: "retry", step: "fetch", error: "HTTP 503", delayMs: 2000, attempt: 3 }),
    "- ↻ `fetch` failed: HTTP 503 — retrying in 2.0 s (attempt 3)",
  );
  assert.equal(
    stepLine({ kind: "failed", step: "fetch", error: "HTTP 404 Not Found", ms: 300 }),
    "- ✗ `fetch` failed: HTTP 404 Not Found (0.3 s)",
  );
  assert.equal(
    stepLine({ kind: "failed", step: "fetch", error: "line1\nline2", ms: 0 }),
    "- ✗ `fetch` failed: line1 line2 (0.0 s)",
  );
  assert.equal(
    stepLine({ kind: "skipped", step: "post", error: "fetch failed" }),
    "- ⤼ `post` skipped: `fetch` failed",
  );
  assert.equal(
    stepLine({ kind: "skipped", step: "post", error: "fetch was skipped" }),
    "- ⤼ `post` skipped: `fetch` was skipped",
  );
  assert.equal(stepLine({ kind: "skipped", step: "post" }), "- ⤼ `post` skipped");
});

test("systems list, cancel, give up, decline", () => {
  const list = systemsListText([
    sys({ id: "content-pipeline", name: "Content Pipeline", description: "Writes a blog post.", inputs: CONTENT }),
    sys({ id: "backup" }),
  ]);
  assert.equal(
    list,
    "Systems you can run:\n\n- **Content Pipeline** (`content-pipeline`): Writes a blog post. — needs topic, tone\n- **backup**\n\nAsk in your own words, or use `/run <id> name=value`.",
  );
  assert.equal(systemsListText([]), "No systems are set up yet.");
  assert.equal(cancelledText("Content Pipeline"), "OK, cancelled **Content Pipeline**.");
  assert.equal(declinedText("Backup"), "OK, I won't run **Backup**.");
  assert.equal(
    giveUpText("Backup", "rounds", 3),
    "I still don't have everything **Backup** needs, so I've stopped asking after 3 tries. Nothing was run — just ask again whenever you're ready.",
  );
  assert.equal(
    giveUpText("Backup"),
    "I still don't have everything **Backup** needs, so I've stopped asking. Nothing was run — just ask again whenever you're ready.",
  );
  assert.match(giveUpText("Backup", "expired"), /it has been a while, so I've stopped asking\. Nothing was run/);
});
