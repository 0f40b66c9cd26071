/** Structured logging (pino) with secrets redacted. */
import pino, { type Logger } from "pino";

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
