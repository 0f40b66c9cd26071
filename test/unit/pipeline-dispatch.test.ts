/**
 * What the router is shown of a turn (src/request/pipeline/dispatch.ts): the person's own words, whether
 * the turn is theirs at all, a few recent turns, and the message's identity for retries.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { TurnInput } from "../../src/backends/contract/backend.js";
import type { ChatMessage } from "../../src/request/chat-api/schema.js";
import { dispatchInput } from "../../src/request/pipeline/dispatch.js";

const turn = {} as TurnInput;
const INTERNAL = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nsubagent finished\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>";
const m = (role: ChatMessage["role"], content: string) => ({ role, content }) as ChatMessage;

test("the person's words, with OpenClaw's wrappers stripped, and recent turns", () => {
  const d = dispatchInput(turn, [
    m("system", "you are…"),
    m("user", "[Sat 2026-11-21 09:13 UTC] write a post about cats"),
    m("assistant", "Which tone?"),
    m("user", "[Sat 2026-11-21 09:14 UTC] casual"),
  ]);
  assert.equal(d.userText, "casual");
  assert.equal(d.notFromPerson, undefined);
  assert.deepEqual(d.recent, [
    { role: "user", text: "write a post about cats" },
    { role: "assistant", text: "Which tone?" },
  ]);
});

test("internal context sent after the person's message keeps the turn theirs", () => {
  const d = dispatchInput(turn, [
    m("user", "hello"),
    m("assistant", "hi"),
    m("user", "run the backup"),
    m("user", INTERNAL),
  ]);
  assert.equal(d.userText, "run the backup");
  assert.equal(d.notFromPerson, undefined);
});

test("tool results, internal-only turns and heartbeat polls are not the person's words", () => {
  assert.equal(
    dispatchInput(turn, [
      m("user", "weather?"),
      { role: "assistant", content: null, tool_calls: [] } as unknown as ChatMessage,
      m("tool", "sunny"),
    ]).notFromPerson,
    "tool_result",
  );
  assert.equal(
    dispatchInput(turn, [m("user", "hello"), m("assistant", "hi"), m("user", INTERNAL)]).notFromPerson,
    "internal",
  );
  assert.equal(
    dispatchInput(turn, [
      m(
        "user",
        "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. If nothing needs attention, reply HEARTBEAT_OK.",
      ),
    ]).notFromPerson,
    "heartbeat",
  );
});

test("a retried request has the same message key; the same words sent again later do not", () => {
  const first = [m("user", "[Sat 2026-11-21 09:13 UTC] yes")];
  assert.equal(dispatchInput(turn, first).messageKey, dispatchInput(turn, [...first]).messageKey);
  const later = [
    m("user", "[Sat 2026-11-21 09:13 UTC] yes"),
    m("assistant", "done"),
    m("user", "[Sat 2026-11-21 09:20 UTC] yes"),
  ];
  assert.notEqual(dispatchInput(turn, first).messageKey, dispatchInput(turn, later).messageKey);
  const sameStampNewPlace = [m("user", "yes"), m("assistant", "done"), m("user", "yes")];
  assert.notEqual(
    dispatchInput(turn, [m("user", "yes")]).messageKey,
    dispatchInput(turn, sameStampNewPlace).messageKey,
  );
});
