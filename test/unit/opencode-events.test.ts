/**
 * `opencode serve` events → bridge events for one turn (src/backends/opencode/events.ts), fed with the
 * shapes OpenCode 1.18.33 sends on `/global/event` (payloads as recorded from the real server).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { BackendEvent } from "../../src/backends/contract/backend.js";
import { ascendingMessageId, OpencodeTurnEvents, turnError, type OcEvent } from "../../src/backends/opencode/events.js";

const SES = "ses_test";
const USER = "msg_2103a63db001Qdzyte6QPqlntL";
const ASSIST = "msg_2103a69d1001fXCKbD6PUUOeZe";

const userMsg = (id = USER): OcEvent => ({
  type: "message.updated",
  properties: { sessionID: SES, info: { id, role: "user", sessionID: SES } },
});
const assistantMsg = (id = ASSIST, parentID = USER): OcEvent => ({
  type: "message.updated",
  properties: { sessionID: SES, info: { id, parentID, role: "assistant", sessionID: SES } },
});
const part = (p: Record<string, unknown>, messageID = ASSIST): OcEvent => ({
  type: "message.part.updated",
  properties: { sessionID: SES, part: { sessionID: SES, messageID, ...p }, time: 1 },
});
const delta = (partID: string, d: string, messageID = ASSIST): OcEvent => ({
  type: "message.part.delta",
  properties: { sessionID: SES, messageID, partID, field: "text", delta: d },
});
const idle: OcEvent = { type: "session.status", properties: { sessionID: SES, status: { type: "idle" } } };

function feed(t: OpencodeTurnEvents, evs: OcEvent[]): BackendEvent[] {
  return evs.flatMap((e) => t.map(e));
}

describe("opencode serve events → bridge events", () => {
  test("text deltas stream one by one; the finished part adds nothing; usage and done at idle", () => {
    const t = new OpencodeTurnEvents(USER);
    const out = feed(t, [
      userMsg(),
      part({ id: "prt_u", type: "text", text: "say hello" }, USER), // the prompt itself: never answer text
      assistantMsg(),
      part({ id: "prt_s", type: "step-start" }),
      part({ id: "prt_t", type: "text", text: "", time: { start: 1 } }),
      delta("prt_t", "Hello "),
      delta("prt_t", "there "),
      delta("prt_t", "friend."),
      part({ id: "prt_t", type: "text", text: "Hello there friend.", time: { start: 1, end: 2 } }),
      part({
        id: "prt_f",
        type: "step-finish",
        reason: "stop",
        tokens: { total: 14, input: 11, output: 3, reasoning: 0, cache: { write: 0, read: 2 } },
      }),
    ]);
    assert.deepEqual(out, [
      { type: "text", text: "Hello " },
      { type: "text", text: "there " },
      { type: "text", text: "friend." },
    ]);
    assert.equal(t.idle, false);
    feed(t, [idle]);
    assert.equal(t.idle, true);
    assert.deepEqual(t.finishEvents(), [
      {
        type: "usage",
        usage: { promptTokens: 13, completionTokens: 3, totalTokens: 16, reasoningTokens: 0, cachedTokens: 2 },
      },
      { type: "done", finishReason: "stop" },
    ]);
  });

  test("events of an earlier turn of the session (another user message) are not this turn's", () => {
    const t = new OpencodeTurnEvents(USER);
    const old = "msg_0000000000010000000000000";
    const oldAssistant = "msg_0000000000020000000000000";
    const out = feed(t, [
      assistantMsg(oldAssistant, old),
      part({ id: "prt_old", type: "text", text: "" }, oldAssistant),
      delta("prt_old", "stale", oldAssistant),
      {
        type: "session.error",
        properties: { sessionID: SES, error: { name: "MessageAbortedError", data: { message: "Aborted" } } },
      },
      idle,
      { type: "session.idle", properties: { sessionID: SES } },
    ]);
    assert.deepEqual(out, []);
    assert.equal(t.idle, false, "an idle before this turn's prompt was taken does not end it");
    assert.equal(t.error, undefined);
  });

  test("reasoning deltas, tool activity once per state, separated text of two steps, length finish", () => {
    const t = new OpencodeTurnEvents(USER);
    const second = "msg_2103a69d2001fXCKbD6PUUOeZf";
    const out = feed(t, [
      userMsg(),
      assistantMsg(),
      part({ id: "prt_r", type: "reasoning", text: "", time: { start: 1 } }),
      delta("prt_r", "thinking..."),
      part({ id: "prt_a", type: "text", text: "" }),
      delta("prt_a", "Let me look."),
      part({ id: "prt_tool", type: "tool", tool: "read", callID: "c1", state: { status: "pending" } }),
      part({
        id: "prt_tool",
        type: "tool",
        tool: "read",
        callID: "c1",
        state: { status: "running", title: "NOTES.md" },
      }),
      part({
        id: "prt_tool",
        type: "tool",
        tool: "read",
        callID: "c1",
        state: { status: "running", title: "NOTES.md" },
      }),
      part({
        id: "prt_tool",
        type: "tool",
        tool: "read",
        callID: "c1",
        state: { status: "completed", title: "NOTES.md" },
      }),
      part({ id: "prt_f1", type: "step-finish", reason: "tool-calls", tokens: { input: 10, output: 5 } }),
      assistantMsg(second),
      part({ id: "prt_b", type: "text", text: "" }, second),
      delta("prt_b", "Done", second),
      // A part the deltas did not carry whole: the rest comes from the finished part.
      part({ id: "prt_b", type: "text", text: "Done reading.", time: { start: 1, end: 2 } }, second),
      part(
        { id: "prt_f2", type: "step-finish", reason: "length", tokens: { input: 20, output: 7, reasoning: 3 } },
        second,
      ),
      idle,
    ]);
    assert.deepEqual(out, [
      { type: "reasoning", text: "thinking..." },
      { type: "text", text: "Let me look." },
      { type: "tool_activity", name: "read", status: "started", detail: "NOTES.md" },
      { type: "tool_activity", name: "read", status: "completed", detail: "NOTES.md" },
      { type: "text", text: "\n\nDone" },
      { type: "text", text: " reading." },
    ]);
    const fin = t.finishEvents();
    assert.deepEqual(fin.at(-1), { type: "done", finishReason: "length" });
    assert.deepEqual(fin[0], {
      type: "usage",
      usage: { promptTokens: 30, completionTokens: 15, totalTokens: 45, reasoningTokens: 3, cachedTokens: 0 },
    });
  });

  test("a session.error becomes the turn's upstream_error, as the cold path words it", () => {
    const t = new OpencodeTurnEvents(USER);
    feed(t, [
      userMsg(),
      assistantMsg(),
      {
        type: "session.error",
        properties: {
          sessionID: SES,
          error: { name: "APIError", data: { message: "fake refused", statusCode: 400, isRetryable: false } },
        },
      },
      {
        type: "session.error",
        properties: { sessionID: SES, error: { name: "UnknownError", data: { message: "a second one" } } },
      },
      idle,
    ]);
    assert.deepEqual(t.finishEvents(), [
      {
        type: "error",
        error: {
          code: "upstream_error",
          message: "opencode: fake refused (model API status 400)",
          status: 502,
          retryable: false,
        },
      },
    ]);
    assert.deepEqual(
      turnError({ name: "APIError", data: { message: "slow down", statusCode: 429, isRetryable: true } }),
      {
        code: "upstream_error",
        message: "opencode: slow down (model API status 429)",
        status: 429,
        retryable: true,
      },
    );
    assert.equal(turnError({ name: "MessageAbortedError", data: { message: "Aborted" } }).code, "aborted");
    assert.equal(turnError(undefined).message, "opencode: unknown error");
  });

  test("message ids are OpenCode's ascending format and sort by time", () => {
    const a = ascendingMessageId(1795568591835);
    const b = ascendingMessageId(1795568591835);
    const c = ascendingMessageId(1795568591900);
    for (const id of [a, b, c]) assert.match(id, /^msg_[0-9a-f]{12}[0-9A-Za-z]{14}$/);
    assert.equal(a.slice(4, 16), "2103a63db001", "the same time prefix the server gives (observed: msg_2103a63db001…)");
    assert.ok(a.slice(0, 16) < b.slice(0, 16) && b.slice(0, 16) < c.slice(0, 16));
  });
});
