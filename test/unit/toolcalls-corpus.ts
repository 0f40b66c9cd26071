/**
 * Corpus for the tool-call extractor: hand-written realistic model outputs plus programmatic
 * variations (every format × call sets × call-object shapes × surrounding prose × newline styles),
 * and negative cases (kept as text, byte for byte).
 */

import { FAMILY_CASES, FAMILY_FORMATS } from "./toolcalls-corpus-families.js";
import { SHAPE_CASES } from "./toolcalls-corpus-shapes.js";

export type Args = Record<string, unknown>;

export interface ExpectedCall {
  name: string;
  args: Args;
}

export interface CorpusCase {
  name: string;
  input: string;
  /** Offered tools (default TOOLS). */
  tools?: readonly string[];
  content: string;
  calls: ExpectedCall[];
  stripSpecialTokens?: boolean;
  /** Part of the exhaustive split sample. */
  sample?: boolean;
  /** Category label for the sample coverage check. */
  kind: string;
  /** Where the shape was taken from (repository + path), for cases from public parser suites. */
  source?: string;
}

export const TOOLS: readonly string[] = [
  "read",
  "exec",
  "write",
  "edit",
  "web_search",
  "message",
  "sessions_list",
  "memory_search",
];

// ---------------------------------------------------------------------------------------------
// Call sets

const CALL_SETS: { id: string; calls: ExpectedCall[] }[] = [
  { id: "read", calls: [{ name: "read", args: { path: "/tmp/a.txt" } }] },
  { id: "exec", calls: [{ name: "exec", args: { command: "ls -la /home/user", timeout: 30 } }] },
  { id: "unicode", calls: [{ name: "write", args: { path: "/tmp/ü.txt", content: "héllo wörld ✓ 日本語 🚀" } }] },
  {
    id: "escapes",
    calls: [
      {
        name: "write",
        args: { path: "C:\\Users\\me\\x.txt", content: 'say "hi" </tool_call> {"name":"read"}\nline2\ttab' },
      },
    ],
  },
  {
    id: "nested",
    calls: [
      {
        name: "web_search",
        args: {
          query: "weather in Zürich",
          count: 3,
          options: { safe: true, langs: ["en", "de"] },
          deep: { a: { b: { c: [1, 2, { d: null }] } } },
        },
      },
    ],
  },
  { id: "noargs", calls: [{ name: "sessions_list", args: {} }] },
  {
    id: "two",
    calls: [
      { name: "read", args: { path: "/etc/hosts" } },
      { name: "read", args: { path: "/etc/passwd" } },
    ],
  },
  {
    id: "three",
    calls: [
      { name: "exec", args: { command: "git status" } },
      { name: "read", args: { path: "README.md" } },
      { name: "memory_search", args: { query: "deploy notes", limit: 5 } },
    ],
  },
];

// ---------------------------------------------------------------------------------------------
// Call-object shapes (JSON formats)

type Shape = (c: ExpectedCall) => unknown;
export interface ShapeDef {
  id: string;
  shape: Shape;
  pretty?: boolean;
}
const SHAPES: ShapeDef[] = [
  { id: "arguments", shape: (c) => ({ name: c.name, arguments: c.args }) },
  { id: "arguments-string", shape: (c) => ({ name: c.name, arguments: JSON.stringify(c.args) }) },
  { id: "parameters", shape: (c) => ({ name: c.name, parameters: c.args }) },
  {
    id: "openai-wrapper",
    shape: (c) => ({ type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } }),
  },
  { id: "function-wrapper", shape: (c) => ({ function: { name: c.name, arguments: c.args } }) },
  { id: "with-id", shape: (c) => ({ id: "call_0001", name: c.name, arguments: c.args }) },
  { id: "pretty", shape: (c) => ({ name: c.name, arguments: c.args }), pretty: true },
  // OpenAI's legacy `function_call` field, as models copy it into fenced JSON.
  {
    id: "function_call-wrapper",
    shape: (c) => ({ function_call: { name: c.name, arguments: JSON.stringify(c.args) } }),
  },
];

// ---------------------------------------------------------------------------------------------
// Formats

export interface Format {
  id: string;
  /** Calls are recognised mid-line (explicit markers). */
  inline: boolean;
  /** Uses SHAPES (JSON call objects). */
  json: boolean;
  /** Raw (unescaped) argument strings end up in the text (XML formats). */
  raw?: boolean;
  /** All calls of a reply are ONE block (all-or-nothing); see ONE_BLOCK for the older formats. */
  oneBlock?: boolean;
  /** Uses chat-template tokens: also generated with stripSpecialTokens. */
  tokens?: boolean;
  /** Where the shape was taken from. */
  source?: string;
  /** Positions strictly inside the first call (default: inside its first JSON object). */
  trunc?: (body: string) => [number, number] | null;
  render: (calls: ExpectedCall[], shape: ShapeDef) => string;
}

const js = (v: unknown, pretty = false): string => (pretty ? JSON.stringify(v, null, 2) : JSON.stringify(v));
const obj = (c: ExpectedCall, s: (typeof SHAPES)[number]): string => js(s.shape(c), s.pretty);
const lines = (calls: ExpectedCall[], s: (typeof SHAPES)[number]): string => calls.map((c) => obj(c, s)).join("\n");

function paramText(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}
function xmlFunction(c: ExpectedCall, compact = false): string {
  const nl = compact ? "" : "\n";
  const params = Object.entries(c.args)
    .map(([k, v]) => `<parameter=${k}>${nl}${paramText(v)}${nl}</parameter>`)
    .join(nl);
  return `<function=${c.name}>${nl}${params}${params ? nl : ""}</function>`;
}

const FORMATS: Format[] = [
  {
    id: "tool_call-each",
    inline: true,
    json: true,
    render: (cs, s) => cs.map((c) => `<tool_call>\n${obj(c, s)}\n</tool_call>`).join("\n"),
  },
  {
    id: "tool_call-one-tag",
    inline: true,
    json: true,
    render: (cs, s) => `<tool_call>\n${lines(cs, s)}\n</tool_call>`,
  },
  {
    id: "tool_call-compact",
    inline: true,
    json: true,
    render: (cs, s) => cs.map((c) => `<tool_call>${obj(c, s)}</tool_call>`).join(""),
  },
  { id: "tools-tag", inline: true, json: true, render: (cs, s) => `<tools>\n${lines(cs, s)}\n</tools>` },
  {
    id: "tool_calls-tag-array",
    inline: true,
    json: true,
    render: (cs, s) =>
      `<tool_calls>\n${js(
        cs.map((c) => s.shape(c)),
        s.pretty,
      )}\n</tool_calls>`,
  },
  { id: "bare-lines", inline: false, json: true, render: (cs, s) => lines(cs, s) },
  { id: "bare-blank-lines", inline: false, json: true, render: (cs, s) => cs.map((c) => obj(c, s)).join("\n\n") },
  { id: "array", inline: false, json: true, render: (cs, s) => `[${cs.map((c) => js(s.shape(c))).join(", ")}]` },
  {
    id: "array-pretty",
    inline: false,
    json: true,
    render: (cs, s) =>
      js(
        cs.map((c) => s.shape(c)),
        true,
      ),
  },
  { id: "fence-json", inline: false, json: true, render: (cs, s) => "```json\n" + lines(cs, s) + "\n```" },
  {
    id: "fence-plain-array",
    inline: false,
    json: true,
    render: (cs, s) =>
      "```\n" +
      js(
        cs.map((c) => s.shape(c)),
        s.pretty,
      ) +
      "\n```",
  },
  {
    id: "fence-per-call",
    inline: false,
    json: true,
    render: (cs, s) => cs.map((c) => "```json\n" + obj(c, s) + "\n```").join("\n"),
  },
  {
    id: "fence-xml-tags",
    inline: false,
    json: true,
    render: (cs, s) => "```xml\n" + cs.map((c) => `<tool_call>\n${obj(c, s)}\n</tool_call>`).join("\n") + "\n```",
  },
  { id: "mistral-array", inline: true, json: true, render: (cs, s) => `[TOOL_CALLS] ${js(cs.map((c) => s.shape(c)))}` },
  {
    id: "mistral-args",
    inline: true,
    json: false,
    render: (cs) => cs.map((c) => `[TOOL_CALLS]${c.name}[ARGS]${js(c.args)}`).join(""),
  },
  {
    id: "mistral-call-id",
    inline: true,
    json: false,
    render: (cs) => cs.map((c, i) => `[TOOL_CALLS]${c.name}[CALL_ID]a1B2c3D4${i}[ARGS]${js(c.args)}`).join(""),
  },
  {
    id: "python_tag",
    inline: true,
    json: false,
    render: (cs) =>
      "<|python_tag|>" + cs.map((c) => js({ name: c.name, parameters: c.args })).join("; ") + "<|eom_id|>",
  },
  {
    id: "python_tag-eot",
    inline: true,
    json: false,
    render: (cs) =>
      "<|python_tag|>" + cs.map((c) => js({ name: c.name, parameters: c.args })).join("\n") + "<|eot_id|>",
  },
  {
    id: "llama-function",
    inline: true,
    json: false,
    render: (cs) => cs.map((c) => `<function=${c.name}>${js(c.args)}</function>`).join("\n"),
  },
  {
    id: "qwen3-xml",
    inline: true,
    json: false,
    raw: true,
    render: (cs) => cs.map((c) => `<tool_call>\n${xmlFunction(c)}\n</tool_call>`).join("\n"),
  },
  {
    id: "qwen3-xml-one-tag",
    inline: true,
    json: false,
    raw: true,
    render: (cs) => `<tool_call>\n${cs.map((c) => xmlFunction(c)).join("\n")}\n</tool_call>`,
  },
  {
    id: "qwen3-xml-bare",
    inline: true,
    json: false,
    raw: true,
    render: (cs) => cs.map((c) => xmlFunction(c)).join("\n"),
  },
  {
    id: "qwen3-xml-compact",
    inline: true,
    json: false,
    raw: true,
    render: (cs) => cs.map((c) => `<tool_call>${xmlFunction(c, true)}</tool_call>`).join(""),
  },
  ...FAMILY_FORMATS,
];

// ---------------------------------------------------------------------------------------------
// Prose contexts

/** Mirror of the extractor's rule: line breaks of the run with more of them (ties: after), then the indentation after. */
export function pickSep(a: string, b: string): string {
  const n = (s: string): number => s.split("\n").length - 1;
  if (n(a) === 0 && n(b) === 0) return a.length >= b.length ? a : b;
  const lines = n(a) > n(b) ? a : b;
  return lines.slice(0, lines.lastIndexOf("\n") + 1) + b.slice(b.lastIndexOf("\n") + 1);
}

interface Context {
  id: string;
  pre: string;
  ws1: string;
  ws2: string;
  post: string;
  /** Only for formats recognised mid-line. */
  inlineOnly?: boolean;
}

const CONTEXTS: Context[] = [
  { id: "alone", pre: "", ws1: "", ws2: "", post: "" },
  { id: "prose-before", pre: "I'll check that for you.", ws1: "\n", ws2: "", post: "" },
  { id: "prose-after", pre: "", ws1: "", ws2: "\n", post: "Done." },
  {
    id: "both",
    pre: "Let me look at the files first.",
    ws1: "\n\n",
    ws2: "\n\n",
    post: "Then I will summarise what I find.",
  },
  { id: "blank-padding", pre: "", ws1: "  \n\n", ws2: "\n \n", post: "" },
  { id: "unicode-prose", pre: "Über 日本 🚀 — voilà:", ws1: "\n", ws2: "\n", post: "" },
  { id: "indented-after-list", pre: "Plan:\n1. read\n2. run", ws1: "\n\n", ws2: "\n", post: "OK." },
  { id: "same-line", pre: "Sure!", ws1: " ", ws2: " ", post: "Done.", inlineOnly: true },
];

function expectedContent(ctx: Context): string {
  if (ctx.pre && ctx.post) return ctx.pre + pickSep(ctx.ws1, ctx.ws2) + ctx.post;
  return ctx.pre || ctx.post;
}

function crlfArgs(args: Args): Args {
  const out: Args = {};
  for (const [k, v] of Object.entries(args)) out[k] = typeof v === "string" ? v.replace(/\n/g, "\r\n") : v;
  return out;
}

/** Strings that the XML formats would turn into numbers/booleans are not used there. */
function xmlSafe(calls: ExpectedCall[]): boolean {
  return calls.every((c) =>
    Object.values(c.args).every(
      (v) =>
        typeof v !== "string" ||
        (!/^\s*(-?\d|true|false|\[|\{)/.test(v) &&
          !v.startsWith("\n") &&
          !v.endsWith("\n") &&
          !/<\/tool_call>|<\/function>|<parameter=|<\/parameter>/.test(v)),
    ),
  );
}

const cases: CorpusCase[] = [];
const add = (c: CorpusCase): void => {
  cases.push(c);
};

// ----- generated positives
let variant = 0;
for (const f of FORMATS) {
  for (const set of CALL_SETS) {
    if (f.raw && !xmlSafe(set.calls)) continue;
    for (const ctx of CONTEXTS) {
      if (ctx.inlineOnly && !f.inline) continue;
      const shape = SHAPES[variant++ % SHAPES.length]!;
      const body = f.render(set.calls, shape);
      const input = ctx.pre + ctx.ws1 + body + ctx.ws2 + ctx.post;
      const name = `${f.id}/${set.id}/${ctx.id}${f.json ? `/${shape.id}` : ""}`;
      add({
        name,
        input,
        content: expectedContent(ctx),
        calls: set.calls,
        kind: f.id,
        sample: set.id === "two" && ctx.id === "both",
        ...(f.source ? { source: f.source } : {}),
      });
      // Formats made of chat-template tokens, with the bridge's special-token stripping on.
      if (f.tokens && ctx.id === "both") {
        add({
          name: `${name}/stripped`,
          input: `<|im_start|>assistant\n${input}<|im_end|>`,
          content: expectedContent(ctx),
          calls: set.calls,
          kind: f.id,
          stripSpecialTokens: true,
          sample: set.id === "three",
        });
      }
      // Windows newlines (every newline of the reply becomes \r\n).
      if (ctx.id === "both" || ctx.id === "alone") {
        const calls = f.raw ? set.calls.map((c) => ({ name: c.name, args: crlfArgs(c.args) })) : set.calls;
        add({
          name: `${name}/crlf`,
          input: input.replace(/\n/g, "\r\n"),
          content: expectedContent(ctx).replace(/\n/g, "\r\n"),
          calls,
          kind: f.id,
          sample: set.id === "escapes" && ctx.id === "both",
        });
      }
    }
  }
}

// ----- generated negatives
/** Formats that put all calls of a reply into ONE block (all-or-nothing). */
const ONE_BLOCK: ReadonlySet<string> = new Set([
  "tool_call-one-tag",
  "tools-tag",
  "tool_calls-tag-array",
  "array",
  "array-pretty",
  "fence-json",
  "fence-plain-array",
  "mistral-array",
  "python_tag",
  "python_tag-eot",
  "qwen3-xml-one-tag",
]);
for (const f of FORMATS) {
  for (const set of CALL_SETS) {
    if (f.raw && !xmlSafe(set.calls)) continue;
    const body = f.render(set.calls, SHAPES[0]!);
    // Not offered.
    const input = `I'll check that for you.\n${body}\n`;
    add({
      name: `neg/not-offered/${f.id}/${set.id}`,
      input,
      tools: ["browser", "canvas"],
      content: input,
      calls: [],
      kind: "neg-not-offered",
      sample: set.id === "two" && f.id.startsWith("qwen3-xml-bare"),
    });
    // Partly offered: a block is all-or-nothing.
    if (set.calls.length > 1 && (ONE_BLOCK.has(f.id) || f.oneBlock === true)) {
      const tools = [set.calls[0]!.name];
      if (!set.calls.every((c) => tools.includes(c.name)))
        add({
          name: `neg/partly-offered/${f.id}/${set.id}`,
          input,
          tools,
          content: input,
          calls: [],
          kind: "neg-partly-offered",
        });
    }
    // No tools offered: everything is text, nothing held.
    add({
      name: `neg/no-tools/${f.id}/${set.id}`,
      input: body,
      tools: [],
      content: body,
      calls: [],
      kind: "neg-no-tools",
    });
    // Inside a code fence of another language.
    const fence = body.includes("```") ? "````" : "```";
    const py = `Example:\n${fence}python\n${body}\n${fence}\nThat's how it looks.`;
    add({
      name: `neg/python-fence/${f.id}/${set.id}`,
      input: py,
      content: py,
      calls: [],
      kind: "neg-code-fence",
      sample: set.id === "read" && f.id === "tool_call-each",
    });
    // Inside inline code.
    if (f.inline && !body.includes("`") && !body.includes("\n")) {
      const ic = "You could write `" + body + "` to do it.";
      add({
        name: `neg/inline-code/${f.id}/${set.id}`,
        input: ic,
        content: ic,
        calls: [],
        kind: "neg-inline-code",
        sample: set.id === "read" && f.id === "tool_call-compact",
      });
    }
    // Line-anchored formats: inside a sentence, or followed by text on the same line.
    if (!f.inline && set.calls.length === 1 && !f.id.startsWith("fence") && f.id !== "array-pretty") {
      const s1 = `To read a file use ${body} and wait.`;
      add({
        name: `neg/in-sentence/${f.id}/${set.id}`,
        input: s1,
        content: s1,
        calls: [],
        kind: "neg-in-sentence",
        sample: set.id === "read" && f.id === "bare-lines",
      });
      const s2 = `${body} <- that is the syntax`;
      add({
        name: `neg/text-after/${f.id}/${set.id}`,
        input: s2,
        content: s2,
        calls: [],
        kind: "neg-in-sentence",
        sample: set.id === "exec" && f.id === "array",
      });
    }
    // Truncated inside the first call (the stream ended mid-call).
    const t = truncationRange(f, body);
    if (t) {
      const [from, to] = t;
      for (let k = 0; k < 4; k++) {
        const cut = from + Math.floor(((to - from) * (k + 1)) / 5);
        const input2 = body.slice(0, cut);
        add({
          name: `neg/truncated/${f.id}/${set.id}/${cut}`,
          input: input2,
          content: input2,
          calls: [],
          kind: "neg-truncated",
          sample: k === 1 && set.id === "nested" && (f.id === "tool_call-each" || f.id === "array-pretty"),
        });
      }
    }
  }
}

/** Positions strictly inside the first call's JSON object / first parameter value. */
function truncationRange(f: Format, body: string): [number, number] | null {
  if (f.trunc) return f.trunc(body);
  if (f.raw) {
    const a = body.indexOf("<parameter=");
    const b = body.indexOf("</parameter>");
    return a < 0 || b < 0 ? null : [a + 1, b + 5];
  }
  const start = body.indexOf("{");
  if (start < 0) return null;
  // The end of that object: scan JSON brackets outside strings.
  let depth = 0;
  let inStr = false;
  let esc = false;
  for (let i = start; i < body.length; i++) {
    const c = body[i]!;
    if (inStr) {
      if (esc) esc = false;
      else if (c === "\\") esc = true;
      else if (c === '"') inStr = false;
    } else if (c === '"') inStr = true;
    else if (c === "{") depth++;
    else if (c === "}") {
      depth--;
      if (depth === 0) return [start + 1, i];
    }
  }
  return null;
}

// ---------------------------------------------------------------------------------------------
// Hand-written realistic outputs

const R = (
  name: string,
  input: string,
  content: string,
  calls: ExpectedCall[],
  extra: Partial<CorpusCase> = {},
): void => add({ name: `real/${name}`, input, content, calls, kind: extra.kind ?? "real", ...extra });

R(
  "qwen2.5-coder tools tag (field notes)",
  '<tools>\n{"name": "read", "arguments": {"path": "/tmp/test.txt"}}\n</tools>',
  "",
  [{ name: "read", args: { path: "/tmp/test.txt" } }],
  { sample: true },
);
R(
  "qwen2.5-coder bare",
  '{"name": "exec", "arguments": {"command": "ls -la"}}',
  "",
  [{ name: "exec", args: { command: "ls -la" } }],
  { sample: true },
);
R(
  "qwen2.5-coder multi-line",
  '{"name": "write", "arguments": {"path": "/tmp/a.txt", "content": "hello"}}\n{"name": "write", "arguments": {"path": "/tmp/b.txt", "content": "world"}}',
  "",
  [
    { name: "write", args: { path: "/tmp/a.txt", content: "hello" } },
    { name: "write", args: { path: "/tmp/b.txt", content: "world" } },
  ],
  { sample: true },
);
R(
  "hermes with thinking prose",
  'The user wants the weather. I should search.\n\n<tool_call>\n{"name": "web_search", "arguments": {"query": "Berlin weather today"}}\n</tool_call>',
  "The user wants the weather. I should search.",
  [{ name: "web_search", args: { query: "Berlin weather today" } }],
  { sample: true },
);
R(
  "hermes two tags then stop",
  '<tool_call>\n{"name": "read", "arguments": {"path": "a.ts"}}\n</tool_call>\n<tool_call>\n{"name": "read", "arguments": {"path": "b.ts"}}\n</tool_call>\n',
  "",
  [
    { name: "read", args: { path: "a.ts" } },
    { name: "read", args: { path: "b.ts" } },
  ],
);
R(
  "hermes missing closing tag at end",
  '<tool_call>\n{"name": "read", "arguments": {"path": "a.ts"}}\n',
  "",
  [{ name: "read", args: { path: "a.ts" } }],
  { sample: true },
);
R("hermes partial closing tag at end", '<tool_call>\n{"name": "read", "arguments": {"path": "a.ts"}}\n</tool_', "", [
  { name: "read", args: { path: "a.ts" } },
]);
R(
  "hermes wrong closing tag",
  '<tool_call>\n{"name": "read", "arguments": {"path": "a.ts"}}\n</tools>',
  '<tool_call>\n{"name": "read", "arguments": {"path": "a.ts"}}\n</tools>',
  [],
);
R(
  "hermes followed by prose without closing tag",
  '<tool_call>\n{"name": "read", "arguments": {"path": "a.ts"}}\nI will wait.',
  '<tool_call>\n{"name": "read", "arguments": {"path": "a.ts"}}\nI will wait.',
  [],
);
R(
  "hermes nested tag restarts",
  '<tool_call>\n<tool_call>\n{"name": "read", "arguments": {"path": "a.ts"}}\n</tool_call>',
  "<tool_call>",
  [{ name: "read", args: { path: "a.ts" } }],
  { sample: true },
);
R(
  "raw newline inside JSON string",
  '<tool_call>\n{"name": "write", "arguments": {"path": "x.md", "content": "# Title\nbody line"}}\n</tool_call>',
  "",
  [{ name: "write", args: { path: "x.md", content: "# Title\nbody line" } }],
  { sample: true },
);
R(
  "qwen3-coder canonical",
  'I\'ll create the file.\n<tool_call>\n<function=write>\n<parameter=path>\n/tmp/hello.py\n</parameter>\n<parameter=content>\ndef main():\n    print("hi")\n\nif __name__ == "__main__":\n    main()\n</parameter>\n</function>\n</tool_call>',
  "I'll create the file.",
  [
    {
      name: "write",
      args: {
        path: "/tmp/hello.py",
        content: 'def main():\n    print("hi")\n\nif __name__ == "__main__":\n    main()',
      },
    },
  ],
  { sample: true },
);
R(
  "qwen3-coder value with markup",
  "<tool_call>\n<function=write>\n<parameter=path>\nindex.html\n</parameter>\n<parameter=content>\n<html><body><p>a < b</p></body></html>\n</parameter>\n</function>\n</tool_call>",
  "",
  [{ name: "write", args: { path: "index.html", content: "<html><body><p>a < b</p></body></html>" } }],
  { sample: true },
);
R(
  "qwen3-coder typed values",
  '<tool_call>\n<function=web_search>\n<parameter=query>\nnode 20 release\n</parameter>\n<parameter=count>\n5\n</parameter>\n<parameter=fresh>\ntrue\n</parameter>\n<parameter=filters>\n{"site": "nodejs.org"}\n</parameter>\n<parameter=langs>\n["en"]\n</parameter>\n<parameter=zip>\n007\n</parameter>\n<parameter=big>\n123456789012345678901\n</parameter>\n<parameter=nothing>\nnull\n</parameter>\n</function>\n</tool_call>',
  "",
  [
    {
      name: "web_search",
      args: {
        query: "node 20 release",
        count: 5,
        fresh: true,
        filters: { site: "nodejs.org" },
        langs: ["en"],
        zip: "007",
        big: "123456789012345678901",
        nothing: "null",
      },
    },
  ],
);
R(
  "qwen3-coder missing </parameter>",
  "<tool_call>\n<function=exec>\n<parameter=command>\nls\n<parameter=cwd>\n/tmp\n</function>\n</tool_call>",
  "",
  [{ name: "exec", args: { command: "ls", cwd: "/tmp" } }],
);
R(
  "qwen3-coder missing </function>",
  "<tool_call>\n<function=exec>\n<parameter=command>\nls\n</parameter>\n</tool_call>",
  "",
  [{ name: "exec", args: { command: "ls" } }],
);
R(
  "qwen3-coder bare, truncated after a parameter at the end",
  "<function=exec>\n<parameter=command>\nls\n</parameter>\n",
  "",
  [{ name: "exec", args: { command: "ls" } }],
);
R(
  "qwen3-coder unknown function",
  "<tool_call>\n<function=rm_rf>\n<parameter=path>\n/\n</parameter>\n</function>\n</tool_call>",
  "<tool_call>\n<function=rm_rf>\n<parameter=path>\n/\n</parameter>\n</function>\n</tool_call>",
  [],
);
R(
  "mistral v3 array with ids",
  '[TOOL_CALLS] [{"name": "read", "arguments": {"path": "/srv/app.log"}, "id": "aB3dE5gH7"}]</s>',
  "</s>",
  [{ name: "read", args: { path: "/srv/app.log" } }],
);
R(
  "mistral v11 two calls",
  '[TOOL_CALLS]read[ARGS]{"path": "a"}[TOOL_CALLS]exec[ARGS]{"command": "pwd"}',
  "",
  [
    { name: "read", args: { path: "a" } },
    { name: "exec", args: { command: "pwd" } },
  ],
  { sample: true },
);
R(
  "mistral token in prose",
  "Mistral marks calls with [TOOL_CALLS] followed by JSON.",
  "Mistral marks calls with [TOOL_CALLS] followed by JSON.",
  [],
);
R(
  "mistral token then offered name in prose",
  "Then [TOOL_CALLS] read the docs.",
  "Then [TOOL_CALLS] read the docs.",
  [],
);
R(
  "llama 3.1 python_tag",
  '<|python_tag|>{"name": "web_search", "parameters": {"query": "latest node release"}}<|eom_id|>',
  "",
  [{ name: "web_search", args: { query: "latest node release" } }],
  { sample: true },
);
R(
  "llama python_tag with code (not a call)",
  "<|python_tag|>import os\nprint(os.listdir('.'))<|eom_id|>",
  "<|python_tag|>import os\nprint(os.listdir('.'))<|eom_id|>",
  [],
);
R(
  "llama python_tag then prose",
  '<|python_tag|>{"name": "exec", "parameters": {"command": "date"}} Let me check.',
  "Let me check.",
  [{ name: "exec", args: { command: "date" } }],
);
R(
  "llama 3.1 custom function",
  'Sure.\n<function=read>{"path": "/etc/hosts"}</function>',
  "Sure.",
  [{ name: "read", args: { path: "/etc/hosts" } }],
  { sample: true },
);
R(
  "fence without language, object",
  'Calling the tool:\n```\n{"name": "exec", "arguments": {"command": "uptime"}}\n```',
  "Calling the tool:",
  [{ name: "exec", args: { command: "uptime" } }],
  { sample: true },
);
R(
  "fence json with non-call content",
  'Here is the config:\n```json\n{"name": "my-app", "version": "1.0.0"}\n```\nSave it.',
  'Here is the config:\n```json\n{"name": "my-app", "version": "1.0.0"}\n```\nSave it.',
  [],
  { sample: true },
);
R(
  "fence json mixing a call and other JSON",
  '```json\n{"name": "read", "arguments": {"path": "a"}}\n{"debug": true}\n```',
  '```json\n{"name": "read", "arguments": {"path": "a"}}\n{"debug": true}\n```',
  [],
  { sample: true },
);
R(
  "fence json with trailing prose inside",
  '```json\n{"name": "read", "arguments": {"path": "a"}}\n```\n\n```json\n{"name": "read", "arguments": {"path": "b"}}\nthat is all\n```',
  '```json\n{"name": "read", "arguments": {"path": "b"}}\nthat is all\n```',
  [{ name: "read", args: { path: "a" } }],
);
R("fence json unclosed at end with a complete call", '```json\n{"name": "read", "arguments": {"path": "a"}}\n', "", [
  { name: "read", args: { path: "a" } },
]);
R(
  "four-backtick fence with inner triple backticks",
  '````json\n{"name": "write", "arguments": {"path": "r.md", "content": "```js\\nx\\n```"}}\n````',
  "",
  [{ name: "write", args: { path: "r.md", content: "```js\nx\n```" } }],
);
R("empty fence", "```json\n```\nnothing", "```json\n```\nnothing", []);
R(
  "bash fence then a real call",
  'Run this:\n```bash\nls -la\n{"name": "exec", "arguments": {"command": "ls"}}\n```\n{"name": "exec", "arguments": {"command": "ls"}}',
  'Run this:\n```bash\nls -la\n{"name": "exec", "arguments": {"command": "ls"}}\n```',
  [{ name: "exec", args: { command: "ls" } }],
  { sample: true },
);
R(
  "unclosed python fence swallows the rest",
  '```python\nx = 1\n<tool_call>\n{"name": "read", "arguments": {}}\n</tool_call>',
  '```python\nx = 1\n<tool_call>\n{"name": "read", "arguments": {}}\n</tool_call>',
  [],
);
R(
  "example JSON inside a sentence",
  'Use {"name":"read","arguments":{}} to read',
  'Use {"name":"read","arguments":{}} to read',
  [],
  { sample: true },
);
R(
  "inline code example of a tag",
  'Models write `<tool_call>{"name": "read", "arguments": {}}</tool_call>` when they want a tool.',
  'Models write `<tool_call>{"name": "read", "arguments": {}}</tool_call>` when they want a tool.',
  [],
  { sample: true },
);
R(
  "double-backtick inline code",
  'Write ``<tool_call>{"name": "read", "arguments": {}}</tool_call>`` there.',
  'Write ``<tool_call>{"name": "read", "arguments": {}}</tool_call>`` there.',
  [],
);
R(
  "unmatched backtick only disables its own line",
  'It`s broken: <tool_call>{"name": "read", "arguments": {}}</tool_call>\n<tool_call>{"name": "read", "arguments": {"path": "b"}}</tool_call>',
  'It`s broken: <tool_call>{"name": "read", "arguments": {}}</tool_call>',
  [{ name: "read", args: { path: "b" } }],
);
R("object without name", '{"arguments": {"path": "a"}}', '{"arguments": {"path": "a"}}', []);
R("name not a string", '{"name": 5, "arguments": {}}', '{"name": 5, "arguments": {}}', []);
R(
  "extra key",
  '{"name": "read", "arguments": {"path": "a"}, "reason": "need it"}',
  '{"name": "read", "arguments": {"path": "a"}, "reason": "need it"}',
  [],
);
R(
  "package.json named like a tool",
  '{\n  "name": "read",\n  "version": "1.0.0"\n}',
  '{\n  "name": "read",\n  "version": "1.0.0"\n}',
  [],
);
R(
  "echoed tool definition",
  '{"name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}',
  '{"name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}',
  [],
);
R(
  "echoed OpenAI tool definition",
  '{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}}',
  '{"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}}',
  [],
);
R("arguments is a number", '{"name": "read", "arguments": 5}', '{"name": "read", "arguments": 5}', []);
R("arguments is an array", '{"name": "read", "arguments": ["a"]}', '{"name": "read", "arguments": ["a"]}', []);
R(
  "arguments string not JSON",
  '{"name": "exec", "arguments": "ls -la"}',
  '{"name": "exec", "arguments": "ls -la"}',
  [],
);
R("arguments empty string", '{"name": "sessions_list", "arguments": ""}', "", [{ name: "sessions_list", args: {} }]);
R("arguments null", '{"name": "sessions_list", "arguments": null}', "", [{ name: "sessions_list", args: {} }]);
R("no arguments at all", '{"name": "sessions_list"}', "", [{ name: "sessions_list", args: {} }]);
R(
  "both arguments and parameters",
  '{"name": "read", "arguments": {}, "parameters": {}}',
  '{"name": "read", "arguments": {}, "parameters": {}}',
  [],
);
R(
  "type other than function",
  '{"type": "tool", "name": "read", "arguments": {}}',
  '{"type": "tool", "name": "read", "arguments": {}}',
  [],
);
R("empty array", "[]", "[]", []);
R("array with a non-call", '[{"name": "read", "arguments": {}}, 5]', '[{"name": "read", "arguments": {}}, 5]', []);
R(
  "single quotes (python dict)",
  "{'name': 'read', 'arguments': {'path': 'a'}}",
  "{'name': 'read', 'arguments': {'path': 'a'}}",
  [],
);
R(
  "trailing comma",
  '{"name": "read", "arguments": {"path": "a"},}',
  '{"name": "read", "arguments": {"path": "a"},}',
  [],
);
R(
  "truncated JSON line, then a call on its own line",
  '{"name": "read", "arguments": {"path": "a"}\n{"name": "read", "arguments": {"path": "b"}}',
  '{"name": "read", "arguments": {"path": "a"}',
  [{ name: "read", args: { path: "b" } }],
);
R(
  "markdown link at line start",
  "[docs](https://example.com) say so.\n[TODO] fix",
  "[docs](https://example.com) say so.\n[TODO] fix",
  [],
);
R("template braces", "{{user}} said hi\n{ not json }", "{{user}} said hi\n{ not json }", []);
R(
  "html",
  '<div class="x">a < b && c > d</div>\n<tool>x</tool>\n<tools>not json</tools>',
  '<div class="x">a < b && c > d</div>\n<tool>x</tool>\n<tools>not json</tools>',
  [],
);
R("empty tag", "<tool_call></tool_call>", "<tool_call></tool_call>", []);
R(
  "code block with braces, no fence",
  "function f() {\n  return 1;\n}\n{\n  int x = 1;\n}",
  "function f() {\n  return 1;\n}\n{\n  int x = 1;\n}",
  [],
);
R("indented call line", 'Steps:\n    {"name": "read", "arguments": {"path": "a"}}\nok', "Steps:\nok", [
  { name: "read", args: { path: "a" } },
]);
R(
  "call then prose on next line keeps paragraph",
  'Looking.\n\n{"name": "read", "arguments": {"path": "a"}}\nI will report back.',
  "Looking.\n\nI will report back.",
  [{ name: "read", args: { path: "a" } }],
);
R(
  "prose between calls",
  'First:\n<tool_call>{"name": "read", "arguments": {"path": "a"}}</tool_call>\nthen:\n<tool_call>{"name": "read", "arguments": {"path": "b"}}</tool_call>\n',
  "First:\nthen:",
  [
    { name: "read", args: { path: "a" } },
    { name: "read", args: { path: "b" } },
  ],
);
R(
  "tag mid-sentence",
  'Sure, <tool_call>{"name": "exec", "arguments": {"command": "date"}}</tool_call>done',
  "Sure, done",
  [{ name: "exec", args: { command: "date" } }],
);
R(
  "tools tag with commas between objects",
  '<tools>\n{"name": "read", "arguments": {"path": "a"}},\n{"name": "read", "arguments": {"path": "b"}}\n</tools>',
  "",
  [
    { name: "read", args: { path: "a" } },
    { name: "read", args: { path: "b" } },
  ],
);
R(
  "deeply nested arguments",
  `{"name": "write", "arguments": ${JSON.stringify({ a: { b: { c: { d: { e: { f: [[[["deep"]]]] } } } } } })}}`,
  "",
  [{ name: "write", args: { a: { b: { c: { d: { e: { f: [[[["deep"]]]] } } } } } } }],
);
R(
  "unicode escapes in JSON",
  '{"name": "message", "arguments": {"text": "caf\\u00e9 \\ud83d\\ude80 \\"q\\" \\\\ back"}}',
  "",
  [{ name: "message", args: { text: 'café 🚀 "q" \\ back' } }],
);
R(
  "emoji and CJK around call",
  '好的，我来读取文件 📄\n<tool_call>\n{"name": "read", "arguments": {"path": "/数据/文件.txt"}}\n</tool_call>\n完成 ✅',
  "好的，我来读取文件 📄\n完成 ✅",
  [{ name: "read", args: { path: "/数据/文件.txt" } }],
  { sample: true },
);
R(
  "qwen2.5 loop leak with special tokens, stripped",
  '<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n</tool_call><|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n</tool_call><|im_end|>',
  "",
  [
    { name: "read", args: { path: "a" } },
    { name: "read", args: { path: "a" } },
  ],
  { stripSpecialTokens: true, sample: true, kind: "special-tokens" },
);
R(
  "bare JSON followed by im_end, stripped",
  '{"name": "exec", "arguments": {"command": "ls"}}<|im_end|>',
  "",
  [{ name: "exec", args: { command: "ls" } }],
  { stripSpecialTokens: true, kind: "special-tokens" },
);
R(
  "bare JSON followed by im_end, not stripped",
  '{"name": "exec", "arguments": {"command": "ls"}}<|im_end|>',
  '{"name": "exec", "arguments": {"command": "ls"}}<|im_end|>',
  [],
);
R("python_tag code with stripping drops the tag", "<|python_tag|>print(1)<|eom_id|>", "print(1)", [], {
  stripSpecialTokens: true,
  kind: "special-tokens",
});
R(
  "llama header leak, stripped",
  "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHow can I help?",
  "Hello!\n\nHow can I help?",
  [],
  { stripSpecialTokens: true, kind: "special-tokens" },
);
R("special tokens kept without the option", "Hi<|im_end|>", "Hi<|im_end|>", []);

// More realistic multi-call / mixed replies
R(
  "mixed formats in one reply",
  'I will do three things.\n<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n</tool_call>\n{"name": "exec", "arguments": {"command": "make"}}\n```json\n[{"name": "write", "arguments": {"path": "o", "content": "x"}}]\n```\nStarted.',
  "I will do three things.\nStarted.",
  [
    { name: "read", args: { path: "a" } },
    { name: "exec", args: { command: "make" } },
    { name: "write", args: { path: "o", content: "x" } },
  ],
  { sample: true },
);
R(
  "long prose with a call in the middle",
  "Sure thing. ".repeat(40) + '\n{"name": "read", "arguments": {"path": "x"}}\n' + "More text here. ".repeat(40),
  "Sure thing. ".repeat(40).trimEnd() + "\n" + "More text here. ".repeat(40),
  [{ name: "read", args: { path: "x" } }],
);
R(
  "windows newlines hermes",
  'Checking.\r\n<tool_call>\r\n{"name": "read", "arguments": {"path": "C:\\\\tmp\\\\a.txt"}}\r\n</tool_call>\r\n',
  "Checking.",
  [{ name: "read", args: { path: "C:\\tmp\\a.txt" } }],
  { sample: true },
);
R("tabs and spaces around a bare call", '\t {"name": "read", "arguments": {}} \t\nafter', "after", [
  { name: "read", args: {} },
]);
R("whitespace only", "  \n\t\n ", "  \n\t\n ", []);
R("empty reply", "", "", []);
R("plain prose", "The answer is 42. No tools needed.", "The answer is 42. No tools needed.", [], { sample: true });
R(
  "JSON answer that is not a call",
  '{"answer": 42, "explanation": "because"}',
  '{"answer": 42, "explanation": "because"}',
  [],
);
R("array of numbers at line start", '[1, 2, 3]\n["a"]', '[1, 2, 3]\n["a"]', []);
R(
  "function wrapper with type and id",
  '{"id": "call_x", "type": "function", "function": {"name": "exec", "arguments": "{\\"command\\": \\"whoami\\"}"}}',
  "",
  [{ name: "exec", args: { command: "whoami" } }],
);
R(
  "llama multiple python_tag calls separated by semicolons",
  '<|python_tag|>{"name": "read", "parameters": {"path": "a"}}; {"name": "read", "parameters": {"path": "b"}}',
  "",
  [
    { name: "read", args: { path: "a" } },
    { name: "read", args: { path: "b" } },
  ],
);
R(
  "function block inside a fence",
  "```xml\n<function=exec>\n<parameter=command>\nuname -a\n</parameter>\n</function>\n```",
  "",
  [{ name: "exec", args: { command: "uname -a" } }],
);
R(
  "closing fence with text is content",
  '```json\n{"name": "read", "arguments": {"path": "a"}}\n```not closed\n```\nafter',
  '```json\n{"name": "read", "arguments": {"path": "a"}}\n```not closed\n```\nafter',
  [],
);

for (const c of FAMILY_CASES) add(c);
for (const c of SHAPE_CASES) add(c);

export const CORPUS: readonly CorpusCase[] = cases;
