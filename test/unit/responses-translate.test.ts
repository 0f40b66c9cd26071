/**
 * Responses API input → Chat Completions (src/request/responses-api/translate.ts): messages and
 * their parts, function and freeform calls joined to assistant messages, tool outputs, item kinds
 * left out, tools (function, custom, namespace; hosted ones left out), tool_choice, and the 400s
 * that name the bad item. Also the door's parse (src/request/responses-api/door.ts) with a real
 * response store in memory: instructions first, the stored chain before the new input, the chain's
 * conversation, `store: false`, an unknown or broken chain (404), refusals of what cannot be honoured.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { ResponseStore } from "../../src/core/store/responses.js";
import { ApiError } from "../../src/request/chat-api/errors.js";
import { responsesDoor } from "../../src/request/responses-api/door.js";
import {
  flatName,
  translateInput,
  translateToolChoice,
  translateTools,
} from "../../src/request/responses-api/translate.js";

function refused(f: () => unknown, param: string | null, message: RegExp, status = 400): void {
  try {
    f();
  } catch (err) {
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, status);
    assert.equal(err.param, param, err.message);
    assert.match(err.message, message);
    return;
  }
  assert.fail(`not refused (${param})`);
}

test("input: a string, messages with parts, calls joined to the assistant message before them, outputs as tool messages", () => {
  assert.deepEqual(translateInput("hi"), [{ role: "user", content: "hi" }]);
  const img = "data:image/png;base64,AAAA";
  assert.deepEqual(
    translateInput([
      { role: "developer", content: "be kind" },
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "look" },
          { type: "input_image", image_url: img, detail: "high" },
        ],
      },
      {
        role: "user",
        content: [
          { type: "input_text", text: "a" },
          { type: "input_text", text: "b" },
        ],
      },
      { type: "reasoning", id: "rs_1", summary: [], encrypted_content: "xx" },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Let me check." }] },
      { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
      { type: "function_call", call_id: "c2", name: "lookup", namespace: "mcp__srv", arguments: '{"q":1}' },
      { type: "function_call_output", call_id: "c1", output: "one" },
      {
        type: "function_call_output",
        call_id: "c2",
        output: [
          { type: "input_text", text: "two" },
          { type: "input_image", image_url: img },
        ],
      },
      { type: "custom_tool_call", call_id: "c3", name: "apply_patch", input: "PATCH" },
      { type: "custom_tool_call_output", call_id: "c3", output: "done" },
      { type: "web_search_call", id: "ws", status: "completed" },
      { type: "item_reference", id: "msg_x" },
      { type: "some_future_item" },
      { role: "user", content: [] },
      { role: "assistant", content: [{ type: "refusal", refusal: "no" }] },
    ]),
    [
      { role: "developer", content: "be kind" },
      {
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "image_url", image_url: { url: img, detail: "high" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b" },
        ],
      },
      {
        role: "assistant",
        content: "Let me check.",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "f", arguments: "{}" } },
          { id: "c2", type: "function", function: { name: "mcp__srv__lookup", arguments: '{"q":1}' } },
        ],
      },
      { role: "tool", tool_call_id: "c1", content: "one" },
      { role: "tool", tool_call_id: "c2", content: "two" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c3", type: "function", function: { name: "apply_patch", arguments: '{"input":"PATCH"}' } }],
      },
      { role: "tool", tool_call_id: "c3", content: "done" },
      { role: "assistant", content: "no" },
    ],
  );
});

test("input: each bad item is a 400 naming it and saying what to send", () => {
  refused(() => translateInput([42]), "input[0]", /must be an object/);
  refused(() => translateInput([{ content: "x" }]), "input[0]", /needs a `type`, or, for a message, a `role`/);
  refused(() => translateInput([{ role: "bot", content: "x" }]), "input[0].role", /unknown role/);
  refused(() => translateInput([{ role: "user" }]), "input[0].content", /string or an array/);
  refused(() => translateInput([{ role: "user", content: ["x"] }]), "input[0].content[0]", /object with a `type`/);
  refused(
    () => translateInput([{ role: "user", content: [{ type: "input_text", text: 1 }] }]),
    "input[0].content[0].text",
    /string/,
  );
  refused(
    () => translateInput([{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }]),
    "input[0].content[0].image_url",
    /data URL .* or an http\(s\) URL; file_id is not supported/,
  );
  refused(
    () => translateInput([{ role: "user", content: [{ type: "input_file", file_data: "..." }] }]),
    "input[0].content[0]",
    /input_file is not supported here; send the file's text as input_text/,
  );
  refused(() => translateInput([{ type: "function_call", call_id: "c", name: "f" }]), "input[0].arguments", /string/);
  refused(
    () => translateInput([{ type: "function_call_output", call_id: "c", output: 3 }]),
    "input[0].output",
    /string/,
  );
  refused(() => translateInput([{ type: 7 }]), "input[0].type", /string/);
});

test("tools: functions as they are, freeform tools as one-string functions, namespaces flattened, hosted tools left out", () => {
  const { tools, map } = translateTools([
    {
      type: "function",
      name: "f",
      description: "F",
      parameters: { type: "object", properties: { a: { type: "string" } } },
      strict: true,
    },
    { type: "function", name: "g", parameters: null },
    {
      type: "custom",
      name: "apply_patch",
      description: "Patch files.",
      format: { type: "grammar", syntax: "lark", definition: "start: x" },
    },
    {
      type: "namespace",
      name: "multi_agent_v1",
      description: "agents",
      tools: [
        { type: "function", name: "spawn_agent", parameters: { type: "object", properties: {} } },
        { type: "custom", name: "note" },
        { type: "web_search" },
      ],
    },
    { type: "web_search", external_web_access: false },
    { type: "local_shell" },
    { type: "file_search", vector_store_ids: [] },
    { type: "mcp", server_label: "x" },
    { type: "function", name: "f", parameters: {} },
  ]);
  assert.deepEqual(
    tools.map((t) => t.function.name),
    ["f", "g", "apply_patch", "multi_agent_v1__spawn_agent", "multi_agent_v1__note"],
  );
  assert.deepEqual(tools[0], {
    type: "function",
    function: {
      name: "f",
      description: "F",
      parameters: { type: "object", properties: { a: { type: "string" } } },
      strict: true,
    },
  });
  assert.deepEqual(tools[1]!.function.parameters, { type: "object", properties: {} });
  assert.match(
    tools[2]!.function.description!,
    /^Patch files\. Call it with its whole input as the string argument `input`\.\n\nThe input follows this lark grammar:\nstart: x$/,
  );
  assert.deepEqual((tools[2]!.function.parameters as any).required, ["input"]);
  assert.deepEqual(map.get("multi_agent_v1__spawn_agent"), {
    name: "spawn_agent",
    namespace: "multi_agent_v1",
    custom: false,
  });
  assert.deepEqual(map.get("multi_agent_v1__note"), { name: "note", namespace: "multi_agent_v1", custom: true });
  assert.deepEqual(map.get("apply_patch"), { name: "apply_patch", custom: true });
  assert.equal(flatName("mcp__openclaw__", "x"), "mcp__openclaw__x");
  refused(() => translateTools([{ type: "function" }]), "tools[0].name", /needs a name/);
  refused(
    () => translateTools([{ type: "function", name: "f", parameters: "x" }]),
    "tools[0].parameters",
    /JSON schema object/,
  );
  refused(() => translateTools([{ type: "namespace", name: "n" }]), "tools[0].tools", /needs its tools/);
});

test("tool_choice: the modes, a named function or freeform tool, allowed_tools, a hosted tool's choice; nothing without tools", () => {
  const { map } = translateTools([
    { type: "function", name: "f" },
    { type: "custom", name: "apply_patch" },
    { type: "namespace", name: "ns", tools: [{ type: "function", name: "g" }] },
  ]);
  assert.equal(translateToolChoice("required", map), "required");
  assert.equal(translateToolChoice("none", map), "none");
  assert.equal(translateToolChoice(undefined, map), undefined);
  assert.deepEqual(translateToolChoice({ type: "function", name: "f" }, map), {
    type: "function",
    function: { name: "f" },
  });
  assert.deepEqual(translateToolChoice({ type: "custom", name: "apply_patch" }, map), {
    type: "function",
    function: { name: "apply_patch" },
  });
  assert.deepEqual(translateToolChoice({ type: "function", name: "g", namespace: "ns" }, map), {
    type: "function",
    function: { name: "ns__g" },
  });
  assert.equal(translateToolChoice({ type: "allowed_tools", mode: "required", tools: [] }, map), "required");
  assert.equal(translateToolChoice({ type: "web_search_preview" }, map), "auto");
  assert.equal(translateToolChoice("required", new Map()), undefined);
  refused(
    () => translateToolChoice({ type: "function", name: "nope" }, map),
    "tool_choice.name",
    /no function tool "nope" in tools \(offered: f, apply_patch, g\)/,
  );
  refused(() => translateToolChoice("always", map), "tool_choice", /"auto", "none", "required"/);
});

/** `refused` for the door's parse, which reads the store (async). */
async function refusedAsync(
  f: () => Promise<unknown>,
  param: string | null,
  message: RegExp,
  status = 400,
): Promise<void> {
  await assert.rejects(f, (err: unknown) => {
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, status);
    assert.equal(err.param, param, err.message);
    assert.match(err.message, message);
    return true;
  });
}

const store = await ResponseStore.open(":memory:", { keepDays: 30, maxStored: 100 });
after(() => store.close());
const door = responsesDoor({ store });
const parse = (body: Record<string, unknown>) => door.parse(body);
const turn = { conversation: { key: "derived:first", source: "derived" as const } };

/** Answer a parsed request with `text` through its dialect (as the stream engine would), so it is stored. */
function answer(req: Awaited<ReturnType<typeof parse>>, text: string): string {
  const d = req.dialect(turn);
  const frames = d.open() + d.event({ type: "text", text }) + d.finish("stop", undefined);
  return JSON.parse(frames.split("\n\n").at(-2)!.split("\n")[1]!.slice(6)).response.id;
}

test("door: the chat request (instructions first, limits, sampling, reasoning effort, structured output), nothing else passed on", async () => {
  const r = await parse({
    model: "m",
    instructions: "Sys",
    input: "Q",
    max_output_tokens: 64,
    temperature: 0.2,
    top_p: 0.9,
    user: "u1",
    reasoning: { effort: "low" },
    text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true } },
    parallel_tool_calls: false,
    tools: [{ type: "function", name: "f" }],
    tool_choice: "required",
    include: ["reasoning.encrypted_content"],
    prompt_cache_key: "k",
    client_metadata: { a: "b" },
    store: false,
    stream: true,
  });
  assert.equal(r.stream, true);
  // Codex's session id (its prompt_cache_key) names the conversation, with its thread.
  assert.equal(r.conversation?.source, "user");
  assert.match(r.conversation?.key ?? "", /^cache:k:[0-9a-f]{16}$/);
  assert.deepEqual(r.chat, {
    model: "m",
    messages: [
      { role: "system", content: "Sys" },
      { role: "user", content: "Q" },
    ],
    stream: true,
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }],
    tool_choice: "required",
    parallel_tool_calls: false,
    max_tokens: 64,
    temperature: 0.2,
    top_p: 0.9,
    user: "u1",
    reasoning_effort: "low",
    response_format: { type: "json_schema", json_schema: { name: "out", schema: { type: "object" }, strict: true } },
  });
});

test("door: previous_response_id puts the stored chain before the new input; the chain keeps its first response's conversation", async () => {
  const r1 = await parse({ model: "m", instructions: "Only for turn 1", input: "one" });
  const id1 = answer(r1, "ONE");
  const r2 = await parse({ model: "m", previous_response_id: id1, input: [{ role: "user", content: "two" }] });
  assert.deepEqual(r2.conversation, { key: "derived:first", source: "chain" });
  assert.deepEqual(r2.chat.messages, [
    { role: "user", content: "one" },
    { role: "assistant", content: "ONE" },
    { role: "user", content: "two" },
  ]);
  const id2 = answer(r2, "TWO");
  const r3 = await parse({ model: "m", previous_response_id: id2, input: "three", store: false });
  assert.deepEqual(
    r3.chat.messages.map((m) => m.content),
    ["one", "ONE", "two", "TWO", "three"],
  );
  const id3 = answer(r3, "THREE");
  assert.equal(await store.body(id3), undefined, "store: false keeps nothing");
  await refusedAsync(
    () => parse({ model: "m", previous_response_id: id3, input: "x" }),
    "previous_response_id",
    /'resp_\w+' not found/,
    404,
  );
  try {
    await parse({ model: "m", previous_response_id: "resp_nope", input: "x" });
  } catch (err) {
    assert.equal((err as ApiError).code, "previous_response_not_found");
  }
  // A chain whose first response is gone cannot be continued, and says which one is missing.
  assert.ok(await store.delete(id1));
  await refusedAsync(
    () => parse({ model: "m", previous_response_id: id2, input: "x" }),
    "previous_response_id",
    new RegExp(`an earlier response of its conversation \\('${id1}'\\) is no longer kept`),
    404,
  );
});

test("door: what cannot be honoured is refused, field named", async () => {
  await refusedAsync(() => parse({ model: "m", input: "x", background: true }), "background", /not supported/);
  await refusedAsync(
    () => parse({ model: "m", input: "x", conversation: "conv_1" }),
    "conversation",
    /previous_response_id/,
  );
  await refusedAsync(() => parse({ model: "m", input: "x", prompt: { id: "p" } }), "prompt", /instructions/);
  await refusedAsync(() => parse({ model: "", input: "x" }), "model", /non-empty/);
  await refusedAsync(
    () => parse({ model: "m", input: [{ type: "reasoning", summary: [] }] }),
    "input",
    /nothing to answer/,
  );
  let deep: unknown = "x";
  for (let i = 0; i < 80; i++) deep = [deep];
  await refusedAsync(() => parse({ model: "m", input: "x", metadata: { a: deep } }), null, /more than 64 levels/);
});
