/**
 * Conversation identity for the bridge: OpenClaw gives the provider stream function the session id
 * (`options.sessionId`, a UUID that changes on /new and /reset) on every model call; the wrapper
 * puts it in `x-session-id`, which clawbridge uses as the conversation key (resume mode).
 *
 * Why not also `x-openclaw-session-key`: the session KEY (`agent:main:main`) only reaches plugins
 * through the `model_call_started` hook, which OpenClaw fires asynchronously (fire-and-forget,
 * bounded queue) around the time the request is built, so it cannot be put on that same request
 * reliably; a header present on some calls and missing on others would split one conversation in
 * two. The key alone would also be wrong as an identity (it survives /new). The hook is used for a
 * log line that maps keys to ids instead.
 */

export const SESSION_ID_HEADER = "x-session-id";

/** A `wrapStreamFn` for `api.registerProvider`: adds `x-session-id` to every call that has one. */
export function wrapStreamWithSessionHeaders(ctx) {
  const inner = ctx?.streamFn;
  if (typeof inner !== "function") return undefined;
  return (model, context, options) => {
    const id = typeof options?.sessionId === "string" ? options.sessionId.trim() : "";
    if (!id) return inner(model, context, options);
    return inner(model, context, {
      ...options,
      headers: { ...(options?.headers ?? {}), [SESSION_ID_HEADER]: id.slice(0, 200) },
    });
  };
}

/** Remembers which session ids were already logged (bounded). */
export class SeenSessions {
  constructor(max = 1000) {
    this.max = max;
    this.ids = new Set();
  }

  /** true the first time `id` is seen. */
  add(id) {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > this.max) this.ids.delete(this.ids.values().next().value);
    return true;
  }
}
