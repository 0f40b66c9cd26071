/**
 * Token usage when a backend does not report it: counted with a real BPE tokenizer (o200k_base),
 * never estimated from word counts. Marked `estimated`.
 */

let counter: ((text: string) => number) | undefined;
async function loadCounter(): Promise<(text: string) => number> {
  if (!counter) {
    const mod = await import("gpt-tokenizer");
    counter = (t: string) => mod.countTokens(t);
  }
  return counter;
}

export async function countTokens(text: string): Promise<number> {
  return (await loadCounter())(text);
}
