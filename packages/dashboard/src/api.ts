/**
 * Every call the dashboard makes goes through `api()`: the key, when one was given, travels in the
 * Authorization header only (never in a URL). A 401 shows the key prompt; the calls that got it wait
 * for a key that works and are then sent again.
 */

const STORAGE_KEY = "clawbridge.apiKey";

function readStored(): string | undefined {
  try {
    return sessionStorage.getItem(STORAGE_KEY) ?? undefined;
  } catch {
    return undefined;
  }
}

let key: string | undefined = readStored();

export function authHeaders(): Record<string, string> {
  return key ? { authorization: `Bearer ${key}` } : {};
}

export function hasKey(): boolean {
  return key !== undefined;
}

/** The key prompt's state, for the component that shows it. */
type PromptListener = (open: boolean) => void;
const promptListeners = new Set<PromptListener>();
let waiters: Array<() => void> = [];
let promptOpen = false;

function setPrompt(open: boolean): void {
  promptOpen = open;
  for (const fn of promptListeners) fn(open);
}

export function onPrompt(fn: PromptListener): () => void {
  promptListeners.add(fn);
  fn(promptOpen);
  return () => promptListeners.delete(fn);
}

/** Wait until a key that the bridge accepts has been entered (the prompt opens). */
export function needKey(): Promise<void> {
  if (key !== undefined) {
    // The stored key was refused: forget it.
    key = undefined;
    try {
      sessionStorage.removeItem(STORAGE_KEY);
    } catch {
      /* storage unavailable */
    }
  }
  setPrompt(true);
  return new Promise((resolve) => waiters.push(resolve));
}

/**
 * Try a key: `ok` when the bridge accepts it (it is then kept in session storage and every call
 * waiting for it goes on), `refused` on 401, else the error's words.
 */
export async function tryKey(candidate: string): Promise<"ok" | "refused" | string> {
  const k = candidate.trim();
  if (!k) return "refused";
  let res: Response;
  try {
    res = await fetch("/v1/admin/queue", { headers: { authorization: `Bearer ${k}` }, cache: "no-store" });
  } catch (err) {
    return `the bridge did not answer: ${(err as Error).message}`;
  }
  if (res.status === 401) return "refused";
  if (!res.ok) return `the bridge answered HTTP ${res.status}`;
  key = k;
  try {
    sessionStorage.setItem(STORAGE_KEY, k);
  } catch {
    /* kept in memory only */
  }
  setPrompt(false);
  const w = waiters;
  waiters = [];
  for (const fn of w) fn();
  return "ok";
}

/** Forget the key (the next call that needs one asks again). */
export function clearKey(): void {
  key = undefined;
  try {
    sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    /* storage unavailable */
  }
}

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    message: string,
  ) {
    super(message);
    this.name = "ApiFailure";
  }
}

async function failure(res: Response): Promise<ApiFailure> {
  let code: string | undefined;
  let message = `HTTP ${res.status}`;
  try {
    const body = (await res.json()) as { error?: { message?: string; code?: string } };
    if (body.error?.message) message = body.error.message;
    code = body.error?.code;
  } catch {
    /* not JSON */
  }
  return new ApiFailure(res.status, code, message);
}

/** A call to the bridge, authorised; 401 waits for a key and tries again. */
export async function apiResponse(
  path: string,
  init: { method?: string; signal?: AbortSignal; headers?: Record<string, string> } = {},
): Promise<Response> {
  for (;;) {
    const res = await fetch(path, {
      method: init.method ?? "GET",
      headers: { ...(init.headers ?? {}), ...authHeaders() },
      signal: init.signal,
      cache: "no-store",
    });
    if (res.status === 401) {
      await res.body?.cancel();
      await needKey();
      continue;
    }
    if (!res.ok) throw await failure(res);
    return res;
  }
}

export async function api<T>(path: string, init: { method?: string; signal?: AbortSignal } = {}): Promise<T> {
  const res = await apiResponse(path, init);
  return (await res.json()) as T;
}
