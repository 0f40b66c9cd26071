/**
 * Corpus part 2: the model families added for issue 18 (every format the public parsers know).
 * - FAMILY_FORMATS: renderers fed to the generator in toolcalls-corpus.ts (every call set × prose
 *   context × newline style, plus not-offered / partly-offered / code-fence / inline-code /
 *   in-sentence / truncated negatives).
 * - FAMILY_CASES: outputs taken from the servers' own parser tests, each naming its source
 *   (repository + path). Where our rules differ from that server, the case says so.
 */
import type { CorpusCase, ExpectedCall, Format, ShapeDef } from "./toolcalls-corpus.js";

const VLLM = "vllm-project/vllm";
const SGLANG = "sgl-project/sglang test/registered/function_call/test_function_call_parser.py";
const OLLAMA = "ollama/ollama tools/tools_test.go";
const LLAMACPP =
  "ggml-org/llama.cpp tests/test-chat.cpp (Hermes 2 Pro / Llama 3.x / DeepSeek R1 parsers; as in ochafik/llama.cpp)";
const vllm = (file: string): string => `${VLLM} tests/tool_parsers/${file}`;

// ---------------------------------------------------------------------------------------------
// Renderers

const js = (v: unknown, pretty = false): string => (pretty ? JSON.stringify(v, null, 2) : JSON.stringify(v));
const obj = (c: ExpectedCall, s: ShapeDef): string => js(s.shape(c), s.pretty);

/** A Python string literal (single quotes). */
function pyStr(s: string): string {
  let out = "'";
  for (const ch of s) {
    if (ch === "\\") out += "\\\\";
    else if (ch === "'") out += "\\'";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch < " ") out += "\\x" + ch.charCodeAt(0).toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + "'";
}

/** A Python literal. */
export function py(v: unknown): string {
  if (v === null) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return pyStr(v);
  if (Array.isArray(v)) return `[${v.map(py).join(", ")}]`;
  return `{${Object.entries(v as Record<string, unknown>)
    .map(([k, x]) => `${pyStr(k)}: ${py(x)}`)
    .join(", ")}}`;
}

const kwargs = (c: ExpectedCall, lit: (v: unknown) => string): string =>
  Object.entries(c.args)
    .map(([k, v]) => `${k}=${lit(v)}`)
    .join(", ");
const pyCall = (c: ExpectedCall): string => `${c.name}(${kwargs(c, py)})`;
const pyList = (cs: ExpectedCall[]): string => `[${cs.map(pyCall).join(", ")}]`;

function paramText(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}
const params = (c: ExpectedCall, each: (k: string, v: string) => string, sep: string): string =>
  Object.entries(c.args)
    .map(([k, v]) => each(k, paramText(v)))
    .join(sep);

const DS = (n: string): string => `<｜${n}｜>`;

/** Positions strictly inside the first `(…)` of the body (a pythonic call's arguments). */
function insideParens(body: string): [number, number] | null {
  const a = body.indexOf("(");
  if (a < 0) return null;
  let depth = 0;
  let q = "";
  for (let i = a; i < body.length; i++) {
    const c = body[i]!;
    if (q) {
      if (c === "\\") i++;
      else if (c === q) q = "";
    } else if (c === "'" || c === '"') q = c;
    else if (c === "(" || c === "[" || c === "{") depth++;
    else if (c === ")" || c === "]" || c === "}") {
      depth--;
      if (depth === 0) return [a + 1, i];
    }
  }
  return null;
}

/** Positions inside the first value between an opening and a closing literal. */
const between =
  (open: string, close: string) =>
  (body: string): [number, number] | null => {
    const a = body.indexOf(open);
    const b = body.indexOf(close);
    return a < 0 || b < 0 ? null : [a + 1, b + 5];
  };

export const FAMILY_FORMATS: Format[] = [
  {
    id: "pythonic-list",
    inline: true,
    json: false,
    oneBlock: true,
    source: vllm("test_pythonic_tool_parser.py"),
    trunc: insideParens,
    render: (cs) => pyList(cs),
  },
  {
    id: "llama4-python_start",
    inline: true,
    json: false,
    oneBlock: true,
    tokens: true,
    source: vllm("test_llama4_pythonic_tool_parser.py"),
    trunc: insideParens,
    render: (cs) => `<|python_start|>${pyList(cs)}<|python_end|>`,
  },
  {
    id: "lfm2-tool_call_start",
    inline: true,
    json: false,
    oneBlock: true,
    tokens: true,
    source: "sgl-project/sglang python/sglang/srt/function_call/lfm2_detector.py",
    trunc: insideParens,
    render: (cs) => `<|tool_call_start|>${pyList(cs)}<|tool_call_end|>`,
  },
  {
    id: "python_tag-builtin",
    inline: true,
    json: false,
    tokens: true,
    source: "meta-llama/llama-models models/llama3_1/api/tool_utils.py; " + LLAMACPP,
    trunc: insideParens,
    render: (cs) => cs.map((c) => `<|python_tag|>${c.name}.call(${kwargs(c, (v) => js(v))})<|eom_id|>`).join("\n"),
  },
  {
    id: "deepseek-v3",
    inline: true,
    json: false,
    oneBlock: true,
    tokens: true,
    source: vllm("test_deepseekv3_tool_parser.py"),
    render: (cs) =>
      DS("tool▁calls▁begin") +
      cs
        .map(
          (c) =>
            `${DS("tool▁call▁begin")}function${DS("tool▁sep")}${c.name}\n\`\`\`json\n${js(c.args)}\n\`\`\`${DS("tool▁call▁end")}`,
        )
        .join("\n") +
      DS("tool▁calls▁end"),
  },
  {
    id: "deepseek-v31",
    inline: true,
    json: false,
    oneBlock: true,
    tokens: true,
    source: vllm("test_deepseekv31_tool_parser.py"),
    render: (cs) =>
      DS("tool▁calls▁begin") +
      cs.map((c) => `${DS("tool▁call▁begin")}${c.name}${DS("tool▁sep")}${js(c.args)}${DS("tool▁call▁end")}`).join("") +
      DS("tool▁calls▁end"),
  },
  {
    id: "kimi-k2",
    inline: true,
    json: false,
    oneBlock: true,
    tokens: true,
    source: vllm("test_kimi_k2_tool_parser.py"),
    render: (cs) =>
      "<|tool_calls_section_begin|>" +
      cs
        .map(
          (c, i) =>
            `<|tool_call_begin|>functions.${c.name}:${i} <|tool_call_argument_begin|>${js(c.args)}<|tool_call_end|>`,
        )
        .join("") +
      "<|tool_calls_section_end|>",
  },
  {
    id: "glm45",
    inline: true,
    json: false,
    raw: true,
    source: vllm("test_glm4_moe_tool_parser.py"),
    trunc: between("<arg_key>", "</arg_value>"),
    render: (cs) =>
      cs
        .map(
          (c) =>
            `<tool_call>${c.name}\n${params(c, (k, v) => `<arg_key>${k}</arg_key>\n<arg_value>${v}</arg_value>`, "\n")}\n</tool_call>`,
        )
        .join("\n"),
  },
  {
    id: "minimax-m2",
    inline: true,
    json: false,
    raw: true,
    oneBlock: true,
    source: vllm("test_minimax_m2_tool_parser.py"),
    trunc: between("<parameter name=", "</parameter>"),
    render: (cs) =>
      "<minimax:tool_call>\n" +
      cs
        .map(
          (c) =>
            `<invoke name="${c.name}">\n${params(c, (k, v) => `<parameter name="${k}">${v}</parameter>`, "\n")}\n</invoke>`,
        )
        .join("\n") +
      "\n</minimax:tool_call>",
  },
  {
    id: "seed-oss",
    inline: true,
    json: false,
    raw: true,
    source: vllm("test_seed_oss_tool_parser.py"),
    render: (cs) =>
      cs
        .map(
          (c) =>
            `<seed:tool_call>\n<function=${c.name}>\n${params(c, (k, v) => `<parameter=${k}>${v}</parameter>`, "\n")}${Object.keys(c.args).length ? "\n" : ""}</function>\n</seed:tool_call>`,
        )
        .join("\n"),
  },
  {
    id: "harmony",
    inline: true,
    json: false,
    tokens: true,
    source:
      "sgl-project/sglang python/sglang/srt/function_call/gpt_oss_detector.py; " + vllm("test_openai_tool_parser.py"),
    render: (cs) =>
      cs
        .map(
          (c) =>
            `<|start|>assistant<|channel|>commentary to=functions.${c.name} <|constrain|>json<|message|>${js(c.args)}<|call|>`,
        )
        .join(""),
  },
  {
    id: "harmony-recipient-first",
    inline: true,
    json: false,
    tokens: true,
    source: "ollama/ollama harmony/harmonyparser_test.go",
    render: (cs) =>
      cs
        .map(
          (c) => `<|start|>assistant to=functions.${c.name}<|channel|>commentary json<|message|>${js(c.args)}<|call|>`,
        )
        .join(""),
  },
  {
    id: "granite",
    inline: true,
    json: true,
    oneBlock: true,
    tokens: true,
    source: vllm("test_granite_tool_parser.py"),
    render: (cs, s) =>
      `<|tool_call|> ${js(
        cs.map((c) => s.shape(c)),
        s.pretty,
      )}`,
  },
  {
    id: "phi4-functools",
    inline: true,
    json: true,
    oneBlock: true,
    source: vllm("test_phi4mini_tool_parser.py"),
    render: (cs, s) =>
      `functools${js(
        cs.map((c) => s.shape(c)),
        s.pretty,
      )}`,
  },
  {
    id: "internlm",
    inline: true,
    json: true,
    tokens: true,
    source: vllm("test_internlm2_tool_parser.py"),
    render: (cs, s) => cs.map((c) => `<|action_start|><|plugin|>\n${obj(c, s)}<|action_end|>`).join("\n"),
  },
  {
    id: "llama3-semicolons",
    inline: false,
    json: true,
    oneBlock: true,
    source: vllm("test_llama3_json_tool_parser.py"),
    render: (cs, s) => cs.map((c) => obj(c, s)).join("; "),
  },
  {
    id: "json-lines-trailing-commas",
    inline: false,
    json: true,
    oneBlock: true,
    source: "clawbridge field notes (Qwen2.5-Coder on Ollama)",
    render: (cs, s) => cs.map((c) => obj(c, s)).join(",\n"),
  },
  {
    id: "llamacpp-function-attr",
    inline: true,
    json: false,
    source: LLAMACPP,
    render: (cs) => cs.map((c) => `<function name="${c.name}">\n${js(c.args)}\n</function>`).join("\n"),
  },
  {
    id: "response-tag",
    inline: true,
    json: true,
    oneBlock: true,
    source: LLAMACPP,
    render: (cs, s) => `<response>\n${cs.map((c) => "  " + obj(c, s)).join("\n")}\n</response>`,
  },
  {
    id: "fence-xml-response",
    inline: false,
    json: true,
    oneBlock: true,
    source: LLAMACPP,
    render: (cs, s) => "```xml\n<response>\n" + cs.map((c) => "    " + obj(c, s)).join("\n") + "\n</response>\n```",
  },
  {
    id: "fence-json-function_call-tag",
    inline: false,
    json: true,
    oneBlock: true,
    source: LLAMACPP,
    render: (cs, s) =>
      "```json\n\n                    <function_call> " +
      cs.map((c) => obj(c, s)).join("\n") +
      " \n                    </function_call> \n```",
  },
];

// ---------------------------------------------------------------------------------------------
// Hand-written cases from the public suites

const cases: CorpusCase[] = [];
const C = (
  kind: string,
  source: string,
  name: string,
  input: string,
  content: string,
  calls: ExpectedCall[],
  tools: readonly string[],
  extra: Partial<CorpusCase> = {},
): void => {
  cases.push({ name: `${kind}/${name}`, input, content, calls, tools, kind, source, sample: true, ...extra });
};
const call = (name: string, args: Record<string, unknown> = {}): ExpectedCall => ({ name, args });

// ----- Pythonic call lists (vLLM pythonic / llama4_pythonic, SGLang pythonic)
{
  const K = "pythonic";
  const T = ["get_weather", "register_user", "do_something_cool", "search", "calc", "foo"];
  const src = vllm("test_pythonic_tool_parser.py");
  const simple = "get_weather(city='San Francisco', metric='celsius')";
  const simpleCall = call("get_weather", { city: "San Francisco", metric: "celsius" });
  const more =
    "register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, aliases=['John', 'Johnny'])";
  const moreCall = call("register_user", {
    name: "John Doe",
    age: 37,
    address: { city: "San Francisco", state: "CA" },
    role: null,
    passed_test: true,
    aliases: ["John", "Johnny"],
  });
  C(K, src, "simple", `[${simple}]`, "", [simpleCall], T);
  C(K, src, "more types", `[${more}]`, "", [moreCall], T);
  C(K, src, "parameterless", "[get_weather()]", "", [call("get_weather")], T);
  C(
    K,
    src,
    "empty dict",
    "[do_something_cool(additional_data={})]",
    "",
    [call("do_something_cool", { additional_data: {} })],
    T,
  );
  C(K, src, "empty list", "[do_something_cool(steps=[])]", "", [call("do_something_cool", { steps: [] })], T);
  C(
    K,
    src,
    "escaped strings",
    String.raw`[get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')]`,
    "",
    [call("get_weather", { city: "Martha's Vineyard", metric: '"cool units"' })],
    T,
  );
  C(K, src, "parallel", `[${simple}, ${more}]`, "", [simpleCall, moreCall], T);
  C(
    K,
    src,
    "large steps",
    `[get_weather(city='San Francisco', metric='celsius'), get_weather(), do_something_cool(steps=[])]`,
    "",
    [simpleCall, call("get_weather"), call("do_something_cool", { steps: [] })],
    T,
  );
  // As vLLM: a malformed call of an offered tool is dropped, its good sibling kept (issue 31). A
  // sibling naming a tool that was not offered still makes the whole list text (below).
  C(K, src, "bytes sibling is dropped, the good call kept", `[get_weather(x=b'z'), ${simple}]`, "", [simpleCall], T);
  C(K, src, "non-finite sibling is dropped, the good call kept", `[calc(x=1e999), ${simple}]`, "", [simpleCall], T);
  C(
    K,
    src,
    "unparsable sibling makes the list text",
    `[${simple}, f(a='x 'y', b='z')]`,
    `[${simple}, f(a='x 'y', b='z')]`,
    [],
    T,
  );
  C(K, src, "mismatched brackets", "[foo(x=1])]", "[foo(x=1])]", [], T);
  C(K, src, "no call", "How can I help you today?", "How can I help you today?", [], T);
  C(
    K,
    SGLANG,
    "prose before",
    "Here's a tool call: [get_weather(location='New York', unit='celsius')]",
    "Here's a tool call:",
    [call("get_weather", { location: "New York", unit: "celsius" })],
    T,
  );
  C(
    K,
    SGLANG,
    "text before without punctuation",
    "This is some text before [get_weather(location='London')]",
    "This is some text before",
    [call("get_weather", { location: "London" })],
    T,
  );
  C(
    K,
    SGLANG,
    "text after",
    "[get_weather(location='Tokyo')] Here's the forecast:",
    "Here's the forecast:",
    [call("get_weather", { location: "Tokyo" })],
    T,
  );
  C(
    K,
    SGLANG,
    "two lists with prose between",
    "[get_weather(location='Berlin')] and [search(query='restaurants')]",
    "and",
    [call("get_weather", { location: "Berlin" }), call("search", { query: "restaurants" })],
    T,
  );
  C(K, SGLANG, "opening bracket only", "Let's try this: [", "Let's try this: [", [], T);
  C(
    K,
    SGLANG,
    "nested list argument",
    "[get_weather(location='New York', unit='celsius', data=[1, 2, 3])]",
    "",
    [call("get_weather", { location: "New York", unit: "celsius", data: [1, 2, 3] })],
    T,
  );
  C(
    K,
    SGLANG,
    "nested dict argument",
    "[search(query='test', config={'options': [1, 2], 'nested': {'key': 'value'}})]",
    "",
    [call("search", { query: "test", config: { options: [1, 2], nested: { key: "value" } } })],
    T,
  );
  C(
    K,
    SGLANG,
    "several calls with nested brackets",
    "[get_weather(location='Paris', data=[10, 20]), search(query='test', filters=['a', 'b'])]",
    "",
    [
      call("get_weather", { location: "Paris", data: [10, 20] }),
      call("search", { query: "test", filters: ["a", "b"] }),
    ],
    T,
  );
  C(
    K,
    "clawbridge (Python literal grammar: docs.python.org lexical analysis)",
    "literals: quotes, escapes, numbers, tuples, prefixes",
    String.raw`[search(query="a \"q\" \\ end\n", n=-3, f=2.5e-3, h=0x1F, big=12345678901234567890, sep=1_000, t=(1, 'x'), one=(5), u=u'ü', r=r'\d+', j=[true, false, null], nl='a\
b')]`,
    "",
    [
      call("search", {
        query: 'a "q" \\ end\n',
        n: -3,
        f: 0.0025,
        h: 31,
        big: "12345678901234567890",
        sep: 1000,
        t: [1, "x"],
        one: 5,
        u: "ü",
        r: "\\d+",
        j: [true, false, null],
        nl: "ab",
      }),
    ],
    T,
  );
  C(
    K,
    "clawbridge (Python call syntax)",
    "trailing commas and newlines",
    "[\n  get_weather(\n    city='Paris',\n  ),\n  search(query='x'),\n]",
    "",
    [call("get_weather", { city: "Paris" }), call("search", { query: "x" })],
    T,
  );
  C(K, "clawbridge", "positional argument is text", "[get_weather('Paris')]", "[get_weather('Paris')]", [], T);
  C(K, "clawbridge", "expression is text", "[get_weather(days=1+2)]", "[get_weather(days=1+2)]", [], T);
  C(K, "clawbridge", "variable is text", "[get_weather(city=city)]", "[get_weather(city=city)]", [], T);
  C(K, "clawbridge", "set is text", "[search(tags={1, 2})]", "[search(tags={1, 2})]", [], T);
  C(
    K,
    "clawbridge",
    "repeated keyword is text",
    "[search(query='a', query='b')]",
    "[search(query='a', query='b')]",
    [],
    T,
  );
  C(K, "clawbridge", "f-string is text", "[search(query=f'{x}')]", "[search(query=f'{x}')]", [], T);
  const lfm2 = "sgl-project/sglang python/sglang/srt/function_call/lfm2_detector.py";
  C(
    K,
    lfm2,
    "raw newline in a string is kept",
    "[search(query='line 1\nline 2')]",
    "",
    [call("search", { query: "line 1\nline 2" })],
    T,
  );
  C(K, lfm2, "zero-padded integer", "[search(month=07, day=1)]", "", [call("search", { month: 7, day: 1 })], T);
  C(
    K,
    lfm2,
    "Python keyword as a parameter name",
    "[search(from=1, query='x')]",
    "",
    [call("search", { from: 1, query: "x" })],
    T,
  );
  C(K, "clawbridge", "name not offered is text", "[delete_all(force=True)]", "[delete_all(force=True)]", [], T);
  C(
    K,
    "clawbridge",
    "inline code is text",
    "Call `[get_weather(city='Paris')]` to check.",
    "Call `[get_weather(city='Paris')]` to check.",
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "python fence is text",
    "```python\nresult = [get_weather(city='Paris')]\n```",
    "```python\nresult = [get_weather(city='Paris')]\n```",
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "markdown link is text",
    "See [get_weather](https://example.com) and [search (docs)].",
    "See [get_weather](https://example.com) and [search (docs)].",
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "example in a sentence is text",
    "Calls look like [get_weather(city='Paris')] in Python.",
    "Calls look like [get_weather(city='Paris')] in Python.",
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "example after such as is text",
    "A list such as [search(query='x'), get_weather()] runs both.",
    "A list such as [search(query='x'), get_weather()] runs both.",
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "unclosed list at the end is text",
    "[get_weather(city='Paris')",
    "[get_weather(city='Paris')",
    [],
    T,
  );
}

// ----- Llama 4 <|python_start|> and LFM2 <|tool_call_start|>
{
  const K = "llama4-python_start";
  const T = ["get_weather", "register_user", "do_something_cool", "foo"];
  const src = vllm("test_llama4_pythonic_tool_parser.py");
  const la = call("get_weather", { city: "LA", metric: "C" });
  C(K, src, "python tag", "<|python_start|>[get_weather(city='LA', metric='C')]<|python_end|>", "", [la], T);
  C(
    K,
    src,
    "parallel, no end marker",
    "<|python_start|>[get_weather(city='LA', metric='C'),register_user(name='Doe', age=9)]",
    "",
    [la, call("register_user", { name: "Doe", age: 9 })],
    T,
  );
  C(
    K,
    src,
    "parallel compact",
    "[get_weather(city='LA',metric='C'),register_user(name='Doe',age=9)]",
    "",
    [la, call("register_user", { name: "Doe", age: 9 })],
    T,
  );
  C(
    K,
    src,
    "large steps",
    "<|python_start|>[get_weather(city='LA', metric='C'), get_weather(), do_something_cool(steps=[])]<|python_end|>",
    "",
    [la, call("get_weather"), call("do_something_cool", { steps: [] })],
    T,
  );
  C(
    K,
    src,
    "mismatched brackets",
    "<|python_start|>[foo(x=1])]<|python_end|>",
    "<|python_start|>[foo(x=1])]<|python_end|>",
    [],
    T,
  );
  C(K, src, "mismatched brackets, tokens stripped", "<|python_start|>[foo(x=1])]<|python_end|>", "[foo(x=1])]", [], T, {
    stripSpecialTokens: true,
  });
  C(
    K,
    SGLANG,
    "python_start with prose before",
    "Here's a call: <|python_start|>[get_weather(location='Tokyo', data=[1, 2, 3])]<|python_end|>",
    "Here's a call:",
    [call("get_weather", { location: "Tokyo", data: [1, 2, 3] })],
    T,
  );
  C(
    K,
    SGLANG,
    "python_start between sentences",
    "User wants to get the weather in Mars. <|python_start|>[get_weather(location='Mars', unit='celsius')]<|python_end|> In this way we will get the weather in Mars.",
    "User wants to get the weather in Mars. In this way we will get the weather in Mars.",
    [call("get_weather", { location: "Mars", unit: "celsius" })],
    T,
  );
  C(
    K,
    SGLANG,
    "stripped tokens",
    "<|python_start|>[get_weather(city='LA', metric='C')]<|python_end|><|eot|>",
    "",
    [la],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    "sgl-project/sglang python/sglang/srt/function_call/lfm2_detector.py",
    "LFM2 JSON array",
    '<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|tool_call_end|>',
    "",
    [call("get_weather", { city: "Paris" })],
    T,
  );
  C(
    K,
    "sgl-project/sglang python/sglang/srt/function_call/lfm2_detector.py",
    "LFM2 tool_call_start",
    '<|tool_call_start|>[get_weather(city="Paris", days=3)]<|tool_call_end|>',
    "",
    [call("get_weather", { city: "Paris", days: 3 })],
    T,
  );
  C(
    K,
    "clawbridge",
    "python_start then prose is text",
    "<|python_start|>print('hi')<|python_end|>",
    "<|python_start|>print('hi')<|python_end|>",
    [],
    T,
  );
}

// ----- DeepSeek V3 / R1 / V3.1
{
  const K = "deepseek";
  const T = [
    "get_weather",
    "search_hotels",
    "test_function",
    "get_current_time",
    "send_message",
    "foo",
    "bar",
    "get_temperature",
    "special_function",
  ];
  const src3 = vllm("test_deepseekv3_tool_parser.py");
  const src31 = vllm("test_deepseekv31_tool_parser.py");
  const one = (name: string, args: string): string =>
    `${DS("tool▁call▁begin")}function${DS("tool▁sep")}${name}\n\`\`\`json\n${args}\n\`\`\`${DS("tool▁call▁end")}`;
  const block = (...calls: string[]): string => DS("tool▁calls▁begin") + calls.join("") + DS("tool▁calls▁end");
  C(
    K,
    src3,
    "single",
    block(one("get_weather", '{"city": "Tokyo", "unit": "celsius"}')),
    "",
    [call("get_weather", { city: "Tokyo", unit: "celsius" })],
    T,
  );
  C(
    K,
    src3,
    "parallel",
    block(
      one("get_weather", '{"city": "Tokyo", "unit": "celsius"}'),
      one("search_hotels", '{"location": "Tokyo", "check_in": "2025-01-15"}'),
    ),
    "",
    [
      call("get_weather", { city: "Tokyo", unit: "celsius" }),
      call("search_hotels", { location: "Tokyo", check_in: "2025-01-15" }),
    ],
    T,
  );
  C(
    K,
    src3,
    "various data types",
    block(
      one(
        "test_function",
        '{"string_field": "hello", "int_field": 42, "float_field": 3.14, "bool_field": true, "null_field": null, "array_field": ["a", "b", "c"], "object_field": {"nested": "value"}, "empty_array": [], "empty_object": {}}',
      ),
    ),
    "",
    [
      call("test_function", {
        string_field: "hello",
        int_field: 42,
        float_field: 3.14,
        bool_field: true,
        null_field: null,
        array_field: ["a", "b", "c"],
        object_field: { nested: "value" },
        empty_array: [],
        empty_object: {},
      }),
    ],
    T,
  );
  C(K, src3, "empty arguments", block(one("get_current_time", "{}")), "", [call("get_current_time")], T);
  C(
    K,
    src3,
    "surrounding text",
    "Let me check the weather for you." + block(one("get_weather", '{"city": "Paris"}')),
    "Let me check the weather for you.",
    [call("get_weather", { city: "Paris" })],
    T,
  );
  C(
    K,
    src3,
    "escaped strings",
    block(
      one(
        "send_message",
        String.raw`{"text": "He said \"hello\"", "path": "C:\\Users\\file", "newline": "line1\nline2"}`,
      ),
    ),
    "",
    [call("send_message", { text: 'He said "hello"', path: "C:\\Users\\file", newline: "line1\nline2" })],
    T,
  );
  const bad1 = block(
    `${DS("tool▁call▁begin")}function${DS("tool▁sep")}get_weather\n\`\`\`json\n{"city": "Tokyo"\n\`\`\`${DS("tool▁call▁end")}`,
  );
  C(K, src3, "malformed JSON is text", bad1, bad1, [], T);
  const bad2 = `${DS("tool▁calls▁begin")}function${DS("tool▁sep")}get_weather\n\`\`\`json\n{"city": "Tokyo"}\n\`\`\`${DS("tool▁calls▁end")}`;
  C(K, src3, "missing call markers is text", bad2, bad2, [], T);
  C(
    K,
    src3,
    "no call",
    "How can I help you today? I can check weather for you.",
    "How can I help you today? I can check weather for you.",
    [],
    T,
  );
  C(
    K,
    src31,
    "V3.1 with prefix",
    `normal text${DS("tool▁calls▁begin")}${DS("tool▁call▁begin")}foo${DS("tool▁sep")}{"x":1}${DS("tool▁call▁end")}${DS("tool▁calls▁end")}`,
    "normal text",
    [call("foo", { x: 1 })],
    T,
  );
  C(
    K,
    src31,
    "V3.1 parallel with prefix and suffix",
    `some prefix text${DS("tool▁calls▁begin")}${DS("tool▁call▁begin")}foo${DS("tool▁sep")}{"x":1}${DS("tool▁call▁end")}${DS("tool▁call▁begin")}bar${DS("tool▁sep")}{"y":2}${DS("tool▁call▁end")}${DS("tool▁calls▁end")} some suffix text`,
    "some prefix text some suffix text",
    [call("foo", { x: 1 }), call("bar", { y: 2 })],
    T,
  );
  const cut = `Let me look that up.${DS("tool▁calls▁begin")}get_weather`;
  C(K, src31, "cut off inside the block is text", cut, cut, [], T);
  const nomark = `${DS("tool▁calls▁begin")}foo${DS("tool▁sep")}{"x":1}${DS("tool▁calls▁end")}`;
  C(K, src31, "V3.1 without call markers is text", nomark, nomark, [], T);
  C(
    K,
    OLLAMA,
    "ASCII bars after a think block",
    '<think>Wait, I need to call a tool</think><|tool▁calls▁begin|><|tool▁call▁begin|>function<|tool▁sep|>get_temperature\n```json\n{"city": "Tokyo"}\n```<|tool▁call▁end|><|tool▁calls▁end|>',
    "<think>Wait, I need to call a tool</think>",
    [call("get_temperature", { city: "Tokyo" })],
    T,
  );
  C(
    K,
    LLAMACPP,
    "R1 after thinking, end of sentence stripped",
    `<think>I'm\nthinking</think>\n\n${block(one("special_function", '{"arg1": 1}'))}<｜end▁of▁sentence｜>`,
    "<think>I'm\nthinking</think>",
    [call("special_function", { arg1: 1 })],
    T,
    { stripSpecialTokens: true },
  );
  const syntax = `I need to remember the correct syntax. It starts with ${DS("tool▁calls▁begin")} and ends with`;
  C(K, LLAMACPP, "token mentioned in prose is text", syntax, syntax, [], T);
  C(
    K,
    LLAMACPP,
    "token mentioned in prose, stripped",
    syntax,
    "I need to remember the correct syntax. It starts with  and ends with",
    [],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    "clawbridge",
    "blanks between calls, no end token, prose after",
    `${DS("tool▁calls▁begin")}\n${one("foo", '{"x":1}')}\n${one("bar", '{"y":2}')}\nDone.`,
    "Done.",
    [call("foo", { x: 1 }), call("bar", { y: 2 })],
    T,
  );
  const notOffered = block(one("rm_rf", '{"path": "/"}'));
  C(K, "clawbridge", "name not offered is text", notOffered, notOffered, [], T);
}

// ----- Llama 3 JSON inside prose (vLLM llama3_json)
{
  const K = "llama3-json-prose";
  const T = ["getOpenIncidentsTool", "searchTool", "complexTool", "simpleTool", "parserTool"];
  const src = vllm("test_llama3_json_tool_parser.py");
  const s1 = '{"name": "searchTool", "parameters": {"query": "test1"}}';
  const s2 = '{"name": "getOpenIncidentsTool", "parameters": {}}';
  const s3 = '{"name": "searchTool", "parameters": {"query": "test2"}}';
  const three = [
    call("searchTool", { query: "test1" }),
    call("getOpenIncidentsTool"),
    call("searchTool", { query: "test2" }),
  ];
  C(
    K,
    src,
    "call after text on the same line",
    'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} Would you like to know more?',
    "Here is the result: Would you like to know more?",
    [call("getOpenIncidentsTool")],
    T,
  );
  C(
    K,
    src,
    "with arguments",
    '{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}',
    "",
    [call("searchTool", { query: "test query", limit: 10 })],
    T,
  );
  C(
    K,
    src,
    "arguments key",
    '{"name": "searchTool", "arguments": {"query": "test"}}',
    "",
    [call("searchTool", { query: "test" })],
    T,
  );
  C(K, src, "semicolons", `${s1}; ${s2}; ${s3}`, "", three, T);
  C(K, src, "semicolons with blanks", `${s1} ; ${s2} ; ${s3}`, "", three, T);
  C(
    K,
    src,
    "semicolons with surrounding text",
    `Here are the results: ${s1}; ${s2}; ${s3} Would you like to know more?`,
    "Here are the results: Would you like to know more?",
    three,
    T,
  );
  C(
    K,
    src,
    "deeply nested",
    '{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}}',
    "",
    [call("complexTool", { level1: { level2: { level3: { level4: { value: "deep" } } } } })],
    T,
  );
  C(
    K,
    src,
    "several with deep nesting",
    '{"name": "simpleTool", "parameters": {"value": "test"}}; {"name": "complexTool", "parameters": {"config": {"database": {"connection": {"pool": {"size": 10}}}}}}',
    "",
    [
      call("simpleTool", { value: "test" }),
      call("complexTool", { config: { database: { connection: { pool: { size: 10 } } } } }),
    ],
    T,
  );
  C(
    K,
    src,
    "quotes and brackets in strings",
    '{"name": "searchTool", "parameters": {"query": "test {value} [complex]","nested": {"inner": "more {brackets}"}}}',
    "",
    [call("searchTool", { query: "test {value} [complex]", nested: { inner: "more {brackets}" } })],
    T,
  );
  C(
    K,
    src,
    "escaped quotes",
    String.raw`{"name": "parserTool", "parameters": {"text": "He said \"Hello {world}\""}}`,
    "",
    [call("parserTool", { text: 'He said "Hello {world}"' })],
    T,
  );
  C(K, src, "missing name is text", '{"parameters": {}}', '{"parameters": {}}', [], T);
  // vLLM wants parameters or arguments; an absent arguments object is an empty one here.
  C(K, src, "no parameters is a call without arguments", '{"name": "searchTool"}', "", [call("searchTool")], T);
  C(
    K,
    src,
    "invalid JSON is text",
    '{"name": "searchTool", "parameters": {invalid json}',
    '{"name": "searchTool", "parameters": {invalid json}',
    [],
    T,
  );
  C(
    K,
    src,
    "braces in the trailing prose",
    '{"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for this.',
    "I used {searchTool} for this.",
    [call("searchTool", { query: "test" })],
    T,
  );
  C(
    K,
    src,
    "call fragment inside the next sentence",
    '{"name": "searchTool", "parameters": {"query": "test"}} The arguments I passed were {"query": "test"}',
    'The arguments I passed were {"query": "test"}',
    [call("searchTool", { query: "test" })],
    T,
  );
  for (const [label, sep] of [
    ["; ", "; "],
    [";", ";"],
    [";\\n", ";\n"],
    ["\\n", "\n"],
  ] as const) {
    C(
      K,
      src,
      `parallel separated by ${label}`,
      `${s1}${sep}${s2}`,
      "",
      [call("searchTool", { query: "test1" }), call("getOpenIncidentsTool")],
      T,
    );
  }
  C(
    K,
    "clawbridge",
    "after a sentence end",
    'I will look it up. {"name": "searchTool", "parameters": {"query": "x"}}',
    "I will look it up.",
    [call("searchTool", { query: "x" })],
    T,
  );
  C(
    K,
    "clawbridge",
    "full-width colon, CJK sentence after",
    '好的：{"name": "searchTool", "parameters": {"query": "天气"}} 我来查询。',
    "好的： 我来查询。",
    [call("searchTool", { query: "天气" })],
    T,
  );
  C(
    K,
    "clawbridge",
    "sentence ends with a colon, nothing after",
    'Searching now: {"name": "searchTool", "parameters": {"query": "x"}}\nDone.',
    "Searching now:\nDone.",
    [call("searchTool", { query: "x" })],
    T,
  );
  C(K, "clawbridge", "a trailing semicolon at the end", `${s1};`, "", [call("searchTool", { query: "test1" })], T);
}

// ----- Look-alikes: JSON in a sentence that is NOT a call (stays text, byte for byte)
{
  const K = "neg-json-lookalike";
  const T = ["searchTool", "read", "get_weather"];
  const same = (name: string, input: string, extra: Partial<CorpusCase> = {}): void =>
    C(K, "clawbridge (in-sentence rule)", name, input, input, [], T, extra);
  same(
    "package.json in a sentence",
    'Here is the package.json: {"name": "searchTool", "version": "1.0.0", "scripts": {"test": "node --test"}} Run npm install.',
  );
  same(
    "package.json on its own line",
    'Your package.json:\n{"name": "read", "version": "1.0.0", "private": true}\nSave it.',
  );
  same(
    "echoed schema in a sentence",
    'The searchTool is defined as: {"name": "searchTool", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}} It needs a query.',
  );
  same(
    "echoed OpenAI tool definition in a sentence",
    'Definition: {"type": "function", "function": {"name": "read", "description": "Read a file", "parameters": {"type": "object"}}} That is all.',
  );
  same(
    "JSON example in an explanation (like this)",
    'To call a tool, write JSON like this: {"name": "searchTool", "parameters": {"query": "test"}} It then waits for the result.',
  );
  same(
    "JSON example in an explanation (for example)",
    'For example: {"name": "read", "arguments": {"path": "notes.txt"}} This reads a file.',
  );
  same(
    "JSON example in an explanation (e.g.)",
    'Use a call object, e.g. {"name": "read", "arguments": {"path": "a.txt"}} Then wait.',
  );
  same(
    "JSON example in an explanation (format)",
    'The format is: {"name": "get_weather", "arguments": {"city": "Paris"}} Each call is one object.',
  );
  same(
    "JSON example in an explanation (previous sentence)",
    'Here is an example of a call. {"name": "get_weather", "arguments": {"city": "Paris"}} It names the tool.',
  );
  same(
    "JSON example in an explanation (Chinese)",
    '例如：{"name": "get_weather", "arguments": {"city": "北京"}} 这是一个示例。',
  );
  same("call in the middle of a sentence", 'You can run {"name": "read", "arguments": {"path": "a"}} to read a file.');
  same("call after a comma", 'Sure, {"name": "read", "arguments": {"path": "a"}} Done.');
  same("lowercase after the call", 'Answer: {"name": "read", "arguments": {"path": "a"}} is what I would send.');
  same("not a call object", 'The result was: {"temperature": 21, "unit": "C"} Nice weather.');
  same("name not offered", 'Running it: {"name": "delete_all", "arguments": {}} Done.');
  same("inline code in a sentence", 'Send `{"name": "read", "arguments": {"path": "a"}}` to read.');
  same("dot without a blank", 'Version 1.{"name": "read", "arguments": {}} Next.');
}

// ----- xLAM and other JSON arrays
{
  const K = "xlam-array";
  const T = ["get_current_weather", "get_conditions", "get_temperature", "a", "b"];
  const src = vllm("test_xlam_tool_parser.py");
  const dallas =
    '{"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}';
  const dallasCall = call("get_current_weather", { city: "Dallas", state: "TX", unit: "fahrenheit" });
  const orlandoCall = call("get_current_weather", { city: "Orlando", state: "FL", unit: "fahrenheit" });
  C(
    K,
    src,
    "parallel",
    `[${dallas}, {"name": "get_current_weather", "arguments": {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}}]`,
    "",
    [dallasCall, orlandoCall],
    T,
  );
  C(
    K,
    src,
    "after a think block",
    `<think>I'll help you with that.</think>[${dallas}]`,
    "<think>I'll help you with that.</think>",
    [dallasCall],
    T,
  );
  C(
    K,
    src,
    "json code block after prose",
    `I'll help you with that.\n\`\`\`json\n[${dallas}]\n\`\`\``,
    "I'll help you with that.",
    [dallasCall],
    T,
  );
  C(
    K,
    src,
    "[TOOL_CALLS] after other text",
    `I'll check the weather for you.[TOOL_CALLS][${dallas}]`,
    "I'll check the weather for you.",
    [dallasCall],
    T,
  );
  C(
    K,
    src,
    "tool_call tags after other text",
    `I'll help you check the weather.<tool_call>[${dallas}]</tool_call>`,
    "I'll help you check the weather.",
    [dallasCall],
    T,
  );
  C(
    K,
    src,
    "non-ASCII",
    '[{"name": "get_current_weather", "arguments": {"city": "北京"}}, {"name": "get_current_weather", "arguments": {"city": "上海"}}]',
    "",
    [call("get_current_weather", { city: "北京" }), call("get_current_weather", { city: "上海" })],
    T,
  );
  C(
    K,
    src,
    "empty arguments first",
    '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 42}}]',
    "",
    [call("a"), call("b", { x: 42 })],
    T,
  );
  C(
    K,
    OLLAMA,
    "unclosed at the end",
    '[{"name": "get_conditions", "arguments": {"location": "Tokyo"}}',
    "",
    [call("get_conditions", { location: "Tokyo" })],
    T,
  );
  C(
    K,
    OLLAMA,
    "list multiple",
    '[{"name": "get_temperature", "arguments": {"city": "London"}},{"name": "get_conditions", "arguments": {"location": "Tokyo"}}]',
    "",
    [call("get_temperature", { city: "London" }), call("get_conditions", { location: "Tokyo" })],
    T,
  );
  C(
    K,
    OLLAMA,
    "unclosed, name not offered, is text",
    '[{"name": "search", "arguments": {"query": "What is the capital of Canada?"}}',
    '[{"name": "search", "arguments": {"query": "What is the capital of Canada?"}}',
    [],
    T,
  );
  C(K, OLLAMA, "not a call list", "[special delivery]", "[special delivery]", [], T);
  C(
    K,
    OLLAMA,
    "JSON object followed by a call is text",
    '{"name": "jeff"}{"name": "get_conditions", "arguments": {"location": "San Francisco"}}',
    '{"name": "jeff"}{"name": "get_conditions", "arguments": {"location": "San Francisco"}}',
    [],
    T,
  );
  C(K, "clawbridge", "unclosed after a trailing comma", '[{"name": "a", "arguments": {}},\n', "", [call("a")], T);
  C(
    K,
    "clawbridge",
    "unclosed with an incomplete element is text",
    '[{"name": "a", "arguments": {}}, {"name": "b", "argu',
    '[{"name": "a", "arguments": {}}, {"name": "b", "argu',
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "unclosed after a think block",
    `<think>plan</think>\n[${dallas}`,
    "<think>plan</think>",
    [dallasCall],
    T,
  );
  C(
    K,
    "clawbridge",
    "between sentences",
    `Calling it now. [${dallas}] I will report back.`,
    "Calling it now. I will report back.",
    [dallasCall],
    T,
  );
  C(
    K,
    "clawbridge",
    "array in a sentence is text",
    `Arrays such as [${dallas}] are examples.`,
    `Arrays such as [${dallas}] are examples.`,
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "[TOOL_CALLS] closed by [/TOOL_CALLS]",
    `[TOOL_CALLS] [${dallas}][/TOOL_CALLS]`,
    "",
    [dallasCall],
    T,
  );
}

// ----- Reasoning blocks: calls written inside thinking are not calls
{
  const K = "think-block";
  const T = ["get_weather", "get_current_weather", "fake_tool"];
  C(
    K,
    vllm("test_minimax_tool_parser.py"),
    "call inside thinking ignored",
    '<think>I should use a tool. <tool_calls>\n{"name": "fake_tool", "arguments": {"should": "ignore"}}\n</tool_calls></think>\n\nLet me help you with the weather. <tool_calls>\n{"name": "get_current_weather", "arguments": {"city": "Miami", "state": "FL", "unit": "fahrenheit"}}\n</tool_calls>',
    '<think>I should use a tool. <tool_calls>\n{"name": "fake_tool", "arguments": {"should": "ignore"}}\n</tool_calls></think>\n\nLet me help you with the weather.',
    [call("get_current_weather", { city: "Miami", state: "FL", unit: "fahrenheit" })],
    T,
  );
  C(
    K,
    LLAMACPP,
    "unclosed thinking with a tag",
    "<think><tool_call>nah uhg</tool_call>",
    "<think><tool_call>nah uhg</tool_call>",
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "JSON line after thinking",
    '<think>\nThe user wants the weather.\n</think>\n\n{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    "<think>\nThe user wants the weather.\n</think>",
    [call("get_weather", { city: "Oslo" })],
    T,
  );
  C(
    K,
    "clawbridge",
    "pythonic list right after thinking",
    "<think>ok</think>[get_weather(city='Oslo')]",
    "<think>ok</think>",
    [call("get_weather", { city: "Oslo" })],
    T,
  );
  C(
    K,
    "clawbridge",
    "mistral inside thinking is not a call",
    '<think>[TOOL_CALLS] [{"name": "get_weather", "arguments": {}}]</think>Done.',
    '<think>[TOOL_CALLS] [{"name": "get_weather", "arguments": {}}]</think>Done.',
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "think after leaked template tokens, stripped",
    '<|im_start|>assistant\n<think>\n<tool_call>{"name": "fake_tool", "arguments": {}}</tool_call>\n</think>\n<tool_call>{"name": "get_weather", "arguments": {}}</tool_call><|im_end|>',
    '<think>\n<tool_call>{"name": "fake_tool", "arguments": {}}</tool_call>\n</think>',
    [call("get_weather")],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    "clawbridge",
    "think later in the reply is plain text",
    'Sure. <think>x</think> <tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',
    "Sure. <think>x</think>",
    [call("get_weather")],
    T,
  );
}

// ----- Tags and fences (llama.cpp Hermes 2 Pro alternatives)
{
  const K = "tags-fences";
  const T = ["special_function", "python"];
  const sf = call("special_function", { arg1: 1 });
  const j = '{"name": "special_function", "arguments": {"arg1": 1}}';
  const L = (name: string, input: string, content = ""): void => C(K, LLAMACPP, name, input, content, [sf], T);
  L("function name attribute", '<function name="special_function">\n{"arg1": 1}\n</function>');
  L("function= with JSON", '<function=special_function>{"arg1": 1}</function>');
  L("tool tag", `<tool>\n  ${j}\n</tool>`);
  L("tools tag", `<tools>\n  ${j}\n</tools>`);
  L("response tag", `<response>\n  ${j}\n</response>`);
  L("xml fence around response", "```xml\n<response>\n    " + j + "\n</response>\n```");
  L("xml fence", "```xml\n  " + j + "\n```");
  L("plain fence indented", "```\n  " + j + "\n```");
  L("plain fence", "```\n" + j + "\n```");
  L("json fence", "```json\n  " + j + "\n```");
  L(
    "function_call tag inside a json fence",
    "```json\n\n                    <function_call> " + j + " \n                    </function_call> \n``` ",
  );
  L("json tag", `<json>\n  ${j}\n</json>`);
  L("xml tag, pretty", '<xml>\n  {\n    "name": "special_function", "arguments": {"arg1": 1}\n  }\n</xml>');
  L("JSON tag", `<JSON>\n  ${j}\n</JSON>`);
  L("bare", j);
  L("bare, newline after brace", '{\n  "name": "special_function", "arguments": {"arg1": 1}}');
  L("not a tool call: says the prose, the line is one", `This is not a tool call:\n${j}`, "This is not a tool call:");
  L("prose before a tag", `Hello, world!\nWhat's up?<tool_call>\n${j}\n</tool_call>`, "Hello, world!\nWhat's up?");
  C(
    K,
    LLAMACPP,
    "two tool_call tags",
    `<tool_call>\n${j}\n</tool_call>\n<tool_call>\n{"name": "python", "arguments": {"code":"print('hello')"}}\n</tool_call>`,
    "",
    [sf, call("python", { code: "print('hello')" })],
    T,
  );
  C(
    K,
    LLAMACPP,
    "two function= blocks",
    `<function=special_function>{"arg1": 1}</function>\n<function=python>{"code":"print('hello')"}</function>`,
    "",
    [sf, call("python", { code: "print('hello')" })],
    T,
  );
  C(
    K,
    "meta-llama/llama-models models/llama3_1/tests/api/test_tool_utils.py",
    "function= without the closing tag",
    '<function=special_function>{"arg1": 1}',
    "",
    [sf],
    T,
  );
  C(
    K,
    "clawbridge (OpenAI legacy function_call field)",
    "function_call key inside fenced JSON",
    '```json\n{"function_call": {"name": "special_function", "arguments": "{\\"arg1\\": 1}"}}\n```',
    "",
    [sf],
    T,
  );
  C(
    K,
    "clawbridge field notes",
    "JSON lines separated by trailing commas",
    `${j},\n{"name": "python", "arguments": {"code": "1"}}`,
    "",
    [sf, call("python", { code: "1" })],
    T,
  );
  C(K, "clawbridge", "trailing comma promising another call is text", `${j},\nDone.`, `${j},\nDone.`, [], T);
  C(
    K,
    "clawbridge",
    "attribute form, name not offered, is text",
    '<function name="rm">{"path": "/"}</function>',
    '<function name="rm">{"path": "/"}</function>',
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "response tag holding prose is text",
    "<response>All good.</response>",
    "<response>All good.</response>",
    [],
    T,
  );
}

// ----- Name collisions: say_hello vs say_hello_world
{
  const K = "name-collision";
  const T = ["say_hello", "say_hello_world", "get_address", "add"];
  const hw = call("say_hello_world");
  const h = call("say_hello");
  C(
    K,
    OLLAMA,
    "longer name",
    '<tool_call>{"name": "say_hello_world", "arguments": {}}\n}',
    '<tool_call>{"name": "say_hello_world", "arguments": {}}\n}',
    [],
    T,
  );
  C(
    K,
    OLLAMA,
    "longer then shorter",
    '<tool_call>{"name": "say_hello_world", "arguments": {}}</tool_call><tool_call>{"name": "say_hello", "arguments": {}}</tool_call>',
    "",
    [hw, h],
    T,
  );
  C(
    K,
    OLLAMA,
    "cut inside the name is text",
    '<tool_call>{"name": "say_hello',
    '<tool_call>{"name": "say_hello',
    [],
    T,
  );
  C(
    K,
    OLLAMA,
    "shorter then longer, unclosed",
    '<tool_call>{"name": "say_hello", "arguments": {}}</tool_call><tool_call>{"name": "say_hello_world", "arguments": {}}',
    "",
    [h, hw],
    T,
  );
  C(K, OLLAMA, "shorter", '<tool_call>{"name": "say_hello", "arguments": {}}</tool_call>', "", [h], T);
  C(
    K,
    OLLAMA,
    "substring of another",
    '{"name": "get_address", "arguments": {"location": "London"}}',
    "",
    [call("get_address", { location: "London" })],
    T,
  );
  C(
    K,
    OLLAMA,
    "arguments before name",
    '<tool_call>{"arguments": {"a": "5", "b": "10"}, "name": "add"}</tool_call>',
    "",
    [call("add", { a: "5", b: "10" })],
    T,
  );
  C(
    K,
    OLLAMA,
    "prose naming a tool is text",
    "Let me say hello to the user. I'll use the say_hello tool. ",
    "Let me say hello to the user. I'll use the say_hello tool. ",
    [],
    T,
  );
  C(K, "clawbridge", "pythonic", "[say_hello_world(), say_hello()]", "", [hw, h], T);
  C(K, "clawbridge", "mistral", "[TOOL_CALLS]say_hello_world[ARGS]{}[TOOL_CALLS]say_hello[ARGS]{}", "", [hw, h], T);
  C(
    K,
    "clawbridge",
    "function block",
    "<function=say_hello_world></function><function=say_hello></function>",
    "",
    [hw, h],
    T,
  );
  C(
    K,
    "clawbridge",
    "kimi",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.say_hello_world:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
    "",
    [hw],
    T,
  );
  C(K, "clawbridge", "harmony", "<|channel|>commentary to=functions.say_hello_world<|message|>{}<|call|>", "", [hw], T);
  C(
    K,
    "clawbridge",
    "deepseek",
    `${DS("tool▁calls▁begin")}${DS("tool▁call▁begin")}say_hello_world${DS("tool▁sep")}{}${DS("tool▁call▁end")}${DS("tool▁calls▁end")}`,
    "",
    [hw],
    T,
  );
  const only = ["say_hello"];
  C(
    K,
    "clawbridge",
    "longer name not offered is text (JSON)",
    '<tool_call>{"name": "say_hello_world", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "say_hello_world", "arguments": {}}</tool_call>',
    [],
    only,
  );
  C(
    K,
    "clawbridge",
    "longer name not offered is text (pythonic)",
    "[say_hello_world()]",
    "[say_hello_world()]",
    [],
    only,
  );
  C(
    K,
    "clawbridge",
    "longer name not offered is text (mistral)",
    "[TOOL_CALLS]say_hello_world[ARGS]{}",
    "[TOOL_CALLS]say_hello_world[ARGS]{}",
    [],
    only,
  );
  C(
    K,
    "clawbridge",
    "longer name not offered is text (GLM)",
    "<tool_call>say_hello_world\n</tool_call>",
    "<tool_call>say_hello_world\n</tool_call>",
    [],
    only,
  );
  C(
    K,
    "clawbridge",
    "longer name not offered is text (harmony)",
    "<|channel|>commentary to=functions.say_hello_world<|message|>{}<|call|>",
    "<|channel|>commentary to=functions.say_hello_world<|message|>{}<|call|>",
    [],
    only,
  );
}

// ----- Llama <|python_tag|> builtin tools
{
  const K = "python_tag-builtin";
  const T = ["python", "brave_search", "wolfram_alpha", "code_interpreter"];
  const models = "meta-llama/llama-models models/llama3_1/api/tool_utils.py";
  C(
    K,
    LLAMACPP,
    "python.call",
    "<|python_tag|>python.call(code=\"print('hey')\")",
    "",
    [call("python", { code: "print('hey')" })],
    T,
  );
  C(
    K,
    LLAMACPP,
    "code_interpreter.call",
    "<|python_tag|>code_interpreter.call(code=\"print('hey')\")",
    "",
    [call("code_interpreter", { code: "print('hey')" })],
    T,
  );
  C(
    K,
    models,
    "brave_search",
    '<|python_tag|>brave_search.call(query="current weather in Menlo Park, California")<|eom_id|>',
    "",
    [call("brave_search", { query: "current weather in Menlo Park, California" })],
    T,
  );
  C(
    K,
    models,
    "wolfram_alpha",
    '<|python_tag|>wolfram_alpha.call(query="solve x^3 - 4x^2 + 6x - 24 = 0")<|eom_id|>',
    "",
    [call("wolfram_alpha", { query: "solve x^3 - 4x^2 + 6x - 24 = 0" })],
    T,
  );
  C(
    K,
    models,
    "brave_search, tokens stripped",
    '<|python_tag|>brave_search.call(query="Who won NBA in 2024?")<|eom_id|>',
    "",
    [call("brave_search", { query: "Who won NBA in 2024?" })],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    "fairydreaming/tlcl README.md; " + models,
    "raw code for the python tool",
    '<|python_tag|>import sys\n\nprint("Python version: ", sys.version)<|eom_id|>',
    "",
    [call("python", { code: 'import sys\n\nprint("Python version: ", sys.version)' })],
    T,
  );
  C(
    K,
    models,
    "raw code for code_interpreter",
    "<|python_tag|>print(2 + 2)<|eom_id|>",
    "",
    [call("code_interpreter", { code: "print(2 + 2)" })],
    ["code_interpreter"],
  );
  C(
    K,
    models,
    "raw code, tokens stripped",
    "Let me compute.<|python_tag|>x = 6 * 7\nprint(x)<|eom_id|>",
    "Let me compute.",
    [call("python", { code: "x = 6 * 7\nprint(x)" })],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    models,
    "brave_search not offered is text",
    '<|python_tag|>brave_search.call(query="x")<|eom_id|>',
    '<|python_tag|>brave_search.call(query="x")<|eom_id|>',
    [],
    ["wolfram_alpha"],
  );
  C(
    K,
    models,
    "raw code without a code tool is text",
    "<|python_tag|>print(1)<|eom_id|>",
    "<|python_tag|>print(1)<|eom_id|>",
    [],
    ["brave_search"],
  );
  C(
    K,
    models,
    "raw code without a code tool, stripped",
    "<|python_tag|>print(1)<|eom_id|>",
    "print(1)",
    [],
    ["brave_search"],
    { stripSpecialTokens: true },
  );
  C(
    K,
    "clawbridge",
    "pythonic list after python_tag",
    "<|python_tag|>[brave_search(query='a'), wolfram_alpha(query='b')]",
    "",
    [call("brave_search", { query: "a" }), call("wolfram_alpha", { query: "b" })],
    T,
  );
}

// ----- Kimi K2
{
  const K = "kimi-k2";
  const T = ["get_weather", "get_news", "send_email", "process_html", "process_data", "test", "valid", "bad", "good"];
  const src = vllm("test_kimi_k2_tool_parser.py");
  const tool = (id: string, args: string): string =>
    `<|tool_call_begin|>${id} <|tool_call_argument_begin|>${args}<|tool_call_end|>`;
  const wrap = (...t: string[]): string => "<|tool_calls_section_begin|>" + t.join("") + "<|tool_calls_section_end|>";
  C(
    K,
    src,
    "single",
    "I'll check. " + wrap(tool("functions.get_weather:0", '{"city": "Beijing"}')),
    "I'll check.",
    [call("get_weather", { city: "Beijing" })],
    T,
  );
  C(
    K,
    src,
    "parallel",
    "Compare weather. " +
      wrap(
        tool("functions.get_weather:0", '{"city": "Beijing"}'),
        tool("functions.get_weather:1", '{"city": "Shanghai"}'),
      ),
    "Compare weather.",
    [call("get_weather", { city: "Beijing" }), call("get_weather", { city: "Shanghai" })],
    T,
  );
  C(
    K,
    src,
    "three",
    "Multiple tasks. " +
      wrap(
        tool("functions.get_weather:0", '{"city": "New York"}'),
        tool("functions.get_news:1", '{"topic": "technology"}'),
        tool("functions.send_email:2", '{"to": "user@example.com", "subject": "Daily Update"}'),
      ),
    "Multiple tasks.",
    [
      call("get_weather", { city: "New York" }),
      call("get_news", { topic: "technology" }),
      call("send_email", { to: "user@example.com", subject: "Daily Update" }),
    ],
    T,
  );
  C(
    K,
    src,
    "angle brackets in JSON",
    "Process HTML. " + wrap(tool("functions.process_html:0", '{"html": "<div>content</div>"}')),
    "Process HTML.",
    [call("process_html", { html: "<div>content</div>" })],
    T,
  );
  C(
    K,
    src,
    "multi-line JSON",
    "Formatted. " + wrap(tool("functions.process_data:0", '{\n  "name": "test",\n  "value": 123\n}')),
    "Formatted.",
    [call("process_data", { name: "test", value: 123 })],
    T,
  );
  C(
    K,
    src,
    "no functions prefix",
    "No prefix. " + wrap(tool("get_weather:0", '{"city": "Tokyo"}')),
    "No prefix.",
    [call("get_weather", { city: "Tokyo" })],
    T,
  );
  C(K, src, "empty arguments", "Empty args. " + wrap(tool("functions.test:0", "{}")), "Empty args.", [call("test")], T);
  // vLLM keeps the valid sibling (or the malformed JSON as-is); here a section is all-or-nothing.
  const badId =
    "Help. " +
    wrap(tool("functions.invalid.0", '{"city": "Beijing"}'), tool("functions.valid:1", '{"city": "Shanghai"}'));
  C(K, src, "malformed id makes the section text", badId, badId, [], T);
  const badJson =
    "Help. " + wrap(tool("functions.bad:0", '{"city": "Beijing"'), tool("functions.good:1", '{"city": "Shanghai"}'));
  C(K, src, "invalid JSON makes the section text", badJson, badJson, [], T);
  const bare = "Let me check. " + wrap(tool("0", '{"city": "Tokyo"}'));
  C(K, src, "bare counter (no name) is text", bare, bare, [], T);
  C(
    K,
    "vllm-project/vllm vllm/tool_parsers/kimi_k2_tool_parser.py",
    "singular section token",
    "<|tool_call_section_begin|>" + tool("functions.get_weather:0", '{"city": "Oslo"}') + "<|tool_call_section_end|>",
    "",
    [call("get_weather", { city: "Oslo" })],
    T,
  );
  C(
    K,
    src,
    "stripped tokens",
    "<|im_start|>assistant\nI'll help. " + wrap(tool("functions.get_weather:0", '{"city": "Tokyo"}')) + "<|im_end|>",
    "I'll help.",
    [call("get_weather", { city: "Tokyo" })],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    "clawbridge",
    "section end missing at the end",
    "<|tool_calls_section_begin|>" + tool("functions.get_weather:0", '{"city": "Rome"}'),
    "",
    [call("get_weather", { city: "Rome" })],
    T,
  );
}

// ----- GLM-4.5 / 4.6 / 4.7
{
  const K = "glm45";
  const T = ["get_current_weather", "get_weather", "get_current_time", "send_message"];
  const src = vllm("test_glm4_moe_tool_parser.py");
  const dallas =
    "<tool_call>get_current_weather\n    <arg_key>city</arg_key>\n    <arg_value>Dallas</arg_value>\n    <arg_key>state</arg_key>\n    <arg_value>TX</arg_value>\n    <arg_key>unit</arg_key>\n    <arg_value>fahrenheit</arg_value>\n    </tool_call>";
  const dallasCall = call("get_current_weather", { city: "Dallas", state: "TX", unit: "fahrenheit" });
  C(K, src, "single", dallas, "", [dallasCall], T);
  C(
    K,
    src,
    "two calls",
    dallas + "\n    " + dallas.replace("Dallas", "Orlando").replace("TX", "FL"),
    "",
    [dallasCall, call("get_current_weather", { city: "Orlando", state: "FL", unit: "fahrenheit" })],
    T,
  );
  C(
    K,
    src,
    "content before",
    "I'll help you check the weather. <tool_call>get_current_weather\n    <arg_key>city</arg_key>\n    <arg_value>Seattle</arg_value>\n    <arg_key>state</arg_key>\n    <arg_value>WA</arg_value>\n    <arg_key>unit</arg_key>\n    <arg_value>celsius</arg_value>\n    </tool_call>",
    "I'll help you check the weather.",
    [call("get_current_weather", { city: "Seattle", state: "WA", unit: "celsius" })],
    T,
  );
  C(
    K,
    src,
    "date value, no blank before the tag",
    "I will help you get the weather.<tool_call>get_weather\n    <arg_key>city</arg_key>\n    <arg_value>Beijing</arg_value>\n    <arg_key>date</arg_key>\n    <arg_value>2025-08-01</arg_value>\n    </tool_call>",
    "I will help you get the weather.",
    [call("get_weather", { city: "Beijing", date: "2025-08-01" })],
    T,
  );
  C(
    K,
    src,
    "after a think block",
    "<think>I want to get the weather.</think>\n\nI will help you get the weather.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>\n</tool_call>",
    "<think>I want to get the weather.</think>\n\nI will help you get the weather.",
    [call("get_weather", { city: "Beijing", date: "2025-08-01" })],
    T,
  );
  C(K, src, "empty arguments", "<tool_call>get_current_time\n</tool_call>", "", [call("get_current_time")], T);
  C(
    K,
    src,
    "prose between calls",
    "I will help you get the weather info.\n\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>\n</tool_call>\n\nmeaningwhile, I will also check the weather in Shanghai.\n\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Shanghai</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>\n</tool_call>",
    "I will help you get the weather info.\n\nmeaningwhile, I will also check the weather in Shanghai.",
    [
      call("get_weather", { city: "Beijing", date: "2025-08-01" }),
      call("get_weather", { city: "Shanghai", date: "2025-08-01" }),
    ],
    T,
  );
  C(
    K,
    src,
    "special characters",
    "<tool_call>send_message\n<arg_key>recipient</arg_key>\n<arg_value>Amy</arg_value>\n<arg_key>message</arg_key>\n<arg_value>It is a nice day</arg_value>\n<arg_key>priority</arg_key>\n<arg_value>high</arg_value>\n</tool_call>",
    "",
    [call("send_message", { recipient: "Amy", message: "It is a nice day", priority: "high" })],
    T,
  );
  const malformed =
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Seattle</arg_value>\n<arg_key>incomplete_arg\n<arg_value>value</arg_value>\n</tool_call>";
  C(K, src, "malformed key is text", malformed, malformed, [], T);
  // vLLM drops an unclosed call; here a block whose closing tag is missing at the END counts.
  C(
    K,
    src,
    "closing tag missing at the end",
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2025-08-01</arg_value>",
    "",
    [call("get_weather", { city: "Beijing", date: "2025-08-01" })],
    T,
  );
  C(
    K,
    "sgl-project/sglang python/sglang/srt/function_call/glm47_moe_detector.py",
    "GLM-4.7 compact",
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>",
    "",
    [call("get_weather", { city: "Beijing", days: 3 })],
    T,
  );
  C(
    K,
    "clawbridge",
    "name not offered is text",
    "<tool_call>rm_rf\n<arg_key>path</arg_key>\n<arg_value>/</arg_value>\n</tool_call>",
    "<tool_call>rm_rf\n<arg_key>path</arg_key>\n<arg_value>/</arg_value>\n</tool_call>",
    [],
    T,
  );
}

// ----- MiniMax M1 (<tool_calls>) and M2 (<invoke>)
{
  const K = "minimax";
  const T = ["get_weather", "search_web", "get_stock", "fn_a", "fn_b", "get_current_weather"];
  const m2 = vllm("test_minimax_m2_tool_parser.py");
  const m1 = vllm("test_minimax_tool_parser.py");
  C(
    K,
    m2,
    "content before",
    'Let me check. <minimax:tool_call><invoke name="get_weather"><parameter name="city">Seattle</parameter></invoke></minimax:tool_call>',
    "Let me check.",
    [call("get_weather", { city: "Seattle" })],
    T,
  );
  C(
    K,
    m2,
    "several parameters",
    '<minimax:tool_call><invoke name="get_weather"><parameter name="city">Seattle</parameter><parameter name="days">5</parameter></invoke></minimax:tool_call>',
    "",
    [call("get_weather", { city: "Seattle", days: 5 })],
    T,
  );
  C(
    K,
    m2,
    "two invokes",
    '<minimax:tool_call><invoke name="search_web"><parameter name="query">OpenAI</parameter></invoke><invoke name="search_web"><parameter name="query">Gemini</parameter></invoke></minimax:tool_call>',
    "",
    [call("search_web", { query: "OpenAI" }), call("search_web", { query: "Gemini" })],
    T,
  );
  C(
    K,
    m2,
    "different functions",
    '<minimax:tool_call><invoke name="get_weather"><parameter name="city">NYC</parameter></invoke><invoke name="get_stock"><parameter name="ticker">AAPL</parameter></invoke></minimax:tool_call>',
    "",
    [call("get_weather", { city: "NYC" }), call("get_stock", { ticker: "AAPL" })],
    T,
  );
  C(
    K,
    m2,
    "invokes without blanks",
    '<minimax:tool_call><invoke name="fn_a"><parameter name="x">1</parameter></invoke><invoke name="fn_b"><parameter name="y">2</parameter></invoke></minimax:tool_call>',
    "",
    [call("fn_a", { x: 1 }), call("fn_b", { y: 2 })],
    T,
  );
  C(
    K,
    "clawbridge",
    "invoke on its own",
    '<invoke name="get_weather">\n<parameter name="city">Lisbon</parameter>\n</invoke>',
    "",
    [call("get_weather", { city: "Lisbon" })],
    T,
  );
  const bad =
    '<minimax:tool_call><invoke name="get_weather"><parameter name="city">X</parameter></invoke><invoke name="unknown"></invoke></minimax:tool_call>';
  C(K, "clawbridge", "one invoke not offered makes the block text", bad, bad, [], T);
  C(
    K,
    m1,
    "M1 tool_calls JSON lines",
    '<tool_calls>\n{"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}\n{"name": "get_current_weather", "arguments": {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}}\n</tool_calls>',
    "",
    [
      call("get_current_weather", { city: "Dallas", state: "TX", unit: "fahrenheit" }),
      call("get_current_weather", { city: "Orlando", state: "FL", unit: "fahrenheit" }),
    ],
    T,
  );
  C(
    K,
    m1,
    "M1 content before",
    'I\'ll help you check the weather. <tool_calls>\n{"name": "get_current_weather", "arguments": {"city": "Seattle", "state": "WA", "unit": "celsius"}}\n</tool_calls>',
    "I'll help you check the weather.",
    [call("get_current_weather", { city: "Seattle", state: "WA", unit: "celsius" })],
    T,
  );
  C(
    K,
    m1,
    "M1 closing tag missing at the end",
    '<tool_calls>\n{"name": "get_current_weather", "arguments": {"city": "Boston", "state": "MA"}}',
    "",
    [call("get_current_weather", { city: "Boston", state: "MA" })],
    T,
  );
  // vLLM's MiniMax M1 parser does not read multi-line JSON; it is one call object here.
  C(
    K,
    m1,
    "M1 multi-line JSON",
    '<tool_calls>\n{\n  "name": "get_current_weather",\n  "arguments": {\n    "city": "New York",\n    "state": "NY",\n    "unit": "celsius"\n  }\n}\n</tool_calls>',
    "",
    [call("get_current_weather", { city: "New York", state: "NY", unit: "celsius" })],
    T,
  );
  const m1bad =
    '<tool_calls>\n{"name": "get_current_weather", "arguments": {"city": "Seattle"}}\n{invalid json here}\n</tool_calls>';
  C(K, m1, "M1 invalid line makes the block text", m1bad, m1bad, [], T);
}

// ----- Granite (<|tool_call|>)
{
  const K = "granite";
  const T = ["get_weather", "get_time", "test_function", "refresh"];
  const src = vllm("test_granite_tool_parser.py");
  C(
    K,
    src,
    "single",
    '<|tool_call|> [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
    "",
    [call("get_weather", { city: "Tokyo" })],
    T,
  );
  C(
    K,
    src,
    "parallel, multi-line",
    '<|tool_call|> [\n  {"name": "get_weather", "arguments": {"city": "Tokyo"}},\n  {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}\n]',
    "",
    [call("get_weather", { city: "Tokyo" }), call("get_time", { timezone: "Asia/Tokyo" })],
    T,
  );
  C(
    K,
    src,
    "Granite 3.1 tool_call string prefix",
    '<tool_call> [{\n  "name": "test_function",\n  "arguments": {\n    "int_field": 42,\n    "null_field": null\n  }\n}]',
    "",
    [call("test_function", { int_field: 42, null_field: null })],
    T,
  );
  C(K, src, "empty arguments", '<|tool_call|> [{"name": "refresh", "arguments": {}}]', "", [call("refresh")], T);
  C(
    K,
    src,
    "surrounding text",
    'Let me check the weather for you.\n<|tool_call|> [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]\nI\'ll get that information.',
    "Let me check the weather for you.\nI'll get that information.",
    [call("get_weather", { city: "Tokyo" })],
    T,
  );
  C(
    K,
    src,
    "arguments before name",
    '<|tool_call|> [{"arguments": {"city": "Tokyo"}, "name": "get_weather"}, {"arguments": {"timezone": "Asia/Tokyo"}, "name": "get_time"}]',
    "",
    [call("get_weather", { city: "Tokyo" }), call("get_time", { timezone: "Asia/Tokyo" })],
    T,
  );
  for (const bad of [
    '<|tool_call|> [{"name": "func", "arguments": {',
    '[{"name": "func", "arguments": "not a dict"}]',
    'Some text [{"name": "func"}]',
  ]) {
    C(K, src, `malformed: ${bad.slice(0, 32)}`, bad, bad, [], T);
  }
  C(
    K,
    src,
    "malformed, stripped",
    '<|tool_call|> [{"name": "func", "arguments": {',
    ' [{"name": "func", "arguments": {',
    [],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    "clawbridge",
    "unclosed array at the end",
    '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}',
    "",
    [call("get_weather", { city: "Oslo" })],
    T,
  );
}

// ----- Phi-4-mini / Firefunction (functools[…])
{
  const K = "phi4-functools";
  const T = ["get_weather", "get_time", "test_function", "refresh", "special_function"];
  const src = vllm("test_phi4mini_tool_parser.py");
  C(
    K,
    src,
    "single",
    'functools[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
    "",
    [call("get_weather", { city: "Tokyo" })],
    T,
  );
  C(
    K,
    src,
    "parallel, multi-line",
    'functools[\n  {"name": "get_weather", "arguments": {"city": "Tokyo"}},\n  {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}\n]',
    "",
    [call("get_weather", { city: "Tokyo" }), call("get_time", { timezone: "Asia/Tokyo" })],
    T,
  );
  C(K, src, "empty arguments", 'functools[{"name": "refresh", "arguments": {}}]', "", [call("refresh")], T);
  C(
    K,
    src,
    "surrounding text",
    'Let me check the weather for you.\nfunctools[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]\nWould you like to know more?',
    "Let me check the weather for you.\nWould you like to know more?",
    [call("get_weather", { city: "Tokyo" })],
    T,
  );
  C(
    K,
    src,
    "escaped strings",
    'functools[{\n  "name": "test_function",\n  "arguments": {\n    "quoted": "He said \\"hello\\"",\n    "path": "C:\\\\Users\\\\file.txt",\n    "newline": "line1\\nline2",\n    "unicode": "emoji: 🎉"\n  }\n}]',
    "",
    [
      call("test_function", {
        quoted: 'He said "hello"',
        path: "C:\\Users\\file.txt",
        newline: "line1\nline2",
        unicode: "emoji: 🎉",
      }),
    ],
    T,
  );
  for (const bad of [
    'functools[{"name": "func", "arguments": {',
    'functools[{"name": "func", "arguments": "not a dict"}]',
    'functools{"name": "func"}',
    'functools[{"name": "func"}]',
    "functools[] This is just text",
    "functools[ This is just text ]",
  ]) {
    C(K, src, `malformed: ${bad.slice(0, 30)}`, bad, bad, [], T);
  }
  C(
    K,
    LLAMACPP,
    "Firefunction v2 (leading blank)",
    ' functools[{"name": "special_function", "arguments": {"arg1": 1}}]',
    "",
    [call("special_function", { arg1: 1 })],
    T,
  );
  C(
    K,
    "clawbridge",
    "inside a word is text",
    'myfunctools[{"name": "get_weather", "arguments": {}}]',
    'myfunctools[{"name": "get_weather", "arguments": {}}]',
    [],
    T,
  );
  C(
    K,
    "clawbridge",
    "words starting with f stay text",
    "first, find four fun functions; functools is a module.",
    "first, find four fun functions; functools is a module.",
    [],
    T,
  );
}

// ----- InternLM2
{
  const K = "internlm";
  const T = ["get_weather", "test_function", "refresh", "get_current_weather", "func"];
  const src = vllm("test_internlm2_tool_parser.py");
  C(
    K,
    src,
    "single",
    '<|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}<|action_end|>',
    "",
    [call("get_weather", { city: "Tokyo" })],
    T,
  );
  C(
    K,
    src,
    "various data types",
    '<|action_start|><|plugin|>{\n  "name": "test_function",\n  "parameters": {\n    "string_field": "hello",\n    "bool_field": true,\n    "array_field": ["a", "b", "c"]\n  }\n}<|action_end|>',
    "",
    [call("test_function", { string_field: "hello", bool_field: true, array_field: ["a", "b", "c"] })],
    T,
  );
  C(
    K,
    src,
    "empty arguments",
    '<|action_start|><|plugin|>{"name": "refresh", "parameters": {}}<|action_end|>',
    "",
    [call("refresh")],
    T,
  );
  C(
    K,
    src,
    "surrounding text",
    'Let me check the weather for you. <|action_start|><|plugin|>{"name": "get_weather", "parameters": {"city": "Tokyo"}}<|action_end|>',
    "Let me check the weather for you.",
    [call("get_weather", { city: "Tokyo" })],
    T,
  );
  const unknown =
    '<|action_start|><|plugin|>{"name": "delete_everything", "parameters": {"city": "Tokyo"}}<|action_end|>';
  C(K, src, "unknown tool name is text", unknown, unknown, [], T);
  for (const bad of [
    '<|action_start|><|plugin|>{"name": "func", "parameters": {',
    '<|action_start|><|plugin|>{"name": "func", "parameters": "not a dict"}<|action_end|>',
    "<|action_start|><|plugin|>not json<|action_end|>",
    "<|action_start|><|plugin|>",
    '<|action_start|>{"name": "func"}',
  ]) {
    C(K, src, `malformed: ${bad.slice(16, 48)}`, bad, bad, [], T);
  }
  C(
    K,
    "InternLM/InternLM chat/chat_format.md",
    "newline after plugin, stripped",
    '<|im_start|>assistant\nSure, I will search for the weather of Shanghai.<|action_start|><|plugin|>\n{"name": "get_current_weather", "parameters": {"location": "Shanghai"}}<|action_end|><|im_end|>',
    "Sure, I will search for the weather of Shanghai.",
    [call("get_current_weather", { location: "Shanghai" })],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    "clawbridge",
    "interpreter action is text, stripped",
    "<|action_start|><|interpreter|>\nprint(1)<|action_end|>",
    "\nprint(1)",
    [],
    T,
    { stripSpecialTokens: true },
  );
}

// ----- Seed-OSS
{
  const K = "seed-oss";
  const T = ["get_weather"];
  const src = vllm("test_seed_oss_tool_parser.py");
  const barcelona = call("get_weather", { location: "Barcelona, Spain" });
  C(
    K,
    src,
    "no thinking",
    "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n</function>\n</seed:tool_call>",
    "",
    [barcelona],
    T,
  );
  const think0 =
    "<seed:think>\n</seed:cot_budget_reflect>\n</seed:cot_budget_reflect>\nThe current thinking budget is 0, so I will directly start answering the question.\n</seed:think>\n";
  C(
    K,
    src,
    "after a thinking block",
    think0 +
      "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n</function>\n</seed:tool_call>",
    think0.trimEnd(),
    [barcelona],
    T,
  );
  const think =
    "<seed:think>\nGot it. Let me format the function call correctly. The format is <seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n<parameter=unit>celsius</parameter>\n</function>\n</seed:tool_call>. Let me go with that.</seed:think>";
  C(
    K,
    src,
    "a call written inside thinking is not a call",
    think +
      "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n<parameter=unit>celsius</parameter>\n</function>\n</seed:tool_call>",
    think,
    [call("get_weather", { location: "Barcelona, Spain", unit: "celsius" })],
    T,
  );
  C(
    K,
    "clawbridge",
    "name not offered is text",
    "<seed:tool_call>\n<function=other>\n<parameter=x>1</parameter>\n</function>\n</seed:tool_call>",
    "<seed:tool_call>\n<function=other>\n<parameter=x>1</parameter>\n</function>\n</seed:tool_call>",
    [],
    T,
  );
}

// ----- gpt-oss Harmony
{
  const K = "harmony";
  const T = ["get_weather", "get_time", "get_current_weather"];
  const src = "sgl-project/sglang python/sglang/srt/function_call/gpt_oss_detector.py";
  const call1 =
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"NYC"}<|call|>';
  C(
    K,
    src,
    "single, no stop token",
    '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"NYC"}',
    "",
    [call("get_weather", { location: "NYC" })],
    T,
  );
  C(
    K,
    src,
    "back-to-back calls",
    call1 +
      '<|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"timezone":"EST"}<|call|>',
    "",
    [call("get_weather", { location: "NYC" }), call("get_time", { timezone: "EST" })],
    T,
  );
  const analysis = "<|channel|>analysis<|message|>Need to check weather.<|end|>";
  C(K, src, "after analysis, tokens kept", analysis + call1, analysis, [call("get_weather", { location: "NYC" })], T);
  C(
    K,
    src,
    "after analysis, tokens stripped",
    analysis + call1 + "<|start|>assistant<|channel|>final<|message|>I checked the weather.<|return|>",
    "Need to check weather.I checked the weather.",
    [call("get_weather", { location: "NYC" })],
    T,
    { stripSpecialTokens: true },
  );
  C(
    K,
    "ollama/ollama harmony/harmonyparser_test.go",
    "recipient before the channel",
    '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"location": "Tokyo"}<|call|>',
    "",
    [call("get_weather", { location: "Tokyo" })],
    T,
  );
  C(
    K,
    "ollama/ollama harmony/harmonyparser_test.go",
    "constrain without a blank",
    "<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>{}<|call|>",
    "",
    [call("get_weather")],
    T,
  );
  C(
    K,
    vllm("test_openai_tool_parser.py"),
    "multi-line arguments",
    '<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>{\n"location": "Tokyo"\n}<|call|>',
    "",
    [call("get_current_weather", { location: "Tokyo" })],
    T,
  );
  C(
    K,
    vllm("test_openai_tool_parser.py"),
    "no arguments",
    "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|><|call|>",
    "",
    [call("get_time")],
    T,
  );
  const final = "<|start|>assistant<|channel|>final<|message|>This is a test<|end|>";
  C(K, vllm("test_openai_tool_parser.py"), "final message only is text", final, final, [], T);
  C(K, vllm("test_openai_tool_parser.py"), "final message only, stripped", final, "This is a test", [], T, {
    stripSpecialTokens: true,
  });
  const other = '<|channel|>commentary to=browser.search <|constrain|>json<|message|>{"query":"x"}<|call|>';
  C(K, "clawbridge", "builtin browser recipient is text", other, other, [], T);
  const notOffered = '<|channel|>commentary to=functions.rm <|constrain|>json<|message|>{"path":"/"}<|call|>';
  C(K, "clawbridge", "function not offered is text", notOffered, notOffered, [], T);
}

export const FAMILY_CASES: readonly CorpusCase[] = cases;
