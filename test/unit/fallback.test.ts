/** Fallback chains (issue 28): which failures fall back, the limit book, and the turns a session missed. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LimitBook } from "../../src/core/store/limits.js";
import { buildResumeTurn } from "../../src/request/context/resume.js";
import { DEFAULT_CONTEXT } from "../../src/core/config/schema.js";
import { canFallBack } from "../../src/request/pipeline/fallback.js";
import { resolveConfig } from "../../src/core/config/load.js";
import { cleanup, tempDir } from "../helpers/bridge.js";

test("what falls back: limits, logins, a backend down or failing (5xx); never the request's own fault, a timeout or an abort", () => {
  for (const code of ["limit_reached", "auth_failed", "backend_unavailable"] as const)
    assert.equal(canFallBack({ code, message: "x" }), true, code);
  assert.equal(canFallBack({ code: "upstream_error", message: "x", status: 502 }), true);
  assert.equal(canFallBack({ code: "backend_failed", message: "exit 1" }), true);
  assert.equal(canFallBack({ code: "upstream_error", message: "bad", status: 400 }), false);
  assert.equal(
    canFallBack({ code: "upstream_error", message: "x", status: 429 }),
    false,
    "a bare 429 not read as a limit",
  );
  for (const code of ["aborted", "backend_timeout", "backend_rejected", "session_not_found"] as const)
    assert.equal(canFallBack({ code, message: "x", status: 500 }), false, code);
});

test("the limit book: a reset the backend said, or the backoff; skipped until then; kept across a restart; a far-off reset not believed", () => {
  const dir = tempDir("cb-limits-");
  try {
    let now = 1_800_000_000_000;
    const book = new LimitBook(dir, () => now);
    assert.equal(book.exhausted("cc"), undefined);
    const l = book.hit("cc", "You've hit your session limit", now + 3_600_000, 300);
    assert.equal(l.until, now + 3_600_000);
    assert.equal(l.resetAt, now + 3_600_000);
    book.hit("gm", "RESOURCE_EXHAUSTED", undefined, 300);
    assert.equal(book.exhausted("gm")!.until, now + 300_000, "no reset said: the backoff");
    book.hit("cx", "limit", now + 30 * 24 * 3_600_000, 60);
    assert.equal(book.exhausted("cx")!.until, now + 60_000, "a reset a month away is not believed");
    assert.equal(book.exhausted("cx")!.resetAt, undefined);

    const again = new LimitBook(dir, () => now);
    assert.equal(again.exhausted("cc")!.message, "You've hit your session limit", "kept in the data dir");
    now += 301_000;
    assert.equal(again.exhausted("gm"), undefined, "tried again after the backoff");
    assert.ok(again.exhausted("cc"));
    again.clear("cc");
    assert.equal(new LimitBook(dir, () => now).exhausted("cc"), undefined, "an answer clears it, on disk too");
  } finally {
    cleanup(dir);
  }
});

test("back on its own session, a model is given the turns it missed (their text), before the new message", () => {
  const messages = [
    { role: "user" as const, content: "first question Q1" },
    { role: "assistant" as const, content: "primary's answer A1" },
    { role: "user" as const, content: "second question Q2" },
    { role: "assistant" as const, content: "fallback's answer A2" },
    { role: "user" as const, content: "third question Q3" },
    { role: "assistant" as const, content: "fallback's answer A3" },
    { role: "user" as const, content: "now Q4" },
  ];
  const opts = { budget: DEFAULT_CONTEXT, conversationKey: "k", continuing: true, maxSeedChars: 6000 };
  const plain = buildResumeTurn(messages, opts);
  assert.equal(plain.prompt.text, "now Q4", "a session that missed nothing gets only the new message");
  const caught = buildResumeTurn(messages, { ...opts, missedTurns: 2 });
  const t = caught.prompt.text;
  assert.match(t, /^MEANWHILE/);
  for (const s of ["Q2", "A2", "Q3", "A3"]) assert.ok(t.includes(s), s);
  assert.ok(!t.includes("Q1") && !t.includes("A1"), "what it saw itself is not repeated");
  assert.ok(t.endsWith("now Q4"));
  const small = buildResumeTurn(messages, { ...opts, missedTurns: 2, maxSeedChars: 40 });
  assert.ok(small.prompt.text.length < t.length, "within maxSeedChars");
});

test("a fallback chain names configured models, each once, not the model itself", () => {
  const base = (fallback: string[]) => ({
    backends: { a: { type: "openai", baseUrl: "http://127.0.0.1:9/v1" } },
    models: [
      { id: "m", backend: "a", fallback },
      { id: "n", backend: "a" },
    ],
  });
  assert.deepEqual(resolveConfig(base(["n"]), "t").models[0]!.fallback, ["n"]);
  assert.throws(() => resolveConfig(base(["nope"]), "t"), /models\[0\]\.fallback\[0\]: no model with id "nope"/);
  assert.throws(() => resolveConfig(base(["m"]), "t"), /models\[0\]\.fallback\[0\]: "m" is the model itself/);
  assert.throws(() => resolveConfig(base(["n", "n"]), "t"), /models\[0\]\.fallback\[1\]: "n" is in the chain twice/);
});
