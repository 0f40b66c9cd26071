/**
 * A JSON parser that refuses what `JSON.parse` lets through silently: an object with a key twice
 * (JSON.parse keeps the last). For log lines, where a repeated key is a bug (one reader keeps the
 * first, another the last, a third refuses the line). Only what JSON allows; throws with the place.
 */
export function parseStrictJson(text: string): unknown {
  let i = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at ${i}: ${text.slice(Math.max(0, i - 20), i + 20)}`);
  };
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
  };
  const str = (): string => {
    const m = /^"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/.exec(text.slice(i));
    if (!m) fail("bad string");
    i += m![0].length;
    return JSON.parse(m![0]) as string;
  };
  const value = (): unknown => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const out: Record<string, unknown> = {};
      const seen = new Set<string>();
      ws();
      if (text[i] === "}") return (i++, out);
      for (;;) {
        ws();
        const key = str();
        if (seen.has(key)) fail(`key "${key}" twice`);
        seen.add(key);
        ws();
        if (text[i++] !== ":") fail("':' expected");
        out[key] = value();
        ws();
        const sep = text[i++];
        if (sep === "}") return out;
        if (sep !== ",") fail("',' or '}' expected");
      }
    }
    if (c === "[") {
      i++;
      const out: unknown[] = [];
      ws();
      if (text[i] === "]") return (i++, out);
      for (;;) {
        out.push(value());
        ws();
        const sep = text[i++];
        if (sep === "]") return out;
        if (sep !== ",") fail("',' or ']' expected");
      }
    }
    if (c === '"') return str();
    const m = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i));
    if (!m) fail("value expected");
    i += m![0].length;
    return JSON.parse(m![0]);
  };
  const v = value();
  ws();
  if (i !== text.length) fail("trailing text");
  return v;
}
