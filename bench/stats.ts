/** Small statistics and formatting helpers for benchmark tables. */

/** Nearest-rank percentile (p in 0..100) of unsorted samples; NaN when empty. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = Float64Array.from(samples).sort();
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export function mean(samples: readonly number[]): number {
  if (samples.length === 0) return NaN;
  let s = 0;
  for (const x of samples) s += x;
  return s / samples.length;
}

/** Milliseconds with a precision that suits sub-millisecond values. */
export function ms(v: number): string {
  if (!Number.isFinite(v)) return "–";
  const a = Math.abs(v);
  return a < 10 ? v.toFixed(3) : a < 100 ? v.toFixed(2) : v.toFixed(1);
}

/** A signed difference in ms ("+0.412"). */
export function deltaMs(v: number): string {
  if (!Number.isFinite(v)) return "–";
  return `${v >= 0 ? "+" : ""}${ms(v)}`;
}

export function int(v: number): string {
  return Number.isFinite(v) ? Math.round(v).toLocaleString("en-US") : "–";
}

export function mb(kb: number): string {
  return Number.isFinite(kb) ? `${(kb / 1024).toFixed(1)} MB` : "–";
}

/** A markdown table. */
export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(" | ")} |`;
  return [line(header), line(header.map(() => "---")), ...rows.map(line)].join("\n");
}
