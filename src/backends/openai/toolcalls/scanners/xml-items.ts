/**
 * XML-ish call items that sit inside a wrapper tag:
 * - MiniMax M2 `<invoke name="get_weather"><parameter name="city">Seattle</parameter></invoke>`
 *   (inside `<minimax:tool_call>`, or on its own);
 * - GLM-4.5 / 4.6 / 4.7 `get_weather<arg_key>city</arg_key><arg_value>Beijing</arg_value>` (inside
 *   `<tool_call>`; the name on its own line or directly followed by the first `<arg_key>`), and
 *   GLM-4 `name` + newline + a JSON object.
 * Parameter values are strings unless they read as a JSON number, boolean, object or array (as
 * Qwen3-Coder parameters are).
 */
import { convertParamValue } from "../shape.js";
import {
  isHws,
  isNameChar,
  isWs,
  Lit,
  LIT_FAIL,
  LIT_MORE,
  MAX_NAME,
  objectScanner,
  type ScanContext,
  SUB_DONE,
  SUB_DONE_OUTER,
  SUB_MORE,
  SubScanner,
  trimParamNewlines,
  UntilLit,
} from "./common.js";

export const INVOKE_OPEN = "<invoke name=";
const INVOKE_CLOSE = "</invoke>";
const IPARAM_OPEN = "<parameter name=";
const IPARAM_CLOSE = "</parameter>";

const I_Q = 0;
const I_NAME = 1;
const I_GT = 2;
const I_BODY = 3;
const I_LIT = 4;
const I_PQ = 5;
const I_PNAME = 6;
const I_PGT = 7;
const I_PVAL = 8;

/** Scans what follows `<invoke name=`: `"name">`, parameters, `</invoke>`. */
export class InvokeScanner extends SubScanner {
  private st = I_Q;
  private quote = "";
  private pname = "";
  private lit: Lit | null = null;
  private val: UntilLit | null = null;

  step(c: string): number {
    switch (this.st) {
      case I_Q:
      case I_PQ:
        if (c !== '"' && c !== "'") return this.fail(1);
        this.quote = c;
        this.st = this.st === I_Q ? I_NAME : I_PNAME;
        return SUB_MORE;
      case I_NAME:
      case I_PNAME: {
        if (c === this.quote) {
          this.st = this.st === I_NAME ? I_GT : I_PGT;
          return SUB_MORE;
        }
        if (c === "\n" || c === "<") return this.fail(1);
        if (this.st === I_NAME) {
          if (this.name.length >= MAX_NAME) return this.fail(1);
          this.name += c;
        } else {
          if (this.pname.length >= MAX_NAME) return this.fail(1);
          this.pname += c;
        }
        return SUB_MORE;
      }
      case I_GT:
        if (isHws(c)) return SUB_MORE;
        if (c !== ">" || !this.ctx.tools.has(this.name)) return this.fail(1);
        this.st = I_BODY;
        return SUB_MORE;
      case I_PGT:
        if (isHws(c)) return SUB_MORE;
        if (c !== ">" || this.pname === "" || Object.hasOwn(this.args, this.pname)) return this.fail(1);
        this.val = new UntilLit([IPARAM_CLOSE]);
        this.st = I_PVAL;
        return SUB_MORE;
      case I_BODY:
        if (isWs(c)) return SUB_MORE;
        if (c !== "<") return this.fail(1);
        this.lit = new Lit([IPARAM_OPEN, INVOKE_CLOSE], c);
        this.st = I_LIT;
        return SUB_MORE;
      case I_LIT: {
        const r = this.lit!.step(c);
        if (r === LIT_MORE) return SUB_MORE;
        if (r === LIT_FAIL) return this.fail(this.lit!.partial.length);
        if (r === 1) return SUB_DONE;
        this.pname = "";
        this.st = I_PQ;
        return SUB_MORE;
      }
      case I_PVAL:
        if (this.val!.step(c) < 0) return SUB_MORE;
        this.args[this.pname] = convertParamValue(trimParamNewlines(this.val!.value));
        this.val = null;
        this.st = I_BODY;
        return SUB_MORE;
      default:
        return this.fail(1);
    }
  }

  eofOk(): boolean {
    return (
      (this.st === I_BODY || (this.st === I_LIT && this.lit!.isPrefixOf(INVOKE_CLOSE))) &&
      Object.keys(this.args).length > 0
    );
  }
}

const ARG_KEY_OPEN = "<arg_key>";
const ARG_KEY_CLOSE = "</arg_key>";
const ARG_VALUE_OPEN = "<arg_value>";
const ARG_VALUE_CLOSE = "</arg_value>";

const G_NAME = 0;
const G_BODY = 1;
const G_LIT = 2;
const G_KEY = 3;
const G_KEY_WS = 4;
const G_VAL = 5;
const G_JSON = 6;
const G_AFTER_JSON = 7;

/** A GLM item inside `<tool_call>`, fed from the name's first character; ends at `</tool_call>`. */
export class GlmScanner extends SubScanner {
  private st = G_NAME;
  private key = "";
  private nargs = 0;
  private lit: Lit | null = null;
  private val: UntilLit | null = null;

  constructor(
    ctx: ScanContext,
    private readonly close: string,
    first: string,
  ) {
    super(ctx);
    this.name = first;
  }

  step(c: string): number {
    switch (this.st) {
      case G_NAME:
        if (isNameChar(c) && this.name.length < MAX_NAME) {
          this.name += c;
          return SUB_MORE;
        }
        if (!this.ctx.tools.has(this.name)) return this.fail(1);
        this.st = G_BODY;
        return this.step(c);
      case G_BODY:
        if (isWs(c)) return SUB_MORE;
        if (c === "<") {
          this.lit = new Lit([ARG_KEY_OPEN, this.close], c);
          this.st = G_LIT;
          return SUB_MORE;
        }
        if (c === "{" && this.nargs === 0) {
          this.json = objectScanner(this.ctx.tools, c);
          this.st = G_JSON;
          return SUB_MORE;
        }
        return this.fail(1);
      case G_LIT: {
        const lit = this.lit!;
        const r = lit.step(c);
        if (r === LIT_MORE) return SUB_MORE;
        if (r === LIT_FAIL) return this.fail(lit.partial.length);
        this.lit = null;
        if (lit.partial === this.close) return SUB_DONE_OUTER;
        if (lit.partial === ARG_VALUE_OPEN) {
          this.val = new UntilLit([ARG_VALUE_CLOSE]);
          this.st = G_VAL;
          return SUB_MORE;
        }
        if (this.json) return this.fail(lit.partial.length);
        this.key = "";
        this.val = new UntilLit([ARG_KEY_CLOSE]);
        this.st = G_KEY;
        return SUB_MORE;
      }
      case G_KEY:
        if (this.val!.step(c) < 0) {
          if (c === "\n" || this.val!.value.length > MAX_NAME) return this.fail(1);
          return SUB_MORE;
        }
        this.key = this.val!.value.trim();
        if (this.key === "" || Object.hasOwn(this.args, this.key)) return this.fail(0);
        this.st = G_KEY_WS;
        return SUB_MORE;
      case G_KEY_WS:
        if (isWs(c)) return SUB_MORE;
        if (c !== "<") return this.fail(1);
        this.lit = new Lit([ARG_VALUE_OPEN], c);
        this.st = G_LIT;
        return SUB_MORE;
      case G_VAL:
        if (this.val!.step(c) < 0) return SUB_MORE;
        this.args[this.key] = convertParamValue(trimParamNewlines(this.val!.value));
        this.nargs++;
        this.val = null;
        this.st = G_BODY;
        return SUB_MORE;
      case G_JSON: {
        const r = this.jsonStep(c);
        if (r !== SUB_DONE) return r;
        this.st = G_AFTER_JSON;
        return SUB_MORE;
      }
      case G_AFTER_JSON:
        if (isWs(c)) return SUB_MORE;
        if (c !== "<") return this.fail(1);
        this.lit = new Lit([this.close], c);
        this.st = G_LIT;
        return SUB_MORE;
      default:
        return this.fail(1);
    }
  }

  /** At the end of the reply: complete when only the closing tag is missing (after ≥1 argument). */
  eofOk(): boolean {
    const done = this.nargs > 0 || this.st === G_AFTER_JSON;
    if (this.st === G_BODY || this.st === G_AFTER_JSON) return done;
    if (this.st === G_LIT) return done && this.lit!.isPrefixOf(this.close);
    return false;
  }
}
