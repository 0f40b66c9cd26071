/**
 * `POST /v1/messages/count_tokens`: the input tokens of a Messages request, AN ESTIMATE. The
 * request is translated as for a turn (src/request/messages-api/translate.ts: what the model would
 * be given) and its text counted with the bridge's tokenizer (o200k_base, gpt-tokenizer: the same
 * count as a backend that reports no usage, src/request/pipeline/usage.ts), plus a few tokens per
 * message for its framing and a flat 1,600 per image (the most an image costs a Claude model);
 * tools count by their JSON. The model behind the bridge may tokenize differently: the count says
 * how big the request is, not what a given model bills.
 */
import { contentText } from "../chat-api/schema.js";
import { countTokens } from "../pipeline/usage.js";
import type { CountTokensRequest } from "./schema.js";
import { chatMessages, chatTools } from "./translate.js";

/** Framing of one message (role, separators), as Chat Completions counts it. */
const PER_MESSAGE = 3;
/** The answer's priming. */
const PER_REQUEST = 3;
/** One image, whatever its size (the size is not decoded here). */
export const IMAGE_TOKENS = 1600;

export async function countInputTokens(req: CountTokensRequest): Promise<number> {
  const messages = chatMessages(req);
  const tools = chatTools(req.tools);
  let text = "";
  let extra = PER_REQUEST + messages.length * PER_MESSAGE;
  for (const m of messages) {
    text += `${contentText(m.content)}\n`;
    if (Array.isArray(m.content)) for (const p of m.content) if (p.type === "image_url") extra += IMAGE_TOKENS;
    for (const c of m.tool_calls ?? []) text += `${c.function.name} ${c.function.arguments ?? ""}\n`;
  }
  if (tools.length) text += JSON.stringify(tools);
  return (await countTokens(text)) + extra;
}
