/**
 * The Anthropic Messages request → Chat Completions translation (src/request/messages-api): every
 * block kind, tools and tool_choice, the fields passed and left out, the conversation from
 * `metadata.user_id`, the 400s that name the field, and the count_tokens estimate.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiError } from "../../src/request/chat-api/errors.js";
import { countInputTokens, IMAGE_TOKENS } from "../../src/request/messages-api/count-tokens.js";
import { parseCountTokensRequest, parseMessagesRequest } from "../../src/request/messages-api/request.js";
import { callIdOf, toolUseId } from "../../src/request/messages-api/translate.js";

const base = { model: "m", max_tokens: 100 };
const parse = (body: Record<string, unknown>) => parseMessagesRequest({ ...base, ...body });
const messagesOf = (body: Record<string, unknown>) => parse(body).chat.messages;

/** The 400 `run` throws: its message and param. */
function refusal(run: () => unknown): { message: string; param: string | null } {
  try {
    run();
  } catch (err) {
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, 400);
    return { message: err.message, param: err.param };
  }
  assert.fail("expected a 400");
}

describe("messages", () => {
  test("system as a string or text blocks (cache_control dropped) comes first; a system message stays in place", () => {
    assert.deepEqual(messagesOf({ system: "Be brief.", messages: [{ role: "user", content: "hi" }] }), [
      { role: "system", content: "Be brief." },
      { role: "user", content: "hi" },
    ]);
    const msgs = messagesOf({
      system: [
        { type: "text", text: "One." },
        { type: "text", text: "Two.", cache_control: { type: "ephemeral" } },
      ],
      messages: [
        { role: "user", content: "hi" },
        { role: "system", content: [{ type: "text", text: "Agents: none" }] },
        { role: "assistant", content: "hello" },
      ],
    });
    assert.deepEqual(msgs, [
      { role: "system", content: "One.\nTwo." },
      { role: "user", content: "hi" },
      { role: "system", content: "Agents: none" },
      { role: "assistant", content: "hello" },
    ]);
  });

  test("text blocks join into one string; images become image_url parts (base64 → data URL, url kept)", () => {
    assert.deepEqual(
      messagesOf({
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "a", cache_control: { type: "ephemeral" } },
              { type: "text", text: "b" },
            ],
          },
        ],
      }),
      [{ role: "user", content: "a\nb" }],
    );
    const [m] = messagesOf({
      messages: [
        {
          role: "user",
          content: [
            { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "QUJD" } },
            { type: "image", source: { type: "url", url: "https://example.com/cat.png" } },
            { type: "text", text: "compare" },
          ],
        },
      ],
    });
    assert.deepEqual(m!.content, [
      { type: "image_url", image_url: { url: "data:image/jpeg;base64,QUJD" } },
      { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
      { type: "text", text: "compare" },
    ]);
  });

  test("documents: text sources as titled text, PDFs as one line saying they were left out", () => {
    const [m] = messagesOf({
      messages: [
        {
          role: "user",
          content: [
            { type: "document", title: "notes", source: { type: "text", media_type: "text/plain", data: "line 1" } },
            { type: "document", source: { type: "content", content: [{ type: "text", text: "inner" }] } },
            {
              type: "document",
              title: "spec",
              source: { type: "base64", media_type: "application/pdf", data: "JVBE" },
            },
          ],
        },
      ],
    });
    const text = String(m!.content);
    assert.match(text, /\[document "notes"\]\nline 1/);
    assert.match(text, /\[document\]\ninner/);
    assert.match(text, /PDF document "spec" was attached; .*left out/);
  });

  test("assistant: text joined, tool_use → tool_calls (input as JSON, one toolu_ less), thinking left out", () => {
    const msgs = messagesOf({
      messages: [
        { role: "user", content: "go" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "plan", signature: "s" },
            { type: "redacted_thinking", data: "xx" },
            { type: "text", text: "Doing it." },
            { type: "tool_use", id: "toolu_callcbABC", name: "Read", input: { file_path: "/a" } },
            { type: "tool_use", id: "other-id", name: "Bash", input: {} },
          ],
        },
      ],
    });
    assert.deepEqual(msgs[1], {
      role: "assistant",
      content: "Doing it.",
      tool_calls: [
        { id: "callcbABC", type: "function", function: { name: "Read", arguments: '{"file_path":"/a"}' } },
        { id: "other-id", type: "function", function: { name: "Bash", arguments: "{}" } },
      ],
    });
    // Only thinking: nothing to send.
    assert.equal(
      messagesOf({
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: [{ type: "thinking", thinking: "x", signature: "s" }] },
        ],
      }).length,
      1,
    );
  });

  test("tool_result → tool messages first (is_error marked, images after in a user message), then the person's text", () => {
    const msgs = messagesOf({
      messages: [
        { role: "user", content: "go" },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_c1", name: "Shot", input: {} }] },
        {
          role: "user",
          content: [
            { type: "text", text: "and also this" },
            { type: "tool_result", tool_use_id: "toolu_c1", content: "plain" },
            { type: "tool_result", tool_use_id: "toolu_c2", is_error: true, content: [{ type: "text", text: "boom" }] },
            {
              type: "tool_result",
              tool_use_id: "toolu_c3",
              content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "QUJD" } }],
            },
            { type: "tool_result", tool_use_id: "toolu_c4" },
          ],
        },
      ],
    });
    assert.deepEqual(msgs.slice(2), [
      { role: "tool", tool_call_id: "c1", content: "plain" },
      { role: "tool", tool_call_id: "c2", content: "[the tool reported an error] boom" },
      { role: "tool", tool_call_id: "c3", content: "[1 image, sent in the next message]" },
      { role: "tool", tool_call_id: "c4", content: "" },
      {
        role: "user",
        content: [
          { type: "text", text: "[the image returned by tool call toolu_c3]" },
          { type: "image_url", image_url: { url: "data:image/png;base64,QUJD" } },
          { type: "text", text: "and also this" },
        ],
      },
    ]);
  });

  test("block kinds the bridge does not take (server tools' results, newer kinds) are passed over, never a 400", () => {
    const msgs = messagesOf({
      messages: [
        {
          role: "user",
          content: [
            { type: "web_search_tool_result", tool_use_id: "srvtoolu_1", content: [] },
            { type: "some_future_block", x: 1 },
            { type: "text", text: "hi" },
          ],
        },
      ],
    });
    assert.deepEqual(msgs, [{ role: "user", content: "hi" }]);
  });
});

describe("tools and options", () => {
  test("client tools → function tools; server tools left out; tool_choice and disable_parallel_tool_use", () => {
    const schema = { type: "object", properties: { q: { type: "string" } } };
    const { chat } = parse({
      messages: [{ role: "user", content: "hi" }],
      tools: [
        { name: "search", description: "Search", input_schema: schema },
        { type: "custom", name: "plain", input_schema: { type: "object" } },
        { type: "web_search_20250305", name: "web_search", max_uses: 3 },
        { type: "bash_20250124", name: "bash" },
        { type: "text_editor_20250728", name: "str_replace_based_edit_tool" },
      ],
      tool_choice: { type: "tool", name: "search", disable_parallel_tool_use: true },
    });
    assert.deepEqual(chat.tools, [
      { type: "function", function: { name: "search", description: "Search", parameters: schema } },
      { type: "function", function: { name: "plain", parameters: { type: "object" } } },
    ]);
    assert.deepEqual(chat.tool_choice, { type: "function", function: { name: "search" } });
    assert.equal(chat.parallel_tool_calls, false);
    const choice = (tc: unknown) =>
      parse({ messages: [{ role: "user", content: "x" }], tools: [{ name: "t", input_schema: {} }], tool_choice: tc })
        .chat.tool_choice;
    assert.equal(choice({ type: "auto" }), "auto");
    assert.equal(choice({ type: "any" }), "required");
    assert.equal(choice({ type: "none" }), "none");
    // Only server tools: no tools, no tool_choice upstream.
    const only = parse({
      messages: [{ role: "user", content: "x" }],
      tools: [{ type: "web_search_20250305", name: "web_search" }],
      tool_choice: { type: "any" },
    }).chat;
    assert.equal("tools" in only, false);
    assert.equal("tool_choice" in only, false);
  });

  test("max_tokens, stop_sequences → stop, temperature, top_p, top_k, stream; thinking and metadata not passed", () => {
    const { chat, stream } = parse({
      messages: [{ role: "user", content: "x" }],
      max_tokens: 321,
      stop_sequences: ["END"],
      temperature: 0.2,
      top_p: 0.8,
      top_k: 40,
      stream: true,
      thinking: { type: "enabled", budget_tokens: 2000 },
      metadata: { user_id: "u1" },
      context_management: { edits: [] },
    });
    assert.equal(stream, true);
    assert.deepEqual(chat, {
      model: "m",
      messages: [{ role: "user", content: "x" }],
      max_tokens: 321,
      stream: true,
      stop: ["END"],
      temperature: 0.2,
      top_p: 0.8,
      top_k: 40,
    });
  });

  test("the conversation: whose (Claude Code's session_id, else the user_id) and which thread (its first user message)", () => {
    const cc = JSON.stringify({ device_id: "d".repeat(64), account_uuid: "", session_id: "5e1d-42" });
    const conv = (userId: string | null | undefined, ...texts: string[]) =>
      parse({
        messages: texts.map((t, i) => ({ role: i % 2 ? "assistant" : "user", content: t })),
        ...(userId === undefined ? {} : { metadata: { user_id: userId } }),
      }).conversation;
    const main = conv(cc, "fix the bug");
    assert.equal(main?.source, "user");
    assert.match(main!.key, /^claude-code:5e1d-42:[0-9a-f]{16}$/);
    // The same thread later: the same conversation.
    assert.deepEqual(conv(cc, "fix the bug", "done", "thanks"), main);
    // A side request or a subagent of the same session: another one.
    assert.notEqual(conv(cc, "write a title for: fix the bug")!.key, main!.key);
    // Another client's user id: the person's id as sent, per thread.
    assert.match(conv("user_abc_session_1", "hi")!.key, /^user:user_abc_session_1:[0-9a-f]{16}$/);
    assert.notEqual(conv("user_abc_session_1", "hi")!.key, conv("user_abc_session_1", "other")!.key);
    assert.equal(conv(undefined, "x"), undefined);
    assert.equal(conv(null, "x"), undefined);
    // A very long id still leaves room for the thread's digest.
    assert.match(conv("u".repeat(500), "x")!.key, /^user:u+:[0-9a-f]{16}$/);
    assert.ok(conv("u".repeat(500), "x")!.key.length <= 200);
  });

  test("tool-use ids round-trip exactly: toolu_ + the backend's id, and back", () => {
    for (const id of ["callcbXYZ", "toolu_01abc", "call_1"]) assert.equal(callIdOf(toolUseId(id)), id);
  });
});

describe("400s that name the field", () => {
  test("the request's own fields", () => {
    const noMax = refusal(() => parseMessagesRequest({ model: "m", messages: [{ role: "user", content: "x" }] }));
    assert.match(noMax.message, /^max_tokens: max_tokens is required/);
    assert.equal(noMax.param, "max_tokens");
    assert.match(refusal(() => parse({ messages: [] })).message, /^messages: messages must contain at least one/);
    assert.match(refusal(() => parse({ messages: [{ role: "bot", content: "x" }] })).message, /^messages\[0\]\.role: /);
    assert.match(
      refusal(() => parse({ messages: [{ role: "user", content: 5 }] })).message,
      /^messages\[0\]\.content: /,
    );
    assert.match(refusal(() => parse({ model: "", messages: [{ role: "user", content: "x" }] })).message, /^model: /);
    assert.match(
      refusal(() => parse({ messages: [{ role: "user", content: "x" }], tool_choice: { type: "sometimes" } })).message,
      /^tool_choice: /,
    );
  });

  test("a bad block names its place; a Files API image says what to send instead", () => {
    const noText = refusal(() => parse({ messages: [{ role: "user", content: [{ type: "text" }] }] }));
    assert.equal(noText.param, "messages[0].content[0].text");
    const noId = refusal(() =>
      parse({
        messages: [
          { role: "user", content: "x" },
          { role: "assistant", content: [{ type: "tool_use", name: "t", input: {} }] },
        ],
      }),
    );
    assert.equal(noId.param, "messages[1].content[0].id");
    const file = refusal(() =>
      parse({ messages: [{ role: "user", content: [{ type: "image", source: { type: "file", file_id: "f1" } }] }] }),
    );
    assert.match(file.message, /^messages\[0\]\.content\[0\]\.source: .*base64 or url/);
    const nested = refusal(() =>
      parse({
        messages: [{ role: "user", content: "x" }],
        tools: [{ name: "t", input_schema: JSON.parse(`${"[".repeat(80)}${"]".repeat(80)}`) }],
      }),
    );
    assert.match(nested.message, /nested more than/);
    assert.match(refusal(() => parse({ messages: [{ role: "assistant", content: [] }] })).message, /nothing to answer/);
  });
});

describe("count_tokens", () => {
  test("an estimate: text by the tokenizer, framing per message, a flat count per image, tools by their JSON", async () => {
    const n = (body: Record<string, unknown>) => countInputTokens(parseCountTokensRequest({ model: "m", ...body }));
    const hi = await n({ messages: [{ role: "user", content: "hi" }] });
    assert.ok(hi > 1 && hi < 12, String(hi));
    const longer = await n({
      messages: [{ role: "user", content: "hello there, how are you doing today? ".repeat(10) }],
    });
    assert.ok(longer > hi + 50, String(longer));
    const withImage = await n({
      messages: [
        {
          role: "user",
          content: [
            { type: "image", source: { type: "base64", media_type: "image/png", data: "QUJD" } },
            { type: "text", text: "hi" },
          ],
        },
      ],
    });
    assert.ok(withImage >= hi + IMAGE_TOKENS, String(withImage));
    const withTools = await n({
      messages: [{ role: "user", content: "hi" }],
      tools: [{ name: "search", description: "Search the web for pages", input_schema: { type: "object" } }],
    });
    assert.ok(withTools > hi + 5, String(withTools));
    // max_tokens is not needed; a body that is no object is a 400.
    assert.match(refusal(() => parseCountTokensRequest([])).message, /JSON object/);
  });
});
