/**
 * Tool calls written as TEXT by models served without a tool-call parser (vLLM, SGLang, Ollama,
 * llama.cpp) → real OpenAI tool calls, in streaming. Pure: no I/O. No flag: every format below is
 * looked for at once. docs/TOOLCALL_FORMATS.md lists each shape with the parser it was taken from.
 *
 * Recognised (when the call names an offered tool):
 * - Wrapper tags holding call items separated by blanks or commas: `<tool_call>`, `<tools>`,
 *   `<tool_calls>` (Hermes, Qwen, MiniMax M1), `<function_call>`, `<tool>`, `<response>`, `<json>`,
 *   `<xml>`, `<JSON>` (llama.cpp), `<seed:tool_call>` (Seed-OSS), `<minimax:tool_call>` (MiniMax
 *   M2). Items: a JSON call object, a JSON array of them, `<function=name>` blocks (Qwen3-Coder
 *   parameters or Llama 3.1 JSON), llama.cpp's `<function name="name">`, MiniMax
 *   `<invoke name="name"><parameter name="k">v</parameter></invoke>`, and in `<tool_call>` a GLM-4.5
 *   item `name<arg_key>k</arg_key><arg_value>v</arg_value>`. The function and invoke blocks also
 *   count on their own.
 * - Marker tokens: Mistral `[TOOL_CALLS]` + JSON (junk on the marker's line before it skipped) or
 *   `name[ARGS]{…}`; Llama `<|python_tag|>` + JSON
 *   call object(s) (`;` between), a pythonic list, a builtin `name.call(k=v)`, or raw code for an
 *   offered `python` / `code_interpreter` tool; Llama 4 `<|python_start|>` and LFM2
 *   `<|tool_call_start|>` + a pythonic list; Granite `<|tool_call|>` + JSON; InternLM
 *   `<|action_start|><|plugin|>` + JSON; Phi-4-mini `functools[…]` (at a word start); DeepSeek V3 / R1 / V3.1
 *   `<｜tool▁calls▁begin｜>…`; Kimi K2 `<|tool_calls_section_begin|>…`; gpt-oss Harmony
 *   `<|channel|>commentary to=functions.name …<|message|>{…}<|call|>`.
 * - Pythonic call lists `[get_weather(city="Paris"), get_time()]` anywhere in the text, unless the
 *   sentence before presents it as an example (the word list below). Python literal arguments: see
 *   scanners/python.ts.
 * - A JSON call object, `;`-separated call objects, or a JSON array of call objects (xLAM and
 *   others) at the start of a line — or in a sentence, under the rule below — followed by the end
 *   of the line, the end of the reply, or blanks and the first letter of a new sentence. A JSON
 *   array left unclosed when the reply ends counts if its elements are complete calls.
 * - A fenced block (``` with no language, json, jsonc, json5, tool_call, tool_calls, tool, xml)
 *   whose content is ONLY call items.
 * A call object is `{"name", "arguments"|"parameters"}` (+ optional `"type":"function"`, `"id"`),
 * or `{"function"|"function_call": {"name", "arguments"|"parameters"}, "type"?, "id"?}`. Arguments
 * may be an object, a JSON string holding an object, null or absent. Any other key means "not a
 * call" (so a package.json named like a tool is not one), and so does an `arguments` that is a JSON
 * Schema (`{"type":"object","properties":{…}}`: the model is echoing a tool definition).
 *
 * A call object may also follow, on its line, a first object that reads as a broken call (see
 * scanners/json-run.ts).
 *
 * JSON IN A SENTENCE (Llama 3 JSON as vLLM's `llama3_json` finds it) counts only when it stands
 * between sentences: (1) the text before it on its line ends with `:` (or `：。！？`), or with `.`
 * `!` `?` and a blank; (2) the sentence that ends there (from the previous `.!?。！？` + blank; at
 * most 200 characters are looked at) does not present it as an example: none of the words example(s),
 * e.g., i.e., for instance, such as, look(s) like, like this, like so, format(s/ted), syntax, schema,
 * template, sample, pattern, would look, should look, 例如, 比如, 示例, 格式; (3) after the object
 * (or the `;`/`,`/blank-separated objects) come only blanks to the end of the line or reply, or
 * blanks and an uppercase letter (or a letter of a script without case) that starts the next
 * sentence. Braces and JSON fragments in that next sentence are text. So a call object written as a
 * package.json (other keys), an echoed schema, or a JSON example in an explanation stays text.
 *
 * NOT a call (kept as text, byte for byte): JSON elsewhere in a sentence, anything between backticks
 * of inline code, anything inside a code fence of another language, anything inside a reasoning block
 * that opens the reply (`<think>…</think>`, `<seed:think>…</seed:think>`), a name that was not
 * offered (`say_hello` never matches `say_hello_world`), malformed or truncated JSON, objects
 * without a name or with other keys. A block (tag, fence, array, list, token section, `;` run) is
 * all-or-nothing: one item that is not a valid call makes the whole block text (except a malformed
 * call of an offered tool in a pythonic list: dropped, its good siblings kept). Tags, fences and
 * token sections whose closing part is missing when the reply ENDS are accepted if their items are
 * complete.
 *
 * With `stripSpecialTokens`, call-marker tokens that were not part of a call are removed afterwards
 * (a Harmony header without a `functions.` recipient is removed whole, leaving its message text).
 *
 * Whitespace: a call removes the blanks around it. Between prose before and prose after, the line
 * breaks of the blank run with more of them are kept (then the indentation of the prose after);
 * at the start or end of the reply the blanks are dropped. Blanks between consecutive calls are
 * dropped. Text that never touches a call is kept exactly.
 */
import { newCallId } from "../../../core/util/ids.js";
import { isWs } from "./json.js";
import { AngleCandidate } from "./scanners/angle.js";
import { BracketCandidate } from "./scanners/bracket.js";
import type { Candidate, Decision, ScanContext } from "./scanners/common.js";
import { FenceCandidate } from "./scanners/fence.js";
import { jsonMayStartAfter, JsonRunCandidate, SENTENCE_WINDOW } from "./scanners/json-run.js";
import { FunctoolsCandidate } from "./scanners/markers.js";
import type { RawCall } from "./shape.js";
import { CALL_MARKER_TOKENS, SpecialTokenStripper, stripSpecialTokens } from "./special-tokens.js";
import { isWordCode, maybeFunctools, pickSeparator } from "./text.js";

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
   * Also remove leaked chat-template special tokens (see `stripSpecialTokens`) while streaming.
   * Default false. The tokens that open or structure a call (`<|python_tag|>`, DeepSeek's, Kimi's,
   * Harmony's, …) are still recognised, and removed from the text when they were not part of a call.
   */
  stripSpecialTokens?: boolean;
}

/** Longest text held while undecided; a candidate that grows beyond it is released as text. */
export const MAX_HELD = 256 * 1024;
const NO_TOKENS: readonly string[] = [];
export const DEFAULT_MAX_CALLS = 20;

/** "call" + 24 random letters/digits. */
export const defaultNewId = newCallId;

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
  /** Strips the call-marker tokens that `stripper` let through, from the text around calls (made on first use). */
  private markerStripper: SpecialTokenStripper | null = null;
  private readonly stripMarkers: boolean;

  private cand: Candidate | null = null;
  private held = "";

  /** Inside a non-call code fence of this many backticks (0: not in one). */
  private code = 0;
  private codeLine = CL_START;
  private codeTicks = 0;

  /** Inside a reasoning block opening the reply: the literal that closes it (null: not in one). */
  private think: string | null = null;
  private thinkMatch = 0;

  private lineStart = true;
  /** The next `{` follows an invalid JSON object on its line and may open a call object. */
  private jsonNext = false;
  private tickRun = 0;
  private inlineTicks = 0;
  private prevWord = false;
  /** The end of the current line's emitted text (at least SENTENCE_WINDOW characters of it). */
  private lineTail = "";

  private pendingWs = "";
  private afterCall = false;
  private wsBefore = "";
  private hasContent = false;
  private sawCall = false;

  private out = "";
  private events: ExtractEvent[] = [];
  private nCalls = 0;
  private dropped = 0;
  private ended = false;

  constructor(opts: ExtractorOptions) {
    const tools = new Set(opts.tools);
    const strip = opts.stripSpecialTokens === true;
    this.ctx = {
      tools,
      strip,
      codeTool: tools.has("python") ? "python" : tools.has("code_interpreter") ? "code_interpreter" : null,
    };
    this.passthrough = opts.tools.length === 0;
    const max = opts.maxCalls ?? DEFAULT_MAX_CALLS;
    this.maxCalls = Number.isNaN(max) ? DEFAULT_MAX_CALLS : Math.max(0, Math.floor(max));
    this.newId = opts.newId ?? defaultNewId;
    this.stripper = strip ? new SpecialTokenStripper(this.passthrough ? [] : CALL_MARKER_TOKENS) : null;
    this.stripMarkers = strip && !this.passthrough;
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
    return this.take(false);
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
    return this.take(true);
  }

  private take(final: boolean): ExtractEvent[] {
    this.flushText(final);
    const ev = this.events;
    this.events = [];
    return ev;
  }

  /** Emit the decided text; `final`: nothing may follow it in the same text run (a call or the end). */
  private flushText(final: boolean): void {
    let t = this.out;
    if (t) {
      this.out = "";
      const nl = t.lastIndexOf("\n");
      this.lineTail = nl >= 0 ? t.slice(nl + 1) : this.lineTail + t;
      if (this.lineTail.length > 2 * SENTENCE_WINDOW) this.lineTail = this.lineTail.slice(-SENTENCE_WINDOW);
    }
    if (this.stripMarkers) t = this.stripMarkerTokens(t, final);
    if (t) this.events.push({ type: "text", text: t });
  }

  /** Text without a '<' passes as is unless the marker stripper holds a token's start. */
  private stripMarkerTokens(t: string, final: boolean): string {
    let m = this.markerStripper;
    if (m === null || !m.holding) {
      if (t.indexOf("<") < 0) return t;
      m ??= this.markerStripper = new SpecialTokenStripper(NO_TOKENS, CALL_MARKER_TOKENS);
    }
    return m.push(t) + (final ? m.end() : "");
  }

  /** The end (at least SENTENCE_WINDOW characters) of the decided text before this position on its line. */
  private linePrefix(): string {
    // Emit a long decided run first: reading the end of a long concatenated string flattens it, and
    // doing that at every brace of a long line would be quadratic.
    if (this.out.length > 2 * SENTENCE_WINDOW) this.flushText(false);
    const o = this.out;
    let p = o.length >= SENTENCE_WINDOW ? o.slice(-SENTENCE_WINDOW) : this.lineTail.slice(-SENTENCE_WINDOW) + o;
    const nl = p.lastIndexOf("\n");
    if (nl >= 0) p = p.slice(nl + 1);
    return this.afterCall ? p : p + this.pendingWs;
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
      if (this.cand === null && this.code === 0 && this.tickRun === 0 && !this.afterCall && this.thinkMatch === 0) {
        // Fast path: a run of characters that cannot open a call and are not blanks.
        SPECIAL.lastIndex = top.i;
        const j = SPECIAL.exec(top.s)?.index ?? top.s.length;
        if (
          j > top.i + 1 &&
          (this.think !== null || this.prevWord || top.s.charCodeAt(top.i) !== 102 || !maybeFunctools(top.s, top.i, j))
        ) {
          this.out += this.pendingWs + top.s.slice(top.i, j);
          this.pendingWs = "";
          top.i = j;
          this.lineStart = false;
          this.hasContent = true;
          this.prevWord = isWordCode(top.s.charCodeAt(j - 1));
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
      const d =
        this.held.length > MAX_HELD
          ? { calls: null, refeed: 0, code: cand.codeOnReject(), drop: 0, think: null }
          : cand.step(c);
      return d ? this.decide(d) : null;
    }
    if (this.think !== null) this.thinkChar(c);
    else if (this.code) this.codeChar(c);
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
        this.jsonNext = d.jsonNext === true;
        if (d.think !== null) {
          this.think = d.think;
          this.thinkMatch = 0;
        }
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
    this.sawCall = true;
    this.prevWord = false;
    for (const c of calls) {
      if (this.nCalls >= this.maxCalls) {
        this.dropped++;
        continue;
      }
      this.nCalls++;
      this.flushText(true);
      this.events.push({ type: "call", call: { id: this.makeId(), name: c.name, arguments: JSON.stringify(c.args) } });
    }
  }

  private makeId(): string {
    const id = this.newId().replace(/[^A-Za-z0-9]/g, "");
    return id || defaultNewId();
  }

  // ----- text emission (blank handling around calls)

  private wsChar(c: string): void {
    this.prevWord = false;
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
    this.prevWord = isWordCode(c.charCodeAt(0));
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

  /** A JSON object may start here: at a line start, or between sentences. */
  private jsonMayStart(): boolean {
    return this.lineStart || jsonMayStartAfter(this.linePrefix());
  }

  private normalChar(c: string): void {
    const jsonNext = this.jsonNext;
    this.jsonNext = false;
    if (this.tickRun > 0 && c !== "`") this.finishTicks();
    if (this.inlineTicks === 0) {
      let cand: Candidate | null = null;
      switch (c) {
        case "<":
          cand = new AngleCandidate(this.ctx, !this.hasContent && !this.sawCall);
          break;
        case "[":
          cand = new BracketCandidate(this.ctx, this.lineStart ? "" : this.linePrefix());
          break;
        case "{":
          if (jsonNext || this.jsonMayStart()) cand = new JsonRunCandidate(this.ctx, c);
          break;
        case "`":
          if (this.lineStart) cand = new FenceCandidate(this.ctx);
          break;
        case "f":
          if (!this.prevWord) cand = new FunctoolsCandidate(this.ctx);
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

  // ----- inside a reasoning block: everything is text; watch for its closing tag

  private thinkChar(c: string): void {
    const lit = this.think!;
    if (c === lit[this.thinkMatch]) this.thinkMatch++;
    else this.thinkMatch = c === "<" ? 1 : 0;
    this.rawChar(c);
    if (this.thinkMatch === lit.length) {
      this.think = null;
      this.thinkMatch = 0;
      // A call may follow the block directly (`</think>[{…}]`).
      this.lineStart = true;
      this.inlineTicks = 0;
      this.tickRun = 0;
      this.prevWord = false;
    } else if (c === "\n") {
      this.lineStart = true;
    }
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
