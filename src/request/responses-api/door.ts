/**
 * The Responses API door, `POST /v1/responses` (one of the doors of src/request/http/door.ts; the
 * HTTP work is the door runner's, src/request/http/door-route.ts). It checks the request
 * (src/request/responses-api/schema.ts), translates it into a Chat Completions request
 * (translate.ts), and answers with the Responses event stream (dialect.ts) or one `response`
 * object (collect.ts). Errors are OpenAI-shaped.
 *
 * `previous_response_id`: the bridge keeps each stored response's part of the conversation (its new
 * input and its output, in chat form) in the response store (src/core/store/responses.ts), so a
 * client sends only what is new: the pipeline gets `instructions` (this request's: the API does not
 * carry them over), then the whole stored chain, then the new input. An id that is not kept is a
 * 404 `previous_response_not_found`. A chain is one conversation: its key is its first response's
 * (whatever identified that one: a session header, `user`, the first message), given to the runner
 * as this door's own identity (source `chain`), so a CLI backend in resume mode keeps one session
 * per chain. `store: false` keeps nothing (the response can still continue a stored chain).
 */
import type { Logger } from "pino";
import type { ResponseStore } from "../../core/store/responses.js";
import { alnumId } from "../../core/util/ids.js";
import { ApiError, badRequest } from "../chat-api/errors.js";
import {
  describeIssues,
  MAX_JSON_DEPTH,
  nestedDeeperThan,
  type ChatMessage,
  type ChatRequest,
} from "../chat-api/schema.js";
import type { StreamDialect } from "../encoder/stream.js";
import { threadOf, type Conversation } from "../identity/conversation.js";
import type { BackendEvent } from "../../backends/contract/backend.js";
import { collectResponse, type CollectedResponse } from "./collect.js";
import { ResponsesDialect, type FinishedResponse, type ResponseContext } from "./dialect.js";
import { responsesRequestSchema, type ResponsesRequest } from "./schema.js";
import { translateInput, translateToolChoice, translateTools } from "./translate.js";

export const RESPONSES_PATH = "/v1/responses";

export interface ResponsesDoorDeps {
  /** Where responses are kept; without one nothing is kept and every `previous_response_id` is unknown. */
  store?: ResponseStore;
  logger?: Logger;
}

/** What the door runner tells a door about the turn (src/request/http/door.ts `DoorTurn`). */
interface TurnFacts {
  conversation: Conversation;
}

/** The door's request, as the runner takes it (src/request/http/door.ts `DoorRequest`). */
export interface ResponsesDoorRequest {
  chat: ChatRequest;
  stream: boolean;
  conversation?: Conversation;
  dialect(turn: TurnFacts): StreamDialect;
  collect(events: AsyncIterable<BackendEvent>, turn: TurnFacts): Promise<CollectedResponse>;
}

/** Whether the request line is `POST /v1/responses` (with or without a query string). */
export function isResponsesRoute(method: string | undefined, url: string | undefined): boolean {
  return (
    method === "POST" &&
    url !== undefined &&
    url.startsWith(RESPONSES_PATH) &&
    (url.length === RESPONSES_PATH.length || url.charCodeAt(RESPONSES_PATH.length) === 63) // "?"
  );
}

export function responsesDoor(deps: ResponsesDoorDeps = {}) {
  const { store, logger } = deps;
  return {
    name: "responses",
    bodyHint: "with `model` and `input`",
    matches: isResponsesRoute,
    errorBody: (err: ApiError) => err.body(),
    async parse(raw: Record<string, unknown>): Promise<ResponsesDoorRequest> {
      if (nestedDeeperThan(raw, MAX_JSON_DEPTH))
        throw badRequest(
          `The request nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep; flatten it.`,
          "invalid_request",
        );
      const parsed = responsesRequestSchema.safeParse(raw);
      if (!parsed.success) {
        const { message, param } = describeIssues(parsed.error);
        throw badRequest(message, "invalid_request", param);
      }
      const req = parsed.data;
      const input = translateInput(req.input);
      if (!input.length)
        throw badRequest(
          "input: there is nothing to answer; send at least one message (or function_call_output)",
          "invalid_request",
          "input",
        );
      const previousId = req.previous_response_id || null;
      const chain = previousId ? await store?.chain(previousId) : undefined;
      if (previousId && !chain?.ok) {
        const missing = chain && !chain.ok ? chain.missing : previousId;
        throw new ApiError(
          404,
          "invalid_request_error",
          "previous_response_not_found",
          missing === previousId
            ? `Previous response with id '${previousId}' not found. This bridge keeps only responses created with store: true (the default), for server.responses.keepDays days and up to server.responses.maxStored of them; send the whole conversation as input instead.`
            : `Previous response with id '${previousId}' cannot be continued: an earlier response of its conversation ('${missing}') is no longer kept (server.responses.keepDays / maxStored); send the whole conversation as input instead.`,
          "previous_response_id",
        );
      }
      const { tools, map } = translateTools(req.tools);
      const toolChoice = translateToolChoice(req.tool_choice, map);
      const messages: ChatMessage[] = [];
      if (req.instructions) messages.push({ role: "system", content: req.instructions });
      if (chain?.ok) for (const m of chain.messages) messages.push(m as ChatMessage);
      for (const m of input) messages.push(m);
      const stream = req.stream === true;
      const responseFormat = chatResponseFormat(req.text?.format);
      const chat = {
        model: req.model,
        messages,
        stream,
        ...(tools.length ? { tools } : {}),
        ...(toolChoice !== undefined ? { tool_choice: toolChoice } : {}),
        ...(tools.length && typeof req.parallel_tool_calls === "boolean"
          ? { parallel_tool_calls: req.parallel_tool_calls }
          : {}),
        ...(req.max_output_tokens ? { max_tokens: req.max_output_tokens } : {}),
        ...(typeof req.temperature === "number" ? { temperature: req.temperature } : {}),
        ...(typeof req.top_p === "number" ? { top_p: req.top_p } : {}),
        ...(req.user ? { user: req.user } : {}),
        ...(req.reasoning?.effort ? { reasoning_effort: req.reasoning.effort } : {}),
        ...(responseFormat ? { response_format: responseFormat } : {}),
      } as ChatRequest;

      const id = alnumId("resp_");
      const createdAt = Math.floor(Date.now() / 1000);
      const echo = echoOf(req, previousId);
      const keep = store && req.store !== false ? store : undefined;
      const context = (turn: TurnFacts): ResponseContext => ({
        id,
        model: req.model,
        createdAt,
        echo,
        tools: map,
        ...(keep
          ? {
              onFinished: (r: FinishedResponse) => {
                try {
                  keep.put({
                    id,
                    previousId,
                    root: chain?.ok ? chain.root : id,
                    conversation: chain?.ok ? chain.conversation : turn.conversation.key,
                    messages: [...input, r.output],
                    input: inputItems(req.input),
                    body: r.json,
                  });
                } catch (err) {
                  logger?.warn({ err: (err as Error).message, response: id }, "response not stored");
                }
              },
            }
          : {}),
      });
      return {
        chat,
        stream,
        // A chain's conversation is its first response's; else Codex's session id (its
        // `prompt_cache_key`) with the thread, so two Codex sessions that begin alike stay apart.
        ...(chain?.ok
          ? { conversation: { key: chain.conversation, source: "chain" as const } }
          : typeof raw.prompt_cache_key === "string" && raw.prompt_cache_key.trim()
            ? { conversation: threadOf(`cache:${raw.prompt_cache_key.trim()}`, chat.messages) }
            : {}),
        dialect: (turn) => new ResponsesDialect(context(turn)),
        collect: (events, turn) => collectResponse(events, new ResponsesDialect(context(turn))),
      };
    },
  };
}

/** The request's fields a response object repeats, with the API's defaults. */
function echoOf(req: ResponsesRequest, previousId: string | null): Record<string, unknown> {
  return {
    instructions: req.instructions ?? null,
    max_output_tokens: req.max_output_tokens ?? null,
    metadata: req.metadata ?? {},
    parallel_tool_calls: req.parallel_tool_calls ?? true,
    previous_response_id: previousId,
    reasoning: { effort: req.reasoning?.effort ?? null, summary: req.reasoning?.summary ?? null },
    store: req.store !== false,
    temperature: req.temperature ?? null,
    text: { format: req.text?.format ?? { type: "text" } },
    tool_choice: req.tool_choice ?? "auto",
    tools: req.tools ?? [],
    top_p: req.top_p ?? null,
    truncation: "disabled",
    ...(req.user ? { user: req.user } : {}),
  };
}

/** `text.format` as Chat Completions' `response_format` (structured output), or undefined for plain text. */
function chatResponseFormat(format: Record<string, unknown> | null | undefined): object | undefined {
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type === "json_schema") {
    const { type: _type, ...schema } = format;
    return { type: "json_schema", json_schema: schema };
  }
  return undefined;
}

/** The input as items with ids (for `GET /v1/responses/:id/input_items`); a string is one user message. */
function inputItems(input: string | readonly unknown[]): unknown[] {
  if (typeof input === "string")
    return [{ id: alnumId("msg_"), type: "message", role: "user", content: [{ type: "input_text", text: input }] }];
  return input.map((item) => {
    if (!item || typeof item !== "object" || Array.isArray(item)) return item;
    const o = item as Record<string, unknown>;
    const withType = o.type === undefined ? { type: "message", ...o } : o;
    return typeof o.id === "string"
      ? withType
      : { id: alnumId(o.type === "function_call_output" ? "fco_" : "msg_"), ...withType };
  });
}
