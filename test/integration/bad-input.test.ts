/**
 * Bad input through a running bridge (real server, real OpenCode backend configured against a fake
 * model API). Bad input never reaches the backend or the model: every answer is a 4xx with an
 * OpenAI-shaped `{"error":{"message","type","code"}}` body — never a 500.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startFakeOpenAI, type FakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { VERSION } from "../../src/core/version.js";
import { cleanup, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const MODEL = "fake/m1";
const BODY_LIMIT = 50_000;
const KEY = "sk-test-0123456789";

let fake: FakeOpenAI;
let bridge: TestBridge;
let authBridge: TestBridge;
let home: string;

before(async () => {
  fake = await startFakeOpenAI();
  home = tempDir("cb-bad-home-");
  const backends = {
    oc: {
      type: "opencode",
      command: OPENCODE_BIN,
      env: opencodeEnv(fake.url, home),
      timeoutSeconds: 30,
      killGraceSeconds: 1,
    },
  };
  bridge = await startTestBridge({
    server: { bodyLimitBytes: BODY_LIMIT },
    backends,
    models: [
      { id: MODEL, backend: "oc" },
      { id: "fake/other", backend: "oc", model: "fake/m1" },
    ],
  });
  authBridge = await startTestBridge({
    server: { apiKeys: [KEY, "second-key-abcdef"] },
    backends,
    models: [{ id: MODEL, backend: "oc" }],
  });
});

after(async () => {
  await bridge?.close(0);
  await authBridge?.close(0);
  await fake?.close();
  cleanup(home);
  if (bridge) cleanup(bridge.dataDir);
  if (authBridge) cleanup(authBridge.dataDir);
});

interface Answer {
  status: number;
  body: any;
  text: string;
  headers: Headers;
}

/**
 * POST to the bridge. Bad input is answered in milliseconds; the 5 s bound only keeps a wrongly
 * accepted request (which would run the real CLI) from slowing the suite down.
 */
async function post(
  body: string | Uint8Array | undefined,
  headers: Record<string, string> = { "content-type": "application/json" },
  base = bridge.baseURL,
  path = "/chat/completions",
): Promise<Answer> {
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, { method: "POST", headers, body, signal: AbortSignal.timeout(5000) });
  } catch (err) {
    assert.fail(`no answer within 5 s — the request was accepted and sent to the backend? (${(err as Error).message})`);
  }
  const text = await res.text();
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, text, headers: res.headers };
}

const postJson = (obj: unknown, headers?: Record<string, string>) => post(JSON.stringify(obj), headers);

/** Every error answer: `{"error":{"message": non-empty string, "type": string, "code": string|null, "param"?}}`. */
function assertOpenAIError(a: Answer, status: number | ((s: number) => boolean), code?: string | RegExp): void {
  if (typeof status === "number") assert.equal(a.status, status, a.text);
  else assert.ok(status(a.status), `status ${a.status}: ${a.text}`);
  assert.ok(a.body && typeof a.body === "object", `JSON body: ${a.text.slice(0, 200)}`);
  assert.deepEqual(Object.keys(a.body), ["error"], a.text);
  const e = a.body.error;
  assert.equal(typeof e.message, "string");
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.type, "string");
  assert.ok(e.code === null || typeof e.code === "string");
  if (code instanceof RegExp) assert.match(String(e.code), code);
  else if (code) assert.equal(e.code, code, a.text);
  assert.match(a.headers.get("content-type") ?? "", /application\/json/);
  assert.equal(a.headers.get("server"), `clawbridge/${VERSION}`, "every answer names the bridge");
}

const good = { model: MODEL, messages: [{ role: "user", content: "hi" }] };

describe("malformed requests", () => {
  test("malformed JSON → 400 invalid_json", async () => {
    for (const body of ['{"model": "x", ', "{model: 'x'}", "not json at all", '{"a":1}}', "[1,2,"]) {
      const a = await post(body);
      assertOpenAIError(a, 400, "invalid_json");
      assert.match(a.body.error.message, /not valid JSON/);
      assert.equal(a.body.error.type, "invalid_request_error");
    }
  });

  test("JSON sent as text/plain or without a content type is still parsed", async () => {
    // Parsed and validated: the error is about the missing model, not the content type.
    assertOpenAIError(
      await post(JSON.stringify({ messages: good.messages }), { "content-type": "text/plain" }),
      400,
      "invalid_request",
    );
    assertOpenAIError(await post(JSON.stringify({ messages: good.messages }), {}), 400, "invalid_request");
  });

  test("empty body, null, an array, a number → 400 invalid_body", async () => {
    for (const body of ["", "   ", "null", "[]", "42", '"text"', "true"]) {
      assertOpenAIError(await post(body), 400, "invalid_body");
    }
  });

  test(`a body over server.bodyLimitBytes → 413 naming the setting`, async () => {
    const big = { ...good, messages: [{ role: "user", content: "x".repeat(BODY_LIMIT + 10) }] };
    const a = await postJson(big);
    assertOpenAIError(a, 413, "body_too_large");
    assert.match(a.body.error.message, /server\.bodyLimitBytes/);
    assert.match(a.body.error.message, new RegExp(String(BODY_LIMIT)));
  });

  test("a chunked body (no Content-Length) that grows over the limit → 413, and the connection is closed", async () => {
    const { request } = await import("node:http");
    const url = new URL(bridge.url);
    const answer = await new Promise<{ status: number; text: string; connection: string | undefined }>(
      (resolve, reject) => {
        let answered = false;
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: "/v1/chat/completions",
            method: "POST",
            headers: { "content-type": "application/json" },
          },
          (res) => {
            answered = true;
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (text += c));
            res.on("end", () => {
              clearTimeout(timer);
              resolve({ status: res.statusCode ?? 0, text, connection: res.headers.connection });
            });
            res.on("error", reject);
          },
        );
        const timer = setTimeout(() => {
          req.destroy();
          reject(new Error("no complete answer within 5 s"));
        }, 5000);
        // The server closes the connection after its 413: a write error after the answer is expected.
        req.on("error", (err) => (answered ? undefined : reject(err)));
        // Written in pieces, so node sends it chunked; it passes the limit on the last piece.
        const piece = "x".repeat(10_000);
        req.write(`{"model":"${MODEL}","messages":[{"role":"user","content":"`);
        for (let i = 0; i < BODY_LIMIT / piece.length + 1; i++) req.write(piece);
        req.end('"}]}');
      },
    );
    assert.equal(answer.status, 413);
    assert.equal(JSON.parse(answer.text).error.code, "body_too_large");
    assert.equal(answer.connection, "close");
  });

  test("the chat route with a query string is still the chat route (validated, not 404)", async () => {
    const a = await post(
      "[]",
      { "content-type": "application/json" },
      bridge.baseURL,
      "/chat/completions?api-version=1",
    );
    assertOpenAIError(a, 400, "invalid_body");
  });

  test("a body just under the limit is accepted for validation (400 for its content, not 413)", async () => {
    const a = await postJson({ model: 7, messages: [{ role: "user", content: "x".repeat(BODY_LIMIT - 200) }] });
    assertOpenAIError(a, 400, "invalid_request");
  });
});

describe("invalid fields name the field", () => {
  const cases: Array<{ name: string; body: unknown; param: string; message?: RegExp }> = [
    { name: "messages missing", body: { model: MODEL }, param: "messages" },
    { name: "messages not an array", body: { model: MODEL, messages: "hi" }, param: "messages" },
    {
      name: "messages an object",
      body: { model: MODEL, messages: { role: "user", content: "hi" } },
      param: "messages",
    },
    {
      name: "messages empty",
      body: { model: MODEL, messages: [] },
      param: "messages",
      message: /at least one message/,
    },
    { name: "message not an object", body: { model: MODEL, messages: ["hi"] }, param: "messages[0]" },
    {
      name: "wrong role",
      body: { model: MODEL, messages: [{ role: "human", content: "hi" }] },
      param: "messages[0].role",
    },
    { name: "role missing", body: { model: MODEL, messages: [{ content: "hi" }] }, param: "messages[0].role" },
    {
      name: "content a number",
      body: { model: MODEL, messages: [{ role: "user", content: 42 }] },
      param: "messages[0].content",
    },
    {
      name: "content an object",
      body: { model: MODEL, messages: [{ role: "user", content: { text: "hi" } }] },
      param: "messages[0].content",
    },
    {
      name: "content part without text",
      body: { model: MODEL, messages: [{ role: "user", content: [{ type: "text" }] }] },
      param: "messages[0].content[0].type",
      message: /a text part needs a string `text`/,
    },
    {
      name: "second message bad",
      body: {
        model: MODEL,
        messages: [
          { role: "user", content: "a" },
          { role: "assistant", content: false },
        ],
      },
      param: "messages[1].content",
    },
    {
      name: "tool_calls not an array",
      body: {
        model: MODEL,
        messages: [
          { role: "assistant", content: null, tool_calls: {} },
          { role: "user", content: "x" },
        ],
      },
      param: "messages[0].tool_calls",
    },
    { name: "model missing", body: { messages: good.messages }, param: "model" },
    { name: "model a number", body: { model: 4, messages: good.messages }, param: "model" },
    { name: "model empty", body: { model: "", messages: good.messages }, param: "model", message: /non-empty/ },
    { name: "model null", body: { model: null, messages: good.messages }, param: "model" },
    { name: "stream a string", body: { ...good, stream: "true" }, param: "stream" },
    { name: "stream a number", body: { ...good, stream: 1 }, param: "stream" },
    {
      name: "stream_options not an object",
      body: { ...good, stream: true, stream_options: "yes" },
      param: "stream_options",
    },
    {
      name: "include_usage not boolean",
      body: { ...good, stream: true, stream_options: { include_usage: "yes" } },
      param: "stream_options.include_usage",
    },
    { name: "n = 2", body: { ...good, n: 2 }, param: "n", message: /n must be 1/ },
    { name: "temperature out of range", body: { ...good, temperature: 7 }, param: "temperature" },
    { name: "top_p out of range", body: { ...good, top_p: 1.5 }, param: "top_p" },
    { name: "max_tokens negative", body: { ...good, max_tokens: -1 }, param: "max_tokens" },
    {
      name: "max_completion_tokens fractional",
      body: { ...good, max_completion_tokens: 10.5 },
      param: "max_completion_tokens",
    },
    { name: "tools not an array", body: { ...good, tools: { type: "function" } }, param: "tools" },
    {
      name: "tool without a name",
      body: { ...good, tools: [{ type: "function", function: { name: "" } }] },
      param: "tools[0].function.name",
    },
    { name: "user not a string", body: { ...good, user: 12 }, param: "user" },
  ];
  for (const c of cases) {
    const opts = {};
    test(`${c.name} → 400 naming ${c.param}`, opts, async () => {
      const before = fake.requests.length;
      const a = await postJson(c.body);
      assert.equal(fake.requests.length, before, "the model was not called");
      assertOpenAIError(a, 400, "invalid_request");
      assert.equal(a.body.error.param, c.param, a.text);
      assert.ok(a.body.error.message.startsWith(`${c.param}: `), a.body.error.message);
      if (c.message) assert.match(a.body.error.message, c.message);
    });
  }
});

describe("deep nesting → 400 naming the field, never 500", () => {
  // An OpenAI-type backend: it forwards the request (JSON.stringify of a 10,000-deep value
  // overflowed the stack there: a 500 for a client error).
  let up: TestBridge;
  before(async () => {
    up = await startTestBridge({
      backends: { up: { type: "openai", baseUrl: fake.url } },
      models: [{ id: MODEL, backend: "up" }],
    });
  });
  after(async () => {
    await up?.close(0);
    if (up) cleanup(up.dataDir);
  });

  // Written as text: JSON.stringify of a 10,000-deep value would overflow this test's own stack.
  const DEPTH = 10_000;
  const deepArray = "[".repeat(DEPTH) + "]".repeat(DEPTH);
  const deepObject = '{"a":'.repeat(DEPTH) + "1" + "}".repeat(DEPTH);
  const HOLE = "\u0000deep\u0000";
  const withDeep = (body: Record<string, unknown>, deep: string) =>
    JSON.stringify(body).replace(JSON.stringify(HOLE), () => deep);
  /** `level` arrays nested in each other: at the limit when the field is `level` + (its own depth in the body) = 64. */
  const nested = (levels: number) => JSON.parse("[".repeat(levels) + "]".repeat(levels)) as unknown;
  const cases: Array<{ name: string; body: (deep: string) => Record<string, unknown>; param: string }> = [
    {
      name: "tool_choice",
      body: (deep) => ({ ...good, tools: [{ type: "function", function: { name: "f" } }], tool_choice: deep }),
      param: "tool_choice",
    },
    {
      name: "response_format",
      body: (deep) => ({ ...good, response_format: { type: "json_schema", json_schema: { name: "x", schema: deep } } }),
      param: "response_format",
    },
    {
      name: "a message content part",
      body: (deep) => ({
        ...good,
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "hi" },
              { type: "image_url", image_url: deep },
            ],
          },
        ],
      }),
      param: "messages[0].content[1].image_url",
    },
    {
      name: "tools[].function.parameters",
      body: (deep) => ({
        ...good,
        tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: deep } } }],
      }),
      param: "tools[0].function.parameters",
    },
    {
      name: "an unknown pass-through field",
      body: (deep) => ({ ...good, metadata_extra: deep }),
      param: "metadata_extra",
    },
  ];
  for (const c of cases) {
    for (const stream of [false, true]) {
      test(`10,000-deep ${c.name} (${stream ? "streaming" : "non-streaming"}) → 400 naming ${c.param}`, async () => {
        for (const deep of [deepArray, deepObject]) {
          const before = fake.requests.length;
          const a = await post(
            withDeep({ ...c.body(HOLE), stream }, deep),
            { "content-type": "application/json" },
            up.baseURL,
          );
          assertOpenAIError(a, 400, "invalid_request");
          assert.equal(a.body.error.param, c.param, a.text);
          assert.ok(a.body.error.message.startsWith(`${c.param}: `), a.body.error.message);
          assert.match(a.body.error.message, /nested more than 64 levels/);
          assert.equal(fake.requests.length, before, "the model was not called");
        }
      });
    }
  }

  test("nesting up to the limit (64 levels, the body included) is forwarded; one more level is refused", async () => {
    // body (1) → tools (2) → [0] (3) → function (4) → parameters (5): 59 more levels reach 64.
    const at = (levels: number) => ({
      ...good,
      tools: [{ type: "function", function: { name: "f", parameters: nested(levels) } }],
    });
    const before = fake.requests.length;
    const ok = await post(JSON.stringify(at(60)), { "content-type": "application/json" }, up.baseURL);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(fake.requests.length, before + 1, "forwarded to the model");
    assert.equal(JSON.stringify(fake.requests.at(-1)!.body.tools[0].function.parameters), JSON.stringify(nested(60)));
    const over = await post(JSON.stringify(at(61)), { "content-type": "application/json" }, up.baseURL);
    assertOpenAIError(over, 400, "invalid_request");
    assert.equal(over.body.error.param, "tools[0].function.parameters");
  });
});

describe("unknown models and routes", () => {
  test("unknown model → 404 model_not_found listing the available models", async () => {
    for (const stream of [false, true]) {
      const a = await postJson({ ...good, model: "gpt-9-ultra", stream });
      assertOpenAIError(a, 404, "model_not_found");
      assert.equal(a.body.error.param, "model");
      assert.match(a.body.error.message, /gpt-9-ultra/);
      assert.ok(
        a.body.error.message.includes(MODEL) && a.body.error.message.includes("fake/other"),
        a.body.error.message,
      );
    }
  });

  test("unknown routes and methods → 404 OpenAI-shaped", async () => {
    for (const [method, path] of [
      ["GET", "/v1/nothing"],
      ["POST", "/v1/completions"],
      ["GET", "/v1/chat/completions"],
      ["DELETE", "/v1/models"],
      ["GET", "/etc/passwd"],
      ["POST", "/"],
    ] as const) {
      const res = await fetch(`${bridge.url}${path}`, {
        method,
        ...(method === "POST" ? { body: "{}", headers: { "content-type": "application/json" } } : {}),
      });
      const text = await res.text();
      const a: Answer = { status: res.status, body: JSON.parse(text), text, headers: res.headers };
      assertOpenAIError(a, 404, "not_found");
      assert.equal(a.body.error.type, "not_found_error");
      assert.ok(a.body.error.message.includes(path), a.body.error.message);
    }
  });

  test("GET /v1/models/<unknown> → 404 model_not_found", async () => {
    const res = await fetch(`${bridge.baseURL}/models/nope`);
    const text = await res.text();
    assertOpenAIError(
      { status: res.status, body: JSON.parse(text), text, headers: res.headers },
      404,
      "model_not_found",
    );
  });

  test("a malformed URL → 400 OpenAI-shaped", {}, async () => {
    const res = await fetch(`${bridge.url}/v1/models/%E0%A4%A`);
    const text = await res.text();
    assertOpenAIError(
      { status: res.status, body: JSON.parse(text), text, headers: res.headers },
      (s) => s >= 400 && s < 500,
    );
  });
});

describe("API keys", () => {
  const call = (headers: Record<string, string>, method = "GET", path = "/models", body?: string) =>
    fetch(`${authBridge.baseURL}${path}`, { method, headers, body });

  test("missing or wrong key → 401 authentication_error", async () => {
    const bad: Array<Record<string, string>> = [
      {},
      { authorization: "Bearer wrong-key-0000000" },
      { authorization: `Bearer ${KEY}x` },
      { authorization: `Basic ${Buffer.from(`u:${KEY}`).toString("base64")}` },
      { authorization: KEY },
      { "x-api-key": "nope-nope-nope" },
    ];
    for (const headers of bad) {
      for (const [method, path, body] of [
        ["GET", "/models", undefined],
        ["POST", "/chat/completions", JSON.stringify(good)],
      ] as const) {
        const res = await call({ "content-type": "application/json", ...headers }, method, path, body);
        const text = await res.text();
        assertOpenAIError(
          { status: res.status, body: JSON.parse(text), text, headers: res.headers },
          401,
          "invalid_api_key",
        );
        assert.equal(JSON.parse(text).error.type, "authentication_error");
        assert.ok(!text.includes(KEY), "the key is never echoed");
      }
    }
  });

  test("the right key passes, as Bearer (any case) or x-api-key, and any configured key works", async () => {
    const goodHeaders: Array<Record<string, string>> = [
      { authorization: `Bearer ${KEY}` },
      { authorization: `bearer ${KEY}` },
      { authorization: `Bearer   ${KEY}  ` },
      { "x-api-key": KEY },
      { authorization: "Bearer second-key-abcdef" },
    ];
    for (const headers of goodHeaders) {
      const res = await call(headers);
      assert.equal(res.status, 200, JSON.stringify(headers));
      assert.equal(((await res.json()) as any).object, "list");
    }
  });

  test("a right key with a bad body gets the body's 400, not 401", async () => {
    const res = await call(
      { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      "POST",
      "/chat/completions",
      '{"model":',
    );
    const text = await res.text();
    assertOpenAIError({ status: res.status, body: JSON.parse(text), text, headers: res.headers }, 400, "invalid_json");
  });

  test("unauthenticated requests are refused before the body is looked at (no 413 / 400 leak)", async () => {
    const res = await call({ "content-type": "application/json" }, "POST", "/chat/completions", "{broken");
    assert.equal(res.status, 401);
    await res.text();
  });
});

describe("random malformed bodies (seeded fuzz)", () => {
  test("every answer is a 4xx with an OpenAI error body, never a 500", async () => {
    let seed = 0x5eed;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    const junk = [null, 0, -1, 1.5, true, false, "", "x", [], [1], {}, { a: 1 }, [[[]]], "\u0000", "💥".repeat(3)];
    const validMsg = { role: "user", content: "hello" };
    const mutations: Array<() => string | Uint8Array> = [
      () => {
        const t = JSON.stringify({ ...good, stream: true });
        return t.slice(0, Math.floor(rnd() * (t.length - 1)));
      },
      () => JSON.stringify({ ...good, model: pick(junk.filter((j) => typeof j !== "string" || j === "")) }),
      () =>
        JSON.stringify({
          ...good,
          messages: pick(junk.filter((j) => !Array.isArray(j) || j.length === 0 || typeof j[0] !== "object")),
        }),
      () => JSON.stringify({ ...good, messages: [{ ...validMsg, role: pick(["", "human", "bot", "USER", 1, null]) }] }),
      () =>
        JSON.stringify({
          ...good,
          messages: [{ ...validMsg, content: pick([1, true, { a: 1 }, [1], [{ type: 1 }]]) }],
        }),
      () => JSON.stringify({ ...good, stream: pick(["true", 1, 0, null, {}, []]) }),
      () => JSON.stringify({ ...good, n: pick([0, 2, 3, 1.5, "1"]) }),
      () => JSON.stringify({ ...good, temperature: pick([-1, 2.5, "hot", []]) }),
      () =>
        JSON.stringify({
          ...good,
          tools: pick(["x", 1, [{}], [{ type: "function" }], [{ type: "function", function: {} }]]),
        }),
      () => JSON.stringify({ ...good, messages: [validMsg, pick(junk)] }),
      () => JSON.stringify({ ...good, model: `no-such-model-${Math.floor(rnd() * 1000)}` }),
      () => Uint8Array.from({ length: 1 + Math.floor(rnd() * 300) }, () => Math.floor(rnd() * 256)),
      () => "[".repeat(5000 + Math.floor(rnd() * 5000)),
      () => `{"model":"${MODEL}","messages":[${'{"role":"user","content":"x"},'.repeat(3)}`,
      () => JSON.stringify(pick(junk)),
      () =>
        JSON.stringify({ ...good, messages: [{ ...validMsg, tool_calls: pick([1, "x", [{}], [{ function: {} }]]) }] }),
    ];
    const contentTypes = [
      "application/json",
      "text/plain",
      "application/x-www-form-urlencoded",
      "application/json; charset=utf-8",
      "multipart/form-data; boundary=x",
      "",
    ];
    const statuses: number[] = [];
    const before = fake.requests.length;
    for (let i = 0; i < 48; i++) {
      const body = mutations[i % mutations.length]!();
      const ct = pick(contentTypes);
      const a = await post(body, ct ? { "content-type": ct } : {});
      statuses.push(a.status);
      assertOpenAIError(a, (s) => s >= 400 && s < 500);
    }
    assert.ok(statuses.includes(400) && statuses.includes(404));
    assert.equal(fake.requests.length, before, "no malformed request reached the model");
  });
});

describe("models and health", () => {
  test("GET /v1/models lists the configured models, OpenAI-shaped, owned by their backend", async () => {
    const res = await fetch(`${bridge.baseURL}/models`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as any;
    assert.equal(body.object, "list");
    assert.deepEqual(
      body.data.map((m: any) => m.id),
      [MODEL, "fake/other"],
    );
    for (const m of body.data) {
      assert.deepEqual(Object.keys(m).sort(), ["created", "id", "input", "input_modalities", "object", "owned_by"]);
      assert.equal(m.object, "model");
      // An OpenCode model takes images (its backend passes them on: docs/IMAGES.md).
      assert.deepEqual(m.input, ["text", "image"]);
      assert.equal(m.owned_by, "oc");
      assert.ok(Number.isInteger(m.created) && m.created > 1_700_000_000);
    }
    const one = (await (await fetch(`${bridge.baseURL}/models/${MODEL}`)).json()) as any;
    assert.equal(one.id, MODEL);
  });

  test("GET / and /health report status, version, uptime, usable backends", async () => {
    for (const path of ["/", "/health"]) {
      const res = await fetch(`${bridge.url}${path}`);
      assert.equal(res.status, 200);
      const h = (await res.json()) as any;
      assert.equal(h.status, "ok");
      assert.equal(h.name, "clawbridge");
      assert.match(h.version, /^\d+\.\d+\.\d+/);
      assert.ok(Number.isInteger(h.uptimeSeconds) && h.uptimeSeconds >= 0);
      assert.equal(h.backends.length, 1);
      assert.equal(h.backends[0].name, "oc");
      assert.equal(h.backends[0].type, "opencode");
      assert.equal(h.backends[0].usable, true, JSON.stringify(h.backends[0]));
      assert.equal(typeof h.backends[0].detail, "string");
      assert.deepEqual(
        h.models.map((m: any) => m.id),
        [MODEL, "fake/other"],
      );
      assert.equal(h.turns.running, 0);
      assert.equal(h.turns.processes, 0);
    }
  });

  test("a backend whose CLI is missing makes /health say so", async () => {
    const broken = await startTestBridge({
      backends: {
        gone: { type: "opencode", command: "/nonexistent/opencode-binary", env: opencodeEnv(fake.url, home) },
      },
      models: [{ id: MODEL, backend: "gone" }],
    });
    try {
      const h = (await (await fetch(`${broken.url}/health`)).json()) as any;
      assert.equal(h.status, "unusable");
      assert.equal(h.backends[0].usable, false);
      assert.ok(h.backends[0].detail.length > 0);
    } finally {
      await broken.close(0);
      cleanup(broken.dataDir);
    }
  });
});
