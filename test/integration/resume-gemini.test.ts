/**
 * Resume mode end to end THROUGH THE BRIDGE with the REAL `gemini` CLI (node_modules/.bin) against a
 * fake Gemini API: only-new-messages turns with the bootstrap (GEMINI_SYSTEM_MD) on every turn,
 * conversation identity, self-healing after a lost session file, abort + retry without two CLIs,
 * strict per-conversation ordering. Only the model API is faked.
 *
 * Gemini CLI sends no session id to the model API: the session is identified through the store
 * (checked with the real `clawbridge sessions` command) and the session files under the private HOME.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, statSync, unlinkSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { defaultSessionStorePath, openSessionStore } from "../../src/store/index.js";
import type { SessionStore } from "../../src/store/types.js";
import { GEMINI_BIN, geminiEnv } from "../fakes/cli-env.js";
import { geminiPartsText, startFakeGemini, type FakeGemini, type GeminiReply, type RecordedGeminiRequest } from "../fakes/gemini-api.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { alive, chat, cliGroups, Conversation, lastLine, sessionsCli, showSession, sleep } from "../helpers/resume.js";
import { openclawRequest } from "../helpers/openclaw-request.js";

const MODEL = "gemini";

// ---------------------------------------------------------------------------------------------
// helpers

/** The person's words in a content: Gemini CLI's own `<session_context>` part left out. */
function promptText(parts: unknown): string {
  if (!Array.isArray(parts)) return "";
  return parts
    .filter((p: any) => typeof p?.text === "string" && !p.thought && !p.text.trimStart().startsWith("<session_context>"))
    .map((p: any) => p.text)
    .join("")
    .trim();
}

/** user/model contents of a model call as [role, text] (function calls/responses and empty ones skipped). */
function dialogue(req: RecordedGeminiRequest): [string, string][] {
  const contents: any[] = req.body?.contents ?? [];
  return contents
    .map((c): [string, string] => [c.role, c.role === "user" ? promptText(c.parts) : geminiPartsText(c.parts)])
    .filter(([, t]) => t !== "");
}

/** Answer naming the person's latest line (of the last text part: gemini may merge two user turns into one content). */
function replyScript(req: RecordedGeminiRequest): GeminiReply {
  const contents: any[] = req.body?.contents ?? [];
  const lastUser = [...contents].reverse().find((c) => c.role === "user" && promptText(c.parts));
  const parts: any[] = (lastUser?.parts ?? []).filter((p: any) => typeof p?.text === "string" && !p.thought && p.text.trim());
  return { kind: "text", chunks: ["Reply to: ", lastLine(promptText(parts.slice(-1)))] };
}

/** Texts of every user text part (session context left out), in order. */
function userParts(req: RecordedGeminiRequest): string[] {
  const contents: any[] = req.body?.contents ?? [];
  return contents.filter((c) => c.role === "user").flatMap((c) => (Array.isArray(c.parts) ? c.parts : []).map((p: any) => promptText([p])).filter(Boolean));
}

function lastPrompt(req: RecordedGeminiRequest): string {
  const contents: any[] = req.body?.contents ?? [];
  return promptText(contents.at(-1)?.parts);
}

/** Gemini CLI session files: `<home>/.gemini/tmp/<project>/chats/session-<time>-<first 8 of id>.jsonl`. */
function sessionFiles(home: string, id: string): string[] {
  const root = path.join(home, ".gemini", "tmp");
  const out: string[] = [];
  if (!existsSync(root)) return out;
  for (const project of readdirSync(root)) {
    const chats = path.join(root, project, "chats");
    if (!existsSync(chats) || !statSync(chats).isDirectory()) continue;
    for (const f of readdirSync(chats)) if (f.startsWith("session-") && f.endsWith(`-${id.slice(0, 8)}.jsonl`)) out.push(path.join(chats, f));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

describe("resume mode through the bridge: Gemini CLI", () => {
  let fake: FakeGemini;
  let bridge: TestBridge;
  let home: string;
  let store: SessionStore;
  const bindingOf = async (key: string) => {
    const b = await store.get(key);
    assert.ok(b, `a binding for ${key}`);
    return b;
  };

  before(async () => {
    fake = await startFakeGemini(replyScript);
    home = tempDir("cb-rg-home-");
    bridge = await startTestBridge({
      server: { heartbeatSeconds: 0.5, maxConcurrent: 4 },
      backends: { gc: { type: "gemini-cli", command: GEMINI_BIN, env: geminiEnv({ baseUrl: fake.baseUrl, home }), timeoutSeconds: 90, killGraceSeconds: 1 } },
      models: [{ id: MODEL, backend: "gc", model: "default", session: { mode: "resume" } }],
    });
    store = await openSessionStore({ kind: "sqlite", path: defaultSessionStorePath(bridge.dataDir) });
  });

  after(async () => {
    await store?.close();
    await bridge?.close(0);
    await fake?.close();
    const left = await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 10_000);
    cleanup(home);
    if (bridge) cleanup(bridge.dataDir);
    assert.ok(left, "no gemini process left behind");
  });

  test("multi-turn: turn 2 resumes the session with only the new message; the bootstrap is on both turns; sessions list/show", async () => {
    fake.setScript(replyScript);
    const sid = randomUUID();
    const key = `openclaw:agent:main:main:${sid}`;
    const conv = new Conversation(MODEL, "2026.9", { sessionId: sid });
    const before = fake.turnCalls().length;

    const r1 = await chat(bridge.baseURL, conv.ask("what is the capital of Estonia"));
    assert.equal(r1.status, 200);
    assert.equal(r1.error, undefined, JSON.stringify(r1.error));
    assert.equal(r1.key, key);
    assert.equal(r1.source, "runtime");
    assert.equal(r1.text, "Reply to: what is the capital of Estonia");
    conv.answered(r1.text);
    const first = await bindingOf(key);

    const body2 = conv.ask("and of Latvia?");
    const requestBytes = Buffer.byteLength(JSON.stringify(body2));
    const r2 = await chat(bridge.baseURL, body2);
    assert.equal(r2.status, 200);
    assert.equal(r2.key, key);
    assert.equal(r2.text, "Reply to: and of Latvia?");

    const calls = fake.turnCalls().slice(before);
    assert.equal(calls.length, 2, "one model turn per bridge turn");
    for (const c of calls) {
      assert.match(c.systemText, /Pebble/, "bootstrap (systemInstruction) carries the identity from IDENTITY.md");
      assert.ok(c.systemText.includes(`Conversation: ${key}`), "bootstrap names the conversation key");
      assert.ok(c.systemText.length <= 1600, `the bootstrap is compact (${c.systemText.length} chars)`);
    }
    assert.deepEqual(dialogue(calls[0]!), [["user", "what is the capital of Estonia"]]);
    assert.deepEqual(
      dialogue(calls[1]!),
      [
        ["user", "what is the capital of Estonia"],
        ["model", "Reply to: what is the capital of Estonia"],
        ["user", "and of Latvia?"],
      ],
      "turn 2 is the resumed session plus exactly one new user message",
    );
    const newParts = (calls[1]!.body.contents as any[]).at(-1).parts;
    const newBytes = Buffer.byteLength(JSON.stringify(newParts));
    assert.ok(newBytes < 100 && requestBytes > 40_000, `turn 2 forwarded ${newBytes} bytes of a ${requestBytes}-byte request`);
    assert.ok(!JSON.stringify(calls[1]!.body.contents).includes("Runtime:"), "no Runtime line reaches the model");

    const list = await sessionsCli(bridge.dataDir, "list");
    const line = list.split("\n").find((l) => l.includes(key));
    assert.ok(line, `sessions list shows the conversation:\n${list}`);
    assert.ok(line.includes(`gc:${first.backendSessionId}`), line);
    assert.match(line, /turns=2\b/);
    const shown = await showSession(bridge.dataDir, key);
    assert.equal(shown.binding.turns, 2);
    assert.equal(shown.binding.backendSessionId, first.backendSessionId, "the same gemini session on both turns");
    // Gemini 0.61 may add a second, stub file for the same id when a resume happens in a later minute.
    assert.ok(sessionFiles(home, first.backendSessionId).length >= 1, "gemini's session file exists for the bound id");
  });

  test("conversation identity: derived fallback (2026.5), explicit header, OpenAI user; parallel conversations stay apart", async () => {
    fake.setScript(replyScript);
    const old = new Conversation(MODEL, "2026.5");
    const before5 = fake.turnCalls().length;
    const o1 = await chat(bridge.baseURL, old.ask("derived one: hello from an older OpenClaw"));
    assert.equal(o1.source, "derived");
    assert.match(o1.key ?? "", /^derived:[0-9a-f]{24}$/);
    old.answered(o1.text);
    const o2 = await chat(bridge.baseURL, old.ask("derived two"));
    assert.equal(o2.key, o1.key);
    const oc = fake.turnCalls().slice(before5);
    assert.deepEqual(dialogue(oc.at(-1)!).map(([r]) => r), ["user", "model", "user"], "the derived conversation resumed");
    assert.equal(lastPrompt(oc.at(-1)!), "derived two");
    assert.equal((await bindingOf(o1.key!)).turns, 2);

    const h = await chat(bridge.baseURL, new Conversation(MODEL, "2026.9", { sessionId: randomUUID() }).ask("header wins"), {
      headers: { "x-openclaw-session-key": "agent:main:discord:dm:7" },
    });
    assert.equal(h.source, "header");
    assert.equal(h.key, "agent:main:discord:dm:7");
    const u = await chat(bridge.baseURL, { ...new Conversation(MODEL, "2026.9", { sessionId: randomUUID() }).ask("user field"), user: "sam-7" });
    assert.equal(u.source, "user");
    assert.equal(u.key, "user:sam-7");

    const a = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
    const b = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
    const keyA = `openclaw:agent:main:main:${a.extra.sessionId}`;
    const keyB = `openclaw:agent:main:main:${b.extra.sessionId}`;
    const beforeAB = fake.turnCalls().length;
    const [a1, b1] = await Promise.all([chat(bridge.baseURL, a.ask("alpha one")), chat(bridge.baseURL, b.ask("bravo one"))]);
    assert.equal(a1.text, "Reply to: alpha one");
    assert.equal(b1.text, "Reply to: bravo one");
    a.answered(a1.text);
    b.answered(b1.text);
    const [a2, b2] = await Promise.all([chat(bridge.baseURL, a.ask("alpha two")), chat(bridge.baseURL, b.ask("bravo two"))]);
    assert.equal(a2.text, "Reply to: alpha two");
    assert.equal(b2.text, "Reply to: bravo two");
    const ab = fake.turnCalls().slice(beforeAB);
    assert.equal(ab.length, 4);
    const of = (k: string) => ab.filter((c) => c.systemText.includes(`Conversation: ${k}`));
    for (const [k, word, other] of [
      [keyA, "alpha", "bravo"],
      [keyB, "bravo", "alpha"],
    ] as const) {
      assert.equal(of(k).length, 2);
      for (const c of of(k)) {
        const texts = dialogue(c).map(([, t]) => t);
        assert.ok(texts.every((t) => t.includes(word)), `${k}: only its own messages: ${JSON.stringify(texts)}`);
        assert.ok(!JSON.stringify(c.body.contents).includes(other), `${k}: nothing of the other conversation`);
      }
      assert.equal(dialogue(of(k)[1]!).length, 3, "second turn resumed with one new message");
    }
    const [bindA, bindB] = await Promise.all([bindingOf(keyA), bindingOf(keyB)]);
    assert.notEqual(bindA.backendSessionId, bindB.backendSessionId, "two different backend sessions");
    assert.equal(bindA.turns, 2);
    assert.equal(bindB.turns, 2);
  });

  test("self-healing: a deleted session file → a NEW session seeded from the conversation; the dead id is never reused", async () => {
    fake.setScript(replyScript);
    const sid = randomUUID();
    const key = `openclaw:agent:main:main:${sid}`;
    const conv = new Conversation(MODEL, "2026.9", { sessionId: sid });
    for (const q of ["my cat is called Miso", "she is three years old"]) {
      const r = await chat(bridge.baseURL, conv.ask(q));
      assert.equal(r.status, 200);
      conv.answered(r.text);
    }
    const bound = await bindingOf(key);
    assert.equal(bound.turns, 2);
    const dead = bound.backendSessionId;
    // Every file of the session (gemini writes a stub file per minute a resume started in).
    const files = sessionFiles(home, dead);
    assert.ok(files.length >= 1, "gemini's session file is where docs/CLI_FORMATS.md says");
    for (const f of files) unlinkSync(f);

    const before = fake.turnCalls().length;
    const r3 = await chat(bridge.baseURL, conv.ask("what is my cat's name?"));
    assert.equal(r3.status, 200);
    assert.equal(r3.error, undefined, `no error: ${JSON.stringify(r3.error)}`);
    assert.equal(r3.text, "Reply to: what is my cat's name?");
    conv.answered(r3.text);
    const healed = fake.turnCalls().slice(before);
    assert.equal(healed.length, 1, "the failed resume made no model call; the new session made one");
    const d = dialogue(healed[0]!);
    assert.equal(d.length, 1, "a new session: one user content");
    const text = d[0]![1];
    assert.match(text, /EARLIER IN THIS CONVERSATION/);
    for (const t of ["my cat is called Miso", "she is three years old", "Reply to: my cat is called Miso"]) assert.ok(text.includes(t), `seed holds "${t}"`);
    assert.ok(text.endsWith("what is my cat's name?"), "the new message comes last");
    assert.ok(healed[0]!.systemText.includes(`Conversation: ${key}`), "bootstrap on the healed turn");

    const shown = await showSession(bridge.dataDir, key);
    const fresh: string = shown.binding.backendSessionId;
    assert.notEqual(fresh, dead, "the store has a new session id");
    assert.equal(shown.binding.turns, 1);
    const ev = shown.events.find((e) => e.kind === "healed");
    assert.ok(ev, `a healed event: ${JSON.stringify(shown.events)}`);
    assert.match(ev.reason ?? "", /No previous sessions found|Invalid session identifier|Error resuming session/);
    assert.ok(sessionFiles(home, fresh).length >= 1, "the new session has its file");

    const r4 = await chat(bridge.baseURL, conv.ask("and her age?"));
    assert.equal(r4.text, "Reply to: and her age?");
    const last = fake.turnCalls().at(-1)!;
    assert.deepEqual(dialogue(last).map(([r]) => r), ["user", "model", "user"], "turn 4 resumed the healed session");
    assert.match(dialogue(last)[0]![1], /EARLIER IN THIS CONVERSATION/);
    assert.equal(lastPrompt(last), "and her age?");
    const after4 = await bindingOf(key);
    assert.equal(after4.backendSessionId, fresh, "the dead id is not used again");
    assert.equal(after4.turns, 2);
    assert.equal(sessionFiles(home, dead).length, 0, "no session was recreated under the dead id");
  });

  /** The model call of the retried turn in the abort test (for the todo check below). */
  let retriedCall: RecordedGeminiRequest | undefined;

  test("abort then retry: never two CLI processes for the conversation; the retry answers; the abandoned one is gone", async () => {
    const conv = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
    fake.setScript(replyScript);
    const r1 = await chat(bridge.baseURL, conv.ask("first, quick"));
    conv.answered(r1.text);
    assert.equal(cliGroups(home).size, 0, "nothing running between turns");

    let hung = 0;
    fake.setScript((req) => {
      // Only the model turn hangs (the routing side call of model "auto" carries the same text).
      if (req.action === "streamGenerateContent" && lastPrompt(req) === "second, slow" && hung === 0) {
        hung++;
        return { kind: "hang" };
      }
      return replyScript(req);
    });
    const before = fake.turnCalls().length;
    const ac = new AbortController();
    const res = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(conv.ask("second, slow")),
      signal: ac.signal,
    });
    let groups: number[];
    try {
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      await reader.read();
      assert.ok(await eventually(() => fake.turnCalls().length > before, 60_000), "the CLI reached the (hanging) model");
      groups = [...cliGroups(home)];
      assert.equal(groups.length, 1, "one gemini is mid-turn");
    } catch (err) {
      ac.abort(); // never leave the hanging turn behind for the next test
      throw err;
    }
    const abandoned = groups[0]!; // the group leader's pid

    let maxGroups = 0;
    let samples = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling && samples < 10_000) {
        maxGroups = Math.max(maxGroups, cliGroups(home).size);
        samples++;
        await sleep(20);
      }
    })();
    try {
      ac.abort();
      const retry = await chat(bridge.baseURL, conv.again());
      assert.equal(retry.status, 200);
      assert.equal(retry.error, undefined, JSON.stringify(retry.error));
      assert.equal(retry.text, "Reply to: second, slow", "the retry answers");
    } finally {
      sampling = false;
      await sampler;
    }
    assert.ok(samples > 5, `sampled ${samples} times`);
    assert.ok(maxGroups <= 1, `at most one gemini process group at any moment (saw ${maxGroups})`);
    assert.ok(!alive(abandoned), "the abandoned gemini is gone");
    assert.ok(await eventually(() => cliGroups(home).size === 0, 10_000), "nothing left after the retry");
    const last = fake.turnCalls().at(-1)!;
    retriedCall = last;
    // A retry of an interrupted turn starts a new session seeded from the conversation.
    assert.match(dialogue(last)[0]![1], /EARLIER IN THIS CONVERSATION[\s\S]*first, quick/, "seeded with the earlier conversation");
    assert.ok(userParts(last).at(-1)!.endsWith("second, slow"), "the retried message comes last");
  });

  test(
    "a retried turn reaches the model once: the aborted attempt leaves no duplicate user message in the CLI's history",
    () => {
      assert.ok(retriedCall, "the abort test ran");
      const texts = userParts(retriedCall);
      const asked = texts.map((t) => t.split("second, slow").length - 1).reduce((a, b) => a + b, 0);
      assert.equal(asked, 1, `user parts: ${JSON.stringify(texts)}`);
    },
  );

  test("turns of one conversation are strictly serialised: the model sees the second only after the first finished", async () => {
    const conv = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
    fake.setScript(replyScript);
    const r1 = await chat(bridge.baseURL, conv.ask("serial one"));
    conv.answered(r1.text);

    let release!: () => void;
    let releasedAt = 0;
    const gate = new Promise<void>((r) => (release = r));
    const arrivals: Array<{ text: string; at: number }> = [];
    fake.setScript(async (req) => {
      if (req.action !== "streamGenerateContent") return replyScript(req);
      arrivals.push({ text: lastPrompt(req), at: Date.now() });
      if (arrivals.length === 1) await gate;
      return replyScript(req);
    });
    const base = conv.turns.slice();
    const send = (name: string) => chat(bridge.baseURL, openclawRequest(MODEL, [...base, { role: "user", text: `serial two ${name}` }], "2026.9", conv.extra));
    const pa = send("A");
    const pb = send("B");
    try {
      assert.ok(await eventually(() => arrivals.length >= 1, 60_000), "the first turn reached the model");
      await sleep(4000); // a parallel gemini would reach the fake within this time
      assert.equal(arrivals.length, 1, "the second turn waits while the first is answering");
      assert.ok(cliGroups(home).size <= 1, "one CLI for the conversation");
    } finally {
      releasedAt = Date.now();
      release();
    }
    const [ra, rb] = await Promise.all([pa, pb]);
    assert.equal(ra.text, "Reply to: serial two A");
    assert.equal(rb.text, "Reply to: serial two B");
    assert.equal(arrivals.length, 2);
    const firstName = arrivals[0]!.text.endsWith("A") ? "A" : "B";
    const secondName = firstName === "A" ? "B" : "A";
    // Causal, not a timing guess: the first CLI cannot finish before its (gated) answer was released.
    assert.ok(arrivals[1]!.at >= releasedAt, "the second reached the model only after the first one's answer was released");
    const d = dialogue(fake.turnCalls().at(-1)!).map(([, t]) => t);
    assert.ok(d.includes(`serial two ${firstName}`) && d.includes(`Reply to: serial two ${firstName}`), JSON.stringify(d));
    assert.equal(d.at(-1), `serial two ${secondName}`);
  });
});
