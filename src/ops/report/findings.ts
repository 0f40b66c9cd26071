/** Findings of `clawbridge doctor` and `clawbridge openclaw status`: what was checked, the verdict, the fix. */

export type FindingStatus = "ok" | "warn" | "fail" | "info";

export interface Finding {
  /** Stable id, e.g. `port`, `backend:opencode`, `lock:/tmp/clawbridge-x.lock`. */
  id: string;
  status: FindingStatus;
  /** One line: what this is about and the verdict. */
  title: string;
  /** What exactly was checked / seen. */
  detail?: string;
  /** What to do about it (for warn/fail). */
  fix?: string;
}

export interface Summary {
  ok: number;
  warn: number;
  fail: number;
  info: number;
}

export function summarize(findings: readonly Finding[]): Summary {
  const s: Summary = { ok: 0, warn: 0, fail: 0, info: 0 };
  for (const f of findings) s[f.status]++;
  return s;
}

const MARK: Record<FindingStatus, string> = { ok: "✓", fail: "✗", warn: "!", info: "·" };

/** Human text: one line per finding with ✓ ✗ ! ·, details and fixes indented, then a summary line. */
export function renderFindings(findings: readonly Finding[], heading?: string): string {
  const lines: string[] = [];
  if (heading) lines.push(heading);
  for (const f of findings) {
    lines.push(`  ${MARK[f.status]} ${f.title}`);
    if (f.detail) for (const l of f.detail.split("\n")) lines.push(`      ${l}`);
    if (f.fix && (f.status === "fail" || f.status === "warn")) {
      const [first, ...rest] = f.fix.split("\n");
      lines.push(`      fix: ${first}`);
      for (const l of rest) lines.push(`           ${l}`);
    }
  }
  const s = summarize(findings);
  lines.push("");
  lines.push(
    `${s.fail ? "✗" : s.warn ? "!" : "✓"} ${s.ok} ok, ${s.warn} warning${s.warn === 1 ? "" : "s"}, ${s.fail} failed${s.info ? `, ${s.info} note${s.info === 1 ? "" : "s"}` : ""}`,
  );
  return `${lines.join("\n")}\n`;
}
