/**
 * The `approval` node of a canvas (src/workflows/builder): placed like any step node
 * (canvas-ops.ts), compiled to an `approval` plan step that depends on the nodes connected to it
 * with its question's `{{name}}` converted (compile.ts), and loaded by the systems library as a
 * step without side effects; the Architect's plan check (plan-check.ts) refuses an approval node
 * without a question and an `onTimeout` that is neither policy; the Architect is told the type.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { architectPrompt, examplePlan } from "../../src/workflows/builder/architect.js";
import { createNode, emptyCanvas } from "../../src/workflows/builder/canvas-ops.js";
import { compileCanvas } from "../../src/workflows/builder/compile.js";
import { validatePlan } from "../../src/workflows/builder/plan-check.js";
import { loadSystems } from "../../src/workflows/systems/library.js";

describe("approval nodes", () => {
  test("placed on a canvas, compiled to an approval step after the nodes connected to it, loaded", async () => {
    let c = emptyCanvas("post", "Post");
    const add = (type: string, id: string, properties: Record<string, unknown> = {}) => {
      c = createNode(c, { type, id, label: id, properties }).canvas;
    };
    add("input", "topic");
    add("agent", "writer", { model: "m", prompt: "Write about {{topic}}." });
    add("approval", "check", { question: "Publish the post about {{topic}}?", timeoutSeconds: 60 });
    add("agent", "publisher", { model: "m", prompt: "Publish {{writer}} ({{check}})." });
    add("output", "result");
    const edges: Array<[string, string]> = [
      ["topic", "writer"],
      ["topic", "check"],
      ["writer", "check"],
      ["writer", "publisher"],
      ["check", "publisher"],
      ["publisher", "result"],
    ];
    c = { ...c, edges: edges.map(([from, to], i) => ({ id: `e${i}`, from, to })) };
    const r = compileCanvas(c);
    assert.ok(r.ok, JSON.stringify(!r.ok && r.problems));
    const steps = (r.system.run as { steps: Array<Record<string, unknown>> }).steps;
    const check = steps.find((s) => s.id === "check")!;
    assert.deepEqual(check, {
      id: "check",
      uses: "approval",
      with: { question: "Publish the post about ${inputs.topic}?", timeoutSeconds: 60 },
      dependsOn: ["writer"],
    });
    const { library, problems } = await loadSystems({
      configSystems: [r.system],
      models: new Map([["m", { router: false }]]),
    });
    assert.deepEqual(problems, []);
    const sys = library.get("post")!;
    assert.equal(sys.sideEffects, false, "an approval changes nothing outside the bridge");
    const step = library.plan("post").steps.find((s) => s.id === "check")!;
    assert.deepEqual(step.target, {
      kind: "leaf",
      spec: {
        kind: "approval",
        question: "Publish the post about ${inputs.topic}?",
        timeoutSeconds: 60,
        onTimeout: "reject",
      },
    });
  });

  test("the plan check wants a question and a known onTimeout", () => {
    const plan = examplePlan("post", "m");
    const node = (properties: Record<string, unknown>) => ({
      ...plan,
      steps: [
        ...plan.steps,
        {
          id: "add_check",
          name: "add check",
          action: "CREATE_NODE" as const,
          params: { type: "approval", id: "check", label: "Check", properties },
          dependsOn: [],
          retryCount: 3,
          retryDelayMs: 1000,
        },
      ],
    });
    assert.deepEqual(validatePlan(node({ question: "Go on?" }), { models: ["m"] }), []);
    assert.match(validatePlan(node({}), { models: ["m"] }).join("\n"), /an approval node needs properties.question/);
    assert.match(
      validatePlan(node({ question: "Go on?", onTimeout: "later" }), { models: ["m"] }).join("\n"),
      /properties.onTimeout must be "reject" or "approve"/,
    );
  });

  test("the Architect is told the approval node type", () => {
    const { system } = architectPrompt({
      request: "write a post and publish it after I say yes",
      intent: "BUILD",
      system: "post",
      models: [{ id: "m", kind: "openai" }],
      systems: [],
      executors: { webhook: true, commands: [], mcp: true },
    });
    assert.match(system, /- approval: the run waits until a person approves it/);
  });
});
