/**
 * What every candidate scanner shares. A candidate is started by the extractor at a character that
 * may open a call and is then fed the following characters one at a time until it decides. A
 * decision never depends on where the text was split into pieces, only on the characters
 * themselves; "I need more" is the only answer that depends on how much text has arrived. That is
 * what makes streaming equal to whole-text extraction for every split.
 */
import { isWs, JsonScanner, MORE, REJECT, V_OBJ } from "../json.js";
import { objectFromJsonText, type RawCall } from "../shape.js";

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
  /**
   * After a rejection: the refed text starts with a `{` that may open a JSON call object wherever it
   * stands (it follows an invalid JSON object on the same line).
   */
  jsonNext?: boolean;
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
  return (
    (c >= "a" && c <= "z") ||
    (c >= "A" && c <= "Z") ||
    (c >= "0" && c <= "9") ||
    c === "_" ||
    c === "-" ||
    c === "." ||
    c === ":"
  );
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

/** A scanner for an arguments object, already fed its opening `{`. */
export function objectScanner(tools: ReadonlySet<string>, c: string): JsonScanner {
  const json = new JsonScanner(tools, V_OBJ);
  json.step(c);
  return json;
}

/**
 * The part of a nested item scanner (a call item inside a tag or a block) that every such scanner
 * shares: the call being built, the refeed of a rejection, and an arguments object.
 */
export abstract class SubScanner {
  rejectRefeed = 1;
  protected name = "";
  protected readonly args: Record<string, unknown> = {};
  protected json: JsonScanner | null = null;

  constructor(protected readonly ctx: ScanContext) {}

  result(): RawCall {
    return { name: this.name, args: this.args };
  }

  protected fail(refeed: number): number {
    this.rejectRefeed = refeed;
    return SUB_REJECT;
  }

  /** Feeds the arguments object; SUB_DONE once it is complete and merged into the arguments. */
  protected jsonStep(c: string): number {
    const r = this.json!.step(c);
    if (r === MORE) return SUB_MORE;
    if (r === REJECT) return this.fail(1);
    const obj = objectFromJsonText(this.json!.text);
    if (obj === null) return this.fail(0);
    Object.assign(this.args, obj);
    return SUB_DONE;
  }
}

/** Token literals of a token-delimited call block (DeepSeek, Kimi). */
export interface BlockTokens {
  /** Opens one call. */
  callBegin: readonly string[];
  /** Closes one call. */
  callEnd: readonly string[];
  /** Closes the block. */
  blockEnd: readonly string[];
  /** `callBegin` then `blockEnd`: what may follow a call. */
  next: readonly string[];
}

/** States every token block has; a subclass numbers its own from TB_OWN. */
export const TB_WS0 = 0;
export const TB_LIT = 1;
export const TB_JSON = 2;
export const TB_AFTER = 3;
export const TB_BETWEEN = 4;
export const TB_OWN = 5;

/** What a matched literal leads to; a subclass numbers its own from TL_OWN. */
export const TL_BEGIN = 0;
export const TL_END = 1;
export const TL_NEXT = 2;
export const TL_OWN = 3;

/**
 * A block of token-delimited calls: `begin` name … arguments-object `end`, repeated (blanks between
 * calls allowed), then an optional block end. All-or-nothing; the block end may be missing when the
 * reply ends or other text follows. A subclass scans the part between a call's begin token and
 * its arguments object (its own states and literals).
 */
export abstract class TokenBlockCandidate implements Candidate {
  protected st = TB_WS0;
  protected lit: Lit | null = null;
  protected litKind = TL_BEGIN;
  protected name = "";
  protected json: JsonScanner | null = null;
  /** The state after the arguments object. */
  protected afterJson = TB_AFTER;
  private args: Record<string, unknown> | null = null;
  private readonly calls: RawCall[] = [];
  private pending = 0;

  constructor(
    protected readonly ctx: ScanContext,
    private readonly toks: BlockTokens,
  ) {}

  /** A state of the subclass (TB_OWN and above). */
  protected abstract stepOwn(c: string): Decision | null;
  /** A literal of kind TL_BEGIN or of the subclass's own kinds matched completely. */
  protected abstract matched(kind: number): Decision | null;

  protected expect(lits: readonly string[], kind: number, c: string): null {
    this.lit = new Lit(lits, c);
    this.litKind = kind;
    this.st = TB_LIT;
    return null;
  }

  /** The arguments object starts here (or the block is not a call). */
  protected startJson(c: string): Decision | null {
    if (c !== "{") return reject(1);
    this.json = objectScanner(this.ctx.tools, c);
    this.st = TB_JSON;
    return null;
  }

  step(c: string): Decision | null {
    switch (this.st) {
      case TB_WS0:
        if (isWs(c)) return null;
        return c === "<" ? this.expect(this.toks.callBegin, TL_BEGIN, c) : reject(1);
      case TB_LIT:
        return this.litStep(c);
      case TB_JSON: {
        const r = this.json!.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return reject(1);
        this.args = objectFromJsonText(this.json!.text);
        if (this.args === null) return reject(0);
        this.st = this.afterJson;
        return null;
      }
      case TB_AFTER:
        if (isWs(c)) return null;
        return c === "<" ? this.expect(this.toks.callEnd, TL_END, c) : reject(1);
      case TB_BETWEEN:
        if (isWs(c)) {
          this.pending++;
          return null;
        }
        if (c === "<") return this.expect(this.toks.next, TL_NEXT, c);
        return accept(this.calls, this.pending + 1);
      default:
        return this.stepOwn(c);
    }
  }

  private litStep(c: string): Decision | null {
    const lit = this.lit!;
    const r = lit.step(c);
    if (r === LIT_MORE) return null;
    if (r === LIT_FAIL)
      return this.litKind === TL_NEXT
        ? accept(this.calls, this.pending + lit.partial.length)
        : reject(lit.partial.length);
    this.lit = null;
    switch (this.litKind) {
      case TL_END:
        this.calls.push({ name: this.name, args: this.args! });
        this.args = null;
        this.pending = 0;
        this.st = TB_BETWEEN;
        return null;
      case TL_NEXT:
        if (this.toks.blockEnd.includes(lit.partial)) return accept(this.calls);
        return this.matched(TL_BEGIN);
      default:
        return this.matched(this.litKind);
    }
  }

  /** At the end of the reply, is the current call complete but for its end token? */
  protected completeAtEof(): boolean {
    return this.st === TB_AFTER || (this.st === TB_LIT && this.litKind === TL_END);
  }

  eof(): Decision {
    if (this.completeAtEof() && this.args !== null)
      return accept([...this.calls, { name: this.name, args: this.args }]);
    if (this.st === TB_BETWEEN) return accept(this.calls, this.pending);
    if (this.st === TB_LIT && this.litKind === TL_NEXT)
      return accept(this.calls, this.pending + this.lit!.partial.length);
    return reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}
