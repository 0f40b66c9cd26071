/**
 * Kimi K2 (vLLM / SGLang `kimi_k2`):
 *
 *   <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0 <|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|><|tool_calls_section_end|>
 *
 * The call id is `functions.NAME:N` or `NAME:N` (the name may contain dots); a bare counter (no
 * name) is not a call. The singular `<|tool_call_section_begin|>` is accepted too. All-or-nothing;
 * the section's end token may be missing when the reply ends or other text follows.
 */
import {
  type BlockTokens,
  type Decision,
  isWs,
  MAX_NAME,
  reject,
  type ScanContext,
  TB_OWN,
  TL_OWN,
  TokenBlockCandidate,
} from "./common.js";

export const KIMI_OPENERS: readonly string[] = ["<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"];
const SECTION_END = ["<|tool_calls_section_end|>", "<|tool_call_section_end|>"];
const CALL_BEGIN = ["<|tool_call_begin|>"];
const ARG_BEGIN = ["<|tool_call_argument_begin|>"];
const TOKENS: BlockTokens = {
  callBegin: CALL_BEGIN,
  callEnd: ["<|tool_call_end|>"],
  blockEnd: SECTION_END,
  next: [...CALL_BEGIN, ...SECTION_END],
};

const K_ID = TB_OWN;
const K_ID_WS = TB_OWN + 1;
const K_ARGS_WS = TB_OWN + 2;

/** What a matched literal leads to (besides the shared kinds). */
const L_ARG = TL_OWN;

/** `functions.get_weather:0` → `get_weather` (null when there is no name or no counter). */
export function kimiName(id: string): string | null {
  const m = /^(?:functions\.)?(.+):\d+$/.exec(id);
  return m ? m[1]! : null;
}

export class KimiCandidate extends TokenBlockCandidate {
  private id = "";

  constructor(ctx: ScanContext) {
    super(ctx, TOKENS);
  }

  protected override stepOwn(c: string): Decision | null {
    switch (this.st) {
      case K_ID:
        if (!isWs(c) && c !== "<") {
          if (this.id.length >= MAX_NAME) return reject(1);
          this.id += c;
          return null;
        }
        if (this.id === "") return isWs(c) ? null : reject(1);
        {
          const name = kimiName(this.id);
          if (name === null || !this.ctx.tools.has(name)) return reject(1);
          this.name = name;
        }
        this.st = K_ID_WS;
        return this.step(c);
      case K_ID_WS:
        if (isWs(c)) return null;
        return c === "<" ? this.expect(ARG_BEGIN, L_ARG, c) : reject(1);
      case K_ARGS_WS:
        if (isWs(c)) return null;
        return this.startJson(c);
      default:
        return reject(1);
    }
  }

  protected override matched(kind: number): Decision | null {
    if (kind === L_ARG) {
      this.st = K_ARGS_WS;
      return null;
    }
    // TL_BEGIN
    this.id = "";
    this.st = K_ID;
    return null;
  }
}
