/**
 * Intent detection: decide from the user's message whether a tool should run before the model
 * answers, and with which parameter (search query or URL). Rules are configuration
 * (src/request/intents/schema.ts documents the semantics; src/request/intents/preset.ts ships examples).
 */
import { DEFAULT_PRESET_RULES } from "./preset.js";
import { intentRuleSchema, type IntentKind, type IntentRule, type IntentsConfig } from "./schema.js";

export type DetectedIntent =
  | { kind: "web_search"; query: string; ruleId: string; rule: IntentRule }
  | { kind: "news"; query: string; ruleId: string; rule: IntentRule }
  | { kind: "web_fetch"; url: string; ruleId: string; rule: IntentRule };

/** Longest query handed to a search provider. */
export const MAX_QUERY_CHARS = 200;

// Word boundaries that work for any script.
const WB_BEFORE = "(?<![\\p{L}\\p{N}\\p{M}_])";
const WB_AFTER = "(?![\\p{L}\\p{N}\\p{M}_])";
/** After a trigger: not followed by a letter, digit, apostrophe or hyphen ("google's", "look-up"). */
const TRIGGER_AFTER = "(?![\\p{L}\\p{N}\\p{M}_'’-])";

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A keyword/phrase as a regex source: whitespace-flexible, trailing `*` = word prefix. */
function keywordSource(k: string): string {
  const t = k.normalize("NFC").trim();
  const prefix = t.endsWith("*");
  const body = (prefix ? t.slice(0, -1) : t).trim();
  const src = body.split(/\s+/).map(escapeRe).join("\\s+");
  return prefix ? `${src}[\\p{L}\\p{N}\\p{M}]*` : src;
}

function alternation(words: string[]): string {
  // Longest first, so "search for" wins over "search".
  const sorted = [...new Set(words)].sort((a, b) => b.length - a.length);
  return sorted.map(keywordSource).join("|");
}

interface CompiledRule {
  rule: IntentRule;
  triggerAtStart: RegExp | null; // ^(lead)* trigger
  triggerAnywhere: RegExp | null;
  lead: RegExp | null;
  patterns: RegExp[];
  all: RegExp[];
  fillerStart: RegExp | null;
  fillerEnd: RegExp | null;
  exclude: RegExp[];
  excludeMessage: RegExp[];
}

const compiled = new WeakMap<IntentRule, CompiledRule>();

function compile(rule: IntentRule): CompiledRule {
  const hit = compiled.get(rule);
  if (hit) return hit;
  const trig = rule.triggers.length ? alternation(rule.triggers) : null;
  const leadAlt = rule.lead.length ? alternation(rule.lead) : null;
  const fill = rule.fillers.length ? alternation(rule.fillers) : null;
  const c: CompiledRule = {
    rule,
    triggerAtStart: trig ? new RegExp(`^(?:${trig})${TRIGGER_AFTER}`, "iu") : null,
    triggerAnywhere: trig ? new RegExp(`${WB_BEFORE}(?:${trig})${TRIGGER_AFTER}`, "iu") : null,
    lead: leadAlt ? new RegExp(`^(?:${leadAlt})${TRIGGER_AFTER}[\\s,;:!-]*`, "iu") : null,
    patterns: rule.patterns.map((p) => new RegExp(p, "iu")),
    all: rule.all.map((group) => new RegExp(`${WB_BEFORE}(?:${alternation(group)})${WB_AFTER}`, "iu")),
    fillerStart: fill ? new RegExp(`^(?:${fill})${TRIGGER_AFTER}[\\s,;:-]*`, "iu") : null,
    fillerEnd: fill ? new RegExp(`[\\s,;:-]*${WB_BEFORE}(?:${fill})$`, "iu") : null,
    exclude: rule.exclude.map((p) => new RegExp(p, "iu")),
    excludeMessage: rule.excludeMessage.map((p) => new RegExp(p, "iu")),
  };
  compiled.set(rule, c);
  return c;
}

/**
 * Prepare a user message for matching: Unicode NFC, drop a leading client timestamp
 * ("[Sat 2026-11-21 09:13 UTC] "), <<<BEGIN_X>>>…<<<END_X>>> context blocks, fenced and inline
 * code, and quoted ("> ") lines — text in code or quotes is material, not a request.
 */
export function normalizeMessage(message: string): string {
  let s = message.normalize("NFC").replace(/\r\n?/g, "\n");
  s = s.replace(/^\s*\[[^\]\n]{0,60}?\d{1,2}:\d{2}[^\]\n]{0,30}\]\s*/u, "");
  // Client-injected context blocks (e.g. OpenClaw's internal context) are not the user's words.
  s = s.replace(/<<<BEGIN_[A-Z0-9_]+>>>[\s\S]*?(?:<<<END_[A-Z0-9_]+>>>|$)/g, "\n");
  s = s.replace(/```[\s\S]*?(?:```|$)/g, "\n");
  s = s.replace(/~~~[\s\S]*?(?:~~~|$)/g, "\n");
  s = s.replace(/`[^`\n]*`/g, " ");
  s = s
    .split("\n")
    .filter((line) => !/^\s*>/.test(line))
    .map((line) => line.replace(/[ \t\u00a0]+/g, " ").trim())
    .join("\n");
  return s.replace(/\n{2,}/g, "\n").trim();
}

/** Sentences (and lines) of a normalized message. */
export function splitSentences(text: string): string[] {
  return text
    .split(/(?<=[.!?。！？])\s+|\n+/u)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

const URL_RE = /(?:\bhttps?:\/\/(?:\[[0-9a-f:.%]+\])?|(?<![\p{L}\p{N}@/.:-])www\.)[^\s<>"'`\\^{}|[\]]*/giu;

function trimUrlTail(u: string): string {
  let s = u;
  for (let i = 0; i < 10 && s.length > 0; i++) {
    const last = s[s.length - 1]!;
    if (last === ")") {
      const opens = s.split("(").length - 1;
      const closes = s.split(")").length - 1;
      if (opens >= closes) break;
      s = s.slice(0, -1);
    } else if (".,;:!?'\"”’»>*_~".includes(last)) {
      s = s.slice(0, -1);
    } else break;
  }
  return s;
}

/** http(s) URLs in a text (www.* gets https://), in order, de-duplicated. */
export function extractUrls(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(URL_RE)) {
    let candidate = trimUrlTail(m[0]);
    if (/^www\./i.test(candidate)) candidate = `https://${candidate}`;
    try {
      const u = new URL(candidate);
      if ((u.protocol === "http:" || u.protocol === "https:") && u.hostname.length > 0 && !out.includes(u.toString())) {
        out.push(u.toString());
      }
    } catch {
      // not a URL
    }
  }
  return out;
}

function stripLead(c: CompiledRule, sentence: string): string {
  let s = sentence.replace(/^[\s\p{P}\p{S}]+/u, "");
  if (!c.lead) return s;
  for (let i = 0; i < 6; i++) {
    const m = c.lead.exec(s);
    if (!m || m[0].length === 0) break;
    s = s.slice(m[0].length).replace(/^[\s\p{P}\p{S}]+/u, "");
  }
  return s;
}

const EDGE_PUNCT_START = /^[\s,;:.\-–—"'“”‘’«»„(]+/u;
const EDGE_PUNCT_END = /[\s,;:.!?。！？\-–—"'“”‘’«»)]+$/u;

/** Clean an extracted query: punctuation, fillers (up to 3 from each end), quotes, length. */
function cleanQuery(c: CompiledRule, raw: string): string {
  let q = raw.replace(/\s+/g, " ").replace(EDGE_PUNCT_START, "").replace(EDGE_PUNCT_END, "");
  for (let i = 0; i < 3; i++) {
    const before = q;
    if (c.fillerStart) q = q.replace(c.fillerStart, "");
    if (c.fillerEnd) q = q.replace(c.fillerEnd, "");
    q = q.replace(EDGE_PUNCT_START, "").replace(EDGE_PUNCT_END, "");
    if (q === before) break;
  }
  if (q.length > MAX_QUERY_CHARS) {
    const cut = q.slice(0, MAX_QUERY_CHARS + 1);
    const sp = cut.lastIndexOf(" ");
    q = sp > 0 ? cut.slice(0, sp) : cut.slice(0, MAX_QUERY_CHARS);
  }
  return q.trim();
}

/** Where a keyword trigger matched: the text after it, in its sentence. */
function matchTrigger(c: CompiledRule, sentences: string[]): string | null {
  const anchor = c.rule.anchor;
  const candidates = anchor === "start" ? sentences.slice(0, 1) : sentences;
  for (const sentence of candidates) {
    if (anchor === "anywhere") {
      const m = c.triggerAnywhere!.exec(sentence);
      if (m) return sentence.slice(m.index + m[0].length);
    } else {
      const s = stripLead(c, sentence);
      const m = c.triggerAtStart!.exec(s);
      if (m) return s.slice(m[0].length);
    }
  }
  return null;
}

function matchPatterns(c: CompiledRule, text: string): { query: string | null } | null {
  for (const re of c.patterns) {
    const m = re.exec(text);
    if (!m) continue;
    const q = m.groups?.query ?? m[1];
    return { query: q ?? null };
  }
  return null;
}

/** The sentence that mentions the rule's keywords, for rules without a trigger position. */
function sentenceFor(c: CompiledRule, sentences: string[]): string {
  const probe = c.all[0] ?? c.patterns[0];
  const hit = probe ? sentences.find((s) => probe.test(s)) : undefined;
  return stripLead(c, hit ?? sentences[0] ?? "");
}

function needsQuery(kind: IntentKind): boolean {
  return kind === "web_search" || kind === "news";
}

function tryRule(c: CompiledRule, text: string, sentences: string[], urls: string[]): DetectedIntent | null {
  const r = c.rule;
  if (!r.enabled) return null;
  if (r.maxMessageChars !== undefined && text.length > r.maxMessageChars) return null;
  if (c.excludeMessage.some((re) => re.test(text))) return null;
  if (r.kind === "web_fetch" && urls.length === 0) return null;
  for (const group of c.all) if (!group.test(text)) return null;

  let raw: string | null = null;
  const hasPositional = c.triggerAtStart !== null || c.patterns.length > 0;
  if (hasPositional) {
    let matched = false;
    if (c.triggerAtStart) {
      const after = matchTrigger(c, sentences);
      if (after !== null) {
        matched = true;
        raw = after;
      }
    }
    if (!matched && c.patterns.length) {
      const p = matchPatterns(c, text);
      if (p) {
        matched = true;
        raw = p.query;
      }
    }
    if (!matched) return null;
  }

  if (r.kind === "web_fetch") {
    return { kind: "web_fetch", url: urls[0]!, ruleId: r.id, rule: r };
  }
  if (!needsQuery(r.kind)) return null;
  let query: string;
  if (r.query) {
    query = r.query;
  } else {
    query = cleanQuery(c, raw ?? sentenceFor(c, sentences));
  }
  if (query.length < 2) return null;
  if (!r.query && c.exclude.some((re) => re.test(query))) return null;
  return { kind: r.kind as "web_search" | "news", query, ruleId: r.id, rule: r };
}

/**
 * The first rule (in order) that matches the message, with its parameter; null when none does.
 * Pure and synchronous; never throws for any message.
 */
export function detectIntent(message: string, rules: readonly IntentRule[]): DetectedIntent | null {
  if (typeof message !== "string" || message.trim().length === 0) return null;
  const text = normalizeMessage(message);
  if (!text) return null;
  const sentences = splitSentences(text);
  const urls = extractUrls(text);
  for (const rule of rules) {
    const hit = tryRule(compile(rule), text, sentences, urls);
    if (hit) return hit;
  }
  return null;
}

let presetCache: IntentRule[] | null = null;

/** The default preset, validated (the same objects every call). */
export function presetRules(): IntentRule[] {
  presetCache ??= DEFAULT_PRESET_RULES.map((r) => intentRuleSchema.parse(r));
  return presetCache;
}

/**
 * The effective, ordered rule list of a config: user rules first, then the preset's (unless
 * `preset: "none"`) minus `disableRules` and minus those a user rule replaces by id. Disabled
 * rules (`enabled: false`) are dropped. Empty when `enabled` is false.
 */
export function resolveRules(cfg: Pick<IntentsConfig, "enabled" | "preset" | "disableRules" | "rules">): IntentRule[] {
  if (!cfg.enabled) return [];
  const userIds = new Set(cfg.rules.map((r) => r.id));
  const disabled = new Set(cfg.disableRules);
  const preset = cfg.preset === "default" ? presetRules().filter((r) => !userIds.has(r.id) && !disabled.has(r.id)) : [];
  return [...cfg.rules, ...preset].filter((r) => r.enabled);
}
