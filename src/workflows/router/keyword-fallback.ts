/**
 * What the router does without its classifier model (it failed, or is down):
 *
 * - Slash commands, always understood: `/run <id>[@version] name=value name2="two words" name3='x'`,
 *   `/test <id> name=value …` (a test run: nothing with side effects is carried out), `/cancel`,
 *   `/status [runId]`, `/systems`, `/runs`; and "test <id> [with] name=value …" (`testCommand`).
 * - A keyword matcher that suggests a system for a plain message. It works on whole words only
 *   (both sides are split into words first), so "address" never matches "add", "news" never
 *   matches "new" and "show" never matches "how" — the substring matching of the design this
 *   replaces did. Signals: the system's id or name as a phrase, its `keywords` (words or phrases),
 *   and its `examples` (shared words, ignoring common words and placeholders such as X or {topic}).
 *   The confidence it gives stays between 0.4 and 0.7, so the engine always asks before running a
 *   fallback match; two systems scoring the same give no match rather than a guess.
 */
import { put } from "../systems/inputs.js";
import type { LoadedSystem } from "../systems/types.js";

export type SlashCommand =
  /** `version`: of `/run <id>@<version>` (default: the system's latest); `test`: `/test`, a test run. */
  | { cmd: "run"; system: string; inputs: Record<string, string>; version?: number; test?: true }
  | { cmd: "cancel" }
  | { cmd: "status"; runId?: string }
  | { cmd: "systems" }
  | { cmd: "runs" };

const RUN_USAGE = 'usage: /run <system>[@version] [name=value …] (quote values with spaces: topic="two words")';

/** Opening quote → its closing quote (straight quotes, and the curly ones phones type). */
const QUOTES: Record<string, string> = { '"': '"', "'": "'", "“": "”", "‘": "’" };

/** Splits on unquoted whitespace; quotes group; a backslash escapes a quote, a space or a backslash. */
function shellWords(s: string): string[] | { error: string } {
  const words: string[] = [];
  let cur = "";
  let inWord = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (/\s/.test(c)) {
      if (inWord) words.push(cur);
      cur = "";
      inWord = false;
      continue;
    }
    inWord = true;
    // Outside quotes a backslash escapes only a quote, a space or itself (C:\path stays as typed).
    if (c === "\\" && i + 1 < s.length && /[\s"'“‘\\]/.test(s[i + 1]!)) {
      cur += s[++i];
      continue;
    }
    const close = QUOTES[c];
    if (close !== undefined) {
      let j = i + 1;
      let closed = false;
      for (; j < s.length; j++) {
        const d = s[j]!;
        if (d === "\\" && (s[j + 1] === close || s[j + 1] === "\\")) {
          cur += s[++j];
          continue;
        }
        if (d === close) {
          closed = true;
          break;
        }
        cur += d;
      }
      if (!closed) return { error: `unclosed quote ${c} in ${JSON.stringify(s.slice(i, i + 40))}` };
      i = j;
      continue;
    }
    cur += c;
  }
  if (inWord) words.push(cur);
  return words;
}

const COMMAND = /^\/(run|test|cancel|status|systems|runs)(?=\s|$)/i;
/** "test <id> [with] name=value …", "test run of <id> …": [, id, the pairs]. */
const TEST_WORDS =
  /^\s*(?:please\s+)?test\s+(?:run\s+(?:of\s+)?)?`?([a-z0-9][a-z0-9_-]{0,63})`?(?:\s+with\b)?([\s\S]*)$/i;

/**
 * "test research-blog with topic=tides" as `/test research-blog topic=tides`, when `known(id)` (a
 * message that only starts with the word "test" is an ordinary message); null otherwise.
 */
export function testCommand(text: string, known: (id: string) => boolean): SlashCommand | { error: string } | null {
  const m = TEST_WORDS.exec(text);
  if (!m || !known(m[1]!.toLowerCase())) return null;
  return parseSlash(`/test ${m[1]} ${m[2]!.trim().replace(/[.!]$/, "")}`);
}
const INPUT_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/**
 * A slash command, `{error}` for a `/run` that cannot be read, or null when the message does not
 * start with one of the commands (it is then an ordinary message).
 */
export function parseSlash(text: string): SlashCommand | { error: string } | null {
  const t = text.trim();
  const m = COMMAND.exec(t);
  if (!m) return null;
  const cmd = m[1]!.toLowerCase();
  const rest = t.slice(m[0].length).trim();
  if (cmd === "cancel" || cmd === "systems" || cmd === "runs") return { cmd };
  if (cmd === "status") {
    const runId = rest.split(/\s+/)[0];
    return runId ? { cmd: "status", runId } : { cmd: "status" };
  }
  const usage = cmd === "test" ? RUN_USAGE.replace("/run", "/test") : RUN_USAGE;
  const words = shellWords(rest);
  if (!Array.isArray(words)) return { error: `${words.error}; ${usage}` };
  const [system, ...pairs] = words;
  if (!system) return { error: usage };
  if (system.includes("=")) return { error: `name the system first: ${usage}` };
  const inputs: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    const name = eq === -1 ? "" : pair.slice(0, eq);
    if (eq === -1 || !INPUT_NAME.test(name))
      return { error: `expected name=value, got ${JSON.stringify(pair)}; ${usage}` };
    put(inputs, name, pair.slice(eq + 1));
  }
  const at = /^(.+)@(\d+)$/.exec(system);
  return {
    cmd: "run",
    system: (at ? at[1]! : system).toLowerCase(),
    inputs,
    ...(at ? { version: Number(at[2]) } : {}),
    ...(cmd === "test" ? { test: true as const } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// keyword fallback

/** Words that say nothing about which system is meant. */
const STOP_WORDS = new Set(
  (
    "a an the and or but if then so of to in on at by for with about from into onto over under as is are was were be been being am " +
    "i me my mine we us our you your yours he him his she her it its they them their this that these those there here " +
    "what which who whom whose when where why how do does did done doing can could would should will shall may might must " +
    "please pls plz kindly just now also too very really some any all each every no not don't dont can't cannot won't " +
    "hey hi hello ok okay thanks thank yes yeah want wants need needs like let let's lets get got give make run start " +
    "execute trigger go new one up out again more something someone somebody stuff thing things etc via per"
  ).split(/\s+/),
);

/** Lower-case words, apostrophes kept inside a word ("don't"), a possessive 's dropped ("today's" → "today"). */
export function words(text: string): string[] {
  const norm = text.normalize("NFKC").toLowerCase().replace(/[’‘]/g, "'");
  return (norm.match(/[\p{L}\p{M}\p{N}]+(?:'[\p{L}\p{M}\p{N}]+)*/gu) ?? []).map((w) => w.replace(/'s$/, ""));
}

function containsPhrase(hay: readonly string[], phrase: readonly string[]): boolean {
  if (phrase.length === 0 || phrase.length > hay.length) return false;
  outer: for (let i = 0; i + phrase.length <= hay.length; i++) {
    for (let j = 0; j < phrase.length; j++) if (hay[i + j] !== phrase[j]) continue outer;
    return true;
  }
  return false;
}

/** An example's telling words: no stop-words, no placeholders (X, Y, <topic>, {topic}, [topic]). */
function exampleWords(example: string): Set<string> {
  const stripped = example.replace(/<[^>]*>|\{[^}]*\}|\[[^\]]*\]/g, " ");
  return new Set(words(stripped).filter((w) => w.length > 1 && !STOP_WORDS.has(w)));
}

interface Score {
  system: string;
  points: number;
  matched: string[];
}

/** Points: id or name 2; keywords 1 per word of each matched phrase (3 at most); best example 1 or 2. */
function score(msg: readonly string[], msgSet: ReadonlySet<string>, s: LoadedSystem): Score {
  const matched: string[] = [];
  let points = 0;

  // The id or the name as a phrase (the longer of the two that matches is named).
  const names = [
    { label: `id "${s.id}"`, phrase: words(s.id.replace(/[-_]+/g, " ")) },
    { label: `name "${s.name}"`, phrase: words(s.name ?? "") },
  ]
    .filter((n) => containsPhrase(msg, n.phrase))
    .sort((a, b) => b.phrase.length - a.phrase.length);
  if (names[0]) {
    points += 2;
    matched.push(names[0].label);
  }

  let keywordPoints = 0;
  for (const k of s.keywords) {
    const phrase = words(k);
    if (containsPhrase(msg, phrase)) {
      keywordPoints += phrase.length;
      matched.push(`keyword "${k}"`);
    }
  }
  points += Math.min(3, keywordPoints);

  let best: { points: number; ratio: number; example: string } | undefined;
  for (const e of s.examples) {
    const ew = exampleWords(e);
    if (ew.size === 0) continue;
    let shared = 0;
    for (const w of ew) if (msgSet.has(w)) shared++;
    const ratio = shared / ew.size;
    const strong = (shared >= 2 && ratio >= 0.5) || (ew.size === 1 && shared === 1);
    if (!strong) continue;
    const p = shared >= 2 && ratio >= 0.8 ? 2 : 1;
    if (!best || p > best.points || (p === best.points && ratio > best.ratio)) best = { points: p, ratio, example: e };
  }
  if (best) {
    points += best.points;
    matched.push(`example "${best.example}"`);
  }
  return { system: s.id, points, matched };
}

export const FALLBACK_MIN_CONFIDENCE = 0.4;
export const FALLBACK_MAX_CONFIDENCE = 0.7;

/**
 * The system a message most likely asks for, by whole-word matching, or null when nothing matches
 * or two systems match equally well. Confidence: 0.4 for one point, +0.1 per further point, 0.7 at most.
 */
export function fallbackMatch(
  text: string,
  systems: LoadedSystem[],
): { system: string; confidence: number; matched: string } | null {
  const msg = words(text);
  if (msg.length === 0) return null;
  const msgSet = new Set(msg);
  const scores = systems.map((s) => score(msg, msgSet, s)).filter((s) => s.points >= 1);
  scores.sort((a, b) => b.points - a.points);
  const [top, second] = scores;
  if (!top || (second && second.points === top.points)) return null;
  const confidence = Math.min(
    FALLBACK_MAX_CONFIDENCE,
    Math.round((FALLBACK_MIN_CONFIDENCE + 0.1 * (top.points - 1)) * 10) / 10,
  );
  return { system: top.system, confidence, matched: top.matched.join(", ") };
}
