/**
 * Replies the `toolcalls` suite streams through the extractor: prose without a call (the fake
 * upstream's own answer, and a longer markdown answer), and one reply per model family, each with
 * a sentence of prose before the call. The tools offered are the OpenClaw-size request's 20 tools
 * (testkit/openclaw-request.ts), plus `python` where a sample needs it.
 */
import { openclawTools } from "../../../testkit/openclaw-request.js";
import { answerText } from "../../fake-upstream.js";

export const CHUNKS = 20;

export const OPENCLAW_TOOL_NAMES: readonly string[] = openclawTools(20).map((t) => t.function.name);

export interface Sample {
  id: string;
  label: string;
  /** The reply, cut into CHUNKS streamed pieces. */
  pieces: string[];
  /** Calls the extractor must find (checked before measuring). */
  calls: number;
  tools: readonly string[];
}

/** `text` cut into `n` pieces of (nearly) equal length. */
export function cut(text: string, n = CHUNKS): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++)
    out.push(text.slice(Math.floor((i * text.length) / n), Math.floor(((i + 1) * text.length) / n)));
  return out.filter((p) => p.length > 0);
}

/** The fake upstream's answer exactly as it streams it: one word per chunk. */
function fakeAnswerPieces(): string[] {
  const out: string[] = [];
  for (let i = 0; i < CHUNKS; i++) out.push(answerText(i + 1).slice(answerText(i).length));
  return out;
}

const LONG_PROSE = [
  "Here is what I found in the repository. The build uses `tsc` and the tests run with `node --test`; see [the README](https://example.com/readme) for details.",
  "",
  "1. The bridge reads its config from `~/.clawbridge/config.yaml` (the `server` and `backends` sections).",
  "2. Each backend has a type: `openai`, `claude-code`, `codex` or `gemini-cli`.",
  "3. Logs go to stderr at the level set by `logging.level` [default: info].",
  "",
  "```ts",
  'const config = { server: { port: 8787 }, backends: [{ type: "openai" }] };',
  "```",
  "",
  "In short, nothing needs to change for your setup: restart the service and it will pick up the new settings. If something goes wrong, run the doctor command first; it checks the config, the backends and the service in one go.",
].join("\n");

const DS = (n: string): string => `<｜${n}｜>`;
const args = JSON.stringify({ path: "/srv/app/config.yaml" });
const lead = "Let me check the config first.\n";

const FAMILY: { id: string; label: string; text: string; calls: number; python?: boolean }[] = [
  {
    id: "hermes",
    label: "Hermes / Qwen `<tool_call>` JSON (before issue 18)",
    text: `${lead}<tool_call>\n{"name": "read", "arguments": ${args}}\n</tool_call>`,
    calls: 1,
  },
  {
    id: "qwen3-coder",
    label: "Qwen3-Coder `<function=…>` parameters (before issue 18)",
    text: `${lead}<tool_call>\n<function=read>\n<parameter=path>\n/srv/app/config.yaml\n</parameter>\n</function>\n</tool_call>`,
    calls: 1,
  },
  {
    id: "pythonic",
    label: "pythonic list (Llama 3.2)",
    text: `${lead}[read(path='/srv/app/config.yaml'), exec(command='ls -la /srv/app')]`,
    calls: 2,
  },
  {
    id: "llama4",
    label: "Llama 4 `<|python_start|>`",
    text: `${lead}<|python_start|>[read(path='/srv/app/config.yaml')]<|python_end|>`,
    calls: 1,
  },
  {
    id: "deepseek-v3",
    label: "DeepSeek V3 / R1 tokens",
    text: `${lead}${DS("tool▁calls▁begin")}${DS("tool▁call▁begin")}function${DS("tool▁sep")}read\n\`\`\`json\n${args}\n\`\`\`${DS("tool▁call▁end")}${DS("tool▁calls▁end")}`,
    calls: 1,
  },
  {
    id: "deepseek-v31",
    label: "DeepSeek V3.1 tokens",
    text: `${lead}${DS("tool▁calls▁begin")}${DS("tool▁call▁begin")}read${DS("tool▁sep")}${args}${DS("tool▁call▁end")}${DS("tool▁calls▁end")}`,
    calls: 1,
  },
  {
    id: "llama3-prose",
    label: "Llama 3 JSON in a sentence",
    text: `Here is the call: {"name": "read", "parameters": ${args}} I will report back.`,
    calls: 1,
  },
  {
    id: "xlam",
    label: "xLAM JSON array after `<think>`",
    text: `<think>The user wants the config.</think>[{"name": "read", "arguments": ${args}}]`,
    calls: 1,
  },
  {
    id: "mistral",
    label: "Mistral `[TOOL_CALLS]`",
    text: `${lead}[TOOL_CALLS][{"name": "read", "arguments": ${args}}]`,
    calls: 1,
  },
  {
    id: "granite",
    label: "Granite `<|tool_call|>`",
    text: `${lead}<|tool_call|>[{"name": "read", "arguments": ${args}}]`,
    calls: 1,
  },
  {
    id: "phi4",
    label: "Phi-4-mini `functools[…]`",
    text: `${lead}functools[{"name": "read", "arguments": ${args}}]`,
    calls: 1,
  },
  {
    id: "internlm",
    label: "InternLM `<|action_start|><|plugin|>`",
    text: `${lead}<|action_start|><|plugin|>\n{"name": "read", "parameters": ${args}}<|action_end|>`,
    calls: 1,
  },
  {
    id: "kimi",
    label: "Kimi K2 tokens",
    text: `${lead}<|tool_calls_section_begin|><|tool_call_begin|>functions.read:0 <|tool_call_argument_begin|>${args}<|tool_call_end|><|tool_calls_section_end|>`,
    calls: 1,
  },
  {
    id: "glm",
    label: "GLM-4.5 `<arg_key>`",
    text: `${lead}<tool_call>read\n<arg_key>path</arg_key>\n<arg_value>/srv/app/config.yaml</arg_value>\n</tool_call>`,
    calls: 1,
  },
  {
    id: "minimax",
    label: "MiniMax M2 `<invoke>`",
    text: `${lead}<minimax:tool_call>\n<invoke name="read">\n<parameter name="path">/srv/app/config.yaml</parameter>\n</invoke>\n</minimax:tool_call>`,
    calls: 1,
  },
  {
    id: "seed",
    label: "Seed-OSS `<seed:tool_call>`",
    text: `${lead}<seed:tool_call>\n<function=read>\n<parameter=path>/srv/app/config.yaml</parameter>\n</function>\n</seed:tool_call>`,
    calls: 1,
  },
  {
    id: "harmony",
    label: "gpt-oss Harmony",
    text: `<|channel|>analysis<|message|>Need the config.<|end|><|start|>assistant<|channel|>commentary to=functions.read <|constrain|>json<|message|>${args}<|call|>`,
    calls: 1,
  },
  {
    id: "python-tag",
    label: "Llama 3.1 `<|python_tag|>` builtin",
    text: `${lead}<|python_tag|>python.call(code="print(open('/srv/app/config.yaml').read())")<|eom_id|>`,
    calls: 1,
    python: true,
  },
];

export function samples(): Sample[] {
  const tools = OPENCLAW_TOOL_NAMES;
  return [
    {
      id: "prose",
      label: "prose, no call (the fake upstream's 20-chunk answer)",
      pieces: fakeAnswerPieces(),
      calls: 0,
      tools,
    },
    {
      id: "prose-long",
      label: `prose, no call (${(LONG_PROSE.length / 1024).toFixed(1)} KB markdown: list, links, inline code, a fence)`,
      pieces: cut(LONG_PROSE),
      calls: 0,
      tools,
    },
    ...FAMILY.map((f) => ({
      id: f.id,
      label: f.label,
      pieces: cut(f.text),
      calls: f.calls,
      tools: f.python ? [...tools, "python"] : tools,
    })),
  ];
}
