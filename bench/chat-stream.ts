/** Reading a streamed chat completion in benchmarks: when the first content came, how many chunks, the text. */

export interface StreamedAnswer {
  text: string;
  /** Content chunks (deltas with text). */
  chunks: number;
  /** `clock()` when the first content chunk arrived. */
  firstAt: number;
  /** `clock()` when the last content chunk arrived. */
  lastAt: number;
  /** `clock()` when `data: [DONE]` arrived (undefined: the stream ended without it). */
  doneAt?: number;
}

/**
 * Read an OpenAI SSE response to its end (bounded). Throws on an `error` frame or when no content
 * came. `clock` is the caller's time base (`Date.now` or `performance.now`).
 */
export async function readChatStream(res: Response, what: string, clock: () => number): Promise<StreamedAnswer> {
  if (res.status !== 200 || !res.body)
    throw new Error(`${what}: HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let text = "";
  let chunks = 0;
  let first: number | undefined;
  let last = 0;
  let doneAt: number | undefined;
  for (let i = 0; i < 100_000; i++) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      const data = block.startsWith("data: ") ? block.slice(6) : "";
      if (data === "[DONE]") doneAt ??= clock();
      if (!data || data === "[DONE]") continue;
      const obj = JSON.parse(data) as {
        choices?: Array<{ delta?: { content?: string } }>;
        error?: { message: string };
      };
      if (obj.error) throw new Error(`${what}: stream error: ${obj.error.message}`);
      const c = obj.choices?.[0]?.delta?.content;
      if (c) {
        last = clock();
        first ??= last;
        chunks++;
        text += c;
      }
    }
  }
  if (first === undefined) throw new Error(`${what}: no content streamed`);
  return { text, chunks, firstAt: first, lastAt: last, ...(doneAt !== undefined ? { doneAt } : {}) };
}
