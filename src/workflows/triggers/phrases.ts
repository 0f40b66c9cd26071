/**
 * A schedule in a person's words, read without a model (the builder's CONFIGURE, the router's rule
 * that hands such a message to the builder): "every weekday at 8", "every day at 7:30 pm",
 * "every monday and friday at 9am", "on weekends at noon", "every hour", "every 15 minutes",
 * "every minute", or a cron expression quoted after `cron`; a day without a time is at 09:00.
 * "stop the schedule" (remove, delete, cancel, disable, unschedule) removes it; "also", "another",
 * "as well" add one beside the others instead of replacing them. A name that holds such a word
 * ("run the daily report") is not a schedule: days need "every", "each" or "on", and "daily" a
 * time or "run it daily". `asksForSchedule` is narrower still (for the router, before any model):
 * the message must lead with the request ("run it …", "every …", "stop the schedule") or say
 * "schedule".
 */

export type ScheduleWords =
  | {
      kind: "set";
      cron: string /** The schedule said back ("every weekday at 08:00"). */;
      words: string;
      also: boolean;
    }
  | { kind: "stop" };

const DAY_NAMES = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"];
const DAY = "(?:sun|mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?)(?:days?)?";
const DAY_LIST = new RegExp(String.raw`\b(?:every|on|each)\s+(${DAY}(?:\s*(?:,|and|or|&)\s*${DAY})*)\b`);

const pad = (n: number) => String(n).padStart(2, "0");

/** "at 8", "at 8:30", "at 7:30 pm", "at 8am", "at noon", "at midnight". */
function timeOf(t: string): { h: number; m: number } | undefined | "bad" {
  if (/\bat noon\b/.test(t)) return { h: 12, m: 0 };
  if (/\bat midnight\b/.test(t)) return { h: 0, m: 0 };
  const m = /\bat (\d{1,2})(?:[:.h](\d{2}))?\s*(am|pm|a\.m\.|p\.m\.|o'?clock)?(?![\w:])/.exec(t);
  if (!m) return undefined;
  let h = Number(m[1]);
  const min = m[2] === undefined ? 0 : Number(m[2]);
  const half = m[3]?.startsWith("a") ? "am" : m[3]?.startsWith("p") ? "pm" : undefined;
  if (min > 59 || h > 23 || (half && (h < 1 || h > 12))) return "bad";
  if (half === "pm" && h < 12) h += 12;
  if (half === "am" && h === 12) h = 0;
  return { h, m: min };
}

function dayIndex(word: string): number {
  return DAY_NAMES.findIndex((d) => d.startsWith(word.slice(0, 3)));
}

export function scheduleFromWords(text: string): ScheduleWords | undefined {
  const t = text.toLowerCase().replace(/\s+/g, " ").trim();
  if (
    /\bunschedule\b/.test(t) ||
    /\b(?:stop|remove|delete|cancel|clear|turn off|disable|drop)\b.*\bschedul(?:e|es|ed|ing)\b/.test(t) ||
    /\bno (?:more |longer )?(?:schedule|scheduled)\b/.test(t)
  )
    return { kind: "stop" };
  const also = /\b(?:also|as well|another|additionally|in addition)\b/.test(t);
  const literal = /\bcron\s*[:=]?\s*["'`]([^"'`]+)["'`]/i.exec(text);
  if (literal) return { kind: "set", cron: literal[1]!.trim(), words: `cron \`${literal[1]!.trim()}\``, also };

  const mins = /\bevery (\d{1,2}) ?(?:minutes|mins?)\b/.exec(t);
  if (mins && Number(mins[1]) >= 1 && Number(mins[1]) <= 59)
    return { kind: "set", cron: `*/${Number(mins[1])} * * * *`, words: `every ${Number(mins[1])} minutes`, also };
  if (/\bevery minute\b/.test(t)) return { kind: "set", cron: "* * * * *", words: "every minute", also };
  const hours = /\bevery (\d{1,2}) ?hours?\b/.exec(t);
  if (hours && Number(hours[1]) >= 1 && Number(hours[1]) <= 23)
    return { kind: "set", cron: `0 */${Number(hours[1])} * * *`, words: `every ${Number(hours[1])} hours`, also };
  if (/\b(?:every hour|hourly|each hour)\b/.test(t))
    return { kind: "set", cron: "0 * * * *", words: "every hour", also };

  let days: string | undefined;
  let dayWords = "";
  if (/\b(?:every|each|on) (?:week ?day|working day|business day)s?\b/.test(t)) {
    days = "1-5";
    dayWords = "every weekday";
  } else if (/\b(?:every|on|each) weekends?\b/.test(t)) {
    days = "0,6";
    dayWords = "every Saturday and Sunday";
  } else if (
    /\b(?:every|each) (?:day|morning|evening|night)\b|\bdaily at\b|\b(?:run|runs) (?:it |this |that )?daily\b/.test(t)
  ) {
    days = "*";
    dayWords = "every day";
  } else {
    const list = DAY_LIST.exec(t);
    if (list) {
      const idx = [...new Set(list[1]!.split(/\s*(?:,|and|or|&)\s*/).map(dayIndex))]
        .filter((i) => i >= 0)
        .sort((a, b) => a - b);
      if (idx.length) {
        days = idx.join(",");
        const names = idx.map((i) => DAY_NAMES[i]!.replace(/^./, (c) => c.toUpperCase()));
        dayWords = `every ${names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names.at(-1)}` : names[0]}`;
      }
    }
  }
  const time = timeOf(t);
  if (time === "bad") return undefined;
  // A time alone is daily when the words are about running or scheduling ("run it at 8").
  if (!days && time && /\b(?:run|schedule|scheduled)\b/.test(t)) {
    days = "*";
    dayWords = "every day";
  }
  if (!days) return undefined;
  const at = time ?? { h: 9, m: 0 };
  return {
    kind: "set",
    cron: `${at.m} ${at.h} * * ${days}`,
    words: `${dayWords} at ${pad(at.h)}:${pad(at.m)}`,
    also,
  };
}

/** A message that asks for a schedule change and little else (the router's rule, see the header). */
export function asksForSchedule(text: string): boolean {
  return (
    scheduleFromWords(text) !== undefined &&
    (/\bschedul/i.test(text) ||
      /^\s*(?:(?:ok|okay|now|please|and|also|then|instead)[,\s]+)*(?:run (?:it|this|that)|make it run|have it run|every|each|daily|hourly|on (?:week|mon|tue|wed|thu|fri|sat|sun)|stop|remove|delete|cancel|disable|unschedule)\b/i.test(
        text,
      ))
  );
}
