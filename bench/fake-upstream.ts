/**
 * A minimal, fast fake OpenAI-compatible upstream for benchmarks (run as its own process).
 *
 *   node --import tsx bench/fake-upstream.ts [--chunks 20] [--port 0]
 *
 * Prints `PORT <n>` on stdout once listening. Every reply is precomputed at start-up:
 * - `POST …/chat/completions` with `"stream":true` in the body: an SSE stream of a role chunk,
 *   N content chunks, a finish chunk, a usage chunk and `[DONE]`, each frame its own `write()`,
 *   back-to-back, no delay;
 * - the same without `"stream":true`: one `chat.completion` JSON body with the same text;
 * - `GET …/models`: a model list (the bridge's health check).
 * Nothing is parsed beyond a substring check of the request body, so the fake is never the
 * bottleneck of a comparison.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";

export const FAKE_MODEL = "bench-model";

/** The words the fake streams, one per chunk (cycled when more chunks are asked for). */
const WORDS = [
  "The",
  " quick",
  " brown",
  " fox",
  " jumps",
  " over",
  " the",
  " lazy",
  " dog",
  ".",
  " It",
  " was",
  " a",
  " sunny",
  " day",
  " in",
  " the",
  " small",
  " town",
  ".",
];

export function answerText(chunks: number): string {
  let s = "";
  for (let i = 0; i < chunks; i++) s += WORDS[i % WORDS.length];
  return s;
}

export interface FakeReplies {
  sseFrames: Buffer[];
  json: Buffer;
  models: Buffer;
}

export function precompute(chunks: number): FakeReplies {
  const id = "chatcmpl-bench0000000000000000";
  const frame = (obj: unknown) => Buffer.from(`data: ${JSON.stringify(obj)}\n\n`);
  const chunk = (delta: object, finish: string | null = null) =>
    frame({
      id,
      object: "chat.completion.chunk",
      created: 1763716380,
      model: FAKE_MODEL,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
  const usage = { prompt_tokens: 42, completion_tokens: chunks, total_tokens: 42 + chunks };
  const sseFrames = [chunk({ role: "assistant", content: "" })];
  for (let i = 0; i < chunks; i++) sseFrames.push(chunk({ content: WORDS[i % WORDS.length] }));
  sseFrames.push(chunk({}, "stop"));
  sseFrames.push(
    frame({ id, object: "chat.completion.chunk", created: 1763716380, model: FAKE_MODEL, choices: [], usage }),
  );
  sseFrames.push(Buffer.from("data: [DONE]\n\n"));
  const json = Buffer.from(
    JSON.stringify({
      id,
      object: "chat.completion",
      created: 1763716380,
      model: FAKE_MODEL,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: answerText(chunks) },
          logprobs: null,
          finish_reason: "stop",
        },
      ],
      usage,
    }),
  );
  const models = Buffer.from(
    JSON.stringify({ object: "list", data: [{ id: FAKE_MODEL, object: "model", owned_by: "bench" }] }),
  );
  return { sseFrames, json, models };
}

const STREAM_FLAG = Buffer.from('"stream":true');

export function startFakeUpstream(chunks: number, port = 0): Promise<http.Server> {
  const replies = precompute(chunks);
  const last = replies.sseFrames.length - 1;
  const server = http.createServer((req, res) => {
    if (req.method === "GET") {
      res.writeHead(200, { "content-type": "application/json", "content-length": replies.models.length });
      res.end(replies.models);
      return;
    }
    const parts: Buffer[] = [];
    req.on("data", (c: Buffer) => parts.push(c));
    req.on("end", () => {
      const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
      if (body.includes(STREAM_FLAG)) {
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

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : NaN;
  return Number.isFinite(v) ? v : fallback;
}

// Run as a program (not when imported).
if (process.argv[1] && pathToFileURL(process.argv[1]).href === import.meta.url) {
  const server = await startFakeUpstream(arg("chunks", 20), arg("port", 0));
  process.stdout.write(`PORT ${(server.address() as AddressInfo).port}\n`);
  const stop = () => server.close(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
