/** Small text helpers of the extractor (blank runs around calls, word starts). */

/** Number of '\n' in a blank run. */
export function newlines(ws: string): number {
  let n = 0;
  for (let i = 0; i < ws.length; i++) if (ws.charCodeAt(i) === 10) n++;
  return n;
}

/**
 * The blanks kept where calls were removed between prose `before` and prose `after`: the line
 * breaks of the run with more of them (ties: the one after), followed by the indentation of the
 * prose that comes after. Without line breaks: the longer run.
 */
export function pickSeparator(before: string, after: string): string {
  const nb = newlines(before);
  const na = newlines(after);
  if (nb === 0 && na === 0) return before.length >= after.length ? before : after;
  const lines = nb > na ? before : after;
  const head = lines.slice(0, lines.lastIndexOf("\n") + 1);
  return head + after.slice(after.lastIndexOf("\n") + 1);
}

const FUNCTOOLS = "functools";

/** Letters, digits, `_` and any non-ASCII character: a `functools[` right after one is not a word start. */
export function isWordCode(code: number): boolean {
  return (
    (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95 || code > 127
  );
}

/** Could the run s[i, j) (it starts with 'f') be the start of `functools[`? */
export function maybeFunctools(s: string, i: number, j: number): boolean {
  const n = j - i;
  if (n === FUNCTOOLS.length) return (j === s.length || s.charCodeAt(j) === 91) && s.startsWith(FUNCTOOLS, i);
  return n < FUNCTOOLS.length && j === s.length && FUNCTOOLS.startsWith(s.slice(i, j));
}
