/**
 * A small JSON-RPC client over a warm process's JSON lines (Codex's app-server, ACP): numeric
 * ids, a map of pending requests, a bounded wait for every answer (its own time limit and, when
 * given, the turn's signal), and every pending request failed at once when the process ends.
 *
 * Not a library: codex's app-server speaks "JSON-RPC lite" — no `"jsonrpc": "2.0"` member on any
 * message — which `json-rpc-2.0` refuses, and `vscode-jsonrpc` wants its own framed stream
 * reader, while `WarmProcess` already hands over parsed lines.
 */

/** What the other side answered with `error`. */
export class JsonRpcError extends Error {
  constructor(
    readonly method: string,
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = "JsonRpcError";
  }
}

/** No answer within the request's time limit (the process may be stuck). */
export class JsonRpcTimeout extends Error {
  constructor(
    readonly method: string,
    readonly ms: number,
  ) {
    super(`no answer to ${method} within ${ms} ms`);
    this.name = "JsonRpcTimeout";
  }
}

/** The request was given up because the turn's signal aborted. */
export class JsonRpcAborted extends Error {
  constructor(readonly method: string) {
    super(`${method} was abandoned: the turn was cancelled`);
    this.name = "JsonRpcAborted";
  }
}

/** The process ended (or could not take input) before answering. */
export class JsonRpcClosed extends Error {
  constructor(
    readonly method: string,
    why: string,
  ) {
    super(`${method}: ${why}`);
    this.name = "JsonRpcClosed";
  }
}

/** A message from the other side, sorted. */
export type JsonRpcIncoming =
  | {
      kind: "response";
      id: number | string;
      result?: unknown;
      error?: { code: number; message: string; data?: unknown };
    }
  | { kind: "request"; id: number | string; method: string; params: unknown }
  | { kind: "notification"; method: string; params: unknown }
  | { kind: "other" };

/** Sort one parsed message (a response to us, a request to us, a notification). */
export function classify(m: Record<string, unknown>): JsonRpcIncoming {
  const id = m.id;
  const hasId = typeof id === "number" || typeof id === "string";
  if (typeof m.method === "string") {
    return hasId
      ? { kind: "request", id: id as number | string, method: m.method, params: m.params }
      : { kind: "notification", method: m.method, params: m.params };
  }
  if (hasId && ("result" in m || "error" in m)) {
    const e = m.error as { code?: unknown; message?: unknown; data?: unknown } | undefined;
    const error =
      e && typeof e === "object"
        ? {
            code: typeof e.code === "number" ? e.code : -32603,
            message: typeof e.message === "string" ? e.message : JSON.stringify(e),
            data: e.data,
          }
        : undefined;
    return { kind: "response", id: id as number | string, result: m.result, ...(error ? { error } : {}) };
  }
  return { kind: "other" };
}

interface Pending {
  method: string;
  resolve(v: unknown): void;
  reject(e: Error): void;
  cleanup(): void;
}

export interface RequestOptions {
  /** Time limit for the answer (default: the client's). */
  timeoutMs?: number;
  /** Give up when this aborts (the request stays unanswered on the other side). */
  signal?: AbortSignal;
}

export class JsonRpcClient {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closedWhy: string | undefined;

  /**
   * @param send writes one message; false when the process can no longer take input.
   * @param defaultTimeoutMs time limit of a request without its own.
   */
  constructor(
    private readonly send: (message: unknown) => boolean,
    private readonly defaultTimeoutMs = 30_000,
  ) {}

  /** Requests waiting for an answer. */
  get waiting(): number {
    return this.pending.size;
  }

  /** Send a request and wait (bounded) for its result; rejects with one of the errors above. */
  request<T = unknown>(method: string, params: unknown, opts: RequestOptions = {}): Promise<T> {
    if (this.closedWhy) return Promise.reject(new JsonRpcClosed(method, this.closedWhy));
    if (opts.signal?.aborted) return Promise.reject(new JsonRpcAborted(method));
    const id = this.nextId++;
    const ms = opts.timeoutMs ?? this.defaultTimeoutMs;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => settle(() => reject(new JsonRpcTimeout(method, ms))), ms);
      const onAbort = () => settle(() => reject(new JsonRpcAborted(method)));
      const cleanup = () => {
        clearTimeout(timer);
        opts.signal?.removeEventListener("abort", onAbort);
        this.pending.delete(id);
      };
      const settle = (fn: () => void) => {
        if (!this.pending.has(id)) return;
        cleanup();
        fn();
      };
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      this.pending.set(id, { method, resolve: (v) => resolve(v as T), reject, cleanup });
      if (!this.send({ id, method, params }))
        settle(() => reject(new JsonRpcClosed(method, "the process no longer takes input")));
    });
  }

  /** A notification (no answer expected). False when it could not be written. */
  notify(method: string, params?: unknown): boolean {
    if (this.closedWhy) return false;
    return this.send(params === undefined ? { method } : { method, params });
  }

  /** Answer a request of the other side. */
  respond(id: number | string, result: unknown): boolean {
    return !this.closedWhy && this.send({ id, result });
  }

  /** Refuse a request of the other side. */
  respondError(id: number | string, code: number, message: string): boolean {
    return !this.closedWhy && this.send({ id, error: { code, message } });
  }

  /** Settle the pending request this response answers. False when it answers none of ours. */
  handleResponse(r: Extract<JsonRpcIncoming, { kind: "response" }>): boolean {
    const p = typeof r.id === "number" ? this.pending.get(r.id) : undefined;
    if (!p) return false;
    p.cleanup();
    if (r.error) p.reject(new JsonRpcError(p.method, r.error.code, r.error.message, r.error.data));
    else p.resolve(r.result);
    return true;
  }

  /** The process ended: fail every pending request, refuse new ones. */
  close(why: string): void {
    this.closedWhy ??= why;
    for (const p of [...this.pending.values()]) {
      p.cleanup();
      p.reject(new JsonRpcClosed(p.method, why));
    }
  }
}
