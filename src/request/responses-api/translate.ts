/**
 * Responses API → the pipeline's language (Chat Completions): input items to chat messages, tools
 * to chat tools, `tool_choice` to its chat form. Pure functions; a bad item is an `ApiError` 400
 * that names it (`input[2].content[0].image_url`) and says what to send instead.
 *
 * Input items:
 * - a string → one user message;
 * - messages (`{role, content}`, with or without `type: "message"`), roles user, assistant, system,
 *   developer; parts `input_text` / `output_text` → text, `refusal` → text, `input_image` (a data URL
 *   or an http(s) URL in `image_url`, `detail` kept) → an `image_url` part (the door runner fetches
 *   and checks it); `input_file` / `input_audio` are refused (nothing here could read them);
 * - `function_call` / `custom_tool_call` → `tool_calls` of an assistant message (consecutive calls,
 *   and calls right after an assistant message, join that message, as Chat Completions wants them);
 *   `function_call_output` / `custom_tool_call_output` → `tool` messages;
 * - every other item kind (`reasoning`, `web_search_call`, `local_shell_call`, `item_reference`,
 *   `compaction`, kinds newer than this file...) is left out: it cannot be said in chat messages,
 *   and a client that sends it (Codex sends its reasoning back) must still be answered.
 *
 * Tools: `function` tools become chat tools as they are. Codex 0.169 also offers tools the pipeline
 * can still carry as functions: a `custom` (freeform) tool such as `apply_patch` becomes a function
 * with one string argument `input` (its grammar, if any, told in the description), and a call of it
 * goes back to the client as a `custom_tool_call`; a `namespace` tool (an MCP server's tools,
 * Codex's sub-agents) becomes one function per tool, named `<namespace>__<tool>`, and a call goes
 * back with `name` and `namespace` apart. Hosted tools (`web_search`, `file_search`, `local_shell`,
 * `computer_use_preview`, `image_generation`, `mcp`, `code_interpreter`...) run on OpenAI's side and
 * cannot be functions: they are left out, never refused.
 */
import { badRequest } from "../chat-api/errors.js";
import type { ChatMessage } from "../chat-api/schema.js";

/** What a chat tool name stands for in the Responses API. */
export interface ToolName {
  name: string;
  namespace?: string;
  /** A freeform tool: its call is a `custom_tool_call` whose `input` is the chat call's `input` argument. */
  custom: boolean;
}

/** Chat tool name → the Responses tool it stands for. */
export type ToolMap = ReadonlyMap<string, ToolName>;

export interface ChatTool {
  type: "function";
  function: { name: string; description?: string; parameters: unknown; strict?: boolean };
}

type ToolCall = NonNullable<ChatMessage["tool_calls"]>[number];
type Obj = Record<string, unknown>;

const ROLES: ReadonlySet<string> = new Set(["user", "assistant", "system", "developer"]);
const DETAILS: ReadonlySet<string> = new Set(["low", "high", "auto", "original"]);

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** The chat name of a tool in a namespace (`mcp__openclaw` + `session_status` → `mcp__openclaw__session_status`). */
export function flatName(namespace: string | undefined, name: string): string {
  if (!namespace) return name;
  return namespace.endsWith("_") ? namespace + name : `${namespace}__${name}`;
}

/** The input as chat messages (instructions apart). Throws a 400 `ApiError` naming the bad item. */
export function translateInput(input: string | readonly unknown[]): ChatMessage[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  const out: ChatMessage[] = [];
  for (let i = 0; i < input.length; i++) {
    const item = input[i];
    const at = `input[${i}]`;
    if (!isObj(item))
      throw badRequest(
        `${at}: each input item must be an object: a message {"role", "content"}, a function_call_output...`,
        "invalid_request",
        at,
      );
    const type = item.type;
    if (type === undefined || type === "message") {
      const m = message(item, at);
      if (m) out.push(m);
      continue;
    }
    if (typeof type !== "string") throw badRequest(`${at}.type: must be a string`, "invalid_request", `${at}.type`);
    switch (type) {
      case "function_call":
        addCall(out, {
          id: str(item, "call_id", at),
          type: "function",
          function: {
            name: flatName(optStr(item, "namespace", at), str(item, "name", at)),
            arguments: str(item, "arguments", at),
          },
        });
        break;
      case "custom_tool_call":
        addCall(out, {
          id: str(item, "call_id", at),
          type: "function",
          function: {
            name: flatName(optStr(item, "namespace", at), str(item, "name", at)),
            arguments: JSON.stringify({ input: str(item, "input", at) }),
          },
        });
        break;
      case "function_call_output":
      case "custom_tool_call_output":
        out.push({ role: "tool", tool_call_id: str(item, "call_id", at), content: toolOutput(item.output, at) });
        break;
      default:
        // reasoning, hosted tools' calls, item references, compaction...: nothing chat can carry.
        break;
    }
  }
  return out;
}

/** A call joins the assistant message right before it (its text, or the calls before it); else it starts one. */
function addCall(out: ChatMessage[], call: ToolCall): void {
  const last = out[out.length - 1];
  if (last?.role === "assistant") {
    if (last.tool_calls) last.tool_calls.push(call);
    else last.tool_calls = [call];
    return;
  }
  out.push({ role: "assistant", content: null, tool_calls: [call] });
}

function message(item: Obj, at: string): ChatMessage | undefined {
  const role = item.role;
  if (typeof role !== "string" || !ROLES.has(role)) {
    const what = role === undefined ? "an item needs a `type`, or, for a message, a `role`" : "unknown role";
    throw badRequest(
      `${at}${role === undefined ? "" : ".role"}: ${what} (user, assistant, system or developer)`,
      "invalid_request",
      role === undefined ? at : `${at}.role`,
    );
  }
  const content = item.content;
  const r = role as "user" | "assistant" | "system" | "developer";
  if (typeof content === "string") return { role: r, content };
  if (!Array.isArray(content))
    throw badRequest(
      `${at}.content: must be a string or an array of content parts (input_text, input_image...)`,
      "invalid_request",
      `${at}.content`,
    );
  const parts: Array<{ type: "text"; text: string } | { type: "image_url"; image_url: Obj }> = [];
  let images = false;
  for (let j = 0; j < content.length; j++) {
    const p = content[j];
    const pat = `${at}.content[${j}]`;
    if (!isObj(p) || typeof p.type !== "string")
      throw badRequest(`${pat}: each content part must be an object with a \`type\``, "invalid_request", pat);
    switch (p.type) {
      case "input_text":
      case "output_text":
      case "text":
        parts.push({ type: "text", text: str(p, "text", pat) });
        break;
      case "refusal":
        parts.push({ type: "text", text: str(p, "refusal", pat) });
        break;
      case "input_image": {
        const url = p.image_url;
        if (typeof url !== "string" || !url)
          throw badRequest(
            `${pat}.image_url: give the image as a data URL (data:image/png;base64,...) or an http(s) URL; file_id is not supported (this bridge keeps no files)`,
            "invalid_request",
            `${pat}.image_url`,
          );
        const detail = typeof p.detail === "string" && DETAILS.has(p.detail) ? p.detail : undefined;
        parts.push({ type: "image_url", image_url: detail ? { url, detail } : { url } });
        images = true;
        break;
      }
      case "input_file":
      case "input_audio":
        throw badRequest(
          `${pat}: ${p.type} is not supported here; send the file's text as input_text (or an image as input_image)`,
          "invalid_request",
          pat,
        );
      default:
        // A part kind newer than this file: nothing chat can carry.
        break;
    }
  }
  if (!parts.length) return undefined;
  if (!images && parts.length === 1) return { role: r, content: (parts[0] as { text: string }).text };
  return { role: r, content: parts };
}

/** A tool output: a string, or parts whose text is joined (images and files in a tool output cannot be carried). */
function toolOutput(output: unknown, at: string): string {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) {
    let text = "";
    for (const p of output) if (isObj(p) && typeof p.text === "string") text += (text ? "\n" : "") + p.text;
    return text;
  }
  throw badRequest(
    `${at}.output: must be a string (the tool's result) or an array of input_text parts`,
    "invalid_request",
    `${at}.output`,
  );
}

function str(o: Obj, key: string, at: string): string {
  const v = o[key];
  if (typeof v !== "string") throw badRequest(`${at}.${key}: must be a string`, "invalid_request", `${at}.${key}`);
  return v;
}

function optStr(o: Obj, key: string, at: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") throw badRequest(`${at}.${key}: must be a string`, "invalid_request", `${at}.${key}`);
  return v || undefined;
}

const FREEFORM_PARAMETERS = {
  type: "object",
  properties: { input: { type: "string", description: "The tool's whole input, as free text." } },
  required: ["input"],
  additionalProperties: false,
};

const EMPTY_PARAMETERS = { type: "object", properties: {} };

/** The request's tools as chat tools, and what each chat name stands for. Hosted tools are left out. */
export function translateTools(tools: readonly Obj[] | undefined): { tools: ChatTool[]; map: Map<string, ToolName> } {
  const out: ChatTool[] = [];
  const map = new Map<string, ToolName>();
  const add = (t: Obj, at: string, namespace: string | undefined): void => {
    const name = t.name;
    if (typeof name !== "string" || !name)
      throw badRequest(`${at}.name: a ${String(t.type)} tool needs a name`, "invalid_request", `${at}.name`);
    const chatName = flatName(namespace, name);
    if (map.has(chatName)) return;
    const description = typeof t.description === "string" && t.description ? t.description : undefined;
    if (t.type === "custom") {
      const format = isObj(t.format) ? t.format : undefined;
      const grammar =
        format?.type === "grammar" && typeof format.definition === "string"
          ? `\n\nThe input follows this ${typeof format.syntax === "string" ? `${format.syntax} ` : ""}grammar:\n${format.definition}`
          : "";
      out.push({
        type: "function",
        function: {
          name: chatName,
          description: `${description ?? `The ${name} tool.`} Call it with its whole input as the string argument \`input\`.${grammar}`,
          parameters: FREEFORM_PARAMETERS,
        },
      });
      map.set(chatName, { name, ...(namespace ? { namespace } : {}), custom: true });
      return;
    }
    const parameters = t.parameters ?? EMPTY_PARAMETERS;
    if (!isObj(parameters))
      throw badRequest(`${at}.parameters: must be a JSON schema object`, "invalid_request", `${at}.parameters`);
    out.push({
      type: "function",
      function: {
        name: chatName,
        ...(description ? { description } : {}),
        parameters,
        ...(typeof t.strict === "boolean" ? { strict: t.strict } : {}),
      },
    });
    map.set(chatName, { name, ...(namespace ? { namespace } : {}), custom: false });
  };
  for (const [i, t] of (tools ?? []).entries()) {
    const at = `tools[${i}]`;
    if (t.type === "function" || t.type === "custom") add(t, at, undefined);
    else if (t.type === "namespace") {
      const ns = t.name;
      if (typeof ns !== "string" || !ns)
        throw badRequest(`${at}.name: a namespace tool needs a name`, "invalid_request", `${at}.name`);
      if (!Array.isArray(t.tools))
        throw badRequest(`${at}.tools: a namespace tool needs its tools`, "invalid_request", `${at}.tools`);
      for (const [j, inner] of t.tools.entries()) {
        if (!isObj(inner)) continue;
        if (inner.type === "function" || inner.type === "custom") add(inner, `${at}.tools[${j}]`, ns);
      }
    }
    // Hosted tools (web_search, file_search, local_shell, mcp...) run on OpenAI's side: left out.
  }
  return { tools: out, map };
}

/**
 * `tool_choice` in chat form, or undefined (the default, or nothing to choose from). A named tool
 * must be one of the request's; a hosted tool's choice becomes `auto` (that tool is left out).
 */
export function translateToolChoice(choice: unknown, map: ToolMap): unknown {
  if (choice === undefined || choice === null || map.size === 0) return undefined;
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  if (isObj(choice) && typeof choice.type === "string") {
    switch (choice.type) {
      case "function":
      case "custom": {
        const name = choice.name;
        if (typeof name !== "string" || !name)
          throw badRequest(
            `tool_choice.name: name the ${choice.type} tool to call`,
            "invalid_request",
            "tool_choice.name",
          );
        const chatName = flatName(typeof choice.namespace === "string" ? choice.namespace : undefined, name);
        if (!map.has(chatName))
          throw badRequest(
            `tool_choice.name: no ${choice.type} tool "${name}" in tools (offered: ${[...map.values()].map((t) => t.name).join(", ")})`,
            "invalid_request",
            "tool_choice.name",
          );
        return { type: "function", function: { name: chatName } };
      }
      case "allowed_tools":
        return choice.mode === "required" ? "required" : "auto";
      default:
        // A hosted tool (web_search, file_search, mcp...): not offered here.
        return "auto";
    }
  }
  throw badRequest(
    'tool_choice: must be "auto", "none", "required" or {"type": "function", "name": "<tool>"}',
    "invalid_request",
    "tool_choice",
  );
}
