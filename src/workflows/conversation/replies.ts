/**
 * Short replies to a conversation's question ("Run it? (yes / no)", "Deploy it?"): is the whole
 * message a plain yes, a no, or a wish to cancel? Only whole-message replies count — "no, make it casual" or
 * "yes but change the tone" carry new information and are not a bare yes or no (null), so the
 * engine reads them as inputs instead.
 *
 * Case, punctuation, emoji, and politeness words ("please", "thanks") around the reply are
 * ignored; 👍 counts as yes and 👎 as no. A message may chain phrases of one kind
 * ("yes, go ahead", "ok do it", "no no"); a no together with a cancel phrase ("no, stop") is a
 * cancel, but "don't stop" is not.
 */

export type ReplyKind = "yes" | "no" | "cancel";

/** Phrases written `a | b | c`. */
const list = (s: string) => s.split("|").map((p) => p.trim());

const PHRASES: Record<ReplyKind, string[]> = {
  yes: list(`yes | y | yeah | yep | yup | yes sir | sure | sure thing | ok | okay | k | go | go ahead | go for it
    | do it | run it | confirm | confirmed | please do | sounds good | absolutely | of course | approve | approved`),
  no: list(`no | n | nope | nah | don't | dont | do not | not now | no thanks | not yet | reject | rejected | deny`),
  cancel: list(`cancel | cancel it | cancel that | never mind | nevermind | nvm | stop | forget it | abort | quit`),
};

/** Words allowed around a reply that do not change it. */
const POLITE = list(`please | pls | plz | thanks | thank you | thx | ty | thank u`);

type Entry = { words: string[]; kind: ReplyKind | "polite" };

const ENTRIES: Entry[] = [
  ...(Object.entries(PHRASES) as Array<[ReplyKind, string[]]>).flatMap(([kind, phrases]) =>
    phrases.map((p) => ({ words: p.split(" "), kind })),
  ),
  ...POLITE.map((p) => ({ words: p.split(" "), kind: "polite" as const })),
].sort((a, b) => b.words.length - a.words.length); // longest first: "do not" before "do"

const MAX_REPLY_CHARS = 60;
const THUMBS_UP = /\u{1F44D}/u;
const THUMBS_DOWN = /\u{1F44E}/u;

/** "yes", "no", "cancel", or null when the message is not (only) one of those. */
export function replyKind(text: string): ReplyKind | null {
  if (typeof text !== "string" || text.length > MAX_REPLY_CHARS) return null;
  const norm = text.normalize("NFKC").toLowerCase().replace(/[’‘`]/g, "'");
  const kinds = new Set<ReplyKind>();
  let negated = false; // "don't stop" is not a cancel
  if (THUMBS_UP.test(norm)) kinds.add("yes");
  if (THUMBS_DOWN.test(norm)) kinds.add("no");
  const tokens = (norm.match(/[\p{L}\p{N}']+/gu) ?? []).map((t) => t.replace(/^'+|'+$/g, "")).filter((t) => t !== "");

  for (let i = 0; i < tokens.length; ) {
    const entry = ENTRIES.find((e) => e.words.every((w, j) => tokens[i + j] === w));
    if (!entry) return null; // a word that is not part of a short reply: new information
    if (entry.kind !== "polite") kinds.add(entry.kind);
    if ((entry.kind === "no" && entry.words.length > 1) || entry.words[0]?.startsWith("don")) negated = true;
    i += entry.words.length;
  }
  if (kinds.has("cancel")) return kinds.has("yes") || negated ? null : "cancel";
  if (kinds.size !== 1) return null; // nothing, or yes and no together
  return [...kinds][0]!;
}
