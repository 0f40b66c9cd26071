/**
 * Structured logging (pino) with secrets redacted, and no key twice on a line: a child logger is made
 * with `childLogger`, which leaves out bindings its parent already has, and a log call's fields that
 * repeat a binding with the same value are left out (pino itself writes both; JSON readers keep one
 * or refuse the line).
 */
import pino, { type Logger } from "pino";

/** The keys a logger is bound to (its own and its parents'), read once per logger. */
const boundKeys = new WeakMap<object, Map<string, unknown>>();
function bindingsOf(logger: Logger): Map<string, unknown> {
  let keys = boundKeys.get(logger);
  if (!keys) {
    keys = new Map(Object.entries(logger.bindings()));
    boundKeys.set(logger, keys);
  }
  return keys;
}

/** `parent.child(bindings)` without the keys the parent is already bound to (the parent's value stays). */
export function childLogger(parent: Logger, bindings: Record<string, unknown>): Logger {
  const bound = bindingsOf(parent);
  const fresh = Object.entries(bindings).filter(([key]) => !bound.has(key));
  return fresh.length ? parent.child(Object.fromEntries(fresh)) : parent;
}

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { name: "clawbridge" },
      hooks: {
        // A call's field equal to one of the logger's bindings is left out of the line.
        logMethod(args, method) {
          const first = args[0] as unknown;
          if (first && typeof first === "object" && !(first instanceof Error)) {
            const bound = bindingsOf(this);
            let copy: Record<string, unknown> | undefined;
            for (const key of Object.keys(first)) {
              if (bound.has(key) && bound.get(key) === (first as Record<string, unknown>)[key]) {
                copy ??= { ...(first as Record<string, unknown>) };
                delete copy[key];
              }
            }
            if (copy) (args as unknown[])[0] = copy;
          }
          return method.apply(this, args);
        },
      },
      redact: {
        paths: [
          "apiKey",
          "*.apiKey",
          "headers.authorization",
          "*.headers.authorization",
          "authorization",
          "env",
          "*.env",
        ],
        censor: "[redacted]",
      },
    },
    destination ?? pino.destination(2),
  );
}

export type { Logger };
