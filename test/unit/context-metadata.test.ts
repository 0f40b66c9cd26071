/**
 * Metadata stripping for both OpenClaw generations users run today:
 *  - 2026.5 style: "Conversation info (untrusted metadata):" + "Sender (untrusted metadata):" fenced
 *    JSON blocks and `[message_id: …]` lines;
 *  - 2026.9 style: `[Sat 2026-11-21 09:13 UTC] ` timestamp prefixes, `Runtime: agent=… | session=…`
 *    lines, `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` blocks (often as the LAST user message).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  findCurrentUserTurn,
  internalContext,
  isInternalOnly,
  parseRuntimeLine,
  stripMetadata,
} from "../../src/request/context/metadata.js";
import type { ChatMessage } from "../../src/request/chat-api/schema.js";
import { openclawRequest, wrapUserText } from "../../testkit/openclaw-request.js";

const BEGIN = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>";
const END = "<<<END_OPENCLAW_INTERNAL_CONTEXT>>>";
const internalMsg = (body: string) => `${BEGIN}\n${body}\n${END}`;

/** The 2026.5 wrapper as seen in real transcripts: two fenced blocks, then a `[message_id: …]` line. */
function wrap2026_5(text: string, messageId = "om_x100b531f570748a4eea0b1d53f8d0e7"): string {
  return [
    "Conversation info (untrusted metadata):",
    "```json",
    JSON.stringify(
      { message_id: messageId, sender_id: "ou_8d37", sender: "Alex", timestamp: "Tue 2026-03-24 15:45 UTC" },
      null,
      2,
    ),
    "```",
    "",
    "Sender (untrusted metadata):",
    "```json",
    JSON.stringify({ label: "Alex (ou_8d37)", id: "ou_8d37", name: "Alex" }, null, 2),
    "```",
    "",
    `[message_id: ${messageId}]`,
    text,
  ].join("\n");
}

describe("stripMetadata: OpenClaw 2026.5 wrappers", () => {
  test("both untrusted-metadata blocks are removed (test helper shape)", () => {
    const raw = wrapUserText("what is the weather in Tallinn?", "2026.5");
    assert.ok(raw.includes("untrusted metadata"));
    assert.equal(stripMetadata(raw), "what is the weather in Tallinn?");
  });

  test("blocks followed by a [message_id: …] line are removed", () => {
    assert.equal(stripMetadata(wrap2026_5("remind me at 5")), "remind me at 5");
  });

  test("a multi-line message keeps all its lines, blank lines included", () => {
    const text = "first line\n\nsecond paragraph\n```js\nconsole.log(1)\n```\nlast";
    assert.equal(stripMetadata(wrap2026_5(text)), text);
  });

  test("CRLF line endings are handled", () => {
    assert.equal(stripMetadata(wrap2026_5("hello windows").replace(/\n/g, "\r\n")), "hello windows");
  });

  test("a lone [message_id: …] line at the start is removed", () => {
    assert.equal(stripMetadata("[message_id: 4542]\nhi there"), "hi there");
  });

  test("a message that is only metadata becomes empty", () => {
    assert.equal(stripMetadata(wrap2026_5("")), "");
  });
});

describe("stripMetadata: OpenClaw 2026.9 wrappers", () => {
  const stamps = [
    "Sat 2026-11-21 09:13 UTC",
    "Sat 2026-04-11 08:32 GMT+1",
    "Mon 2026-04-13 18:05 GMT-3",
    "Tue 2026-11-24 07:00 GMT+10",
    "Wed 2026-11-25 12:00 GMT+5:30",
    "Thu 2026-11-26 23:59 CET",
    "Fri 2026-11-27 01:02 EEST",
    "2026-11-21 09:13:05 +02:00",
    "2026-11-21 09:13 -0500",
    "2026-11-21T09:13:05Z",
    "Saturday, 2026-11-21 09:13 UTC",
    "Sat 2026-11-21 09:13",
  ];
  for (const stamp of stamps) {
    test(`timestamp prefix [${stamp}] is removed`, () => {
      assert.equal(stripMetadata(`[${stamp}] good morning`), "good morning");
      assert.equal(stripMetadata(wrapUserText("good morning", "2026.9", stamp)), "good morning");
    });
  }

  test("the Runtime line before the first message is removed", () => {
    const raw = `Runtime: agent=main | session=agent:main:main | sessionId=6f1c2a7e-1111-4222-8333-944455556666 | channel=telegram\n[Sat 2026-11-21 09:13 UTC] hello`;
    assert.equal(stripMetadata(raw), "hello");
  });

  test("the first user message of a real 2026.9 request comes back as typed", () => {
    const body = openclawRequest("m", [{ role: "user", text: "plan my day" }], "2026.9") as { messages: ChatMessage[] };
    const first = body.messages.find((m) => m.role === "user")!;
    assert.match(String(first.content), /^Runtime: agent=main/);
    assert.equal(stripMetadata(String(first.content)), "plan my day");
  });

  test("an internal-context block is removed, the typed text around it kept", () => {
    const raw = `[Sat 2026-11-21 09:13 UTC] check the build\n${internalMsg('Conversation data (data, not instructions):\n"Active exec sessions:\\nnone"')}`;
    assert.equal(stripMetadata(raw), "check the build");
  });

  test("an unterminated internal-context block is removed to the end", () => {
    assert.equal(stripMetadata(`question?\n${BEGIN}\n[Internal task completion event]\nsource: subagent`), "question?");
  });

  test("wrappers of both generations stacked in any order are all removed", () => {
    const raw = `[Sat 2026-11-21 09:13 UTC] ${wrap2026_5("stacked")}`;
    assert.equal(stripMetadata(raw), "stacked");
    const raw2 = `Runtime: agent=main | session=s | sessionId=x\n[message_id: 1]\n[2026-11-21 09:13 +02:00] stacked again`;
    assert.equal(stripMetadata(raw2), "stacked again");
  });
});

describe("stripMetadata: text that only looks similar is kept", () => {
  const kept = [
    "I wrote [Sat 2026-11-21 09:13 UTC] in my notes, what day was that?",
    "the log says\n[2026-11-21 09:13:05 +02:00] server started\nis that ok?",
    "please explain this: Conversation info (untrusted metadata): what does it mean",
    "see the line [message_id: 42] in the output",
    "the marker <<<BEGIN_SOMETHING_ELSE>>> is not ours",
    "what does `Runtime: agent=main` mean in openclaw?",
    "[Sat] is my favourite day",
    "[2026] was a good year",
  ];
  for (const text of kept) {
    test(`kept: ${JSON.stringify(text.slice(0, 50))}`, () => {
      assert.equal(stripMetadata(text), text);
    });
  }

  test("a timestamp-looking text INSIDE the typed message survives the prefix removal", () => {
    assert.equal(
      stripMetadata("[Sat 2026-11-21 09:13 UTC] I met her at [Fri 2026-11-20 18:00 UTC]"),
      "I met her at [Fri 2026-11-20 18:00 UTC]",
    );
  });

  test("a pasted log line that starts with its own timestamp keeps it (OpenClaw adds only one prefix)", {}, () => {
    assert.equal(
      stripMetadata("[Sat 2026-11-21 09:13 UTC] [2026-11-20 10:00:00] ERROR disk full\nwhy?"),
      "[2026-11-20 10:00:00] ERROR disk full\nwhy?",
    );
  });

  test("a typed line starting with 'Runtime: ' that is not OpenClaw's key=value line is kept", {}, () => {
    const text = "Movie: Dune\nRuntime: 155 minutes\nRating: PG-13\nshould I watch it tonight?";
    assert.equal(stripMetadata(`[Sat 2026-11-21 09:13 UTC] ${text}`), text);
  });
});

describe("stripMetadata is idempotent", () => {
  const inputs = [
    wrap2026_5("once"),
    wrapUserText("twice", "2026.5"),
    wrapUserText("thrice", "2026.9", "Sat 2026-04-11 08:32 GMT+1"),
    `Runtime: agent=main | session=s | sessionId=x\n[Sat 2026-11-21 09:13 UTC] hi\n${internalMsg("bg")}`,
    "  plain text with spaces  ",
    "",
    internalMsg("only internal"),
  ];
  for (const raw of inputs) {
    test(`idempotent on ${JSON.stringify(raw.slice(0, 40))}`, () => {
      const once = stripMetadata(raw);
      assert.equal(stripMetadata(once), once);
    });
  }
});

test("only OpenClaw's one timestamp is removed: a second one is the person's text", () => {
  const once = stripMetadata("[Sat 2026-11-21 09:13 UTC] [Fri 2026-11-20 18:00 UTC] nested stamps");
  assert.equal(once, "[Fri 2026-11-20 18:00 UTC] nested stamps");
});

describe("internal context helpers", () => {
  test("isInternalOnly is true only for messages without typed text", () => {
    assert.equal(isInternalOnly(internalMsg("[Internal task completion event]\nsource: subagent")), true);
    assert.equal(isInternalOnly(`[Sat 2026-11-21 09:13 UTC] ${internalMsg("x")}`), true);
    assert.equal(isInternalOnly(`real question\n${internalMsg("x")}`), false);
    assert.equal(isInternalOnly("no markers at all"), false);
    assert.equal(isInternalOnly(""), false);
  });

  test("internalContext returns each block's inner text without markers", () => {
    const raw = `${internalMsg("first block")}\ntyped\n${internalMsg("second block")}`;
    assert.deepEqual(internalContext(raw), ["first block", "second block"]);
    assert.deepEqual(internalContext("nothing"), []);
    assert.deepEqual(internalContext(internalMsg("   ")), [], "empty blocks are dropped");
  });
});

describe("findCurrentUserTurn", () => {
  test("an internal-context-only LAST message: the message the person typed before it is returned", () => {
    const body = openclawRequest(
      "m",
      [
        { role: "user", text: "hello" },
        { role: "assistant", text: "hi!" },
        { role: "user", text: "summarise my inbox" },
      ],
      "2026.9",
      { internalAfter: "[Internal task completion event]\nsource: subagent\nresult: 3 unread" },
    ) as { messages: ChatMessage[] };
    const last = body.messages.at(-1)!;
    assert.equal(last.role, "user");
    assert.ok(String(last.content).startsWith(BEGIN), "the fixture ends with an internal-only user message");

    const turn = findCurrentUserTurn(body.messages);
    assert.equal(turn.index, body.messages.length - 2);
    assert.equal(turn.text, "summarise my inbox");
    assert.deepEqual(turn.internal, ["[Internal task completion event]\nsource: subagent\nresult: 3 unread"]);
  });

  test("several internal-only messages after the typed one: all their blocks are collected, oldest first", () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "sys" },
      { role: "user", content: "[Sat 2026-11-21 09:13 UTC] what changed?" },
      { role: "user", content: internalMsg("block A") },
      { role: "user", content: internalMsg("block B") },
    ];
    const turn = findCurrentUserTurn(messages);
    assert.equal(turn.index, 1);
    assert.equal(turn.text, "what changed?");
    assert.deepEqual(turn.internal, ["block A", "block B"]);
  });

  test("tool results after the typed message do not hide it", () => {
    const messages: ChatMessage[] = [
      { role: "user", content: wrap2026_5("read the file") },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "read", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: "file body" },
    ];
    const turn = findCurrentUserTurn(messages);
    assert.equal(turn.index, 0);
    assert.equal(turn.text, "read the file");
  });

  test("array content parts are read", () => {
    const messages: ChatMessage[] = [
      {
        role: "user",
        content: [
          { type: "text", text: "[Sat 2026-11-21 09:13 UTC] part one" },
          { type: "text", text: "part two" },
        ],
      },
    ];
    assert.equal(findCurrentUserTurn(messages).text, "part one\npart two");
  });

  test("no typed user message at all: index -1, internal blocks still returned", () => {
    const turn = findCurrentUserTurn([
      { role: "system", content: "s" },
      { role: "user", content: internalMsg("only this") },
    ]);
    assert.equal(turn.index, -1);
    assert.equal(turn.text, "");
    assert.deepEqual(turn.internal, ["only this"]);
    assert.equal(findCurrentUserTurn([]).index, -1);
  });

  test("2026.5 conversation: the last wrapped user message is found", () => {
    const body = openclawRequest(
      "m",
      [
        { role: "user", text: "one" },
        { role: "assistant", text: "ok" },
        { role: "user", text: "two" },
      ],
      "2026.5",
    ) as { messages: ChatMessage[] };
    const turn = findCurrentUserTurn(body.messages);
    assert.equal(turn.text, "two");
    assert.equal(turn.index, body.messages.length - 1);
  });
});

describe("parseRuntimeLine", () => {
  test("fields of OpenClaw's Runtime line are parsed", () => {
    const rt = parseRuntimeLine(
      "Runtime: agent=main | session=agent:main:telegram:dm:42 | sessionId=abc-123 | channel=telegram\n[Sat …] hi",
    );
    assert.deepEqual(rt, {
      agent: "main",
      session: "agent:main:telegram:dm:42",
      sessionId: "abc-123",
      channel: "telegram",
    });
  });

  test("a Runtime line in the middle of a text (system prompt) is found", () => {
    assert.equal(parseRuntimeLine("## Runtime\nRuntime: agent=main | host=box")?.agent, "main");
  });

  test("no Runtime line → undefined", () => {
    assert.equal(parseRuntimeLine("hello Runtime: agent=x"), undefined);
    assert.equal(parseRuntimeLine(""), undefined);
  });
});
