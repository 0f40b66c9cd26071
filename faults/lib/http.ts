/**
 * A raw HTTP/1.1 client on `net` sockets, for what an HTTP library refuses to send (bad headers,
 * bad chunking, TE+CL, an HTTP/2 preface, pipelining, slow bodies, aborts at exact points) and for
 * telling apart how a connection ended: an answer, a clean close (FIN) without one, or a reset.
 */
import net from "node:net";

export interface RawResponse {
  status: number;
  version: string;
  headers: Record<string, string>;
  body: Buffer;
  /** ms since the connection opened when the last byte of the response arrived. */
  at: number;
  /** ms since the connection opened when its headers had arrived. */
  headAt: number;
}

type BodyMode =
  | { kind: "none" }
  | { kind: "length"; left: number }
  | { kind: "chunked"; state: "size" | "data" | "data-crlf" | "trailer"; left: number }
  | { kind: "close" };

/** Incremental parser of the responses on one connection (1xx skipped, HEAD answers without a body). */
export class ResponseParser {
  readonly responses: RawResponse[] = [];
  /** 1xx interim answers seen (100 Continue…). */
  interim = 0;
  /** Set when the bytes are not HTTP (the rest is ignored). */
  error: string | undefined;
  /** Bytes of an answer whose headers arrived but whose body is not complete (a cut stream). */
  partial:
    | { status: number; version: string; headers: Record<string, string>; body: Buffer[]; headAt: number }
    | undefined;
  private buf: Buffer = Buffer.alloc(0);
  private mode: BodyMode | undefined;
  private readonly t0 = Date.now();
  /** Called for every body byte chunk of the current answer (SSE readers count frames with it). */
  onBody: ((chunk: Buffer) => void) | undefined;

  constructor(private readonly methods: string[] = []) {}

  push(data: Buffer): void {
    if (this.error) return;
    this.buf = this.buf.length ? Buffer.concat([this.buf, data]) : data;
    for (let guard = 0; guard < 100_000 && this.buf.length && !this.error; guard++) {
      if (!this.partial) {
        const end = this.buf.indexOf("\r\n\r\n");
        if (end < 0) {
          if (this.buf.length > 256 * 1024) this.error = "response headers larger than 256 KiB";
          return;
        }
        const head = this.buf.subarray(0, end).toString("latin1");
        this.buf = this.buf.subarray(end + 4);
        const lines = head.split("\r\n");
        const m = /^HTTP\/(\d\.\d) (\d{3})(?: .*)?$/.exec(lines[0] ?? "");
        if (!m) {
          this.error = `not an HTTP status line: ${JSON.stringify((lines[0] ?? "").slice(0, 80))}`;
          return;
        }
        const status = Number(m[2]);
        const headers: Record<string, string> = {};
        for (const l of lines.slice(1)) {
          const i = l.indexOf(":");
          if (i <= 0) continue;
          const k = l.slice(0, i).trim().toLowerCase();
          const v = l.slice(i + 1).trim();
          headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
        }
        if (status >= 100 && status < 200 && status !== 101) {
          this.interim++;
          continue;
        }
        const method = this.methods[this.responses.length] ?? "POST";
        this.partial = { status, version: m[1]!, headers, body: [], headAt: Date.now() - this.t0 };
        if (method === "HEAD" || status === 204 || status === 304 || status === 101) this.mode = { kind: "none" };
        else if (/\bchunked\b/i.test(headers["transfer-encoding"] ?? ""))
          this.mode = { kind: "chunked", state: "size", left: 0 };
        else if (headers["content-length"] !== undefined)
          this.mode = { kind: "length", left: Number(headers["content-length"]) };
        else this.mode = { kind: "close" };
        if (this.mode.kind === "none" || (this.mode.kind === "length" && this.mode.left === 0)) {
          this.complete();
          continue;
        }
      }
      if (!this.consumeBody()) return;
    }
  }

  /** The connection closed: an answer delimited by the close is complete now. */
  end(): void {
    if (this.partial && this.mode?.kind === "close") this.complete();
  }

  private complete(): void {
    const p = this.partial!;
    this.responses.push({
      status: p.status,
      version: p.version,
      headers: p.headers,
      body: Buffer.concat(p.body),
      at: Date.now() - this.t0,
      headAt: p.headAt,
    });
    this.partial = undefined;
    this.mode = undefined;
  }

  private take(n: number): void {
    const chunk = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    this.partial!.body.push(chunk);
    this.onBody?.(chunk);
  }

  /** Consume body bytes; true when the answer completed and more may follow. */
  private consumeBody(): boolean {
    const mode = this.mode!;
    if (mode.kind === "close") {
      this.take(this.buf.length);
      return false;
    }
    if (mode.kind === "length") {
      const n = Math.min(mode.left, this.buf.length);
      this.take(n);
      mode.left -= n;
      if (mode.left === 0) {
        this.complete();
        return true;
      }
      return false;
    }
    if (mode.kind === "chunked") {
      for (let guard = 0; guard < 1_000_000; guard++) {
        if (mode.state === "size") {
          const eol = this.buf.indexOf("\r\n");
          if (eol < 0) return false;
          const size = parseInt(this.buf.subarray(0, eol).toString("latin1").split(";")[0]!.trim(), 16);
          this.buf = this.buf.subarray(eol + 2);
          if (!Number.isFinite(size) || size < 0) {
            this.error = "bad chunk size in a response";
            return false;
          }
          if (size === 0) mode.state = "trailer";
          else {
            mode.state = "data";
            mode.left = size;
          }
        } else if (mode.state === "data") {
          const n = Math.min(mode.left, this.buf.length);
          if (n === 0) return false;
          this.take(n);
          mode.left -= n;
          if (mode.left === 0) mode.state = "data-crlf";
        } else if (mode.state === "data-crlf") {
          if (this.buf.length < 2) return false;
          this.buf = this.buf.subarray(2);
          mode.state = "size";
        } else {
          const eol = this.buf.indexOf("\r\n");
          if (eol < 0) return false;
          const line = this.buf.subarray(0, eol);
          this.buf = this.buf.subarray(eol + 2);
          if (line.length === 0) {
            this.complete();
            return true;
          }
        }
      }
    }
    return false;
  }
}

export interface ConnEnd {
  /** Who ended it: the server (FIN or reset), the client (this side), or it never opened. */
  by: "server" | "client" | "refused" | "open";
  /** The server reset the connection (ECONNRESET / EPIPE on write). */
  reset: boolean;
  error?: string;
  /** ms since open when it ended. */
  at?: number;
}

/** One client connection with a response parser, scripted writes and event-driven waits. */
export class Conn {
  readonly parser: ResponseParser;
  readonly opened = Date.now();
  written = 0;
  closed = false;
  end: ConnEnd = { by: "open", reset: false };
  private waiters = new Set<() => void>();
  private constructor(
    readonly socket: net.Socket,
    methods: string[],
  ) {
    this.parser = new ResponseParser(methods);
  }

  /** Connect to 127.0.0.1:port. A refused connection gives a closed Conn (`end.by === "refused"`). */
  static open(port: number, methods: string[] = [], timeoutMs = 5000): Promise<Conn> {
    return new Promise((resolve) => {
      const socket = net.connect({ host: "127.0.0.1", port });
      const c = new Conn(socket, methods);
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        c.finish("client", false, "connect timeout");
        socket.destroy();
        resolve(c);
      }, timeoutMs);
      socket.setNoDelay(true);
      socket.on("data", (d: Buffer) => {
        c.parser.push(d);
        c.wake();
      });
      socket.on("end", () => {
        c.parser.end();
        c.finish("server", false);
      });
      socket.on("error", (err: NodeJS.ErrnoException) => {
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          c.finish(
            err.code === "ECONNREFUSED" ? "refused" : "server",
            err.code === "ECONNRESET",
            err.code ?? err.message,
          );
          resolve(c);
          return;
        }
        c.parser.end();
        c.finish("server", err.code === "ECONNRESET" || err.code === "EPIPE", err.code ?? err.message);
      });
      socket.on("close", () => {
        c.parser.end();
        c.finish("server", false);
      });
      socket.once("connect", () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(c);
      });
    });
  }

  private finish(by: ConnEnd["by"], reset: boolean, error?: string): void {
    if (this.closed) {
      if (reset && this.end.by === "server") this.end.reset = true;
      return;
    }
    this.closed = true;
    this.end = { by, reset, ...(error ? { error } : {}), at: Date.now() - this.opened };
    this.wake();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Write and wait until it is flushed to the kernel; false when the connection is gone. */
  write(data: Buffer | string): Promise<boolean> {
    if (this.closed || this.socket.destroyed) return Promise.resolve(false);
    const buf = typeof data === "string" ? Buffer.from(data, "latin1") : data;
    return new Promise((resolve) => {
      this.socket.write(buf, (err) => {
        if (err) return resolve(false);
        this.written += buf.length;
        resolve(true);
      });
    });
  }

  /**
   * Write `total` bytes as fast as the peer takes them, for at most `maxMs`, stopping when the
   * connection ends. Returns the bytes the kernel accepted.
   */
  async flood(total: number, maxMs: number, chunkSize = 64 * 1024): Promise<number> {
    const chunk = Buffer.alloc(chunkSize, 0x61);
    const start = this.written;
    const deadline = Date.now() + maxMs;
    for (let i = 0; i < 1_000_000 && this.written - start < total && Date.now() < deadline && !this.closed; i++) {
      const n = Math.min(chunkSize, total - (this.written - start));
      const ok = await Promise.race([
        this.write(n === chunkSize ? chunk : chunk.subarray(0, n)),
        this.until(() => this.closed, Math.max(1, deadline - Date.now())).then(() => false),
      ]);
      if (!ok) break;
    }
    return this.written - start;
  }

  /** Resolves true once `pred()` holds (checked on every byte and on close), false after `ms`. */
  until(pred: () => boolean, ms: number): Promise<boolean> {
    if (pred()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = () => {
        if (!pred()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        resolve(pred());
      }, ms);
      this.waiters.add(check);
    });
  }

  /** Wait for `n` complete answers, or the end of the connection, or `ms`. */
  responses(n: number, ms: number): Promise<RawResponse[]> {
    return this.until(() => this.parser.responses.length >= n || this.closed, ms).then(() => this.parser.responses);
  }

  /** Wait until the server closes the connection (true) or `ms` passes (false). */
  waitClosed(ms: number): Promise<boolean> {
    return this.until(() => this.closed, ms);
  }

  /** Close from this side: a FIN (`end` + destroy) or a reset (RST). */
  close(how: "fin" | "rst" = "fin"): void {
    if (!this.closed) this.finish("client", false);
    if (how === "rst" && typeof this.socket.resetAndDestroy === "function") this.socket.resetAndDestroy();
    else this.socket.destroy();
  }
}

/** A request in bytes (headers as given, in order; Content-Length added when `body` is given and no framing header is). */
export function requestBytes(
  method: string,
  path: string,
  headers: Array<[string, string]>,
  body?: Buffer | string,
): Buffer {
  const b = body === undefined ? undefined : typeof body === "string" ? Buffer.from(body, "utf8") : body;
  const hs = [...headers];
  const names = new Set(hs.map(([k]) => k.toLowerCase()));
  if (!names.has("host")) hs.unshift(["Host", "127.0.0.1"]);
  if (b && !names.has("content-length") && !names.has("transfer-encoding"))
    hs.push(["Content-Length", String(b.length)]);
  const head = `${method} ${path} HTTP/1.1\r\n${hs.map(([k, v]) => `${k}: ${v}`).join("\r\n")}\r\n\r\n`;
  return b ? Buffer.concat([Buffer.from(head, "latin1"), b]) : Buffer.from(head, "latin1");
}

/** Send one request on a new connection and wait for its answer (or the end of the connection). */
export async function oneShot(
  port: number,
  bytes: Buffer,
  opts: { method?: string; timeoutMs?: number; expect?: number } = {},
): Promise<{ conn: Conn; responses: RawResponse[] }> {
  const conn = await Conn.open(port, opts.method ? [opts.method] : []);
  if (conn.closed) return { conn, responses: [] };
  await conn.write(bytes);
  const responses = await conn.responses(opts.expect ?? 1, opts.timeoutMs ?? 10_000);
  if (!conn.closed) conn.close("fin");
  return { conn, responses: [...responses] };
}
