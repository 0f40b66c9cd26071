/**
 * The parts of the bridge's path for the profile's breakdown (`--profile`): each sample of the
 * bridge's CPU profile is counted in one part, found by walking its stack from the innermost frame:
 * the first frame that belongs to a part decides. Frames of node core's HTTP response code count
 * as writes to the client wherever they are called from; other node core frames (streams, timers,
 * the event loop) count for the repo or package code that called them.
 */
import type { StackFrame } from "../../profile.js";

/** `dist/<dir>/<file>.js` (or `src/…ts` under tsx) → `<dir>/<file>`. */
const repoFile = (area: string): string | undefined => /^(?:dist|src)\/(.+)\.[jt]s$/.exec(area)?.[1];

export const WRITES = "writes to the client (node:http response, socket, syscalls)";

export function bridgePart(stack: StackFrame[]): string | undefined {
  let sawHttpServer = false;
  for (const f of stack) {
    const fn = f.functionName;
    if (fn === "(garbage collector)") return "garbage collection";
    if (fn === "(program)") return "V8 and Node internals outside JavaScript ((program))";
    if (f.coreModule === "node:_http_outgoing" || fn === "connectionCorkNT") return WRITES;
    if (
      f.coreModule === "node:_http_server" ||
      f.coreModule === "node:_http_common" ||
      f.coreModule === "node:_http_incoming"
    )
      sawHttpServer = true;
    const file = repoFile(f.area);
    if (file !== undefined) {
      if (file === "backends/openai/transport") {
        if (fn === "decode") return "SSE: UTF-8 decoding of the body";
        if (fn === "push" || fn === "sseText") return "SSE: frames, JSON.parse of each (SseDecoder)";
        return "upstream request and body callbacks (UpstreamTurn, TurnControl)";
      }
      if (file === "backends/openai/translate") return "stream translator (chunks → events)";
      if (file === "toolcalls/special-tokens") return "special-token stripping";
      if (file.startsWith("toolcalls/")) return "tool-call sniffing (extractor)";
      if (file === "encoder/sse")
        return fn === "flush" || fn === "end" || fn === "flushWriter" ? WRITES : "SSE encoder (frames, its event loop)";
      if (file.startsWith("encoder/")) return "encoders (frames, chat.completion)";
      if (file.startsWith("backends/")) return "backend set-up (upstream body, translator)";
      if (file.startsWith("server/") || file.startsWith("openai/")) return "chat route (body, validation, routing)";
      return "pipeline, queue, contract, logging";
    }
    if (f.area === "eventsource-parser") return "SSE: line parsing (eventsource-parser)";
    if (f.area === "undici" || f.area.startsWith("wasm://"))
      return "upstream client (undici: dispatch, llhttp parsing)";
    if (f.area === "zod") return "chat route (body, validation, routing)";
    if (f.area !== "node core" && f.area !== "(native/V8)")
      return "other packages and scripts (mostly loading them at start-up)";
  }
  return sawHttpServer
    ? "HTTP server (node:http request parsing)"
    : "other (event loop, timers, microtasks, native code)";
}
