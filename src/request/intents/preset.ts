/**
 * The "default" preset: example rules shipped as DATA. Nothing here is special-cased in code —
 * users can replace a rule (same id), disable it (`disableRules`), or drop the preset (`preset:
 * "none"`). Order matters: the first matching rule wins.
 *
 * False-positive policy of the search rule: the trigger must OPEN a sentence (imperative use:
 * "Search for …", "Can you look up …", "Please google …"); "I can't find my keys" does not fire
 * because the sentence opens with "I". Queries about the user's own things ("find my keys"),
 * non-imperative uses ("Research shows …", "Search is broken"), and code-related requests
 * ("find the bug in this code") are excluded. Long messages (pasted documents) never trigger it.
 */
import type { IntentRuleInput } from "./schema.js";

/** Politeness / addressing words allowed in front of an English trigger. */
const EN_LEAD = [
  "please",
  "pls",
  "plz",
  "hey",
  "hi",
  "hello",
  "ok",
  "okay",
  "so",
  "now",
  "and",
  "also",
  "then",
  "quickly",
  "can you",
  "could you",
  "would you",
  "will you",
  "can u",
  "could u",
  "i want you to",
  "i need you to",
  "i'd like you to",
  "go",
  "go and",
  "try to",
  "help me",
];

export const DEFAULT_PRESET_RULES: IntentRuleInput[] = [
  {
    id: "news-estonia",
    kind: "news",
    // "estonia"/"eesti" (any inflection) AND a news word. Pure data: copy it for another country.
    all: [
      ["estonia*", "eesti*"],
      ["news", "headlines", "uudis*", "today", "täna"],
    ],
    // Stripped from the front of the query ("Tell me Estonian news" → "Estonian news").
    lead: [
      ...EN_LEAD,
      "tell me",
      "give me",
      "show me",
      "get me",
      "what's",
      "what is",
      "what are",
      "search for",
      "search",
      "look up",
      "find",
      "google",
      "palun",
      "mis on",
      "räägi",
    ],
    fillers: ["please", "palun", "for me"],
    sites: ["err.ee", "postimees.ee", "delfi.ee"],
    maxMessageChars: 600,
  },
  {
    id: "web-fetch-url",
    kind: "web_fetch",
    // Any http(s) URL in the message (outside code blocks). No trigger words needed.
    maxMessageChars: 4000,
  },
  {
    id: "web-search",
    kind: "web_search",
    anchor: "sentence",
    // Longest phrases first is not required: the matcher always prefers the longest trigger.
    triggers: [
      "search",
      "search for",
      "search the web for",
      "search the internet for",
      "search online for",
      "web search",
      "web search for",
      "look up",
      "look for",
      "lookup",
      "find",
      "find me",
      "find out",
      "find out about",
      "find information about",
      "find info on",
      "find info about",
      "google",
      "bing",
      "research",
    ],
    lead: EN_LEAD,
    fillers: [
      "for",
      "about",
      "on",
      "up",
      "me",
      "please",
      "for me",
      "online",
      "on the web",
      "on the internet",
      "on google",
      "the web for",
      "the internet for",
      "information about",
      "information on",
      "info about",
      "info on",
    ],
    exclude: [
      // The user's own things: the web cannot find them.
      "^(?:my|our|his|her|their|your|mine)\\b",
      // Non-imperative: "Research shows…", "Search is broken", "Google's new model", "Look up at…".
      "^(?:is|are|was|were|has|have|had|shows?|says?|suggests?|indicates?|results?|engines?|bar|box|history|at)\\b",
      "^['’]s\\b",
      // Pronoun-only queries ("google it", "search that").
      "^(?:it|that|this|them|those|these|something|anything|out)$",
      // Work on local code/files, not the web.
      "\\b(?:this|my|our) (?:code|file|files|function|method|class|repo|repository|codebase|folder|directory|project|document|snippet|diff)\\b",
      "\\b(?:in|from) (?:this|the|my|our) (?:code|file|repo|codebase|folder|directory|project|document|text|list|spreadsheet|log|logs)\\b",
    ],
    maxMessageChars: 1000,
  },
];
