/** Summarise a V8 `.cpuprofile` (from `node --cpu-prof`): where the process spent its CPU time. */
import { readFileSync } from "node:fs";
import { table } from "./stats.js";

interface CpuNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: CpuNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

/** Which part of the stack a script belongs to: a repo file, an npm package, or node itself. */
export function area(url: string, root: string): string {
  if (!url) return "(native/V8)";
  let u = url.replace(/^file:\/\//, "");
  if (u.startsWith("node:")) return "node core";
  const nm = u.lastIndexOf("/node_modules/");
  if (nm >= 0) {
    const rest = u.slice(nm + "/node_modules/".length).split("/");
    return rest[0]?.startsWith("@") ? `${rest[0]}/${rest[1]}` : (rest[0] ?? "node_modules");
  }
  if (u.startsWith(root)) u = u.slice(root.length + 1);
  return u;
}

export interface ProfileSummary {
  /** Milliseconds of samples that were not idle. */
  busyMs: number;
  markdown: string;
}

/** One frame of a sampled stack, as `classify` sees it. */
export interface StackFrame {
  functionName: string;
  /** `area()` of its script: a repo file (`dist/encoder/sse.js`), an npm package, `node core`, or `(native/V8)`. */
  area: string;
  /** Node's own module for node core frames (`node:_http_outgoing`), else "". */
  coreModule: string;
}

/**
 * Sorts each busy sample into one part of the path: `classify` gets the sample's stack, innermost
 * frame first, and names its part (undefined: "other"). Gives a table of the parts with their
 * share of the busy time, each sample counted once.
 */
export type Classifier = (stack: StackFrame[]) => string | undefined;

/** Self time by function and by area, inclusive time of the repo's own functions and, with `classify`, the time by part of the path. */
export function summariseProfile(
  file: string,
  root: string,
  top = 25,
  classify?: Classifier,
  classifyTitle = "By part of the path",
): ProfileSummary {
  const p = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const totalHits = p.nodes.reduce((s, n) => s + (n.hitCount ?? 0), 0);
  const usPerHit = totalHits ? (p.endTime - p.startTime) / totalHits : 0;
  const msOf = (hits: number) => (hits * usPerHit) / 1000;

  const self = new Map<string, { hits: number; area: string }>();
  const areas = new Map<string, number>();
  let idle = 0;
  const key = (n: CpuNode) => {
    const f = n.callFrame;
    // Code loaded through tsx reports line 1 for everything (positions are in the transformed
    // code): show the file only, the function name is what identifies it.
    const where = f.url ? (f.lineNumber > 0 ? `${area(f.url, root)}:${f.lineNumber + 1}` : area(f.url, root)) : "";
    return `${f.functionName || "(anonymous)"}${where ? ` ${where}` : ""}`;
  };
  for (const n of p.nodes) {
    const h = n.hitCount ?? 0;
    if (!h) continue;
    if (n.callFrame.functionName === "(idle)") {
      idle += h;
      continue;
    }
    const a = n.callFrame.url
      ? area(n.callFrame.url, root)
      : n.callFrame.functionName.startsWith("(")
        ? n.callFrame.functionName
        : "(native/V8)";
    const k = key(n);
    const e = self.get(k) ?? { hits: 0, area: a };
    e.hits += h;
    self.set(k, e);
    areas.set(a, (areas.get(a) ?? 0) + h);
  }
  const busy = totalHits - idle;

  // Inclusive time of repo functions (src/… or the compiled dist/…): self + descendants, counted once per stack.
  const inclusive = new Map<string, number>();
  const walk = (id: number, onStack: Set<string>): number => {
    const n = byId.get(id);
    if (!n) return 0;
    let hits = n.callFrame.functionName === "(idle)" ? 0 : (n.hitCount ?? 0);
    const k = n.callFrame.url && /^(src|dist)\//.test(area(n.callFrame.url, root)) ? key(n) : undefined;
    const added = k !== undefined && !onStack.has(k);
    if (added) onStack.add(k!);
    for (const c of n.children ?? []) hits += walk(c, onStack);
    if (added) {
      onStack.delete(k!);
      inclusive.set(k!, (inclusive.get(k!) ?? 0) + hits);
    }
    return hits;
  };
  const rootNode = p.nodes[0];
  if (rootNode) walk(rootNode.id, new Set());

  // Parts of the path: every node's stack (innermost first) classified once, its self hits added.
  const parts = new Map<string, number>();
  if (classify) {
    const parent = new Map<number, number>();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    for (const n of p.nodes) {
      const h = n.hitCount ?? 0;
      if (!h || n.callFrame.functionName === "(idle)") continue;
      const stack: StackFrame[] = [];
      for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
        const f = byId.get(id)!.callFrame;
        const a = f.url ? area(f.url, root) : "(native/V8)";
        stack.push({ functionName: f.functionName, area: a, coreModule: f.url.startsWith("node:") ? f.url : "" });
      }
      const part = classify(stack) ?? "other";
      parts.set(part, (parts.get(part) ?? 0) + h);
    }
  }

  const pct = (h: number) => (busy ? `${((100 * h) / busy).toFixed(1)}%` : "–");
  const selfRows = [...self.entries()]
    .sort((a, b) => b[1].hits - a[1].hits)
    .slice(0, top)
    .map(([k, v]) => [`\`${k}\``, msOf(v.hits).toFixed(0), pct(v.hits)]);
  const areaRows = [...areas.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 20)
    .map(([k, h]) => [`\`${k}\``, msOf(h).toFixed(0), pct(h)]);
  const inclRows = [...inclusive.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 20)
    .map(([k, h]) => [`\`${k}\``, msOf(h).toFixed(0), pct(h)]);

  const markdown = [
    `Busy CPU in the profile: ${msOf(busy).toFixed(0)} ms (idle ${msOf(idle).toFixed(0)} ms), sampled every ~${usPerHit.toFixed(0)} µs.`,
    "",
    "The profiler samples wall-clock time: on a machine whose CPUs are shared, a process that wakes its peer on loopback is often preempted inside the write, so native `writev`/`write` time is inflated there (compare with the system CPU share in /proc/<pid>/stat).",
    "",
    "Self time by area (file of the repo, npm package, or node core):",
    "",
    table(["area", "self ms", "% of busy"], areaRows),
    "",
    `Top ${top} functions by self time:`,
    "",
    table(["function", "self ms", "% of busy"], selfRows),
    "",
    "The repo's own functions by inclusive time (self + everything they call):",
    "",
    table(["function", "incl. ms", "% of busy"], inclRows),
    ...(classify
      ? [
          "",
          `${classifyTitle}:`,
          "",
          table(
            ["part", "ms", "% of busy"],
            [...parts.entries()].sort((a, b) => b[1] - a[1]).map(([k, h]) => [k, msOf(h).toFixed(0), pct(h)]),
          ),
        ]
      : []),
  ].join("\n");
  return { busyMs: msOf(busy), markdown };
}
