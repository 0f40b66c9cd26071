/** Small helpers for showing config changes: a unified diff with secrets masked, backup names. */
import { createTwoFilesPatch } from "diff";
import { PLACEHOLDER_API_KEY } from "./provider.js";

/** Keys whose string values are secrets (by how the key ENDS: `apiKey`, `botToken`, not `maxTokensField`). */
const SECRET_KEY = /(?:api[-_]?key|token|secret|password|passphrase|authorization|cookie|private[-_]?key)$/i;
// key (quoted or not) : string value (double or single quoted)
const PROP_WITH_STRING = /((["']?)([A-Za-z0-9_$.-]+)\2\s*:\s*)(["'])((?:\\.|(?!\4)[^\\])*)\4/g;

/** Mask string values of secret-looking keys in one line of JSON5 text. */
export function redactLine(line: string): string {
  return line.replace(PROP_WITH_STRING, (all, head: string, _q: string, key: string, quote: string, value: string) => {
    if (!SECRET_KEY.test(key)) return all;
    if (value === PLACEHOLDER_API_KEY || value === "" || /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(value)) return all;
    return `${head}${quote}<redacted>${quote}`;
  });
}

export function redactText(text: string): string {
  return text.split("\n").map(redactLine).join("\n");
}

/** A unified diff of a file's old and new text (empty string when they are equal), secrets masked. */
export function unifiedDiff(file: string, before: string, after: string): string {
  if (before === after) return "";
  const patch = createTwoFilesPatch(file, file, before, after, "before", "after", { context: 3 });
  // Drop the "Index:"/"====" preamble some versions print; keep ---/+++ and hunks.
  const lines = patch.split("\n").filter((l, i) => !(i < 2 && (l.startsWith("Index:") || /^=+$/.test(l))));
  return redactText(lines.join("\n")).replace(/\n*$/, "\n");
}

/** `<file>.bak-2026-11-21T09-13-05-123Z` (no colons: safe on every file system). */
export function backupName(file: string, now: Date): string {
  return `${file}.bak-${now.toISOString().replace(/[:.]/g, "-")}`;
}
