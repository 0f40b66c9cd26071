/**
 * DeepSeek V3 / R1 / V3.1 tool-call tokens (vLLM `deepseek_v3` / `deepseek_v31`, SGLang
 * `deepseekv3` / `deepseekv31`, llama.cpp's DeepSeek R1 parser):
 *
 *   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
 *   ```json
 *   {"city": "Tokyo"}
 *   ```<｜tool▁call▁end｜>…<｜tool▁calls▁end｜>
 *
 * V3.1 drops the type and the fence: `<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Tokyo"}
 * <｜tool▁call▁end｜>`. Tokens are accepted with full-width (`｜`) or ASCII (`|`, as Ollama's
 * template writes them) bars; the opening token also in the variants llama.cpp accepts from R1
 * distills. Parallel calls follow each other (blanks between them allowed). The block is
 * all-or-nothing; `<｜tool▁calls▁end｜>` may be missing when the reply ends or other text follows.
 */
import { JsonScanner, MORE, REJECT, V_OBJ } from "../json.js";
import { objectFromJsonText, type RawCall } from "../shape.js";
import { accept, type Candidate, type Decision, isNameChar, isWs, Lit, LIT_FAIL, LIT_MORE, MAX_NAME, reject, type ScanContext } from "./common.js";

const tok = (name: string): string[] => [`<｜${name}｜>`, `<|${name}|>`];

export const DEEPSEEK_OPENERS: readonly string[] = ["tool▁calls▁begin", "tool_calls_begin", "tool calls begin", "tool▁calls"].flatMap(tok);
const CALL_BEGIN = tok("tool▁call▁begin");
const SEP = tok("tool▁sep");
const CALL_END = tok("tool▁call▁end");
const CALLS_END = tok("tool▁calls▁end");
const NEXT = [...CALL_BEGIN, ...CALLS_END];

const D_WS0 = 0;
const D_LIT = 1;
const D_TYPE = 2;
const D_NAME = 3;
const D_NAME_WS = 4;
const D_FENCE = 5;
const D_FWS = 6;
const D_ARGS_WS = 7;
const D_JSON = 8;
const D_FCLOSE = 9;
const D_AFTER = 10;
const D_BETWEEN = 11;

/** What a matched literal leads to. */
const L_BEGIN = 0;
const L_SEP = 1;
const L_END = 2;
const L_NEXT = 3;

export class DeepSeekCandidate implements Candidate {
  private st = D_WS0;
  private lit: Lit | null = null;
  private litKind = L_BEGIN;
  private word = "";
  private name = "";
  private ticks = 0;
  private lang = "";
  private fenced = false;
  private json: JsonScanner | null = null;
  private args: Record<string, unknown> | null = null;
  private readonly calls: RawCall[] = [];
  private pending = 0;

  constructor(private readonly ctx: ScanContext) {}

  private expect(lits: readonly string[], kind: number, c: string): null {
    this.lit = new Lit(lits, c);
    this.litKind = kind;
    this.st = D_LIT;
    return null;
  }

  step(c: string): Decision | null {
    switch (this.st) {
      case D_WS0:
        if (isWs(c)) return null;
        return c === "<" ? this.expect(CALL_BEGIN, L_BEGIN, c) : reject(1);
      case D_LIT:
        return this.litStep(c);
      case D_TYPE:
        if (c === "<") return this.expect(SEP, L_SEP, c);
        if (c === "\n" || this.word.length >= MAX_NAME) return reject(1);
        this.word += c;
        return null;
      case D_NAME:
        if (isNameChar(c) && this.name.length < MAX_NAME) {
          this.name += c;
          return null;
        }
        if (!this.ctx.tools.has(this.name)) return reject(1);
        this.st = D_NAME_WS;
        return this.step(c);
      case D_NAME_WS:
        if (isWs(c)) return null;
        if (c === "`") {
          this.ticks = 1;
          this.st = D_FENCE;
          return null;
        }
        return this.startJson(c, false);
      case D_FENCE:
        if (c === "`" && this.lang === "" && this.ticks < 3) {
          this.ticks++;
          return null;
        }
        if (this.ticks < 3) return reject(1);
        if (c === "\n") {
          const lang = this.lang.trim().toLowerCase();
          if (lang !== "" && lang !== "json") return reject(1);
          this.st = D_FWS;
          return null;
        }
        if (this.lang.length > 16) return reject(1);
        this.lang += c;
        return null;
      case D_FWS:
        if (isWs(c)) return null;
        return this.startJson(c, true);
      case D_ARGS_WS:
        if (isWs(c)) return null;
        return this.startJson(c, false);
      case D_JSON: {
        const r = this.json!.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return reject(1);
        this.args = objectFromJsonText(this.json!.text);
        if (this.args === null) return reject(0);
        this.ticks = 0;
        this.st = this.fenced ? D_FCLOSE : D_AFTER;
        return null;
      }
      case D_FCLOSE:
        if (c === "`") {
          if (++this.ticks === 3) this.st = D_AFTER;
          return null;
        }
        if (this.ticks === 0 && isWs(c)) return null;
        return reject(1);
      case D_AFTER:
        if (isWs(c)) return null;
        return c === "<" ? this.expect(CALL_END, L_END, c) : reject(1);
      case D_BETWEEN:
        if (isWs(c)) {
          this.pending++;
          return null;
        }
        if (c === "<") return this.expect(NEXT, L_NEXT, c);
        return accept(this.calls, this.pending + 1);
      default:
        return reject(1);
    }
  }

  private litStep(c: string): Decision | null {
    const lit = this.lit!;
    const r = lit.step(c);
    if (r === LIT_MORE) return null;
    if (r === LIT_FAIL) return this.litKind === L_NEXT ? accept(this.calls, this.pending + lit.partial.length) : reject(lit.partial.length);
    this.lit = null;
    switch (this.litKind) {
      case L_BEGIN:
        this.word = "";
        this.name = "";
        this.lang = "";
        this.st = D_TYPE;
        return null;
      case L_SEP: {
        const w = this.word.trim();
        if (w === "function") {
          this.st = D_NAME;
          return null;
        }
        if (!this.ctx.tools.has(w)) return reject(0);
        this.name = w;
        this.st = D_ARGS_WS;
        return null;
      }
      case L_END:
        this.calls.push({ name: this.name, args: this.args! });
        this.args = null;
        this.pending = 0;
        this.st = D_BETWEEN;
        return null;
      default:
        if (CALLS_END.includes(lit.partial)) return accept(this.calls);
        this.word = "";
        this.name = "";
        this.lang = "";
        this.st = D_TYPE;
        return null;
    }
  }

  private startJson(c: string, fenced: boolean): Decision | null {
    if (c !== "{") return reject(1);
    this.fenced = fenced;
    this.json = new JsonScanner(this.ctx.tools, V_OBJ);
    this.json.step(c);
    this.st = D_JSON;
    return null;
  }

  eof(): Decision {
    const complete = this.st === D_AFTER || this.st === D_FCLOSE || (this.st === D_LIT && this.litKind === L_END && this.args !== null);
    if (complete && this.args !== null) return accept([...this.calls, { name: this.name, args: this.args }]);
    if (this.st === D_BETWEEN) return accept(this.calls, this.pending);
    if (this.st === D_LIT && this.litKind === L_NEXT) return accept(this.calls, this.pending + this.lit!.partial.length);
    return reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}
