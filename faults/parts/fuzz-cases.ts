/**
 * The fuzz part's cases: each is built from a seeded PRNG and its index, so a run is repeatable
 * (`--seed`). Three kinds:
 * - `json`: a body (random JSON, mutated requests, textual damage, invalid UTF-8, deep nesting,
 *   huge strings) with ordinary headers, sent on a keep-alive connection;
 * - `raw`: HTTP-level abuse on a connection of its own (bad headers, bad chunking, TE+CL, an
 *   HTTP/2 preface, unknown methods, bad request lines, header overflow, Expect, oversized bodies);
 * - `pipeline`: several requests in one write, answered in order.
 */
import { requestBytes } from "../lib/http.js";
import type { Rng } from "../lib/util.js";

export const UP_MODEL = "faults/up";
export const CLI_MODEL = "faults/cli";
export const CHAT = "/v1/chat/completions";
/** server.bodyLimitBytes of the fuzz bridge (small, so that 413 cases are cheap). */
export const BODY_LIMIT = 1024 * 1024;

export interface JsonCase {
  kind: "json";
  family: string;
  what: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export interface RawCase {
  kind: "raw";
  family: string;
  what: string;
  /** Written one after another (a `number` is a pause in ms, e.g. to wait for `100 Continue`). */
  writes: Array<Buffer | number>;
  methods: string[];
  /** Answers due (1 for a single request). */
  expect: number;
  /** Keep writing this many filler bytes after `writes` while reading (oversized bodies). */
  flood?: number;
}

export interface PipelineCase {
  kind: "pipeline";
  family: string;
  what: string;
  bytes: Buffer;
  methods: string[];
  /** Status expected for each request, in order. */
  statuses: number[];
}

export type FuzzCase = JsonCase | RawCase | PipelineCase;

const DEEP = "__FAULTS_DEEP__";

/** `depth` levels of nesting as JSON text, built without recursion. */
export function deepJson(depth: number, style: "array" | "object" | "mixed" | "parts"): string {
  switch (style) {
    case "array":
      return "[".repeat(depth) + "1" + "]".repeat(depth);
    case "object":
      return '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
    case "parts":
      return '[{"type":"text","text":"x","parts":'.repeat(depth) + "[]" + "}]".repeat(depth);
    default: {
      const open: string[] = [];
      const close: string[] = [];
      for (let i = 0; i < depth; i++) {
        if (i % 2) {
          open.push('{"k":');
          close.push("}");
        } else {
          open.push("[");
          close.push("]");
        }
      }
      return open.join("") + "null" + close.reverse().join("");
    }
  }
}

function userText(key: string, extra = ""): string {
  return `FAULTKEY-${key} FAULTMODE-stream FAULTN-2 hello ${extra}`;
}

/** A rich valid request: every field a mutation may hit exists. */
function richRequest(rng: Rng, key: string): Record<string, any> {
  const model = rng.chance(0.7) ? UP_MODEL : CLI_MODEL;
  return {
    model,
    stream: rng.chance(0.3),
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: [{ type: "text", text: userText(key) }] },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } }],
      },
      { role: "tool", tool_call_id: "call_1", content: "result" },
      { role: "user", content: userText(key, "again") },
    ],
    tools: [
      {
        type: "function",
        function: {
          name: "lookup",
          description: "look up",
          parameters: { type: "object", properties: { q: { type: "string" } } },
        },
      },
    ],
    tool_choice: "auto",
    max_tokens: 64,
    temperature: 0.5,
    top_p: 1,
    user: `u-${key}`,
    stream_options: { include_usage: true },
  };
}

const NUMBERS = ["1e400", "-1e400", "123456789012345678901234567890", "-0", "0.0000000000000000000001", "1E+2"];

/** A value of a (probably) wrong type; `__NUM_x__` strings become bare JSON numbers in the text. */
function oddValue(rng: Rng, depth = 0): unknown {
  const k = rng.int(0, depth > 2 ? 12 : 16);
  switch (k) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick([0, -1, 1.5, 2, 3, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2]);
    case 3:
      return `__NUM_${rng.pick(NUMBERS)}__`;
    case 4:
      return "";
    case 5:
      return rng.pick([
        "x",
        " ",
        "\u0000",
        "\ud800",
        "\udfff\ud800",
        "🙂".repeat(10),
        "\u202e\u200b",
        "null",
        "true",
        "{}",
        "[object Object]",
        "__proto__",
      ]);
    case 6:
      return "x".repeat(rng.int(1000, 20000));
    case 7:
      return [];
    case 8:
      return {};
    case 9:
      return JSON.parse('{"__proto__":{"polluted":true},"model":"x"}'); // an own "__proto__" key
    case 10:
      return { constructor: { prototype: { polluted: true } } };
    case 11:
      return rng.pick(["system", "user", "assistant", "tool", "developer", "function", "robot", "USER"]);
    case 12:
      return rng.pick(["auto", "none", "required", "text", "image_url", "json_object"]);
    case 13:
      return Array.from({ length: rng.int(1, 4) }, () => oddValue(rng, depth + 1));
    case 14: {
      const o: Record<string, unknown> = {};
      for (let i = rng.int(1, 4); i > 0; i--)
        o[rng.pick(["type", "text", "name", "function", "role", "content", "x", "__proto__", "0"])] = oddValue(
          rng,
          depth + 1,
        );
      return o;
    }
    case 15:
      return [
        { type: rng.pick(["text", "image_url", "input_audio", "file", "", "TEXT"]), text: oddValue(rng, depth + 1) },
      ];
    default:
      return { type: "function", function: { name: oddValue(rng, depth + 1), arguments: oddValue(rng, depth + 1) } };
  }
}

/** Random JSON text (any value, any shape): mostly not a request at all. */
function randomJson(rng: Rng): string {
  const v = oddValue(rng);
  if (rng.chance(0.5)) {
    const o: Record<string, unknown> = {};
    for (let i = rng.int(0, 6); i > 0; i--)
      o[rng.pick(["model", "messages", "stream", "tools", "x", "__proto__", "constructor", "", "💥"])] = oddValue(rng);
    return fixNumbers(JSON.stringify(o));
  }
  return fixNumbers(JSON.stringify(v) ?? "null");
}

function fixNumbers(text: string): string {
  return text.replace(/"__NUM_([^"]+)__"/g, "$1");
}

const PATHS: Array<Array<string | number>> = [
  ["model"],
  ["messages"],
  ["stream"],
  ["stream_options"],
  ["stream_options", "include_usage"],
  ["tools"],
  ["tools", 0],
  ["tools", 0, "function"],
  ["tools", 0, "function", "name"],
  ["tools", 0, "function", "parameters"],
  ["tools", 0, "type"],
  ["tool_choice"],
  ["max_tokens"],
  ["max_completion_tokens"],
  ["temperature"],
  ["top_p"],
  ["user"],
  ["n"],
  ["messages", 0],
  ["messages", 1, "role"],
  ["messages", 1, "content"],
  ["messages", 1, "content", 0],
  ["messages", 1, "content", 0, "type"],
  ["messages", 1, "content", 0, "text"],
  ["messages", 2, "tool_calls"],
  ["messages", 2, "tool_calls", 0, "function", "arguments"],
  ["messages", 2, "tool_calls", 0, "function", "name"],
  ["messages", 3, "tool_call_id"],
  ["messages", 4, "content"],
  ["messages", 4, "name"],
  ["response_format"],
  ["stop"],
  ["seed"],
  ["logit_bias"],
  ["metadata"],
  ["reasoning_effort"],
  ["parallel_tool_calls"],
  ["functions"],
  ["function_call"],
  ["x_unknown"],
];

function setPath(obj: any, path: Array<string | number>, value: unknown, del: boolean): void {
  let cur = obj;
  for (let i = 0; i < path.length - 1; i++) {
    const k = path[i]!;
    if (cur[k] === null || typeof cur[k] !== "object") cur[k] = typeof path[i + 1] === "number" ? [] : {};
    cur = cur[k];
  }
  const last = path[path.length - 1]!;
  if (del) delete cur[last];
  else cur[last] = value;
}

/** A valid request with 1-3 fields replaced, deleted or wrapped. */
function mutated(rng: Rng, key: string): { text: string; what: string } {
  const req = richRequest(rng, key);
  const done: string[] = [];
  for (let i = rng.int(1, 3); i > 0; i--) {
    const p = rng.pick(PATHS);
    const op = rng.weighted({ set: 6, delete: 2, wrap: 1, empty: 1 });
    const name = p.join(".");
    if (op === "delete") setPath(req, p, undefined, true);
    else if (op === "wrap") {
      let cur: any = req;
      for (const k of p) cur = cur?.[k];
      setPath(req, p, [cur], false);
    } else if (op === "empty") setPath(req, p, rng.pick([[], {}, ""]), false);
    else setPath(req, p, oddValue(rng), false);
    done.push(`${op} ${name}`);
  }
  if (rng.chance(0.1)) {
    req.messages = Array.from({ length: rng.int(1000, 5000) }, (_, i) => ({
      role: i % 2 ? "assistant" : "user",
      content: `m${i}`,
    }));
    req.messages.push({ role: "user", content: userText(key) });
    done.push("thousands of messages");
  }
  if (rng.chance(0.05)) {
    req.tools = Array.from({ length: rng.int(500, 2000) }, (_, i) => ({
      type: "function",
      function: { name: `t${i}`, parameters: { type: "object" } },
    }));
    done.push("thousands of tools");
  }
  let text = fixNumbers(JSON.stringify(req));
  if (rng.chance(0.1)) {
    text = text.replace('"model":', '"model":"ignored","model":');
    done.push("duplicate key");
  }
  if (rng.chance(0.05)) {
    text = text.replace("{", '{"__proto__":{"model":1,"messages":2},');
    done.push("__proto__ key");
  }
  return { text, what: done.join(", ") };
}

const BAD_UTF8 = [
  [0xff],
  [0xfe, 0xff],
  [0xc3, 0x28],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xc0, 0xaf],
  [0xe2, 0x82],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0x80],
  [0xef, 0xbb, 0xbf],
];

/** Textual damage to a valid request: truncation, flipped / inserted / deleted bytes, invalid UTF-8, BOM, garbage after. */
function damaged(rng: Rng, key: string): { body: Buffer; what: string } {
  const base = Buffer.from(
    JSON.stringify({
      model: rng.chance(0.7) ? UP_MODEL : CLI_MODEL,
      messages: [{ role: "user", content: userText(key, "ünïcödé ✓") }],
      stream: rng.chance(0.3),
    }),
  );
  const at = rng.int(0, base.length - 1);
  const op = rng.weighted({
    truncate: 3,
    flip: 3,
    insert: 2,
    remove: 2,
    badUtf8InString: 4,
    badUtf8Anywhere: 2,
    bom: 1,
    trailing: 2,
    nul: 1,
  });
  switch (op) {
    case "truncate":
      return { body: base.subarray(0, at), what: `truncated at ${at}` };
    case "flip": {
      const b = Buffer.from(base);
      b[at] = b[at]! ^ (1 << rng.int(0, 7));
      return { body: b, what: `bit flipped at ${at}` };
    }
    case "insert":
      return {
        body: Buffer.concat([base.subarray(0, at), Buffer.from([rng.int(0, 255)]), base.subarray(at)]),
        what: `byte inserted at ${at}`,
      };
    case "remove":
      return { body: Buffer.concat([base.subarray(0, at), base.subarray(at + 1)]), what: `byte removed at ${at}` };
    case "badUtf8InString": {
      const i = base.indexOf("hello");
      return {
        body: Buffer.concat([base.subarray(0, i), Buffer.from(rng.pick(BAD_UTF8)), base.subarray(i)]),
        what: "invalid UTF-8 inside the message",
      };
    }
    case "badUtf8Anywhere":
      return {
        body: Buffer.concat([base.subarray(0, at), Buffer.from(rng.pick(BAD_UTF8)), base.subarray(at)]),
        what: `invalid UTF-8 at ${at}`,
      };
    case "bom":
      return { body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), base]), what: "UTF-8 BOM first" };
    case "trailing":
      return {
        body: Buffer.concat([
          base,
          Buffer.from(rng.pick(["}", "]", " garbage", "\u0000", "{}", ",", '\n\n{"model":1}'])),
        ]),
        what: "garbage after the JSON",
      };
    default:
      return { body: Buffer.concat([base.subarray(0, at), Buffer.from([0]), base.subarray(at)]), what: `NUL at ${at}` };
  }
}

const DEEP_FIELDS: Array<{ name: string; place(req: Record<string, any>): void }> = [
  { name: "tool_choice", place: (r) => (r.tool_choice = DEEP) },
  { name: "response_format", place: (r) => (r.response_format = DEEP) },
  { name: "messages[0].content", place: (r) => (r.messages[0].content = DEEP) },
  {
    name: "messages[0].content[0] unknown field",
    place: (r) => (r.messages[0].content = [{ type: "text", text: "x", extra: DEEP }]),
  },
  {
    name: "messages[0].content[0] image_url",
    place: (r) => (r.messages[0].content = [{ type: "image_url", image_url: DEEP }]),
  },
  { name: "unknown top-level field", place: (r) => (r.x_extension = DEEP) },
  {
    name: "tools[0].function.parameters",
    place: (r) => (r.tools = [{ type: "function", function: { name: "f", parameters: DEEP } }]),
  },
  { name: "messages[0] unknown field", place: (r) => (r.messages[0].metadata = DEEP) },
  { name: "stream_options unknown field", place: (r) => (r.stream_options = { include_usage: true, x: DEEP }) },
  { name: "metadata", place: (r) => (r.metadata = DEEP) },
  { name: "stop", place: (r) => (r.stop = DEEP) },
  { name: "logit_bias", place: (r) => (r.logit_bias = DEEP) },
];

function deep(rng: Rng, key: string): { body: Buffer; what: string } {
  const req: Record<string, any> = {
    model: rng.chance(0.75) ? UP_MODEL : CLI_MODEL,
    messages: [{ role: "user", content: userText(key) }],
    stream: rng.chance(0.3),
  };
  const field = rng.pick(DEEP_FIELDS);
  field.place(req);
  // Mostly far past any sane limit (10,000 levels, as in the issue); some around where a limit may sit.
  const depth = rng.chance(0.25)
    ? rng.pick([30, 60, 63, 64, 65, 100, 200])
    : rng.pick([1000, 5000, 10_000, 10_000, 10_000, 20_000]);
  const style =
    field.name === "messages[0].content"
      ? rng.pick(["array", "parts"] as const)
      : rng.pick(["array", "object", "mixed"] as const);
  const text = JSON.stringify(req).replace(JSON.stringify(DEEP), deepJson(depth, style));
  return { body: Buffer.from(text), what: `${field.name} nested ${depth} deep (${style})` };
}

function huge(rng: Rng, key: string, small: boolean): { body: Buffer; headers: Record<string, string>; what: string } {
  const size = rng.int(100_000, small ? 300_000 : BODY_LIMIT - 10_000);
  const where = rng.pick(["content", "model", "user", "tool name", "unknown field", "header"] as const);
  const req: Record<string, any> = { model: UP_MODEL, messages: [{ role: "user", content: userText(key) }] };
  const filler = "y".repeat(size - 2000);
  const headers: Record<string, string> = {};
  if (where === "content") req.messages[0].content = userText(key) + filler;
  else if (where === "model") req.model = filler;
  else if (where === "user") req.user = filler;
  else if (where === "tool name") req.tools = [{ type: "function", function: { name: filler } }];
  else if (where === "unknown field") req.x_blob = filler;
  else headers["x-session-id"] = "s".repeat(rng.int(4000, 12_000));
  return {
    body: Buffer.from(JSON.stringify(req)),
    headers,
    what: `huge ${where} (${where === "header" ? headers["x-session-id"]!.length : filler.length} chars)`,
  };
}

function validBody(
  rng: Rng,
  key: string,
  model = rng.chance(0.7) ? UP_MODEL : CLI_MODEL,
  stream = rng.chance(0.3),
): Buffer {
  return Buffer.from(JSON.stringify({ model, stream, messages: [{ role: "user", content: userText(key) }] }));
}

function jsonCase(rng: Rng, i: number, small: boolean): JsonCase {
  const key = `fz${i}`;
  const headers: Record<string, string> = { "content-type": "application/json", "x-session-id": key };
  const family = rng.weighted({
    mutated: 38,
    damaged: 16,
    random: 7,
    deep: 20,
    huge: small ? 1 : 2,
    headers: 6,
    routes: 4,
    valid: 5,
  });
  switch (family) {
    case "mutated": {
      const m = mutated(rng, key);
      return {
        kind: "json",
        family: "json: mutated request",
        what: m.what,
        method: "POST",
        path: CHAT,
        headers,
        body: Buffer.from(m.text),
      };
    }
    case "damaged": {
      const d = damaged(rng, key);
      return {
        kind: "json",
        family: "json: damaged text / invalid UTF-8",
        what: d.what,
        method: "POST",
        path: CHAT,
        headers,
        body: d.body,
      };
    }
    case "random":
      return {
        kind: "json",
        family: "json: random JSON",
        what: "random value",
        method: "POST",
        path: CHAT,
        headers,
        body: Buffer.from(randomJson(rng)),
      };
    case "deep": {
      const d = deep(rng, key);
      return {
        kind: "json",
        family: "json: deep nesting",
        what: d.what,
        method: "POST",
        path: CHAT,
        headers,
        body: d.body,
      };
    }
    case "huge": {
      const h = huge(rng, key, small);
      return {
        kind: "json",
        family: "json: huge strings",
        what: h.what,
        method: "POST",
        path: CHAT,
        headers: { ...headers, ...h.headers },
        body: h.body,
      };
    }
    case "headers": {
      const h = { ...headers };
      const what: string[] = [];
      const ct = rng.pick([
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=latin1",
        "",
        "*/*",
        "application/json, application/json",
      ]);
      if (ct) h["content-type"] = ct;
      else delete h["content-type"];
      what.push(`content-type ${JSON.stringify(ct)}`);
      if (rng.chance(0.4)) {
        h["content-encoding"] = rng.pick(["gzip", "br", "deflate", "identity", "x-unknown"]);
        what.push(`content-encoding ${h["content-encoding"]} (not encoded)`);
      }
      if (rng.chance(0.3)) {
        h.authorization = rng.pick([
          "Bearer",
          "Bearer ",
          "Basic Zm9vOmJhcg==",
          "Bearer " + "k".repeat(3000),
          "garbage",
        ]);
        what.push("odd authorization");
      }
      if (rng.chance(0.3)) {
        h["x-session-id"] = rng.pick([" ", "\t", "a".repeat(300), "../../etc/passwd", "ä", "%00"]);
        what.push("odd x-session-id");
      }
      if (rng.chance(0.2)) {
        h["x-openclaw-session-key"] = "k".repeat(rng.int(1, 500));
        what.push("x-openclaw-session-key");
      }
      return {
        kind: "json",
        family: "json: odd headers",
        what: what.join(", "),
        method: "POST",
        path: CHAT,
        headers: h,
        body: validBody(rng, key),
      };
    }
    case "routes": {
      const r = rng.pick([
        { method: "POST", path: `${CHAT}?stream=true&x=%ff`, body: true },
        { method: "POST", path: `${CHAT}/`, body: true },
        { method: "POST", path: "/v1//chat/completions", body: true },
        { method: "POST", path: "/V1/CHAT/COMPLETIONS", body: true },
        { method: "PUT", path: CHAT, body: true },
        { method: "DELETE", path: CHAT, body: false },
        { method: "PATCH", path: CHAT, body: true },
        { method: "GET", path: CHAT, body: false },
        { method: "OPTIONS", path: CHAT, body: false },
        { method: "HEAD", path: "/health", body: false },
        { method: "GET", path: "/v1/models/%ff%fe", body: false },
        { method: "GET", path: "/v1/models/..%2f..%2fetc%2fpasswd", body: false },
        { method: "GET", path: `/v1/models/${"m".repeat(5000)}`, body: false },
        { method: "GET", path: "/v1/models?x=" + "%".repeat(50), body: false },
        { method: "GET", path: "/%", body: false },
        { method: "POST", path: "/v1/completions", body: true },
        { method: "POST", path: "/v1/embeddings", body: true },
        { method: "GET", path: "/v1/models", body: false },
      ]);
      return {
        kind: "json",
        family: "json: other routes and methods",
        what: `${r.method} ${r.path.slice(0, 60)}`,
        method: r.method,
        path: r.path,
        headers,
        ...(r.body ? { body: validBody(rng, key) } : {}),
      };
    }
    default:
      return {
        kind: "json",
        family: "json: valid requests",
        what: "valid",
        method: "POST",
        path: CHAT,
        headers,
        body: validBody(rng, key),
      };
  }
}

const H = (pairs: Array<[string, string]>) => pairs;

function rawCase(rng: Rng, i: number): RawCase {
  const key = `fzr${i}`;
  const body = validBody(rng, key, UP_MODEL, false);
  const req = (head: string, rest: Buffer | string = ""): Buffer =>
    Buffer.concat([Buffer.from(head, "latin1"), typeof rest === "string" ? Buffer.from(rest, "latin1") : rest]);
  const std = `Host: 127.0.0.1\r\nContent-Type: application/json\r\nX-Session-Id: ${key}\r\n`;
  const one = (family: string, what: string, bytes: Buffer, method = "POST"): RawCase => ({
    kind: "raw",
    family,
    what,
    writes: [bytes],
    methods: [method],
    expect: 1,
  });
  const family = rng.weighted({
    header: 14,
    chunking: 12,
    tecl: 12,
    h2: 4,
    method: 10,
    line: 12,
    host: 3,
    expect: 8,
    overflow: 6,
    oversize: 5,
    upgrade: 3,
    misc: 6,
  });
  switch (family) {
    case "header": {
      const bad = rng.pick([
        "Bad Header: x",
        ": novalue",
        "X-Null: a\x00b",
        "X-Ctl\x01: 1",
        "NoColonHere",
        "X-Folded: a\r\n folded",
        "X-CR: a\rb",
        "X-\xff: 1",
        "Content-Type : application/json",
        "X Session: 1",
        "X-Tab\t: 1",
        "\tX-Lead: 1",
        "X-DEL: a\x7fb",
        "(): 1",
        "X-Very" + "-long".repeat(10) + ": " + "\xff".repeat(100),
      ]);
      return one(
        "http: bad header",
        JSON.stringify(bad.slice(0, 40)),
        req(`POST ${CHAT} HTTP/1.1\r\n${std}${bad}\r\nContent-Length: ${body.length}\r\n\r\n`, body),
      );
    }
    case "chunking": {
      const bad = rng.pick([
        "zz\r\nabc\r\n0\r\n\r\n",
        "5\r\nab\r\n0\r\n\r\n",
        "-1\r\nx\r\n0\r\n\r\n",
        "ffffffffffffffffffff\r\nx\r\n0\r\n\r\n",
        "5;ext=\x00\r\nhello\r\n0\r\n\r\n",
        "5\r\nhelloXX0\r\n\r\n",
        "0\r\nBad Trailer\r\n\r\n",
        "5\nhello\n0\n\n",
        "0x5\r\nhello\r\n0\r\n\r\n",
        "5\r\nhello\r\n0\r\n" + "x".repeat(20) + "\r\n\r\n",
        " 5\r\nhello\r\n0\r\n\r\n",
      ]);
      return one(
        "http: bad chunking",
        JSON.stringify(bad.slice(0, 40)),
        req(`POST ${CHAT} HTTP/1.1\r\n${std}Transfer-Encoding: chunked\r\n\r\n`, bad),
      );
    }
    case "tecl": {
      const chunked = `${body.length.toString(16)}\r\n${body.toString("latin1")}\r\n0\r\n\r\n`;
      const v = rng.pick([
        { h: `Transfer-Encoding: chunked\r\nContent-Length: ${body.length}`, b: chunked },
        { h: `Content-Length: ${body.length}\r\nTransfer-Encoding: chunked`, b: chunked },
        { h: "Transfer-Encoding: chunked, identity", b: chunked },
        { h: `Transfer-Encoding: identity\r\nContent-Length: ${body.length}`, b: body.toString("latin1") },
        { h: "Transfer-Encoding: gzip", b: chunked },
        { h: "Transfer-Encoding: xchunked", b: chunked },
        { h: "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", b: chunked },
        { h: `Content-Length: ${body.length}, ${body.length}`, b: body.toString("latin1") },
        { h: `Content-Length: ${body.length}\r\nContent-Length: ${body.length + 1}`, b: body.toString("latin1") + "x" },
        { h: "Content-Length: abc", b: body.toString("latin1") },
        { h: "Content-Length: -1", b: body.toString("latin1") },
        { h: `Content-Length: +${body.length}`, b: body.toString("latin1") },
        { h: "Content-Length: 1e3", b: body.toString("latin1") },
        { h: "Content-Length: 99999999999999999999999", b: body.toString("latin1") },
        { h: `Content-Length: ${body.length}\r\nTransfer-Encoding: gzip, chunked`, b: chunked },
      ]);
      return one(
        "http: TE + CL / bad framing",
        JSON.stringify(v.h.slice(0, 50)),
        req(`POST ${CHAT} HTTP/1.1\r\n${std}${v.h}\r\n\r\n`, v.b),
      );
    }
    case "h2": {
      const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
      return one(
        "http: HTTP/2 preface",
        "PRI * HTTP/2.0 + SETTINGS",
        Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), settings]),
        "PRI",
      );
    }
    case "method": {
      const m = rng.pick([
        "FOO",
        "BREW",
        "post",
        "P0ST",
        "GETT",
        "M-SEARCH",
        "PROPFIND",
        "X".repeat(100),
        "G\x00ET",
        "CONNECT",
        "TRACE",
        "SEARCH",
        "QUERY",
      ]);
      const target = m === "CONNECT" ? "127.0.0.1:443" : CHAT;
      return one(
        "http: unknown / odd methods",
        JSON.stringify(m.slice(0, 20)),
        req(`${m} ${target} HTTP/1.1\r\n${std}Content-Length: ${body.length}\r\n\r\n`, body),
        m === "TRACE" ? "TRACE" : m,
      );
    }
    case "line": {
      const l = rng.pick([
        "GET /\r\n\r\n",
        "GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n",
        "GET / HTTP/2.0\r\nHost: x\r\n\r\n",
        "GET / HTTP/1.2\r\nHost: x\r\n\r\n",
        "GET / HTTP/9.9\r\nHost: x\r\n\r\n",
        "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET  /health HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET http://example.com/health HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET * HTTP/1.1\r\nHost: x\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        "GET /\x7f HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /v1/models/%ff HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /health HTTP/1.1\nHost: x\n\n",
        "\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /health HTTP/1.1\r\nHost: x\r\n\r\r\n",
        "get /health HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /health?\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /health HTTP/1.1\r\nHost: x\r\n\r\n\r\n",
      ]);
      return one("http: bad request line", JSON.stringify(l.slice(0, 40)), Buffer.from(l, "latin1"), "GET");
    }
    case "host":
      return one(
        "http: no Host",
        "HTTP/1.1 without Host",
        req(`POST ${CHAT} HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, body),
      );
    case "expect": {
      const e = rng.pick(["100-continue", "200-ok", "foo", "100-continue, foo", ""]);
      const head = req(`POST ${CHAT} HTTP/1.1\r\n${std}Expect: ${e}\r\nContent-Length: ${body.length}\r\n\r\n`);
      return {
        kind: "raw",
        family: "http: Expect",
        what: `Expect: ${JSON.stringify(e)}`,
        writes: e === "100-continue" ? [head, 200, body] : [head, body],
        methods: ["POST"],
        expect: 1,
      };
    }
    case "overflow": {
      const v = rng.pick(["one", "many", "url"] as const);
      if (v === "one")
        return one(
          "http: header overflow",
          "one 20 KB header",
          req(
            `POST ${CHAT} HTTP/1.1\r\n${std}X-Big: ${"b".repeat(20_000)}\r\nContent-Length: ${body.length}\r\n\r\n`,
            body,
          ),
        );
      if (v === "many")
        return one(
          "http: header overflow",
          "600 headers",
          req(
            `POST ${CHAT} HTTP/1.1\r\n${std}${Array.from({ length: 600 }, (_, j) => `X-H${j}: ${"v".repeat(30)}\r\n`).join("")}Content-Length: ${body.length}\r\n\r\n`,
            body,
          ),
        );
      return one(
        "http: header overflow",
        "20 KB URL",
        req(`GET /v1/models/${"u".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`),
        "GET",
      );
    }
    case "oversize": {
      const chunked = rng.chance(0.5);
      const total = BODY_LIMIT + rng.int(1, 512 * 1024);
      const head = chunked
        ? req(`POST ${CHAT} HTTP/1.1\r\n${std}Transfer-Encoding: chunked\r\n\r\n`)
        : req(`POST ${CHAT} HTTP/1.1\r\n${std}Content-Length: ${total}\r\n\r\n`);
      // A chunked flood is one endless chunk (size far beyond the limit).
      const first = chunked ? Buffer.from(`${(total * 4).toString(16)}\r\n`) : Buffer.alloc(0);
      return {
        kind: "raw",
        family: "http: oversized body",
        what: `${chunked ? "chunked" : "Content-Length"} body of ${total} bytes (limit ${BODY_LIMIT})`,
        writes: [head, first],
        methods: ["POST"],
        expect: 1,
        flood: total,
      };
    }
    case "upgrade": {
      const u = rng.pick([
        "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA",
        "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Connection: Upgrade\r\nUpgrade: foo/1",
      ]);
      return one(
        "http: Upgrade",
        u.split("\r\n")[1]!,
        req(`POST ${CHAT} HTTP/1.1\r\n${std}${u}\r\nContent-Length: ${body.length}\r\n\r\n`, body),
      );
    }
    default: {
      const v = rng.pick([
        "http10",
        "latin1-header",
        "nul-url",
        "absolute",
        "hugeline",
        "conn-close-pipelined",
      ] as const);
      if (v === "http10")
        return one(
          "http: misc",
          "HTTP/1.0 POST",
          req(`POST ${CHAT} HTTP/1.0\r\n${std}Content-Length: ${body.length}\r\n\r\n`, body),
        );
      if (v === "latin1-header")
        return one(
          "http: misc",
          "invalid UTF-8 in header values",
          req(
            `POST ${CHAT} HTTP/1.1\r\n${std.replace(key, key + "\xff\xfe")}X-Name: \xc3\x28\r\nContent-Length: ${body.length}\r\n\r\n`,
            body,
          ),
        );
      if (v === "nul-url")
        return one(
          "http: misc",
          "NUL in URL",
          req(`POST ${CHAT}\x00x HTTP/1.1\r\n${std}Content-Length: ${body.length}\r\n\r\n`, body),
        );
      if (v === "absolute")
        return one(
          "http: misc",
          "absolute-form target",
          req(`POST http://127.0.0.1${CHAT} HTTP/1.1\r\n${std}Content-Length: ${body.length}\r\n\r\n`, body),
        );
      if (v === "hugeline")
        return one(
          "http: misc",
          "10 KB method token",
          req(`${"A".repeat(10_000)} / HTTP/1.1\r\nHost: x\r\n\r\n`),
          "GET",
        );
      return one(
        "http: misc",
        "Connection: close",
        req(`POST ${CHAT} HTTP/1.1\r\n${std}Connection: close\r\nContent-Length: ${body.length}\r\n\r\n`, body),
      );
    }
  }
}

function pipelineCase(rng: Rng, i: number): PipelineCase {
  const n = rng.int(2, 6);
  const parts: Buffer[] = [];
  const methods: string[] = [];
  const statuses: number[] = [];
  const what: string[] = [];
  for (let j = 0; j < n; j++) {
    const key = `fzp${i}-${j}`;
    const kind = rng.weighted({
      up: 3,
      upStream: 2,
      cli: 1,
      models: 1,
      health: 1,
      badJson: 2,
      badSchema: 2,
      notFound: 1,
    });
    const hs: Array<[string, string]> = H([
      ["Content-Type", "application/json"],
      ["X-Session-Id", key],
    ]);
    switch (kind) {
      case "up":
      case "upStream":
      case "cli":
        parts.push(
          requestBytes(
            "POST",
            CHAT,
            hs,
            validBody(rng, key, kind === "cli" ? CLI_MODEL : UP_MODEL, kind === "upStream"),
          ),
        );
        methods.push("POST");
        statuses.push(200);
        break;
      case "models":
        parts.push(requestBytes("GET", "/v1/models", []));
        methods.push("GET");
        statuses.push(200);
        break;
      case "health":
        parts.push(requestBytes("GET", "/health", []));
        methods.push("GET");
        statuses.push(200);
        break;
      case "badJson":
        parts.push(requestBytes("POST", CHAT, hs, '{"model":'));
        methods.push("POST");
        statuses.push(400);
        break;
      case "badSchema":
        parts.push(requestBytes("POST", CHAT, hs, JSON.stringify({ model: UP_MODEL, messages: "nope" })));
        methods.push("POST");
        statuses.push(400);
        break;
      default:
        parts.push(requestBytes("GET", "/no/such/route", []));
        methods.push("GET");
        statuses.push(404);
    }
    what.push(kind);
  }
  return {
    kind: "pipeline",
    family: "pipelining",
    what: what.join(" → "),
    bytes: Buffer.concat(parts),
    methods,
    statuses,
  };
}

/** Case `i` of a run with this seed. */
export function makeCase(rng: Rng, i: number, small: boolean): FuzzCase {
  const k = rng.weighted({ json: 70, raw: 24, pipeline: 6 });
  if (k === "json") return jsonCase(rng, i, small);
  if (k === "raw") return rawCase(rng, i);
  return pipelineCase(rng, i);
}

/** Requests in a case (a pipelined case holds several). */
export const requestsIn = (c: FuzzCase) => (c.kind === "pipeline" ? c.statuses.length : 1);
