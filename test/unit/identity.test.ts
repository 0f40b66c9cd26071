/**
 * Conversation identity: explicit headers (configured > x-openclaw-session-key > x-session-id), the
 * OpenAI `user` field, OpenClaw's Runtime line, and a derived key that stays stable across turns
 * although OpenClaw rebuilds the system prompt and timestamps every turn.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { resolveConversation, threadOf } from "../../src/request/identity/conversation.js";
import { chatRequestSchema, type ChatMessage, type ChatRequest } from "../../src/request/chat-api/schema.js";
import {
  openclawRequest,
  openclawSystemPrompt,
  wrapUserText,
  type Generation,
  type OpenClawTurn,
} from "../../testkit/openclaw-request.js";

const req = (messages: ChatMessage[], extra: Partial<ChatRequest> = {}): ChatRequest =>
  chatRequestSchema.parse({ model: "m", messages, ...extra });
const simple = (extra: Partial<ChatRequest> = {}) => req([{ role: "user", content: "hello" }], extra);

describe("explicit keys", () => {
  test("precedence: configured header > x-openclaw-session-key > x-session-id > user > Runtime > derived", () => {
    const r = openclawRequest("m", [{ role: "user", text: "hi" }], "2026.9", {
      sessionKey: "agent:main:telegram:dm:1",
      sessionId: "uuid-1",
    }) as ChatRequest;
    const body = req(r.messages, { user: "alice" });
    const all = {
      "x-my-conv": "from-config",
      "x-openclaw-session-key": "from-openclaw",
      "x-session-id": "from-generic",
    };
    assert.deepEqual(resolveConversation(body, all, { sessionHeader: "X-My-Conv" }), {
      key: "from-config",
      source: "header",
    });
    assert.deepEqual(
      resolveConversation(body, all),
      { key: "from-openclaw", source: "header" },
      "configured header not set: OpenClaw's header wins",
    );
    const { "x-openclaw-session-key": _o, ...generic } = all;
    assert.deepEqual(resolveConversation(body, generic), { key: "from-generic", source: "header" });
    assert.deepEqual(resolveConversation(body, {}), { key: "user:alice", source: "user" });
    assert.deepEqual(resolveConversation(req(r.messages), {}), {
      key: "openclaw:agent:main:telegram:dm:1:uuid-1",
      source: "runtime",
    });
    assert.equal(resolveConversation(simple(), {}).source, "derived");
  });

  test("a configured header that is absent falls through to the defaults", () => {
    assert.deepEqual(resolveConversation(simple(), { "x-session-id": "s1" }, { sessionHeader: "x-my-conv" }), {
      key: "s1",
      source: "header",
    });
  });

  test("empty or blank headers and user are ignored", () => {
    assert.equal(
      resolveConversation(simple({ user: "  " }), { "x-openclaw-session-key": "   ", "x-session-id": "" }).source,
      "derived",
    );
  });

  test("header values are trimmed, made printable and bounded", () => {
    assert.equal(resolveConversation(simple(), { "x-session-id": "  abc  " }).key, "abc");
    const odd = resolveConversation(simple(), { "x-session-id": "a b\tc\u00e9d" }).key;
    assert.match(odd, /^[\x21-\x7e]+$/);
    assert.ok(odd.startsWith("a_b_c"));
    assert.equal(resolveConversation(simple(), { "x-session-id": "k".repeat(5000) }).key.length, 200);
  });

  test("an array header uses its first value", () => {
    assert.equal(
      resolveConversation(simple(), { "x-session-id": ["first", "second"] as unknown as string }).key,
      "first",
    );
  });

  test("the user field", () => {
    assert.deepEqual(resolveConversation(simple({ user: "telegram:5003590611" }), {}), {
      key: "user:telegram:5003590611",
      source: "user",
    });
  });
});

describe("OpenClaw's Runtime line", () => {
  test("session and sessionId from the first user message make the key", () => {
    const r = openclawRequest("m", [{ role: "user", text: "hi" }], "2026.9", {
      sessionKey: "agent:main:main",
      sessionId: "6f1c2a7e",
    }) as ChatRequest;
    assert.deepEqual(resolveConversation(req(r.messages), {}), {
      key: "openclaw:agent:main:main:6f1c2a7e",
      source: "runtime",
    });
  });

  test("the key stays the same on later turns (the Runtime line is in the first message)", () => {
    const turns: OpenClawTurn[] = [{ role: "user", text: "hi" }];
    const k1 = resolveConversation(req((openclawRequest("m", turns, "2026.9") as ChatRequest).messages), {});
    turns.push({ role: "assistant", text: "hello!" }, { role: "user", text: "more" });
    const k2 = resolveConversation(
      req((openclawRequest("m", turns, "2026.9", { internalAfter: "bg" }) as ChatRequest).messages),
      {},
    );
    assert.equal(k1.key, k2.key);
    assert.equal(k2.source, "runtime");
  });

  test("a new sessionId (after /new) is a new conversation", () => {
    const a = openclawRequest("m", [{ role: "user", text: "hi" }], "2026.9", { sessionId: "s-1" }) as ChatRequest;
    const b = openclawRequest("m", [{ role: "user", text: "hi" }], "2026.9", { sessionId: "s-2" }) as ChatRequest;
    assert.notEqual(resolveConversation(req(a.messages), {}).key, resolveConversation(req(b.messages), {}).key);
  });

  test("a Runtime line without session fields (e.g. the system prompt's) is not used", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: openclawSystemPrompt() },
      { role: "user", content: "Runtime: agent=main | host=box\nhi" },
    ];
    assert.equal(resolveConversation(req(messages), {}).source, "derived");
  });
});

describe("derived keys", () => {
  /**
   * Turn n of the same conversation as OpenClaw sends it: the system prompt is rebuilt, each new
   * message gets a new timestamp / message id; earlier messages are replayed as they were sent.
   */
  function turnOf(gen: Generation, n: number, conv = "A"): ChatRequest {
    const messages: ChatMessage[] = [
      { role: "system", content: openclawSystemPrompt({ user: `# USER.md\n\nLast seen turn ${n} at 09:${10 + n}` }) },
    ];
    const stamp = (i: number) => `Sat 2026-11-21 09:${String(10 + i).padStart(2, "0")} UTC`;
    for (let i = 0; i <= n; i++) {
      // 2026.9 without a Runtime line (older 2026.9 builds): only the timestamp prefix.
      const text =
        gen === "2026.5"
          ? wrapUserText(`message ${i}`, gen, stamp(i)).replace(
              /"message_id": "\d+"/,
              `"message_id": "${conv}${1000 + i * 7}"`,
            )
          : `[${stamp(i)}] message ${i}`;
      messages.push({ role: "user", content: text });
      if (i < n) messages.push({ role: "assistant", content: `answer ${i}` });
    }
    return req(messages);
  }

  for (const gen of ["2026.5", "2026.9"] as const) {
    test(`${gen}: stable across turns although the system prompt and the new messages' timestamps change`, () => {
      const keys = [0, 1, 2, 5].map((n) => resolveConversation(turnOf(gen, n), {}, { scope: "model-a" }));
      assert.ok(keys.every((k) => k.source === "derived"));
      assert.equal(new Set(keys.map((k) => k.key)).size, 1, JSON.stringify(keys));
      assert.notEqual(
        JSON.stringify(turnOf(gen, 0).messages[0]),
        JSON.stringify(turnOf(gen, 1).messages[0]),
        "the system prompt did change",
      );
    });
  }

  test("two conversations that start with the same words but other message ids get different keys", () => {
    assert.notEqual(
      resolveConversation(turnOf("2026.5", 2, "A"), {}).key,
      resolveConversation(turnOf("2026.5", 2, "B"), {}).key,
    );
  });

  test("the timestamp prefix does not count: OpenClaw 2026.5 stamps only the newest message and replays it bare", () => {
    const stamped = resolveConversation(
      req([{ role: "user", content: "[Sat 2026-11-21 09:13 UTC] plan my trip" }]),
      {},
    ).key;
    const replayed = resolveConversation(
      req([
        { role: "user", content: "plan my trip" },
        { role: "assistant", content: "Sure." },
        { role: "user", content: "[Sat 2026-11-21 09:15 UTC] by train" },
      ]),
      {},
    ).key;
    assert.equal(stamped, replayed);
  });

  test("different first messages → different keys", () => {
    const a = resolveConversation(
      req([{ role: "user", content: "[Sat 2026-11-21 09:13 UTC] plan my trip to Tartu" }]),
      {},
    );
    const b = resolveConversation(
      req([{ role: "user", content: "[Sat 2026-11-21 09:13 UTC] fix my bash script" }]),
      {},
    );
    assert.notEqual(a.key, b.key);
    assert.match(a.key, /^derived:[0-9a-f]{24}$/);
  });

  test("the scope (model) separates conversations with the same start", () => {
    const r = req([{ role: "user", content: "hello" }]);
    assert.notEqual(resolveConversation(r, {}, { scope: "a" }).key, resolveConversation(r, {}, { scope: "b" }).key);
    assert.equal(resolveConversation(r, {}, { scope: "a" }).key, resolveConversation(r, {}, { scope: "a" }).key);
  });

  test("an internal-context-only first user message is skipped; the first typed one counts", () => {
    const internal = {
      role: "user" as const,
      content: "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nstartup context\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>",
    };
    const withInternal = resolveConversation(req([internal, { role: "user", content: "real start" }]), {});
    const without = resolveConversation(req([{ role: "user", content: "real start" }]), {});
    assert.equal(withInternal.key, without.key);
  });

  test("the system prompt does not feed the derived key", () => {
    const a = resolveConversation(
      req([
        { role: "system", content: "prompt A" },
        { role: "user", content: "hello" },
      ]),
      {},
    );
    const b = resolveConversation(
      req([
        { role: "system", content: "prompt B, rebuilt" },
        { role: "user", content: "hello" },
      ]),
      {},
    );
    assert.equal(a.key, b.key);
  });
});

describe("a client's own id with its thread (threadOf)", () => {
  test("one key per thread of one id, stable when OpenClaw replays the first message without its timestamp", () => {
    const turn1 = req([{ role: "user", content: "[Sat 2026-11-21 09:13 UTC] plan my trip" }]);
    const turn2 = req([
      { role: "user", content: "plan my trip" },
      { role: "assistant", content: "Sure." },
      { role: "user", content: "[Sat 2026-11-21 09:15 UTC] by train" },
    ]);
    const other = req([{ role: "user", content: "fix my bash script" }]);
    const a = threadOf("cache:session-1", turn1.messages);
    assert.equal(a.key, threadOf("cache:session-1", turn2.messages).key);
    assert.match(a.key, /^cache:session-1:[0-9a-f]{16}$/);
    assert.equal(a.source, "user");
    // Another thread of the same id, and the same thread of another id, are other conversations.
    assert.notEqual(a.key, threadOf("cache:session-1", other.messages).key);
    assert.notEqual(a.key, threadOf("cache:session-2", turn1.messages).key);
  });

  test("the door's own identity comes after a session header and before `user`", () => {
    const own = threadOf("cache:s", req([{ role: "user", content: "hi" }]).messages);
    const r = chatRequestSchema.parse({ model: "m", user: "u1", messages: [{ role: "user", content: "hi" }] });
    assert.equal(resolveConversation(r, { "x-session-id": "h1" }, { own }).key, "h1");
    assert.equal(resolveConversation(r, {}, { own }).key, own.key);
    assert.equal(resolveConversation(r, {}).key, "user:u1");
  });
});
