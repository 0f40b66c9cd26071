/**
 * The builder's Supervisor (src/workflows/builder/supervisor.ts): the intent prompt, the tolerant reader of
 * the model's reply, and the whole-word keyword fallback (with the original's substring bugs as
 * regressions).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  DEFAULT_MODEL_CONFIDENCE,
  keywordIntent,
  keywordMatches,
  parseSupervisorReply,
  supervisorPrompt,
} from "../../src/workflows/builder/supervisor.js";
import type { Intent } from "../../src/workflows/builder/types.js";

// ---------------------------------------------------------------------------------------------
// keyword fallback

const CASES: Array<[string, Intent]> = [
  // the original's substring bugs
  ["show me the canvas", "QUERY"], // "show" ⊃ "how" made it QUERY by luck; now "show" itself
  ["what is my address", "QUERY"], // "address" ⊃ "add" made it BUILD-ish
  ["any news?", "QUERY"], // "news" ⊃ "new"
  ["configure the tone default", "CONFIGURE"], // "configure" counted for EDIT too (tie → EDIT)
  ["set the model of the writer to fast", "CONFIGURE"], // "set" was no keyword
  ["deploy it", "CONFIGURE"], // "deploy" was a BUILD word
  ["undeploy content-pipeline", "CONFIGURE"],
  ["disable the newsletter system", "CONFIGURE"],
  ["enable it again", "CONFIGURE"],
  ["update the settings of content-pipeline", "CONFIGURE"], // tie EDIT/CONFIGURE → CONFIGURE
  ["change the tone default to casual", "CONFIGURE"],
  // BUILD
  ["make a system that researches a topic with one agent and writes a post with another", "BUILD"],
  ["Create a new workflow that generates a weekly report", "BUILD"],
  ["build me a pipeline for my blog", "BUILD"],
  ["set up a system that emails me the weather", "BUILD"], // "set up" is building, not "set"
  ["make a system to update my blog every morning", "BUILD"], // tie BUILD/EDIT: the lead verb wins
  ["make a system that uses the fast model", "BUILD"], // tie BUILD/CONFIGURE: the lead verb wins
  ["add a research agent", "BUILD"],
  ["design an agent that explains code", "BUILD"],
  // EDIT
  ["delete the writer node", "EDIT"],
  ["rename the researcher to analyst", "EDIT"],
  ["connect the researcher to the writer", "EDIT"],
  ["remove the summary step", "EDIT"],
  ["add a reviewer and connect it to the writer", "EDIT"], // only "add" for BUILD: a change verb wins the tie
  ["can you delete the writer node?", "EDIT"], // a trailing "?" does not outrank the verb
  ["delete the writer and make a new one", "BUILD"], // 2 BUILD words beat 1 EDIT word
  ["fix the broken prompt in the writer", "EDIT"],
  // QUERY
  ["what does content-pipeline do", "QUERY"],
  ["why did the last run fail?", "QUERY"],
  ["list my systems", "QUERY"],
  ["tell me about the canvas", "QUERY"],
  ["how do I export a system?", "QUERY"], // 2 QUERY beats 1 EXPORT
  ["which model does the writer use?", "QUERY"],
  ["what's new?", "QUERY"],
  // EXPORT
  ["export content-pipeline", "EXPORT"],
  ["download the bundle", "EXPORT"],
  ["save as yaml please", "EXPORT"],
  ["get json of the blog system", "EXPORT"],
  ["save it", "UNKNOWN"], // "save" alone is no EXPORT word
  ["connect the writer to the output", "EDIT"], // "output" is a node type, not EXPORT
  // nothing
  ["asdf qwerty zxcv", "UNKNOWN"],
  ["hello there", "UNKNOWN"],
  ["", "UNKNOWN"],
];

test("keywordIntent: a table of messages", () => {
  assert.ok(CASES.length >= 30);
  const wrong: string[] = [];
  for (const [message, expected] of CASES) {
    const got = keywordIntent(message);
    assert.equal(got.source, "keywords");
    if (got.intent !== expected)
      wrong.push(
        `${JSON.stringify(message)}: expected ${expected}, got ${got.intent} (${JSON.stringify(keywordMatches(message))})`,
      );
  }
  assert.deepEqual(wrong, []);
});

test("keywordIntent: whole words only, case-insensitive", () => {
  assert.deepEqual(
    keywordMatches("Show the ADDRESS of the news feed").map((m) => m.keyword),
    ["show"],
  );
  assert.deepEqual(
    keywordMatches("Settings and setting")
      .map((m) => m.keyword)
      .sort(),
    ["setting", "settings"],
  );
  assert.deepEqual(
    keywordMatches("set up the thing").map((m) => m.keyword),
    ["set up"],
  );
  assert.deepEqual(
    keywordMatches("configure it").map((m) => m.intent),
    ["CONFIGURE"],
  );
  assert.equal(keywordIntent("WHAT IS THIS").intent, "QUERY");
});

test("keywordIntent: confidence grows with distinct matches, capped at 0.9; nothing → UNKNOWN 0.3", () => {
  assert.equal(keywordIntent("export it").confidence, 0.7);
  assert.equal(keywordIntent("export and download the bundle").confidence, 0.9);
  assert.equal(keywordIntent("export, download, bundle, save as, get json").confidence, 0.9);
  assert.equal(keywordIntent("create a new build").confidence, 0.9);
  assert.equal(keywordIntent("export export export").confidence, 0.7); // distinct, not repeated
  assert.deepEqual(keywordIntent("lorem ipsum"), { intent: "UNKNOWN", confidence: 0.3, source: "keywords" });
});

// ---------------------------------------------------------------------------------------------
// the model's reply

test("parseSupervisorReply: plain, fenced, with prose and <think>", () => {
  assert.deepEqual(parseSupervisorReply('{"intent":"BUILD","confidence":0.92}'), {
    intent: "BUILD",
    confidence: 0.92,
    source: "model",
  });
  assert.deepEqual(parseSupervisorReply('```json\n{"intent": "edit", "confidence": 0.7}\n```'), {
    intent: "EDIT",
    confidence: 0.7,
    source: "model",
  });
  assert.deepEqual(
    parseSupervisorReply('Sure! Here it is: {"intent": "Query", "confidence": "85%"} hope that helps {'),
    {
      intent: "QUERY",
      confidence: 0.85,
      source: "model",
    },
  );
  assert.deepEqual(parseSupervisorReply('<think>{"intent":"BUILD"}</think>{"intent":"EXPORT","confidence":1}'), {
    intent: "EXPORT",
    confidence: 1,
    source: "model",
  });
  // an object without intent first, then the one with it; braces in strings do not confuse it
  assert.deepEqual(parseSupervisorReply('{"note":"a } brace"} {"intent":"CONFIGURE","confidence":0.6}'), {
    intent: "CONFIGURE",
    confidence: 0.6,
    source: "model",
  });
  // the original's field name
  assert.equal((parseSupervisorReply('{"type":"unknown","confidence":0.5}') as { intent: string }).intent, "UNKNOWN");
});

test("parseSupervisorReply: confidence clamped; missing or unreadable → 0.8", () => {
  assert.equal((parseSupervisorReply('{"intent":"BUILD","confidence":7}') as { confidence: number }).confidence, 0.07); // a percentage
  assert.equal((parseSupervisorReply('{"intent":"BUILD","confidence":250}') as { confidence: number }).confidence, 1);
  assert.equal((parseSupervisorReply('{"intent":"BUILD","confidence":-3}') as { confidence: number }).confidence, 0);
  assert.equal(
    (parseSupervisorReply('{"intent":"BUILD"}') as { confidence: number }).confidence,
    DEFAULT_MODEL_CONFIDENCE,
  );
  assert.equal(
    (parseSupervisorReply('{"intent":"BUILD","confidence":"high"}') as { confidence: number }).confidence,
    0.8,
  );
});

test("parseSupervisorReply: errors for no JSON, no intent, unknown intent", () => {
  assert.match(
    (parseSupervisorReply("I think they want to build something") as { error: string }).error,
    /no JSON object/,
  );
  assert.match((parseSupervisorReply('{"confidence":0.9}') as { error: string }).error, /no intent/);
  assert.match(
    (parseSupervisorReply('{"intent":"DESTROY","confidence":0.9}') as { error: string }).error,
    /unknown intent "DESTROY"/,
  );
  assert.match((parseSupervisorReply('{"intent":42}') as { error: string }).error, /unknown intent 42/);
  assert.ok("error" in parseSupervisorReply(""));
  assert.ok("error" in parseSupervisorReply('{"intent": "BUILD", '));
});

// ---------------------------------------------------------------------------------------------
// the prompt

test("supervisorPrompt: defines every intent, lists the canvases, carries recent turns and the message", () => {
  const p = supervisorPrompt({
    text: "add a reviewer to content-pipeline",
    recent: [
      { role: "user", text: "hi" },
      { role: "assistant", text: "Hello! What shall we build?" },
    ],
    canvases: [
      { system: "content-pipeline", name: "Content pipeline", status: "deployed" },
      { system: "daily-digest", name: "daily-digest", status: "draft" },
    ],
  });
  for (const intent of ["BUILD", "EDIT", "QUERY", "EXPORT", "CONFIGURE", "UNKNOWN"])
    assert.match(p.system, new RegExp(`- ${intent}:`));
  assert.match(p.system, /- content-pipeline "Content pipeline" \(deployed\)/);
  assert.match(p.system, /- daily-digest \(draft\)/);
  assert.match(p.system, /deploy or undeploy/);
  assert.match(p.system, /"intent":"BUILD\|EDIT\|QUERY\|EXPORT\|CONFIGURE\|UNKNOWN"/);
  assert.match(p.user, /assistant: Hello! What shall we build\?/);
  assert.match(p.user, /Message:\nadd a reviewer to content-pipeline$/);

  const none = supervisorPrompt({ text: "x", canvases: [] });
  assert.match(none.system, /Existing canvases:\n\(none\)/);
  assert.doesNotMatch(none.user, /Recent turns/);

  const long = supervisorPrompt({ text: "a".repeat(10_000), canvases: [] });
  assert.ok(long.user.length < 5_000);
  assert.match(long.user, /characters left out/);
});
