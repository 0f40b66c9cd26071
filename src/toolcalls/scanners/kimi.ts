/**
 * Kimi K2 (vLLM / SGLang `kimi_k2`):
 *
 *   <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0 <|tool_call_argument_begin|>{"city": "Beijing"}<|tool_call_end|><|tool_calls_section_end|>
 *
 * The call id is `functions.NAME:N` or `NAME:N` (the name may contain dots); a bare counter (no
 * name) is not a call. The singular `<|tool_call_section_begin|>` is accepted too. All-or-nothing;
 * the section's end token may be missing when the reply ends or other text follows.
 */
import { JsonScanner, MORE, REJECT, V_OBJ } from "../json.js";
import { objectFromJsonText, type RawCall } from "../shape.js";
import { accept, type Candidate, type Decision, isWs, Lit, LIT_FAIL, LIT_MORE, MAX_NAME, reject, type ScanContext } from "./common.js";

export const KIMI_OPENERS: readonly string[] = ["<|tool_calls_section_begin|>", "<|tool_call_section_begin|>"];
const SECTION_END = ["<|tool_calls_section_end|>", "<|tool_call_section_end|>"];
const CALL_BEGIN = ["<|tool_call_begin|>"];
const ARG_BEGIN = ["<|tool_call_argument_begin|>"];
const CALL_END = ["<|tool_call_end|>"];
const NEXT = [...CALL_BEGIN, ...SECTION_END];

const K_WS0 = 0;
const K_LIT = 1;
const K_ID = 2;
const K_ID_WS = 3;
const K_ARGS_WS = 4;
const K_JSON = 5;
const K_AFTER = 6;
const K_BETWEEN = 7;

const L_BEGIN = 0;
const L_ARG = 1;
const L_END = 2;
const L_NEXT = 3;

/** `functions.get_weather:0` → `get_weather` (null when there is no name or no counter). */
export function kimiName(id: string): string | null {
  const m = /^(?:functions\.)?(.+):\d+$/.exec(id);
  return m ? m[1]! : null;
}

export class KimiCandidate implements Candidate {
  private st = K_WS0;
  private lit: Lit | null = null;
  private litKind = L_BEGIN;
  private id = "";
  private name = "";
  private json: JsonScanner | null = null;
  private args: Record<string, unknown> | null = null;
  private readonly calls: RawCall[] = [];
  private pending = 0;

  constructor(private readonly ctx: ScanContext) {}

  private expect(lits: readonly string[], kind: number, c: string): null {
    this.lit = new Lit(lits, c);
    this.litKind = kind;
    this.st = K_LIT;
    return null;
  }

  step(c: string): Decision | null {
    switch (this.st) {
      case K_WS0:
        if (isWs(c)) return null;
        return c === "<" ? this.expect(CALL_BEGIN, L_BEGIN, c) : reject(1);
      case K_LIT:
        return this.litStep(c);
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
        if (c !== "{") return reject(1);
        this.json = new JsonScanner(this.ctx.tools, V_OBJ);
        this.json.step(c);
        this.st = K_JSON;
        return null;
      case K_JSON: {
        const r = this.json!.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return reject(1);
        this.args = objectFromJsonText(this.json!.text);
        if (this.args === null) return reject(0);
        this.st = K_AFTER;
        return null;
      }
      case K_AFTER:
        if (isWs(c)) return null;
        return c === "<" ? this.expect(CALL_END, L_END, c) : reject(1);
      case K_BETWEEN:
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
      case L_ARG:
        this.st = K_ARGS_WS;
        return null;
      case L_END:
        this.calls.push({ name: this.name, args: this.args! });
        this.args = null;
        this.pending = 0;
        this.st = K_BETWEEN;
        return null;
      case L_NEXT:
        if (SECTION_END.includes(lit.partial)) return accept(this.calls);
        this.id = "";
        this.st = K_ID;
        return null;
      default:
        this.id = "";
        this.st = K_ID;
        return null;
    }
  }

  eof(): Decision {
    const complete = this.st === K_AFTER || (this.st === K_LIT && this.litKind === L_END);
    if (complete && this.args !== null) return accept([...this.calls, { name: this.name, args: this.args }]);
    if (this.st === K_BETWEEN) return accept(this.calls, this.pending);
    if (this.st === K_LIT && this.litKind === L_NEXT) return accept(this.calls, this.pending + this.lit!.partial.length);
    return reject(0);
  }

  codeOnReject(): number {
    return 0;
  }
}
