/**
 * The three turn-taking doors of the `doors` suite as a client sees them: the same question asked
 * in each API (Chat Completions, the Responses API, Anthropic Messages), its headers, and two
 * checks of the streamed answer — a cheap one for every response of the load (the stream ended as
 * its API ends a completed answer, with no error frame) and a thorough one for the first answer of
 * each run (every frame parsed; the text, joined from that API's own deltas, is the fake upstream's
 * exact text in as many deltas as it sent chunks).
 */
import { answerText } from "../../fake-upstream.js";

export type DoorId = "chat" | "responses" | "messages";

export interface DoorApi {
  id: DoorId;
  /** As the report names it. */
  label: string;
  path: string;
  /** The request body for a bridge model id. */
  body(model: string): string;
  /** The headers of this API's clients (the key as its clients send it). */
  headers(apiKey: string): Record<string, string>;
  /** Cheap check of every response; an error text or undefined. */
  check(status: number, body: string): string | undefined;
  /** Full check of one answer; an error text or undefined. */
  verify(status: number, body: string): string | undefined;
}

/** Content chunks of the fake upstream's answer (bench/fake-upstream.ts `--chunks`). */
export const CHUNKS = 20;
export const TEXT = answerText(CHUNKS);
const QUESTION = "Tell me about the fox.";
const MAX_TOKENS = 256;

interface SseFrame {
  event?: string;
  data: string;
}

/** The frames of an SSE body (`event:` and `data:` lines; comments skipped). */
export function sseFrames(body: string): SseFrame[] {
  const out: SseFrame[] = [];
  for (const block of body.split("\n\n")) {
    if (!block) continue;
    let event: string | undefined;
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice(7);
      else if (line.startsWith("data: ")) data.push(line.slice(6));
    }
    if (data.length) out.push({ ...(event !== undefined ? { event } : {}), data: data.join("\n") });
  }
  return out;
}

const httpError = (status: number, body: string) =>
  status !== 200 ? `HTTP ${status}: ${body.slice(0, 200)}` : undefined;

/** The joined deltas against the fake's text and chunk count. */
function textCheck(parts: string[]): string | undefined {
  const text = parts.join("");
  if (text !== TEXT) return `streamed text differs: ${JSON.stringify(text)}, expected ${JSON.stringify(TEXT)}`;
  if (parts.length !== CHUNKS) return `${parts.length} text deltas, expected ${CHUNKS}`;
  return undefined;
}

const parse = (data: string): Record<string, unknown> => JSON.parse(data) as Record<string, unknown>;

const CHAT_END = "data: [DONE]\n\n";

export const chatApi: DoorApi = {
  id: "chat",
  label: "Chat Completions (`/v1/chat/completions`)",
  path: "/v1/chat/completions",
  body: (model) =>
    JSON.stringify({
      model,
      stream: true,
      messages: [{ role: "user", content: QUESTION }],
      max_completion_tokens: MAX_TOKENS,
    }),
  headers: (key) => ({ authorization: `Bearer ${key}` }),
  check: (status, body) =>
    httpError(status, body) ??
    (!body.endsWith(CHAT_END) || body.includes('{"error"') ? `bad stream: ${body.slice(-200)}` : undefined),
  verify(status, body) {
    const bad = this.check(status, body);
    if (bad) return bad;
    const parts: string[] = [];
    let finish: unknown;
    for (const f of sseFrames(body)) {
      if (f.data === "[DONE]") continue;
      const choice = (parse(f.data).choices as Array<{ delta?: { content?: string }; finish_reason?: unknown }>)?.[0];
      if (choice?.delta?.content) parts.push(choice.delta.content);
      if (choice?.finish_reason) finish = choice.finish_reason;
    }
    if (finish !== "stop") return `finish_reason ${JSON.stringify(finish)}, expected "stop"`;
    return textCheck(parts);
  },
};

const RESPONSES_COMPLETED = "event: response.completed\n";

export const responsesApi: DoorApi = {
  id: "responses",
  label: "Responses API (`/v1/responses`)",
  path: "/v1/responses",
  body: (model) => JSON.stringify({ model, input: QUESTION, stream: true, max_output_tokens: MAX_TOKENS }),
  headers: (key) => ({ authorization: `Bearer ${key}` }),
  check: (status, body) =>
    httpError(status, body) ??
    (!body.includes(RESPONSES_COMPLETED) || body.includes("event: response.failed") || body.includes("event: error\n")
      ? `bad stream: ${body.slice(-200)}`
      : undefined),
  verify(status, body) {
    const bad = this.check(status, body);
    if (bad) return bad;
    const frames = sseFrames(body);
    const parts: string[] = [];
    let seq = 0;
    let completedText: string | undefined;
    for (const f of frames) {
      const ev = parse(f.data);
      if (ev.type !== f.event) return `event line ${f.event} carries type ${String(ev.type)}`;
      if (ev.sequence_number !== seq)
        return `${f.event}: sequence_number ${String(ev.sequence_number)}, expected ${seq}`;
      seq++;
      if (f.event === "response.output_text.delta") parts.push(ev.delta as string);
      if (f.event === "response.completed") {
        const output = (ev.response as { output?: Array<{ content?: Array<{ text?: string }> }> }).output;
        completedText = output?.[0]?.content?.[0]?.text;
      }
    }
    if (frames[0]?.event !== "response.created") return `first event ${frames[0]?.event}, expected response.created`;
    if (frames.at(-1)?.event !== "response.completed")
      return `last event ${frames.at(-1)?.event}, expected response.completed`;
    if (completedText !== TEXT) return `response.completed holds the text ${JSON.stringify(completedText)}`;
    return textCheck(parts);
  },
};

const MESSAGE_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n';

export const messagesApi: DoorApi = {
  id: "messages",
  label: "Anthropic Messages (`/v1/messages`)",
  path: "/v1/messages",
  body: (model) =>
    JSON.stringify({ model, max_tokens: MAX_TOKENS, messages: [{ role: "user", content: QUESTION }], stream: true }),
  headers: (key) => ({ "x-api-key": key, "anthropic-version": "2023-06-01" }),
  check: (status, body) =>
    httpError(status, body) ??
    (!body.endsWith(MESSAGE_STOP) || body.includes("event: error\n") ? `bad stream: ${body.slice(-200)}` : undefined),
  verify(status, body) {
    const bad = this.check(status, body);
    if (bad) return bad;
    const frames = sseFrames(body);
    const parts: string[] = [];
    let stop: unknown;
    for (const f of frames) {
      const ev = parse(f.data);
      if (ev.type !== f.event) return `event line ${f.event} carries type ${String(ev.type)}`;
      const delta = ev.delta as { type?: string; text?: string; stop_reason?: unknown } | undefined;
      if (f.event === "content_block_delta" && delta?.type === "text_delta") parts.push(delta.text ?? "");
      if (f.event === "message_delta") stop = delta?.stop_reason;
    }
    if (frames[0]?.event !== "message_start") return `first event ${frames[0]?.event}, expected message_start`;
    if (stop !== "end_turn") return `stop_reason ${JSON.stringify(stop)}, expected "end_turn"`;
    return textCheck(parts);
  },
};

export const DOOR_APIS: readonly DoorApi[] = [chatApi, responsesApi, messagesApi];

/**
 * What one request to a door says about it: there (its answer passes `verify`), not served
 * (Fastify's not-found answer: the door is not wired into the app), or broken (any other answer).
 */
export type DoorState = { kind: "ready" } | { kind: "absent"; detail: string } | { kind: "broken"; detail: string };

export function doorState(api: DoorApi, status: number, body: string): DoorState {
  if (status === 404 && body.includes("No route"))
    return { kind: "absent", detail: `POST ${api.path} answers 404 from the not-found handler: the door is not wired` };
  const bad = api.verify(status, body);
  return bad ? { kind: "broken", detail: bad } : { kind: "ready" };
}
