/**
 * JSON call objects written without a marker (Llama 3 JSON, Qwen2.5-Coder, xLAM and other JSON
 * arrays), at the start of a line or between sentences, and the rule that decides when JSON in a
 * sentence counts (see extract.ts's module header for the rule in words).
 */
import { JsonScanner, MORE, REJECT, V_CALL, V_CALLS } from "../json.js";
import { callsFromClosedArray, callsFromJsonText, type RawCall } from "../shape.js";
import { accept, type Candidate, type Decision, isHws, isWs, reject, type ScanContext } from "./common.js";

/** How much of the line before the JSON the in-sentence rule looks at. */
export const SENTENCE_WINDOW = 200;

/** Words that make the sentence before the JSON an explanation, so the JSON is an example. */
const EXAMPLE_WORDS =
  /\b(?:examples?|e\.g|i\.e|for instance|such as|looks? like|like (?:this|so)|format(?:ted|s)?|syntax|schema|template|sample|pattern|would look|should look)\b|例如|比如|示例|格式/i;
/** A sentence ends with one of these (the JSON may then start a new one): . ! ? 。 ！ ？ */
function isSentenceEnd(code: number): boolean {
  return code === 46 || code === 33 || code === 63 || code === 0x3002 || code === 0xff01 || code === 0xff1f;
}
/** The JSON may follow these directly (others need a blank): : ： 。 ！ ？ */
function isTightEnd(code: number): boolean {
  return code === 58 || code === 0xff1a || code === 0x3002 || code === 0xff01 || code === 0xff1f;
}
function isHwsCode(code: number): boolean {
  return code === 32 || code === 9 || code === 13;
}

/** `prefix` without its trailing blanks: the end index. */
function trimmedEnd(prefix: string): number {
  let end = prefix.length;
  while (end > 0 && isHwsCode(prefix.charCodeAt(end - 1))) end--;
  return end;
}

/**
 * Does the last sentence of `prefix` (the text before a `{` / `[` on its line; from the previous
 * sentence end followed by a blank, at most SENTENCE_WINDOW characters) present what follows as an
 * example?
 */
export function examplePrefix(prefix: string): boolean {
  const end = trimmedEnd(prefix);
  if (end === 0) return false;
  const from = Math.max(0, end - SENTENCE_WINDOW);
  let start = end - 1;
  while (start > from && !(isSentenceEnd(prefix.charCodeAt(start - 1)) && isHwsCode(prefix.charCodeAt(start)))) start--;
  return EXAMPLE_WORDS.test(prefix.slice(start, end));
}

/**
 * The in-sentence rule (see extract.ts's module header): may a JSON object or array that starts
 * after `prefix` (the text before it on its line) be a call? At a line start, or between sentences
 * when the sentence before does not present it as an example.
 */
export function jsonMayStartAfter(prefix: string): boolean {
  const end = trimmedEnd(prefix);
  if (end === 0) return true;
  const last = prefix.charCodeAt(end - 1);
  if (!isTightEnd(last) && !(isSentenceEnd(last) && end < prefix.length)) return false;
  return !examplePrefix(prefix);
}

/** The first letter of a new sentence: an uppercase letter or a letter of a script without case. */
export function startsSentence(c: string): boolean {
  return /[\p{Lu}\p{Lt}\p{Lo}]/u.test(c);
}

const J_VALUE = 0;
const J_AFTER = 1;
const J_SEP = 2;
/** The first object is not a call: skipping to its balanced `}`. */
const J_SKIP = 3;
/** After a first object that is not a call: blanks, `;` or `,`, then maybe another object. */
const J_INVALID = 4;
/** First keys of a call object (see shape.ts). */
const CALL_KEYS: ReadonlySet<string> = new Set([
  "name",
  "function",
  "function_call",
  "type",
  "id",
  "arguments",
  "parameters",
]);

/**
 * A JSON call object (or an array of them) at the start of a line or between sentences. After it:
 * more call objects separated by `;`, `,` or blanks (one block: all-or-nothing), then the end of
 * the line, the end of the reply, or blanks and the first letter of a new sentence.
 *
 * When the FIRST object is not a call (broken JSON, other keys, a tool not offered), it is text, and
 * a `{` after it on the same line (past blanks, `;` or `,`) may open a call object as if the line
 * started there: `{"name": "read", "arguments": {"path": }} {"name": "read", …}` keeps the second.
 * The invalid object's end is found by counting braces outside strings.
 */
export class JsonRunCandidate implements Candidate {
  private json: JsonScanner;
  private readonly calls: RawCall[] = [];
  private st = J_VALUE;
  private pending = 0;
  private readonly isArray: boolean;
  // Brace depth and string state of the first object (to find its end if it is not a call).
  private depth = 0;
  private inStr = false;
  private esc = false;
  /** The first object began with a key (`{"`): only then is a broken one skipped to its end. */
  private keyed = 0;
  /** The first key of the first object (while keyed is 1), and whether it is complete. */
  private key = "";
  private keyDone = false;
  /** The first object spans lines: a broken one is released where it broke. */
  private multiline = false;

  constructor(
    private readonly ctx: ScanContext,
    first: string,
  ) {
    this.isArray = first === "[";
    this.json = new JsonScanner(ctx.tools, this.isArray ? V_CALLS : V_CALL);
    this.json.step(first);
    this.depth = 1;
  }

  /** Tracks the first object's braces; true when `c` closes it. */
  private track(c: string): boolean {
    if (this.inStr) {
      if (this.esc) this.esc = false;
      else if (c === "\\") this.esc = true;
      else if (c === '"') {
        this.inStr = false;
        this.keyDone = true;
      } else if (!this.keyDone && this.key.length < 16) this.key += c;
      return false;
    }
    if (c === "\n") this.multiline = true;
    if (this.keyed === 0 && !isWs(c)) this.keyed = c === '"' ? 1 : -1;
    if (c === '"') this.inStr = true;
    else if (c === "{" || c === "[") this.depth++;
    else if (c === "}" || c === "]") return --this.depth === 0;
    return false;
  }

  /**
   * The first object is not a call (`closed`: `c` ended it). If it reads as a call object gone wrong
   * (one line, first key a call key), it is skipped to its end, then another may follow; else it is
   * released now.
   */
  private invalid(closed: boolean): Decision | null {
    const skip =
      !this.isArray &&
      this.calls.length === 0 &&
      !this.multiline &&
      this.keyed === 1 &&
      this.keyDone &&
      CALL_KEYS.has(this.key);
    if (!skip) return closed ? reject(0) : reject(1);
    this.st = closed ? J_INVALID : J_SKIP;
    this.pending = 0;
    return null;
  }

  step(c: string): Decision | null {
    switch (this.st) {
      case J_VALUE: {
        const closed = this.calls.length === 0 && !this.isArray && this.track(c);
        const r = this.json.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return this.invalid(closed);
        const calls = callsFromJsonText(this.json.text, this.ctx.tools);
        if (calls === null) return this.invalid(true);
        this.calls.push(...calls);
        this.st = J_AFTER;
        this.pending = 0;
        return null;
      }
      case J_AFTER:
        if (isHws(c)) {
          this.pending++;
          return null;
        }
        if (c === "\n") return accept(this.calls, this.pending + 1);
        if (!this.isArray && (c === ";" || c === ",")) {
          this.pending++;
          this.st = J_SEP;
          return null;
        }
        if (!this.isArray && c === "{" && this.pending > 0) return this.next(c);
        if (this.pending > 0 && startsSentence(c)) return accept(this.calls, this.pending + 1);
        return reject(this.pending + 1);
      case J_SEP:
        if (isWs(c)) {
          this.pending++;
          return null;
        }
        if (c === "{") return this.next(c);
        return reject(this.pending + 1);
      case J_SKIP:
        if (c === "\n") return reject(1);
        if (this.track(c)) this.st = J_INVALID;
        return null;
      case J_INVALID:
        if (isHws(c) || c === ";" || c === ",") {
          this.pending++;
          return null;
        }
        // Another object, apart from the invalid one (glued `}{` stays text, as Ollama's parser).
        if (c === "{" && this.pending > 0) return { ...reject(1), jsonNext: true };
        return reject(1);
      default:
        return reject(1);
    }
  }

  private next(c: string): null {
    this.json = new JsonScanner(this.ctx.tools, V_CALL);
    this.json.step(c);
    this.st = J_VALUE;
    return null;
  }

  eof(): Decision {
    if (this.st === J_AFTER) return accept(this.calls, this.pending);
    // A trailing separator at the very end belongs to the block.
    if (this.st === J_SEP) return accept(this.calls);
    if (this.isArray && this.calls.length === 0) {
      const calls = callsFromClosedArray(this.json.closedArrayText(), this.ctx.tools);
      if (calls !== null) return accept(calls);
    }
    return reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}
