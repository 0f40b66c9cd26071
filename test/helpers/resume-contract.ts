/**
 * The resume-mode contract every CLI backend must keep THROUGH THE BRIDGE, run against the real
 * CLI and a fake of its model API (one test file per CLI supplies a `ResumeCli`):
 * - turn 2 resumes the session with only the new message, the bootstrap on every turn, and the
 *   binding shown by the real `clawbridge sessions` command;
 * - conversation identity (Runtime line, derived key, explicit header, OpenAI `user`), and parallel
 *   conversations that stay apart;
 * - self-healing after the CLI lost the session's files: a NEW session seeded from the
 *   conversation, the dead id never used again;
 * - abort then retry: never two CLI processes for a conversation, the retry answers once;
 * - strict per-conversation ordering.
 * The CLI's own observations (its session id on the wire, where it keeps session files, how it
 * words a lost session) come from the `ResumeCli`; the assertions are the same for every CLI.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { unlinkSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { defaultSessionStorePath, openSessionStore } from "../../src/core/store/index.js";
import type { SessionBinding, SessionStore } from "../../src/core/store/types.js";
import { cleanup, eventually, pidsWithEnv, startTestBridge, tempDir, type TestBridge } from "./bridge.js";
import { openclawRequest } from "../../testkit/openclaw-request.js";
import { alive, chat, cliGroups, Conversation, sessionsCli, showSession, sleep } from "./resume.js";

/** The fake model API of a CLI, as the contract drives it. */
export interface ResumeFake<Req, Reply> {
  setScript(script: (req: Req) => Reply | Promise<Reply>): void;
  close(): Promise<void>;
}

export interface ResumeCli<Req extends { body: any }, Reply> {
  /** "Claude Code" */
  title: string;
  /** "claude": how messages name one process */
  cli: string;
  /** The bridge's model id and the backend's name in the config. */
  model: string;
  backend: string;
  /** Start the fake model API; the backend's config for a CLI with the private `home`. */
  start(home: string): Promise<{ fake: ResumeFake<Req, Reply>; backend: Record<string, unknown> }>;
  /** The default script: "Reply to: <the person's latest line>". */
  replyScript(req: Req): Reply;
  /** A reply that never comes (until the client goes away). */
  hang: Reply;
  /** The model turns recorded so far (side calls such as model routing left out). */
  turns(): Req[];
  /** Whether a recorded request is a model turn. */
  isTurn(req: Req): boolean;
  /** The user/assistant messages of a model turn as [role, text] ("user" | "assistant"), the CLI's own rows left out. */
  dialogue(req: Req): [string, string][];
  /** Every user text of a model turn, in order (a CLI may merge several into one message). */
  userTexts(req: Req): string[];
  /** The person's words in the newest user message. */
  lastPrompt(req: Req): string;
  systemOf(req: Req): string;
  /** The conversation part of a model turn as JSON (messages / contents). */
  conversationJson(req: Req): string;
  /** Bytes of the newest user message as the CLI forwarded it. */
  newMessageBytes(req: Req): number;
  /** Whether the system prompt is the bridge's bootstrap alone (else the CLI's own prompt comes with it). */
  systemIsBootstrapOnly: boolean;
  /** The session id the CLI names on the wire, when it sends one (Claude Code does, Gemini CLI does not). */
  sessionOf?(req: Req): string | undefined;
  /** The CLI's files of session `id` under its HOME (transcript, session files). */
  sessionFiles(home: string, id: string): string[];
  /** A session file that holds no conversation (Gemini CLI's recording of only its own context). */
  stub?(file: string): boolean;
  /** How the CLI words a session that is gone (the reason of the store's `healed` event). */
  lostSession: RegExp;
  /** How long a turn may take to reach the model; how long a second, parallel CLI would surely take. */
  reachModelMs: number;
  parallelWindowMs: number;
  /**
   * The backend runs warm (src/backends/warm): a conversation's process stays between its turns, so "nothing
   * running" becomes "at most its one process", counted per conversation (by working directory),
   * and a session's lost files show once that process has gone.
   */
  warm?: boolean;
}

/** What the contract's set-up made, for a CLI's own extra tests (filled in `before`). */
export interface ResumeContext<Req extends { body: any }, Reply> {
  fake: ResumeFake<Req, Reply>;
  bridge: TestBridge;
  home: string;
  /** The binding of a conversation key (it must exist). */
  bindingOf(key: string): Promise<SessionBinding>;
}

const runtimeKey = (sessionId: string) => `openclaw:agent:main:main:${sessionId}`;

export function resumeContract<Req extends { body: any }, Reply>(
  cli: ResumeCli<Req, Reply>,
  extra?: (ctx: ResumeContext<Req, Reply>) => void,
): void {
  const MODEL = cli.model;

  describe(`resume mode through the bridge: ${cli.title}`, () => {
    const ctx = {} as ResumeContext<Req, Reply>;
    /** A second connection to the bridge's own sessions.db (the `sessions` command is checked separately). */
    let store: SessionStore;
    const bindingOf = async (key: string) => {
      const b = await store.get(key);
      assert.ok(b, `a binding for ${key}`);
      return b;
    };
    /** An OpenClaw 2026.9 conversation (its Runtime line names a new session) and its key. */
    const newConversation = () => {
      const sid = randomUUID();
      return { key: runtimeKey(sid), conv: new Conversation(MODEL, "2026.9", { sessionId: sid }) };
    };
    /** Where the CLI names its session on the wire: `a` and `b` ran in the same one. */
    const same = (a: Req, b: Req) => {
      if (cli.sessionOf) assert.equal(cli.sessionOf(b), cli.sessionOf(a), `one ${cli.title} session`);
    };

    before(async () => {
      ctx.home = tempDir(`cb-r${cli.cli.slice(0, 1)}-home-`);
      const started = await cli.start(ctx.home);
      ctx.fake = started.fake;
      ctx.bridge = await startTestBridge({
        server: { heartbeatSeconds: 0.5, maxConcurrent: 4 },
        backends: { [cli.backend]: started.backend },
        models: [{ id: MODEL, backend: cli.backend, model: "default", session: { mode: "resume" } }],
      });
      store = await openSessionStore({ kind: "sqlite", path: defaultSessionStorePath(ctx.bridge.dataDir) });
      ctx.bindingOf = bindingOf;
    });

    after(async () => {
      await store?.close();
      await ctx.bridge?.close(0);
      await ctx.fake?.close();
      // Every CLI process is gone (the bridge reaps its children on close).
      const left = await eventually(() => pidsWithEnv(`HOME=${ctx.home}`).length === 0, 10_000);
      cleanup(ctx.home);
      if (ctx.bridge) cleanup(ctx.bridge.dataDir);
      assert.ok(left, `no ${cli.cli} process left behind`);
    });

    test("multi-turn: turn 2 resumes the session with only the new message; the bootstrap is on both turns; sessions list/show", async () => {
      const { fake, bridge, home } = ctx;
      fake.setScript(cli.replyScript);
      const { key, conv } = newConversation();
      const before = cli.turns().length;

      const r1 = await chat(bridge.baseURL, conv.ask("what is the capital of Estonia"));
      assert.equal(r1.status, 200);
      assert.equal(r1.error, undefined, JSON.stringify(r1.error));
      assert.equal(r1.key, key, "x-clawbridge-conversation names the key from the Runtime line");
      assert.equal(r1.source, "runtime");
      assert.equal(r1.text, "Reply to: what is the capital of Estonia");
      assert.ok(r1.done);
      conv.answered(r1.text);
      const first = await bindingOf(key);

      const body2 = conv.ask("and of Latvia?");
      const requestBytes = Buffer.byteLength(JSON.stringify(body2));
      const r2 = await chat(bridge.baseURL, body2);
      assert.equal(r2.status, 200);
      assert.equal(r2.key, key);
      assert.equal(r2.text, "Reply to: and of Latvia?");

      const calls = cli.turns().slice(before);
      assert.equal(calls.length, 2, "one model turn per bridge turn");
      const [c1, c2] = calls as [Req, Req];
      for (const c of calls) {
        const sys = cli.systemOf(c);
        assert.match(sys, /Pebble/, "bootstrap carries the identity from IDENTITY.md");
        assert.ok(sys.includes(`Conversation: ${key}`), "bootstrap names the conversation key");
        assert.ok(!sys.includes("<available_skills>"), "not OpenClaw's whole system prompt");
        if (cli.systemIsBootstrapOnly) assert.ok(sys.length <= 1600, `the bootstrap is compact (${sys.length} chars)`);
      }
      assert.deepEqual(cli.dialogue(c1), [["user", "what is the capital of Estonia"]]);
      assert.deepEqual(
        cli.dialogue(c2),
        [
          ["user", "what is the capital of Estonia"],
          ["assistant", "Reply to: what is the capital of Estonia"],
          ["user", "and of Latvia?"],
        ],
        "turn 2 is the resumed session plus exactly one new user message",
      );
      // What the bridge forwarded on turn 2: the new user message alone, not OpenClaw's request.
      const newBytes = cli.newMessageBytes(c2);
      assert.ok(
        newBytes < 100 && requestBytes > 40_000,
        `turn 2 forwarded ${newBytes} bytes of a ${requestBytes}-byte request`,
      );
      assert.ok(!cli.conversationJson(c2).includes("Runtime:"), "no Runtime line reaches the model");
      assert.ok(!cli.conversationJson(c2).includes("[Sat 2026-11-21"), "no timestamp prefix reaches the model");
      if (cli.sessionOf) {
        assert.equal(cli.sessionOf(c1), first.backendSessionId, `${cli.title} names the bound session on the wire`);
        same(c1, c2);
      }

      const list = await sessionsCli(bridge.dataDir, "list");
      const line = list.split("\n").find((l) => l.includes(key));
      assert.ok(line, `sessions list shows the conversation:\n${list}`);
      assert.ok(line.includes(`${cli.backend}:${first.backendSessionId}`), `bound to the CLI's session: ${line}`);
      assert.match(line, /turns=2\b/);
      const shown = await showSession(bridge.dataDir, key);
      assert.equal(shown.binding.turns, 2);
      assert.equal(shown.binding.backend, cli.backend);
      assert.equal(
        shown.binding.backendSessionId,
        first.backendSessionId,
        `the same ${cli.title} session on both turns`,
      );
      assert.ok(path.isAbsolute(shown.binding.cwd));
      assert.ok(
        shown.events.some((e) => e.kind === "bound"),
        "a bound event",
      );
      assert.ok(
        cli.sessionFiles(home, first.backendSessionId).length >= 1,
        `${cli.title}'s session file exists for the bound id`,
      );
      if (cli.warm) {
        // OpenClaw's request changes between turns (its Runtime line, the time in the message), the
        // bootstrap built from it must not: both turns ran on one warm process.
        const health = (await (await fetch(`${bridge.url}/health`)).json()) as {
          warm: { list: Array<{ backend: string; turns: number }> };
        };
        const mine = health.warm.list.filter((w) => w.backend === cli.backend);
        assert.deepEqual(
          mine.map((w) => w.turns),
          [2],
          `one warm process served both turns: ${JSON.stringify(health.warm.list)}`,
        );
      }
    });

    test("conversation identity: Runtime line, derived fallback (2026.5), explicit header, OpenAI user; parallel conversations stay apart", async () => {
      const { fake, bridge } = ctx;
      fake.setScript(cli.replyScript);

      // 2026.5: no Runtime line → a derived key, stable across turns (the session resumes).
      const old = new Conversation(MODEL, "2026.5");
      const before5 = cli.turns().length;
      const o1 = await chat(bridge.baseURL, old.ask("derived one: hello from an older OpenClaw"));
      assert.equal(o1.status, 200);
      assert.equal(o1.source, "derived");
      assert.match(o1.key ?? "", /^derived:[0-9a-f]{24}$/);
      old.answered(o1.text);
      const o2 = await chat(bridge.baseURL, old.ask("derived two"));
      assert.equal(o2.key, o1.key, "the derived key is stable across turns");
      const oc = cli.turns().slice(before5);
      assert.equal(oc.length, 2);
      same(oc[0]!, oc[1]!);
      assert.deepEqual(
        cli.dialogue(oc[1]!).map(([r]) => r),
        ["user", "assistant", "user"],
        "the derived conversation resumed",
      );
      assert.equal(cli.lastPrompt(oc[1]!), "derived two", "metadata blocks stripped from the new message");
      assert.equal((await bindingOf(o1.key!)).turns, 2);

      // An explicit header wins over the Runtime line.
      const h = await chat(
        bridge.baseURL,
        new Conversation(MODEL, "2026.9", { sessionId: randomUUID() }).ask("header wins"),
        {
          headers: { "x-openclaw-session-key": "agent:main:telegram:dm:42" },
        },
      );
      assert.equal(h.source, "header");
      assert.equal(h.key, "agent:main:telegram:dm:42");

      // The OpenAI `user` field when there is no header (it also beats the Runtime line).
      const u = await chat(bridge.baseURL, {
        ...new Conversation(MODEL, "2026.9", { sessionId: randomUUID() }).ask("user field"),
        user: "alex-42",
      });
      assert.equal(u.source, "user");
      assert.equal(u.key, "user:alex-42");
      assert.equal((await bindingOf("user:alex-42")).turns, 1);

      // Two conversations in parallel: each model call holds only its own conversation.
      const a = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
      const b = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
      const keyA = runtimeKey(a.extra.sessionId!);
      const keyB = runtimeKey(b.extra.sessionId!);
      const beforeAB = cli.turns().length;
      const [a1, b1] = await Promise.all([
        chat(bridge.baseURL, a.ask("alpha one")),
        chat(bridge.baseURL, b.ask("bravo one")),
      ]);
      assert.equal(a1.text, "Reply to: alpha one");
      assert.equal(b1.text, "Reply to: bravo one");
      a.answered(a1.text);
      b.answered(b1.text);
      const [a2, b2] = await Promise.all([
        chat(bridge.baseURL, a.ask("alpha two")),
        chat(bridge.baseURL, b.ask("bravo two")),
      ]);
      assert.equal(a2.text, "Reply to: alpha two");
      assert.equal(b2.text, "Reply to: bravo two");
      const ab = cli.turns().slice(beforeAB);
      assert.equal(ab.length, 4);
      const of = (k: string) => ab.filter((c) => cli.systemOf(c).includes(`Conversation: ${k}`));
      for (const [k, word, other] of [
        [keyA, "alpha", "bravo"],
        [keyB, "bravo", "alpha"],
      ] as const) {
        assert.equal(of(k).length, 2);
        for (const c of of(k)) {
          const texts = cli.dialogue(c).map(([, t]) => t);
          assert.ok(
            texts.every((t) => t.includes(word)),
            `${k}: only its own messages: ${JSON.stringify(texts)}`,
          );
          assert.ok(!cli.conversationJson(c).includes(other), `${k}: nothing of the other conversation`);
        }
        assert.equal(cli.dialogue(of(k)[1]!).length, 3, "second turn resumed with one new message");
        same(of(k)[0]!, of(k)[1]!);
      }
      const [bindA, bindB] = await Promise.all([bindingOf(keyA), bindingOf(keyB)]);
      assert.notEqual(bindA.backendSessionId, bindB.backendSessionId, "two different backend sessions");
      if (cli.sessionOf) {
        assert.equal(cli.sessionOf(of(keyA)[0]!), bindA.backendSessionId);
        assert.equal(cli.sessionOf(of(keyB)[0]!), bindB.backendSessionId);
      }
      assert.equal(bindA.turns, 2);
      assert.equal(bindB.turns, 2);
      assert.notEqual(bindA.cwd, bindB.cwd, "each conversation has its own working directory");
    });

    test("self-healing: the CLI lost the session's files → a NEW session seeded from the conversation; the dead id is never reused", async () => {
      const { fake, bridge, home } = ctx;
      fake.setScript(cli.replyScript);
      const { key, conv } = newConversation();
      for (const q of ["my cat is called Miso", "she is three years old"]) {
        const r = await chat(bridge.baseURL, conv.ask(q));
        assert.equal(r.status, 200);
        conv.answered(r.text);
      }
      const bound = await bindingOf(key);
      assert.equal(bound.turns, 2);
      const dead = bound.backendSessionId;
      // Every file of the session (Gemini CLI may write a stub file per minute a resume started in).
      // A warm CLI may write it a moment after the turn; a cold one until it has exited, just after
      // its answer (the answer ends on its result line).
      if (cli.warm) await eventually(() => cli.sessionFiles(home, dead).length >= 1, 5000);
      else assert.ok(await eventually(() => cliGroups(home, bound.cwd).size === 0, 10_000), "the CLI has exited");
      if (cli.warm) {
        // The warm process holds the session itself: the loss shows once it has gone (a crash). It
        // goes first: a live process may still append to the session's file and so write it anew.
        for (const g of cliGroups(home, bound.cwd)) process.kill(-g, "SIGKILL");
        assert.ok(await eventually(() => cliGroups(home, bound.cwd).size === 0, 10_000), "the warm process is gone");
      }
      const files = cli.sessionFiles(home, dead);
      assert.ok(files.length >= 1, "the session's files are where docs/CLI_FORMATS.md says");
      for (const f of files) unlinkSync(f);

      const before = cli.turns().length;
      const r3 = await chat(bridge.baseURL, conv.ask("what is my cat's name?"));
      assert.equal(r3.status, 200);
      assert.equal(r3.error, undefined, `no error: ${JSON.stringify(r3.error)}`);
      assert.equal(r3.text, "Reply to: what is my cat's name?");
      conv.answered(r3.text);
      const healedCalls = cli.turns().slice(before);
      assert.equal(healedCalls.length, 1, "the failed resume made no model call; the new session made one");
      const seeded = healedCalls[0]!;
      const d = cli.dialogue(seeded);
      assert.equal(d.length, 1, "a new session: one user message");
      const text = d[0]![1];
      assert.match(text, /EARLIER IN THIS CONVERSATION/);
      for (const t of ["my cat is called Miso", "she is three years old", "Reply to: my cat is called Miso"])
        assert.ok(text.includes(t), `seed holds "${t}"`);
      assert.ok(text.endsWith("what is my cat's name?"), "the new message comes last");
      assert.ok(cli.systemOf(seeded).includes(`Conversation: ${key}`), "bootstrap on the healed turn");

      const shown = await showSession(bridge.dataDir, key);
      const fresh: string = shown.binding.backendSessionId;
      assert.notEqual(fresh, dead, "the store holds a new session id");
      if (cli.sessionOf)
        assert.equal(cli.sessionOf(seeded), fresh, `the healed turn ran in the new ${cli.title} session`);
      assert.equal(shown.binding.turns, 1);
      const healed = shown.events.find((e) => e.kind === "healed");
      assert.ok(healed, `a healed event: ${JSON.stringify(shown.events)}`);
      assert.match(healed.reason ?? "", cli.lostSession);
      assert.ok(cli.sessionFiles(home, fresh).length >= 1, "the new session has its file");

      // The next turn resumes the NEW session; the dead id is never used again.
      const r4 = await chat(bridge.baseURL, conv.ask("and her age?"));
      assert.equal(r4.text, "Reply to: and her age?");
      const afterHeal = cli.turns().slice(before);
      assert.equal(afterHeal.length, 2);
      const last = afterHeal[1]!;
      assert.deepEqual(
        cli.dialogue(last).map(([r]) => r),
        ["user", "assistant", "user"],
        "turn 4 resumed the healed session",
      );
      assert.match(cli.dialogue(last)[0]![1], /EARLIER IN THIS CONVERSATION/);
      assert.equal(cli.lastPrompt(last), "and her age?");
      if (cli.sessionOf) {
        assert.equal(cli.sessionOf(last), fresh);
        assert.ok(
          afterHeal.every((c) => cli.sessionOf!(c) !== dead),
          "no model call in the dead session",
        );
      }
      const after4 = await bindingOf(key);
      assert.equal(after4.backendSessionId, fresh, "the dead id is not used again");
      assert.equal(after4.turns, 2);
      // (A CLI may leave a stub naming the dead id that holds no conversation: `stub` tells them apart.)
      assert.equal(
        cli.sessionFiles(home, dead).filter((f) => !cli.stub?.(f)).length,
        0,
        "no session was recreated under the dead id",
      );
    });

    /** The model call of the retried turn in the abort test (for the check below). */
    let retriedCall: Req | undefined;

    test("abort then retry: never two CLI processes for the conversation; the retry answers; the abandoned one is gone", async () => {
      const { fake, bridge, home } = ctx;
      const conv = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
      fake.setScript(cli.replyScript);
      const r1 = await chat(bridge.baseURL, conv.ask("first, quick"));
      conv.answered(r1.text);
      // Warm: count this conversation's processes only (others keep theirs), and its one may stay.
      const cwd = cli.warm ? (await bindingOf(runtimeKey(conv.extra.sessionId!))).cwd : undefined;
      const between = cli.warm ? 1 : 0;
      // A cold turn ends on the CLI's end-of-turn event; its process is reaped right after (bounded).
      assert.ok(
        await eventually(() => cliGroups(home, cwd).size <= between, 6000),
        "nothing running between turns (warm: its one process)",
      );

      let hung = 0;
      fake.setScript((req) => {
        // Only the model turn hangs (a side call, such as Gemini's model routing, may carry the same text).
        if (cli.isTurn(req) && cli.lastPrompt(req) === "second, slow" && hung === 0) {
          hung++;
          return cli.hang;
        }
        return cli.replyScript(req);
      });
      const before = cli.turns().length;
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
        await reader.read(); // the role chunk: the turn is streaming
        assert.ok(
          await eventually(() => cli.turns().length > before, cli.reachModelMs),
          "the CLI reached the (hanging) model",
        );
        groups = [...cliGroups(home, cwd)];
        assert.equal(groups.length, 1, `one ${cli.cli} is mid-turn`);
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
          maxGroups = Math.max(maxGroups, cliGroups(home, cwd).size);
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
      // A warm retry can be over in ~100 ms (a few samples); a cold one takes a process start.
      assert.ok(samples > (cli.warm ? 1 : 5), `sampled ${samples} times`);
      assert.ok(maxGroups <= 1, `at most one ${cli.cli} process group at any moment (saw ${maxGroups})`);
      // Warm, the interrupted process may serve the retry itself (still one process).
      if (!cli.warm || alive(abandoned))
        assert.ok(cli.warm || !alive(abandoned), `the abandoned ${cli.cli} (the group leader) is gone`);
      assert.ok(
        await eventually(() => cliGroups(home, cwd).size <= between, 10_000),
        "nothing left after the retry (warm: the retry's process)",
      );
      // The interrupted attempt may already sit in the CLI's own history, so the retry of the SAME
      // message starts a new session seeded from the conversation: nothing lost, nothing twice.
      const calls = cli.turns().slice(before);
      const last = calls.at(-1)!;
      retriedCall = last;
      if (cli.sessionOf)
        assert.notEqual(cli.sessionOf(last), cli.sessionOf(calls[0]!), "the retry runs in a new session");
      assert.match(
        cli.dialogue(last)[0]![1],
        /EARLIER IN THIS CONVERSATION[\s\S]*first, quick/,
        "seeded with the earlier conversation",
      );
      assert.ok(cli.userTexts(last).at(-1)!.endsWith("second, slow"), "the retried message comes last");
      const health = (await (await fetch(`${bridge.url}/health`)).json()) as any;
      assert.equal(health.turns.running, 0);
    });

    test("a retried turn reaches the model once: the aborted attempt leaves no duplicate question or synthetic answer in the CLI's history", () => {
      assert.ok(retriedCall, "the abort test ran");
      const texts = cli.userTexts(retriedCall);
      const asked = texts.map((t) => t.split("second, slow").length - 1).reduce((a, b) => a + b, 0);
      assert.equal(asked, 1, `user texts: ${JSON.stringify(texts)}`);
      const d = cli.dialogue(retriedCall);
      assert.ok(!d.some(([r, t]) => r === "assistant" && /No response requested/i.test(t)), JSON.stringify(d));
    });

    test("turns of one conversation are strictly serialised: the model sees the second only after the first finished", async () => {
      const { fake, bridge, home } = ctx;
      const conv = new Conversation(MODEL, "2026.9", { sessionId: randomUUID() });
      fake.setScript(cli.replyScript);
      const r1 = await chat(bridge.baseURL, conv.ask("serial one"));
      conv.answered(r1.text);

      let release!: () => void;
      let releasedAt = 0;
      const gate = new Promise<void>((r) => (release = r));
      const arrivals: Array<{ text: string; at: number }> = [];
      fake.setScript(async (req) => {
        if (!cli.isTurn(req)) return cli.replyScript(req);
        arrivals.push({ text: cli.lastPrompt(req), at: Date.now() });
        if (arrivals.length === 1) await gate; // the first turn stays open until released
        return cli.replyScript(req);
      });
      const base = conv.turns.slice();
      const send = (name: string) =>
        chat(
          bridge.baseURL,
          openclawRequest(MODEL, [...base, { role: "user", text: `serial two ${name}` }], "2026.9", conv.extra),
        );
      const pa = send("A");
      const pb = send("B");
      try {
        assert.ok(await eventually(() => arrivals.length >= 1, cli.reachModelMs), "the first turn reached the model");
        await sleep(cli.parallelWindowMs); // a second, parallel CLI would have reached the fake within this time
        assert.equal(arrivals.length, 1, "the second turn waits while the first is answering");
        assert.ok(
          cliGroups(home, cli.warm ? (await bindingOf(runtimeKey(conv.extra.sessionId!))).cwd : undefined).size <= 1,
          "one CLI for the conversation",
        );
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
      assert.ok(
        arrivals[1]!.at >= releasedAt,
        "the second reached the model only after the first one's answer was released",
      );
      // And the second ran in the session the first had finished writing: its history holds the first's answer.
      const d = cli.dialogue(cli.turns().at(-1)!).map(([, t]) => t);
      assert.ok(
        d.includes(`serial two ${firstName}`) && d.includes(`Reply to: serial two ${firstName}`),
        JSON.stringify(d),
      );
      assert.equal(d.at(-1), `serial two ${secondName}`);
    });

    extra?.(ctx);
  });
}
