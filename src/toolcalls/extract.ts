/**
 * Tool calls written as TEXT by models served without a tool-call parser (vLLM, Ollama, llama.cpp)
 * → real OpenAI tool calls, in streaming. Pure: no I/O.
 *
 * Recognised (when the call names an offered tool):
 * - `<tool_call>…</tool_call>`, `<tools>…</tools>`, `<tool_calls>…</tool_calls>` (Hermes / Qwen /
 *   Qwen2.5-Coder) holding one or more items separated by whitespace or commas. Items: a JSON call
 *   object, a JSON array of call objects, a `<function=name>` block.
 * - Qwen3-Coder `<function=name><parameter=k>v</parameter>…</function>` (also without the outer
 *   tag) and Llama 3.1 `<function=name>{json}</function>`.
 * - Mistral `[TOOL_CALLS]` + JSON array/object, or `[TOOL_CALLS]name[ARGS]{…}` (optionally
 *   `name[CALL_ID]id[ARGS]{…}`).
 * - Llama 3 `<|python_tag|>` + JSON object(s) (`;` between several), optionally ended by
 *   `<|eom_id|>` / `<|eot_id|>`.
 * - A JSON call object or a JSON array of call objects standing on its own line(s): it starts a line
 *   (after blanks) and nothing but blanks follows it up to the line end.
 * - A fenced block (``` with no language, json, jsonc, json5, tool_call, tool_calls, tool, xml) whose
 *   content is ONLY call items.
 * A call object is `{"name", "arguments"|"parameters"}` (+ optional `"type":"function"`, `"id"`),
 * or `{"function": {"name", "arguments"|"parameters"}, "type"?: "function", "id"?}`. Arguments may be
 * an object, a JSON string holding an object, null or absent. Any other key means "not a call"
 * (so a package.json named like a tool is not one), and so does an `arguments` that is a JSON
 * Schema (`{"type":"object","properties":{…}}`: the model is echoing a tool definition).
 *
 * NOT a call (kept as text, byte for byte): JSON inside a sentence (on a line with other text),
 * anything between backticks of inline code, anything inside a code fence of another language, a name
 * that was not offered, malformed or truncated JSON, objects without a name or with other keys. A
 * block (tag, fence, array, python_tag run) is all-or-nothing: one item that is not a valid call
 * makes the whole block text. Tags/fences whose closing line is missing when the reply ENDS are
 * accepted if their items are complete.
 *
 * Whitespace: a call removes the blanks around it. Between prose before and prose after, the line
 * breaks of the blank run with more of them are kept (then the indentation of the prose after);
 * at the start or end of the reply the blanks are dropped. Blanks between consecutive calls are
 * dropped. Text that never touches a call is kept exactly.
 */
import { newCallId } from "../util/ids.js";
import { isWs } from "./json.js";
import {
  AngleCandidate,
  BracketCandidate,
  type Candidate,
  type Decision,
  FenceCandidate,
  LineJsonCandidate,
  type ScanContext,
} from "./scanners.js";
import type { RawCall } from "./shape.js";
import { SpecialTokenStripper, stripSpecialTokens } from "./special-tokens.js";

export { SpecialTokenStripper, stripSpecialTokens };

export interface ExtractedCall {
  id: string;
  name: string;
  /** JSON text of an object. */
  arguments: string;
}

export type ExtractEvent = { type: "text"; text: string } | { type: "call"; call: ExtractedCall };

export interface ExtractorOptions {
  /** Names of the tools the request offered. A name not in this list is never a call. */
  tools: readonly string[];
  /** Maximum calls per reply (default 20); calls beyond it are dropped (not turned into text) and counted. */
  maxCalls?: number;
  /** Id generator; default: "call" + 24 random letters/digits. Ids must be letters and digits only. */
  newId?: () => string;
  /**
   * Also remove leaked chat-template special tokens (see `stripSpecialTokens`) while streaming,
   * before calls are looked for. Default false. `<|python_tag|>` is still recognised as a call
   * opener (and dropped when what follows is not a call).
   */
  stripSpecialTokens?: boolean;
}

/** Longest text held while undecided; a candidate that grows beyond it is released as text. */
export const MAX_HELD = 256 * 1024;
export const DEFAULT_MAX_CALLS = 20;

/** "call" + 24 random letters/digits. */
export const defaultNewId = newCallId;

/** Number of '\n' in a blank run. */
function newlines(ws: string): number {
  let n = 0;
  for (let i = 0; i < ws.length; i++) if (ws.charCodeAt(i) === 10) n++;
  return n;
}

/**
 * The blanks kept where calls were removed between prose `before` and prose `after`: the line
 * breaks of the run with more of them (ties: the one after), followed by the indentation of the
 * prose that comes after. Without line breaks: the longer run.
 */
function pickSeparator(before: string, after: string): string {
  const nb = newlines(before);
  const na = newlines(after);
  if (nb === 0 && na === 0) return before.length >= after.length ? before : after;
  const lines = nb > na ? before : after;
  const head = lines.slice(0, lines.lastIndexOf("\n") + 1);
  return head + after.slice(after.lastIndexOf("\n") + 1);
}

/** Characters that need the per-character path: blanks and possible call openers. */
const SPECIAL = /[ \t\r\n<[{`]/g;

/** Code-fence line states (for finding the closing fence). */
const CL_START = 0;
const CL_TICKS = 1;
const CL_AFTER = 2;
const CL_OTHER = 3;

export class ToolCallExtractor {
  private readonly ctx: ScanContext;
  private readonly passthrough: boolean;
  private readonly maxCalls: number;
  private readonly newId: () => string;
  private readonly stripper: SpecialTokenStripper | null;

  private cand: Candidate | null = null;
  private held = "";

  /** Inside a non-call code fence of this many backticks (0: not in one). */
  private code = 0;
  private codeLine = CL_START;
  private codeTicks = 0;

  private lineStart = true;
  private tickRun = 0;
  private inlineTicks = 0;

  private pendingWs = "";
  private afterCall = false;
  private wsBefore = "";
  private hasContent = false;

  private out = "";
  private events: ExtractEvent[] = [];
  private nCalls = 0;
  private dropped = 0;
  private ended = false;

  constructor(opts: ExtractorOptions) {
    this.ctx = { tools: new Set(opts.tools), strip: opts.stripSpecialTokens === true };
    this.passthrough = opts.tools.length === 0;
    const max = opts.maxCalls ?? DEFAULT_MAX_CALLS;
    this.maxCalls = Number.isNaN(max) ? DEFAULT_MAX_CALLS : Math.max(0, Math.floor(max));
    this.newId = opts.newId ?? defaultNewId;
    this.stripper = opts.stripSpecialTokens ? new SpecialTokenStripper(["python_tag"]) : null;
  }

  /** How many calls were dropped by maxCalls. */
  get droppedCalls(): number {
    return this.dropped;
  }

  /** Feed the next piece of model text; returns what can be decided now, in order. */
  push(text: string): ExtractEvent[] {
    if (this.ended) throw new Error("ToolCallExtractor: push() after end()");
    const s = this.stripper ? this.stripper.push(text) : text;
    if (this.passthrough) return s ? [{ type: "text", text: s }] : [];
    this.feed(s);
    return this.take();
  }

  /** End of the reply: flush everything still held (undecided text becomes text). */
  end(): ExtractEvent[] {
    if (this.ended) return [];
    const s = this.stripper ? this.stripper.end() : "";
    this.ended = true;
    if (this.passthrough) return s ? [{ type: "text", text: s }] : [];
    this.feed(s);
    while (this.cand) {
      const again = this.decide(this.cand.eof());
      if (again) this.feed(again);
    }
    if (!this.afterCall) this.out += this.pendingWs;
    this.pendingWs = "";
    return this.take();
  }

  private take(): ExtractEvent[] {
    this.flushText();
    const ev = this.events;
    this.events = [];
    return ev;
  }

  private flushText(): void {
    if (this.out) {
      this.events.push({ type: "text", text: this.out });
      this.out = "";
    }
  }

  private feed(text: string): void {
    if (!text) return;
    const stack: { s: string; i: number }[] = [{ s: text, i: 0 }];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.i >= top.s.length) {
        stack.pop();
        continue;
      }
      if (this.cand === null && this.code === 0 && this.tickRun === 0 && !this.afterCall) {
        // Fast path: a run of characters that cannot open a call and are not blanks.
        SPECIAL.lastIndex = top.i;
        const j = SPECIAL.exec(top.s)?.index ?? top.s.length;
        if (j > top.i + 1) {
          this.out += this.pendingWs + top.s.slice(top.i, j);
          this.pendingWs = "";
          top.i = j;
          this.lineStart = false;
          this.hasContent = true;
          continue;
        }
      }
      const again = this.step(top.s[top.i++]!);
      if (again) stack.push({ s: again, i: 0 });
    }
  }

  /** One character; returns characters to process again, if any. */
  private step(c: string): string | null {
    const cand = this.cand;
    if (cand) {
      this.held += c;
      const d = this.held.length > MAX_HELD ? { calls: null, refeed: 0, code: cand.codeOnReject(), drop: 0 } : cand.step(c);
      return d ? this.decide(d) : null;
    }
    if (this.code) this.codeChar(c);
    else this.normalChar(c);
    return null;
  }

  private decide(d: Decision): string | null {
    const held = this.held;
    this.held = "";
    this.cand = null;
    const max = d.calls ? held.length : held.length - 1;
    const k = Math.max(0, Math.min(d.refeed, max));
    const body = held.slice(0, held.length - k);
    const rest = held.slice(held.length - k);
    if (d.calls) {
      this.emitCalls(d.calls);
      this.lineStart = false;
    } else {
      const text = d.drop > 0 ? body.slice(d.drop) : body;
      if (d.code > 0) {
        for (let i = 0; i < text.length; i++) this.rawChar(text[i]!);
        this.enterCode(d.code, body);
      } else {
        for (let i = 0; i < text.length; i++) this.plainChar(text[i]!);
      }
    }
    return rest || null;
  }

  private enterCode(ticks: number, released: string): void {
    this.code = ticks;
    this.codeTicks = 0;
    const nl = released.lastIndexOf("\n");
    this.codeLine = nl >= 0 && /^[ \t\r]*$/.test(released.slice(nl + 1)) ? CL_START : CL_OTHER;
  }

  private emitCalls(calls: RawCall[]): void {
    if (!this.afterCall) {
      this.wsBefore = this.pendingWs;
      this.afterCall = true;
    }
    this.pendingWs = "";
    for (const c of calls) {
      if (this.nCalls >= this.maxCalls) {
        this.dropped++;
        continue;
      }
      this.nCalls++;
      this.flushText();
      this.events.push({ type: "call", call: { id: this.makeId(), name: c.name, arguments: JSON.stringify(c.args) } });
    }
  }

  private makeId(): string {
    const id = this.newId().replace(/[^A-Za-z0-9]/g, "");
    return id || defaultNewId();
  }

  // ----- text emission (blank handling around calls)

  private wsChar(c: string): void {
    this.pendingWs += c;
    if (this.pendingWs.length > MAX_HELD) {
      // Pathological run of blanks: let it through.
      this.out += this.pendingWs;
      this.pendingWs = "";
      this.afterCall = false;
    }
  }

  private textChar(c: string): void {
    if (this.afterCall) {
      if (this.hasContent) this.out += pickSeparator(this.wsBefore, this.pendingWs);
      this.afterCall = false;
      this.wsBefore = "";
      this.pendingWs = "";
    } else if (this.pendingWs) {
      this.out += this.pendingWs;
      this.pendingWs = "";
    }
    this.out += c;
    this.hasContent = true;
  }

  private rawChar(c: string): void {
    if (isWs(c)) this.wsChar(c);
    else this.textChar(c);
  }

  // ----- normal text

  private finishTicks(): void {
    if (this.inlineTicks === 0) this.inlineTicks = this.tickRun;
    else if (this.inlineTicks === this.tickRun) this.inlineTicks = 0;
    this.tickRun = 0;
  }

  /** A character of text that is known not to open a call. */
  private plainChar(c: string): void {
    if (this.tickRun > 0 && c !== "`") this.finishTicks();
    if (isWs(c)) {
      this.wsChar(c);
      if (c === "\n") {
        this.lineStart = true;
        this.inlineTicks = 0;
      }
      return;
    }
    if (c === "`") this.tickRun++;
    this.textChar(c);
    this.lineStart = false;
  }

  private normalChar(c: string): void {
    if (this.tickRun > 0 && c !== "`") this.finishTicks();
    if (this.inlineTicks === 0) {
      let cand: Candidate | null = null;
      switch (c) {
        case "<":
          cand = new AngleCandidate(this.ctx);
          break;
        case "[":
          cand = new BracketCandidate(this.ctx, this.lineStart);
          break;
        case "{":
          if (this.lineStart) cand = new LineJsonCandidate(this.ctx, c);
          break;
        case "`":
          if (this.lineStart) cand = new FenceCandidate(this.ctx);
          break;
        default:
          break;
      }
      if (cand) {
        this.cand = cand;
        this.held = c;
        return;
      }
    }
    this.plainChar(c);
  }

  // ----- inside a non-call code fence: everything is text; watch for the closing fence

  private codeChar(c: string): void {
    if (isWs(c)) {
      this.wsChar(c);
      if (c === "\n") {
        if (this.codeLine === CL_AFTER || (this.codeLine === CL_TICKS && this.codeTicks >= this.code)) {
          this.code = 0;
          this.lineStart = true;
          this.inlineTicks = 0;
          this.tickRun = 0;
        }
        this.codeLine = CL_START;
        this.codeTicks = 0;
      } else if (this.codeLine === CL_TICKS) {
        this.codeLine = this.codeTicks >= this.code ? CL_AFTER : CL_OTHER;
      }
      return;
    }
    this.textChar(c);
    if (c === "`" && (this.codeLine === CL_START || this.codeLine === CL_TICKS)) {
      this.codeLine = CL_TICKS;
      this.codeTicks++;
    } else {
      this.codeLine = CL_OTHER;
    }
  }
}

/**
 * Whole-text convenience: content is the prose left after removing calls (blank lines the calls
 * leave behind are removed, see the module comment), calls in order. Same result as streaming.
 */
export function extractToolCalls(text: string, opts: ExtractorOptions): { content: string; calls: ExtractedCall[] } {
  const x = new ToolCallExtractor(opts);
  let content = "";
  const calls: ExtractedCall[] = [];
  for (const ev of [...x.push(text), ...x.end()]) {
    if (ev.type === "text") content += ev.text;
    else calls.push(ev.call);
  }
  return { content, calls };
}
