/**
 * The `webhook` executor (src/workflows/systems/executors/webhook.ts) against a real node:http server on
 * 127.0.0.1: what is sent (body, headers, HMAC signature, inputs URL-encoded into path and query),
 * which URL templates are refused at load time, how failures map to ExecError codes (5xx/429
 * retryable, 404 and redirects not, timeouts, cancels, refused connections), and that JSON, text
 * and SSE replies are read with their pieces streamed before the reply ends.
 */
import { execContext } from "../helpers/exec-context.js";
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";
import { ExecError, type ExecContext } from "../../src/workflows/systems/step-executor.js";
import { checkWebhookUrl, runWebhook, signWebhook } from "../../src/workflows/systems/executors/webhook.js";
import { webhookRunSchema, type WebhookRun } from "../../src/workflows/systems/schema.js";

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => unknown;

let server: Server;
let base: string;
let handler: Handler;
const hits: string[] = [];
const work = mkdtempSync(path.join(tmpdir(), "cb-webhook-"));

before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      hits.push(req.url ?? "");
      void Promise.resolve(handler(req, res, Buffer.concat(chunks).toString("utf8"))).catch(() => res.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(work, { recursive: true, force: true });
});

beforeEach(() => {
  hits.length = 0;
});

function spec(over: Partial<WebhookRun> & { url: string }): WebhookRun {
  return webhookRunSchema.parse({ kind: "webhook", timeoutSeconds: 5, ...over });
}

function context(
  inputs: Record<string, unknown> = {},
  extra: Partial<ExecContext> = {},
): { ctx: ExecContext; pieces: string[] } {
  return execContext(inputs, { workDir: () => work, ...extra });
}

/** The ExecError a promise rejects with (fails the test when it resolves or rejects with something else). */
async function execError(p: Promise<unknown>): Promise<ExecError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ExecError, `expected an ExecError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected the call to fail");
}

/** A promise and its resolver, bounded so a test that never sees the signal fails instead of hanging. */
function gate(ms = 5000): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("gate not opened in time")), ms);
    open = () => {
      clearTimeout(t);
      resolve();
    };
  });
  wait.catch(() => undefined);
  return { wait, open };
}

describe("checkWebhookUrl", () => {
  test("refuses references in the scheme, host or port, other schemes and unparsable URLs", () => {
    assert.match(checkWebhookUrl("http://${inputs.host}/x") ?? "", /path and query/);
    assert.match(checkWebhookUrl("http://example.com:${inputs.p}/") ?? "", /path and query/);
    assert.match(checkWebhookUrl("${inputs.scheme}://example.com/") ?? "", /path and query/);
    assert.match(checkWebhookUrl("http://user:${inputs.pw}@example.com/") ?? "", /path and query/);
    assert.match(checkWebhookUrl("http:///${inputs.host}/x") ?? "", /path and query/);
    assert.match(checkWebhookUrl("http://example.com${inputs.rest}") ?? "", /path and query/);
    assert.match(checkWebhookUrl("ftp://example.com/${inputs.f}") ?? "", /http or https/);
    assert.match(checkWebhookUrl("ftp://example.com/") ?? "", /http or https/);
    assert.match(checkWebhookUrl("not a url") ?? "", /not a valid URL/);
    assert.match(checkWebhookUrl("http://example.com/${nope}") ?? "", /not a reference/);
  });

  test("accepts references in the path and query, and URLs without any", () => {
    assert.equal(checkWebhookUrl("http://example.com/a/${inputs.x}?q=${inputs.y}&r=${run.id}"), undefined);
    assert.equal(checkWebhookUrl("https://example.com:8443?q=${inputs.y}"), undefined);
    assert.equal(checkWebhookUrl("http://127.0.0.1:9/hook"), undefined);
    assert.equal(checkWebhookUrl("https://example.com/literal/$${not-a-ref}"), undefined);
  });
});

describe("runWebhook", () => {
  test("sends the run as JSON with rendered body fields and headers, signed with HMAC", async () => {
    process.env.CLAWBRIDGE_TEST_WEBHOOK_SECRET = "s3cret-value";
    let got: { req: IncomingMessage; body: string } | undefined;
    handler = (req, res, body) => {
      got = { req, body };
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ok: true, n: 1 }));
    };
    const { ctx, pieces } = context({ name: "Ada", count: 3 }, { conversation: "conv-9" });
    const result = await runWebhook(
      spec({
        url: `${base}/hook`,
        method: "PUT",
        headers: { "X-Api-Key": "key-${inputs.name}" },
        body: { who: "${inputs.name}", count: "${inputs.count}", fixed: [1, "run ${run.id}"] },
        secretEnv: "CLAWBRIDGE_TEST_WEBHOOK_SECRET",
      }),
      ctx,
    );
    delete process.env.CLAWBRIDGE_TEST_WEBHOOK_SECRET;
    assert.deepEqual(result.output, { ok: true, n: 1 });
    assert.deepEqual(pieces, ['{"ok":true,"n":1}']);
    assert.ok(got);
    assert.equal(got.req.method, "PUT");
    assert.equal(got.req.url, "/hook");
    assert.deepEqual(JSON.parse(got.body), {
      system: "sys",
      inputs: { name: "Ada", count: 3 },
      runId: "run-1",
      conversation: "conv-9",
      who: "Ada",
      count: 3,
      fixed: [1, "run run-1"],
    });
    const h = got.req.headers;
    assert.equal(h["content-type"], "application/json");
    assert.equal(h.accept, "application/json, text/event-stream, text/plain");
    assert.equal(h["x-api-key"], "key-Ada");
    const ts = String(h["x-clawbridge-timestamp"]);
    assert.match(ts, /^\d+$/);
    assert.ok(Math.abs(Number(ts) - Date.now() / 1000) < 60);
    const expected = `sha256=${createHmac("sha256", "s3cret-value").update(`${ts}.${got.body}`).digest("hex")}`;
    assert.equal(h["x-clawbridge-signature"], expected);
    assert.equal(signWebhook("s3cret-value", ts, got.body), expected);
  });

  test("no signature headers and null conversation without secretEnv", async () => {
    let got: { req: IncomingMessage; body: string } | undefined;
    handler = (req, res, body) => {
      got = { req, body };
      res.end("ok");
    };
    const { ctx } = context();
    const result = await runWebhook(spec({ url: `${base}/plain` }), ctx);
    assert.equal(result.output, "ok");
    assert.ok(got);
    assert.equal(got.req.method, "POST");
    assert.equal(got.req.headers["x-clawbridge-signature"], undefined);
    assert.equal(JSON.parse(got.body).conversation, null);
  });

  test("inputs are URL-encoded into the path and query: one value stays one segment", async () => {
    handler = (_req, res) => res.end("ok");
    const { ctx } = context({ id: "a/b?c=d&e", q: "x y&z=1#f" });
    await runWebhook(spec({ url: `${base}/items/\${inputs.id}/view?q=\${inputs.q}&run=\${run.id}` }), ctx);
    assert.deepEqual(hits, ["/items/a%2Fb%3Fc%3Dd%26e/view?q=x%20y%26z%3D1%23f&run=run-1"]);
    const u = new URL(hits[0]!, base);
    assert.equal(u.pathname.split("/").length, 4);
    assert.equal(decodeURIComponent(u.pathname.split("/")[2]!), "a/b?c=d&e");
    assert.equal(u.searchParams.get("q"), "x y&z=1#f");
  });

  test("a URL whose references sit in the host is refused at run time too, before any request", async () => {
    const { ctx } = context({ host: "127.0.0.1" });
    const port = new URL(base).port;
    const err = await execError(runWebhook(spec({ url: `http://\${inputs.host}:${port}/x` }), ctx));
    assert.equal(err.code, "invalid");
    assert.equal(hits.length, 0);
  });

  test("a missing secret is a configuration error that names the variable, not a request", async () => {
    delete process.env.CLAWBRIDGE_TEST_MISSING_SECRET;
    handler = (_req, res) => res.end("ok");
    const { ctx } = context();
    const err = await execError(
      runWebhook(spec({ url: `${base}/hook`, secretEnv: "CLAWBRIDGE_TEST_MISSING_SECRET" }), ctx),
    );
    assert.equal(err.code, "invalid");
    assert.equal(err.retryable, false);
    assert.equal(err.message, "environment variable CLAWBRIDGE_TEST_MISSING_SECRET (webhook secret) is not set");
    assert.equal(hits.length, 0);
    process.env.CLAWBRIDGE_TEST_MISSING_SECRET = "";
    const empty = await execError(
      runWebhook(spec({ url: `${base}/hook`, secretEnv: "CLAWBRIDGE_TEST_MISSING_SECRET" }), context().ctx),
    );
    assert.equal(empty.code, "invalid");
    delete process.env.CLAWBRIDGE_TEST_MISSING_SECRET;
  });

  test("5xx and 429 are retryable http_status errors quoting the body; 404 is not retryable", async () => {
    handler = (req, res) => {
      const status = Number(req.url!.slice(1));
      res.writeHead(status, { "content-type": "text/plain" });
      res.end(`status ${status} ${"x".repeat(500)}`);
    };
    for (const status of [503, 500, 429]) {
      const err = await execError(runWebhook(spec({ url: `${base}/${status}` }), context().ctx));
      assert.equal(err.code, "http_status");
      assert.equal(err.retryable, true, String(status));
      assert.ok(err.message.startsWith(`webhook answered ${status}: status ${status} xxx`), err.message);
      assert.ok(err.message.length <= `webhook answered ${status}: `.length + 200);
    }
    const notFound = await execError(runWebhook(spec({ url: `${base}/404` }), context().ctx));
    assert.equal(notFound.code, "http_status");
    assert.equal(notFound.retryable, false);
    assert.match(notFound.message, /^webhook answered 404: status 404/);
  });

  test("a redirect is not followed and not retryable", async () => {
    handler = (req, res) => {
      if (req.url === "/moved") {
        res.writeHead(302, { location: "/elsewhere" });
        res.end();
      } else res.end("should not be reached");
    };
    const err = await execError(runWebhook(spec({ url: `${base}/moved` }), context().ctx));
    assert.equal(err.code, "http_status", err.message);
    assert.equal(err.retryable, false);
    assert.match(err.message, /302/);
    assert.deepEqual(hits, ["/moved"]);
  });

  test("a server that never answers times out quickly, retryable", async () => {
    handler = () => {
      /* never answers; the client gives up and closes its connection */
    };
    const started = Date.now();
    const err = await execError(runWebhook(spec({ url: `${base}/silent`, timeoutSeconds: 0.3 }), context().ctx));
    const took = Date.now() - started;
    assert.equal(err.code, "timeout");
    assert.equal(err.retryable, true);
    assert.ok(took >= 250 && took < 2000, `took ${took} ms`);
  });

  test("the timeout covers the whole exchange, not just the headers", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("part one");
      /* and nothing more */
    };
    const { ctx, pieces } = context();
    const started = Date.now();
    const err = await execError(runWebhook(spec({ url: `${base}/slow-body`, timeoutSeconds: 0.3 }), ctx));
    assert.equal(err.code, "timeout");
    assert.ok(Date.now() - started < 2000);
    assert.deepEqual(pieces, ["part one"]);
  });

  test("cancelling mid-reply stops promptly", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("first piece");
    };
    const seen = gate();
    const { ctx, pieces } = context();
    ctx.output = (t) => {
      pieces.push(t);
      seen.open();
    };
    const run = execError(runWebhook(spec({ url: `${base}/hang`, timeoutSeconds: 30 }), ctx));
    await seen.wait;
    const started = Date.now();
    ctx.cancel.abort();
    const err = await run;
    assert.equal(err.code, "cancelled");
    assert.ok(Date.now() - started < 1000, "cancel took too long");
    assert.deepEqual(pieces, ["first piece"]);
  });

  test("an already cancelled run sends nothing", async () => {
    handler = (_req, res) => res.end("ok");
    const { ctx } = context();
    ctx.cancel.abort();
    const err = await execError(runWebhook(spec({ url: `${base}/x` }), ctx));
    assert.equal(err.code, "cancelled");
    assert.equal(hits.length, 0);
  });

  test("a refused connection is a retryable network error", async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));
    const err = await execError(runWebhook(spec({ url: `http://127.0.0.1:${port}/x` }), context().ctx));
    assert.equal(err.code, "network");
    assert.equal(err.retryable, true);
    assert.match(err.message, /ECONNREFUSED/);
  });

  test("bad JSON is a bad_reply", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
      res.end("{not json");
    };
    const err = await execError(runWebhook(spec({ url: `${base}/bad` }), context().ctx));
    assert.equal(err.code, "bad_reply");
    assert.equal(err.retryable, false);
  });

  test("a text reply streams each piece before the reply ends, UTF-8 decoded across chunks", async () => {
    const seen = gate();
    handler = async (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      const bytes = Buffer.from("héllo wörld", "utf8");
      res.write(bytes.subarray(0, 2)); // "h" and the first byte of "é"
      await seen.wait; // the client must have passed on the first piece while the reply is open
      res.end(bytes.subarray(2));
    };
    const { ctx, pieces } = context();
    ctx.output = (t) => {
      pieces.push(t);
      seen.open();
    };
    const result = await runWebhook(spec({ url: `${base}/text` }), ctx);
    assert.equal(result.output, "héllo wörld");
    assert.ok(pieces.length >= 2, JSON.stringify(pieces));
    assert.equal(pieces[0], "h");
    assert.equal(pieces.join(""), "héllo wörld");
  });

  test("an SSE reply streams event texts as they arrive and stops at [DONE]", async () => {
    const seen = gate();
    handler = async (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"delta":"Hel"}\n\n');
      await seen.wait;
      res.write('data: {"text":"lo"}\n\n: a comment\n\n');
      res.write('event: message\ndata: {"content":", "}\n\n');
      res.write('data: {"output":"world"}\n\ndata: plain\n\ndata: {"other":1}\n\n');
      res.write("data: [DONE]\n\n");
      res.write("data: after done\n\n");
      /* the connection stays open: [DONE] alone must end the reply */
    };
    const { ctx, pieces } = context();
    ctx.output = (t) => {
      pieces.push(t);
      seen.open();
    };
    const result = await runWebhook(spec({ url: `${base}/sse` }), ctx);
    assert.deepEqual(pieces, ["Hel", "lo", ", ", "world", "plain", '{"other":1}']);
    assert.equal(result.output, 'Hello, worldplain{"other":1}');
  });

  test("an SSE stream that just ends keeps its last event, even without a closing blank line", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8" });
      res.end('data: {"delta":"a"}\n\ndata: b');
    };
    const { ctx, pieces } = context();
    const result = await runWebhook(spec({ url: `${base}/sse-end` }), ctx);
    assert.deepEqual(pieces, ["a", "b"]);
    assert.equal(result.output, "ab");
  });

  test("an SSE error event is a bad_reply carrying its data", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"delta":"partial"}\n\n');
      res.write("event: error\ndata: upstream exploded\n\n");
    };
    const { ctx, pieces } = context();
    const err = await execError(runWebhook(spec({ url: `${base}/sse-err` }), ctx));
    assert.equal(err.code, "bad_reply");
    assert.match(err.message, /upstream exploded/);
    assert.deepEqual(pieces, ["partial"]);
  });

  test("a reply larger than maxResponseBytes is a bad_reply", async () => {
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "text/plain" });
      res.end("y".repeat(1000));
    };
    const err = await execError(runWebhook(spec({ url: `${base}/big`, maxResponseBytes: 100 }), context().ctx));
    assert.equal(err.code, "bad_reply");
    assert.equal(err.message, "reply larger than 100 bytes");
    handler = (_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ big: "z".repeat(1000) }));
    };
    const json = await execError(runWebhook(spec({ url: `${base}/big-json`, maxResponseBytes: 100 }), context().ctx));
    assert.equal(json.message, "reply larger than 100 bytes");
  });

  test("error messages carry neither the secret nor header values", async () => {
    process.env.CLAWBRIDGE_TEST_WEBHOOK_SECRET = "very-secret-hmac-key";
    handler = (_req, res) => {
      res.writeHead(500);
      res.end("boom");
    };
    const err = await execError(
      runWebhook(
        spec({
          url: `${base}/fail`,
          headers: { authorization: "Bearer header-token-123" },
          secretEnv: "CLAWBRIDGE_TEST_WEBHOOK_SECRET",
        }),
        context().ctx,
      ),
    );
    delete process.env.CLAWBRIDGE_TEST_WEBHOOK_SECRET;
    assert.equal(err.code, "http_status");
    assert.ok(!err.message.includes("very-secret-hmac-key"));
    assert.ok(!err.message.includes("header-token-123"));
    const bad = await execError(
      runWebhook(
        spec({ url: `${base}/x`, headers: { "x-token": "secret-${inputs.v}" } }),
        context({ v: "a\r\nb" }).ctx,
      ),
    );
    assert.equal(bad.code, "invalid");
    assert.ok(!bad.message.includes("secret-"), bad.message);
  });
});
