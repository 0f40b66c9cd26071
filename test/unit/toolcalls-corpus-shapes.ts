/**
 * Corpus part 3: the five shapes issue 31 (item 5) found missed on whole answers, each a kind of its
 * own. Every case is in the every-split sample (streamed at every split point = whole = expected).
 * - a Hermes `<tool_call>` whose tool name is a prefix of another offered tool (or the reverse);
 * - a Mistral `[TOOL_CALLS]` array with junk before it (before the marker, or between the marker
 *   and the array: a repeated marker, a stray word);
 * - a pythonic list where one sibling call (of an offered tool) is malformed: the good one is kept;
 * - a bare JSON call object that follows an invalid one (on its line or the next);
 * - a JSON array of calls without `arguments` keys: `{}`.
 * Negatives next to each shape keep what must stay text.
 */
import type { CorpusCase, ExpectedCall } from "./toolcalls-corpus.js";

const TOOLS = ["read", "read_file", "get_weather", "get_time", "sessions_list", "exec"];
const call = (name: string, args: Record<string, unknown> = {}): ExpectedCall => ({ name, args });

export const SHAPE_CASES: CorpusCase[] = [];

const S = (
  kind: string,
  name: string,
  input: string,
  content: string,
  calls: ExpectedCall[],
  tools: readonly string[] = TOOLS,
): void => {
  SHAPE_CASES.push({ name: `${kind}/${name}`, input, content, calls, tools, kind, sample: true });
};

// ----- Hermes: a tool name that is a prefix of another offered one

const HP = "issue31-hermes-name-prefix";
S(HP, "the shorter name", '<tool_call>\n{"name": "read", "arguments": {"path": "/tmp/a.txt"}}\n</tool_call>', "", [
  call("read", { path: "/tmp/a.txt" }),
]);
S(HP, "the longer name", '<tool_call>\n{"name": "read_file", "arguments": {"path": "/tmp/a.txt"}}\n</tool_call>', "", [
  call("read_file", { path: "/tmp/a.txt" }),
]);
S(
  HP,
  "both, prose before, shorter offered last",
  'Let me look.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>\n<tool_call>\n{"name": "read", "arguments": {"path": "b"}}\n</tool_call>',
  "Let me look.",
  [call("read_file", { path: "a" }), call("read", { path: "b" })],
  ["read_file", "read"],
);
S(
  HP,
  "GLM item in a tool_call tag",
  "<tool_call>read\n<arg_key>path</arg_key>\n<arg_value>/tmp/a.txt</arg_value>\n</tool_call>",
  "",
  [call("read", { path: "/tmp/a.txt" })],
);
S(
  HP,
  "Qwen3-Coder function block in a tool_call tag",
  "<tool_call>\n<function=read>\n<parameter=path>\n/tmp/a.txt\n</parameter>\n</function>\n</tool_call>",
  "",
  [call("read", { path: "/tmp/a.txt" })],
);
S(
  HP,
  "a prefix of an offered name that is not offered itself stays text",
  '<tool_call>\n{"name": "rea", "arguments": {"path": "a"}}\n</tool_call>',
  '<tool_call>\n{"name": "rea", "arguments": {"path": "a"}}\n</tool_call>',
  [],
);
S(
  HP,
  "an offered name plus a suffix that is not offered stays text",
  '<tool_call>\n{"name": "read_files", "arguments": {"path": "a"}}\n</tool_call>',
  '<tool_call>\n{"name": "read_files", "arguments": {"path": "a"}}\n</tool_call>',
  [],
);

// ----- Mistral: junk before the [TOOL_CALLS] array

const MJ = "issue31-mistral-junk-before";
const M_ARRAY = '[{"name": "read", "arguments": {"path": "/tmp/a.txt"}}]';
const M_CALL = [call("read", { path: "/tmp/a.txt" })];
S(
  MJ,
  "prose on the line before the marker",
  `Sure, reading it now.[TOOL_CALLS]${M_ARRAY}`,
  "Sure, reading it now.",
  M_CALL,
);
S(MJ, "a leaked token before the marker", `</s>[TOOL_CALLS]${M_ARRAY}`, "</s>", M_CALL);
S(MJ, "a word glued to the marker", `ok[TOOL_CALLS] ${M_ARRAY}`, "ok", M_CALL);
S(MJ, "a repeated marker", `[TOOL_CALLS][TOOL_CALLS]${M_ARRAY}`, "", M_CALL);
S(MJ, "a stray word between the marker and the array", `[TOOL_CALLS] Sure ${M_ARRAY}`, "", M_CALL);
S(MJ, "a glued stray word", `[TOOL_CALLS]json${M_ARRAY}`, "", M_CALL);
S(MJ, "junk then two calls", `[TOOL_CALLS]: ${M_ARRAY.slice(0, -1)}, {"name": "sessions_list"}]`, "", [
  ...M_CALL,
  call("sessions_list"),
]);
S(
  MJ,
  "junk and a tool that is not offered stays text",
  '[TOOL_CALLS] Sure [{"name": "delete_all", "arguments": {}}]',
  '[TOOL_CALLS] Sure [{"name": "delete_all", "arguments": {}}]',
  [],
);
S(
  MJ,
  "a line break after the marker ends the junk",
  `[TOOL_CALLS]\nSure ${M_ARRAY}`,
  `[TOOL_CALLS]\nSure ${M_ARRAY}`,
  [],
);

// ----- Pythonic: one malformed sibling, the good one kept

const PS = "issue31-pythonic-malformed-sibling";
S(PS, "an empty value after the good call", '[get_weather(city="Paris"), get_time(tz=)]', "", [
  call("get_weather", { city: "Paris" }),
]);
S(PS, "a bare name as value before the good call", '[get_weather(city=Paris), get_time(tz="UTC")]', "", [
  call("get_time", { tz: "UTC" }),
]);
S(PS, "a positional argument", "[get_time(UTC), get_weather(city='Oslo', days=3)]", "", [
  call("get_weather", { city: "Oslo", days: 3 }),
]);
S(
  PS,
  "nested brackets and a string with a parenthesis in the malformed call",
  '[get_time(tz=f("a)b", [1, (2)])), get_weather(city="Paris")]',
  "",
  [call("get_weather", { city: "Paris" })],
);
S(
  PS,
  "three calls, the middle one malformed, after python_start",
  '<|python_start|>[get_weather(city="Paris"), get_time(tz=UTC+1), sessions_list()]<|python_end|>',
  "",
  [call("get_weather", { city: "Paris" }), call("sessions_list")],
);
S(PS, "prose around", 'Checking.\n[get_weather(city="Rome"), get_time(tz=None + 1)]\nDone.', "Checking.\nDone.", [
  call("get_weather", { city: "Rome" }),
]);
S(
  PS,
  "every call malformed stays text",
  "[get_weather(city=Paris), get_time(tz=)]",
  "[get_weather(city=Paris), get_time(tz=)]",
  [],
);
S(
  PS,
  "a sibling naming a tool not offered stays text",
  '[get_weather(city="Paris"), print(x)]',
  '[get_weather(city="Paris"), print(x)]',
  [],
);
S(
  PS,
  "a missing parenthesis stays text",
  '[get_weather(city="Paris", get_time(tz="UTC")]',
  '[get_weather(city="Paris", get_time(tz="UTC")]',
  [],
);

// ----- Bare JSON: a call object after an invalid one

const JI = "issue31-json-after-invalid";
const GOOD = '{"name": "read", "arguments": {"path": "/b"}}';
const GOOD_CALL = [call("read", { path: "/b" })];
S(
  JI,
  "broken JSON, a blank, then a call",
  `{"name": "read", "arguments": {"path": }} ${GOOD}`,
  '{"name": "read", "arguments": {"path": }}',
  GOOD_CALL,
);
S(
  JI,
  "missing comma, then a call after a semicolon",
  `{"name": "read" "arguments": {}}; ${GOOD}`,
  '{"name": "read" "arguments": {}};',
  GOOD_CALL,
);
S(
  JI,
  "a tool not offered, then a call",
  `{"name": "delete_all", "arguments": {}} ${GOOD}`,
  '{"name": "delete_all", "arguments": {}}',
  GOOD_CALL,
);
S(
  JI,
  "an unclosed string swallows the rest of the line: text",
  `Calling: {"name": "read", "arguments": {"path": "}} ${GOOD}`,
  `Calling: {"name": "read", "arguments": {"path": "}} ${GOOD}`,
  [],
);
S(
  JI,
  "after a sentence, broken then good",
  `Calling: {"name": "read", "arguments": {"path": 01}} ${GOOD}`,
  'Calling: {"name": "read", "arguments": {"path": 01}}',
  GOOD_CALL,
);
S(
  JI,
  "a broken call on the line before",
  `{"name": "read", "arguments": {"path": }}\n${GOOD}`,
  '{"name": "read", "arguments": {"path": }}',
  GOOD_CALL,
);
S(
  JI,
  "an unclosed call on the line before",
  `{"name": "read", "arguments": {"path": "/a"}\n\n${GOOD}`,
  '{"name": "read", "arguments": {"path": "/a"}',
  GOOD_CALL,
);
S(
  JI,
  "a trailing comma, then a call",
  `{"name": "read", "arguments": {"path": "/a"},} ${GOOD}`,
  '{"name": "read", "arguments": {"path": "/a"},}',
  GOOD_CALL,
);
S(JI, "glued to the invalid object stays text (as Ollama)", `{"name": "jeff"}${GOOD}`, `{"name": "jeff"}${GOOD}`, []);
S(
  JI,
  "a JSON object that is not call-like first: prose rules apply",
  `{"answer": 42} ${GOOD}`,
  `{"answer": 42} ${GOOD}`,
  [],
);

// ----- JSON array of calls without `arguments`

const NA = "issue31-array-without-arguments";
S(NA, "two calls", '[{"name": "sessions_list"}, {"name": "get_time"}]', "", [call("sessions_list"), call("get_time")]);
S(NA, "pretty, with prose before", 'Listing.\n[\n  {"name": "sessions_list"},\n  {"name": "get_time"}\n]', "Listing.", [
  call("sessions_list"),
  call("get_time"),
]);
S(
  NA,
  "mixed with a call that has arguments",
  '[{"name": "sessions_list"}, {"name": "read", "arguments": {"path": "a"}}]',
  "",
  [call("sessions_list"), call("read", { path: "a" })],
);
S(NA, "function wrapper without arguments", '[{"type": "function", "function": {"name": "sessions_list"}}]', "", [
  call("sessions_list"),
]);
S(NA, "after [TOOL_CALLS]", '[TOOL_CALLS][{"name": "sessions_list"}]', "", [call("sessions_list")]);
S(NA, "in a tool_call tag", '<tool_call>\n[{"name": "sessions_list"}, {"name": "get_time"}]\n</tool_call>', "", [
  call("sessions_list"),
  call("get_time"),
]);
S(NA, "in a json fence", '```json\n[{"name": "sessions_list"}, {"name": "get_time"}]\n```', "", [
  call("sessions_list"),
  call("get_time"),
]);
S(NA, "unclosed at the end of the reply", '[{"name": "sessions_list"}, {"name": "get_time"}', "", [
  call("sessions_list"),
  call("get_time"),
]);
S(
  NA,
  "a name that is not offered stays text",
  '[{"name": "sessions_list"}, {"name": "nope"}]',
  '[{"name": "sessions_list"}, {"name": "nope"}]',
  [],
);
