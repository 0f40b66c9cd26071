/**
 * Resume mode end to end THROUGH THE BRIDGE with the REAL `claude` CLI (node_modules/.bin) against a
 * fake Anthropic Messages API: conversation identity, session bindings in the SQLite store (checked
 * with the real `clawbridge sessions` command), only-new-messages turns with the bootstrap on every
 * turn, self-healing after a lost transcript, abort + retry without two CLIs, strict per-conversation
 * ordering, and the two client libraries OpenClaw and SDK users drive us with.
 * Only the model API is faked.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { existsSync, readdirSync, statSync, unlinkSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { stream, type AssistantMessage, type Context, type Model } from "@mariozechner/pi-ai";
import OpenAI from "openai";
import { anthropicText, startFakeAnthropic, type AnthropicReply, type FakeAnthropic, type RecordedRequest } from "../fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../fakes/cli-env.js";
import { defaultSessionStorePath, openSessionStore } from "../../src/store/index.js";
import type { SessionStore } from "../../src/store/types.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { alive, chat, cliGroups, Conversation, lastLine, sessionsCli, showSession, sleep } from "../helpers/resume.js";
import { openclawRequest, wrapUserText, openclawSystemPrompt } from "../helpers/openclaw-request.js";

const MODEL = "claude";

// ---------------------------------------------------------------------------------------------
// helpers

function blocks(content: unknown): string[] {
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) return [];
  return content.filter((b: any) => b?.type === "text" && typeof b.text === "string").map((b: any) => b.text);
}

/** What the CLI sent as the person's words in a user message (Claude's own <system-reminder> blocks left out). */
function promptText(content: unknown): string {
  return blocks(content)
    .filter((t) => !t.trimStart().startsWith("<system-reminder>"))
    .join("\n")
    .trim();
}

/** user/assistant messages of a model call as [role, text] (Claude's own system rows and empty ones skipped). */
function dialogue(req: RecordedRequest): [string, string][] {
  const msgs: any[] = req.body?.messages ?? [];
  return msgs
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m): [string, string] => [m.role, m.role === "user" ? promptText(m.content) : anthropicText(m.content)])
    .filter(([, t]) => t !== "");
}

function systemOf(req: RecordedRequest): string {
  const s = req.body?.system;
  return typeof s === "string" ? s : Array.isArray(s) ? s.map((b: any) => b?.text ?? "").join("\n") : "";
}

/** Claude Code puts its session id into metadata.user_id (a JSON string). */
function sessionOf(req: RecordedRequest): string | undefined {
  try {
    return JSON.parse(String(req.body?.metadata?.user_id)).session_id;
  } catch {
    return undefined;
  }
}

/** The default script: answer naming the person's latest line, so answers are traceable. */
function replyScript(req: RecordedRequest): AnthropicReply {
  const msgs: any[] = req.body?.messages ?? [];
  const lastUser = [...msgs].reverse().find((m) => m.role === "user" && promptText(m.content));
  return { kind: "text", chunks: ["Reply to: ", lastLine(promptText(lastUser?.content ?? ""))] };
}

/** Files named `name` below `root` (bounded walk). */
function findFiles(root: string, name: string, depth = 6): string[] {
  const out: string[] = [];
  if (depth < 0 || !existsSync(root)) return out;
  for (const e of readdirSync(root)) {
    const p = path.join(root, e);
    if (e === name) out.push(p);
    else if (statSync(p).isDirectory()) out.push(...findFiles(p, name, depth - 1));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

describe("resume mode through the bridge: Claude Code", () => {
  let fake: FakeAnthropic;
  let bridge: TestBridge;
  let home: string;
  /** A second connection to the bridge's own sessions.db (the `sessions` command is checked separately). */
  let store: SessionStore;
  const bindingOf = async (key: string) => {
    const b = await store.get(key);
    assert.ok(b, `a binding for ${key}`);
    return b;
  };

  before(async () => {
    fake = await startFakeAnthropic(replyScript);
    home = tempDir("cb-rc-home-");
    bridge = await startTestBridge({
      server: { heartbeatSeconds: 0.5, maxConcurrent: 4 },
      backends: { cc: { type: "claude-code", command: CLAUDE_BIN, env: claudeEnv({ baseUrl: fake.baseUrl, home }), timeoutSeconds: 60, killGraceSeconds: 1 } },
      models: [{ id: MODEL, backend: "cc", model: "default", session: { mode: "resume" } }],
    });
    store = await openSessionStore({ kind: "sqlite", path: defaultSessionStorePath(bridge.dataDir) });
  });

  after(async () => {
    await store?.close();
    await bridge?.close(0);
    await fake?.close();
    // Every CLI process is gone (the bridge reaps its children on close).
    const left = await eventually(() => pidsWithEnv(`HOME=${home}`).length === 0, 10_000);
    cleanup(home);
    if (bridge) cleanup(bridge.dataDir);
    assert.ok(left, "no claude process left behind");
  });

  test("multi-turn: turn 2 resumes the session with only the new message; the bootstrap is on both turns; sessions list/show", async () => {
    fake.setScript(replyScript);
    const sid = randomUUID();
    const key = `openclaw:agent:main:main:${sid}`;
    const conv = new Conversation(MODEL, "2026.9", { sessionId: sid });
    const before = fake.messageCalls().length;

    const body1 = conv.ask("what is the capital of Estonia");
    const r1 = await chat(bridge.baseURL, body1);
    assert.equal(r1.status, 200);
    assert.equal(r1.key, key, "x-clawbridge-conversation names the key from the Runtime line");
    assert.equal(r1.source, "runtime");
    assert.equal(r1.text, "Reply to: what is the capital of Estonia");
    assert.ok(r1.done);
    conv.answered(r1.text);

    const body2 = conv.ask("and of Latvia?");
    const requestBytes = Buffer.byteLength(JSON.stringify(body2));
    const r2 = await chat(bridge.baseURL, body2);
    assert.equal(r2.status, 200);
    assert.equal(r2.key, key);
    assert.equal(r2.text, "Reply to: and of Latvia?");

    const calls = fake.messageCalls().slice(before);
    assert.equal(calls.length, 2, "one model call per turn");
    const [c1, c2] = calls as [RecordedRequest, RecordedRequest];
    for (const c of calls) {
      const sys = systemOf(c);
      assert.match(sys, /Pebble/, "bootstrap carries the identity from IDENTITY.md");
      assert.ok(sys.includes(`Conversation: ${key}`), "bootstrap names the conversation key");
      assert.ok(!sys.includes("<available_skills>"), "not OpenClaw's whole system prompt");
    }
    assert.deepEqual(dialogue(c1), [["user", "what is the capital of Estonia"]]);
    assert.deepEqual(
      dialogue(c2),
      [
        ["user", "what is the capital of Estonia"],
        ["assistant", "Reply to: what is the capital of Estonia"],
        ["user", "and of Latvia?"],
      ],
      "turn 2 is the resumed session plus exactly one new user message",
    );
    const ids = calls.map(sessionOf);
    assert.ok(ids[0], "claude reported a session id");
    assert.equal(ids[1], ids[0], "turn 2 runs in the same Claude Code session (--resume)");
    // What the bridge forwarded on turn 2: the new user message alone, not OpenClaw's request.
    const msgs2: any[] = c2.body.messages;
    const newUser = msgs2.at(-1);
    assert.equal(newUser.role, "user");
    const newBytes = Buffer.byteLength(blocks(newUser.content).join(""));
    assert.ok(newBytes < 100 && requestBytes > 40_000, `turn 2 forwarded ${newBytes} bytes of a ${requestBytes}-byte request`);
    assert.ok(!JSON.stringify(c2.body.messages).includes("Runtime:"), "no Runtime line reaches the model");
    assert.ok(!JSON.stringify(c2.body.messages).includes("[Sat 2026-11-21"), "no timestamp prefix reaches the model");

    const list = await sessionsCli(bridge.dataDir, "list");
    const line = list.split("\n").find((l) => l.includes(key));
    assert.ok(line, `sessions list shows the conversation:\n${list}`);
    assert.ok(line.includes(`cc:${ids[0]}`), `bound to claude's session: ${line}`);
    assert.match(line, /turns=2\b/);
    const shown = await showSession(bridge.dataDir, key);
    assert.equal(shown.binding.turns, 2);
    assert.equal(shown.binding.backend, "cc");
    assert.equal(shown.binding.backendSessionId, ids[0]);
    assert.ok(path.isAbsolute(shown.binding.cwd));
    assert.ok(shown.events.some((e) => e.kind === "bound"), "a bound event");
  });

  test("conversation identity: Runtime line, derived fallback (2026.5), explicit header, OpenAI user; parallel conversations stay apart", async () => {
    fake.setScript(replyScript);

    // 2026.5: no Runtime line → a derived key, stable across turns (the session resumes).
    const old = new Conversation(MODEL, "2026.5");
    const before5 = fake.messageCalls().length;
    const o1 = await chat(bridge.baseURL, old.ask("derived one: hello from an older OpenClaw"));
    assert.equal(o1.status, 200);
    assert.equal(o1.source, "derived");
    assert.match(o1.key ?? "", /^derived:[0-9a-f]{24}$/);
    old.answered(o1.text);
    const o2 = await chat(bridge.baseURL, old.ask("derived two"));
    assert.equal(o2.key, o1.key, "the derived key is stable across turns");
    const oc = fake.messageCalls().slice(before5);
    assert.equal(oc.length, 2);
    assert.equal(sessionOf(oc[1]!), sessionOf(oc[0]!), "the derived conversation resumes its session");
    assert.deepEqual(dialogue(oc[1]!).map(([r]) => r), ["user", "assistant", "user"]);
    assert.equal(dialogue(oc[1]!).at(-1)![1], "derived two", "metadata blocks stripped from the new message");

    // An explicit header wins over the Runtime line.
    const h = await chat(bridge.baseURL, new Conversation(MODEL, "2026.9", { sessionId: randomUUID() }).ask("header wins"), {
      headers: { "x-openclaw-session-key": "agent:main:telegram:dm:42" },
    });
    assert.equal(h.source, "header");
    assert.equal(h.key, "agent:main:telegram:dm:42");

    // The OpenAI `user` field when there is no header (it also beats the Runtime line).
    const ub = { ...new Conversation(MODEL, "2026.9", { sessionId: randomUUID() }).ask("user field"), user: "alex-42" };
    const u = await chat(bridge.baseURL, ub);
    assert.equal(u.source, "user");
    assert.equal(u.key, "user:alex-42");
    assert.equal((await bindingOf("user:alex-42")).turns, 1);

    // Two conversations in parallel: each model call holds only its own conversation.
    const a = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
    const b = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
    const keyA = `openclaw:agent:main:main:${a.extra.sessionId}`;
    const keyB = `openclaw:agent:main:main:${b.extra.sessionId}`;
    const beforeAB = fake.messageCalls().length;
    const [a1, b1] = await Promise.all([chat(bridge.baseURL, a.ask("alpha one")), chat(bridge.baseURL, b.ask("bravo one"))]);
    assert.equal(a1.text, "Reply to: alpha one");
    assert.equal(b1.text, "Reply to: bravo one");
    a.answered(a1.text);
    b.answered(b1.text);
    const [a2, b2] = await Promise.all([chat(bridge.baseURL, a.ask("alpha two")), chat(bridge.baseURL, b.ask("bravo two"))]);
    assert.equal(a2.text, "Reply to: alpha two");
    assert.equal(b2.text, "Reply to: bravo two");
    const ab = fake.messageCalls().slice(beforeAB);
    assert.equal(ab.length, 4);
    const of = (k: string) => ab.filter((c) => systemOf(c).includes(`Conversation: ${k}`));
    assert.equal(of(keyA).length, 2);
    assert.equal(of(keyB).length, 2);
    for (const [k, word, other] of [
      [keyA, "alpha", "bravo"],
      [keyB, "bravo", "alpha"],
    ] as const) {
      for (const c of of(k)) {
        const texts = dialogue(c).map(([, t]) => t);
        assert.ok(texts.every((t) => t.includes(word)), `${k}: only its own messages: ${JSON.stringify(texts)}`);
        assert.ok(!JSON.stringify(c.body.messages).includes(other), `${k}: nothing of the other conversation`);
      }
      assert.equal(dialogue(of(k)[1]!).length, 3, "second turn resumed with one new message");
    }
    const sa = new Set(of(keyA).map(sessionOf));
    const sb = new Set(of(keyB).map(sessionOf));
    assert.equal(sa.size, 1);
    assert.equal(sb.size, 1);
    assert.notEqual([...sa][0], [...sb][0], "two different backend sessions");
    const [bindA, bindB] = await Promise.all([bindingOf(keyA), bindingOf(keyB)]);
    assert.equal(bindA.backendSessionId, [...sa][0]);
    assert.equal(bindB.backendSessionId, [...sb][0]);
    assert.notEqual(bindA.cwd, bindB.cwd, "each conversation has its own working directory");
  });

  test("self-healing: a deleted transcript → a NEW session seeded from the conversation; the dead id is never reused", async () => {
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
    const dead: string = bound.backendSessionId;
    const transcripts = findFiles(path.join(home, ".claude", "projects"), `${dead}.jsonl`);
    assert.equal(transcripts.length, 1, "the session's transcript is where docs/CLI_FORMATS.md says");
    unlinkSync(transcripts[0]!);

    const before = fake.messageCalls().length;
    const r3 = await chat(bridge.baseURL, conv.ask("what is my cat's name?"));
    assert.equal(r3.status, 200);
    assert.equal(r3.error, undefined, `no error: ${JSON.stringify(r3.error)}`);
    assert.equal(r3.text, "Reply to: what is my cat's name?");
    conv.answered(r3.text);
    const healedCalls = fake.messageCalls().slice(before);
    assert.equal(healedCalls.length, 1, "the failed resume made no model call; the new session made one");
    const seeded = healedCalls[0]!;
    const fresh = sessionOf(seeded)!;
    assert.ok(fresh && fresh !== dead, "a new Claude Code session");
    const d = dialogue(seeded);
    assert.equal(d.length, 1, "a new session: one user message");
    const first = d[0]![1];
    assert.match(first, /EARLIER IN THIS CONVERSATION/);
    for (const t of ["my cat is called Miso", "she is three years old", "Reply to: my cat is called Miso"]) assert.ok(first.includes(t), `seed holds "${t}"`);
    assert.ok(first.endsWith("what is my cat's name?"), "the new message comes last");
    assert.ok(systemOf(seeded).includes(`Conversation: ${key}`), "bootstrap on the healed turn");

    const shown = await showSession(bridge.dataDir, key);
    assert.equal(shown.binding.backendSessionId, fresh, "the store holds the new session id");
    assert.equal(shown.binding.turns, 1);
    const healed = shown.events.find((e) => e.kind === "healed");
    assert.ok(healed, `a healed event: ${JSON.stringify(shown.events)}`);
    assert.match(healed.reason ?? "", /No conversation found/);

    // The next turn resumes the NEW session; the dead id is never used again.
    const r4 = await chat(bridge.baseURL, conv.ask("and her age?"));
    assert.equal(r4.text, "Reply to: and her age?");
    const after = fake.messageCalls().slice(before);
    assert.equal(after.length, 2);
    assert.equal(sessionOf(after[1]!), fresh);
    assert.ok(after.every((c) => sessionOf(c) !== dead), "no model call in the dead session");
    assert.deepEqual(
      dialogue(after[1]!).map(([r]) => r),
      ["user", "assistant", "user"],
    );
    assert.equal(dialogue(after[1]!).at(-1)![1], "and her age?");
    assert.equal((await bindingOf(key)).turns, 2);
  });

  /** The model call of the retried turn in the abort test (for the todo check below). */
  let retriedCall: RecordedRequest | undefined;

  test("abort then retry: never two CLI processes for the conversation; the retry answers; the abandoned one is gone", async () => {
    const sid = randomUUID();
    const conv = new Conversation(MODEL, "2026.9", { sessionId: sid });
    fake.setScript(replyScript);
    const r1 = await chat(bridge.baseURL, conv.ask("first, quick"));
    conv.answered(r1.text);
    assert.equal(cliGroups(home).size, 0, "nothing running between turns");

    let hung = 0;
    fake.setScript((req) => {
      const msgs: any[] = req.body?.messages ?? [];
      if (promptText(msgs.at(-1)?.content) === "second, slow" && hung === 0) {
        hung++;
        return { kind: "hang" };
      }
      return replyScript(req);
    });
    const before = fake.messageCalls().length;
    const body2 = conv.ask("second, slow");
    const ac = new AbortController();
    const res = await fetch(`${bridge.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body2),
      signal: ac.signal,
    });
    let abandoned: number[];
    try {
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      await reader.read(); // the role chunk: the turn is streaming
      assert.ok(await eventually(() => fake.messageCalls().length > before, 30_000), "the CLI reached the (hanging) model");
      abandoned = [...cliGroups(home)];
      assert.equal(abandoned.length, 1, "one claude is mid-turn");
    } catch (err) {
      ac.abort(); // never leave the hanging turn behind for the next test
      throw err;
    }

    let maxGroups = 0;
    let samples = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling && samples < 5000) {
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
    assert.ok(maxGroups <= 1, `at most one CLI process group at any moment (saw ${maxGroups})`);
    assert.ok(!alive(abandoned[0]!), "the abandoned claude (the group leader) is gone");
    assert.ok(await eventually(() => cliGroups(home).size === 0, 10_000), "nothing left after the retry");
    // The interrupted attempt may already sit in claude's own history, so the retry of the SAME
    // message starts a new session seeded from the conversation: nothing lost, nothing twice.
    const calls = fake.messageCalls().slice(before);
    retriedCall = calls.at(-1);
    assert.notEqual(sessionOf(calls.at(-1)!), sessionOf(calls[0]!), "the retry runs in a new session");
    const d = dialogue(calls.at(-1)!);
    assert.match(d[0]![1], /EARLIER IN THIS CONVERSATION[\s\S]*first, quick/, "seeded with the earlier conversation");
    assert.ok(d.at(-1)![1].endsWith("second, slow"), "the retried message comes last");
    const health = (await (await fetch(`${bridge.url}/health`)).json()) as any;
    assert.equal(health.turns.running, 0);
  });

  test(
    "a retried turn reaches the model once: the aborted attempt leaves no duplicate question or synthetic answer in the CLI's history",
    () => {
      assert.ok(retriedCall, "the abort test ran");
      const d = dialogue(retriedCall);
      const asked = d.filter(([r]) => r === "user").map(([, t]) => t.split("second, slow").length - 1).reduce((a, b) => a + b, 0);
      assert.equal(asked, 1, JSON.stringify(d));
      assert.ok(!d.some(([r, t]) => r === "assistant" && /No response requested/i.test(t)), JSON.stringify(d));
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
      const msgs: any[] = req.body?.messages ?? [];
      const text = promptText(msgs.at(-1)?.content);
      arrivals.push({ text, at: Date.now() });
      if (arrivals.length === 1) await gate; // the first turn stays open until released
      return replyScript(req);
    });
    const base = conv.turns.slice();
    const bodyA = openclawRequest(MODEL, [...base, { role: "user", text: "serial two A" }], "2026.9", conv.extra);
    const bodyB = openclawRequest(MODEL, [...base, { role: "user", text: "serial two B" }], "2026.9", conv.extra);
    const pa = chat(bridge.baseURL, bodyA);
    const pb = chat(bridge.baseURL, bodyB);
    try {
      assert.ok(await eventually(() => arrivals.length >= 1, 30_000), "the first turn reached the model");
      // A second claude would have reached the fake well within this time (one start takes ~0.5 s).
      await sleep(2500);
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
    // And the second ran in the session the first had finished writing: its history holds the first's answer.
    const last = fake.messageCalls().at(-1)!;
    const d = dialogue(last).map(([, t]) => t);
    assert.ok(d.includes(`serial two ${firstName}`) && d.includes(`Reply to: serial two ${firstName}`), JSON.stringify(d));
    assert.equal(d.at(-1), `serial two ${secondName}`);
  });

  test("multi-turn through OpenClaw's client library pi-ai (with the plugin's session header) and the official openai client", async () => {
    fake.setScript(replyScript);
    // --- pi-ai, as OpenClaw 2026.5 drives it
    const model: Model<"openai-completions"> = {
      id: MODEL,
      name: "Claude via clawbridge",
      api: "openai-completions",
      provider: "clawbridge",
      baseUrl: bridge.baseURL,
      reasoning: false,
      input: ["text"],
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
      contextWindow: 128000,
      maxTokens: 4096,
    };
    const piKey = `agent:main:pi:${randomUUID()}`;
    const context: Context = {
      systemPrompt: openclawSystemPrompt(),
      messages: [{ role: "user", content: wrapUserText("pi says hello", "2026.5"), timestamp: Date.now() }],
    };
    let seenKey: string | undefined;
    const before = fake.messageCalls().length;
    for (const next of ["pi asks again", undefined]) {
      const s = stream(model, context, {
        apiKey: "unused",
        maxRetries: 0,
        headers: { "x-openclaw-session-key": piKey },
        onResponse: (r) => {
          seenKey = r.headers["x-clawbridge-conversation"];
        },
      });
      let n = 0;
      for await (const _ of s) if (++n > 5000) break;
      const msg: AssistantMessage = await s.result();
      assert.equal(msg.stopReason, "stop", `pi-ai: ${msg.errorMessage ?? ""}`);
      context.messages.push(msg);
      if (next) context.messages.push({ role: "user", content: wrapUserText(next, "2026.5"), timestamp: Date.now() });
    }
    assert.equal(seenKey, piKey, "the session header names the conversation");
    const piCalls = fake.messageCalls().slice(before);
    assert.equal(piCalls.length, 2);
    assert.equal(sessionOf(piCalls[1]!), sessionOf(piCalls[0]!), "pi-ai's turn 2 resumed the session");
    assert.deepEqual(dialogue(piCalls[1]!), [
      ["user", "pi says hello"],
      ["assistant", "Reply to: pi says hello"],
      ["user", "pi asks again"],
    ]);
    const texts = context.messages.filter((m): m is AssistantMessage => m.role === "assistant").map((m) => m.content.map((c) => (c.type === "text" ? c.text : "")).join(""));
    assert.deepEqual(texts, ["Reply to: pi says hello", "Reply to: pi asks again"]);
    assert.equal((await bindingOf(piKey)).turns, 2);

    // --- the official openai client, streaming, conversation named by `user`
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
    const user = `sdk-${randomUUID()}`;
    const history: OpenAI.ChatCompletionMessageParam[] = [{ role: "system", content: openclawSystemPrompt() }];
    const beforeSdk = fake.messageCalls().length;
    for (const q of ["sdk first", "sdk second"]) {
      history.push({ role: "user", content: q });
      const s = await client.chat.completions.create({ model: MODEL, messages: history, stream: true, user });
      let text = "";
      for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? "";
      assert.equal(text, `Reply to: ${q}`);
      history.push({ role: "assistant", content: text });
    }
    const sdkCalls = fake.messageCalls().slice(beforeSdk);
    assert.equal(sdkCalls.length, 2);
    assert.equal(sessionOf(sdkCalls[1]!), sessionOf(sdkCalls[0]!));
    assert.deepEqual(dialogue(sdkCalls[1]!), [
      ["user", "sdk first"],
      ["assistant", "Reply to: sdk first"],
      ["user", "sdk second"],
    ]);
    // Non-streaming works on the same session too.
    history.push({ role: "user", content: "sdk third" });
    const plain = await client.chat.completions.create({ model: MODEL, messages: history, user });
    assert.equal(plain.choices[0]?.message.content, "Reply to: sdk third");
    assert.equal(sessionOf(fake.messageCalls().at(-1)!), sessionOf(sdkCalls[0]!));
    assert.equal((await bindingOf(`user:${user}`)).turns, 3);
  });
});
