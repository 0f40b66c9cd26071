/**
 * The one graph checker (src/workflows/engine/graph.ts): ids used twice, unknown and self
 * dependencies, every cycle once, ancestors through others, a stable order (none with a cycle), and
 * whether a step may use another step's output. Its callers' wording is tested with them
 * (systems-library, builder-architect, builder-compile).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkGraph, useProblem, type GraphStep } from "../../src/workflows/engine/graph.js";

const g = (spec: Record<string, string[]>): GraphStep[] =>
  Object.entries(spec).map(([id, dependsOn]) => ({ id, dependsOn }));

describe("checkGraph", () => {
  test("a diamond: no problem, ancestors through others, dependency order", () => {
    const graph = checkGraph(g({ d: ["b", "c"], b: ["a"], c: ["a"], a: [] }));
    assert.deepEqual(graph.problems, []);
    assert.deepEqual(graph.cycles, []);
    assert.deepEqual([...graph.ancestors.get("d")!].sort(), ["a", "b", "c"]);
    assert.deepEqual([...graph.ancestors.get("a")!], []);
    assert.deepEqual(graph.order, ["a", "b", "c", "d"]);
  });

  test("the order is stable: list order where steps are free", () => {
    assert.deepEqual(checkGraph(g({ x: [], y: [], z: [] })).order, ["x", "y", "z"]);
    assert.deepEqual(checkGraph(g({ c: ["b"], b: ["a"], a: [] })).order, ["a", "b", "c"]);
  });

  test("each cycle once, first id repeated; no order; ancestors still given", () => {
    const graph = checkGraph(g({ x: [], y: ["z"], z: ["y"], a: ["b"], b: ["c"], c: ["a"] }));
    assert.deepEqual(graph.cycles, [
      ["y", "z", "y"],
      ["a", "b", "c", "a"],
    ]);
    assert.equal(graph.order, undefined);
    assert.deepEqual(
      graph.problems.map((p) => [p.key, p.message]),
      [
        [
          "steps",
          "steps depend on each other in a cycle: y → z → y (each depends on the next); remove one of these dependencies",
        ],
        [
          "steps",
          "steps depend on each other in a cycle: a → b → c → a (each depends on the next); remove one of these dependencies",
        ],
      ],
    );
    assert.deepEqual([...graph.ancestors.get("a")!].sort(), ["a", "b", "c"]);
  });

  test("ids twice, unknown and self dependencies name the step and the key", () => {
    const graph = checkGraph([
      { id: "a", dependsOn: [] },
      { id: "b", dependsOn: ["nope", "b"] },
      { id: "a", dependsOn: [] },
      { id: "a", dependsOn: [] },
    ]);
    assert.deepEqual(graph.problems, [
      {
        index: 1,
        key: "dependsOn",
        message: 'unknown step "nope" (steps: a, b): use a step\'s id or drop it from dependsOn',
      },
      { index: 1, key: "dependsOn", message: 'a step cannot depend on itself: remove "b" from its dependsOn' },
      { index: 2, key: "id", message: 'step id "a" is used 3 times: give each step its own id' },
    ]);
    // A step on itself is a cycle too (systems that use themselves are a loop), said once as a problem.
    assert.deepEqual(graph.cycles, [["b", "b"]]);
  });
});

describe("useProblem", () => {
  const graph = checkGraph(g({ a: [], b: ["a"], c: ["b"], d: [] }));
  test("a step may use what it depends on, directly or through others", () => {
    assert.equal(useProblem(graph, "b", "a"), undefined);
    assert.equal(useProblem(graph, "c", "a"), undefined);
  });
  test("not an ancestor, itself, no such step: each says what to fix", () => {
    assert.equal(useProblem(graph, "d", "a"), 'this step does not depend on step "a" (add it to dependsOn)');
    assert.equal(useProblem(graph, "a", "a"), "a step cannot use its own output");
    assert.equal(useProblem(graph, "a", "zz"), 'there is no step "zz" (steps: a, b, c, d)');
  });
});
