/**
 * The HTTP front: the one node:http server under the chat route and Fastify, and what happens to a
 * connection before any route runs and after its answer.
 *
 * - Timeouts for READING a request, never for answering one: the request line and headers must
 *   arrive within `server.headersTimeoutSeconds` and the whole request within
 *   `server.requestTimeoutSeconds` (else 408 and the connection closes); a keep-alive connection
 *   idle between requests is closed after `server.idleTimeoutSeconds`. Once a request is in, its
 *   answer may take as long as the turn (a stream with heartbeats, or one JSON answer minutes later).
 * - At most `server.maxConnections` connections are served. A connection opened past that gets one
 *   answer, 503 `too_many_connections` with `Retry-After: 1`, on its first request, and is closed;
 *   past twice that number a new connection is closed at once, unanswered.
 * - Errors before any route (malformed HTTP, a bad header, bad chunking, Transfer-Encoding with
 *   Content-Length, an HTTP/2 preface, an unknown method, headers too large, a timeout, an unknown
 *   `Expect`, no Host) are answered OpenAI-shaped (`{"error":{message,type,code,param}}`) with
 *   `Connection: close`, as raw HTTP/1.1 when no response object exists yet.
 * - An answer sent before the request's body was read (401, 413, 408, 503...) closes the connection
 *   without reading that body — except a bounded "lingering close" (RFC 9112 §9.6): the answer and
 *   a FIN go out, and what the client still sends is read and thrown away until its body ends, for
 *   at most LINGER_MS and a byte budget (twice `server.bodyLimitBytes` after a 413 to a client with
 *   the right key; 1 MiB after anything answered before the key was checked: 401, 408, 417, 503,
 *   parser errors), then the socket is destroyed. Closing at once would reset the connection while
 *   the client is still sending, and a client that writes its whole body before it reads would see
 *   the reset instead of the answer.
 * - Shutdown (`shutdown()`, then `close()`): from the first moment every new request gets 503
 *   `shutting_down` with `Retry-After` and `Connection: close` (the listener stays open while turns
 *   drain, so a client gets an answer, not a refused or reset connection); at the end, idle and
 *   finished connections are closed at once, not after the keep-alive timeout.
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { ApiError } from "../chat-api/errors.js";

export interface FrontOptions {
  /** The `server` response header (`clawbridge/<version>`). */
  serverHeader: string;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  idleTimeoutMs: number;
  maxConnections: number;
  bodyLimitBytes: number;
}

/** What serves a request once the front let it in (`expectsContinue`: answer `100 Continue` before reading the body). */
export type Dispatch = (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => void;

/** How long a connection answered before its body was read may still be read from (see above). */
export const LINGER_MS = 2000;
/** How often a lingering close looks at the bytes read (what it may overshoot its budget by is what arrives meanwhile). */
const LINGER_POLL_MS = 10;
/** What is read and thrown away after an answer given before the API key was checked (401, 408, 503...). */
export const UNAUTHENTICATED_LINGER_BYTES = 1024 * 1024;
/** On shutdown, how long finished answers may take to flush before every connection is destroyed. */
const CLOSE_FLUSH_MS = 5000;
/** Retry-After of a 503 sent while shutting down (a restart is back in about this time). */
export const SHUTDOWN_RETRY_AFTER_SECONDS = 5;

const JSON_TYPE = "application/json; charset=utf-8";
const CLOSE = { connection: "close" } as const;

/** The answer to a request that comes while the bridge shuts down (or a turn it stopped). */
export const shuttingDown = () =>
  new ApiError(
    503,
    "server_error",
    "shutting_down",
    `The bridge is shutting down; retry in ${SHUTDOWN_RETRY_AFTER_SECONDS}s.`,
    null,
    {
      "retry-after": String(SHUTDOWN_RETRY_AFTER_SECONDS),
    },
  );

/** What node:http's `clientError` carries: the parser's code and reason, and the bytes it failed on. */
type ClientError = Error & { code?: string; reason?: string; rawPacket?: unknown };

/**
 * A client error, so a 4xx (the rule is no 5xx for a client's mistake), although HTTP's own words
 * for these would be 505 and 501: SDKs retry 5xx answers, and retrying cannot fix either.
 */
const versionNotSupported = () =>
  new ApiError(
    400,
    "invalid_request_error",
    "http_version_not_supported",
    "Only HTTP/1.1 (and 1.0) is served here; HTTP/2 is not.",
  );
const methodNotSupported = () =>
  new ApiError(
    400,
    "invalid_request_error",
    "method_not_supported",
    "Unknown HTTP method. Try POST /v1/chat/completions or GET /v1/models.",
  );

/** A socket as node:http keeps it: the response it is writing (internal, stable since Node 0.x). */
type HttpSocket = Socket & { _httpMessage?: ServerResponse | null };

interface Linger {
  req: IncomingMessage;
  budget: number;
}
const lingering = new WeakMap<Socket, Linger>();

/**
 * The connection closes after this answer (the caller sends `Connection: close`); when the request's
 * body has not all arrived, the close lingers (read and discard, bounded) instead of resetting the
 * connection under a client that is still sending. Costs nothing when the request is complete.
 */
export function lingerAfterAnswer(req: IncomingMessage, budgetBytes: number): void {
  if (req.complete) return;
  const socket = req.socket;
  lingering.set(socket, { req, budget: budgetBytes });
  // node:http ends a `Connection: close` answer's socket with destroySoon() (end, then destroy as
  // soon as the FIN is written, unread data or not): this socket lingers first.
  socket.destroySoon = lingeringDestroySoon;
}

function destroyWhenFlushed(socket: Socket): void {
  if (socket.writableFinished || socket.destroyed) socket.destroy();
  else socket.once("finish", () => socket.destroy());
}

function lingeringDestroySoon(this: Socket): void {
  if (this.writable) this.end();
  const state = lingering.get(this);
  lingering.delete(this);
  if (!state || state.req.complete) return destroyWhenFlushed(this);
  const { req, budget } = state;
  const start = this.bytesRead;
  const until = Date.now() + LINGER_MS;
  const stop = () => {
    clearInterval(timer);
    req.off("end", onEnd);
    this.off("close", stop);
  };
  // The body ended: nothing unread is left, the close is clean.
  const onEnd = () => {
    stop();
    destroyWhenFlushed(this);
  };
  // The budget is watched on the socket's byte count: a dumped request (node:http discards the
  // body of a request nobody reads) emits no `data`.
  const timer = setInterval(() => {
    if (this.bytesRead - start > budget || Date.now() >= until) {
      stop();
      this.destroy();
    }
  }, LINGER_POLL_MS);
  timer.unref();
  req.once("end", onEnd);
  this.once("close", stop);
  req.resume();
}

/** `HTTP/1.1 <status>` with an OpenAI-shaped body, written straight to a socket (no response object exists). */
function rawAnswer(serverHeader: string, err: ApiError): string {
  const text = JSON.stringify(err.body());
  let head = `HTTP/1.1 ${err.status} ${http.STATUS_CODES[err.status] ?? "Error"}\r\nserver: ${serverHeader}\r\ncontent-type: ${JSON_TYPE}\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n`;
  for (const [k, v] of Object.entries(err.headers)) head += `${k}: ${v}\r\n`;
  return `${head}\r\n${text}`;
}

export class HttpFront {
  readonly server: http.Server;
  /** True once shutting down: every new request gets 503, every answer says `Connection: close`. */
  closing = false;
  private open = 0;
  private readonly overCap = new WeakSet<Socket>();
  private overCapOpen = 0;
  /** Sockets answered from `clientError` (raw or through their response), with the bytes read until then. */
  private readonly answered = new WeakMap<Socket, number>();
  /** Sockets with an answer queued behind the one in flight (pipelining while shutting down). */
  private readonly answeredBehind = new WeakSet<Socket>();
  private readonly lingerBudget: number;
  private readonly headersTimeoutMs: number;

  constructor(
    private readonly opts: FrontOptions,
    private readonly dispatch: Dispatch,
  ) {
    this.lingerBudget = Math.max(2 * opts.bodyLimitBytes, UNAUTHENTICATED_LINGER_BYTES);
    const headersTimeout = Math.min(opts.headersTimeoutMs, opts.requestTimeoutMs);
    this.headersTimeoutMs = headersTimeout;
    const server = http.createServer(
      {
        headersTimeout,
        requestTimeout: opts.requestTimeoutMs,
        // How often node:http looks for requests past those timeouts (its default, 30 s, would let
        // a 30 s timeout fire after up to 60 s).
        connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(headersTimeout / 4))),
        // A missing Host is answered here, OpenAI-shaped (node:http would send an empty 400).
        requireHostHeader: false,
      },
      (req, res) => this.onRequest(req, res, false),
    );
    server.keepAliveTimeout = opts.idleTimeoutMs;
    server.setTimeout(0); // no socket inactivity timeout: a silent turn is not a dead client
    server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res, true));
    server.on("checkExpectation", (req: IncomingMessage, res: ServerResponse) => {
      this.refuse(
        req,
        res,
        new ApiError(
          417,
          "invalid_request_error",
          "expectation_failed",
          `Unsupported Expect: ${req.headers.expect}; only 100-continue is understood.`,
        ),
      );
    });
    // CONNECT (a proxy tunnel request) is not served: answered, not dropped (node:http closes a
    // CONNECT's socket unanswered when nobody listens for it).
    server.on("connect", (_req: IncomingMessage, socket: Socket) => {
      socket.on("error", () => {});
      socket.end(rawAnswer(this.opts.serverHeader, methodNotSupported()));
    });
    // The connection cap, ahead of node:http's own connection listener.
    const listeners = server.listeners("connection") as Array<(socket: Socket) => void>;
    if (listeners.length !== 1) throw new Error(`unexpected node:http connection listeners (${listeners.length})`);
    const httpConnection = listeners[0]!;
    server.removeAllListeners("connection");
    server.on("connection", (socket: Socket) => {
      if (this.open >= 2 * this.opts.maxConnections) return void socket.destroy();
      this.open++;
      if (this.open > this.opts.maxConnections) {
        this.overCap.add(socket);
        this.overCapOpen++;
      }
      socket.once("close", () => {
        this.open--;
        if (this.overCap.delete(socket)) this.overCapOpen--;
      });
      httpConnection.call(server, socket);
    });
    this.server = server;
  }

  /** Connections open now. */
  get connections(): number {
    return this.open;
  }

  private readonly onRequest = (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean): void => {
    if (this.closing) return this.refuse(req, res, shuttingDown());
    if (this.overCapOpen > 0 && this.overCap.has(req.socket)) {
      return this.refuse(
        req,
        res,
        new ApiError(
          503,
          "server_error",
          "too_many_connections",
          `The bridge has ${this.opts.maxConnections} connections open (server.maxConnections); retry in a moment.`,
          null,
          { "retry-after": "1" },
        ),
      );
    }
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      return this.refuse(
        req,
        res,
        new ApiError(400, "invalid_request_error", "missing_host", "An HTTP/1.1 request needs a Host header."),
      );
    }
    this.dispatch(req, res, expectsContinue);
  };

  /** Answer `err` with `Connection: close` before the request is read (no 100 Continue is sent). */
  refuse(req: IncomingMessage, res: ServerResponse, err: ApiError, lingerBytes = UNAUTHENTICATED_LINGER_BYTES): void {
    const inFlight = (req.socket as HttpSocket)._httpMessage;
    // Pipelined behind a request still being answered: that answer must keep the connection open
    // for this one, which closes it.
    if (inFlight && inFlight !== res) this.answeredBehind.add(req.socket);
    const text = JSON.stringify(err.body());
    res.writeHead(err.status, {
      server: this.opts.serverHeader,
      ...err.headers,
      ...CLOSE,
      "content-type": JSON_TYPE,
      "content-length": Buffer.byteLength(text),
    });
    res.end(text);
    lingerAfterAnswer(req, lingerBytes);
  }

  /** The byte budget of a lingering close after a 413 to a client with the right key. */
  get lingerBytes(): number {
    return this.lingerBudget;
  }

  /**
   * node:http's `clientError` (given to Fastify as its `clientErrorHandler`): parser errors and
   * request timeouts. Answered once, OpenAI-shaped, then the connection closes (lingering).
   */
  readonly onClientError = (err: ClientError, rawSocket: Socket): void => {
    const socket = rawSocket as HttpSocket;
    if (socket.destroyed) return;
    const first = this.answered.get(socket);
    if (first !== undefined) {
      // The same connection again (more bytes after a parse error, the timeout seen again): the
      // answer is out; only the budget is watched.
      if (socket.bytesRead - first > UNAUTHENTICATED_LINGER_BYTES) socket.destroy();
      return;
    }
    const answer = this.describe(err);
    if (!answer) return void socket.destroy(); // the peer went away: nobody to answer
    this.answered.set(socket, socket.bytesRead);
    const res = socket._httpMessage;
    if (res?.req?.complete) {
      // The error is in a request pipelined behind a whole one, whose answer goes out first.
      if (res.writableFinished) return this.answerRaw(socket, answer);
      res.once("finish", () => this.answerRaw(socket, answer));
      return;
    }
    if (res) {
      // The request being read failed (bad chunking, too slow): answer it, unless its answer began.
      if (res.headersSent) return void socket.destroy();
      const text = JSON.stringify(answer.body());
      res.writeHead(answer.status, {
        server: this.opts.serverHeader,
        ...answer.headers,
        ...CLOSE,
        "content-type": JSON_TYPE,
        "content-length": Buffer.byteLength(text),
      });
      res.end(text);
      lingerAfterAnswer(res.req, UNAUTHENTICATED_LINGER_BYTES);
      return;
    }
    this.answerRaw(socket, answer);
  };

  /**
   * The answer written straight to the socket, then its FIN. What the client still sends reaches
   * the parser, which refuses it at once; the socket goes when the client closes its side, past
   * the byte budget (checked on each refusal), or after LINGER_MS.
   */
  private answerRaw(socket: Socket, answer: ApiError): void {
    if (!socket.writable) return void socket.destroy();
    socket.end(rawAnswer(this.opts.serverHeader, answer));
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
  }

  /** The answer to a `clientError`, or undefined when the client is gone (nothing to answer). */
  private describe(err: ClientError): ApiError | undefined {
    const bad = (status: number, code: string, message: string) =>
      new ApiError(status, "invalid_request_error", code, message);
    switch (err.code) {
      case "ERR_HTTP_REQUEST_TIMEOUT":
        return bad(
          408,
          "request_timeout",
          `The request did not arrive in time: headers within ${this.headersTimeoutMs / 1000}s (server.headersTimeoutSeconds), all of it within ${this.opts.requestTimeoutMs / 1000}s (server.requestTimeoutSeconds).`,
        );
      case "HPE_HEADER_OVERFLOW":
        return bad(431, "headers_too_large", `The request headers are larger than ${http.maxHeaderSize} bytes.`);
      case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
        return bad(413, "chunk_extensions_too_large", "The request's chunk extensions are too large.");
      case "HPE_PAUSED_H2_UPGRADE": // the HTTP/2 preface, `PRI * HTTP/2.0`
        return versionNotSupported();
      case "HPE_INVALID_VERSION":
        // A well-formed version that is not 1.x (`HTTP/2.0`, `HTTP/3.0`); anything else is malformed.
        if (/^\S+ \S+ HTTP\/[02-9]\.\d\r?$/.test(String(err.rawPacket ?? "").split("\n", 1)[0]!))
          return versionNotSupported();
        return bad(400, "bad_request", `Malformed HTTP request: ${err.reason ?? err.message}.`);
      case "HPE_INVALID_METHOD":
        return methodNotSupported();
      default:
        if (err.code?.startsWith("HPE_"))
          return bad(400, "bad_request", `Malformed HTTP request: ${err.reason ?? err.message}.`);
        return undefined; // ECONNRESET, EPIPE...: the socket failed, the client is gone
    }
  }

  /**
   * Whether the answer to `req` closes its connection: while shutting down, unless an answer to a
   * request pipelined behind it is queued (that one closes it).
   */
  closesAfter(req: IncomingMessage): boolean {
    return this.closing && !this.answeredBehind.has(req.socket);
  }

  /** Begin shutting down: from now on every new request gets 503 and every answer closes its connection. */
  shutdown(): void {
    this.closing = true;
  }

  /**
   * The end of a shutdown, once the turns are over. `closeServer` stops listening and resolves when
   * every connection is closed (Fastify's `close()`); meanwhile connections are closed the moment
   * they are idle (a keep-alive client, an answer just finished), and whatever is still open after
   * CLOSE_FLUSH_MS is destroyed.
   */
  async close(closeServer: () => Promise<unknown>): Promise<void> {
    this.closing = true;
    let done = false;
    const closed = closeServer().finally(() => (done = true));
    const until = Date.now() + CLOSE_FLUSH_MS;
    for (let i = 0; i < CLOSE_FLUSH_MS / 25 && !done && Date.now() < until; i++) {
      this.server.closeIdleConnections();
      await Promise.race([closed, new Promise((r) => setTimeout(r, 25))]);
    }
    if (!done) this.server.closeAllConnections();
    await closed;
  }
}
