/**
 * Chat-template special tokens that local models leak into their text: `<|im_start|>`,
 * `<|im_end|>`, `<|eot_id|>`, `<|endoftext|>`, `<|end|>`, DeepSeek's full-width
 * `<｜end▁of▁sentence｜>`, Gemma's `<start_of_turn>` / `<end_of_turn>`.
 *
 * Recognised tokens:
 * - `<|NAME|>` with NAME = 1-64 of [A-Za-z0-9_]
 * - `<｜NAME｜>` (full-width bars) with NAME = 1-64 characters other than ｜ < > and whitespace
 * - `<start_of_turn>`, `<end_of_turn>`
 * A role header that the template puts after a start token is removed with it:
 * `<|im_start|>assistant\n`, `<start_of_turn>model\n`, `<|start_header_id|>assistant<|end_header_id|>`
 * (roles: system, user, assistant, tool, model, developer, ipython).
 * Everything else is kept exactly.
 */

const ROLES: ReadonlySet<string> = new Set(["system", "user", "assistant", "tool", "model", "developer", "ipython"]);
const GEMMA: readonly string[] = ["<start_of_turn>", "<end_of_turn>"];
const END_HEADER = "<|end_header_id|>";

const ASCII_FULL = /^<\|([A-Za-z0-9_]{1,64})\|>$/;
const ASCII_PREFIX = /^<(?:\|(?:[A-Za-z0-9_]{0,64}\|?)?)?$/;
const WIDE_FULL = /^<｜([^｜<>\s]{1,64})｜>$/;
const WIDE_PREFIX = /^<(?:｜(?:[^｜<>\s]{0,64}｜?)?)?$/;

const N_NORMAL = 0;
const N_TOKEN = 1;
const N_ROLE_NL = 2;
const N_HDR = 3;
const N_HDR_END = 4;

/** `undefined`: may still become a token; `null`: cannot; string: the complete token's name. */
function tokenState(buf: string): string | null | undefined {
  let m = ASCII_FULL.exec(buf);
  if (m) return m[1]!;
  m = WIDE_FULL.exec(buf);
  if (m) return m[1]!;
  for (const g of GEMMA) {
    if (g === buf) return g.slice(1, -1);
    if (g.startsWith(buf)) return undefined;
  }
  if (ASCII_PREFIX.test(buf) || WIDE_PREFIX.test(buf)) return undefined;
  return null;
}

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
  private role = "";
  private out = "";
  private readonly keep: ReadonlySet<string>;

  /** `keep`: token names (without brackets, e.g. "python_tag") to leave in the text. */
  constructor(keep: readonly string[] = []) {
    this.keep = new Set(keep);
  }

  push(text: string): string {
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
        const name = tokenState(this.buf);
        if (name === undefined) return null;
        if (name === null) {
          // Release all but the last character, which may open a token itself.
          this.out += this.buf.slice(0, -1);
          this.st = N_NORMAL;
          this.buf = "";
          return c;
        }
        if (this.keep.has(name)) this.out += this.buf;
        this.buf = "";
        this.role = "";
        this.st = name === "im_start" || name === "start_of_turn" ? N_ROLE_NL : name === "start_header_id" ? N_HDR : N_NORMAL;
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
