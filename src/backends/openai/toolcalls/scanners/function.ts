/**
 * `<function=name>` blocks: Qwen3-Coder / Seed-OSS `<function=name><parameter=k>v</parameter>…
 * </function>` and Llama 3.1 `<function=name>{json}</function>`; llama.cpp's attribute form
 * `<function name="name">{json}</function>` (its Hermes 2 Pro parser).
 */
import { convertParamValue } from "../shape.js";
import {
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

export const FUNCTION_OPEN = "<function=";
export const FUNCTION_ATTR_OPEN = "<function name=";
const PARAM_OPEN = "<parameter=";
const PARAM_CLOSE = "</parameter>";
const FUNCTION_CLOSE = "</function>";

const F_NAME = 0;
const F_BODY = 1;
const F_LIT = 2;
const F_PNAME = 3;
const F_PVAL = 4;
const F_JSON = 5;
const F_AFTER_JSON = 6;
const F_ATTR_Q = 7;
const F_ATTR_NAME = 8;
const F_ATTR_GT = 9;

/**
 * Scans what follows `<function=` (or `<function name=`): the name, then either
 * `<parameter=k>v</parameter>`… or a JSON object, then `</function>`. A missing `</parameter>` is
 * tolerated (the next `<parameter=`, `</function>` or the enclosing closing tag ends the value).
 */
export class FunctionScanner extends SubScanner {
  private st: number;
  private quote = "";
  private params = 0;
  private pname = "";
  private val: UntilLit | null = null;
  private lit: Lit | null = null;
  private hasJson = false;
  private readonly terms: readonly string[];

  constructor(
    ctx: ScanContext,
    private readonly outerClose: string | null,
    attr = false,
  ) {
    super(ctx);
    this.st = attr ? F_ATTR_Q : F_NAME;
    this.terms = outerClose
      ? [PARAM_CLOSE, PARAM_OPEN, FUNCTION_CLOSE, outerClose]
      : [PARAM_CLOSE, PARAM_OPEN, FUNCTION_CLOSE];
  }

  private named(name: string): number {
    if (!this.ctx.tools.has(name)) return this.fail(1);
    this.name = name;
    this.st = F_BODY;
    return SUB_MORE;
  }

  step(c: string): number {
    switch (this.st) {
      case F_NAME:
        if (c === ">") return this.named(this.name.trim());
        if (c === "\n" || c === "<" || this.name.length >= MAX_NAME) return this.fail(1);
        this.name += c;
        return SUB_MORE;
      case F_ATTR_Q:
        if (c !== '"' && c !== "'") return this.fail(1);
        this.quote = c;
        this.st = F_ATTR_NAME;
        return SUB_MORE;
      case F_ATTR_NAME:
        if (c === this.quote) {
          this.st = F_ATTR_GT;
          return SUB_MORE;
        }
        if (c === "\n" || c === "<" || this.name.length >= MAX_NAME) return this.fail(1);
        this.name += c;
        return SUB_MORE;
      case F_ATTR_GT:
        if (c === " " || c === "\t") return SUB_MORE;
        if (c === ">") return this.named(this.name);
        return this.fail(1);
      case F_BODY:
        if (isWs(c)) return SUB_MORE;
        if (c === "<") {
          this.lit = new Lit(
            this.outerClose ? [PARAM_OPEN, FUNCTION_CLOSE, this.outerClose] : [PARAM_OPEN, FUNCTION_CLOSE],
            c,
          );
          this.st = F_LIT;
          return SUB_MORE;
        }
        if (c === "{" && this.params === 0 && !this.hasJson) {
          this.json = objectScanner(this.ctx.tools, c);
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
          this.val = new UntilLit(this.terms);
          return SUB_MORE;
        }
        if (c === "\n" || c === "<" || this.pname.length >= MAX_NAME) return this.fail(1);
        this.pname += c;
        return SUB_MORE;
      case F_PVAL: {
        const t = this.val!.step(c);
        if (t < 0) return SUB_MORE;
        this.finishParam();
        const term = this.terms[t]!;
        if (term === PARAM_CLOSE) this.st = F_BODY;
        else if (term === PARAM_OPEN) {
          this.st = F_PNAME;
          this.pname = "";
        } else return term === FUNCTION_CLOSE ? SUB_DONE : SUB_DONE_OUTER;
        return SUB_MORE;
      }
      case F_JSON: {
        const r = this.jsonStep(c);
        if (r !== SUB_DONE) return r;
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
    this.args[this.pname.trim()] = convertParamValue(trimParamNewlines(this.val!.value));
    this.params++;
    this.val = null;
  }

  /** Can the block end here, with the text (a closing tag at most) missing? */
  eofOk(): boolean {
    if (this.st === F_BODY || this.st === F_AFTER_JSON) return this.params > 0 || this.hasJson;
    if (this.st === F_LIT) {
      const lit = this.lit!;
      return (
        (this.params > 0 || this.hasJson) &&
        (lit.isPrefixOf(FUNCTION_CLOSE) || (this.outerClose !== null && lit.isPrefixOf(this.outerClose)))
      );
    }
    return false;
  }
}
