/** A pino child logger made only when something is logged at an enabled level. */
import { childLogger } from "./logger.js";
import type { Logger } from "pino";

const LOG_LEVELS = new Set(["fatal", "error", "warn", "info", "debug", "trace"]);
const noop = () => {};

/**
 * `childLogger(parent, bindings())`, made on first use: calls at a level the parent has disabled are
 * no-ops that create nothing. Everything else goes to the real child. (Creating a pino child per
 * turn showed in the per-request CPU profile; most turns log nothing at `warn`.)
 */
export function lazyChild(parent: Logger, bindings: () => Record<string, unknown>): Logger {
  let child: Logger | undefined;
  const real = () => (child ??= childLogger(parent, bindings()));
  return new Proxy({} as Logger, {
    get(_target, prop) {
      if (child === undefined && typeof prop === "string" && LOG_LEVELS.has(prop) && !parent.isLevelEnabled(prop))
        return noop;
      const r = real();
      const v = (r as unknown as Record<PropertyKey, unknown>)[prop];
      return typeof v === "function" ? (v as (...a: unknown[]) => unknown).bind(r) : v;
    },
  });
}
