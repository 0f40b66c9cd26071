/**
 * Structured logging (pino) with secrets redacted, and no key twice on a line: a child logger is made
 * with `childLogger`, which leaves out bindings its parent already has (pino itself writes both, and
 * JSON readers keep one or refuse the line); a log call does not restate what its logger is bound to.
 * Every line passes the secrets redactor on its way out (src/core/secrets/redactor.ts): a secret's
 * value is written as `[secret NAME]`, whatever field or message holds it.
 */
import pino, { type DestinationStream, type Logger } from "pino";
import { secretRedactor } from "../secrets/redactor.js";

/** `dest` with each line redacted first (flushing passed through). */
function redacting(dest: DestinationStream): DestinationStream {
  const out = dest as DestinationStream & { flush?: (cb?: (err?: Error) => void) => void; flushSync?: () => void };
  return {
    write: (line: string) => out.write(secretRedactor.line(line)),
    ...(out.flush ? { flush: (cb?: (err?: Error) => void) => out.flush!(cb) } : {}),
    ...(out.flushSync ? { flushSync: () => out.flushSync!() } : {}),
  } as DestinationStream;
}

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
    redacting((destination as DestinationStream | undefined) ?? pino.destination(2)),
  );
}

export type { Logger };
