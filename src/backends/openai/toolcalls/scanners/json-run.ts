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

/**
 * A JSON call object (or an array of them) at the start of a line or between sentences. After it:
 * more call objects separated by `;`, `,` or blanks (one block: all-or-nothing), then the end of
 * the line, the end of the reply, or blanks and the first letter of a new sentence.
 */
export class JsonRunCandidate implements Candidate {
  private json: JsonScanner;
  private readonly calls: RawCall[] = [];
  private st = J_VALUE;
  private pending = 0;
  private readonly isArray: boolean;

  constructor(
    private readonly ctx: ScanContext,
    first: string,
  ) {
    this.isArray = first === "[";
    this.json = new JsonScanner(ctx.tools, this.isArray ? V_CALLS : V_CALL);
    this.json.step(first);
  }

  step(c: string): Decision | null {
    switch (this.st) {
      case J_VALUE: {
        const r = this.json.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return reject(1);
        const calls = callsFromJsonText(this.json.text, this.ctx.tools);
        if (calls === null) return reject(0);
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
