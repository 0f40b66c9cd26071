/**
 * Findings of `clawbridge doctor` and `clawbridge openclaw status`: what was checked, the verdict,
 * the fix — counted and told as text. The types are in src/wire/admin.ts (`GET /v1/admin/doctor`
 * sends them).
 */
import type { Finding, FindingStatus, Summary } from "../../wire/admin.js";

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
