/**
 * The one checker of steps that depend on each other: a system's plan and the systems that use each
 * other (src/workflows/systems/library.ts), an ExecutionPlan (src/workflows/builder/plan-check.ts)
 * and a canvas's step nodes (src/workflows/builder/compile.ts). `checkGraph` finds ids used twice,
 * a dependency on no step, a step that depends on itself and every cycle, and gives each step's
 * ancestors and the order the steps can run in; `useProblem` says whether a step may use another
 * step's output (`${steps.ID.output}`: only a step it depends on, directly or through others). The
 * messages say what to fix; the caller says where (a key of a system file, a step of a plan). Pure.
 */

export interface GraphStep {
  id: string;
  dependsOn: readonly string[];
}

export interface GraphProblem {
  /** The step it is about (its index in the list); none for a cycle of several steps. */
  index?: number;
  /** Where the fix goes: the step's `id`, its `dependsOn`, or the steps as a whole. */
  key: "id" | "dependsOn" | "steps";
  message: string;
}

export interface Graph {
  problems: GraphProblem[];
  /** Each cycle once, as its ids in order with the first repeated at the end (`[a, b, a]`; itself: `[a, a]`). */
  cycles: string[][];
  /** Every step's ancestors: what it depends on, directly or through others (unknown ids left out). */
  ancestors: ReadonlyMap<string, ReadonlySet<string>>;
  /** An order the steps can run in (stable: list order where free), or undefined when there is a cycle. */
  order: string[] | undefined;
}

export function checkGraph(steps: readonly GraphStep[]): Graph {
  const deps = new Map<string, string[]>();
  const count = new Map<string, number>();
  for (const s of steps) {
    deps.set(s.id, [...new Set([...(deps.get(s.id) ?? []), ...s.dependsOn])]);
    count.set(s.id, (count.get(s.id) ?? 0) + 1);
  }
  for (const [id, d] of deps)
    deps.set(
      id,
      d.filter((x) => deps.has(x)),
    );
  const known = [...deps.keys()].join(", ");
  const problems: GraphProblem[] = [];
  const seenIds = new Map<string, number>();
  steps.forEach((s, index) => {
    const n = count.get(s.id)!;
    seenIds.set(s.id, (seenIds.get(s.id) ?? 0) + 1);
    if (seenIds.get(s.id) === 2)
      problems.push({
        index,
        key: "id",
        message: `step id "${s.id}" is used ${n === 2 ? "twice" : `${n} times`}: give each step its own id`,
      });
    for (const d of s.dependsOn) {
      if (!deps.has(d))
        problems.push({
          index,
          key: "dependsOn",
          message: `unknown step "${d}" (steps: ${known}): use a step's id or drop it from dependsOn`,
        });
    }
    if (s.dependsOn.includes(s.id))
      problems.push({
        index,
        key: "dependsOn",
        message: `a step cannot depend on itself: remove "${s.id}" from its dependsOn`,
      });
  });

  // Cycles: a depth-first walk (iterative: a plan from a model may be long), one per back edge.
  const cycles: string[][] = [];
  const state = new Map<string, 1 | 2>(); // 1 on the path, 2 done
  const seen = new Set<string>();
  for (const root of deps.keys()) {
    if (state.has(root)) continue;
    const path = [root];
    const next = [0];
    state.set(root, 1);
    while (path.length > 0) {
      const id = path[path.length - 1]!;
      const d = deps.get(id)![next[next.length - 1]!++];
      if (d === undefined) {
        state.set(id, 2);
        path.pop();
        next.pop();
      } else if (state.get(d) === 1) {
        const cycle = [...path.slice(path.indexOf(d)), d];
        const key = [...new Set(cycle)].sort().join("\u0000");
        if (!seen.has(key)) {
          seen.add(key);
          cycles.push(cycle);
          if (cycle.length > 2)
            problems.push({
              key: "steps",
              message: `steps depend on each other in a cycle: ${cycle.join(" → ")} (each depends on the next); remove one of these dependencies`,
            });
        }
      } else if (!state.has(d)) {
        state.set(d, 1);
        path.push(d);
        next.push(0);
      }
    }
  }

  const ancestors = new Map<string, Set<string>>();
  for (const id of deps.keys()) {
    const mine = new Set<string>();
    const stack = [...deps.get(id)!];
    while (stack.length > 0) {
      const d = stack.pop()!;
      if (mine.has(d)) continue;
      mine.add(d);
      stack.push(...deps.get(d)!);
    }
    ancestors.set(id, mine);
  }

  // Kahn's order, by passes over the list (stable); a pass that places nothing means a cycle.
  let order: string[] | undefined = [];
  const placed = new Set<string>();
  while (order && placed.size < deps.size) {
    const before = placed.size;
    for (const id of deps.keys()) {
      if (!placed.has(id) && deps.get(id)!.every((d) => placed.has(d))) {
        placed.add(id);
        order.push(id);
      }
    }
    if (placed.size === before) order = undefined;
  }
  return { problems, cycles, ancestors, order };
}

/** Why step `from` may not use the output of step `to`; undefined when it may. */
export function useProblem(g: Graph, from: string, to: string): string | undefined {
  if (!g.ancestors.has(to)) return `there is no step "${to}" (steps: ${[...g.ancestors.keys()].join(", ")})`;
  if (from === to) return "a step cannot use its own output";
  if (!g.ancestors.get(from)?.has(to)) return `this step does not depend on step "${to}" (add it to dependsOn)`;
  return undefined;
}
