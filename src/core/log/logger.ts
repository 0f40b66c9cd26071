/**
 * Structured logging (pino) with secrets redacted, and no key twice on a line: a child logger is made
 * with `childLogger`, which leaves out bindings its parent already has (pino itself writes both, and
 * JSON readers keep one or refuse the line); a log call does not restate what its logger is bound to.
 */
import pino, { type Logger } from "pino";

/** `parent.child(bindings)` without the keys the parent is already bound to (the parent's value stays). */
export function childLogger(parent: Logger, bindings: Record<string, unknown>): Logger {
  const bound = parent.bindings();
  const fresh = Object.entries(bindings).filter(([key]) => !(key in bound));
  return fresh.length ? parent.child(Object.fromEntries(fresh)) : parent;
}

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino(
    {
      level,
      base: { name: "clawbridge" },
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
