/**
 * The router suite's fake OpenAI-compatible upstream (its own process): it answers both models the
 * router uses, and measures and counts the classifier calls.
 *
 *   node --import tsx bench/suites/router/fake-upstream.ts [--chunks 20] [--port 0]
 *
 * Prints `PORT <n>` once listening (127.0.0.1 only).
 *
 * - A request whose body mentions "classif" and whose system message does (src/workflows/router/classifier.ts
 *   starts it with "You classify ONE chat message…") is a CLASSIFIER call: answered at once with a
 *   JSON decision (SSE when `"stream":true`, else a `chat.completion`), chosen by the text after the
 *   last "Message:" line of its user text:
 *     "blog post about <topic>" → run content-pipeline {topic}     (the clarify path)
 *     "publish"                 → run publish-post {title: "Hello"} (side effects: the confirm path)
 *     anything else             → answer, confidence 0.1           (hand-over to the answer model)
 *   Its duration is measured here: request arrival ('request' event) → response end ('finish').
 *   A `[q<n>]` marker in the message files the duration under n, so the suite can pair it with the
 *   request that caused it.
 * - Any other chat request is the ANSWER model: the precomputed 20-chunk answer of
 *   bench/fake-upstream.ts, back-to-back, no delay (JSON without `"stream":true`).
 * - `GET /__stats`: `{classifierCalls, answerCalls, byMarker: {n: ms}, unmarked: [ms…]}`;
 *   `POST /__reset` clears them. `GET …/models`: a model list.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import { answerText, FAKE_MODEL, precompute } from "../../fake-upstream.js";

const CLASSIF = Buffer.from("classif");
const STREAM_FLAG = Buffer.from('"stream":true');
/** Bounds: a request body, and the recorded durations. */
const MAX_BODY = 8 * 1024 * 1024;
const MAX_RECORDS = 1_000_000;

export interface FakeStats {
  classifierCalls: number;
  answerCalls: number;
  /** Classifier duration (ms) by the `[q<n>]` marker of the message it classified. */
  byMarker: Record<string, number>;
  /** Classifier durations (ms) of messages without a marker. */
  unmarked: number[];
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content))
    return content
      .map((p) =>
        p && typeof p === "object" && typeof (p as { text?: unknown }).text === "string"
          ? (p as { text: string }).text
          : "",
      )
      .join("\n");
  return "";
}

/** The classifier's decision for the message it is asked about. */
function decide(message: string): object {
  const blog = /blog post about (\w+)/i.exec(message);
  if (blog) return { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { topic: blog[1] } };
  if (/\bpublish\b/i.test(message))
    return { action: "run", system: "publish-post", confidence: 0.9, inputs: { title: "Hello" } };
  return { action: "answer", confidence: 0.1 };
}

function classifierBody(decision: object, stream: boolean): string {
  const content = JSON.stringify(decision);
  const base = { id: "chatcmpl-cls", created: 1763716380, model: "classifier" };
  if (!stream) {
    return JSON.stringify({
      ...base,
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
      usage: { prompt_tokens: 100, completion_tokens: 12, total_tokens: 112 },
    });
  }
  const frame = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  return frame({ role: "assistant", content: "" }) + frame({ content }) + frame({}, "stop") + "data: [DONE]\n\n";
}

export function startRouterFake(chunks: number, port = 0): Promise<http.Server> {
  const replies = precompute(chunks);
  const last = replies.sseFrames.length - 1;
  const stats: FakeStats = { classifierCalls: 0, answerCalls: 0, byMarker: {}, unmarked: [] };
  let records = 0;

  const server = http.createServer((req, res) => {
    const arrived = performance.now();
    const url = req.url ?? "/";
    if (req.method === "GET") {
      if (url.startsWith("/__stats")) {
        const body = JSON.stringify(stats);
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
        res.end(body);
        return;
      }
      res.writeHead(200, { "content-type": "application/json", "content-length": replies.models.length });
      res.end(replies.models);
      return;
    }
    const parts: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) parts.push(c);
    });
    req.on("end", () => {
      if (url.startsWith("/__reset")) {
        stats.classifierCalls = 0;
        stats.answerCalls = 0;
        stats.byMarker = {};
        stats.unmarked = [];
        records = 0;
        res.writeHead(204);
        res.end();
        return;
      }
      const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
      const stream = body.includes(STREAM_FLAG);
      if (body.includes(CLASSIF)) {
        let parsed: { messages?: Array<{ role?: string; content?: unknown }> } | undefined;
        try {
          parsed = JSON.parse(body.toString("utf8"));
        } catch {
          parsed = undefined;
        }
        const messages = Array.isArray(parsed?.messages) ? parsed!.messages : [];
        const system = messages
          .filter((m) => m.role === "system")
          .map((m) => textOf(m.content))
          .join("\n");
        if (/classif/i.test(system)) {
          stats.classifierCalls++;
          const user = textOf([...messages].reverse().find((m) => m.role === "user")?.content);
          const at = user.lastIndexOf("Message:\n");
          const message = at < 0 ? user : user.slice(at + "Message:\n".length);
          const marker = /\[q(\d+)\]/.exec(message)?.[1];
          res.once("finish", () => {
            if (records++ >= MAX_RECORDS) return;
            const took = performance.now() - arrived;
            if (marker !== undefined) stats.byMarker[marker] = took;
            else stats.unmarked.push(took);
          });
          const out = classifierBody(decide(message), stream);
          res.writeHead(200, {
            "content-type": stream ? "text/event-stream" : "application/json",
            "content-length": Buffer.byteLength(out),
          });
          res.end(out);
          return;
        }
      }
      stats.answerCalls++;
      if (stream) {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        for (let i = 0; i < last; i++) res.write(replies.sseFrames[i]);
        res.end(replies.sseFrames[last]);
      } else {
        res.writeHead(200, { "content-type": "application/json", "content-length": replies.json.length });
        res.end(replies.json);
      }
    });
  });
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 130_000;
  return new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve(server)));
}

export { answerText, FAKE_MODEL };

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(v) ? v : fallback;
}

// Run as a program (not when imported).
if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  const server = await startRouterFake(arg("chunks", 20), arg("port", 0));
  process.stdout.write(`PORT ${(server.address() as AddressInfo).port}\n`);
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
