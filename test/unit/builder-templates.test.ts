/**
 * Templates in a build plan: one language (src/workflows/engine/template.ts) for the plan and the
 * system it builds. At build time `renderOwnSteps` resolves `${steps.ID.output…}` of the plan's own
 * steps and `$${`, in one pass, and leaves every other `${…}` as written for the system;
 * `validatePlan` (src/workflows/builder/plan-check.ts) refuses a result used by a step that does not
 * depend on it, a reference that could mean the plan's step or the system's, and a node param left
 * with a template.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { validatePlan } from "../../src/workflows/builder/plan-check.js";
import type { BuildStep, ExecutionPlan } from "../../src/workflows/builder/types.js";
import { renderOwnSteps, renderValue, TemplateError } from "../../src/workflows/engine/template.js";
import type { Canvas } from "../../src/wire/canvas.js";

const OWN = ["add_writer", "link", "notes", "info"];
const OUTPUTS = { add_writer: "writer", link: "e-1", info: { node: { id: "n-7" }, n: 3 } };

function plan(steps: Array<Partial<BuildStep> & Pick<BuildStep, "id" | "action">>): ExecutionPlan {
  return {
    metadata: { system: "blog", name: "", description: "", summary: "" },
    steps: steps.map((s) => ({ name: s.id, params: {}, dependsOn: [], retryCount: 3, retryDelayMs: 1000, ...s })),
  };
}

describe("renderOwnSteps: what a build resolves", () => {
  test("its own steps' results, field paths, a whole-string reference keeping its type", () => {
    const params = {
      from: "${steps.add_writer.output}",
      list: ["${steps.add_writer.output}-${steps.link.output}", 3, false, null],
      id: "${steps.info.output.node.id}",
      n: "${steps.info.output.n}",
    };
    assert.deepEqual(renderOwnSteps(params, OWN, OUTPUTS), {
      from: "writer",
      list: ["writer-e-1", 3, false, null],
      id: "n-7",
      n: 3,
    });
    assert.equal(params.from, "${steps.add_writer.output}", "the plan itself is untouched");
  });

  test("one pass: $${ is a literal ${, and a result is not read again", () => {
    assert.equal(renderOwnSteps("$${steps.link.output} $${HOME}", OWN, OUTPUTS), "${steps.link.output} ${HOME}");
    assert.equal(renderOwnSteps("$$${inputs.x}", OWN, OUTPUTS), "$${inputs.x}");
    assert.equal(
      renderOwnSteps("${steps.link.output}", OWN, { link: "${steps.add_writer.output}" }),
      "${steps.add_writer.output}",
    );
  });

  test("a system's templates are carried through unchanged, and so is anything that is no reference", () => {
    const system = {
      prompt: "Write about ${inputs.topic} using ${steps.research.output} for run ${run.id}",
      argv: ["echo", "${steps.research.output.title}"],
      shell: "cd ${HOME} && echo ${1:-x} ${ unclosed",
      "${steps.link.output}": "keys are never templates",
    };
    const built = renderOwnSteps(system, OWN, OUTPUTS);
    assert.deepEqual(built, system);
    // …and the system then resolves them as its own.
    assert.equal(
      renderValue(built.prompt, { inputs: { topic: "owls" }, steps: { research: { output: "notes" } }, runId: "r1" }),
      "Write about owls using notes for run r1",
    );
  });

  test("a plan step with no result yet is an error that names it; an own __proto__ key stays a key", () => {
    assert.throws(() => renderOwnSteps("${steps.notes.output}", OWN, OUTPUTS), /step "notes" has no output yet/);
    assert.throws(() => renderOwnSteps("${steps.link.output.x}", OWN, OUTPUTS), TemplateError);
    const proto = renderOwnSteps(
      JSON.parse('{"__proto__": {"x": "${steps.link.output}"}}') as Record<string, unknown>,
      OWN,
      OUTPUTS,
    );
    assert.deepEqual(Object.keys(proto), ["__proto__"]);
    assert.equal(Object.getPrototypeOf(proto), Object.prototype);
  });
});

describe("validatePlan: templates in a build plan", () => {
  test("a system's templates in node properties and files pass as written", () => {
    const p = plan([
      { id: "add_research", action: "CREATE_NODE", params: { type: "agent", id: "research", label: "Research" } },
      {
        id: "add_writer",
        action: "CREATE_NODE",
        params: {
          type: "agent",
          id: "writer",
          label: "Writer",
          properties: { prompt: "Write about ${inputs.topic} from ${steps.research.output}" },
        },
      },
      { id: "f", action: "CREATE_FILE", params: { path: "run.sh", content: "cd ${HOME} && echo $${HOME}" } },
    ]);
    assert.deepEqual(validatePlan(p), []);
  });

  test("a plan step's result used by a step that does not depend on it is refused", () => {
    const problems = validatePlan(
      plan([
        { id: "add_a", action: "CREATE_NODE", params: { type: "agent", label: "A" } },
        { id: "add_b", action: "CREATE_NODE", params: { type: "agent", label: "B" } },
        {
          id: "link",
          action: "CONNECT_NODES",
          params: { from: "${steps.add_a.output}", to: "${steps.add_b.output}" },
          dependsOn: ["add_a"],
        },
      ]),
    );
    assert.deepEqual(problems, [
      'step "link": ${steps.add_b.output}: this step does not depend on step "add_b" (add it to dependsOn)',
    ]);
  });

  test("the ambiguous case: a plan step named like a node, referred to in node properties", () => {
    const canvas: Canvas = {
      system: "blog",
      name: "Blog",
      description: "",
      status: "draft",
      version: 1,
      nodes: [{ id: "research", type: "agent", label: "Research", properties: {}, position: { x: 0, y: 0 } }],
      edges: [],
      settings: {},
      updatedAt: 0,
    };
    const edit = (prompt: string): ExecutionPlan =>
      plan([
        { id: "research", action: "UPDATE_NODE", params: { node: "research", properties: { model: "m" } } },
        {
          id: "add_writer",
          action: "CREATE_NODE",
          params: { type: "agent", id: "writer", label: "Writer", properties: { prompt } },
          dependsOn: ["research"],
        },
      ]);
    const problems = validatePlan(edit("Use ${steps.research.output}"), { canvas });
    assert.equal(problems.length, 1, JSON.stringify(problems));
    assert.match(problems[0]!, /^step "add_writer": \$\{steps\.research\.output\} in params\.properties is ambiguous/);
    assert.match(problems[0]!, /give the plan step another id/);
    assert.match(problems[0]!, /write \$\$\{steps\.research\.output\}/);
    // Escaped, it is left to the system: no problem, and the build writes the system's reference.
    const escaped = edit("Use $${steps.research.output}");
    assert.deepEqual(validatePlan(escaped, { canvas }), []);
    assert.deepEqual(
      renderOwnSteps(escaped.steps[1]!.params, ["research", "add_writer"], { research: "research" }).properties,
      { prompt: "Use ${steps.research.output}" },
    );
  });

  test("a node param left with a template (an old ${name}, a system reference) is refused", () => {
    const problems = validatePlan(
      plan([
        { id: "add_a", action: "CREATE_NODE", params: { type: "agent", label: "A" } },
        { id: "link", action: "CONNECT_NODES", params: { from: "${a_node}", to: "${steps.nowhere.output}" } },
      ]),
    );
    assert.equal(problems.length, 2, JSON.stringify(problems));
    assert.match(problems[0]!, /^step "link": params\.from "\$\{a_node\}" is not a node id: write the node's id, or/);
    assert.match(problems[1]!, /params\.to "\$\{steps\.nowhere\.output\}" is not a node id/);
    assert.match(problems[1]!, /\(steps: add_a, link\)/);
  });
});
