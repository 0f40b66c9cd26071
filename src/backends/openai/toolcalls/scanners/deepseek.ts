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
import {
  type BlockTokens,
  type Decision,
  isNameChar,
  isWs,
  MAX_NAME,
  reject,
  type ScanContext,
  TB_AFTER,
  TB_OWN,
  TL_BEGIN,
  TL_OWN,
  TokenBlockCandidate,
} from "./common.js";

const tok = (name: string): string[] => [`<｜${name}｜>`, `<|${name}|>`];

export const DEEPSEEK_OPENERS: readonly string[] = [
  "tool▁calls▁begin",
  "tool_calls_begin",
  "tool calls begin",
  "tool▁calls",
].flatMap(tok);
const CALL_BEGIN = tok("tool▁call▁begin");
const SEP = tok("tool▁sep");
const CALLS_END = tok("tool▁calls▁end");
const TOKENS: BlockTokens = {
  callBegin: CALL_BEGIN,
  callEnd: tok("tool▁call▁end"),
  blockEnd: CALLS_END,
  next: [...CALL_BEGIN, ...CALLS_END],
};

const D_TYPE = TB_OWN;
const D_NAME = TB_OWN + 1;
const D_NAME_WS = TB_OWN + 2;
const D_FENCE = TB_OWN + 3;
const D_FWS = TB_OWN + 4;
const D_ARGS_WS = TB_OWN + 5;
const D_FCLOSE = TB_OWN + 6;

/** What a matched literal leads to (besides the shared kinds). */
const L_SEP = TL_OWN;

export class DeepSeekCandidate extends TokenBlockCandidate {
  private word = "";
  private ticks = 0;
  private lang = "";

  constructor(ctx: ScanContext) {
    super(ctx, TOKENS);
  }

  protected override stepOwn(c: string): Decision | null {
    switch (this.st) {
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
        return this.startArgs(c, false);
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
        return this.startArgs(c, true);
      case D_ARGS_WS:
        if (isWs(c)) return null;
        return this.startArgs(c, false);
      case D_FCLOSE:
        if (c === "`") {
          if (++this.ticks === 3) this.st = TB_AFTER;
          return null;
        }
        if (this.ticks === 0 && isWs(c)) return null;
        return reject(1);
      default:
        return reject(1);
    }
  }

  protected override matched(kind: number): Decision | null {
    if (kind === TL_BEGIN) {
      this.word = "";
      this.name = "";
      this.lang = "";
      this.st = D_TYPE;
      return null;
    }
    // L_SEP
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

  /** The arguments object, in a fence (then closed by three backticks) or not. */
  private startArgs(c: string, fenced: boolean): Decision | null {
    this.ticks = 0;
    this.afterJson = fenced ? D_FCLOSE : TB_AFTER;
    return this.startJson(c);
  }

  protected override completeAtEof(): boolean {
    return super.completeAtEof() || this.st === D_FCLOSE;
  }
}
