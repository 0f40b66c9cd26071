/**
 * Closed-loop HTTP load generator on undici (keep-alive pool, one connection per worker).
 * Each worker sends its next request as soon as the previous one has been read to the end.
 * A run is bounded by a request count AND a time limit.
 */
import { performance } from "node:perf_hooks";
import { Pool } from "undici";

export interface LoadSpec {
  /** e.g. http://127.0.0.1:4097 */
  origin: string;
  path: string;
  body: string;
  /** Extra request headers. */
  headers?: Record<string, string>;
  concurrency: number;
  warmup: number;
  maxRequests: number;
  maxSeconds: number;
  /** Give each worker its own `x-session-id` (the bridge runs one turn at a time per conversation). */
  sessionPerWorker?: boolean;
  /** Cheap check of every response body; returns an error text or undefined. */
  check(status: number, body: string): string | undefined;
  /** Thorough check of the first warm-up response (full parse); returns an error text or undefined. */
  verify?(status: number, body: string): string | undefined;
}

export interface LoadResult {
  requests: number;
  errors: number;
  firstError?: string;
  seconds: number;
  rps: number;
  /** Request sent → first body byte (ms). */
  ttfb: number[];
  /** Request sent → first body chunk that holds a non-empty `"content":"…` (ms). */
  ttfc: number[];
  /** Request sent → last body byte (ms). */
  total: number[];
}

const CONTENT = /"content":"[^"]/;

interface Sample {
  status: number;
  body: string;
  ttfb: number;
  ttfc: number;
  total: number;
}

async function once(pool: Pool, spec: LoadSpec, headers: Record<string, string>): Promise<Sample> {
  const t0 = performance.now();
  const res = await pool.request({ path: spec.path, method: "POST", headers, body: spec.body });
  let ttfb = NaN;
  let ttfc = NaN;
  let body = "";
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    const now = performance.now();
    if (Number.isNaN(ttfb)) ttfb = now - t0;
    body += chunk.toString("utf8");
    if (Number.isNaN(ttfc) && CONTENT.test(body)) ttfc = now - t0;
  }
  return { status: res.statusCode, body, ttfb, ttfc, total: performance.now() - t0 };
}

/** A keep-alive connection pool for one target (reuse it across rounds; close it at the end). */
export function loadClient(origin: string, connections: number): Pool {
  return new Pool(origin, {
    connections,
    pipelining: 1,
    keepAliveTimeout: 120_000,
    keepAliveMaxTimeout: 120_000,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
}

/** Results of several runs of the same scenario, as one. */
export function mergeResults(parts: LoadResult[]): LoadResult {
  const out: LoadResult = { requests: 0, errors: 0, seconds: 0, rps: 0, ttfb: [], ttfc: [], total: [] };
  for (const p of parts) {
    out.requests += p.requests;
    out.errors += p.errors;
    out.firstError ??= p.firstError;
    out.seconds += p.seconds;
    out.ttfb.push(...p.ttfb);
    out.ttfc.push(...p.ttfc);
    out.total.push(...p.total);
  }
  out.rps = out.seconds > 0 ? out.requests / out.seconds : 0;
  return out;
}

/** One bounded run. With `client`, that pool is used and left open; otherwise one is made and closed. */
export async function runLoad(spec: LoadSpec, client?: Pool): Promise<LoadResult> {
  const pool = client ?? loadClient(spec.origin, spec.concurrency);
  const result: LoadResult = { requests: 0, errors: 0, seconds: 0, rps: 0, ttfb: [], ttfc: [], total: [] };
  const fail = (msg: string) => {
    result.errors++;
    result.firstError ??= msg;
  };
  const headersFor = (w: number): Record<string, string> => ({
    "content-type": "application/json",
    ...(spec.sessionPerWorker ? { "x-session-id": `bench-worker-${w}` } : {}),
    ...spec.headers,
  });

  try {
    // --- warm-up (not measured); the first answer is verified thoroughly ---
    let warmIssued = 0;
    let verified = false;
    const warmWorker = async (w: number) => {
      const h = headersFor(w);
      while (warmIssued < spec.warmup) {
        warmIssued++;
        try {
          const s = await once(pool, spec, h);
          if (!verified && spec.verify) {
            verified = true;
            const bad = spec.verify(s.status, s.body);
            if (bad) throw new Error(`response check failed: ${bad}`);
          }
        } catch (err) {
          if (!verified) throw err;
          fail((err as Error).message);
        }
      }
    };
    await Promise.all(Array.from({ length: spec.concurrency }, (_, w) => warmWorker(w)));

    // --- measured phase ---
    let issued = 0;
    const start = performance.now();
    const deadline = start + spec.maxSeconds * 1000;
    const worker = async (w: number) => {
      const h = headersFor(w);
      while (issued < spec.maxRequests && performance.now() < deadline) {
        issued++;
        try {
          const s = await once(pool, spec, h);
          const bad = spec.check(s.status, s.body);
          if (bad) {
            fail(bad);
            continue;
          }
          result.requests++;
          result.ttfb.push(s.ttfb);
          result.ttfc.push(s.ttfc);
          result.total.push(s.total);
        } catch (err) {
          fail((err as Error).message);
        }
      }
    };
    await Promise.all(Array.from({ length: spec.concurrency }, (_, w) => worker(w)));
    result.seconds = (performance.now() - start) / 1000;
    result.rps = result.requests / result.seconds;
    return result;
  } finally {
    if (!client) await pool.close().catch(() => pool.destroy());
  }
}
