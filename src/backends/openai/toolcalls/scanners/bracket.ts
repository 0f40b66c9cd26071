/**
 * A `[`: Mistral's `[TOOL_CALLS]` anywhere (followed by a JSON array/object, or by
 * `name[ARGS]{…}` / `name[CALL_ID]id[ARGS]{…}`, optionally closed by `[/TOOL_CALLS]`), a pythonic
 * call list `[name(k=v, …), …]` anywhere except after a sentence that presents it as an example,
 * or — at the start of a line or between sentences — a JSON array of call objects.
 */
import { JsonScanner, MORE, REJECT, V_CALL, V_CALLS } from "../json.js";
import { callsFromClosedArray, callsFromJsonText, objectFromJsonText, type RawCall } from "../shape.js";
import {
  accept,
  type Candidate,
  type Decision,
  isAlnum,
  isIdentStart,
  isNameChar,
  isWs,
  Lit,
  LIT_FAIL,
  LIT_MORE,
  MAX_NAME,
  objectScanner,
  reject,
  type ScanContext,
} from "./common.js";
import { examplePrefix, jsonMayStartAfter, JsonRunCandidate } from "./json-run.js";
import { PYC_DONE, PYC_MORE, PyCalls } from "./python.js";

const ARGS_LIT = "[ARGS]";
const CALL_ID_LIT = "[CALL_ID]";
const TOOL_CALLS_CLOSE = "[/TOOL_CALLS]";

const B_START = 0;
const B_WORD = 1;
const M_WS = 2;
const M_JSON = 3;
const M_NAME = 4;
const M_NLIT = 5;
const M_ID = 6;
const M_ARGS_WS = 7;
const M_ARGS = 8;
const M_AFTER = 9;
const M_CLOSE = 10;
const B_PY = 11;
const B_JSON = 12;
/** Junk between `[TOOL_CALLS]` and its JSON (a repeated marker, a stray word): skipped. */
const M_JUNK = 13;
/** Most characters of junk skipped after `[TOOL_CALLS]`. */
const MAX_JUNK = 64;

export class BracketCandidate implements Candidate {
  private st = B_START;
  /** Characters after the `[`. */
  private held = "";
  private word = "";
  private ws = false;
  private json: JsonScanner | null = null;
  private run: JsonRunCandidate | null = null;
  private py: PyCalls | null = null;
  private nlit: Lit | null = null;
  private name = "";
  private id = "";
  private calls: RawCall[] = [];
  private pending = 0;
  /** Characters of junk skipped after `[TOOL_CALLS]` (over MAX_JUNK: no more junk allowed). */
  private junk = 0;
  /** Characters the current `[TOOL_CALLS]` JSON scanner has read. */
  private jsonLen = 0;

  constructor(
    private readonly ctx: ScanContext,
    /** The text before the `[` on its line ("" at a line start or after a reasoning block). */
    private readonly prefix: string,
  ) {}

  step(c: string): Decision | null {
    if (this.st <= B_WORD) this.held += c;
    switch (this.st) {
      case B_START:
        if (isWs(c)) {
          this.ws = true;
          return null;
        }
        if (c === "{" && jsonMayStartAfter(this.prefix)) {
          this.run = new JsonRunCandidate(this.ctx, "[");
          this.st = B_JSON;
          let d: Decision | null = null;
          for (const ch of this.held) d = this.run.step(ch);
          return d;
        }
        if (isIdentStart(c)) {
          this.word = c;
          this.st = B_WORD;
          return null;
        }
        return reject(1);
      case B_WORD:
        if (isNameChar(c) && c !== ":" && this.word.length < MAX_NAME) {
          this.word += c;
          return null;
        }
        if (c === "]" && !this.ws && this.word === "TOOL_CALLS") {
          this.st = M_WS;
          return null;
        }
        if (c === "(" && !examplePrefix(this.prefix)) {
          this.py = new PyCalls(this.ctx.tools, true);
          this.st = B_PY;
          for (const ch of this.held) {
            const r = this.py.step(ch);
            if (r !== PYC_MORE) return reject(1);
          }
          return null;
        }
        return reject(1);
      case B_PY: {
        const r = this.py!.step(c);
        if (r === PYC_MORE) return null;
        return r === PYC_DONE ? accept(this.py!.calls) : reject(1);
      }
      case B_JSON:
        return this.run!.step(c);
      case M_WS:
        if (isWs(c)) {
          if (c === "\n") this.junk = MAX_JUNK + 1; // no junk after a line break: a fence, a new line
          return null;
        }
        if (c === "[" || c === "{") return this.startJson(c);
        if (isNameChar(c)) {
          this.name = c;
          this.st = M_NAME;
          return null;
        }
        return this.toJunk(c);
      case M_JSON: {
        this.jsonLen++;
        const r = this.json!.step(c);
        if (r === MORE) return null;
        // A JSON start that fails at once (`[TOOL_CALLS][TOOL_CALLS]`, `[x]`) is junk too.
        if (r === REJECT) return this.jsonLen <= 2 ? this.toJunk(c) : reject(1);
        const calls = callsFromJsonText(this.json!.text, this.ctx.tools);
        return calls === null ? reject(0) : this.after(calls);
      }
      case M_JUNK:
        if (c === "\n" || ++this.junk > MAX_JUNK) return reject(1);
        if (c === "[" || c === "{") return this.startJson(c);
        return null;
      case M_NAME:
        if (isNameChar(c) && this.name.length < MAX_NAME) {
          this.name += c;
          return null;
        }
        if (!this.ctx.tools.has(this.name)) {
          // A word that names no offered tool: junk before the JSON (`[TOOL_CALLS] Sure [{…}]`).
          this.junk += this.name.length;
          return this.junk <= MAX_JUNK && (c === "[" || c === "{") ? this.startJson(c) : this.toJunk(c);
        }
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
      case M_AFTER:
        if (isWs(c)) {
          this.pending++;
          return null;
        }
        if (c === "[") {
          this.nlit = new Lit([TOOL_CALLS_CLOSE], c);
          this.st = M_CLOSE;
          return null;
        }
        return accept(this.calls, this.pending + 1);
      case M_CLOSE: {
        const r = this.nlit!.step(c);
        if (r === LIT_MORE) return null;
        if (r === LIT_FAIL) return accept(this.calls, this.pending + this.nlit!.partial.length);
        return accept(this.calls);
      }
      default:
        return reject(1);
    }
  }

  private startJson(c: string): null {
    this.json = new JsonScanner(this.ctx.tools, c === "[" ? V_CALLS : V_CALL);
    this.json.step(c);
    this.jsonLen = 1;
    this.st = M_JSON;
    return null;
  }

  /** Junk after `[TOOL_CALLS]` (on its line, at most MAX_JUNK characters), `c` its next character. */
  private toJunk(c: string): Decision | null {
    this.st = M_JUNK;
    if (c === "[" || c === "{" || c === "\n" || this.junk > MAX_JUNK) return reject(1);
    this.junk++;
    return null;
  }

  /** A `[TOOL_CALLS]` JSON block is complete: an optional `[/TOOL_CALLS]` may follow. */
  private after(calls: RawCall[]): null {
    this.calls = calls;
    this.st = M_AFTER;
    this.pending = 0;
    return null;
  }

  private startArgs(c: string): null {
    this.json = objectScanner(this.ctx.tools, c);
    this.st = M_ARGS;
    return null;
  }

  eof(): Decision {
    switch (this.st) {
      case B_JSON:
        return this.run!.eof();
      case M_JSON: {
        const calls = callsFromClosedArray(this.json!.closedArrayText(), this.ctx.tools);
        return calls === null ? reject(0) : accept(calls);
      }
      case M_AFTER:
        return accept(this.calls, this.pending);
      case M_CLOSE:
        return accept(this.calls, this.pending + this.nlit!.partial.length);
      default:
        return reject(0);
    }
  }

  codeOnReject(): number {
    return 0;
  }
}
