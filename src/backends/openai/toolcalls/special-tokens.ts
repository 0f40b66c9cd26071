/**
 * Chat-template special tokens that local models leak into their text: `<|im_start|>`,
 * `<|im_end|>`, `<|eot_id|>`, `<|endoftext|>`, `<|end|>`, DeepSeek's full-width
 * `<｜end▁of▁sentence｜>`, Gemma's `<start_of_turn>` / `<end_of_turn>`.
 *
 * Recognised tokens:
 * - `<|NAME|>` with NAME = 1-64 of [A-Za-z0-9_]
 * - `<｜NAME｜>` (full-width bars) with NAME = 1-64 characters other than ｜ < > and whitespace
 * - `<start_of_turn>`, `<end_of_turn>`
 * The tool-call extractor keeps the tokens that open or structure a call (`CALL_MARKER_TOKENS`)
 * while it looks for calls, and strips the ones that were not part of a call afterwards.
 * A role header that the template puts after a start token is removed with it:
 * `<|im_start|>assistant\n`, `<start_of_turn>model\n`, `<|start_header_id|>assistant<|end_header_id|>`
 * (roles: system, user, assistant, tool, model, developer, ipython).
 * Everything else is kept exactly.
 */

/**
 * Token names (between the bars) that open or structure a tool call in some model family: Llama's
 * `<|python_tag|>` / `<|python_start|>`, LFM2, Granite, InternLM, Kimi K2, gpt-oss Harmony, DeepSeek.
 */
export const CALL_MARKER_TOKENS: readonly string[] = [
  "python_tag",
  "python_start",
  "tool_call_start",
  "tool_call",
  "action_start",
  "plugin",
  "action_end",
  "tool_calls_section_begin",
  "tool_call_section_begin",
  "tool_calls_section_end",
  "tool_call_section_end",
  "tool_call_begin",
  "tool_call_argument_begin",
  "tool_call_end",
  "start",
  "channel",
  "message",
  "constrain",
  "call",
  "tool▁calls▁begin",
  "tool_calls_begin",
  "tool▁calls",
  "tool▁call▁begin",
  "tool▁sep",
  "tool▁call▁end",
  "tool▁calls▁end",
];

const NONE: readonly string[] = [];
/** Sets of token names, built once per list (extractors are created per reply). */
const SETS = new WeakMap<readonly string[], ReadonlySet<string>>();
function setOf(names: readonly string[]): ReadonlySet<string> {
  let s = SETS.get(names);
  if (!s) {
    s = new Set(names);
    SETS.set(names, s);
  }
  return s;
}

const ROLES: ReadonlySet<string> = new Set(["system", "user", "assistant", "tool", "model", "developer", "ipython"]);
const GEMMA: readonly string[] = ["<start_of_turn>", "<end_of_turn>"];
const END_HEADER = "<|end_header_id|>";

/** Token kinds being read (after the '<'): `<|NAME|>`, `<｜NAME｜>`, Gemma's literals. */
const T_ASCII = 1;
const T_WIDE = 2;
const T_GEMMA = 3;
const MAX_TOKEN_NAME = 64;

function isAsciiNameChar(c: string): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || (c >= "0" && c <= "9") || c === "_";
}

function isWideNameChar(c: string): boolean {
  return c !== "｜" && c !== "<" && c !== ">" && !/\s/.test(c);
}

const N_NORMAL = 0;
const N_TOKEN = 1;
const N_ROLE_NL = 2;
const N_HDR = 3;
const N_HDR_END = 4;

function isLower(c: string): boolean {
  return c >= "a" && c <= "z";
}

/**
 * Streaming remover of special tokens. `push()` returns the text that is decided; a possible token
 * is held from its `<` until it is complete or impossible (at most ~70 characters).
 */
export class SpecialTokenStripper {
  private st = N_NORMAL;
  private buf = "";
  /** The token being read: its kind, its name so far, whether its closing bar was seen. */
  private tkind = 0;
  private tname = "";
  private tclosing = false;
  private role = "";
  private out = "";
  private readonly keep: ReadonlySet<string>;
  private readonly only: ReadonlySet<string> | null;

  /**
   * `keep`: token names (without brackets, e.g. "python_tag") to leave in the text. `only`: strip
   * these tokens and no others (no role headers either).
   */
  constructor(keep: readonly string[] = NONE, only?: readonly string[]) {
    this.keep = setOf(keep);
    this.only = only ? setOf(only) : null;
  }

  /** A possible token's start (or a role header) is held. */
  get holding(): boolean {
    return this.st !== N_NORMAL;
  }

  push(text: string): string {
    // Nothing held and no '<' in the text: nothing to strip (the common case, without the feed loop).
    if (this.st === N_NORMAL && text.indexOf("<") < 0) return text;
    this.feed(text);
    const out = this.out;
    this.out = "";
    return out;
  }

  /**
   * Release whatever is held (an unfinished token start is text). The stripper stays usable:
   * later `push()` calls start fresh, so `end()` may also be used to flush mid-stream.
   */
  end(): string {
    switch (this.st) {
      case N_TOKEN:
        this.out += this.buf;
        break;
      case N_ROLE_NL:
      case N_HDR:
        this.out += this.role;
        break;
      case N_HDR_END:
        this.out += this.role + this.buf;
        break;
      default:
        break;
    }
    this.st = N_NORMAL;
    this.buf = "";
    this.role = "";
    const out = this.out;
    this.out = "";
    return out;
  }

  private feed(text: string): void {
    // Explicit stack instead of recursion for re-processed characters.
    const stack: { s: string; i: number }[] = [{ s: text, i: 0 }];
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.i >= top.s.length) {
        stack.pop();
        continue;
      }
      if (this.st === N_NORMAL) {
        // Fast path: copy everything up to the next '<'.
        const j = top.s.indexOf("<", top.i);
        if (j < 0) {
          this.out += top.s.slice(top.i);
          top.i = top.s.length;
          continue;
        }
        this.out += top.s.slice(top.i, j);
        top.i = j;
      }
      const c = top.s[top.i++]!;
      const again = this.step(c);
      if (again) stack.push({ s: again, i: 0 });
    }
  }

  /** One character; returns characters to process again, if any. */
  private step(c: string): string | null {
    switch (this.st) {
      case N_NORMAL:
        if (c === "<") {
          this.st = N_TOKEN;
          this.buf = c;
        } else {
          this.out += c;
        }
        return null;
      case N_TOKEN: {
        this.buf += c;
        const name = this.tokenStep(c);
        if (name === undefined) return null;
        if (name === null) {
          // Release all but the last character, which may open a token itself.
          this.out += this.buf.slice(0, -1);
          this.st = N_NORMAL;
          this.buf = "";
          return c;
        }
        this.role = "";
        if (this.keep.has(name) || (this.only !== null && !this.only.has(name))) {
          this.out += this.buf;
          this.buf = "";
          this.st = N_NORMAL;
          return null;
        }
        this.buf = "";
        this.st =
          name === "im_start" || name === "start_of_turn" ? N_ROLE_NL : name === "start_header_id" ? N_HDR : N_NORMAL;
        return null;
      }
      case N_ROLE_NL:
        if (isLower(c) && this.role.length < 16) {
          this.role += c;
          return null;
        }
        if (c === "\r" && !this.role.endsWith("\r") && ROLES.has(this.role)) {
          this.role += c;
          return null;
        }
        if (c === "\n" && ROLES.has(this.role.replace(/\r$/, ""))) {
          this.role = "";
          this.st = N_NORMAL;
          return null;
        }
        return this.release(c);
      case N_HDR:
        if (isLower(c) && this.role.length < 16) {
          this.role += c;
          return null;
        }
        if (c === "<" && ROLES.has(this.role)) {
          this.buf = c;
          this.st = N_HDR_END;
          return null;
        }
        return this.release(c);
      case N_HDR_END:
        this.buf += c;
        if (this.buf === END_HEADER) {
          this.buf = "";
          this.role = "";
          this.st = N_NORMAL;
          return null;
        }
        if (END_HEADER.startsWith(this.buf)) return null;
        {
          const again = this.buf;
          this.buf = "";
          this.out += this.role;
          this.role = "";
          this.st = N_NORMAL;
          return again;
        }
      default:
        return null;
    }
  }

  /**
   * The token after one more character (already in `buf`): `undefined` may still become a token,
   * `null` cannot, a string is the complete token's name.
   */
  private tokenStep(c: string): string | null | undefined {
    if (this.buf.length === 2) {
      this.tname = "";
      this.tclosing = false;
      this.tkind = c === "|" ? T_ASCII : c === "｜" ? T_WIDE : 0;
      if (this.tkind !== 0) return undefined;
    }
    if (this.tkind === T_ASCII || this.tkind === T_WIDE) {
      const bar = this.tkind === T_ASCII ? "|" : "｜";
      if (this.tclosing) return c === ">" ? this.tname : null;
      if (c === bar) {
        if (this.tname === "") return null;
        this.tclosing = true;
        return undefined;
      }
      if (this.tname.length >= MAX_TOKEN_NAME || !(this.tkind === T_ASCII ? isAsciiNameChar(c) : isWideNameChar(c)))
        return null;
      this.tname += c;
      return undefined;
    }
    this.tkind = T_GEMMA;
    for (const g of GEMMA) {
      if (g === this.buf) return g.slice(1, -1);
      if (g.startsWith(this.buf)) return undefined;
    }
    return null;
  }

  private release(c: string): string {
    this.out += this.role;
    this.role = "";
    this.st = N_NORMAL;
    return c;
  }
}

/** Remove leaked chat-template special tokens (see the module comment); keeps ordinary text. */
export function stripSpecialTokens(text: string): string {
  const s = new SpecialTokenStripper();
  return s.push(text) + s.end();
}
