/**
 * The `webhook` kind: POST a run (`{system, inputs, runId, conversation}` plus the configured body
 * fields) to an HTTP endpoint and take its reply as the step's output. A JSON reply is parsed; a
 * server-sent-events reply is streamed piece by piece (`[DONE]` ends it); anything else is text,
 * streamed as it arrives.
 *
 * Inputs are untrusted, the URL is not: inputs may be substituted into the URL's path and query
 * only (URL-encoded, so a value is always one segment or one query value), never into the scheme,
 * host or port. `checkWebhookUrl` enforces that when a system is loaded, and every run checks
 * again that the final URL still points at the origin the configuration names. Redirects are not
 * followed (a 3xx is an error): the operator chose where runs go, and a reply cannot move them.
 *
 * When `secretEnv` is set, each request carries `x-clawbridge-timestamp` and
 * `x-clawbridge-signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>` so the receiver
 * can tell the call came from this bridge (`signWebhook` computes the same value). The secret and
 * header values never appear in logs or error messages.
 */
import { createHmac } from "node:crypto";
import { TextDecoder } from "node:util";
import { createParser } from "eventsource-parser";
import { request, type Dispatcher } from "undici";
import { ExecError, type ExecContext, type Executor, type WouldSend } from "../step-executor.js";
import type { WebhookRun } from "../schema.js";
import { parseTemplate, renderString, renderValue, type Part } from "../../engine/template.js";

/** The start of a URL up to where its path (or query, or fragment) begins: scheme, `//`, a non-empty authority. */
const URL_HEAD = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\]+[/?#]/;

/** How much of an error reply is read to quote it. */
const ERROR_BODY_READ = 4096;
const ERROR_BODY_QUOTE = 200;

/** The template with every reference replaced by `placeholder` (escapes already resolved by the parser). */
function literalUrl(parts: Part[], placeholder: string): string {
  return parts.map((p) => ("text" in p ? p.text : placeholder)).join("");
}

/**
 * Problems with a webhook URL template, checked when a system is loaded: a reference before the
 * path starts (in the scheme, host or port), a scheme other than http or https, or a URL that does
 * not parse once its references are replaced by a placeholder. Returns undefined when it is fine.
 */
export function checkWebhookUrl(template: string): string | undefined {
  let parts: Part[];
  try {
    parts = parseTemplate(template);
  } catch (err) {
    return (err as Error).message;
  }
  const first = parts.findIndex((p) => "ref" in p);
  if (first >= 0) {
    const head = literalUrl(parts.slice(0, first), "");
    const ref = parts[first] as { source: string };
    if (!URL_HEAD.test(head)) {
      return `${ref.source} is not allowed before the URL's path: inputs may appear only in the path and query, never in the scheme, host or port`;
    }
  }
  let a: URL;
  let b: URL;
  try {
    a = new URL(literalUrl(parts, "x"));
    b = new URL(literalUrl(parts, "y"));
  } catch {
    return "the url is not a valid URL";
  }
  if (a.protocol !== "http:" && a.protocol !== "https:")
    return `the url must use http or https, not ${a.protocol.replace(/:$/, "")}`;
  // Belt and braces for the regular expression: a reference that changes the origin is in the wrong place.
  if (a.origin !== b.origin)
    return "inputs may appear only in the URL's path and query, never in the scheme, host or port";
  return undefined;
}

/**
 * The value of `x-clawbridge-signature` for a request: `sha256=` and the hex HMAC-SHA256, keyed by
 * `secret`, of `<timestamp>.<body>` (the timestamp as sent in `x-clawbridge-timestamp`, the raw body).
 */
export function signWebhook(secret: string, timestamp: number | string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

function decoderFor(contentType: string): TextDecoder {
  const m = /charset\s*=\s*"?([\w.:-]+)/i.exec(contentType);
  if (m) {
    try {
      return new TextDecoder(m[1]!.toLowerCase());
    } catch {
      /* unknown charset: UTF-8 */
    }
  }
  return new TextDecoder("utf-8");
}

/** The text an SSE event contributes: a `text`, `delta`, `content` or `output` string of a JSON object, else the raw data. */
function sseText(data: string): string {
  if (data.trimStart().startsWith("{")) {
    try {
      const v = JSON.parse(data) as unknown;
      if (v && typeof v === "object" && !Array.isArray(v)) {
        const o = v as Record<string, unknown>;
        for (const key of ["text", "delta", "content", "output"]) {
          if (typeof o[key] === "string") return o[key];
        }
      }
    } catch {
      /* not JSON: the raw data */
    }
  }
  return data;
}

const quote = (s: string, n: number): string => s.replace(/\s+/g, " ").trim().slice(0, n);

/**
 * Everything that happens before the request is sent; template problems are configuration errors.
 * `sign: false` (a test run): the signature headers say they would be signed, no secret is read.
 */
function prepare(
  spec: WebhookRun,
  ctx: ExecContext,
  sign = true,
): { url: URL; headers: Record<string, string>; body: string } {
  const problem = checkWebhookUrl(spec.url);
  if (problem) throw new ExecError("invalid", problem);
  const expected = new URL(literalUrl(parseTemplate(spec.url), "x")).origin;
  let url: URL;
  try {
    url = new URL(renderString(spec.url, ctx.scope, encodeUrlValue));
  } catch (err) {
    if (err instanceof URIError)
      throw new ExecError("invalid", "an input substituted into the webhook URL is not valid text");
    throw err;
  }
  if (url.origin !== expected)
    throw new ExecError("invalid", "the webhook URL points elsewhere once inputs are substituted");

  const extra = renderValue(spec.body ?? {}, ctx.scope) as Record<string, unknown>;
  const body = JSON.stringify({
    system: ctx.systemId,
    inputs: ctx.scope.inputs,
    runId: ctx.runId,
    conversation: ctx.conversation ?? null,
    ...extra,
  });
  const headers: Record<string, string> = { accept: "application/json, text/event-stream, text/plain" };
  for (const [name, value] of Object.entries(spec.headers))
    headers[name.toLowerCase()] = renderString(value, ctx.scope);
  headers["content-type"] = "application/json";
  if (spec.secretEnv && !sign) {
    headers["x-clawbridge-timestamp"] = "[the time of the call]";
    headers["x-clawbridge-signature"] = `[signed with ${spec.secretEnv} when sent]`;
  } else if (spec.secretEnv) {
    const secret = process.env[spec.secretEnv];
    if (!secret)
      throw new ExecError("invalid", `environment variable ${spec.secretEnv} (webhook secret) is not set`, false);
    const timestamp = Math.floor(Date.now() / 1000);
    headers["x-clawbridge-timestamp"] = String(timestamp);
    headers["x-clawbridge-signature"] = signWebhook(secret, timestamp, body);
  }
  return { url, headers, body };
}

/** `prepare`, any error an ExecError (a template problem is `invalid`). */
function prepared(spec: WebhookRun, ctx: ExecContext, sign = true): ReturnType<typeof prepare> {
  try {
    return prepare(spec, ctx, sign);
  } catch (err) {
    if (err instanceof ExecError) throw err;
    throw new ExecError("invalid", (err as Error).message);
  }
}

/** A test run's record of the call (secrets as `[secret NAME]`: the runner's scope of a test run). */
export function webhookWouldSend(spec: WebhookRun, ctx: ExecContext): WouldSend {
  const { url, headers, body } = prepared(spec, ctx, false);
  return { notSent: "webhook", method: spec.method, url: url.href, headers, body: JSON.parse(body) as unknown };
}

export const runWebhook: Executor<WebhookRun> = async (spec, ctx) => {
  if (ctx.cancel.aborted) throw new ExecError("cancelled", "the webhook call was cancelled");
  const { url, headers, body } = prepared(spec, ctx);
  const where = url.origin;

  // One controller stops the exchange: the whole-exchange timer or the run's cancellation.
  const ctl = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ctl.abort(new Error("webhook timeout"));
  }, spec.timeoutSeconds * 1000);
  const stopFollowing = ctx.cancel.onAbort(() => ctl.abort(new Error("webhook cancelled")));
  let res: Dispatcher.ResponseData | undefined;
  ctx.log.debug({ system: ctx.systemId, to: where }, "webhook call");
  try {
    res = await request(url, { method: spec.method, headers, body, signal: ctl.signal });
    const status = res.statusCode;
    if (status < 200 || status >= 300) {
      if (status >= 300 && status < 400) {
        throw new ExecError("http_status", `webhook answered ${status}: a redirect, which is not followed`, false);
      }
      const snippet = await readSome(res.body, ERROR_BODY_READ);
      const retryable = status >= 500 || status === 429;
      throw new ExecError("http_status", `webhook answered ${status}: ${quote(snippet, ERROR_BODY_QUOTE)}`, retryable);
    }
    const typeHeader = res.headers["content-type"];
    const contentType = (Array.isArray(typeHeader) ? typeHeader[0] : typeHeader) ?? "";
    const media = contentType.split(";")[0]!.trim().toLowerCase();
    const decoder = decoderFor(contentType);
    const limit = spec.maxResponseBytes;
    let size = 0;
    /** Decoded text of each chunk as it arrives, under the byte limit. */
    async function* chunks(stream: AsyncIterable<Buffer>): AsyncGenerator<string> {
      for await (const chunk of stream) {
        size += chunk.length;
        if (size > limit) throw new ExecError("bad_reply", `reply larger than ${limit} bytes`);
        const text = decoder.decode(chunk, { stream: true });
        if (text) yield text;
      }
      const rest = decoder.decode();
      if (rest) yield rest;
    }

    if (media === "application/json" || media.endsWith("+json")) {
      let text = "";
      for await (const t of chunks(res.body)) text += t;
      if (status === 204 || text.trim() === "") return { output: "" };
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        throw new ExecError("bad_reply", `webhook reply is not valid JSON: ${(err as Error).message}`);
      }
      ctx.output(text);
      return { output: parsed };
    }

    if (media === "text/event-stream") {
      let output = "";
      let done = false;
      let failure: ExecError | undefined;
      const parser = createParser({
        onEvent(ev) {
          if (done || failure) return;
          if (ev.event === "error") {
            failure = new ExecError("bad_reply", `webhook sent an error event: ${quote(ev.data, 500)}`);
            return;
          }
          if (ev.data.trim() === "[DONE]") {
            done = true;
            return;
          }
          const piece = sseText(ev.data);
          if (!piece) return;
          output += piece;
          ctx.output(piece);
        },
      });
      for await (const t of chunks(res.body)) {
        parser.feed(t);
        if (failure) throw failure;
        if (done) break;
      }
      // The stream ended without a blank line after its last event: that event still counts.
      if (!done && !failure) parser.feed("\n\n");
      if (failure) throw failure;
      return { output };
    }

    let output = "";
    for await (const t of chunks(res.body)) {
      output += t;
      ctx.output(t);
    }
    return { output };
  } catch (err) {
    throw toExecError(err, where, spec.timeoutSeconds, timedOut, ctx.cancel.aborted);
  } finally {
    clearTimeout(timer);
    stopFollowing();
    if (res && !res.body.readableEnded && !res.body.destroyed) {
      // A body left unread (an error status, [DONE], a failure) is dropped; undici reports that
      // as an "aborted" error on the stream, which nobody is listening for any more.
      res.body.on("error", () => {});
      res.body.destroy();
    }
  }
};

/** Up to `max` bytes of a body as text (for an error message); the rest is dropped. */
async function readSome(stream: AsyncIterable<Buffer>, max: number): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    parts.push(chunk);
    size += chunk.length;
    if (size >= max) break;
  }
  return new TextDecoder().decode(Buffer.concat(parts).subarray(0, max));
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/** Map any failure to an ExecError with a short message that names the origin, never headers or the secret. */
function toExecError(err: unknown, where: string, seconds: number, timedOut: boolean, cancelled: boolean): ExecError {
  if (err instanceof ExecError) return err;
  if (timedOut) return new ExecError("timeout", `webhook ${where} did not answer within ${seconds}s`, true);
  if (cancelled) return new ExecError("cancelled", "the webhook call was cancelled");
  const e = err as { code?: string; cause?: { code?: string } };
  const code = e?.code ?? e?.cause?.code;
  if (code === "UND_ERR_INVALID_ARG") {
    // undici's message can name a header; it must not quote the value.
    return new ExecError("invalid", "the webhook request is not valid (a header value or the method)");
  }
  const why = code && NETWORK_CODES.has(code) ? code : quote(String((err as Error)?.message ?? err), 200);
  return new ExecError("network", `webhook ${where} failed: ${why}`, true);
}

/**
 * An input in a URL: percent-encoded, and `.`/`..` (which a URL parser reads as "this folder" and
 * "one folder up", even when encoded as `%2E`) spelt with an encoded dot that is kept literally.
 */
export function encodeUrlValue(value: string): string {
  const enc = encodeURIComponent(value);
  return enc === "." || enc === ".." ? enc.replace(/\./g, "%252E") : enc;
}
