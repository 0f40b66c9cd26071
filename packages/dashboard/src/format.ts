/** How times, durations and counts are shown. */

export function ms(v: number | null | undefined): string {
  if (v === null || v === undefined) return "–";
  if (v < 1000) return `${Math.round(v)} ms`;
  if (v < 60_000) return `${(v / 1000).toFixed(1)} s`;
  return `${Math.floor(v / 60_000)} min ${Math.round((v % 60_000) / 1000)} s`;
}

export function time(at: number | null | undefined): string {
  if (!at) return "–";
  const d = new Date(at);
  const today = new Date().toDateString() === d.toDateString();
  return today ? d.toLocaleTimeString() : d.toLocaleString();
}

export function ago(at: number | null | undefined, now = Date.now()): string {
  if (!at) return "–";
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

export function num(v: number | null | undefined): string {
  return v === null || v === undefined ? "–" : v.toLocaleString();
}

export function json(v: unknown): string {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

export function short(s: string, max = 48): string {
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
