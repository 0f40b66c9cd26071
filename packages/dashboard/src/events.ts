/**
 * The live feed: `GET /v1/events` (server-sent events of the bridge's event bus). EventSource cannot
 * send an Authorization header, so the stream is read with fetch() and a small SSE parser, and the
 * key stays in the header. After a drop it reconnects with `Last-Event-ID`, so the bridge replays
 * what was missed.
 */
import type { BridgeEvent } from "@wire/events";
import { authHeaders, needKey } from "./api";
import { SseParser, type SseMessage } from "./sse";

export type FeedStatus = "connecting" | "live" | "reconnecting" | "unavailable";

type EventListener = (e: BridgeEvent) => void;
type StatusListener = (s: FeedStatus, detail?: string) => void;

const eventListeners = new Set<EventListener>();
const statusListeners = new Set<StatusListener>();
let status: FeedStatus = "connecting";
let statusDetail: string | undefined;
let lastId: string | undefined;
let started = false;

function setStatus(s: FeedStatus, detail?: string): void {
  status = s;
  statusDetail = detail;
  for (const fn of statusListeners) fn(s, detail);
}

export function onFeedStatus(fn: StatusListener): () => void {
  statusListeners.add(fn);
  fn(status, statusDetail);
  return () => statusListeners.delete(fn);
}

/** Every live event (the feed starts with the first subscriber). */
export function onEvent(fn: EventListener): () => void {
  eventListeners.add(fn);
  if (!started) {
    started = true;
    void run();
  }
  return () => eventListeners.delete(fn);
}

function dispatch(m: SseMessage): void {
  if (m.id !== undefined) lastId = m.id;
  let e: BridgeEvent;
  try {
    const parsed = JSON.parse(m.data) as BridgeEvent;
    if (!parsed || typeof parsed !== "object") return;
    e = { ...parsed, type: typeof parsed.type === "string" ? parsed.type : m.event } as BridgeEvent;
  } catch {
    return;
  }
  for (const fn of eventListeners) {
    try {
      fn(e);
    } catch (err) {
      console.error("event listener failed", err);
    }
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function run(): Promise<void> {
  let delay = 1000;
  for (;;) {
    try {
      const headers: Record<string, string> = { accept: "text/event-stream", ...authHeaders() };
      if (lastId !== undefined) headers["last-event-id"] = lastId;
      const res = await fetch("/v1/events", { headers, cache: "no-store" });
      if (res.status === 401) {
        await res.body?.cancel();
        setStatus("connecting");
        await needKey();
        continue;
      }
      if (res.status === 404 || res.status === 501) {
        await res.body?.cancel();
        setStatus("unavailable", "this bridge has no /v1/events: views refresh every few seconds instead");
        await sleep(30_000);
        continue;
      }
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      setStatus("live");
      delay = 1000;
      const parser = new SseParser(dispatch);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.push(value);
      }
      throw new Error("the stream ended");
    } catch (err) {
      setStatus("reconnecting", (err as Error).message);
      await sleep(delay);
      delay = Math.min(delay * 2, 15_000);
    }
  }
}
