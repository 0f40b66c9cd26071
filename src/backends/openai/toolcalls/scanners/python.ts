/**
 * Pythonic tool calls (Llama 3.2 / Llama 4, vLLM `pythonic` / `llama4_pythonic`, SGLang
 * `pythonic`): `[get_weather(city="San Francisco", metric="celsius"), get_time()]`, and the Llama
 * 3.1 builtin form `brave_search.call(query="…")`.
 *
 * Arguments are keyword arguments whose values are Python literals: strings in either quote with
 * Python escapes (an `r`/`u` prefix allowed), integers and floats (`_` separators, exponents,
 * hexadecimal), `True` / `False` / `None` (and JSON's `true` / `false` / `null`), lists, tuples
 * and dicts with string or number keys, nested. Lenient where models slip (as SGLang's LFM2 detector
 * is): a raw newline inside a string, a zero-padded integer, a Python keyword as a parameter name.
 * Anything else (positional arguments, expressions, names, sets, bytes, f-strings, a repeated
 * keyword, a non-finite number) makes the call malformed: a lone call stays text, and in a list the
 * call is dropped and its well-formed siblings kept (see PyCalls).
 */
import type { RawCall } from "../shape.js";
import { isIdentChar, isIdentStart, isNameChar, isWs, MAX_NAME } from "./common.js";

export const PY_MORE = 0;
/** The value is complete and the character was its last one. */
export const PY_DONE = 1;
/** The value was complete before this character, which is not part of it. */
export const PY_DONE_BEFORE = 2;
export const PY_REJECT = -1;

const V_VALUE = 0;
const V_STR = 1;
const V_NUM = 2;
const V_WORD = 3;
const V_AFTER = 4;
const V_COLON = 5;
const V_SIGN = 6;

const MAX_DEPTH = 64;

interface Frame {
  close: string;
  items: unknown[] | null;
  obj: Record<string, unknown> | null;
  /** Dict: a key has been read and waits for its value. */
  key: string | null;
  commas: number;
}

const SIMPLE_ESC: Readonly<Record<string, string>> = {
  "\\": "\\",
  "'": "'",
  '"': '"',
  a: "\x07",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
  v: "\v",
};
const HEX_LEN: Readonly<Record<string, number>> = { x: 2, u: 4, U: 8 };
/** Decimal numbers; zero-padded integers (`07`, a SyntaxError in Python) are read as decimals, as SGLang's LFM2 detector does. */
const NUM_RE = /^[+-]?(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d(?:_?\d)*)?$/;
const HEX_RE = /^[+-]?0[xX](?:_?[0-9a-fA-F])+$/;
const WORDS: Readonly<Record<string, unknown>> = {
  True: true,
  False: false,
  None: null,
  true: true,
  false: false,
  null: null,
};

function isHexDigit(c: string): boolean {
  return (c >= "0" && c <= "9") || (c >= "a" && c <= "f") || (c >= "A" && c <= "F");
}

/** One Python literal, fed character by character. */
export class PyValue {
  value: unknown = undefined;
  private st = V_VALUE;
  private readonly stack: Frame[] = [];
  private tok = "";
  // string state
  private quote = "";
  private raw = false;
  private str = "";
  private esc = false;
  private escKind = "";
  private escBuf = "";

  step(c: string): number {
    switch (this.st) {
      case V_VALUE:
        if (isWs(c) && this.stack.length > 0) return PY_MORE;
        return this.startValue(c);
      case V_STR:
        return this.strChar(c);
      case V_NUM:
        if (
          isIdentChar(c) ||
          c === "." ||
          ((c === "+" || c === "-") && /[eE]$/.test(this.tok) && !/^[+-]?0[xX]/.test(this.tok))
        ) {
          this.tok += c;
          return this.tok.length > 400 ? PY_REJECT : PY_MORE;
        }
        return this.endNumber(c);
      case V_WORD:
        if (isIdentChar(c)) {
          this.tok += c;
          return this.tok.length > 16 ? PY_REJECT : PY_MORE;
        }
        // A prefixed string: r'…', u"…".
        if (
          (c === "'" || c === '"') &&
          (this.tok === "r" || this.tok === "R" || this.tok === "u" || this.tok === "U")
        ) {
          this.beginString(c, this.tok === "r" || this.tok === "R");
          return PY_MORE;
        }
        if (!Object.hasOwn(WORDS, this.tok)) return PY_REJECT;
        return this.completeBefore(WORDS[this.tok], c);
      case V_SIGN:
        if ((c >= "0" && c <= "9") || c === ".") {
          this.st = V_NUM;
          this.tok += c;
          return PY_MORE;
        }
        return PY_REJECT;
      case V_AFTER:
        return this.afterChar(c);
      case V_COLON:
        if (isWs(c)) return PY_MORE;
        if (c !== ":") return PY_REJECT;
        this.st = V_VALUE;
        return PY_MORE;
      default:
        return PY_REJECT;
    }
  }

  private startValue(c: string): number {
    if (c === "'" || c === '"') {
      this.beginString(c, false);
      return PY_MORE;
    }
    if ((c >= "0" && c <= "9") || c === ".") {
      this.st = V_NUM;
      this.tok = c;
      return PY_MORE;
    }
    if (c === "-" || c === "+") {
      this.st = V_SIGN;
      this.tok = c;
      return PY_MORE;
    }
    if (isIdentStart(c)) {
      this.st = V_WORD;
      this.tok = c;
      return PY_MORE;
    }
    if (c === "[" || c === "(" || c === "{") {
      if (this.stack.length >= MAX_DEPTH) return PY_REJECT;
      const close = c === "[" ? "]" : c === "(" ? ")" : "}";
      this.stack.push({ close, items: c === "{" ? null : [], obj: c === "{" ? {} : null, key: null, commas: 0 });
      this.st = V_AFTER; // an empty container may close at once
      this.openPending = true;
      return PY_MORE;
    }
    return PY_REJECT;
  }

  /** Just after an opening bracket or a comma: a value or the closing bracket may come. */
  private openPending = false;

  private afterChar(c: string): number {
    if (isWs(c)) return PY_MORE;
    const top = this.stack[this.stack.length - 1]!;
    if (this.openPending) {
      this.openPending = false;
      if (c === top.close) return this.closeTop();
      this.st = V_VALUE;
      return this.startValue(c);
    }
    if (c === ",") {
      top.commas++;
      this.openPending = true;
      return PY_MORE;
    }
    if (c === top.close) return this.closeTop();
    return PY_REJECT;
  }

  private closeTop(): number {
    const f = this.stack.pop()!;
    this.openPending = false;
    if (f.obj && f.key !== null) return PY_REJECT;
    let v: unknown = f.obj ?? f.items;
    // `(x)` is x itself; `(x,)` and `()` are tuples.
    if (f.close === ")" && f.items!.length === 1 && f.commas === 0) v = f.items![0];
    return this.complete(v);
  }

  private beginString(q: string, raw: boolean): void {
    this.st = V_STR;
    this.quote = q;
    this.raw = raw;
    this.str = "";
    this.esc = false;
    this.escKind = "";
  }

  private strChar(c: string): number {
    if (this.escKind !== "") return this.escDigits(c);
    if (this.esc) {
      this.esc = false;
      if (this.raw) {
        this.str += "\\" + c;
        return PY_MORE;
      }
      if (c === "\n") return PY_MORE; // line continuation
      const simple = SIMPLE_ESC[c];
      if (simple !== undefined) {
        this.str += simple;
        return PY_MORE;
      }
      if (c in HEX_LEN || (c >= "0" && c <= "7")) {
        this.escKind = c >= "0" && c <= "7" ? "o" : c;
        this.escBuf = c >= "0" && c <= "7" ? c : "";
        return PY_MORE;
      }
      if (c === "N") return PY_REJECT;
      this.str += "\\" + c;
      return PY_MORE;
    }
    if (c === "\\") {
      this.esc = true;
      return PY_MORE;
    }
    if (c === this.quote) return this.complete(this.str);
    // A raw newline in a string is invalid Python, but models write multi-line commands that way
    // (SGLang's LFM2 detector escapes them): it is kept as a newline.
    this.str += c;
    if (this.str.length > 1_000_000) return PY_REJECT;
    return PY_MORE;
  }

  private escDigits(c: string): number {
    if (this.escKind === "o") {
      if (c >= "0" && c <= "7" && this.escBuf.length < 3) {
        this.escBuf += c;
        return PY_MORE;
      }
      this.str += String.fromCharCode(parseInt(this.escBuf, 8));
      this.escKind = "";
      return this.strChar(c);
    }
    if (!isHexDigit(c)) return PY_REJECT;
    this.escBuf += c;
    if (this.escBuf.length < HEX_LEN[this.escKind]!) return PY_MORE;
    const cp = parseInt(this.escBuf, 16);
    if (cp > 0x10ffff) return PY_REJECT;
    this.str += String.fromCodePoint(cp);
    this.escKind = "";
    return PY_MORE;
  }

  private endNumber(c: string): number {
    const t = this.tok;
    let v: unknown;
    if (HEX_RE.test(t)) v = parseInt(t.replace(/_/g, ""), 16);
    else if (NUM_RE.test(t)) {
      const clean = t.replace(/_/g, "");
      v = Number(clean);
      // Integers beyond double precision keep their digits (as a string).
      if (/^[+-]?\d+$/.test(clean) && !Number.isSafeInteger(v)) v = clean.replace(/^\+/, "");
    } else return PY_REJECT;
    if (typeof v === "number" && !Number.isFinite(v)) return PY_REJECT;
    return this.completeBefore(v, c);
  }

  /** The value ended before `c`; `c` continues the enclosing container (or is the caller's). */
  private completeBefore(v: unknown, c: string): number {
    const r = this.complete(v);
    if (r === PY_DONE) return PY_DONE_BEFORE;
    if (r === PY_REJECT) return r;
    return this.step(c);
  }

  private complete(v: unknown): number {
    const top = this.stack[this.stack.length - 1];
    if (!top) {
      this.value = v;
      this.st = V_AFTER;
      return PY_DONE;
    }
    this.st = V_AFTER;
    if (top.obj) {
      if (top.key === null) {
        if (typeof v !== "string" && typeof v !== "number") return PY_REJECT;
        top.key = String(v);
        this.st = V_COLON;
        return PY_MORE;
      }
      top.obj[top.key] = v;
      top.key = null;
      return PY_MORE;
    }
    top.items!.push(v);
    return PY_MORE;
  }
}

// ---------------------------------------------------------------------------------------------
// Calls: `name(k=v, …)` and lists of them

const C_LIST_OPEN = 0;
const C_NAME = 1;
const C_ARGS = 2;
const C_KW = 3;
const C_KW_WS = 4;
const C_VAL_WS = 5;
const C_VAL = 6;
const C_AFTER_VAL = 7;
const C_AFTER_CALL = 8;
const C_NEXT = 9;
const C_DONE = 10;
/** Inside a malformed call of a list: skipping to its closing `)`. */
const C_SKIP = 11;

export const PYC_MORE = 0;
export const PYC_DONE = 1;
export const PYC_REJECT = -1;

/** Longest malformed call a list skips (from its `(`); longer makes the list text. */
const MAX_SKIP = 64 * 1024;

/**
 * A pythonic call list `[a(x=1), b()]` (list mode, fed from the character after `[`), or one call
 * `name(…)` / `name.call(…)` (single mode, fed from the name's first character). Every name must
 * be offered. `step` returns PYC_DONE on the closing `]` (list) or `)` (single).
 *
 * In a list, a call of an offered tool whose arguments are malformed (`get_time(tz=)`,
 * `f(city=Paris)`, a positional argument) is skipped up to its balanced `)` (brackets counted,
 * strings skipped) and dropped, so its well-formed siblings are kept; the list still needs at least
 * one well-formed call, every name offered, and its `,` / `]` in place.
 */
export class PyCalls {
  readonly calls: RawCall[] = [];
  private st: number;
  private name = "";
  private kw = "";
  private args: Record<string, unknown> = {};
  private val: PyValue | null = null;
  // Bracket depth and string state inside the current call's parentheses (list mode), to find its end.
  private depth = 0;
  private quote = "";
  private esc = false;
  private callLen = 0;

  constructor(
    private readonly tools: ReadonlySet<string>,
    private readonly list: boolean,
  ) {
    this.st = list ? C_LIST_OPEN : C_NAME;
  }

  step(c: string): number {
    const st = this.st;
    if (!this.list || st < C_ARGS || st > C_AFTER_VAL) {
      if (st === C_SKIP) return this.track(c) ? this.skippedCall() : this.callLen > MAX_SKIP ? PYC_REJECT : PYC_MORE;
      return this.inner(c);
    }
    const r = this.inner(c);
    const closed = this.track(c);
    if (r !== PYC_REJECT) return r;
    // A malformed call of an offered tool inside a list: skip it, keep its siblings.
    if (this.quote === "" && closed) return this.skippedCall();
    if (this.depth < 0) return PYC_REJECT;
    this.val = null;
    this.st = C_SKIP;
    return PYC_MORE;
  }

  /** Tracks brackets and strings inside a call; true when `c` closes the call's `(`. */
  private track(c: string): boolean {
    this.callLen++;
    if (this.quote !== "") {
      if (this.esc) this.esc = false;
      else if (c === "\\") this.esc = true;
      else if (c === this.quote) this.quote = "";
      return false;
    }
    if (c === '"' || c === "'") this.quote = c;
    else if (c === "(" || c === "[" || c === "{") this.depth++;
    else if (c === ")" || c === "]" || c === "}") {
      this.depth--;
      if (this.depth < 0) {
        if (c === ")") return true;
        this.callLen = MAX_SKIP + 1; // a closing bracket that does not match: not a call list
      }
    }
    return false;
  }

  private skippedCall(): number {
    this.st = C_AFTER_CALL;
    return PYC_MORE;
  }

  private inner(c: string): number {
    switch (this.st) {
      case C_LIST_OPEN:
      case C_NEXT:
        if (isWs(c)) return PYC_MORE;
        if (c === "]" && this.st === C_NEXT) return this.finish();
        if (!isIdentStart(c)) return PYC_REJECT;
        this.st = C_NAME;
        this.name = c;
        return PYC_MORE;
      case C_NAME:
        if (isNameChar(c) && c !== ":" && this.name.length < MAX_NAME) {
          this.name += c;
          return PYC_MORE;
        }
        if (c !== "(") return PYC_REJECT;
        if (this.name.endsWith(".call")) this.name = this.name.slice(0, -5);
        if (!this.tools.has(this.name)) return PYC_REJECT;
        this.args = {};
        this.depth = 0;
        this.quote = "";
        this.esc = false;
        this.callLen = 0;
        this.st = C_ARGS;
        return PYC_MORE;
      case C_ARGS:
        if (isWs(c)) return PYC_MORE;
        if (c === ")") return this.endCall();
        if (!isIdentStart(c)) return PYC_REJECT;
        this.kw = c;
        this.st = C_KW;
        return PYC_MORE;
      case C_KW:
        if (isIdentChar(c) && this.kw.length < MAX_NAME) {
          this.kw += c;
          return PYC_MORE;
        }
        this.st = C_KW_WS;
        return this.inner(c);
      case C_KW_WS:
        if (isWs(c)) return PYC_MORE;
        if (c !== "=" || Object.hasOwn(this.args, this.kw)) return PYC_REJECT;
        this.st = C_VAL_WS;
        return PYC_MORE;
      case C_VAL_WS:
        if (isWs(c)) return PYC_MORE;
        this.val = new PyValue();
        this.st = C_VAL;
        return this.inner(c);
      case C_VAL: {
        const r = this.val!.step(c);
        if (r === PY_MORE) return PYC_MORE;
        if (r === PY_REJECT) return PYC_REJECT;
        this.args[this.kw] = this.val!.value;
        this.val = null;
        this.st = C_AFTER_VAL;
        return r === PY_DONE_BEFORE ? this.inner(c) : PYC_MORE;
      }
      case C_AFTER_VAL:
        if (isWs(c)) return PYC_MORE;
        if (c === ",") {
          this.st = C_ARGS;
          return PYC_MORE;
        }
        if (c === ")") return this.endCall();
        return PYC_REJECT;
      case C_AFTER_CALL:
        if (isWs(c)) return PYC_MORE;
        if (c === ",") {
          this.st = C_NEXT;
          return PYC_MORE;
        }
        if (c === "]") return this.finish();
        return PYC_REJECT;
      default:
        return PYC_REJECT;
    }
  }

  private endCall(): number {
    this.calls.push({ name: this.name, args: this.args });
    if (!this.list) return this.finish();
    this.st = C_AFTER_CALL;
    return PYC_MORE;
  }

  private finish(): number {
    if (this.calls.length === 0) return PYC_REJECT;
    this.st = C_DONE;
    return PYC_DONE;
  }
}
