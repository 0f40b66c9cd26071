/**
 * Editing OpenClaw's config file (JSON5) in place. OpenClaw reads `openclaw.json` as JSON5, so a
 * user's file may hold comments, trailing commas, unquoted keys and single-quoted strings. Edits go
 * through a lossless concrete syntax tree (`@croct/json5-parser`): everything we do not touch keeps
 * its exact text (comments, spacing, quoting), and new entries copy the style of their neighbours.
 */
import { JsonArrayNode, JsonObjectNode, JsonParser, JsonParseError, type JsonValueNode } from "@croct/json5-parser";

export type JsonPath = ReadonlyArray<string | number>;

export class Json5SyntaxError extends Error {
  constructor(
    message: string,
    readonly line?: number,
    readonly column?: number,
  ) {
    super(message);
    this.name = "Json5SyntaxError";
  }
}

export function formatJsonPath(p: JsonPath): string {
  return p
    .map((s, i) =>
      typeof s === "number" ? `[${s}]` : /^[A-Za-z_$][\w$]*$/.test(s) ? (i ? `.${s}` : s) : `[${JSON.stringify(s)}]`,
    )
    .join("");
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    if (ka.length !== kb.length) return false;
    return ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

/** A parsed JSON5 document whose root is an object. */
export class Json5Doc {
  /**
   * The current text is the source of truth; every operation works on a fresh parse of it. Sets go
   * through the syntax tree (which copies the surrounding style); deletes splice the text directly
   * (the tree's own delete mis-places braces after a trailing comma).
   */
  private constructor(
    private text: string,
    /** The file was empty or a bare `{}`: new content is written as plain pretty JSON. */
    private blank: boolean,
    /** The text as read (given back unchanged when a blank document stays empty). */
    private readonly original: string,
  ) {}

  static parse(text: string): Json5Doc {
    const clean = text.replace(/^\uFEFF/, "");
    const trimmed = clean.trim();
    if (trimmed === "" || trimmed === "{}") return new Json5Doc("{}", true, text);
    parseRoot(clean);
    return new Json5Doc(clean, false, text);
  }

  /** The whole document as plain data. */
  toJSON(): Record<string, unknown> {
    return parseRoot(this.text).toJSON() as Record<string, unknown>;
  }

  toString(): string {
    if (this.blank) {
      const value = this.toJSON();
      return Object.keys(value).length ? `${JSON.stringify(value, null, 2)}\n` : this.original;
    }
    return this.original.startsWith("\uFEFF") ? `\uFEFF${this.text}` : this.text;
  }

  has(p: JsonPath): boolean {
    return findNode(parseRoot(this.text), p) !== undefined;
  }

  get(p: JsonPath): unknown {
    return findNode(parseRoot(this.text), p)?.toJSON();
  }

  /**
   * Set the value at `p`, creating missing parent objects. Returns the paths of the objects it had to
   * create (outermost first), so an uninstall can remove them again. Setting an equal value is a no-op.
   * Objects and lists are written laid out like the rest of the file (indent unit, key quoting,
   * trailing commas); a property inside a one-line object stays on one line.
   */
  set(p: JsonPath, value: unknown): { created: JsonPath[]; changed: boolean } {
    if (!p.length) throw new Error("cannot replace the whole document");
    const root = parseRoot(this.text);
    let cur: JsonValueNode = root;
    for (let i = 0; i < p.length - 1; i++) {
      const seg = p[i]!;
      const here = p.slice(0, i + 1);
      if (typeof seg === "number") {
        if (!(cur instanceof JsonArrayNode) || seg >= cur.elements.length)
          throw new Error(`${formatJsonPath(here)} does not exist`);
        cur = cur.get(seg);
        continue;
      }
      if (!(cur instanceof JsonObjectNode)) throw new Error(`${formatJsonPath(p.slice(0, i))} is not an object`);
      if (!cur.has(seg)) {
        // Create the missing objects in one go: {seg: {..: value}}.
        if (p.slice(i + 1).some((x) => typeof x === "number"))
          throw new Error(`${formatJsonPath(here)} does not exist`);
        let nested: unknown = value;
        for (let j = p.length - 1; j > i; j--) nested = { [p[j] as string]: nested };
        const created = p.slice(i, -1).map((_, k) => p.slice(0, i + k + 1));
        this.setProperty(p.slice(0, i), seg, nested);
        return { created, changed: true };
      }
      cur = cur.get(seg);
      if (!(cur instanceof JsonObjectNode) && typeof p[i + 1] === "string")
        throw new Error(`${formatJsonPath(here)} is not an object`);
    }
    const last = p[p.length - 1]!;
    if (typeof last === "number") {
      if (!(cur instanceof JsonArrayNode)) throw new Error(`${formatJsonPath(p.slice(0, -1))} is not a list`);
      if (deepEqual(cur.elements[last]?.toJSON(), value)) return { created: [], changed: false };
      cur.set(last, value as never);
      this.text = root.toString();
      return { created: [], changed: true };
    }
    if (!(cur instanceof JsonObjectNode)) throw new Error(`${formatJsonPath(p.slice(0, -1))} is not an object`);
    if (cur.has(last) && deepEqual(cur.get(last).toJSON(), value)) return { created: [], changed: false };
    this.setProperty(p.slice(0, -1), last, value);
    return { created: [], changed: true };
  }

  /** Set `key` of the (existing) object at `parentPath`. */
  private setProperty(parentPath: JsonPath, key: string, value: unknown): void {
    const complex =
      (Array.isArray(value) && value.length > 0) || (isPlainObject(value) && Object.keys(value).length > 0);
    let root = parseRoot(this.text);
    let parent = findNode(root, parentPath) as JsonObjectNode;
    const style = detectStyle(this.text);
    const objText = this.text.slice(parent.location.start.index, parent.location.end.index);
    if (!parent.has(key) && !this.blank && !objText.includes("\n")) {
      // A one-line object: insert `, key: value` by hand (the tree would eat the space before `}`).
      const entry = `${formatKey(key, style)}: ${formatInline(value, style)}`;
      const props = parent.properties;
      let at: number;
      let insert: string;
      if (props.length) {
        const end = props[props.length - 1]!.location.end.index;
        const comma = /^[ \t]*,/.exec(this.text.slice(end));
        at = comma ? end + comma[0].length : end;
        insert = comma ? ` ${entry},` : `, ${entry}`;
      } else {
        at = parent.location.start.index + 1;
        const close = parent.location.end.index - 1;
        this.text = this.text.slice(0, at) + this.text.slice(close);
        insert = ` ${entry} `;
      }
      this.text = this.text.slice(0, at) + insert + this.text.slice(at);
      parseRoot(this.text);
      return;
    }
    if (!complex || this.blank) {
      parent.set(key, value as never);
      this.text = root.toString();
      return;
    }
    if (!parent.has(key)) {
      // Let the tree place the new key (position, comma, key quoting), then write the value as text.
      parent.set(key, null);
      this.text = root.toString();
      root = parseRoot(this.text);
      parent = findNode(root, parentPath) as JsonObjectNode;
    }
    const prop = parent.properties.find((x) => x.key.toJSON() === key)!;
    const lineStart = this.text.lastIndexOf("\n", prop.location.start.index - 1) + 1;
    const before = this.text.slice(lineStart, prop.location.start.index);
    const ownLine = /^[ \t]*$/.test(before);
    const indent = /^[ \t]*/.exec(before)![0];
    const text = ownLine ? formatValue(value, indent, style) : formatInline(value, style);
    const v = prop.value.location;
    this.text = this.text.slice(0, v.start.index) + text + this.text.slice(v.end.index);
    parseRoot(this.text);
  }

  /** Remove the property at `p` (the last segment must be a key). Returns whether it existed. */
  delete(p: JsonPath): boolean {
    const last = p[p.length - 1];
    if (typeof last !== "string") throw new Error("delete needs a key path");
    const parent = findNode(parseRoot(this.text), p.slice(0, -1));
    if (!(parent instanceof JsonObjectNode) || !parent.has(last)) return false;
    const prop = parent.properties.find((x) => x.key.toJSON() === last)!;
    this.text = spliceOutProperty(
      this.text,
      prop.location.start.index,
      prop.location.end.index,
      parent.location.start.index,
      parent.location.end.index,
    );
    parseRoot(this.text); // never hand back a broken document
    return true;
  }

  /** Remove the object at `p` when it exists and has no properties left. */
  deleteIfEmptyObject(p: JsonPath): boolean {
    const n = findNode(parseRoot(this.text), p);
    if (!(n instanceof JsonObjectNode) || n.properties.length > 0) return false;
    return this.delete(p);
  }
}

function parseRoot(text: string): JsonObjectNode {
  let node: JsonValueNode;
  try {
    node = JsonParser.parse(text);
  } catch (err) {
    if (err instanceof JsonParseError) {
      const start = err.location.start;
      throw new Json5SyntaxError(
        `${err.message} (line ${start.line}, column ${start.column})`,
        start.line,
        start.column,
      );
    }
    throw new Json5SyntaxError((err as Error).message);
  }
  if (!(node instanceof JsonObjectNode)) throw new Json5SyntaxError("the top level is not an object");
  return node;
}

function findNode(root: JsonObjectNode, p: JsonPath): JsonValueNode | undefined {
  let cur: JsonValueNode = root;
  for (const seg of p) {
    if (typeof seg === "number") {
      if (!(cur instanceof JsonArrayNode) || seg < 0 || seg >= cur.elements.length) return undefined;
      cur = cur.get(seg);
    } else {
      if (!(cur instanceof JsonObjectNode) || !cur.has(seg)) return undefined;
      cur = cur.get(seg);
    }
  }
  return cur;
}

/** Skip whitespace and comments backwards from `i` (exclusive); returns the index of the previous significant char or -1. */
function prevSignificant(text: string, i: number, floor: number): number {
  let j = i - 1;
  while (j > floor) {
    const c = text[j]!;
    if (/\s/.test(c)) {
      j--;
      continue;
    }
    // end of a block comment
    if (c === "/" && text[j - 1] === "*") {
      const open = text.lastIndexOf("/*", j - 2);
      if (open < 0) return j;
      j = open - 1;
      continue;
    }
    // a line comment: this char may be inside `// ...` on its line
    const lineStart = text.lastIndexOf("\n", j) + 1;
    const lc = lineCommentStart(text.slice(lineStart, j + 1));
    if (lc >= 0) {
      j = lineStart + lc - 1;
      continue;
    }
    return j;
  }
  return -1;
}

/** Index of a `//` that starts a comment in this line fragment (outside strings), or -1. */
function lineCommentStart(line: string): number {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === "\\") i++;
      else if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === "/" && line[i + 1] === "/") return i;
    else if (c === "/" && line[i + 1] === "*") {
      const close = line.indexOf("*/", i + 2);
      if (close < 0) return -1;
      i = close + 1;
    }
  }
  return -1;
}

/**
 * Remove the property text [start, end) from an object spanning [objStart, objEnd): its own line(s)
 * when it sits on lines of its own, plus its comma; when it was the last property and had no comma,
 * the comma before it goes instead (JSON files have no trailing comma).
 */
function spliceOutProperty(text: string, start: number, end: number, objStart: number, objEnd: number): string {
  let e = end;
  let k = e;
  while (k < objEnd && (text[k] === " " || text[k] === "\t")) k++;
  let hadComma = false;
  if (text[k] === ",") {
    hadComma = true;
    e = k + 1;
  }
  let s = start;
  const lineStart = text.lastIndexOf("\n", s - 1) + 1;
  const ownLineBefore = /^[ \t]*$/.test(text.slice(lineStart, s));
  let after = e;
  while (after < objEnd && (text[after] === " " || text[after] === "\t")) after++;
  const ownLineAfter = text[after] === "\n" || (text[after] === "\r" && text[after + 1] === "\n");
  if (ownLineBefore && ownLineAfter) {
    s = lineStart;
    e = after + (text[after] === "\r" ? 2 : 1);
  } else if (hadComma) {
    e = after;
  }
  const lineMode = ownLineBefore && ownLineAfter;
  let out: string;
  if (hadComma) {
    out = text.slice(0, s) + text.slice(e);
  } else {
    const prev = prevSignificant(text, start, objStart);
    if (prev > objStart && text[prev] === ",") {
      // The last property without a trailing comma: the comma before it goes too. On lines of their
      // own, what lies between (newline, comments) stays; inline, the space before it goes.
      out = lineMode
        ? text.slice(0, prev) + text.slice(prev + 1, s) + text.slice(e)
        : text.slice(0, prev) + text.slice(e);
    } else {
      if (!lineMode) while (s > objStart + 1 && (text[s - 1] === " " || text[s - 1] === "\t")) s--;
      out = text.slice(0, s) + text.slice(e);
    }
  }
  return collapseEmpty(out, objStart, objEnd - (text.length - out.length));
}

/** `{` + only whitespace + `}` becomes `{}`. */
function collapseEmpty(text: string, objStart: number, objEnd: number): string {
  const inner = text.slice(objStart + 1, objEnd - 1);
  if (text[objStart] === "{" && text[objEnd - 1] === "}" && inner.length && /^\s*$/.test(inner)) {
    return text.slice(0, objStart + 1) + text.slice(objEnd - 1);
  }
  return text;
}

interface Style {
  unit: string;
  unquoted: boolean;
  trailingComma: boolean;
  eol: string;
}

/** How this file is laid out: indent unit, bare or quoted keys, trailing commas, line ends. */
function detectStyle(text: string): Style {
  const unit = /^([ \t]+)\S/m.exec(text)?.[1] ?? "  ";
  const bare = (text.match(/(?:^|[{,])[ \t]*[A-Za-z_$][\w$]*[ \t]*:/gm) ?? []).length;
  const quoted = (text.match(/(?:^|[{,])[ \t]*(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')[ \t]*:/gm) ?? []).length;
  return {
    unit: unit.startsWith("\t") ? "\t" : unit,
    unquoted: bare > quoted,
    trailingComma: /,[ \t]*\r?\n[ \t]*[}\]]/.test(text),
    eol: text.includes("\r\n") ? "\r\n" : "\n",
  };
}

function formatKey(k: string, style: Style): string {
  return style.unquoted && /^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k);
}

function formatInline(v: unknown, style: Style): string {
  if (Array.isArray(v)) return `[${v.map((x) => formatInline(x, style)).join(", ")}]`;
  if (isPlainObject(v)) {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined);
    return entries.length
      ? `{ ${entries.map(([k, x]) => `${formatKey(k, style)}: ${formatInline(x, style)}`).join(", ")} }`
      : "{}";
  }
  return JSON.stringify(v) ?? "null";
}

/** Multi-line layout; `indent` is the indentation of the line the value starts on. */
function formatValue(v: unknown, indent: string, style: Style): string {
  const inner = indent + style.unit;
  const tc = style.trailingComma ? "," : "";
  if (Array.isArray(v)) {
    if (!v.length) return "[]";
    const inline = formatInline(v, style);
    if (v.every((x) => x === null || typeof x !== "object") && inline.length <= 60) return inline;
    return `[${style.eol}${v.map((x) => inner + formatValue(x, inner, style)).join(`,${style.eol}`)}${tc}${style.eol}${indent}]`;
  }
  if (isPlainObject(v)) {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined);
    if (!entries.length) return "{}";
    return `{${style.eol}${entries.map(([k, x]) => `${inner}${formatKey(k, style)}: ${formatValue(x, inner, style)}`).join(`,${style.eol}`)}${tc}${style.eol}${indent}}`;
  }
  return JSON.stringify(v) ?? "null";
}
