/**
 * Calls introduced by a marker token and ended by their own syntax:
 * - Llama 3.x `<|python_tag|>`: JSON call object(s) separated by `;`, a pythonic list, a builtin
 *   `name.call(k=v)` (`brave_search`, `wolfram_alpha`, `python`, …), or — when the request offers
 *   `python` (else `code_interpreter`) — raw code; optionally ended by `<|eom_id|>` / `<|eot_id|>`;
 * - Llama 4 `<|python_start|>[…]<|python_end|>` and LFM2 `<|tool_call_start|>[…]<|tool_call_end|>`
 *   around a pythonic list (LFM2: or a JSON array of call objects);
 * - Granite 3.0 `<|tool_call|>` + a JSON array (or object) of calls;
 * - InternLM2 `<|action_start|><|plugin|>` + a JSON call object + `<|action_end|>`;
 * - Phi-4-mini / Firefunction `functools[…]` (a JSON array of calls).
 */
import { JsonScanner, MORE, REJECT, V_CALL, V_CALLS } from "../json.js";
import { callsFromClosedArray, callsFromJsonText, type RawCall } from "../shape.js";
import {
  accept,
  type Candidate,
  type Decision,
  isIdentStart,
  isWs,
  Lit,
  LIT_FAIL,
  LIT_MORE,
  reject,
  type ScanContext,
  UntilLit,
} from "./common.js";
import { PYC_DONE, PYC_MORE, PyCalls } from "./python.js";

export const PYTHON_TAG = "<|python_tag|>";
export const PYTHON_START = "<|python_start|>";
export const TOOL_CALL_START = "<|tool_call_start|>";
export const GRANITE_TOOL_CALL = "<|tool_call|>";
export const ACTION_START = "<|action_start|>";
export const FUNCTOOLS = "functools[";
const PY_END: readonly string[] = ["<|eom_id|>", "<|eot_id|>"];

/** After a complete block: blanks, then an optional closing marker (consumed); anything else ends the block. */
export class Tail {
  private lit: Lit | null = null;
  constructor(
    private readonly calls: RawCall[],
    private readonly ends: readonly string[],
    /** Blanks already seen after the block. */
    private pending = 0,
  ) {}
  step(c: string): Decision | null {
    const lit = this.lit;
    if (lit) {
      const r = lit.step(c);
      if (r === LIT_MORE) return null;
      return r === LIT_FAIL ? accept(this.calls, this.pending + lit.partial.length) : accept(this.calls);
    }
    if (isWs(c)) {
      this.pending++;
      return null;
    }
    if (c === "<" && this.ends.length > 0) {
      this.lit = new Lit(this.ends, c);
      return null;
    }
    return accept(this.calls, this.pending + 1);
  }
  eof(): Decision {
    return accept(this.calls, this.pending + (this.lit ? this.lit.partial.length : 0));
  }
}

const P_START = 0;
const P_JSON = 1;
const P_AFTER = 2;
const P_SEMI = 3;
const P_PY = 4;
const P_TAIL = 5;
const P_RAW = 6;

/** What follows `<|python_tag|>`. */
export class PythonTagScanner implements Candidate {
  private st = P_START;
  private body = "";
  private json: JsonScanner | null = null;
  private readonly jcalls: RawCall[] = [];
  private pending = 0;
  private py: PyCalls | null = null;
  private tail: Tail | null = null;
  private raw: UntilLit | null = null;

  constructor(private readonly ctx: ScanContext) {}

  step(c: string): Decision | null {
    if (this.st !== P_RAW) this.body += c;
    switch (this.st) {
      case P_START:
        if (isWs(c)) return null;
        if (c === "{") return this.startJson(c);
        if (c === "[" || isIdentStart(c)) {
          this.py = new PyCalls(this.ctx.tools, c === "[");
          this.st = P_PY;
          return c === "[" ? null : this.pyStep(c);
        }
        return this.toRaw(c, 1);
      case P_JSON: {
        const json = this.json!;
        const r = json.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return this.toRaw(c, 1);
        const calls = callsFromJsonText(json.text, this.ctx.tools);
        if (calls === null) return this.toRaw(c, 0);
        this.jcalls.push(...calls);
        this.json = null;
        this.st = P_AFTER;
        this.pending = 0;
        return null;
      }
      case P_AFTER:
      case P_SEMI:
        if (isWs(c)) {
          this.pending++;
          return null;
        }
        if (c === ";" && this.st === P_AFTER) {
          this.pending++;
          this.st = P_SEMI;
          return null;
        }
        if (c === "{") return this.startJson(c);
        if (c === "<" && this.st === P_AFTER) {
          this.tail = new Tail(this.jcalls, PY_END, this.pending);
          this.st = P_TAIL;
          return this.tail.step(c);
        }
        // Whatever follows is not part of the call.
        return accept(this.jcalls, this.pending + 1);
      case P_PY:
        return this.pyStep(c);
      case P_TAIL:
        return this.tail!.step(c);
      case P_RAW:
        if (this.raw!.step(c) < 0) return null;
        return this.code(this.raw!.value);
      default:
        return reject(1);
    }
  }

  private pyStep(c: string): Decision | null {
    const r = this.py!.step(c);
    if (r === PYC_MORE) return null;
    if (r !== PYC_DONE) return this.toRaw(c, 1);
    this.tail = new Tail(this.py!.calls, PY_END);
    this.st = P_TAIL;
    return null;
  }

  private startJson(c: string): null {
    this.json = new JsonScanner(this.ctx.tools, V_CALL);
    this.json.step(c);
    this.st = P_JSON;
    return null;
  }

  /** Not a call: raw code for the code tool when one is offered, else text. */
  private toRaw(c: string, refeed: number): Decision | null {
    if (this.ctx.codeTool === null) return reject(refeed);
    this.raw = new UntilLit(PY_END);
    this.raw.value = this.body.slice(0, -1);
    this.st = P_RAW;
    if (this.raw.step(c) < 0) return null;
    return this.code(this.raw.value);
  }

  private code(text: string): Decision {
    const code = text.trim();
    return code ? accept([{ name: this.ctx.codeTool!, args: { code } }]) : reject(0);
  }

  eof(): Decision {
    switch (this.st) {
      case P_AFTER:
      case P_SEMI:
        return accept(this.jcalls, this.pending);
      case P_TAIL:
        return this.tail!.eof();
      case P_RAW:
        return this.code(this.raw!.value + this.raw!.pending);
      default:
        return reject(0);
    }
  }

  codeOnReject(): number {
    return 0;
  }
}

/**
 * `<|python_start|>` / `<|tool_call_start|>` + a pythonic list (or, for LFM2, a JSON array of call
 * objects) + the matching end marker.
 */
export class PyListMarker implements Candidate {
  private open = false;
  private ws = "";
  private py: PyCalls | null = null;
  private json: JsonScanner | null = null;
  private tail: Tail | null = null;

  constructor(
    private readonly ctx: ScanContext,
    private readonly end: string,
  ) {}

  step(c: string): Decision | null {
    if (this.tail) return this.tail.step(c);
    if (!this.open) {
      if (isWs(c)) return null;
      if (c !== "[") return reject(1);
      this.open = true;
      return null;
    }
    if (this.py === null && this.json === null) {
      if (isWs(c)) {
        this.ws += c;
        return null;
      }
      if (c === "{") {
        this.json = new JsonScanner(this.ctx.tools, V_CALLS);
        for (const ch of "[" + this.ws) this.json.step(ch);
      } else this.py = new PyCalls(this.ctx.tools, true);
    }
    if (this.json) {
      const r = this.json.step(c);
      if (r === MORE) return null;
      if (r === REJECT) return reject(1);
      const calls = callsFromJsonText(this.json.text, this.ctx.tools);
      if (calls === null) return reject(0);
      this.tail = new Tail(calls, [this.end]);
      return null;
    }
    const r = this.py!.step(c);
    if (r === PYC_MORE) return null;
    if (r !== PYC_DONE) return reject(1);
    this.tail = new Tail(this.py!.calls, [this.end]);
    return null;
  }

  eof(): Decision {
    return this.tail ? this.tail.eof() : reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}

/** A marker followed by a JSON array (or object) of calls: Granite `<|tool_call|>`, `functools[`. */
export class JsonMarker implements Candidate {
  private json: JsonScanner | null = null;

  constructor(
    private readonly ctx: ScanContext,
    /** The marker ends with the array's `[` (functools). */
    opened: boolean,
  ) {
    if (opened) this.start("[");
  }

  private start(c: string): null {
    this.json = new JsonScanner(this.ctx.tools, c === "[" ? V_CALLS : V_CALL);
    this.json.step(c);
    return null;
  }

  step(c: string): Decision | null {
    const json = this.json;
    if (json === null) {
      if (isWs(c)) return null;
      return c === "[" || c === "{" ? this.start(c) : reject(1);
    }
    const r = json.step(c);
    if (r === MORE) return null;
    if (r === REJECT) return reject(1);
    const calls = callsFromJsonText(json.text, this.ctx.tools);
    return calls === null ? reject(0) : accept(calls);
  }

  eof(): Decision {
    const calls = this.json ? callsFromClosedArray(this.json.closedArrayText(), this.ctx.tools) : null;
    return calls === null ? reject(0) : accept(calls);
  }

  codeOnReject(): number {
    return 0;
  }
}

/** `functools[` at the start of a word: the literal, then a JSON array of calls. */
export class FunctoolsCandidate implements Candidate {
  private readonly lit = new Lit([FUNCTOOLS], "f");
  private inner: JsonMarker | null = null;

  constructor(private readonly ctx: ScanContext) {}

  step(c: string): Decision | null {
    if (this.inner) return this.inner.step(c);
    const r = this.lit.step(c);
    if (r === LIT_MORE) return null;
    if (r === LIT_FAIL) return reject(1);
    this.inner = new JsonMarker(this.ctx, true);
    return null;
  }

  eof(): Decision {
    return this.inner ? this.inner.eof() : reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}

const I_START = 0;
const I_PLUGIN = 1;
const I_WS = 2;
const I_JSON = 3;
const I_TAIL = 4;

/** What follows InternLM's `<|action_start|>`: `<|plugin|>`, a JSON call object, `<|action_end|>`. */
export class ActionScanner implements Candidate {
  private st = I_START;
  private lit: Lit | null = null;
  private json: JsonScanner | null = null;
  private tail: Tail | null = null;

  constructor(private readonly ctx: ScanContext) {}

  step(c: string): Decision | null {
    switch (this.st) {
      case I_START:
        if (isWs(c)) return null;
        if (c !== "<") return reject(1);
        this.lit = new Lit(["<|plugin|>"], c);
        this.st = I_PLUGIN;
        return null;
      case I_PLUGIN: {
        const r = this.lit!.step(c);
        if (r === LIT_MORE) return null;
        if (r === LIT_FAIL) return reject(this.lit!.partial.length);
        this.st = I_WS;
        return null;
      }
      case I_WS:
        if (isWs(c)) return null;
        if (c !== "{") return reject(1);
        this.json = new JsonScanner(this.ctx.tools, V_CALL);
        this.json.step(c);
        this.st = I_JSON;
        return null;
      case I_JSON: {
        const r = this.json!.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return reject(1);
        const calls = callsFromJsonText(this.json!.text, this.ctx.tools);
        if (calls === null) return reject(0);
        this.tail = new Tail(calls, ["<|action_end|>"]);
        this.st = I_TAIL;
        return null;
      }
      case I_TAIL:
        return this.tail!.step(c);
      default:
        return reject(1);
    }
  }

  eof(): Decision {
    return this.st === I_TAIL ? this.tail!.eof() : reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}
