/**
 * Candidate scanners: each one is started by the extractor at a character that may open a call and
 * is then fed the following characters one at a time until it decides. A decision never depends on
 * where the text was split into pieces, only on the characters themselves; "I need more" is the only
 * answer that depends on how much text has arrived. That is what makes streaming equal to whole-text
 * extraction for every split.
 */
import { isWs, JsonScanner, MORE, REJECT, V_CALL, V_CALLS, V_OBJ } from "./json.js";
import { callsFromJsonText, convertParamValue, objectFromJsonText, type RawCall } from "./shape.js";

export interface ScanContext {
  tools: ReadonlySet<string>;
  /** Special tokens are being stripped: drop a `<|python_tag|>` that turns out not to open a call. */
  strip: boolean;
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
  return { calls, refeed, code: 0, drop: 0 };
}

export function reject(refeed = 0, code = 0, drop = 0): Decision {
  return { calls: null, refeed, code, drop };
}

// ---------------------------------------------------------------------------------------------
// Literal matching

/** Matches one of several literals (none a prefix of another) that all start with the same char. */
class Lit {
  partial: string;
  constructor(
    private readonly lits: readonly string[],
    first: string,
  ) {
    this.partial = first;
  }
  /** -2: need more; -1: no literal matches; i: literal i matched completely. */
  step(c: string): number {
    const p = this.partial + c;
    this.partial = p;
    let any = false;
    for (let i = 0; i < this.lits.length; i++) {
      const l = this.lits[i]!;
      if (l.length >= p.length && l.startsWith(p)) {
        if (l.length === p.length) return i;
        any = true;
      }
    }
    return any ? -2 : -1;
  }
  isPrefixOf(lit: string): boolean {
    return lit.startsWith(this.partial);
  }
}

const LIT_MORE = -2;
const LIT_FAIL = -1;

function isHws(c: string): boolean {
  return c === " " || c === "\t" || c === "\r";
}

export const TAG_NAMES: readonly string[] = ["tool_call", "tools", "tool_calls"];
const OPEN_TAGS: readonly string[] = TAG_NAMES.map((t) => `<${t}>`);
const FUNCTION_OPEN = "<function=";
const PYTHON_TAG = "<|python_tag|>";

/** Results of nested item scanners. */
const SUB_MORE = 0;
const SUB_DONE = 1;
/** Done, and the enclosing tag's closing literal was consumed too. */
const SUB_DONE_OUTER = 2;
const SUB_REJECT = -1;

// ---------------------------------------------------------------------------------------------
// Qwen3-Coder / Llama 3.1 `<function=name>` blocks

const F_NAME = 0;
const F_BODY = 1;
const F_LIT = 2;
const F_PNAME = 3;
const F_PVAL = 4;
const F_JSON = 5;
const F_AFTER_JSON = 6;

const PARAM_OPEN = "<parameter=";
const PARAM_CLOSE = "</parameter>";
const FUNCTION_CLOSE = "</function>";
const MAX_NAME = 128;

/** Strip the one newline the template puts after `<parameter=k>` and before `</parameter>`. */
function trimParamNewlines(v: string): string {
  if (v.startsWith("\r\n")) v = v.slice(2);
  else if (v.startsWith("\n")) v = v.slice(1);
  if (v.endsWith("\r\n")) v = v.slice(0, -2);
  else if (v.endsWith("\n")) v = v.slice(0, -1);
  return v;
}

/**
 * Scans what follows `<function=`: `name>` then either `<parameter=k>v</parameter>`... or a JSON
 * object, then `</function>`. A missing `</parameter>` is tolerated (the next `<parameter=`,
 * `</function>` or the enclosing closing tag ends the value).
 */
export class FunctionScanner {
  rejectRefeed = 1;
  private st = F_NAME;
  private name = "";
  private readonly args: Record<string, unknown> = {};
  private params = 0;
  private pname = "";
  private pval = "";
  private pend = "";
  private lit: Lit | null = null;
  private json: JsonScanner | null = null;
  private hasJson = false;
  private readonly terms: readonly string[];

  constructor(
    private readonly ctx: ScanContext,
    private readonly outerClose: string | null,
  ) {
    this.terms = outerClose ? [PARAM_CLOSE, PARAM_OPEN, FUNCTION_CLOSE, outerClose] : [PARAM_CLOSE, PARAM_OPEN, FUNCTION_CLOSE];
  }

  result(): RawCall {
    return { name: this.name, args: this.args };
  }

  private fail(refeed: number): number {
    this.rejectRefeed = refeed;
    return SUB_REJECT;
  }

  step(c: string): number {
    switch (this.st) {
      case F_NAME:
        if (c === ">") {
          const name = this.name.trim();
          if (!this.ctx.tools.has(name)) return this.fail(1);
          this.name = name;
          this.st = F_BODY;
          return SUB_MORE;
        }
        if (c === "\n" || c === "<" || this.name.length >= MAX_NAME) return this.fail(1);
        this.name += c;
        return SUB_MORE;
      case F_BODY:
        if (isWs(c)) return SUB_MORE;
        if (c === "<") {
          this.lit = new Lit(this.outerClose ? [PARAM_OPEN, FUNCTION_CLOSE, this.outerClose] : [PARAM_OPEN, FUNCTION_CLOSE], c);
          this.st = F_LIT;
          return SUB_MORE;
        }
        if (c === "{" && this.params === 0 && !this.hasJson) {
          this.json = new JsonScanner(this.ctx.tools, V_OBJ);
          this.json.step(c);
          this.st = F_JSON;
          return SUB_MORE;
        }
        return this.fail(1);
      case F_LIT: {
        const lit = this.lit!;
        const r = lit.step(c);
        if (r === LIT_MORE) return SUB_MORE;
        if (r === LIT_FAIL) return this.fail(lit.partial.length);
        const matched = lit.partial;
        this.lit = null;
        if (matched === PARAM_OPEN) {
          if (this.hasJson) return this.fail(matched.length);
          this.st = F_PNAME;
          this.pname = "";
          return SUB_MORE;
        }
        return matched === FUNCTION_CLOSE ? SUB_DONE : SUB_DONE_OUTER;
      }
      case F_PNAME:
        if (c === ">") {
          if (this.pname.trim() === "") return this.fail(1);
          this.st = F_PVAL;
          this.pval = "";
          this.pend = "";
          return SUB_MORE;
        }
        if (c === "\n" || c === "<" || this.pname.length >= MAX_NAME) return this.fail(1);
        this.pname += c;
        return SUB_MORE;
      case F_PVAL:
        return this.valueChar(c);
      case F_JSON: {
        const r = this.json!.step(c);
        if (r === MORE) return SUB_MORE;
        if (r === REJECT) return this.fail(1);
        const obj = objectFromJsonText(this.json!.text);
        if (obj === null) return this.fail(0);
        Object.assign(this.args, obj);
        this.hasJson = true;
        this.json = null;
        this.st = F_AFTER_JSON;
        return SUB_MORE;
      }
      case F_AFTER_JSON:
        if (isWs(c)) return SUB_MORE;
        if (c === "<") {
          this.lit = new Lit(this.outerClose ? [FUNCTION_CLOSE, this.outerClose] : [FUNCTION_CLOSE], c);
          this.st = F_LIT;
          return SUB_MORE;
        }
        return this.fail(1);
      default:
        return this.fail(1);
    }
  }

  private finishParam(): void {
    this.args[this.pname.trim()] = convertParamValue(trimParamNewlines(this.pval));
    this.params++;
    this.pval = "";
  }

  private valueChar(c: string): number {
    if (this.pend !== "") {
      const p = this.pend + c;
      let any = false;
      for (const t of this.terms) {
        if (t.length >= p.length && t.startsWith(p)) {
          if (t.length === p.length) {
            this.pend = "";
            this.finishParam();
            if (t === PARAM_CLOSE) this.st = F_BODY;
            else if (t === PARAM_OPEN) {
              this.st = F_PNAME;
              this.pname = "";
            } else return t === FUNCTION_CLOSE ? SUB_DONE : SUB_DONE_OUTER;
            return SUB_MORE;
          }
          any = true;
        }
      }
      if (any) {
        this.pend = p;
        return SUB_MORE;
      }
      // Not a terminator: the pending text is part of the value. No terminator has '<' after its
      // first character, so only the new character can start a new one.
      this.pval += this.pend;
      this.pend = "";
    }
    if (c === "<") this.pend = c;
    else this.pval += c;
    return SUB_MORE;
  }

  /** Can the block end here, with the text (a closing tag at most) missing? */
  eofOk(): boolean {
    if (this.st === F_BODY || this.st === F_AFTER_JSON) return this.params > 0 || this.hasJson;
    if (this.st === F_LIT) {
      const lit = this.lit!;
      return (this.params > 0 || this.hasJson) && (lit.isPrefixOf(FUNCTION_CLOSE) || (this.outerClose !== null && lit.isPrefixOf(this.outerClose)));
    }
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// `<tool_call>` / `<tools>` / `<tool_calls>` tag blocks

const T_BODY = 0;
const T_LIT = 1;
const T_JSON = 2;
const T_FUNC = 3;

/**
 * Scans what follows an opening tag: one or more call items (JSON object, JSON array of call
 * objects, `<function=...>` block) separated by whitespace or commas, then the closing tag.
 */
export class TagScanner {
  rejectRefeed = 1;
  readonly calls: RawCall[] = [];
  private st = T_BODY;
  private lit: Lit | null = null;
  private json: JsonScanner | null = null;
  private fn: FunctionScanner | null = null;
  private readonly close: string;

  constructor(
    private readonly ctx: ScanContext,
    tag: string,
  ) {
    this.close = `</${tag}>`;
  }

  private fail(refeed: number): number {
    this.rejectRefeed = refeed;
    return SUB_REJECT;
  }

  step(c: string): number {
    switch (this.st) {
      case T_BODY:
        if (isWs(c) || (c === "," && this.calls.length > 0)) return SUB_MORE;
        if (c === "{" || c === "[") {
          this.json = new JsonScanner(this.ctx.tools, c === "{" ? V_CALL : V_CALLS);
          this.json.step(c);
          this.st = T_JSON;
          return SUB_MORE;
        }
        if (c === "<") {
          this.lit = new Lit([this.close, FUNCTION_OPEN], c);
          this.st = T_LIT;
          return SUB_MORE;
        }
        return this.fail(1);
      case T_LIT: {
        const lit = this.lit!;
        const r = lit.step(c);
        if (r === LIT_MORE) return SUB_MORE;
        // A failed literal may be another opening tag: process it again.
        if (r === LIT_FAIL) return this.fail(lit.partial.length);
        this.lit = null;
        if (lit.partial === this.close) return this.calls.length > 0 ? SUB_DONE : this.fail(0);
        this.fn = new FunctionScanner(this.ctx, this.close);
        this.st = T_FUNC;
        return SUB_MORE;
      }
      case T_JSON: {
        const json = this.json!;
        const r = json.step(c);
        if (r === MORE) return SUB_MORE;
        if (r === REJECT) return this.fail(1);
        const calls = callsFromJsonText(json.text, this.ctx.tools);
        if (calls === null) return this.fail(0);
        this.calls.push(...calls);
        this.json = null;
        this.st = T_BODY;
        return SUB_MORE;
      }
      case T_FUNC: {
        const fn = this.fn!;
        const r = fn.step(c);
        if (r === SUB_MORE) return SUB_MORE;
        if (r === SUB_REJECT) return this.fail(fn.rejectRefeed);
        this.calls.push(fn.result());
        this.fn = null;
        this.st = T_BODY;
        return r === SUB_DONE_OUTER ? SUB_DONE : SUB_MORE;
      }
      default:
        return this.fail(1);
    }
  }

  /** At the end of the reply: true (and `calls` complete) when a missing closing tag is all that is missing. */
  eofOk(): boolean {
    switch (this.st) {
      case T_BODY:
        return this.calls.length > 0;
      case T_LIT:
        return this.calls.length > 0 && this.lit!.isPrefixOf(this.close);
      case T_FUNC:
        if (!this.fn!.eofOk()) return false;
        this.calls.push(this.fn!.result());
        this.fn = null;
        this.st = T_BODY;
        return true;
      default:
        return false;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Candidates started by the extractor

/** A `{` (or the `[` of an array) at the start of a line: the JSON, then only blanks up to the line end. */
export class LineJsonCandidate implements Candidate {
  private readonly json: JsonScanner;
  private calls: RawCall[] | null = null;
  private trailing = 0;

  constructor(
    private readonly ctx: ScanContext,
    first: string,
  ) {
    this.json = new JsonScanner(ctx.tools, first === "{" ? V_CALL : V_CALLS);
    this.json.step(first);
  }

  /** Feed an already-held character (used by BracketCandidate). */
  step(c: string): Decision | null {
    if (this.calls === null) {
      const r = this.json.step(c);
      if (r === MORE) return null;
      if (r === REJECT) return reject(1);
      const calls = callsFromJsonText(this.json.text, this.ctx.tools);
      if (calls === null) return reject(0);
      this.calls = calls;
      return null;
    }
    if (isHws(c)) {
      this.trailing++;
      return null;
    }
    if (c === "\n") return accept(this.calls, this.trailing + 1);
    return reject(this.trailing + 1);
  }

  eof(): Decision {
    return this.calls !== null ? accept(this.calls, this.trailing) : reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}

const TOOL_CALLS_LIT = "[TOOL_CALLS]";
const ARGS_LIT = "[ARGS]";
const CALL_ID_LIT = "[CALL_ID]";

const M_LIT = 0;
const M_WS = 1;
const M_JSON = 2;
const M_NAME = 3;
const M_NLIT = 4;
const M_ID = 5;
const M_ARGS_WS = 6;
const M_ARGS = 7;

function isNameChar(c: string): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c === "_" || c === "-" || c === "." || c === ":";
}

function isAlnum(c: string): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9");
}

/**
 * A `[`: Mistral's `[TOOL_CALLS]` anywhere (followed by a JSON array/object, or by
 * `name[ARGS]{...}` / `name[CALL_ID]id[ARGS]{...}`), or, at the start of a line, a JSON array of
 * call objects.
 */
export class BracketCandidate implements Candidate {
  private line: LineJsonCandidate | null = null;
  private st = M_LIT;
  private first = true;
  private readonly lit = new Lit([TOOL_CALLS_LIT], "[");
  private nlit: Lit | null = null;
  private json: JsonScanner | null = null;
  private name = "";
  private id = "";

  constructor(
    private readonly ctx: ScanContext,
    private readonly atLineStart: boolean,
  ) {}

  step(c: string): Decision | null {
    if (this.line) return this.line.step(c);
    if (this.first) {
      this.first = false;
      if (c !== "T") {
        if (!this.atLineStart) return reject(1);
        this.line = new LineJsonCandidate(this.ctx, "[");
        return this.line.step(c);
      }
    }
    switch (this.st) {
      case M_LIT: {
        const r = this.lit.step(c);
        if (r === LIT_MORE) return null;
        if (r === LIT_FAIL) return reject(1);
        this.st = M_WS;
        return null;
      }
      case M_WS:
        if (isWs(c)) return null;
        if (c === "[" || c === "{") {
          this.json = new JsonScanner(this.ctx.tools, c === "[" ? V_CALLS : V_CALL);
          this.json.step(c);
          this.st = M_JSON;
          return null;
        }
        if (isNameChar(c)) {
          this.name = c;
          this.st = M_NAME;
          return null;
        }
        return reject(1);
      case M_JSON: {
        const r = this.json!.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return reject(1);
        const calls = callsFromJsonText(this.json!.text, this.ctx.tools);
        return calls === null ? reject(0) : accept(calls);
      }
      case M_NAME:
        if (isNameChar(c) && this.name.length < MAX_NAME) {
          this.name += c;
          return null;
        }
        if (!this.ctx.tools.has(this.name)) return reject(1);
        if (c === "[") {
          this.nlit = new Lit([ARGS_LIT, CALL_ID_LIT], c);
          this.st = M_NLIT;
          return null;
        }
        if (c === "{") return this.startArgs(c);
        return reject(1);
      case M_NLIT: {
        const lit = this.nlit!;
        const r = lit.step(c);
        if (r === LIT_MORE) return null;
        if (r === LIT_FAIL) return reject(lit.partial.length);
        this.nlit = null;
        this.st = lit.partial === ARGS_LIT ? M_ARGS_WS : M_ID;
        return null;
      }
      case M_ID:
        if (isAlnum(c) && this.id.length < 64) {
          this.id += c;
          return null;
        }
        if (c === "[") {
          this.nlit = new Lit([ARGS_LIT], c);
          this.st = M_NLIT;
          return null;
        }
        return reject(1);
      case M_ARGS_WS:
        if (isWs(c)) return null;
        if (c === "{") return this.startArgs(c);
        return reject(1);
      case M_ARGS: {
        const r = this.json!.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return reject(1);
        const args = objectFromJsonText(this.json!.text);
        return args === null ? reject(0) : accept([{ name: this.name, args }]);
      }
      default:
        return reject(1);
    }
  }

  private startArgs(c: string): null {
    this.json = new JsonScanner(this.ctx.tools, V_OBJ);
    this.json.step(c);
    this.st = M_ARGS;
    return null;
  }

  eof(): Decision {
    if (this.line) return this.line.eof();
    return reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}

const L_LIT = 0;
const L_TAG = 1;
const L_FUNC = 2;
const L_PY = 3;

const P_START = 0;
const P_JSON = 1;
const P_AFTER = 2;
const P_SEMI = 3;
const P_LIT = 4;
const PY_END: readonly string[] = ["<|eom_id|>", "<|eot_id|>"];

/**
 * A `<`: `<tool_call>` / `<tools>` / `<tool_calls>` blocks, a bare `<function=name>` block, or
 * Llama's `<|python_tag|>` followed by JSON call object(s) (separated by `;`), optionally ended by
 * `<|eom_id|>` / `<|eot_id|>`.
 */
export class AngleCandidate implements Candidate {
  private st = L_LIT;
  private readonly lit = new Lit([...OPEN_TAGS, FUNCTION_OPEN, PYTHON_TAG], "<");
  private tag: TagScanner | null = null;
  private fn: FunctionScanner | null = null;
  // python_tag state
  private pst = P_START;
  private json: JsonScanner | null = null;
  private readonly pcalls: RawCall[] = [];
  private pending = 0;
  private plit: Lit | null = null;

  constructor(private readonly ctx: ScanContext) {}

  step(c: string): Decision | null {
    switch (this.st) {
      case L_LIT: {
        const r = this.lit.step(c);
        if (r === LIT_MORE) return null;
        if (r === LIT_FAIL) return reject(1);
        const m = this.lit.partial;
        if (m === FUNCTION_OPEN) {
          this.fn = new FunctionScanner(this.ctx, null);
          this.st = L_FUNC;
        } else if (m === PYTHON_TAG) {
          this.st = L_PY;
        } else {
          this.tag = new TagScanner(this.ctx, m.slice(1, -1));
          this.st = L_TAG;
        }
        return null;
      }
      case L_TAG: {
        const tag = this.tag!;
        const r = tag.step(c);
        if (r === SUB_MORE) return null;
        if (r === SUB_REJECT) return reject(tag.rejectRefeed);
        return accept(tag.calls);
      }
      case L_FUNC: {
        const fn = this.fn!;
        const r = fn.step(c);
        if (r === SUB_MORE) return null;
        if (r === SUB_REJECT) return reject(fn.rejectRefeed);
        return accept([fn.result()]);
      }
      case L_PY:
        return this.pyStep(c);
      default:
        return reject(1);
    }
  }

  private pyReject(refeed: number): Decision {
    return reject(refeed, 0, this.ctx.strip ? PYTHON_TAG.length : 0);
  }

  private pyStep(c: string): Decision | null {
    switch (this.pst) {
      case P_START:
        if (isWs(c)) return null;
        if (c === "{") return this.pyJson(c);
        return this.pyReject(1);
      case P_JSON: {
        const json = this.json!;
        const r = json.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return this.pyReject(1);
        const calls = callsFromJsonText(json.text, this.ctx.tools);
        if (calls === null) return this.pyReject(0);
        this.pcalls.push(...calls);
        this.json = null;
        this.pst = P_AFTER;
        this.pending = 0;
        return null;
      }
      case P_AFTER:
      case P_SEMI:
        if (isWs(c)) {
          this.pending++;
          return null;
        }
        if (c === ";" && this.pst === P_AFTER) {
          this.pending++;
          this.pst = P_SEMI;
          return null;
        }
        if (c === "{") return this.pyJson(c);
        if (c === "<" && this.pst === P_AFTER) {
          this.plit = new Lit(PY_END, c);
          this.pst = P_LIT;
          return null;
        }
        // Whatever follows is not part of the call.
        return accept(this.pcalls, this.pending + 1);
      case P_LIT: {
        const lit = this.plit!;
        const r = lit.step(c);
        if (r === LIT_MORE) return null;
        if (r === LIT_FAIL) return accept(this.pcalls, this.pending + lit.partial.length);
        return accept(this.pcalls);
      }
      default:
        return this.pyReject(1);
    }
  }

  private pyJson(c: string): null {
    this.json = new JsonScanner(this.ctx.tools, V_CALL);
    this.json.step(c);
    this.pst = P_JSON;
    return null;
  }

  eof(): Decision {
    switch (this.st) {
      case L_TAG:
        return this.tag!.eofOk() ? accept(this.tag!.calls) : reject(0);
      case L_FUNC:
        return this.fn!.eofOk() ? accept([this.fn!.result()]) : reject(0);
      case L_PY:
        if (this.pst === P_AFTER || this.pst === P_SEMI) return accept(this.pcalls, this.pending);
        if (this.pst === P_LIT) return accept(this.pcalls, this.pending + this.plit!.partial.length);
        return this.pyReject(0);
      default:
        return reject(0);
    }
  }

  codeOnReject(): number {
    return 0;
  }
}

const CALL_LANGS: ReadonlySet<string> = new Set(["", "json", "jsonc", "json5", "tool_call", "tool_calls", "tool", "xml"]);

const K_TICKS = 0;
const K_INFO = 1;
const K_BODY = 2;
const K_JSON = 3;
const K_LIT = 4;
const K_TAG = 5;
const K_FUNC = 6;
const K_CLOSE_TICKS = 7;
const K_CLOSE_WS = 8;

const MAX_INFO = 100;

/**
 * Three or more backticks at the start of a line. With an info string of json / jsonc / json5 /
 * tool_call / tool_calls / tool / xml or none, the fence is a call block when its content is ONLY
 * call items (JSON call objects, JSON arrays of them, `<tool_call>`-style tags, `<function=>`
 * blocks) and it is closed by a fence line (or the reply ends after complete items). Anything
 * else makes it a code block whose content is never searched for calls.
 */
export class FenceCandidate implements Candidate {
  private st = K_TICKS;
  private ticks = 1;
  private info = "";
  private lineStart = false;
  private closeTicks = 0;
  private trailing = 0;
  private readonly calls: RawCall[] = [];
  private json: JsonScanner | null = null;
  private lit: Lit | null = null;
  private tag: TagScanner | null = null;
  private fn: FunctionScanner | null = null;

  constructor(private readonly ctx: ScanContext) {}

  codeOnReject(): number {
    return this.st === K_TICKS ? 0 : this.ticks;
  }

  private toCode(refeed: number): Decision {
    return reject(refeed, this.ticks);
  }

  step(c: string): Decision | null {
    switch (this.st) {
      case K_TICKS:
        if (c === "`") {
          this.ticks++;
          return null;
        }
        if (this.ticks < 3) return reject(1);
        this.st = K_INFO;
        return this.step(c);
      case K_INFO:
        if (c === "\n") {
          const lang = this.info.trim().toLowerCase();
          if (!CALL_LANGS.has(lang)) return this.toCode(0);
          this.st = K_BODY;
          this.lineStart = true;
          return null;
        }
        // Backticks in the info string: not a fence at all (inline code).
        if (c === "`") return reject(1);
        this.info += c;
        if (this.info.length > MAX_INFO) return this.toCode(0);
        return null;
      case K_BODY:
        if (c === "\n") {
          this.lineStart = true;
          return null;
        }
        if (isHws(c)) return null;
        if (c === "," && this.calls.length > 0) {
          this.lineStart = false;
          return null;
        }
        if (c === "`" && this.lineStart) {
          this.closeTicks = 1;
          this.st = K_CLOSE_TICKS;
          return null;
        }
        this.lineStart = false;
        if (c === "{" || c === "[") {
          this.json = new JsonScanner(this.ctx.tools, c === "{" ? V_CALL : V_CALLS);
          this.json.step(c);
          this.st = K_JSON;
          return null;
        }
        if (c === "<") {
          this.lit = new Lit([...OPEN_TAGS, FUNCTION_OPEN], c);
          this.st = K_LIT;
          return null;
        }
        return this.toCode(1);
      case K_JSON: {
        const json = this.json!;
        const r = json.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return this.toCode(1);
        const calls = callsFromJsonText(json.text, this.ctx.tools);
        if (calls === null) return this.toCode(0);
        this.calls.push(...calls);
        this.json = null;
        this.st = K_BODY;
        return null;
      }
      case K_LIT: {
        const lit = this.lit!;
        const r = lit.step(c);
        if (r === LIT_MORE) return null;
        if (r === LIT_FAIL) return this.toCode(lit.partial.length);
        this.lit = null;
        if (lit.partial === FUNCTION_OPEN) {
          this.fn = new FunctionScanner(this.ctx, null);
          this.st = K_FUNC;
        } else {
          this.tag = new TagScanner(this.ctx, lit.partial.slice(1, -1));
          this.st = K_TAG;
        }
        return null;
      }
      case K_TAG: {
        const tag = this.tag!;
        const r = tag.step(c);
        if (r === SUB_MORE) return null;
        if (r === SUB_REJECT) return this.toCode(tag.rejectRefeed);
        this.calls.push(...tag.calls);
        this.tag = null;
        this.st = K_BODY;
        return null;
      }
      case K_FUNC: {
        const fn = this.fn!;
        const r = fn.step(c);
        if (r === SUB_MORE) return null;
        if (r === SUB_REJECT) return this.toCode(fn.rejectRefeed);
        this.calls.push(fn.result());
        this.fn = null;
        this.st = K_BODY;
        return null;
      }
      case K_CLOSE_TICKS:
        if (c === "`") {
          this.closeTicks++;
          return null;
        }
        // Fewer backticks than the opening fence: content, and not a call.
        if (this.closeTicks < this.ticks) return this.toCode(1);
        this.st = K_CLOSE_WS;
        this.trailing = 0;
        return this.step(c);
      case K_CLOSE_WS:
        if (isHws(c)) {
          this.trailing++;
          return null;
        }
        if (c === "\n") {
          // The fence is closed: a fence without calls is plain text and normal scanning resumes.
          return this.calls.length > 0 ? accept(this.calls, this.trailing + 1) : reject(this.trailing + 1);
        }
        // "```x" inside the block is not a closing fence: content that is not a call.
        return this.toCode(1);
      default:
        return this.toCode(1);
    }
  }

  eof(): Decision {
    if (this.calls.length > 0) {
      switch (this.st) {
        case K_BODY:
          return accept(this.calls);
        case K_CLOSE_TICKS:
          if (this.closeTicks >= this.ticks) return accept(this.calls);
          break;
        case K_CLOSE_WS:
          return accept(this.calls, this.trailing);
        case K_TAG:
          if (this.tag!.eofOk()) return accept([...this.calls, ...this.tag!.calls]);
          break;
        case K_FUNC:
          if (this.fn!.eofOk()) return accept([...this.calls, this.fn!.result()]);
          break;
        default:
          break;
      }
    }
    return reject(0, this.st === K_TICKS ? 0 : this.ticks);
  }
}
