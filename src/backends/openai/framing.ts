/**
 * The framing of an upstream answer into `StreamTranslator` calls: an event stream (`SseDecoder`,
 * fed text by `UpstreamTurn` in ./transport.ts, and `sseEvents` over a body a caller reads itself)
 * or a whole `chat.completion` JSON body (`jsonEvents`); `bodyFormat` tells them apart.
 */
import type { TextDecoder } from "node:util";
import { createParser, type EventSourceMessage, type EventSourceParser, type ParseError } from "eventsource-parser";
import type { Logger } from "pino";
import type { BackendError, BackendEvent } from "../contract/backend.js";
import { chunkError } from "./errors.js";
import type { StreamTranslator, UpstreamChunk } from "./translate.js";

const MAX_SSE_BUFFER = 16 * 1024 * 1024;
/** Options of a streaming `TextDecoder.decode` (one object, not one per chunk). */
export const STREAM_DECODE = { stream: true } as const;

/** An answer's format by its content type; "sniff": decided by its first bytes. */
export function bodyFormat(contentType: string | string[] | undefined): "sse" | "json" | "sniff" {
  const ctype = String(contentType ?? "").toLowerCase();
  return ctype.includes("event-stream") ? "sse" : ctype.includes("json") ? "json" : "sniff";
}

/** A body read chunk by chunk: the next chunk, or null at its end (`sseEvents`). */
export interface BodyChunks {
  ended: boolean;
  next(): Promise<Buffer | null>;
}

/** A whole `chat.completion` JSON body (a plain JSON reply to our streaming request). */
export function* jsonEvents(
  translator: StreamTranslator,
  text: string,
  url: string,
  logger: Logger,
): Generator<BackendEvent> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    yield {
      type: "error",
      error: {
        code: "upstream_error",
        message: `upstream ${url} sent invalid JSON: ${text.slice(0, 200)}`,
        status: 502,
        retryable: true,
      },
    };
    return;
  }
  const bad = chunkError(parsed);
  if (bad) {
    yield { type: "error", error: bad };
    return;
  }
  const obj = parsed as UpstreamChunk;
  if (!Array.isArray(obj.choices) || obj.choices.length === 0) {
    yield {
      type: "error",
      error: {
        code: "upstream_error",
        message: `upstream ${url} answered JSON without choices: ${text.slice(0, 200)}`,
        status: 502,
        retryable: true,
      },
    };
    return;
  }
  logger.debug("upstream answered a streaming request with plain JSON; converted to events");
  yield* translator.message(obj);
  yield* translator.finish();
}

/**
 * The event-stream side of an answer, synchronous: decoded text in, the translator's events out
 * (appended to the caller's array). Each `push()` parses what the text completes and translates
 * every frame at once: nothing is held back beyond what the translator holds. It ends the answer
 * (`done`) with the translator's closing events at `[DONE]`, at the tool-call cap, or at the end
 * of the body after a `finish_reason`; with an error event on malformed data, an error payload,
 * or a body that ends too early.
 */
export class SseDecoder {
  private readonly messages: EventSourceMessage[] = [];
  private parseError: ParseError | undefined = undefined;
  private oddLine: string | undefined = undefined;
  private readonly parser: EventSourceParser;
  private sawData = false;
  /** The answer is over (its last event was produced): nothing more is read. */
  done = false;

  constructor(
    private readonly translator: StreamTranslator,
    private readonly url: string,
    private readonly state: { sawDone: boolean },
  ) {
    this.parser = createParser({
      maxBufferSize: MAX_SSE_BUFFER,
      onEvent: (e) => this.messages.push(e),
      onError: (e) => {
        if (e.type === "unknown-field") this.oddLine ??= e.line ?? e.field ?? "";
        else if (e.type === "max-buffer-size-exceeded") this.parseError = e;
      },
    });
  }

  /** The next decoded text of the body (`eof`: the body ended after it); events are appended to `out`. Returns `done`. */
  push(text: string, eof: boolean, out: BackendEvent[]): boolean {
    if (this.done) return true;
    const feed = eof ? text + "\n\n" : text;
    if (feed) this.parser.feed(feed);
    if (this.parseError) {
      out.push({
        type: "error",
        error: {
          code: "upstream_error",
          message: `upstream ${this.url} sent a malformed event stream: ${this.parseError.message}`,
          status: 502,
          retryable: true,
        },
      });
      return this.end();
    }
    const messages = this.messages;
    const translator = this.translator;
    let finished = false;
    let i = 0;
    for (; i < messages.length && !finished; i++) {
      const m = messages[i]!;
      const payload = m.data.trim();
      if (!payload) continue;
      this.sawData = true;
      if (payload === "[DONE]") {
        finished = true;
        this.state.sawDone = true;
        break;
      }
      let obj: unknown;
      try {
        obj = JSON.parse(payload);
      } catch {
        out.push({
          type: "error",
          error: {
            code: "upstream_error",
            message: `upstream ${this.url} sent malformed stream data (not JSON): ${payload.slice(0, 200)}`,
            status: 502,
            retryable: true,
          },
        });
        return this.end();
      }
      const bad = chunkError(obj, m.event);
      if (bad) {
        out.push({ type: "error", error: bad });
        return this.end();
      }
      if (obj && typeof obj === "object") translator.chunkInto(obj as UpstreamChunk, out);
      if (translator.capReached) finished = true;
    }
    messages.length = 0;
    if (finished) {
      for (const ev of translator.finish()) out.push(ev);
      return this.end();
    }
    if (!eof) return false;
    if (translator.sawFinish) {
      for (const ev of translator.finish()) out.push(ev);
      return this.end();
    }
    const why = this.sawData
      ? "the stream ended before a finish_reason or [DONE]"
      : this.oddLine !== undefined
        ? `it is not an event stream (unexpected line: ${this.oddLine.slice(0, 200)})`
        : "the body was empty";
    out.push({
      type: "error",
      error: {
        code: "upstream_error",
        message: `upstream ${this.url} sent an incomplete answer: ${why}`,
        status: 502,
        retryable: true,
      },
    });
    return this.end();
  }

  private end(): true {
    this.done = true;
    this.messages.length = 0;
    return true;
  }
}

/**
 * An SSE body read through `reader` (`initial`: text already read): each chunk is parsed and its
 * events are yielded before the next read (`SseDecoder`). For a caller that reads a body itself
 * (test/unit/openai-translate.test.ts cuts the fixtures at every byte boundary through it); the
 * backend's own path is `UpstreamTurn`, which feeds the same `SseDecoder` from undici's callbacks.
 */
export async function* sseEvents(
  translator: StreamTranslator,
  initial: string,
  reader: BodyChunks,
  decoder: TextDecoder,
  failure: (err: unknown, phase: "connect" | "stream") => BackendError,
  url: string,
  state: { sawDone: boolean },
): AsyncGenerator<BackendEvent> {
  const sse = new SseDecoder(translator, url, state);
  const out: BackendEvent[] = [];
  sse.push(initial, reader.ended, out);
  for (;;) {
    if (out.length) {
      const events = out.splice(0);
      yield* events;
    }
    if (sse.done) return;
    let chunk: Buffer | null;
    try {
      chunk = await reader.next();
    } catch (err) {
      yield { type: "error", error: failure(err, "stream") };
      return;
    }
    if (chunk) sse.push(decoder.decode(chunk, STREAM_DECODE), false, out);
    else sse.push(decoder.decode(), true, out);
  }
}
