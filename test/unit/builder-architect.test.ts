/**
 * The builder's Architect (src/workflows/builder/architect.ts) and plan check (src/workflows/builder/plan-check.ts):
 * reading a plan from a model's reply, its defaults, validation (order, cycles, references to the
 * plan's steps, params, hooks, node ids on an edited canvas), the repair message, the wave order.
 * How a build resolves its templates: test/unit/builder-templates.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  architectPrompt,
  examplePlan,
  parsePlan,
  repairRequest,
  type ArchitectContext,
} from "../../src/workflows/builder/architect.js";
import { validatePlan } from "../../src/workflows/builder/plan-check.js";
import type { BuildStep, ExecutionPlan } from "../../src/workflows/builder/types.js";
import type { Canvas } from "../../src/wire/canvas.js";

type StepIn = Omit<Partial<BuildStep>, "action"> & { id: string; action: string };

function step(p: StepIn): BuildStep {
  return { name: p.id, params: {}, dependsOn: [], retryCount: 3, retryDelayMs: 1000, ...p } as BuildStep;
}

function plan(steps: StepIn[], system = "demo"): ExecutionPlan {
  return { metadata: { system, name: "", description: "", summary: "" }, steps: steps.map(step) };
}

const node = (id: string, extra: Record<string, unknown> = {}): StepIn => ({
  id,
  action: "CREATE_NODE",
  params: { type: "agent", label: id, ...extra },
});

const connect = (id: string, from: string, to: string, dependsOn: string[]): StepIn => ({
  id,
  action: "CONNECT_NODES",
  params: { from, to },
  dependsOn,
});

function parsed(text: string): ExecutionPlan {
  const r = parsePlan(text, { system: "fallback-id" });
  assert.ok("plan" in r, `expected a plan, got ${JSON.stringify(r)}`);
  return r.plan;
}

function errorsOf(text: string): string[] {
  const r = parsePlan(text, { system: "fallback-id" });
  assert.ok("errors" in r, `expected errors, got a plan`);
  return r.errors;
}

/** Exactly one problem matching every pattern. */
function hasProblem(problems: string[], ...patterns: RegExp[]): void {
  const hits = problems.filter((p) => patterns.every((re) => re.test(p)));
  assert.equal(
    hits.length,
    1,
    `expected one problem matching ${patterns.join(" & ")} in ${JSON.stringify(problems, null, 1)}`,
  );
}

// ---------------------------------------------------------------------------------------------
// parsePlan

const PLAN_JSON = JSON.stringify({
  metadata: { system: "blog", name: "Blog", description: "Writes posts", summary: "Research then write." },
  steps: [
    {
      id: "a",
      action: "CREATE_NODE",
      params: { type: "agent", label: "Researcher {x}", properties: { prompt: "Use {{topic}} } and {" } },
      output: "a_node",
    },
    {
      id: "b",
      name: "Writer",
      action: "create-node",
      params: { type: "agent", label: "Writer" },
      output: "b_node",
      dependsOn: [],
      retryCount: 9,
      retryDelayMs: 999999,
    },
    {
      id: "c",
      action: "connect_nodes",
      params: { from: "${steps.a.output}", to: "${steps.b.output}" },
      dependsOn: ["a", "b", "a"],
      retryCount: -2,
      retryDelayMs: -5,
    },
  ],
});

test("parsePlan: plain, fenced, with prose around it, braces inside strings", () => {
  const plain = parsed(PLAN_JSON);
  assert.equal(plain.steps.length, 3);
  assert.equal(plain.steps[0]!.params.label, "Researcher {x}");
  assert.deepEqual(parsed("```json\n" + PLAN_JSON + "\n```"), plain);
  assert.deepEqual(parsed(`Here is the plan {as asked}:\n\n${PLAN_JSON}\n\nIt uses {{topic}}. Let me know!`), plain);
  assert.deepEqual(parsed(`<think>maybe {"steps": []}</think>${PLAN_JSON}`), plain);
  assert.deepEqual(parsed(JSON.stringify({ plan: JSON.parse(PLAN_JSON) })), plain);
});

test("parsePlan: defaults and clamping", () => {
  const p = parsed(PLAN_JSON);
  assert.deepEqual(p.metadata, {
    system: "blog",
    name: "Blog",
    description: "Writes posts",
    summary: "Research then write.",
    examples: [],
    keywords: [],
  });
  const [a, b, c] = p.steps;
  assert.deepEqual(a, {
    id: "a",
    name: "a",
    action: "CREATE_NODE",
    params: { type: "agent", label: "Researcher {x}", properties: { prompt: "Use {{topic}} } and {" } },
    dependsOn: [],
    retryCount: 3,
    retryDelayMs: 1000,
  });
  assert.equal(b!.name, "Writer");
  assert.equal(b!.action, "CREATE_NODE");
  assert.equal(b!.retryCount, 3);
  assert.equal(b!.retryDelayMs, 60_000);
  assert.equal(c!.action, "CONNECT_NODES");
  assert.deepEqual(c!.dependsOn, ["a", "b"]);
  assert.equal(c!.retryCount, 0);
  assert.equal(c!.retryDelayMs, 0);
  assert.equal("output" in a!, false, "an old-style output name is not kept");

  const bare = parsed(
    '{"steps":[{"id":"x","action":"DELETE_NODE","params":{"node":"w"},"dependsOn":"y"},{"id":"y","action":"DELETE_NODE"}]}',
  );
  assert.deepEqual(bare.metadata, {
    system: "fallback-id",
    name: "",
    description: "",
    summary: "",
    examples: [],
    keywords: [],
  });
  // Examples and keywords: strings only, trimmed, blanks and repeats (any case) dropped, at most 4 and 6.
  const listed = parsed(
    JSON.stringify({
      metadata: {
        examples: [" write a post about X ", "", 7, "WRITE A POST ABOUT X", "b", "c", "d", "e"],
        keywords: ["blog", "Blog", "post", null, "a", "b", "c", "d", "e"],
      },
      steps: [],
    }),
  );
  assert.deepEqual(listed.metadata.examples, ["write a post about X", "b", "c", "d"]);
  assert.deepEqual(listed.metadata.keywords, ["blog", "post", "a", "b", "c", "d"]);
  assert.deepEqual(parsed('{"metadata":{"examples":"one","keywords":{}},"steps":[]}').metadata.examples, []);
  assert.deepEqual(bare.steps[0]!.dependsOn, ["y"]);
  assert.deepEqual(bare.steps[1]!.params, {});
});

test("parsePlan: shape problems name the step", () => {
  assert.deepEqual(errorsOf('{"metadata":{},"steps":{"a":1}}'), ["steps: expected an array of steps"]);
  const errs = errorsOf(
    JSON.stringify({
      steps: [
        { id: "ok", action: "DELETE_NODE", params: { node: "x" } },
        { action: "DELETE_NODE", params: {} },
        { id: "noact", params: {} },
        { id: "badparams", action: "DELETE_NODE", params: ["x"] },
        "not a step",
        { id: "baddeps", action: "DELETE_NODE", dependsOn: [{}] },
      ],
    }),
  );
  hasProblem(errs, /^steps\[1\]\.id: missing/);
  hasProblem(errs, /^steps\[2\] \("noact"\)\.action: missing/);
  hasProblem(errs, /^steps\[3\] \("badparams"\)\.params: expected an object, got an array/);
  hasProblem(errs, /^steps\[4\]: expected an object/);
  hasProblem(errs, /^steps\[5\] \("baddeps"\)\.dependsOn/);
  assert.equal(errs.length, 5);
});

test("parsePlan: no JSON, no steps, broken JSON", () => {
  assert.deepEqual(errorsOf("I cannot do that."), ["no JSON object in the reply"]);
  assert.match(errorsOf('{"metadata": {"system": "x"}}')[0]!, /no steps/);
  assert.match(errorsOf('{"steps": [{"id": "a", "action": "DELETE_NODE",}]}')[0]!, /could not be read/);
});

// ---------------------------------------------------------------------------------------------
// validatePlan (the Builder runs steps in dependency order: test/integration/builder.test.ts)

test("validatePlan: a plan listed out of order is valid", () => {
  const p = plan([
    connect("link", "${steps.make_a.output}", "${steps.make_b.output}", ["make_a", "make_b"]),
    node("make_b"),
    node("make_a"),
  ]);
  assert.deepEqual(validatePlan(p), []);
});

test("validatePlan: a diamond is valid", () => {
  const p = plan([
    node("top"),
    node("left"),
    node("right"),
    connect("l", "${steps.top.output}", "${steps.left.output}", ["top", "left"]),
    connect("r", "${steps.top.output}", "${steps.right.output}", ["top", "right"]),
    {
      id: "bottom",
      action: "CREATE_FILE",
      params: { path: "edges.txt", content: "${steps.l.output} ${steps.r.output}" },
      dependsOn: ["l", "r"],
    },
  ]);
  assert.deepEqual(validatePlan(p), []);
});

test("validatePlan: a cycle names its steps", () => {
  const p = plan([
    { ...node("a"), dependsOn: ["c"] },
    { ...node("b"), dependsOn: ["a"] },
    { ...node("c"), dependsOn: ["b"] },
    { ...node("solo"), dependsOn: ["solo"] },
    node("free"),
  ]);
  const problems = validatePlan(p);
  hasProblem(problems, /depend on each other in a cycle: a → c → b → a/);
  hasProblem(problems, /step "solo": a step cannot depend on itself/);
  assert.equal(problems.length, 2);
});

test("validatePlan: a plan step's result used without depending on it, or by itself", () => {
  const noDep = validatePlan(
    plan([node("a"), node("b"), connect("link", "${steps.a.output}", "${steps.b.output}", ["a"])]),
  );
  hasProblem(noDep, /step "link"/, /\$\{steps\.b\.output\}/, /does not depend on step "b" \(add it to dependsOn\)/);
  assert.equal(noDep.length, 1);

  const own = validatePlan(
    plan([{ id: "self", action: "CREATE_FILE", params: { path: "x", content: "${steps.self.output}" } }]),
  );
  hasProblem(own, /its own output/);
});

test("validatePlan: a transitive dependency is enough", () => {
  const p = plan([
    node("a"),
    {
      id: "b",
      action: "UPDATE_NODE",
      params: { node: "${steps.a.output}", properties: { prompt: "x" } },
      dependsOn: ["a"],
    },
    { id: "c", action: "DELETE_NODE", params: { node: "${steps.a.output}" }, dependsOn: ["b"] },
  ]);
  assert.deepEqual(validatePlan(p), []);
});

test("validatePlan: unknown action, unknown dependsOn, duplicate ids", () => {
  const problems = validatePlan(
    plan([{ id: "a", action: "LAUNCH_ROCKET", params: {} }, { ...node("b"), dependsOn: ["nowhere"] }, node("b")]),
  );
  hasProblem(problems, /step "a": unknown action "LAUNCH_ROCKET"/, /CREATE_NODE/);
  hasProblem(problems, /step "b": unknown step "nowhere" \(steps: a, b\): use a step's id or drop it from dependsOn/);
  hasProblem(problems, /step "b": step id "b" is used twice/);
  assert.equal(problems.length, 3);
});

test("validatePlan: params each action needs", () => {
  const problems = validatePlan(
    plan([
      { id: "n1", action: "CREATE_NODE", params: { type: "robot" } },
      { id: "n2", action: "CREATE_NODE", params: { type: "agent", label: "X", id: "Bad Id" } },
      { id: "c1", action: "CONNECT_NODES", params: { from: "a" } },
      { id: "u1", action: "UPDATE_NODE", params: { node: "a", properties: "prompt=x" } },
      { id: "d1", action: "DELETE_NODE", params: {} },
      { id: "f1", action: "CREATE_FILE", params: { path: "a.txt", content: 3 } },
      { id: "f2", action: "CREATE_FILE", params: { path: "../../etc/passwd", content: "" } },
      { id: "r1", action: "REGISTER_CAPABILITY", params: { kind: "macro", name: "x", content: "y" } },
      { id: "r2", action: "REGISTER_CAPABILITY", params: { kind: "skill", content: "y" } },
    ]),
  );
  hasProblem(problems, /step "n1"/, /"robot" is not a node type/);
  hasProblem(problems, /step "n1"/, /label is missing/);
  hasProblem(problems, /step "n2"/, /"Bad Id" is not a node id/);
  hasProblem(problems, /step "c1"/, /params\.to is missing/);
  hasProblem(problems, /step "u1"/, /params\.properties must be an object/);
  hasProblem(problems, /step "d1"/, /params\.node is missing/);
  hasProblem(problems, /step "f1"/, /content must be/);
  hasProblem(problems, /step "f2"/, /relative path inside the sandbox/);
  hasProblem(problems, /step "r1"/, /"macro" is not allowed/);
  hasProblem(problems, /step "r2"/, /params\.name is missing/);
  assert.equal(problems.length, 10);
});

test("validatePlan: a hook capability is refused with the reason", () => {
  const problems = validatePlan(
    plan([{ id: "h", action: "REGISTER_CAPABILITY", params: { kind: "hook", name: "pre", content: "rm -rf /" } }]),
  );
  assert.equal(problems.length, 1);
  assert.match(problems[0]!, /step "h"/);
  assert.match(problems[0]!, /hooks are refused: a hook runs shell commands/);
  assert.match(problems[0]!, /command node/);
  assert.deepEqual(
    validatePlan(
      plan([
        {
          id: "s",
          action: "REGISTER_CAPABILITY",
          params: { kind: "skill", name: "summarize", content: "# Summarize" },
        },
      ]),
    ),
    [],
  );
});

const CANVAS: Canvas = {
  system: "blog",
  name: "Blog",
  description: "",
  status: "draft",
  version: 3,
  nodes: [
    { id: "topic", type: "input", label: "Topic", properties: {}, position: { x: 0, y: 0 } },
    {
      id: "writer",
      type: "agent",
      label: "Writer",
      properties: { model: "fast", prompt: "Write about {{topic}}" },
      position: { x: 200, y: 0 },
    },
    { id: "result", type: "output", label: "Result", properties: {}, position: { x: 400, y: 0 } },
  ],
  edges: [
    { id: "e1", from: "topic", to: "writer" },
    { id: "e2", from: "writer", to: "result" },
  ],
  settings: {},
  updatedAt: 0,
};

test("validatePlan (EDIT): literal node ids must be on the canvas or created by a step depended on", () => {
  const ok = plan(
    [
      { id: "retone", action: "UPDATE_NODE", params: { node: "writer", properties: { prompt: "Write casually" } } },
      { id: "add", action: "CREATE_NODE", params: { type: "agent", id: "reviewer", label: "Reviewer" } },
      connect("in", "writer", "reviewer", ["add"]),
      connect("out", "${steps.add.output}", "result", ["add"]),
    ],
    "blog",
  );
  assert.deepEqual(validatePlan(ok, { canvas: CANVAS }), []);

  const bad = validatePlan(
    plan(
      [
        { id: "gone", action: "DELETE_NODE", params: { node: "editor" } },
        { id: "add", action: "CREATE_NODE", params: { type: "agent", id: "reviewer", label: "Reviewer" } },
        connect("race", "writer", "reviewer", []),
        { id: "dup", action: "CREATE_NODE", params: { type: "agent", id: "writer", label: "Writer 2" } },
      ],
      "other",
    ),
    { canvas: CANVAS },
  );
  hasProblem(bad, /step "gone"/, /"editor" is not a node on the canvas/, /writer/);
  hasProblem(bad, /step "race"/, /created by step "add"/, /add "add" to its dependsOn/);
  hasProblem(bad, /step "dup"/, /already on the canvas/);
  hasProblem(bad, /metadata\.system is "other"/);
  assert.equal(bad.length, 4);

  // without a canvas (BUILD) literal ids are not checked
  assert.deepEqual(validatePlan(plan([{ id: "gone", action: "DELETE_NODE", params: { node: "editor" } }])), []);
});

test("validatePlan: known models and systems, when given", () => {
  const p = plan([
    { id: "a", action: "CREATE_NODE", params: { type: "agent", label: "A", properties: { model: "gpt-9" } } },
    { id: "s", action: "CREATE_NODE", params: { type: "system", label: "S", properties: { system: "nope" } } },
  ]);
  assert.deepEqual(validatePlan(p), []);
  const problems = validatePlan(p, { models: ["fast", "smart"], systems: ["digest"] });
  hasProblem(problems, /step "a"/, /"gpt-9" is not a configured model/, /fast, smart/);
  hasProblem(problems, /step "s"/, /"nope" is not a deployed system/);
});

test("validatePlan: an empty plan", () => {
  hasProblem(validatePlan(plan([])), /no steps/);
});

// ---------------------------------------------------------------------------------------------
// repair, prompt

test("repairRequest: carries every error and asks for JSON only", () => {
  const msg = repairRequest('{"steps": [ ... long plan ...', [
    'step "a": unknown action "X"',
    'step "b": ${steps.y.output}: there is no step "y"',
  ]);
  assert.match(msg, /- step "a": unknown action "X"/);
  assert.match(msg, /- step "b": \$\{steps\.y\.output\}: there is no step "y"/);
  assert.match(msg, /ONLY one JSON object/);
  assert.match(msg, /it began: /);
  assert.match(repairRequest("", ["x"]), /Your reply was empty/);
  const many = repairRequest(
    "x",
    Array.from({ length: 100 }, (_, i) => `problem ${i}`),
  );
  assert.match(many, /problem 39\n- … and 60 more/);
});

const CTX: ArchitectContext = {
  request: "make a system that researches a topic with one agent and writes a post with another",
  intent: "BUILD",
  system: "research-post",
  models: [
    { id: "fast", kind: "openai" },
    { id: "coder", kind: "claude-code" },
  ],
  systems: [{ id: "digest", description: "Daily news digest" }],
  executors: { webhook: false, commands: ["pandoc", "jq"], mcp: true },
};

test("architectPrompt (BUILD): schema, actions, variable rule, what is available, the example, JSON only", () => {
  const p = architectPrompt(CTX);
  for (const t of ["input", "output", "agent", "webhook", "command", "mcp", "system"])
    assert.match(p.system, new RegExp(`^- ${t}: `, "m"));
  for (const a of ["CREATE_NODE", "CONNECT_NODES", "UPDATE_NODE", "DELETE_NODE", "CREATE_FILE", "REGISTER_CAPABILITY"])
    assert.match(p.system, new RegExp(`^- ${a} \\{`, "m"));
  assert.match(p.system, /\$\{steps\.<step id>\.output\} in params is the result of that step of this plan/);
  assert.match(p.system, /only if it depends, directly or through other steps, on that step/);
  assert.match(p.system, /\$\$\{ is a literal \$\{/);
  assert.match(p.system, /No hooks/);
  assert.match(p.system, /- fast \(openai\)\n- coder \(claude-code\)/);
  assert.match(p.system, /- digest: Daily news digest/);
  assert.match(p.system, /Webhook nodes: NOT allowed/);
  assert.match(p.system, /only these programs as argv\[0\]: pandoc, jq/);
  assert.match(p.system, /MCP nodes: allowed/);
  assert.match(p.system, /\{\{topic\}\}/);
  assert.match(p.system, /Reply with ONLY the ExecutionPlan JSON object/);
  assert.match(p.system, /"examples": \[".."\], "keywords": \[".."\]\}/);
  assert.match(p.system, /examples: 2-4 messages a person would type to run the system, with real values/);
  assert.match(p.system, /keywords: up to 6 words or short phrases/);
  assert.match(p.user, /Build a new system with id "research-post"/);
  assert.match(p.user, /researches a topic/);
  assert.doesNotMatch(p.user, /current canvas/);
});

test("architectPrompt: the example plan it shows parses and validates", () => {
  const p = architectPrompt(CTX);
  const start = p.system.indexOf("# Example");
  const shown = parsePlan(p.system.slice(start), { system: "x" });
  assert.ok("plan" in shown, JSON.stringify(shown));
  assert.equal(shown.plan.metadata.system, "research-post");
  assert.equal(shown.plan.steps.length, 5);
  assert.equal(shown.plan.metadata.examples?.length, 2, "the example shows examples and keywords");
  assert.equal(shown.plan.metadata.keywords?.length, 3);
  assert.deepEqual(validatePlan(shown.plan, { models: ["fast"] }), []);
  assert.deepEqual(validatePlan(examplePlan("s", "m")), []);
});

test("architectPrompt (EDIT): the current canvas as JSON with its node ids", () => {
  const p = architectPrompt({
    ...CTX,
    intent: "EDIT",
    system: "blog",
    canvas: CANVAS,
    sandboxFiles: ["notes.md"],
    executors: { webhook: true, commands: [], mcp: false },
  });
  assert.match(p.user, /Edit the system "blog"/);
  const json = p.user.slice(p.user.indexOf("{"), p.user.lastIndexOf("}") + 1);
  const canvas = JSON.parse(json) as { nodes: Array<{ id: string; position?: unknown }>; edges: unknown[] };
  assert.deepEqual(
    canvas.nodes.map((n) => n.id),
    ["topic", "writer", "result"],
  );
  assert.equal(canvas.nodes[0]!.position, undefined);
  assert.equal(canvas.edges.length, 2);
  assert.match(p.system, /Webhook nodes: allowed/);
  assert.match(p.system, /Command nodes: NOT allowed/);
  assert.match(p.system, /MCP nodes: NOT allowed/);
  assert.match(p.system, /Files already in the sandbox:\n- notes\.md/);
});
