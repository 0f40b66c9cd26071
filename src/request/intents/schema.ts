/**
 * Configuration of intent detection and tool pre-execution ("intents"), per model.
 *
 * A rule decides WHEN a tool runs before the model answers; the tool sections decide HOW.
 * Rule semantics (see src/request/intents/detect.ts for the matcher):
 *  - `triggers` (keywords/phrases) or `patterns` (regexes): at least one must match. Where a
 *    keyword trigger may appear is set by `anchor`:
 *      "start"    – at the start of the message (after optional `lead` words),
 *      "sentence" – at the start of any sentence (after optional `lead` words) [default],
 *      "anywhere" – anywhere, on word boundaries.
 *    The query is what follows the trigger up to the end of its sentence, with `fillers` removed
 *    from both ends. A regex's named group `query` (or its first group) is the query.
 *  - `all`: groups of keywords; EVERY group needs at least one keyword anywhere in the message
 *    (AND of OR-groups). A keyword ending in `*` matches as a word prefix ("eesti*" ~ "Eestis").
 *  - `exclude`: regexes; when one matches the extracted query the rule does not fire.
 *  - `excludeMessage`: regexes; when one matches the message the rule does not fire.
 *  - web_fetch rules also need an http(s) URL in the message (the URL is the parameter).
 * Rules are tried in order (user rules first, then the preset); the first match wins.
 */
import { z } from "zod";

export const INTENT_KINDS = ["web_search", "web_fetch", "news"] as const;
export type IntentKind = (typeof INTENT_KINDS)[number];

export const SEARCH_PROVIDERS = ["duckduckgo", "searxng", "brave"] as const;
export type SearchProviderName = (typeof SEARCH_PROVIDERS)[number];

export const ANCHORS = ["start", "sentence", "anywhere"] as const;
export type Anchor = (typeof ANCHORS)[number];

const positiveInt = z.number().int().positive();
const nonNegInt = z.number().int().nonnegative();

const regexString = z
  .string()
  .min(1)
  .superRefine((src, ctx) => {
    try {
      new RegExp(src, "iu");
    } catch (err) {
      ctx.addIssue({ code: "custom", message: `invalid regular expression: ${(err as Error).message}` });
    }
  });

const keyword = z.string().trim().min(1);

export const intentRuleSchema = z
  .strictObject({
    /** Unique name. A user rule with the id of a preset rule replaces it. */
    id: z
      .string()
      .min(1)
      .regex(/^[A-Za-z0-9_.:-]+$/, "rule ids use letters, digits, _ . : -"),
    kind: z.enum(INTENT_KINDS),
    enabled: z.boolean().default(true),
    /** Trigger keywords/phrases (any language, case-insensitive, whole words). */
    triggers: z.array(keyword).default([]),
    /** Regexes (JavaScript syntax, flags "iu"); named group `query` or group 1 = the query. */
    patterns: z.array(regexString).default([]),
    /** Where a keyword trigger may appear. */
    anchor: z.enum(ANCHORS).default("sentence"),
    /** Words that may precede a trigger at a start anchor ("please", "can you", "hey"). */
    lead: z.array(keyword).default([]),
    /** AND of OR-groups of keywords, matched anywhere. */
    all: z.array(z.array(keyword).min(1)).default([]),
    /** Words/phrases removed from both ends of the extracted query. */
    fillers: z.array(keyword).default([]),
    /** Regexes tested on the extracted query; a match cancels the rule. */
    exclude: z.array(regexString).default([]),
    /** Regexes tested on the whole message; a match cancels the rule. */
    excludeMessage: z.array(regexString).default([]),
    /** Messages longer than this never fire this rule (pasted documents, long prompts). */
    maxMessageChars: positiveInt.optional(),
    /** Fixed search query (instead of the extracted one). */
    query: z.string().min(1).optional(),
    /** news: sites to restrict the search to (overrides `news.sites`). */
    sites: z.array(z.string().min(1)).optional(),
    /** Search freshness hint (news: e.g. "day"). Providers map it to their own parameter. */
    freshness: z.enum(["day", "week", "month", "year"]).optional(),
  })
  .superRefine((r, ctx) => {
    if (r.kind !== "web_fetch" && r.triggers.length === 0 && r.patterns.length === 0 && r.all.length === 0) {
      ctx.addIssue({ code: "custom", message: `rule "${r.id}" needs triggers, patterns or all` });
    }
  });
export type IntentRuleInput = z.input<typeof intentRuleSchema>;
export type IntentRule = z.output<typeof intentRuleSchema>;

export const searchConfigSchema = z
  .strictObject({
    provider: z.enum(SEARCH_PROVIDERS).default("duckduckgo"),
    /**
     * duckduckgo: the HTML endpoint (default https://html.duckduckgo.com/html/);
     * searxng: the instance root (required; "/search" is appended);
     * brave: the web search endpoint (default https://api.search.brave.com/res/v1/web/search).
     */
    baseUrl: z.url({ protocol: /^https?$/ }).optional(),
    /** Brave API key. Prefer `apiKeyEnv`. */
    apiKey: z.string().min(1).optional(),
    /** Name of the environment variable holding the API key. */
    apiKeyEnv: z.string().min(1).optional(),
    /** Results requested from the provider (before ranking and trimming). */
    maxResults: z.number().int().min(1).max(20).default(6),
    timeoutMs: positiveInt.default(8000),
    maxBytes: positiveInt.default(2 * 1024 * 1024),
    /** Extra query parameters sent to the provider (e.g. { kl: "ee-et" } for DuckDuckGo). */
    params: z.record(z.string(), z.string()).default({}),
  })
  .superRefine((s, ctx) => {
    if (s.provider === "searxng" && !s.baseUrl) {
      ctx.addIssue({
        code: "custom",
        path: ["baseUrl"],
        message: "the searxng provider needs baseUrl (the instance root)",
      });
    }
    if (s.provider === "brave" && !s.apiKey && !s.apiKeyEnv) {
      ctx.addIssue({ code: "custom", path: ["apiKey"], message: "the brave provider needs apiKey or apiKeyEnv" });
    }
  });

export const newsConfigSchema = z.strictObject({
  /** Default sites for news rules that do not list their own. Empty = plain search. */
  sites: z.array(z.string().min(1)).default([]),
  /** When the site-restricted search finds nothing, search without the restriction. */
  fallbackToGeneral: z.boolean().default(true),
});

export const fetchConfigSchema = z.strictObject({
  timeoutMs: positiveInt.default(10000),
  maxBytes: positiveInt.default(2 * 1024 * 1024),
  maxRedirects: nonNegInt.max(20).default(5),
  /** Allow loopback, RFC 1918, CGNAT, ULA and link-local targets (metadata stays blocked). */
  allowPrivateAddresses: z.boolean().default(false),
  /** CIDRs/addresses ("192.168.1.0/24") or hostnames ("nas.lan", "*.lan") always allowed. */
  allowHosts: z.array(z.string().min(1)).default([]),
  /** "markdown" (compact: headings, lists, no links/images) or plain "text". */
  format: z.enum(["markdown", "text"]).default("markdown"),
});

export const intentsConfigSchema = z.strictObject({
  enabled: z.boolean().default(true),
  /** Built-in rules: "default" (search / URL fetch / Estonian news examples) or "none". */
  preset: z.enum(["default", "none"]).default("default"),
  /** Ids of preset rules to turn off. */
  disableRules: z.array(z.string().min(1)).default([]),
  /** Your rules; tried before the preset's. */
  rules: z.array(intentRuleSchema).default([]),
  search: searchConfigSchema.default(() => searchConfigSchema.parse({})),
  news: newsConfigSchema.default(() => newsConfigSchema.parse({})),
  fetch: fetchConfigSchema.default(() => fetchConfigSchema.parse({})),
  /** How long a tool result is reused for the same (tool, query). 0 = no cache. */
  cacheTtlSeconds: nonNegInt.default(300),
  cacheMaxEntries: positiveInt.default(200),
  /** Size of the live-data block put in the prompt. */
  maxToolResultChars: z.number().int().min(200).default(3000),
});
export type IntentsConfigInput = z.input<typeof intentsConfigSchema>;
export type IntentsConfig = z.output<typeof intentsConfigSchema>;
export type SearchConfig = IntentsConfig["search"];
export type NewsConfig = IntentsConfig["news"];
export type FetchConfig = IntentsConfig["fetch"];

export const DEFAULT_INTENTS_CONFIG: IntentsConfig = intentsConfigSchema.parse({});

/** Parse and fill defaults; throws a ZodError on invalid input. */
export function parseIntentsConfig(input: unknown): IntentsConfig {
  return intentsConfigSchema.parse(input ?? {});
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Merge a per-model intents section over the global one (both raw input). Objects merge key by
 * key; arrays and scalars from the model win. Validate the result with `parseIntentsConfig`.
 */
export function mergeIntentsInput(
  base: IntentsConfigInput | undefined,
  override: IntentsConfigInput | undefined,
): IntentsConfigInput {
  const merge = (a: unknown, b: unknown): unknown => {
    if (b === undefined) return a;
    if (isPlainObject(a) && isPlainObject(b)) {
      const out: Record<string, unknown> = { ...a };
      for (const [k, v] of Object.entries(b)) out[k] = merge(a[k], v);
      return out;
    }
    return b;
  };
  return (merge(base ?? {}, override ?? {}) ?? {}) as IntentsConfigInput;
}
