/**
 * The parts of the bridge's path for the `doors` suite's profile (`--profile`), finer than the
 * `openai` suite's (bench/suites/openai/parts.ts) where the doors differ: each door's own files
 * (its request check and translation, its stream dialect, its JSON collector, the Responses store),
 * the door runner, the shared stream engine, and the rest of the path (pipeline, backend, undici,
 * writes) as the `openai` suite names them. Each sample counts once: walking its stack from the
 * innermost frame, the first frame that belongs to a part decides; a zod frame is counted for the
 * repo file that called it (whose schema it checks), node core frames for whatever called them
 * (node:http's response code is always "writes to the client").
 */
import type { StackFrame } from "../../profile.js";
import { bridgePart, WRITES } from "../openai/parts.js";

/** `dist/<dir>/<file>.js` (or `src/…ts` under tsx) → `<dir>/<file>`. */
const repoFile = (area: string): string | undefined => /^(?:dist|src)\/(.+)\.[jt]s$/.exec(area)?.[1];

/** The part of a repo file that is door-specific or door-shared; undefined for the rest of the path. */
function doorFilePart(file: string, fn: string): string | undefined {
  const base = file.slice(file.lastIndexOf("/") + 1);
  if (file.startsWith("request/responses-api/")) return `Responses door: ${base}`;
  if (file === "core/store/responses") return "Responses door: response store (SQLite)";
  if (file.startsWith("request/messages-api/")) return `Messages door: ${base}`;
  if (file === "request/http/messages-routes") return "Messages door: messages-routes";
  if (file === "request/http/chat-route" || file === "request/chat-api/schema") return `Chat Completions door: ${base}`;
  if (file === "request/encoder/sse" || file === "request/encoder/chunks")
    return fn === "flush" || fn === "end" || fn === "flushWriter" ? WRITES : `Chat Completions door: ${base}`;
  if (file === "request/encoder/json") return "Chat Completions door: json";
  if (file === "request/encoder/stream")
    return fn === "flush" || fn === "end" || fn === "flushWriter" ? WRITES : "stream engine (encoder/stream)";
  if (file === "request/http/door-route" || file === "request/http/door" || file === "request/http/auth")
    return "door runner (door-route: key, body, route, conversation)";
  if (file === "request/http/http-front" || file === "request/http/app") return "HTTP front (http-front, app)";
  if (file === "request/identity/conversation") return "conversation identity";
  if (file.startsWith("request/images/")) return "images (request scan)";
  if (file.startsWith("request/pipeline/") || file.startsWith("request/queue/") || file.startsWith("request/models/"))
    return "pipeline, queue, routing";
  return undefined;
}

export function doorPart(stack: StackFrame[]): string | undefined {
  let inZod = false;
  for (let i = 0; i < stack.length; i++) {
    const f = stack[i]!;
    const fn = f.functionName;
    if (fn === "(garbage collector)" || fn === "(program)") return bridgePart(stack.slice(i));
    if (f.coreModule === "node:_http_outgoing" || fn === "connectionCorkNT") return WRITES;
    if (f.area === "zod") {
      inZod = true;
      continue;
    }
    if (f.area === "better-sqlite3") return "Responses door: response store (SQLite)";
    const file = repoFile(f.area);
    if (file !== undefined) {
      const part = doorFilePart(file, fn);
      if (part !== undefined) return inZod ? `${part} (zod)` : part;
      return bridgePart(stack.slice(i));
    }
    if (inZod) continue;
    if (f.area !== "node core" && f.area !== "(native/V8)") return bridgePart(stack.slice(i));
  }
  return inZod ? "validation (zod), caller unknown" : bridgePart(stack);
}
