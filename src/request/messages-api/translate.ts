/**
 * An Anthropic Messages request in the pipeline's language, a Chat Completions request:
 * - `system` (a string or text blocks; `cache_control` dropped) → the first system message; a
 *   `system` message between the others (Claude Code 2.1 sends them) → a system message there;
 * - `text` → text, `image` → an `image_url` part (base64 → a data URL; url → that URL, fetched
 *   and checked later by src/request/images); a `file` source is refused: the bridge has no Files API;
 * - `document`: a plain-text or content source → its text (titled); a PDF (base64, url, file) →
 *   one line saying it was left out, since no backend behind the bridge is given PDFs;
 * - `search_result` → its text blocks; `thinking` / `redacted_thinking` and the blocks of
 *   Anthropic's server tools (`server_tool_use`, `web_search_tool_result`…) → left out;
 * - assistant `tool_use` → `tool_calls` (the input as a JSON string); user `tool_result` → `tool`
 *   messages (text; `is_error` marked in it; its images follow in a user message, since a
 *   Chat Completions tool message holds text only);
 * - `tools` with an `input_schema` → function tools; server tools (no `input_schema`) → left out;
 *   `tool_choice` auto/any/tool/none → auto/required/the function/none;
 *   `disable_parallel_tool_use` → `parallel_tool_calls: false`;
 * - `max_tokens`, `stop_sequences` → `stop`, `temperature`, `top_p`, `top_k`, `stream`;
 *   `metadata.user_id` and the first user message → the conversation (src/request/identity,
 *   `conversationOf`); `thinking` is accepted and not passed.
 * Tool-use ids: the bridge answers a backend's call id `X` as `toolu_X` and reads `toolu_X` back
 * as `X`, so the id a backend issued comes back to it exactly (a CLI's parked client tool call
 * waits for it).
 */
import type { z } from "zod";
import { type ApiError, badRequest } from "../chat-api/errors.js";
import {
  formatPath,
  MAX_JSON_DEPTH,
  nestedDeeperThan,
  type ChatMessage,
  type ChatRequest,
} from "../chat-api/schema.js";
import { threadOf, type Conversation } from "../identity/conversation.js";
import {
  documentBlockSchema,
  imageBlockSchema,
  searchResultBlockSchema,
  textBlockSchema,
  toolResultBlockSchema,
  toolUseBlockSchema,
  type Block,
  type CountTokensRequest,
  type MessageParam,
  type MessagesRequest,
  type ToolChoice,
  type ToolParam,
} from "./schema.js";

const TOOLU = "toolu_";

/** A backend's tool-call id as the client sees it. */
export function toolUseId(callId: string): string {
  return TOOLU + callId;
}

/** A client's tool_use id as the backend issued it (one `toolu_` prefix less). */
export function callIdOf(toolUseId: string): string {
  return toolUseId.startsWith(TOOLU) ? toolUseId.slice(TOOLU.length) : toolUseId;
}

/** A 400 naming the field (`messages[1].content[0].source`). */
function invalid(path: ReadonlyArray<PropertyKey>, message: string): ApiError {
  const param = formatPath(path);
  return badRequest(`${param ? `${param}: ` : ""}${message}`, "invalid_request", param || null);
}

/** `value` checked against a block schema; a failure is a 400 naming the field under `path`. */
function check<T>(schema: z.ZodType<T>, value: unknown, path: ReadonlyArray<PropertyKey>): T {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  throw invalid([...path, ...issue.path], issue.message);
}

/** Before any walk of the body: nesting bounded as on every door (src/request/chat-api/schema.ts). */
export function checkDepth(raw: unknown): void {
  if (nestedDeeperThan(raw, MAX_JSON_DEPTH))
    throw badRequest(
      `The request is nested more than ${MAX_JSON_DEPTH} levels deep (arrays and objects); flatten it.`,
      "invalid_request",
    );
}

type Part = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };

/** Parts as a message's content: one string when all are text (what every upstream takes). */
function asContent(parts: Part[]): string | Part[] {
  let text = "";
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (p.type !== "text") return parts;
    text += i ? `\n${p.text}` : p.text;
  }
  return text;
}

function imagePart(block: Block, path: ReadonlyArray<PropertyKey>): Part {
  const img = check(imageBlockSchema, block, path);
  const src = img.source;
  if (src.type === "base64")
    return { type: "image_url", image_url: { url: `data:${src.media_type};base64,${src.data}` } };
  if (src.type === "url") return { type: "image_url", image_url: { url: src.url } };
  throw invalid(
    [...path, "source"],
    "an image from the Files API (source type file) cannot be used here: send it as base64 or url",
  );
}

function documentParts(block: Block, path: ReadonlyArray<PropertyKey>, out: Part[]): void {
  const doc = check(documentBlockSchema, block, path);
  const src = doc.source as { type: string; data?: unknown; content?: unknown; media_type?: unknown };
  const title = doc.title ? ` "${doc.title}"` : "";
  const head = `[document${title}${doc.context ? ` (${doc.context})` : ""}]`;
  if (src.type === "text" && typeof src.data === "string") {
    out.push({ type: "text", text: `${head}\n${src.data}` });
    return;
  }
  if (src.type === "content") {
    out.push({ type: "text", text: head });
    if (typeof src.content === "string") out.push({ type: "text", text: src.content });
    else if (Array.isArray(src.content))
      src.content.forEach((b, i) => userParts(b as Block, [...path, "source", "content", i], out));
    return;
  }
  out.push({
    type: "text",
    text: `[A PDF document${title} was attached; the bridge passes only text documents to its models, so its content is left out.]`,
  });
}

/** The parts of one block of a user message (or of a tool result); kinds without one add nothing. */
function userParts(block: Block, path: ReadonlyArray<PropertyKey>, out: Part[]): void {
  switch (block.type) {
    case "text":
      out.push({ type: "text", text: check(textBlockSchema, block, path).text });
      return;
    case "image":
      out.push(imagePart(block, path));
      return;
    case "document":
      documentParts(block, path, out);
      return;
    case "search_result": {
      const r = check(searchResultBlockSchema, block, path);
      out.push({
        type: "text",
        text: `[search result${r.title ? ` "${r.title}"` : ""}${r.source ? ` ${r.source}` : ""}]`,
      });
      r.content.forEach((b, i) => userParts(b, [...path, "content", i], out));
      return;
    }
    default:
      // thinking, redacted_thinking, server tools' blocks, kinds newer than this bridge: not for the model.
      return;
  }
}

/** A user message: tool results first (as tool messages), then what the person sent. */
function userMessages(m: MessageParam, path: ReadonlyArray<PropertyKey>, out: ChatMessage[]): void {
  if (typeof m.content === "string") {
    out.push({ role: "user", content: m.content });
    return;
  }
  const parts: Part[] = [];
  /** Images returned by tools, with the line that says whose they are. */
  const toolImages: Part[] = [];
  for (let i = 0; i < m.content.length; i++) {
    const block = m.content[i]!;
    const at = [...path, "content", i];
    if (block.type !== "tool_result") {
      userParts(block, at, parts);
      continue;
    }
    const r = check(toolResultBlockSchema, block, at);
    let text = "";
    if (typeof r.content === "string") text = r.content;
    else if (r.content) {
      const inner: Part[] = [];
      r.content.forEach((b, j) => userParts(b, [...at, "content", j], inner));
      const images = inner.filter((p) => p.type === "image_url");
      text = inner
        .filter((p): p is Extract<Part, { type: "text" }> => p.type === "text")
        .map((p) => p.text)
        .join("\n");
      if (images.length) {
        toolImages.push(
          { type: "text", text: `[the image${images.length > 1 ? "s" : ""} returned by tool call ${r.tool_use_id}]` },
          ...images,
        );
        if (!text) text = `[${images.length} image${images.length > 1 ? "s" : ""}, sent in the next message]`;
      }
    }
    if (r.is_error) text = `[the tool reported an error] ${text}`;
    out.push({ role: "tool", tool_call_id: callIdOf(r.tool_use_id), content: text });
  }
  const rest = [...toolImages, ...parts];
  if (rest.length) out.push({ role: "user", content: asContent(rest) });
}

function assistantMessage(m: MessageParam, path: ReadonlyArray<PropertyKey>, out: ChatMessage[]): void {
  if (typeof m.content === "string") {
    out.push({ role: "assistant", content: m.content });
    return;
  }
  let text = "";
  const calls: NonNullable<ChatMessage["tool_calls"]> = [];
  for (let i = 0; i < m.content.length; i++) {
    const block = m.content[i]!;
    const at = [...path, "content", i];
    if (block.type === "text") text += check(textBlockSchema, block, at).text;
    else if (block.type === "tool_use") {
      const u = check(toolUseBlockSchema, block, at);
      calls.push({
        id: callIdOf(u.id),
        type: "function",
        function: { name: u.name, arguments: JSON.stringify(u.input ?? {}) },
      });
    }
    // thinking / redacted_thinking: the model's own, not sent back; server tools' blocks: Anthropic's.
  }
  if (!text && !calls.length) return;
  out.push(
    calls.length
      ? { role: "assistant", content: text || null, tool_calls: calls }
      : { role: "assistant", content: text },
  );
}

/** Text of `system` (a string or text blocks; other kinds and `cache_control` left out). */
function systemText(system: string | Block[], path: ReadonlyArray<PropertyKey>): string {
  if (typeof system === "string") return system;
  let text = "";
  for (let i = 0; i < system.length; i++) {
    const b = system[i]!;
    if (b.type !== "text") continue;
    const t = check(textBlockSchema, b, [...path, i]).text;
    text += text ? `\n${t}` : t;
  }
  return text;
}

/** The request's messages as Chat Completions messages. */
export function chatMessages(req: CountTokensRequest): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (req.system !== undefined) {
    const sys = systemText(req.system, ["system"]);
    if (sys) out.push({ role: "system", content: sys });
  }
  for (let i = 0; i < req.messages.length; i++) {
    const m = req.messages[i]!;
    const path = ["messages", i];
    if (m.role === "user") userMessages(m, path, out);
    else if (m.role === "assistant") assistantMessage(m, path, out);
    else {
      const sys = typeof m.content === "string" ? m.content : systemText(m.content, [...path, "content"]);
      if (sys) out.push({ role: "system", content: sys });
    }
  }
  return out;
}

type ChatTool = NonNullable<ChatRequest["tools"]>[number];

/** Client tools as function tools; server tools (no `input_schema`: web search, bash, text editor…) left out. */
export function chatTools(tools: ToolParam[] | undefined): ChatTool[] {
  const out: ChatTool[] = [];
  if (!tools) return out;
  for (const t of tools) {
    if (!t.input_schema || typeof t.input_schema !== "object") continue;
    if (t.type && t.type !== "custom") continue;
    out.push({
      type: "function",
      function: {
        name: t.name,
        ...(t.description ? { description: t.description } : {}),
        parameters: t.input_schema,
      },
    });
  }
  return out;
}

function chatToolChoice(choice: ToolChoice): ChatRequest["tool_choice"] {
  switch (choice.type) {
    case "auto":
      return "auto";
    case "any":
      return "required";
    case "none":
      return "none";
    case "tool":
      return { type: "function", function: { name: choice.name } };
  }
}

/** The whole request as a Chat Completions request. */
export function toChatRequest(req: MessagesRequest): ChatRequest {
  const messages = chatMessages(req);
  if (!messages.some((m) => m.role !== "system"))
    throw invalid(["messages"], "the messages hold nothing to answer (no text, image or tool result)");
  const chat: ChatRequest = { model: req.model, messages, max_tokens: req.max_tokens, stream: req.stream === true };
  if (req.stop_sequences?.length) chat.stop = req.stop_sequences;
  if (req.temperature !== undefined) chat.temperature = req.temperature;
  if (req.top_p !== undefined) chat.top_p = req.top_p;
  if (req.top_k !== undefined) chat.top_k = req.top_k;
  const tools = chatTools(req.tools);
  if (tools.length) {
    chat.tools = tools;
    if (req.tool_choice) {
      chat.tool_choice = chatToolChoice(req.tool_choice);
      if ("disable_parallel_tool_use" in req.tool_choice && req.tool_choice.disable_parallel_tool_use)
        chat.parallel_tool_calls = false;
    }
  }
  return chat;
}

/**
 * The conversation of a request with `metadata.user_id`: whose it is (Claude Code 2.1 sends a JSON
 * string with its `session_id`, one per Claude Code session; other clients an id of the person)
 * AND which thread of theirs, by a digest of its first user message (which stays the same for the
 * whole conversation). A person's separate conversations, and Claude Code's side requests and
 * subagents (the same session_id, their own first message), are then separate conversations: they
 * neither wait for each other in the queue nor share a resumed CLI session.
 */
export function conversationOf(userId: string | null | undefined, messages: ChatMessage[]): Conversation | undefined {
  const id = userId?.trim();
  if (!id) return undefined;
  let owner = `user:${id}`;
  if (id.startsWith("{")) {
    try {
      const parsed = JSON.parse(id) as { session_id?: unknown };
      if (typeof parsed.session_id === "string" && parsed.session_id) owner = `claude-code:${parsed.session_id}`;
    } catch {
      // Not JSON after all: the string itself.
    }
  }
  return threadOf(owner, messages);
}
