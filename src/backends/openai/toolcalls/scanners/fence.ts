/**
 * Code fences: three or more backticks at the start of a line. With an info string of json /
 * jsonc / json5 / tool_call / tool_calls / tool / xml or none, the fence is a call block when its
 * content is ONLY call items (JSON call objects, JSON arrays of them, wrapper tags such as
 * `<tool_call>` / `<function_call>` / `<response>`, `<function=…>` / `<function name="…">` /
 * `<invoke name="…">` blocks) and it is closed by a fence line (or the reply ends after complete
 * items). Anything else makes it a code block whose content is never searched for calls.
 */
import { JsonScanner, MORE, REJECT, V_CALL, V_CALLS } from "../json.js";
import { callsFromJsonText, type RawCall } from "../shape.js";
import {
  accept,
  type Candidate,
  type Decision,
  isHws,
  Lit,
  LIT_FAIL,
  LIT_MORE,
  reject,
  type ScanContext,
  SUB_MORE,
  SUB_REJECT,
} from "./common.js";
import { type ItemScanner, ITEM_OPENERS, itemScanner, OPEN_TAGS, TagScanner } from "./tag.js";

const FENCE_ITEM_LITS: readonly string[] = [...OPEN_TAGS, ...ITEM_OPENERS];
const ITEM_SET: ReadonlySet<string> = new Set(ITEM_OPENERS);

const CALL_LANGS: ReadonlySet<string> = new Set([
  "",
  "json",
  "jsonc",
  "json5",
  "tool_call",
  "tool_calls",
  "tool",
  "xml",
]);

const K_TICKS = 0;
const K_INFO = 1;
const K_BODY = 2;
const K_JSON = 3;
const K_LIT = 4;
const K_TAG = 5;
const K_FUNC = 6;
const K_CLOSE_TICKS = 7;
const K_CLOSE_WS = 8;

const MAX_INFO = 100;

/** See the module comment. */
export class FenceCandidate implements Candidate {
  private st = K_TICKS;
  private ticks = 1;
  private info = "";
  private lineStart = false;
  private closeTicks = 0;
  private trailing = 0;
  private readonly calls: RawCall[] = [];
  private json: JsonScanner | null = null;
  private lit: Lit | null = null;
  private tag: TagScanner | null = null;
  private fn: ItemScanner | null = null;

  constructor(private readonly ctx: ScanContext) {}

  codeOnReject(): number {
    return this.st === K_TICKS ? 0 : this.ticks;
  }

  private toCode(refeed: number): Decision {
    return reject(refeed, this.ticks);
  }

  step(c: string): Decision | null {
    switch (this.st) {
      case K_TICKS:
        if (c === "`") {
          this.ticks++;
          return null;
        }
        if (this.ticks < 3) return reject(1);
        this.st = K_INFO;
        return this.step(c);
      case K_INFO:
        if (c === "\n") {
          const lang = this.info.trim().toLowerCase();
          if (!CALL_LANGS.has(lang)) return this.toCode(0);
          this.st = K_BODY;
          this.lineStart = true;
          return null;
        }
        // Backticks in the info string: not a fence at all (inline code).
        if (c === "`") return reject(1);
        this.info += c;
        if (this.info.length > MAX_INFO) return this.toCode(0);
        return null;
      case K_BODY:
        if (c === "\n") {
          this.lineStart = true;
          return null;
        }
        if (isHws(c)) return null;
        if (c === "," && this.calls.length > 0) {
          this.lineStart = false;
          return null;
        }
        if (c === "`" && this.lineStart) {
          this.closeTicks = 1;
          this.st = K_CLOSE_TICKS;
          return null;
        }
        this.lineStart = false;
        if (c === "{" || c === "[") {
          this.json = new JsonScanner(this.ctx.tools, c === "{" ? V_CALL : V_CALLS);
          this.json.step(c);
          this.st = K_JSON;
          return null;
        }
        if (c === "<") {
          this.lit = new Lit(FENCE_ITEM_LITS, c);
          this.st = K_LIT;
          return null;
        }
        return this.toCode(1);
      case K_JSON: {
        const json = this.json!;
        const r = json.step(c);
        if (r === MORE) return null;
        if (r === REJECT) return this.toCode(1);
        const calls = callsFromJsonText(json.text, this.ctx.tools);
        if (calls === null) return this.toCode(0);
        this.calls.push(...calls);
        this.json = null;
        this.st = K_BODY;
        return null;
      }
      case K_LIT: {
        const lit = this.lit!;
        const r = lit.step(c);
        if (r === LIT_MORE) return null;
        if (r === LIT_FAIL) return this.toCode(lit.partial.length);
        this.lit = null;
        if (ITEM_SET.has(lit.partial)) {
          this.fn = itemScanner(this.ctx, lit.partial, null);
          this.st = K_FUNC;
        } else {
          this.tag = new TagScanner(this.ctx, lit.partial.slice(1, -1));
          this.st = K_TAG;
        }
        return null;
      }
      case K_TAG: {
        const tag = this.tag!;
        const r = tag.step(c);
        if (r === SUB_MORE) return null;
        if (r === SUB_REJECT) return this.toCode(tag.rejectRefeed);
        this.calls.push(...tag.calls);
        this.tag = null;
        this.st = K_BODY;
        return null;
      }
      case K_FUNC: {
        const fn = this.fn!;
        const r = fn.step(c);
        if (r === SUB_MORE) return null;
        if (r === SUB_REJECT) return this.toCode(fn.rejectRefeed);
        this.calls.push(fn.result());
        this.fn = null;
        this.st = K_BODY;
        return null;
      }
      case K_CLOSE_TICKS:
        if (c === "`") {
          this.closeTicks++;
          return null;
        }
        // Fewer backticks than the opening fence: content, and not a call.
        if (this.closeTicks < this.ticks) return this.toCode(1);
        this.st = K_CLOSE_WS;
        this.trailing = 0;
        return this.step(c);
      case K_CLOSE_WS:
        if (isHws(c)) {
          this.trailing++;
          return null;
        }
        if (c === "\n") {
          // The fence is closed: a fence without calls is plain text and normal scanning resumes.
          return this.calls.length > 0 ? accept(this.calls, this.trailing + 1) : reject(this.trailing + 1);
        }
        // "```x" inside the block is not a closing fence: content that is not a call.
        return this.toCode(1);
      default:
        return this.toCode(1);
    }
  }

  eof(): Decision {
    if (this.calls.length > 0) {
      switch (this.st) {
        case K_BODY:
          return accept(this.calls);
        case K_CLOSE_TICKS:
          if (this.closeTicks >= this.ticks) return accept(this.calls);
          break;
        case K_CLOSE_WS:
          return accept(this.calls, this.trailing);
        case K_TAG:
          if (this.tag!.eofOk()) return accept([...this.calls, ...this.tag!.calls]);
          break;
        case K_FUNC:
          if (this.fn!.eofOk()) return accept([...this.calls, this.fn!.result()]);
          break;
        default:
          break;
      }
    }
    return reject(0, this.st === K_TICKS ? 0 : this.ticks);
  }
}
