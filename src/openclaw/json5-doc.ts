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
  return p.map((s, i) => (typeof s === "number" ? `[${s}]` : /^[A-Za-z_$][\w$]*$/.test(s) ? (i ? `.${s}` : s) : `[${JSON.stringify(s)}]`)).join("");
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
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

/** A parsed JSON5 document whose root is an object. */
export class Json5Doc {
  private constructor(
    private root: JsonObjectNode,
    /** The file was empty or a bare `{}`: new content is written as plain pretty JSON. */
    private blank: boolean,
  ) {}

  static parse(text: string): Json5Doc {
    const trimmed = text.replace(/^\uFEFF/, "").trim();
    if (trimmed === "" || trimmed === "{}") return new Json5Doc(JsonParser.parse("{}", JsonObjectNode), true);
    let node: JsonValueNode;
    try {
      node = JsonParser.parse(text.replace(/^\uFEFF/, ""));
    } catch (err) {
      if (err instanceof JsonParseError) {
        const start = err.location.start;
        throw new Json5SyntaxError(`${err.message} (line ${start.line}, column ${start.column})`, start.line, start.column);
      }
      throw new Json5SyntaxError((err as Error).message);
    }
    if (!(node instanceof JsonObjectNode)) throw new Json5SyntaxError("the top level is not an object");
    return new Json5Doc(node, false);
  }

  /** The whole document as plain data. */
  toJSON(): Record<string, unknown> {
    return this.root.toJSON() as Record<string, unknown>;
  }

  toString(): string {
    if (this.blank) {
      const value = this.toJSON();
      return Object.keys(value).length ? `${JSON.stringify(value, null, 2)}\n` : "{}\n";
    }
    return this.root.toString();
  }

  private node(p: JsonPath): JsonValueNode | undefined {
    let cur: JsonValueNode = this.root;
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

  has(p: JsonPath): boolean {
    return this.node(p) !== undefined;
  }

  get(p: JsonPath): unknown {
    return this.node(p)?.toJSON();
  }

  /**
   * Set the value at `p`, creating missing parent objects. Returns the paths of the objects it had to
   * create (outermost first), so an uninstall can remove them again. Setting an equal value is a no-op.
   */
  set(p: JsonPath, value: unknown): { created: JsonPath[]; changed: boolean } {
    if (!p.length) throw new Error("cannot replace the whole document");
    const created: JsonPath[] = [];
    let cur: JsonValueNode = this.root;
    for (let i = 0; i < p.length - 1; i++) {
      const seg = p[i]!;
      const here = p.slice(0, i + 1);
      if (typeof seg === "number") {
        if (!(cur instanceof JsonArrayNode) || seg >= cur.elements.length) throw new Error(`${formatJsonPath(here)} does not exist`);
        cur = cur.get(seg);
        continue;
      }
      if (!(cur instanceof JsonObjectNode)) throw new Error(`${formatJsonPath(p.slice(0, i))} is not an object`);
      if (!cur.has(seg)) {
        cur.set(seg, {});
        created.push(here);
      }
      cur = cur.get(seg);
      if (!(cur instanceof JsonObjectNode) && typeof p[i + 1] === "string") throw new Error(`${formatJsonPath(here)} is not an object`);
    }
    const last = p[p.length - 1]!;
    if (typeof last === "number") {
      if (!(cur instanceof JsonArrayNode)) throw new Error(`${formatJsonPath(p.slice(0, -1))} is not a list`);
      if (deepEqual(cur.elements[last]?.toJSON(), value)) return { created, changed: false };
      cur.set(last, value as never);
      return { created, changed: true };
    }
    if (!(cur instanceof JsonObjectNode)) throw new Error(`${formatJsonPath(p.slice(0, -1))} is not an object`);
    if (cur.has(last) && deepEqual(cur.get(last).toJSON(), value)) return { created, changed: created.length > 0 };
    cur.set(last, value as never);
    return { created, changed: true };
  }

  /** Remove the property at `p` (the last segment must be a key). Returns whether it existed. */
  delete(p: JsonPath): boolean {
    const last = p[p.length - 1];
    if (typeof last !== "string") throw new Error("delete needs a key path");
    const parent = this.node(p.slice(0, -1));
    if (!(parent instanceof JsonObjectNode) || !parent.has(last)) return false;
    parent.delete(last);
    return true;
  }

  /** Remove the object at `p` when it exists and has no properties left. */
  deleteIfEmptyObject(p: JsonPath): boolean {
    const n = this.node(p);
    if (!(n instanceof JsonObjectNode) || n.properties.length > 0) return false;
    return this.delete(p);
  }
}
