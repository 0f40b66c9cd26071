/**
 * What every candidate scanner shares. A candidate is started by the extractor at a character that
 * may open a call and is then fed the following characters one at a time until it decides. A
 * decision never depends on where the text was split into pieces, only on the characters
 * themselves; "I need more" is the only answer that depends on how much text has arrived. That is
 * what makes streaming equal to whole-text extraction for every split.
 */
import { isWs } from "../json.js";
import type { RawCall } from "../shape.js";

export { isWs };

export interface ScanContext {
  /** Names of the offered tools. */
  tools: ReadonlySet<string>;
  /** Special tokens are being stripped: a rejected Harmony header is dropped whole. */
  strip: boolean;
  /** The offered tool that receives raw code after `<|python_tag|>` (`python`, else `code_interpreter`), or null. */
  codeTool: string | null;
}

/**
 * What a candidate decided. The candidate's held text is split at `held.length - refeed`: the
 * part before is the call (accepted) or plain text (rejected); the last `refeed` characters are
 * processed again from the extractor's normal state.
 */
export interface Decision {
  calls: RawCall[] | null;
  refeed: number;
  /** After a rejection: continue inside a non-call code fence of this many backticks (0: no). */
  code: number;
  /** After a rejection: drop this many characters at the start of the released text. */
  drop: number;
  /** After a rejection: the released text opened a reasoning block that this literal closes. */
  think: string | null;
}

export interface Candidate {
  /** Next character (already appended to the held text by the extractor). null: undecided. */
  step(c: string): Decision | null;
  /** The reply ended. */
  eof(): Decision;
  /** The fence length to continue in when the candidate is abandoned for its size (0: none). */
  codeOnReject(): number;
}

export function accept(calls: RawCall[], refeed = 0): Decision {
  return { calls, refeed, code: 0, drop: 0, think: null };
}

export function reject(refeed = 0, code = 0, drop = 0): Decision {
  return { calls: null, refeed, code, drop, think: null };
}

/** Matches one of several literals (none a prefix of another) that all start with the same char. */
export class Lit {
  partial: string;
  /** Indices of the literals the text so far is a prefix of: the first `nAlive` of `alive`. */
  private alive: number[] | null = null;
  private nAlive = 0;
  constructor(
    private readonly lits: readonly string[],
    first: string,
  ) {
    this.partial = first;
  }
  /** LIT_MORE: need more; LIT_FAIL: no literal matches; i: literal i matched completely. */
  step(c: string): number {
    const pos = this.partial.length;
    this.partial += c;
    const code = c.charCodeAt(0);
    const lits = this.lits;
    let alive = this.alive;
    let kept = 0;
    if (alive === null) {
      alive = this.alive = [];
      for (let i = 0; i < lits.length; i++) {
        const l = lits[i]!;
        if (l.charCodeAt(pos) !== code) continue;
        if (l.length === pos + 1) return i;
        alive[kept++] = i;
      }
    } else {
      // Keep, in place, the literals that still match.
      for (let k = 0; k < this.nAlive; k++) {
        const i = alive[k]!;
        const l = lits[i]!;
        if (l.charCodeAt(pos) !== code) continue;
        if (l.length === pos + 1) return i;
        alive[kept++] = i;
      }
    }
    this.nAlive = kept;
    return kept > 0 ? LIT_MORE : LIT_FAIL;
  }
  isPrefixOf(lit: string): boolean {
    return lit.startsWith(this.partial);
  }
}

export const LIT_MORE = -2;
export const LIT_FAIL = -1;

/** Results of nested item scanners (an item inside a tag or a block). */
export const SUB_MORE = 0;
export const SUB_DONE = 1;
/** Done, and the enclosing tag's closing literal was consumed too. */
export const SUB_DONE_OUTER = 2;
export const SUB_REJECT = -1;

export const MAX_NAME = 128;

export function isHws(c: string): boolean {
  return c === " " || c === "\t" || c === "\r";
}

/** Characters of a tool name as models write it (identifiers, dotted and dashed names). */
export function isNameChar(c: string): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c === "_" || c === "-" || c === "." || c === ":";
}

export function isIdentStart(c: string): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c === "_";
}

export function isIdentChar(c: string): boolean {
  return isIdentStart(c) || (c >= "0" && c <= "9");
}

export function isAlnum(c: string): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9");
}

/** Strip the one newline a template puts after an opening value tag and before its closing tag. */
export function trimParamNewlines(v: string): string {
  if (v.startsWith("\r\n")) v = v.slice(2);
  else if (v.startsWith("\n")) v = v.slice(1);
  if (v.endsWith("\r\n")) v = v.slice(0, -2);
  else if (v.endsWith("\n")) v = v.slice(0, -1);
  return v;
}

/**
 * Collects a value up to one of several closing literals (all starting with '<' and containing
 * no other '<'). `step` returns -1 while inside the value, else the index of the literal that
 * ended it.
 */
export class UntilLit {
  value = "";
  private pend = "";
  constructor(private readonly terms: readonly string[]) {}
  step(c: string): number {
    if (this.pend !== "") {
      const p = this.pend + c;
      let any = false;
      for (let i = 0; i < this.terms.length; i++) {
        const t = this.terms[i]!;
        if (t.length >= p.length && t.startsWith(p)) {
          if (t.length === p.length) {
            this.pend = "";
            return i;
          }
          any = true;
        }
      }
      if (any) {
        this.pend = p;
        return -1;
      }
      // Not a terminator: the pending text is part of the value; only the new char can start one.
      this.value += this.pend;
      this.pend = "";
    }
    if (c === "<") this.pend = c;
    else this.value += c;
    return -1;
  }
  get pending(): string {
    return this.pend;
  }
}
