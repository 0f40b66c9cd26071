/**
 * Token usage when a backend does not report it: counted with a real BPE tokenizer (o200k_base),
 * never estimated from word counts. Marked `estimated`.
 */
import type { BackendEvent, Usage } from "../backends/types.js";

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

/** Pass events through; if the backend finishes without usage, add a counted usage event before `done`. */
export async function* withUsage(events: AsyncIterable<BackendEvent>, promptText: () => string): AsyncGenerator<BackendEvent> {
  let sawUsage = false;
  let output = "";
  for await (const ev of events) {
    if (ev.type === "usage") sawUsage = true;
    else if (ev.type === "text" || ev.type === "reasoning") output += ev.text;
    else if (ev.type === "tool_call") output += (ev.name ?? "") + ev.argumentsDelta;
    if (ev.type === "done" && !sawUsage) {
      const count = await loadCounter();
      const promptTokens = count(promptText());
      const completionTokens = count(output);
      const usage: Usage = { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens, estimated: true };
      yield { type: "usage", usage };
    }
    yield ev;
  }
}
