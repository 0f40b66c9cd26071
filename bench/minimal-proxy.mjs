/**
 * The smallest useful Node.js proxy for the OpenAI chat route, as a REFERENCE for the throughput
 * target (run as its own process by the `openai` suite):
 *
 *   node bench/minimal-proxy.mjs --upstream http://127.0.0.1:<port> [--port 0]
 *
 * node:http server → JSON.parse → model replaced → undici Pool dispatch (the cheapest client API) →
 * upstream JSON parsed → a `chat.completion` written back. No validation, routing, queue, timeouts,
 * abort handling, logging or error shapes: only what no bridge can skip. It answers non-streaming
 * requests only. Prints `PORT <n>` once listening. Whatever share of the direct throughput it keeps
 * on a machine is a practical ceiling for a Node.js bridge there. Plain JavaScript, run by node itself (no
 * tsx), like the bridge's compiled build.
 */
import http from "node:http";
import { Pool } from "undici";

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const upstream = arg("upstream");
if (!upstream) throw new Error("--upstream <origin> is required");
const pool = new Pool(upstream, { connections: 64, headersTimeout: 0, bodyTimeout: 0 });

function answer(res, model, text) {
  const up = JSON.parse(text);
  const out = JSON.stringify({
    id: "chatcmpl-minimal",
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: up.choices[0].message.content },
        logprobs: null,
        finish_reason: "stop",
      },
    ],
    usage: up.usage,
  });
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(out) });
  res.end(out);
}

const server = http.createServer((req, res) => {
  const parts = [];
  req.on("data", (c) => parts.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(parts).toString("utf8"));
    const payload = JSON.stringify({ ...body, model: "bench-model", stream: false });
    const chunks = [];
    const handler = {
      onRequestStart() {},
      onResponseStart() {},
      onResponseData(_c, chunk) {
        chunks.push(chunk);
      },
      onResponseEnd() {
        answer(res, body.model, Buffer.concat(chunks).toString("utf8"));
      },
      onResponseError(_c, err) {
        res.writeHead(502, { "content-type": "text/plain" });
        res.end(String(err));
      },
    };
    pool.dispatch(
      { path: "/v1/chat/completions", method: "POST", headers: { "content-type": "application/json" }, body: payload },
      handler,
    );
  });
});
server.keepAliveTimeout = 120_000;
server.listen(Number(arg("port") ?? 0), "127.0.0.1", () => {
  process.stdout.write(`PORT ${server.address().port}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
