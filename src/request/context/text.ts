/** Small text helpers shared by the context builders. */

/** Cut `text` to at most `max` characters at a word or line boundary, marking the cut with "…". */
export function truncateAtWord(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 1) return max === 1 ? "…" : "";
  const hard = text.slice(0, max - 1);
  const boundary = Math.max(hard.lastIndexOf(" "), hard.lastIndexOf("\n"));
  const cut = boundary >= max * 0.6 ? hard.slice(0, boundary) : hard;
  return `${cut.trimEnd()}…`;
}

/** Keep the END of a text (for tool output, where the result is usually last). */
export function truncateKeepEnd(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 1) return max === 1 ? "…" : "";
  const tail = text.slice(text.length - (max - 1));
  const boundary = tail.search(/[\s]/);
  const cut = boundary >= 0 && boundary < tail.length * 0.4 ? tail.slice(boundary + 1) : tail;
  return `…${cut.trimStart()}`;
}

/**
 * Share `budget` among items by water-filling: small items get all they need, the rest split what
 * is left evenly. Returns the allowance per item, in order.
 */
export function fairShares(sizes: readonly number[], budget: number): number[] {
  const out = sizes.map(() => 0);
  let left = Math.max(0, Math.floor(budget));
  let open = sizes.map((_, i) => i).filter((i) => sizes[i]! > 0);
  // Each round either satisfies at least one item or hands out everything: at most n+1 rounds.
  for (let round = 0; round <= sizes.length && open.length && left > 0; round++) {
    const share = Math.floor(left / open.length);
    if (share === 0) break;
    const next: number[] = [];
    for (const i of open) {
      const give = Math.min(sizes[i]! - out[i]!, share);
      out[i]! += give;
      left -= give;
      if (out[i]! < sizes[i]!) next.push(i);
    }
    open = next;
  }
  return out;
}
