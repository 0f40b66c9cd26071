/** Small hooks the views share: data from the bridge, refreshed by time and by live events. */
import { useCallback, useEffect, useRef, useState } from "react";
import type { BridgeEvent } from "@wire/events";
import { api } from "./api";
import { onEvent, onFeedStatus, type FeedStatus } from "./events";

export interface Loaded<T> {
  data: T | undefined;
  error: string | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * GET `path` (null: nothing to load) now, every `everyMs` (0: never), and shortly after each live
 * event `refreshOn` accepts. A reload while one is in flight is folded into one more afterwards.
 */
export function useApi<T>(
  path: string | null,
  opts: { everyMs?: number; refreshOn?: (e: BridgeEvent) => boolean } = {},
): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [loading, setLoading] = useState(path !== null);
  const inFlight = useRef(false);
  const again = useRef(false);
  const current = useRef(path);
  current.current = path;
  const refreshOn = useRef(opts.refreshOn);
  refreshOn.current = opts.refreshOn;

  const load = useCallback(async () => {
    const p = current.current;
    if (p === null) return;
    if (inFlight.current) {
      again.current = true;
      return;
    }
    inFlight.current = true;
    try {
      const value = await api<T>(p);
      if (current.current === p) {
        setData(value);
        setError(undefined);
      }
    } catch (err) {
      if (current.current === p) setError((err as Error).message);
    } finally {
      inFlight.current = false;
      setLoading(false);
      if (again.current) {
        again.current = false;
        void load();
      }
    }
  }, []);

  useEffect(() => {
    setData(undefined);
    setError(undefined);
    setLoading(path !== null);
    void load();
  }, [path, load]);

  useEffect(() => {
    if (!opts.everyMs || path === null) return;
    const t = setInterval(() => void load(), opts.everyMs);
    return () => clearInterval(t);
  }, [opts.everyMs, path, load]);

  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const off = onEvent((e) => {
      if (!refreshOn.current?.(e) || timer) return;
      timer = setTimeout(() => {
        timer = undefined;
        void load();
      }, 250);
    });
    return () => {
      off();
      if (timer) clearTimeout(timer);
    };
  }, [load]);

  return { data, error, loading, reload: () => void load() };
}

/** Live events, as they come. */
export function useEvents(fn: (e: BridgeEvent) => void): void {
  const ref = useRef(fn);
  ref.current = fn;
  useEffect(() => onEvent((e) => ref.current(e)), []);
}

export function useFeedStatus(): { status: FeedStatus; detail?: string } {
  const [s, setS] = useState<{ status: FeedStatus; detail?: string }>({ status: "connecting" });
  useEffect(() => onFeedStatus((status, detail) => setS({ status, detail })), []);
  return s;
}

/** The client-side route under /dashboard/: `[view, id?]`. */
export function useRoute(): [string, string | undefined] {
  const read = (): [string, string | undefined] => {
    const rest = location.pathname.replace(/^\/dashboard\/?/, "");
    const [view, ...id] = rest.split("/");
    return [view || "live", id.length ? decodeURIComponent(id.join("/")) : undefined];
  };
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const on = () => setRoute(read());
    window.addEventListener("popstate", on);
    window.addEventListener("cb:navigate", on);
    return () => {
      window.removeEventListener("popstate", on);
      window.removeEventListener("cb:navigate", on);
    };
  }, []);
  return route;
}

export function navigate(view: string, id?: string): void {
  const url = `/dashboard/${view}${id !== undefined ? `/${encodeURIComponent(id)}` : ""}`;
  if (location.pathname !== url) history.pushState(null, "", url);
  window.dispatchEvent(new Event("cb:navigate"));
}
