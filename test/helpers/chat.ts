/** One conversation as a chat client keeps it (the history grows with each answer), driven by the official `openai` client. */
import OpenAI from "openai";

export class Chat {
  readonly messages: OpenAI.ChatCompletionMessageParam[] = [];
  constructor(
    private readonly baseURL: string,
    readonly key: string,
    readonly model: string,
    private readonly apiKey = "k",
  ) {}

  /** Send one message and read the streamed answer. */
  async say(text: string): Promise<{ text: string; finish?: string | null }> {
    this.messages.push({
      role: "user",
      content: `[Tue 2026-11-24 10:${String(this.messages.length).padStart(2, "0")} UTC] ${text}`,
    });
    const client = new OpenAI({ baseURL: this.baseURL, apiKey: this.apiKey, maxRetries: 0, timeout: 120_000 });
    const stream = await client.chat.completions.create(
      { model: this.model, messages: [...this.messages], stream: true },
      { headers: { "x-session-id": this.key } },
    );
    let out = "";
    let finish: string | null | undefined;
    for await (const c of stream) {
      const d = c.choices[0]?.delta;
      if (d?.content) out += d.content;
      if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
    }
    this.messages.push({ role: "assistant", content: out });
    return { text: out, finish };
  }
}
