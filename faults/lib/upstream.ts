/**
 * A fake OpenAI-compatible upstream for the abort, starvation and shutdown parts: it answers at a
 * pace the request asks for (directives in the last user message, like the fake CLIs:
 * FAULTKEY-<key>, FAULTN-<chunks>, FAULTMS-<ms between chunks>, FAULTFIRST-<ms before the first>),
 * counts the requests still open, and notices two requests of one conversation open at once.
 * Built on testkit/fakes/fake-http.ts.
 */
import type { ServerResponse } from "node:http";
import { serveFake, type FakeHttpServer } from "../../testkit/fakes/fake-http.js";

export interface SlowUpstream {
  url: string;
  /** Requests still being answered. */
  open(): number;
  /** Chat requests received. */
  requests(): number;
  /**
   * A request arrived while an earlier one of the same conversation was still open, and that one
   * was still open 200 ms later (the tolerance covers a close that is on its way).
   */
  overlaps(): number;
  close(): Promise<void>;
}

function directive(text: string, name: string, fallback: number): number {
  const m = new RegExp(`${name}-(\\d+)`).exec(text);
  return m ? Number(m[1]) : fallback;
}

function lastUser(body: any): string {
  const msgs: any[] = Array.isArray(body?.messages) ? body.messages : [];
  const m = [...msgs].reverse().find((x) => x?.role === "user");
  const c = m?.content;
  if (typeof c === "string") return c;
  if (Array.isArray(c)) return c.map((p: any) => (typeof p?.text === "string" ? p.text : "")).join(" ");
  return "";
}

const wait = (ms: number, res: ServerResponse) =>
  new Promise<void>((resolve) => {
    if (ms <= 0 || res.destroyed) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      res.off("close", done);
      resolve();
    }
    res.once("close", done);
  });

export async function startSlowUpstream(): Promise<SlowUpstream> {
  const openByKey = new Map<string, Set<ServerResponse>>();
  let open = 0;
  let requests = 0;
  let overlaps = 0;
  const server: FakeHttpServer = await serveFake(async (call, res) => {
    if (call.method === "GET") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "fake-model", object: "model", owned_by: "faults" }] }));
      return;
    }
    requests++;
    const text = lastUser(call.body);
    const key = /FAULTKEY-([A-Za-z0-9_.:-]+)/.exec(text)?.[1] ?? "unknown";
    const n = directive(text, "FAULTN", 3);
    const ms = directive(text, "FAULTMS", 0);
    const first = directive(text, "FAULTFIRST", 0);
    const set = openByKey.get(key) ?? new Set<ServerResponse>();
    openByKey.set(key, set);
    for (const earlier of set) {
      setTimeout(() => {
        if (set.has(earlier)) overlaps++;
      }, 200).unref();
    }
    set.add(res);
    open++;
    res.once("close", () => {
      open--;
      set.delete(res);
    });
    const model = String(call.body?.model ?? "fake-model");
    const id = `chatcmpl-faults${requests}`;
    const words = Array.from({ length: n }, (_, i) => `FAULTS-OK ${key} ${i + 1}. `);
    if (call.body?.stream === true) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const frame = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(frame({ role: "assistant", content: "" }));
      await wait(first, res);
      for (let i = 0; i < n && !res.destroyed; i++) {
        if (i > 0) await wait(ms, res);
        if (res.destroyed) return;
        res.write(frame({ content: words[i] }));
      }
      if (res.destroyed) return;
      res.write(frame({}, "stop"));
      res.write(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 1, model, choices: [], usage: { prompt_tokens: 12, completion_tokens: n, total_tokens: 12 + n } })}\n\n`,
      );
      res.end("data: [DONE]\n\n");
      return;
    }
    await wait(first + Math.max(0, n - 1) * ms, res);
    if (res.destroyed) return;
    const body = JSON.stringify({
      id,
      object: "chat.completion",
      created: 1,
      model,
      choices: [{ index: 0, message: { role: "assistant", content: words.join("") }, finish_reason: "stop" }],
      usage: { prompt_tokens: 12, completion_tokens: n, total_tokens: 12 + n },
    });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    open: () => open,
    requests: () => requests,
    overlaps: () => overlaps,
    close: () => server.close(),
  };
}
