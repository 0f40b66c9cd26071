/**
 * Wrapper tags holding call items: Hermes / Qwen `<tool_call>`, `<tools>`, `<tool_calls>` (also
 * MiniMax M1), llama.cpp's Hermes 2 Pro alternatives `<function_call>`, `<tool>`, `<response>`,
 * `<json>`, `<xml>`, `<JSON>`, Seed-OSS `<seed:tool_call>`, MiniMax M2 `<minimax:tool_call>`.
 */
import { JsonScanner, MORE, REJECT, V_CALL, V_CALLS } from "../json.js";
import { callsFromClosedArray, callsFromJsonText, type RawCall } from "../shape.js";
import {
  isIdentStart,
  isWs,
  Lit,
  LIT_FAIL,
  LIT_MORE,
  type ScanContext,
  SUB_DONE,
  SUB_DONE_OUTER,
  SUB_MORE,
  SUB_REJECT,
} from "./common.js";
import { FUNCTION_ATTR_OPEN, FUNCTION_OPEN, FunctionScanner } from "./function.js";
import { GlmScanner, INVOKE_OPEN, InvokeScanner } from "./xml-items.js";

export const TAG_NAMES: readonly string[] = [
  "tool_call",
  "tools",
  "tool_calls",
  "function_call",
  "tool",
  "response",
  "json",
  "xml",
  "JSON",
  "seed:tool_call",
  "minimax:tool_call",
];
export const OPEN_TAGS: readonly string[] = TAG_NAMES.map((t) => `<${t}>`);
/** Item openers that start with '<' (inside tags and fences, and on their own). */
export const ITEM_OPENERS: readonly string[] = [FUNCTION_OPEN, FUNCTION_ATTR_OPEN, INVOKE_OPEN];

/** A nested item scanner. */
export interface ItemScanner {
  rejectRefeed: number;
  step(c: string): number;
  eofOk(): boolean;
  result(): RawCall;
}

/** The scanner for an item whose opener literal (one of ITEM_OPENERS) has just matched. */
export function itemScanner(ctx: ScanContext, opener: string, outerClose: string | null): ItemScanner {
  if (opener === INVOKE_OPEN) return new InvokeScanner(ctx);
  return new FunctionScanner(ctx, outerClose, opener === FUNCTION_ATTR_OPEN);
}

const T_BODY = 0;
const T_LIT = 1;
const T_JSON = 2;
const T_ITEM = 3;

/**
 * Scans what follows an opening tag: one or more call items (JSON object, JSON array of call
 * objects, `<function=…>` / `<function name="…">` / `<invoke name="…">` blocks, a GLM item in
 * `<tool_call>`) separated by whitespace or commas, then the closing tag.
 */
export class TagScanner {
  rejectRefeed = 1;
  readonly calls: RawCall[] = [];
  private st = T_BODY;
  private lit: Lit | null = null;
  private json: JsonScanner | null = null;
  private item: ItemScanner | null = null;
  private readonly close: string;
  private readonly lits: readonly string[];

  constructor(
    private readonly ctx: ScanContext,
    private readonly tag: string,
  ) {
    this.close = `</${tag}>`;
    this.lits = [this.close, ...ITEM_OPENERS];
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
          this.lit = new Lit(this.lits, c);
          this.st = T_LIT;
          return SUB_MORE;
        }
        if (this.tag === "tool_call" && this.calls.length === 0 && isIdentStart(c)) {
          this.item = new GlmScanner(this.ctx, this.close, c);
          this.st = T_ITEM;
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
        this.item = itemScanner(this.ctx, lit.partial, this.close);
        this.st = T_ITEM;
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
      case T_ITEM: {
        const item = this.item!;
        const r = item.step(c);
        if (r === SUB_MORE) return SUB_MORE;
        if (r === SUB_REJECT) return this.fail(item.rejectRefeed);
        this.calls.push(item.result());
        this.item = null;
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
      case T_JSON: {
        const calls = callsFromClosedArray(this.json!.closedArrayText(), this.ctx.tools);
        if (calls === null) return false;
        this.calls.push(...calls);
        return true;
      }
      case T_ITEM:
        if (!this.item!.eofOk()) return false;
        this.calls.push(this.item!.result());
        this.item = null;
        this.st = T_BODY;
        return true;
      default:
        return false;
    }
  }
}
