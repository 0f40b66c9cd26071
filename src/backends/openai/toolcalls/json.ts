/**
 * Incremental JSON scanning for the tool-call extractor.
 *
 * `JsonScanner` is fed one character at a time and decides, as early as the text allows, whether
 * the value it sees can still become a tool call of the expected shape. It only checks structure
 * (and the few keys/names that make a call); the final word is `JSON.parse` + `normalizeCall()`
 * in shape.ts once the value is complete.
 */

/** What the next JSON value must be. */
export const V_ANY = 0;
/**
 * A call object: `{"name":..,"arguments"|"parameters":..}`, `{"function":{..},"type":"function"}`
 * or `{"function_call":{..}}`.
 */
export const V_CALL = 1;
/** The `function` member of a call object. */
const V_FN = 2;
/** An array whose elements are call objects. */
export const V_CALLS = 3;
/** `arguments` / `parameters`: an object, a string (holding JSON) or null. */
const V_ARGS = 4;
/** A tool name: a string that must be one of the offered tools. */
const V_NAME = 5;
/** Any string. */
const V_STR = 6;
/** Any object (arguments given on their own, e.g. Mistral `[ARGS]{...}`). */
export const V_OBJ = 7;

/** Roles of open containers. */
const C_ANY = 0;
const C_CALL = 1;
const C_FN = 2;
const C_CALLS = 3;

const S_VALUE = 0;
const S_OBJ_FIRST = 1;
const S_OBJ_KEY = 2;
const S_COLON = 3;
const S_AFTER = 4;
const S_STR = 5;
const S_NUM = 6;
const S_LIT = 7;
const S_ARR_FIRST = 8;
const S_DONE = 9;

/** String kinds: plain, an object key that must be checked, a tool name. */
const K_PLAIN = 0;
const K_KEY = 1;
const K_NAME = 2;

const CALL_KEYS: ReadonlySet<string> = new Set([
  "name",
  "arguments",
  "parameters",
  "function",
  "function_call",
  "type",
  "id",
]);
const FN_KEYS: ReadonlySet<string> = new Set(["name", "arguments", "parameters"]);

const MAX_DEPTH = 256;
const MAX_KEY = 300;

interface Frame {
  arr: boolean;
  role: number;
  key: string;
}

export function isWs(c: string): boolean {
  return c === " " || c === "\n" || c === "\r" || c === "\t";
}

function decodeJsonString(raw: string): string | undefined {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return undefined;
  }
}

export const MORE = 0;
export const DONE = 1;
export const REJECT = -1;

/**
 * Feed characters with `step()`: MORE (0) while undecided, DONE (1) when the character closed the
 * top-level value (the character is part of it), REJECT (-1) when the text cannot be a value of the
 * expected shape (the character is NOT part of it).
 */
export class JsonScanner {
  /** The text consumed so far. */
  text = "";
  private st = S_VALUE;
  private readonly stack: Frame[] = [];
  private valRole: number;
  private strKind = K_PLAIN;
  private acc = "";
  private esc = false;
  private lit = "";
  private litI = 0;

  constructor(
    private readonly tools: ReadonlySet<string>,
    role: number,
  ) {
    this.valRole = role;
  }

  step(c: string): number {
    this.text += c;
    switch (this.st) {
      case S_STR:
        return this.strChar(c);
      case S_VALUE:
        if (isWs(c)) return MORE;
        return this.startValue(c);
      case S_AFTER:
        return this.afterChar(c);
      case S_OBJ_FIRST:
      case S_OBJ_KEY:
        if (isWs(c)) return MORE;
        if (c === '"') {
          const top = this.stack[this.stack.length - 1]!;
          this.beginString(top.role === C_CALL || top.role === C_FN ? K_KEY : K_PLAIN);
          this.keyPending = true;
          return MORE;
        }
        if (c === "}" && this.st === S_OBJ_FIRST) {
          this.stack.pop();
          return this.endValue();
        }
        return REJECT;
      case S_COLON:
        if (isWs(c)) return MORE;
        if (c !== ":") return REJECT;
        this.valRole = this.roleForKey();
        this.st = S_VALUE;
        return MORE;
      case S_NUM:
        if ((c >= "0" && c <= "9") || c === "." || c === "e" || c === "E" || c === "+" || c === "-") return MORE;
        // The number ended at the previous character; this one belongs to the container.
        this.endValue();
        return this.afterChar(c);
      case S_LIT:
        if (c !== this.lit[this.litI]) return REJECT;
        this.litI++;
        return this.litI === this.lit.length ? this.endValue() : MORE;
      case S_ARR_FIRST:
        if (isWs(c)) return MORE;
        if (c === "]") {
          this.stack.pop();
          return this.endValue();
        }
        this.valRole = this.stack[this.stack.length - 1]!.role === C_CALLS ? V_CALL : V_ANY;
        return this.startValue(c);
      default:
        return REJECT;
    }
  }

  private keyPending = false;

  /**
   * At the end of the reply: the text of a top-level array whose elements are complete and whose
   * closing bracket (only) is missing, closed; otherwise null.
   */
  closedArrayText(): string | null {
    if (this.stack.length !== 1 || !this.stack[0]!.arr) return null;
    if (this.st === S_AFTER) return this.text + "]";
    if (this.st === S_VALUE) {
      const t = this.text.trimEnd();
      return t.endsWith(",") ? t.slice(0, -1) + "]" : null;
    }
    return null;
  }

  private beginString(kind: number): void {
    this.st = S_STR;
    this.strKind = kind;
    this.acc = "";
    this.esc = false;
  }

  private strChar(c: string): number {
    if (this.esc) {
      this.esc = false;
      if (this.strKind !== K_PLAIN) this.acc += c;
      return MORE;
    }
    if (c === "\\") {
      this.esc = true;
      if (this.strKind !== K_PLAIN) this.acc += c;
      return MORE;
    }
    if (c === '"') {
      if (this.keyPending) {
        this.keyPending = false;
        const top = this.stack[this.stack.length - 1]!;
        if (this.strKind === K_KEY) {
          const key = decodeJsonString(this.acc);
          if (key === undefined || !(top.role === C_CALL ? CALL_KEYS : FN_KEYS).has(key)) return REJECT;
          top.key = key;
        } else {
          top.key = "";
        }
        this.st = S_COLON;
        return MORE;
      }
      if (this.strKind === K_NAME) {
        const name = decodeJsonString(this.acc);
        if (name === undefined || !this.tools.has(name)) return REJECT;
      }
      return this.endValue();
    }
    if (this.strKind !== K_PLAIN) {
      this.acc += c;
      if (this.acc.length > MAX_KEY) return REJECT;
    }
    return MORE;
  }

  /** The role of the value of the current key in the innermost object. */
  private roleForKey(): number {
    const top = this.stack[this.stack.length - 1]!;
    if (top.role !== C_CALL && top.role !== C_FN) return V_ANY;
    switch (top.key) {
      case "name":
        return V_NAME;
      case "function":
      case "function_call":
        return V_FN;
      case "arguments":
      case "parameters":
        return V_ARGS;
      case "type":
        return V_STR;
      default:
        return V_ANY;
    }
  }

  private push(arr: boolean, role: number): number {
    if (this.stack.length >= MAX_DEPTH) return REJECT;
    this.stack.push({ arr, role, key: "" });
    this.st = arr ? S_ARR_FIRST : S_OBJ_FIRST;
    return MORE;
  }

  private startValue(c: string): number {
    switch (this.valRole) {
      case V_CALL:
        return c === "{" ? this.push(false, C_CALL) : REJECT;
      case V_FN:
        return c === "{" ? this.push(false, C_FN) : REJECT;
      case V_CALLS:
        return c === "[" ? this.push(true, C_CALLS) : REJECT;
      case V_OBJ:
        return c === "{" ? this.push(false, C_ANY) : REJECT;
      case V_NAME:
        if (c !== '"') return REJECT;
        this.beginString(K_NAME);
        return MORE;
      case V_STR:
        if (c !== '"') return REJECT;
        this.beginString(K_PLAIN);
        return MORE;
      case V_ARGS:
        if (c === "{") return this.push(false, C_ANY);
        if (c === '"') {
          this.beginString(K_PLAIN);
          return MORE;
        }
        if (c === "n") return this.beginLit("null");
        return REJECT;
      default:
        break;
    }
    if (c === "{") return this.push(false, C_ANY);
    if (c === "[") return this.push(true, C_ANY);
    if (c === '"') {
      this.beginString(K_PLAIN);
      return MORE;
    }
    if (c === "-" || (c >= "0" && c <= "9")) {
      this.st = S_NUM;
      return MORE;
    }
    if (c === "t") return this.beginLit("true");
    if (c === "f") return this.beginLit("false");
    if (c === "n") return this.beginLit("null");
    return REJECT;
  }

  private beginLit(lit: string): number {
    this.st = S_LIT;
    this.lit = lit;
    this.litI = 1;
    return MORE;
  }

  private endValue(): number {
    if (this.stack.length === 0) {
      this.st = S_DONE;
      return DONE;
    }
    this.st = S_AFTER;
    return MORE;
  }

  private afterChar(c: string): number {
    if (isWs(c)) return MORE;
    const top = this.stack[this.stack.length - 1]!;
    if (c === ",") {
      if (top.arr) {
        this.valRole = top.role === C_CALLS ? V_CALL : V_ANY;
        this.st = S_VALUE;
      } else {
        this.st = S_OBJ_KEY;
      }
      return MORE;
    }
    if ((c === "]" && top.arr) || (c === "}" && !top.arr)) {
      this.stack.pop();
      return this.endValue();
    }
    return REJECT;
  }
}

/** Escape raw control characters inside JSON strings (models often write real newlines there). */
function escapeControlInStrings(text: string): string {
  let out = "";
  let inStr = false;
  let esc = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (inStr) {
      if (esc) esc = false;
      else if (c === "\\") esc = true;
      else if (c === '"') inStr = false;
      else if (c < " ") {
        out +=
          c === "\n"
            ? "\\n"
            : c === "\r"
              ? "\\r"
              : c === "\t"
                ? "\\t"
                : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
        continue;
      }
    } else if (c === '"') {
      inStr = true;
    }
    out += c;
  }
  return out;
}

/** JSON.parse that also accepts raw newlines/tabs inside strings. `undefined` when not JSON. */
export function parseJsonLenient(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    try {
      return JSON.parse(escapeControlInStrings(text));
    } catch {
      return undefined;
    }
  }
}
