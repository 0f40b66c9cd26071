/**
 * Cron expressions of a system's schedules (`triggers[].cron`), read by `croner`: 5 fields
 * (minute hour day-of-month month day-of-week), or 6 with seconds first, in an IANA time zone
 * (default: the bridge's). The library checks them at load (`cronProblem`); the trigger room
 * (src/workflows/triggers) asks for the next time (`nextCronRun`).
 */
import { Cron } from "croner";

/** Why an expression or a time zone cannot be used, or undefined when both are fine. */
export function cronProblem(
  expr: string,
  timezone?: string,
): { key: "cron" | "timezone"; message: string } | undefined {
  if (timezone !== undefined) {
    try {
      new Intl.DateTimeFormat("en", { timeZone: timezone });
    } catch {
      return { key: "timezone", message: `unknown time zone "${timezone}" (use an IANA name such as Europe/Paris)` };
    }
  }
  try {
    if (!new Cron(expr, { timezone, paused: true }).nextRun())
      return { key: "cron", message: `"${expr}" never comes again` };
  } catch (err) {
    return {
      key: "cron",
      message: `"${expr}" is not a cron expression (${(err as Error).message.replace(/^CronPattern: /, "")})`,
    };
  }
  return undefined;
}

/** The first time of the schedule strictly after `after` (ms since the epoch), or undefined when none. */
export function nextCronRun(expr: string, timezone: string | undefined, after: number): number | undefined {
  return new Cron(expr, { timezone, paused: true }).nextRun(new Date(after))?.getTime();
}
