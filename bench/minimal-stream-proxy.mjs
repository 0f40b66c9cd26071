/**
 * The smallest useful Node.js STREAMING proxy for the OpenAI chat route, as the REFERENCE for the
 * bridge's streaming CPU (run as its own process by the `openai` suite, beside
 * bench/minimal-proxy.mjs, which is the non-streaming one):
 *
 *   node bench/minimal-stream-proxy.mjs --upstream http://127.0.0.1:<port> [--port 0]
 *
 * node:http server → JSON.parse of the request → model replaced, `stream: true` → undici Pool
 * dispatch (the cheapest client API) → the upstream's event stream read as it arrives, and PER
 * FRAME: the JSON parsed, `id` and `model` rewritten, re-serialised, written as one SSE frame
 * (`res.write` per frame, as it arrives: no batching, no cork). `data: [DONE]` is passed on as is.
 * No validation, routing, queue, timeouts, tool-call or special-token handling, heartbeats, abort
 * handling, logging or error shapes: only what no streaming bridge can skip. Prints `PORT <n>` once
 * listening. Plain JavaScript, run by node itself (no tsx), like the bridge's compiled build.
 */
import http from "node:http";
import { StringDecoder } from "node:string_decoder";
import { Pool } from "undici";

function arg(name) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const upstream = arg("upstream");
if (!upstream) throw new Error("--upstream <origin> is required");
const pool = new Pool(upstream, { connections: 64, headersTimeout: 0, bodyTimeout: 0 });

let seq = 0;

const server = http.createServer((req, res) => {
  const parts = [];
  req.on("data", (c) => parts.push(c));
  req.on("end", () => {
    const body = JSON.parse(Buffer.concat(parts).toString("utf8"));
    const payload = JSON.stringify({ ...body, model: "bench-model", stream: true });
    const id = `chatcmpl-minimal${++seq}`;
    const model = body.model;
    const decoder = new StringDecoder("utf8");
    let pending = "";
    const handler = {
      onRequestStart() {},
      onResponseStart() {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      },
      onResponseData(_c, chunk) {
        pending += decoder.write(chunk);
        let end;
        while ((end = pending.indexOf("\n\n")) >= 0) {
          const frame = pending.slice(0, end);
          pending = pending.slice(end + 2);
          if (!frame.startsWith("data: ")) continue;
          const data = frame.slice(6);
          if (data === "[DONE]") {
            res.write("data: [DONE]\n\n");
            continue;
          }
          const obj = JSON.parse(data);
          obj.id = id;
          obj.model = model;
          res.write(`data: ${JSON.stringify(obj)}\n\n`);
        }
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError(_c, err) {
        if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
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
