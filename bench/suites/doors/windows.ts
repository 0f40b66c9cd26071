/**
 * One bridge's CPU profile split by door: the suite notes when each door's measured runs start and
 * end (`process.hrtime`, CLOCK_MONOTONIC — the clock V8 stamps its samples with), and every busy
 * sample inside a window is counted for that window's door and concurrency. Start-up, warm-up and
 * the other doors' runs fall outside. Per door: its CPU by part of the path (bench/suites/doors/parts.ts)
 * and by function (self time), in µs per request, so that a door is read against Chat Completions
 * line by line.
 */
import { readFileSync } from "node:fs";
import { area, type Classifier, type StackFrame } from "../../profile.js";
import { table } from "../../stats.js";

interface CpuNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: CpuNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

/** A stretch of the run that belongs to one key (a door at one concurrency), in µs of CLOCK_MONOTONIC. */
export interface Window {
  key: string;
  fromUs: number;
  toUs: number;
}

export const nowUs = (): number => Number(process.hrtime.bigint() / 1000n);

export interface KeyProfile {
  /** Busy time sampled inside the key's windows (ms). */
  busyMs: number;
  byPart: Map<string, number>;
  /** Self time by function (`name file:line`), ms. */
  byFunction: Map<string, number>;
}

export function profileByWindow(
  file: string,
  root: string,
  windows: Window[],
  classify: Classifier,
): Map<string, KeyProfile> {
  const p = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const partOf = new Map<number, string>();
  const keyOf = (n: CpuNode) => {
    const f = n.callFrame;
    const where = f.url ? (f.lineNumber > 0 ? `${area(f.url, root)}:${f.lineNumber + 1}` : area(f.url, root)) : "";
    return `${f.functionName || "(anonymous)"}${where ? ` ${where}` : ""}`;
  };
  const part = (id: number): string => {
    let known = partOf.get(id);
    if (known === undefined) {
      const stack: StackFrame[] = [];
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const f = byId.get(at)!.callFrame;
        stack.push({
          functionName: f.functionName,
          area: f.url ? area(f.url, root) : "(native/V8)",
          coreModule: f.url.startsWith("node:") ? f.url : "",
        });
      }
      known = classify(stack) ?? "other";
      partOf.set(id, known);
    }
    return known;
  };

  const out = new Map<string, KeyProfile>();
  const sorted = [...windows].sort((a, b) => a.fromUs - b.fromUs);
  const samples = p.samples ?? [];
  const deltas = p.timeDeltas ?? [];
  let t = p.startTime;
  let w = 0;
  for (let i = 0; i < samples.length; i++) {
    t += deltas[i] ?? 0;
    // A sample stands for the time until the next one.
    const dt = (deltas[i + 1] ?? 0) / 1000;
    while (w < sorted.length && sorted[w]!.toUs < t) w++;
    const win = sorted[w];
    if (!win || t < win.fromUs) continue;
    const node = byId.get(samples[i]!);
    if (!node || node.callFrame.functionName === "(idle)") continue;
    let k = out.get(win.key);
    if (!k) out.set(win.key, (k = { busyMs: 0, byPart: new Map(), byFunction: new Map() }));
    k.busyMs += dt;
    const pt = part(node.id);
    k.byPart.set(pt, (k.byPart.get(pt) ?? 0) + dt);
    const fk = keyOf(node);
    k.byFunction.set(fk, (k.byFunction.get(fk) ?? 0) + dt);
  }
  return out;
}

const us = (msTotal: number, requests: number) => (requests > 0 ? (1000 * msTotal) / requests : NaN);
const fmt = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : "–");
const signed = (v: number) => (Number.isFinite(v) ? `${v >= 0 ? "+" : ""}${v.toFixed(1)}` : "–");

/**
 * Markdown: one table of the parts (µs per request for each key, and each key's difference from
 * `base`), then per key other than `base` its functions that cost the most more than in `base`.
 */
export function compareProfiles(
  keys: string[],
  base: string,
  profiles: Map<string, KeyProfile>,
  requests: Map<string, number>,
  top = 15,
): string {
  const present = keys.filter((k) => profiles.has(k) && (requests.get(k) ?? 0) > 0);
  if (!present.includes(base)) return `(no samples of ${base} in the profile: nothing to compare against)`;
  const perReq = (k: string, m: Map<string, number>, name: string) => us(m.get(name) ?? 0, requests.get(k) ?? 0);
  const others = present.filter((k) => k !== base);
  const parts = new Set<string>();
  for (const k of present) for (const name of profiles.get(k)!.byPart.keys()) parts.add(name);
  const partRows = [...parts]
    .map((name) => ({
      name,
      values: present.map((k) => perReq(k, profiles.get(k)!.byPart, name)),
      base: perReq(base, profiles.get(base)!.byPart, name),
    }))
    .sort((a, b) => Math.max(...b.values) - Math.max(...a.values))
    .map((r) => [
      r.name,
      ...r.values.map(fmt),
      ...others.map((k) => signed(perReq(k, profiles.get(k)!.byPart, r.name) - r.base)),
    ]);
  const totalRow = [
    "**total (busy)**",
    ...present.map((k) => fmt(us(profiles.get(k)!.busyMs, requests.get(k)!))),
    ...others.map((k) =>
      signed(us(profiles.get(k)!.busyMs, requests.get(k)!) - us(profiles.get(base)!.busyMs, requests.get(base)!)),
    ),
  ];
  const out = [
    "CPU by part of the path, µs per request (samples inside each door's measured runs only; bench/suites/doors/parts.ts):",
    "",
    table(
      ["part", ...present.map((k) => `${k} µs/req`), ...others.map((k) => `${k} − ${base}`)],
      [totalRow, ...partRows],
    ),
  ];
  for (const k of others) {
    const mine = profiles.get(k)!.byFunction;
    const theirs = profiles.get(base)!.byFunction;
    const names = new Set([...mine.keys(), ...theirs.keys()]);
    const rows = [...names]
      .map((name) => ({ name, a: perReq(k, mine, name), b: perReq(base, theirs, name) }))
      .map((r) => ({ ...r, d: r.a - r.b }))
      .sort((x, y) => y.d - x.d)
      .slice(0, top)
      .map((r) => [`\`${r.name}\``, fmt(r.a), fmt(r.b), signed(r.d)]);
    out.push(
      "",
      `Functions that cost ${k} the most more than ${base} (self time, µs per request):`,
      "",
      table(["function", `${k}`, `${base}`, "difference"], rows),
    );
  }
  return out.join("\n");
}
