/**
 * The router engine (src/workflows/router/router.ts) through its one entry point, `dispatch`, with
 * a scripted model caller (test/helpers/scripted-model.ts): no HTTP, no bridge, no CLI. The systems
 * it runs are real: a `model` step answered by the scripted caller, and a `webhook` step against a
 * node:http server on 127.0.0.1; runs and the conversation's state are kept in an in-memory SQLite
 * store. What is checked is what a person sees (the replies), what the model was asked (and that
 * it was not asked at all where no call should be made), the runs recorded and the decisions
 * published: answer, clarify (gathering over turns with coercion and validation, giving up, expiry),
 * confirm (yes runs exactly what was shown, once; no declines), run, cancel, fallback (classifier
 * down, throwing or garbled → keywords on word boundaries), status, the hand-over to a builder (by
 * the classifier, and by code before it: builder commands, questions about the systems), and
 * the slash commands (/systems, /runs, /status, /cancel, /run, resume run); every decision with its
 * confidence and source.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, mock, test } from "node:test";
import pino from "pino";
import { sqliteSqlOf } from "../../src/core/db/sql.js";
import type { DispatchInput, TurnInput } from "../../src/backends/contract/backend.js";
import { Cancellation } from "../../src/core/util/cancel.js";
import { EventBus } from "../../src/ops/events/bus.js";
import { DecisionLog } from "../../src/request/http/admin-routes.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { ConversationMachine } from "../../src/workflows/conversation/machine.js";
import { routerOptionsSchema } from "../../src/workflows/router/options.js";
import { RouterEngine } from "../../src/workflows/router/router.js";
import { SqliteSql } from "../../src/core/db/sql.js";
import { openSystemsDb, RunStore } from "../../src/workflows/systems/db.js";
import { loadSystems } from "../../src/workflows/systems/library.js";
import { RunManager } from "../../src/workflows/systems/runner.js";
import { ScriptedModel, type ScriptedReply } from "../helpers/scripted-model.js";

const CLS = "cls";
const ANSWER = "ans";
const WRITER = "writer";
const log = pino({ level: "silent" });

/** The systems offered: a model step, a webhook (side effects), one without inputs, one that always asks, a plan of two model steps, a plan that uses it, a disabled one. */
const systems = (hook: string) => [
  {
    id: "content-pipeline",
    name: "Content Pipeline",
    description: "Writes a blog post",
    examples: ["write a blog post about X"],
    keywords: ["blog post"],
    inputs: {
      type: "object",
      properties: {
        topic: { type: "string", description: "The blog post topic" },
        tone: { type: "string", enum: ["formal", "casual", "technical"], description: "Writing tone" },
        words: { type: "integer", minimum: 100, description: "Word count" },
      },
      required: ["topic", "tone"],
    },
    run: { kind: "model", model: WRITER, prompt: "Write a ${inputs.tone} post about ${inputs.topic}" },
  },
  {
    id: "notify",
    name: "Notify",
    description: "Sends a message to the team",
    keywords: ["notify"],
    inputs: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
    run: { kind: "webhook", url: hook, timeoutSeconds: 5 },
  },
  {
    id: "daily-report",
    name: "Daily Report",
    description: "Summarises the day",
    keywords: ["report"],
    run: { kind: "model", model: WRITER, prompt: "Summarise the day" },
  },
  {
    id: "publish",
    name: "Publish",
    description: "Publishes the site",
    confirm: "always",
    run: { kind: "model", model: WRITER, prompt: "Publish the site" },
  },
  {
    id: "brief",
    name: "Brief Writer",
    description: "Outlines, then writes a brief",
    run: {
      kind: "plan",
      steps: [
        { id: "outline", uses: "model", with: { model: WRITER, prompt: "Outline" } },
        {
          id: "write",
          uses: "model",
          dependsOn: ["outline"],
          with: { model: WRITER, prompt: "Write ${steps.outline.output}" },
        },
      ],
    },
  },
  {
    id: "relay",
    name: "Relay",
    description: "Notes, then has the brief written",
    run: {
      kind: "plan",
      steps: [
        { id: "note", uses: "model", with: { model: WRITER, prompt: "Note" } },
        { id: "nested", uses: "brief", dependsOn: ["note"] },
      ],
    },
  },
  {
    id: "hidden",
    description: "Not offered in chat",
    enabled: false,
    run: { kind: "model", model: WRITER, prompt: "x" },
  },
];

type Reply = { kind: "answer"; text: string } | { kind: "handover"; model: string; preface?: string };

interface World {
  router: RouterEngine;
  conversations: ConversationMachine;
  model: ScriptedModel;
  runs: RunManager;
  events: BridgeEvent[];
  /** What the classifier answers for a message matching `re` (a verdict object, or a raw reply). */
  classify(re: RegExp, verdict: Record<string, unknown> | ScriptedReply): void;
  say(
    text: string,
    opts?: {
      conv?: string;
      key?: string;
      notFromPerson?: DispatchInput["notFromPerson"];
      /** Each piece of the answer as it comes. */
      onText?: (text: string) => void;
    },
  ): Promise<Reply>;
  /** The `decision` events' actions, in order. */
  decisions(conv?: string): string[];
  /** Calls to the classifier so far. */
  asked(): number;
  /** Every run of the conversation has stopped (and left the run manager). */
  settled(conv?: string): Promise<void>;
  close(): Promise<void>;
}

/** What the webhook server received (the inputs of each POST). */
const hooks: Array<Record<string, unknown>> = [];
/** How the webhook server answers the next POSTs (status codes; empty: 200). */
const hookStatus: number[] = [];
let server: Server;
let hookUrl: string;
const dataDir = mkdtempSync(path.join(tmpdir(), "cb-router-engine-"));
const open: World[] = [];

before(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const status = hookStatus.shift() ?? 200;
      if (status === 200)
        hooks.push((JSON.parse(Buffer.concat(chunks).toString("utf8")) as { inputs: Record<string, unknown> }).inputs);
      res.writeHead(status, { "content-type": "application/json" });
      res.end(status === 200 ? JSON.stringify({ delivered: true }) : JSON.stringify({ error: "nope" }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});

after(async () => {
  for (const w of open.splice(0)) await w.close();
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(dataDir, { recursive: true, force: true });
});

async function world(options: Record<string, unknown> = {}): Promise<World> {
  const { library, problems } = await loadSystems({
    configSystems: systems(hookUrl),
    models: new Map([
      [CLS, { router: false }],
      [ANSWER, { router: false }],
      [WRITER, { router: false }],
    ]),
  });
  assert.deepEqual(problems, []);
  const db = openSystemsDb(":memory:");
  const bus = new EventBus();
  const events: BridgeEvent[] = [];
  bus.on((e) => events.push(e));
  const model = new ScriptedModel();
  const verdicts: Array<[RegExp, Record<string, unknown> | ScriptedReply]> = [];
  model.on(CLS, (call) => {
    const message = call.prompt.split("Message:\n").pop() ?? "";
    const verdict = verdicts.find(([re]) => re.test(message))?.[1] ?? { action: "answer", confidence: 0.05 };
    if (typeof verdict === "object" && !Array.isArray(verdict) && "action" in verdict)
      return ["```json\n", JSON.stringify(verdict), "\n```"];
    return verdict as ScriptedReply;
  });
  model.on(WRITER, (call) => `POST: ${call.prompt}`);
  const runs = new RunManager({
    store: new RunStore(sqliteSqlOf(db)),
    library,
    bus,
    callModel: model.caller,
    dataDir,
    log,
    retryBaseMs: 1,
  });
  const opts = routerOptionsSchema.parse({ classifier: CLS, answer: ANSWER, ...options });
  const conversations = new ConversationMachine(new SqliteSql(db), (opts.gathering.ttlMinutes ?? 60) * 60_000, bus);
  const router = new RouterEngine("router", opts, {
    library,
    runs,
    bus,
    conversations,
    callModel: model.caller,
    log,
  });
  let n = 0;
  const w: World = {
    router,
    conversations,
    model,
    runs,
    events,
    classify: (re, verdict) => verdicts.unshift([re, verdict]),
    async say(text, opts = {}) {
      const input: DispatchInput = {
        turn: { session: { key: opts.conv ?? "conv", turn: n }, cancel: new Cancellation() } as unknown as TurnInput,
        userText: text,
        recent: [],
        messageKey: opts.key ?? `m${++n}`,
        ...(opts.notFromPerson ? { notFromPerson: opts.notFromPerson } : {}),
      };
      const d = await router.dispatch(input);
      if (d.kind === "handover") return d;
      let out = "";
      for await (const ev of d.events) {
        if (ev.type === "text") {
          out += ev.text;
          opts.onText?.(ev.text);
        } else if (ev.type === "error") assert.fail(`the router answered with an error: ${ev.error.message}`);
      }
      return { kind: "answer", text: out };
    },
    decisions: (conv = "conv") =>
      events.flatMap((e) => (e.type === "decision" && e.conversation === conv ? [e.action] : [])),
    asked: () => model.to(CLS).length,
    async settled(conv = "conv") {
      for (const r of await runs.store.list({ conversation: conv, limit: 100 })) await runs.wait(r.id);
    },
    async close() {
      await runs.close();
      db.close();
    },
  };
  open.push(w);
  return w;
}

const textOf = (r: Reply): string => {
  assert.equal(r.kind, "answer", `expected the router to answer, got a hand-over: ${JSON.stringify(r)}`);
  return (r as { text: string }).text;
};

const runOf = (w: World, conv = "conv") => w.runs.store.list({ conversation: conv, limit: 10 });

describe("router engine", () => {
  test("answer: an ordinary message is handed over to the answer model after one classifier call", async () => {
    const w = await world();
    const r = await w.say("what is the capital of France?");
    assert.deepEqual(r, { kind: "handover", model: ANSWER });
    assert.equal(w.asked(), 1);
    const call = w.model.to(CLS)[0]!;
    assert.match(call.system ?? "", /You classify ONE chat message/);
    assert.match(call.system ?? "", /- content-pipeline "Content Pipeline": Writes a blog post/);
    assert.doesNotMatch(call.system ?? "", /hidden/, "a disabled system is not offered");
    assert.match(call.prompt, /Message:\nwhat is the capital of France\?$/);
    // A run named below the match threshold is an answer too.
    w.classify(/blog/, { action: "run", system: "content-pipeline", confidence: 0.2, inputs: {} });
    assert.deepEqual(await w.say("blog thoughts?"), { kind: "handover", model: ANSWER });
    // Not the person's words: handed over without a model call.
    assert.deepEqual(await w.say("tool output", { notFromPerson: "tool_result" }), { kind: "handover", model: ANSWER });
    assert.equal(w.asked(), 2);
    assert.deepEqual(w.decisions(), ["answer", "answer", "answer"]);
    assert.equal(w.model.to(WRITER).length, 0);
    assert.deepEqual(await runOf(w), []);
  });

  test("run: a sure match with every input runs at once and streams the model step's output", async () => {
    const w = await world();
    w.classify(/cats/, {
      action: "run",
      system: "content-pipeline",
      confidence: 0.95,
      inputs: { topic: "cats", tone: "casual" },
    });
    const text = textOf(await w.say("write a casual blog post about cats"));
    assert.match(text, /^Running \*\*Content Pipeline\*\*…/);
    assert.match(text, /POST: Write a casual post about cats/);
    assert.match(text, /✓ \*\*Content Pipeline\*\* finished/);
    assert.deepEqual(
      w.model.to(WRITER).map((c) => c.prompt),
      ["Write a casual post about cats"],
    );
    const [run] = await runOf(w);
    assert.equal(run?.status, "completed");
    assert.deepEqual(run?.inputs, { topic: "cats", tone: "casual" });
    assert.equal(run?.origin, "chat");
    assert.deepEqual(w.decisions(), ["run"]);
    // A client's retry of the same message reports the run; nothing runs twice, nothing is classified.
    await w.settled();
    const retry = textOf(await w.say("write a casual blog post about cats", { key: "m1" }));
    assert.match(
      retry,
      /^\*\*Content Pipeline\*\* \(run `run[A-Za-z0-9]{16}`\) finished in \d+\.\d s\.\n\nPOST: Write a casual post/,
    );
    assert.equal((await runOf(w)).length, 1);
    assert.equal(w.asked(), 1);
  });

  test("run: a plan's model steps stream under their names as they are written; the output is not printed twice", async () => {
    const w = await world();
    const deltas = Array.from({ length: 20 }, (_, i) => `w${i} `);
    w.model.queue(WRITER, "OUTLINE-TEXT", { chunks: deltas, delayMs: 2 });
    /** Writer pieces that reached the chat while the run was still going. */
    let live = 0;
    const text = textOf(
      await w.say("/run brief", {
        onText: (t) => {
          const run = w.events.find((e) => e.type === "run.started");
          if (/^w\d+ $/.test(t) && run?.type === "run.started" && w.runs.isLive(run.runId)) live++;
        },
      }),
    );
    assert.ok(live >= 10, `writer pieces streamed while the run went on: ${live}`);
    assert.match(text, /\*\*outline\*\*: OUTLINE-TEXT\n\n- ✓ `outline` done/);
    assert.match(text, new RegExp(`\\*\\*write\\*\\*: ${deltas.join("")}\\n\\n- ✓ \`write\` done`));
    assert.equal(text.split(deltas.join("")).length, 2, "the output, streamed, is not printed again");
    assert.match(text, /✓ \*\*Brief Writer\*\* finished in \d+\.\d s\.$/);
    await w.settled();
    assert.equal((await runOf(w))[0]?.output, deltas.join(""), "the run record keeps the whole text");
    // The steps of a system a plan uses stream under `<step>/<sub-step>`; its output is not repeated either.
    w.model.queue(WRITER, "NOTE", "OUTLINE-2", ["nested ", "post"]);
    const nested = textOf(await w.say("/run relay", { conv: "relay" }));
    assert.match(nested, /\*\*note\*\*: NOTE\n/);
    assert.match(nested, /\*\*nested\/outline\*\*: OUTLINE-2\n/);
    assert.equal(nested.split("**nested/write**: nested post").length, 2, nested);
    assert.equal(nested.split("nested post").length, 2, "printed once");
    assert.match(nested, /✓ \*\*Relay\*\* finished in \d+\.\d s\.$/);
  });

  test("clarify: missing inputs are gathered over turns; an invalid value is named; '800' becomes 800", async () => {
    const w = await world();
    w.classify(/about dogs/, { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { topic: "dogs" } });
    const first = textOf(await w.say("write a blog post about dogs"));
    assert.equal(
      first,
      [
        "I can run **Content Pipeline** for you, but I need a bit more info:",
        "",
        "- **tone** (string: formal, casual, technical): Writing tone",
        "",
        "Please provide the missing details.",
      ].join("\n"),
    );
    w.classify(/loud/, { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { tone: "loud" } });
    const second = textOf(await w.say("make it loud"));
    assert.match(second, /- \*\*tone\*\* \(string: formal, casual, technical\): Writing tone — you gave "loud", which/);
    // The classifier was told what is being gathered.
    assert.match(
      w.model.to(CLS)[1]!.system ?? "",
      /Now collecting inputs for content-pipeline\. Collected: \{"topic":"dogs"\}\. Missing: tone\./,
    );
    w.classify(/formal, 800/, {
      action: "run",
      system: "content-pipeline",
      confidence: 0.6,
      inputs: { tone: "formal", words: "800" },
    });
    const third = textOf(await w.say("formal, 800 words"));
    // Gathering keeps the first confidence at least at the trigger: it runs without asking.
    assert.match(third, /^Running \*\*Content Pipeline\*\*…/);
    const [run] = await runOf(w);
    assert.deepEqual(run?.inputs, { topic: "dogs", tone: "formal", words: 800 });
    assert.deepEqual(w.decisions(), ["clarify", "clarify", "run"]);
    const gathering = w.events.filter((e) => e.type === "gathering");
    assert.deepEqual(
      gathering.map((e) => (e as { missing: string[]; round: number }).round),
      [1, 2],
    );
    // While gathering, a confident match of another system starts over with that one.
    textOf(await w.say("write a blog post about dogs"));
    w.classify(/ping the team/, { action: "run", system: "notify", confidence: 0.95, inputs: { message: "hello" } });
    assert.match(
      textOf(await w.say("actually, ping the team: hello")),
      /^Ready to run \*\*Notify\*\* with:\n\n- \*\*message\*\*: hello/,
    );
    assert.deepEqual(w.decisions().slice(-2), ["clarify", "confirm"]);
  });

  test("clarify: an unrelated question drops the gathering; it gives up after maxRounds and when its time ran out", async () => {
    const w = await world({ gathering: { maxRounds: 2, ttlMinutes: 1 } });
    w.classify(/about owls/, { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { topic: "owls" } });
    w.classify(/^hmm/, { action: "run", system: "content-pipeline", confidence: 0.9, inputs: {} });
    textOf(await w.say("a blog post about owls"));
    textOf(await w.say("hmm"));
    const gaveUp = textOf(await w.say("hmm, not sure"));
    assert.match(
      gaveUp,
      /I still don't have everything \*\*Content Pipeline\*\* needs, so I've stopped asking after 2 tries\. Nothing was run/,
    );
    assert.deepEqual(w.decisions(), ["clarify", "clarify", "give_up"]);

    // An unrelated question while gathering: the answer model, and the question is dropped.
    textOf(await w.say("a blog post about owls"));
    assert.deepEqual(await w.say("what time is it?"), { kind: "handover", model: ANSWER });

    // Left unanswered past its time: the next message hears that it was dropped, and is routed afresh.
    textOf(await w.say("a blog post about owls"));
    mock.timers.enable({ apis: ["Date"], now: Date.now() });
    try {
      mock.timers.tick(61_000);
      const late = await w.say("what was I doing?");
      assert.equal(late.kind, "handover");
      assert.match(
        (late as { preface?: string }).preface ?? "",
        /I was waiting for details to run \*\*Content Pipeline\*\*, but it has been a while/,
      );
    } finally {
      mock.timers.reset();
    }
    assert.deepEqual(w.decisions().slice(-2), ["give_up", "answer"]);
    assert.equal((await runOf(w)).length, 0);
  });

  test("confirm: side effects are shown first; 'yes' runs exactly those inputs once, with no model call; 'no' declines", async () => {
    const w = await world();
    hooks.length = 0;
    w.classify(/tell the team/, {
      action: "run",
      system: "notify",
      confidence: 0.95,
      inputs: { message: "lunch at 1" },
    });
    const ask = textOf(await w.say("tell the team lunch at 1"));
    assert.equal(
      ask,
      [
        "Ready to run **Notify** with:",
        "",
        "- **message**: lunch at 1",
        "",
        "It changes things outside this chat, so I'm checking first.",
        "",
        "Run it? (yes / no)",
      ].join("\n"),
    );
    assert.equal(hooks.length, 0, "nothing sent before yes");
    const asked = w.asked();
    const yes = textOf(await w.say("yes please", { key: "the-yes" }));
    assert.match(yes, /^Running \*\*Notify\*\*…/);
    assert.match(yes, /\{"delivered":true\}\n\n✓ \*\*Notify\*\* finished/);
    assert.deepEqual(hooks, [{ message: "lunch at 1" }]);
    assert.equal(w.asked(), asked, "no classifier call for yes");
    // A retry of the yes, and a second yes: nothing runs again.
    await w.settled();
    textOf(await w.say("yes please", { key: "the-yes" }));
    assert.deepEqual(await w.say("yes"), { kind: "handover", model: ANSWER });
    assert.equal(hooks.length, 1);
    assert.equal((await runOf(w)).length, 1);

    textOf(await w.say("tell the team lunch at 1"));
    const no = textOf(await w.say("no"));
    assert.equal(no, "OK, I won't run **Notify**.");
    assert.equal(hooks.length, 1);
    assert.deepEqual(w.decisions(), ["confirm", "run", "status", "answer", "confirm", "decline"]);
    const confirm = w.events.find((e) => e.type === "confirm") as { inputsHash?: string } | undefined;
    assert.match(confirm?.inputsHash ?? "", /^[0-9a-f]{16,}$/);
  });

  test("confirm: an unsure match and a system that always asks; another message lets the question lapse", async () => {
    const w = await world();
    w.classify(/maybe a post/, {
      action: "run",
      system: "content-pipeline",
      confidence: 0.5,
      inputs: { topic: "tea", tone: "formal" },
    });
    const ask = textOf(await w.say("maybe a post on tea"));
    assert.match(ask, /I'm not sure this is what you meant, so I'm checking first\./);
    // Anything but yes/no: the question lapses and the message is routed afresh.
    assert.deepEqual(await w.say("actually, how are you?"), { kind: "handover", model: ANSWER });
    assert.deepEqual(await w.say("yes"), { kind: "handover", model: ANSWER });
    assert.equal((await runOf(w)).length, 0);
    assert.equal(w.model.to(WRITER).length, 0);

    w.classify(/publish/, { action: "run", system: "publish", confidence: 1, inputs: {} });
    const text = textOf(await w.say("publish the site"));
    assert.match(
      text,
      /^Ready to run \*\*Publish\*\* \(it takes no inputs\)\.\n\nThis system always asks before it runs\./,
    );
    assert.match(textOf(await w.say("👍")), /Publish\*\* finished/);
    assert.deepEqual(w.decisions(), ["confirm", "answer", "answer", "confirm", "run"]);
  });

  test("cancel: 'cancel', 'never mind' and 'stop' end an open question without a model call", async () => {
    const w = await world();
    w.classify(/about frogs/, {
      action: "run",
      system: "content-pipeline",
      confidence: 0.9,
      inputs: { topic: "frogs" },
    });
    w.classify(/tell the team/, { action: "run", system: "notify", confidence: 0.95, inputs: { message: "hi" } });
    for (const word of ["cancel", "never mind", "Stop!"]) {
      textOf(await w.say("a blog post about frogs"));
      const calls = w.model.calls.length;
      assert.equal(textOf(await w.say(word)), "OK, cancelled **Content Pipeline**.");
      assert.equal(w.model.calls.length, calls, `no model call for ${JSON.stringify(word)}`);
    }
    // A confirmation is ended the same way.
    textOf(await w.say("tell the team hi"));
    const calls = w.model.calls.length;
    assert.equal(textOf(await w.say("never mind")), "OK, I won't run **Notify**.");
    assert.equal(w.model.calls.length, calls);
    assert.deepEqual(w.decisions(), [
      "clarify",
      "cancel",
      "clarify",
      "cancel",
      "clarify",
      "cancel",
      "confirm",
      "decline",
    ]);
  });

  test("cancel: the classifier's cancel and /cancel stop a run that goes on in the background", async () => {
    const w = await world({ detachAfterSeconds: 0.05 });
    w.model.queue(WRITER, { hold: true }, { hold: true });
    w.classify(/daily report/, { action: "run", system: "daily-report", confidence: 0.9, inputs: {} });
    w.classify(/call it off/, { action: "cancel", confidence: 0.9, inputs: {} });
    const started = textOf(await w.say("the daily report"));
    assert.match(started, /is still running \(run `(run[A-Za-z0-9]+)`\)/);
    const stopped = textOf(await w.say("call it off"));
    assert.match(stopped, /\*\*Daily Report\*\* \(run `run[A-Za-z0-9]+`\) was cancelled \(0 of 1 steps done\)\./);
    textOf(await w.say("the daily report"));
    const slash = textOf(await w.say("/cancel"));
    assert.match(slash, /was cancelled/);
    assert.deepEqual(
      (await runOf(w)).map((r) => r.status),
      ["cancelled", "cancelled"],
    );
    assert.match(textOf(await w.say("/cancel")), /There is nothing to cancel\.$/);
    assert.deepEqual(await w.say("call it off"), { kind: "handover", model: ANSWER }, "nothing to cancel");
  });

  test("fallback: a classifier that is down or throws → keywords on word boundaries, and the engine asks first", async () => {
    const w = await world();
    w.classify(/./, { error: "classifier is down" });
    const ask = textOf(await w.say("please send the daily report"));
    assert.match(ask, /Ready to run \*\*Daily Report\*\*.*\n\nI'm not sure this is what you meant/s);
    assert.equal(w.asked(), 1, "an error is not asked again");
    assert.match(textOf(await w.say("yes")), /Daily Report\*\* finished/);
    // Whole words only: "reporter" is not "report", "notifying" is not "notify".
    assert.deepEqual(await w.say("the reporter was notifying us"), { kind: "handover", model: ANSWER });
    w.model.on(CLS, { throws: "connection refused" });
    assert.match(
      textOf(await w.say("notify the team")),
      /^I can run \*\*Notify\*\* for you, but I need a bit more info/,
    );
    assert.deepEqual(w.decisions(), ["confirm", "run", "answer", "clarify"]);
    const fallbacks = w.events.filter((e) => e.type === "decision" && e.source === "fallback").length;
    assert.equal(fallbacks, 3);
  });

  test("fallback: a garbled reply is asked again once with the reason; garbled twice → keywords", async () => {
    const w = await world();
    w.model.queue(
      CLS,
      "I think it is the blog one, probably.",
      '{"action":"run","system":"daily-report","confidence":0.9}',
    );
    assert.match(textOf(await w.say("what happened today")), /Running \*\*Daily Report\*\*/);
    const [first, second] = w.model.to(CLS);
    assert.doesNotMatch(first!.prompt, /could not be read/);
    assert.match(
      second!.prompt,
      /Your reply could not be read as the JSON object asked for \(you wrote: "I think it is the blog one, probably\."\)/,
    );
    w.model.queue(CLS, "no idea", "still no idea");
    assert.match(textOf(await w.say("ping the team: notify them")), /I can run \*\*Notify\*\*/);
    assert.equal(w.asked(), 4);
    // While gathering, without the classifier, a lone missing input takes the whole message.
    w.model.queue(CLS, { error: "down" });
    assert.match(
      textOf(await w.say("the build is green")),
      /Ready to run \*\*Notify\*\* with:\n\n- \*\*message\*\*: the build is green/,
    );
    // And name=value pairs supply inputs.
    w.classify(/./, { error: "down" });
    textOf(await w.say("no"));
    textOf(await w.say("/run content-pipeline topic=bees"));
    assert.match(textOf(await w.say("tone=technical")), /Running \*\*Content Pipeline\*\*/);
    assert.deepEqual((await runOf(w))[0]?.inputs, { topic: "bees", tone: "technical" });
  });

  test("status, and the hand-over to a builder (by the classifier, by build words, while the builder is busy)", async () => {
    const w = await world({ builder: "bld" });
    w.classify(/how is it going/, { action: "status", confidence: 0.9, inputs: {} });
    assert.deepEqual(await w.say("how is it going?"), { kind: "handover", model: ANSWER }, "no run to report");
    w.classify(/daily report/, { action: "run", system: "daily-report", confidence: 0.9, inputs: {} });
    textOf(await w.say("the daily report"));
    assert.match(textOf(await w.say("how is it going?")), /\*\*Daily Report\*\* \(run `run[A-Za-z0-9]+`\) finished in/);
    w.classify(/change my report/, { action: "build", confidence: 0.9, inputs: {} });
    assert.deepEqual(await w.say("change my report system"), { kind: "handover", model: "bld" });
    w.classify(/./, { error: "down" });
    assert.deepEqual(await w.say("build a system that sends invoices"), { kind: "handover", model: "bld" });
    await w.conversations.setState("conv", "paused", "builder"); // the builder paused a build here
    const calls = w.asked();
    assert.deepEqual(await w.say("yes"), { kind: "handover", model: "bld" });
    assert.equal(w.asked(), calls, "the builder's conversation: no classifier call");
    // "resume chain" is the builder's command for its paused build (no run of the router is named).
    assert.deepEqual(await w.say("resume chain"), { kind: "handover", model: "bld" });
    // A run of the router named while the builder is busy is still the router's.
    const run = (await runOf(w))[0]!;
    assert.match(textOf(await w.say(`resume run ${run.id}`)), /is completed|finished/);
    assert.deepEqual(w.decisions(), ["answer", "run", "status", "build", "build", "build", "build"]);
    // Each with its confidence and source, as the Router view reads them (GET /v1/admin/router).
    const decisionLog = new DecisionLog();
    for (const e of w.events) decisionLog.onEvent(e);
    assert.deepEqual(
      decisionLog
        .snapshot()
        .reverse()
        .map((d) => [d.action, d.confidence, d.source]),
      [
        ["answer", 0.9, "classifier"],
        ["run", 0.9, "classifier"],
        ["status", 0.9, "classifier"],
        ["build", 0.9, "classifier"],
        ["build", 0.7, "fallback"],
        ["build", 1, "state"],
        ["build", 1, "state"],
      ],
    );
  });

  test("code decides what code can know: builder commands and questions about systems go to the builder before any classifier call", async () => {
    const bld = { kind: "handover", model: "bld" };
    const ans = { kind: "handover", model: ANSWER };
    const w = await world({ builder: "bld" });
    // A classifier that always says "answer", sure of itself.
    w.classify(/./, { action: "answer", confidence: 0.95, inputs: {} });
    // No canvas here and no system named: a bare "deploy" is left to the classifier (as before).
    assert.deepEqual(await w.say("deploy"), ans);
    await w.conversations.setCanvas("conv", "research-blog"); // the builder built it here
    const calls = w.asked();
    for (const text of [
      "deploy",
      "undo",
      "Pause.",
      "resume",
      "status",
      "export research-blog",
      "delete daily-report",
      "resume research-blog",
    ])
      assert.deepEqual(await w.say(text), bld, text);
    assert.deepEqual(await w.say("what does research-blog do?"), bld);
    assert.deepEqual(await w.say("which runs failed today?"), bld);
    assert.deepEqual(await w.say("Is the Daily Report deployed"), bld);
    assert.equal(w.asked(), calls, "no classifier call for what code knows");
    // Plain chat holding such a word, a request phrased as a question, an unknown id: the classifier's.
    assert.deepEqual(await w.say("I want to deploy my app to production next week"), ans);
    assert.deepEqual(await w.say("what is the capital of France?"), ans);
    assert.deepEqual(await w.say("export nothing-like-this"), ans);
    w.classify(/can you run/, { action: "run", system: "daily-report", confidence: 0.95, inputs: {} });
    assert.match(textOf(await w.say("can you run the daily report?")), /Running \*\*Daily Report\*\*/);
    await w.settled();
    // The classifier's own `ask` routes the same way.
    w.classify(/tell me about my stuff/, { action: "ask", confidence: 0.8, inputs: {} });
    assert.deepEqual(await w.say("so, tell me about my stuff"), bld);
    assert.equal(w.asked(), calls + 5);
    const decisionLog = new DecisionLog();
    for (const e of w.events) decisionLog.onEvent(e);
    const rules = decisionLog.snapshot().filter((d) => d.source === "rule");
    assert.deepEqual(
      rules.map((d) => [d.action, d.confidence]),
      [...Array(3).fill(["ask", 1]), ...Array(8).fill(["build", 1])],
    );
    assert.deepEqual(
      decisionLog
        .snapshot()
        .filter((d) => d.action === "ask" && d.source === "classifier")
        .map((d) => d.confidence),
      [0.8],
    );

    // Without a builder, nothing changes: a question about a system is the answer model's.
    const plain = await world();
    plain.classify(/./, { action: "answer", confidence: 0.95, inputs: {} });
    assert.deepEqual(await plain.say("what does daily-report do?"), ans);
    assert.deepEqual(await plain.say("undo"), ans);
  });

  test("slash commands: /systems, /run, /status, /runs, /cancel — none asks the classifier", async () => {
    const w = await world();
    hooks.length = 0;
    const list = textOf(await w.say("/systems"));
    assert.match(
      list,
      /^Systems you can run:\n\n- \*\*Content Pipeline\*\* \(`content-pipeline`\): Writes a blog post — needs topic, tone/,
    );
    assert.doesNotMatch(list, /hidden/);
    assert.equal(textOf(await w.say("/status")), "Nothing has run in this conversation yet.");
    assert.equal(textOf(await w.say("/runs")), "No runs in this conversation yet.");
    assert.match(textOf(await w.say("/run nope")), /^There is no system `nope`\.\n\nSystems you can run:/);
    assert.match(
      textOf(await w.say("/run hidden")),
      /^There is no system `hidden`\./,
      "a disabled system is not run from chat",
    );
    assert.match(
      textOf(await w.say('/run content-pipeline topic="two words')),
      /unclosed quote " .*usage: \/run <system>/,
    );
    assert.match(textOf(await w.say("/run content-pipeline topic=x tone")), /expected name=value, got "tone"/);
    assert.match(
      textOf(await w.say("/run content-pipeline topic=x")),
      /I can run \*\*Content Pipeline\*\*.*\*\*tone\*\*/s,
    );
    assert.match(textOf(await w.say("/cancel")), /OK, cancelled \*\*Content Pipeline\*\*\./);
    const ran = textOf(await w.say('/run content-pipeline topic="slash commands" tone=technical words=300'));
    assert.match(ran, /POST: Write a technical post about slash commands/);
    const [run] = await runOf(w);
    assert.deepEqual(run?.inputs, { topic: "slash commands", tone: "technical", words: 300 });
    // An explicit command still asks before a side effect.
    assert.match(
      textOf(await w.say("/run notify message=hello")),
      /Ready to run \*\*Notify\*\*.*Run it\? \(yes \/ no\)/s,
    );
    assert.equal(textOf(await w.say("/cancel")), "OK, cancelled **Notify**.");
    assert.equal(hooks.length, 0);
    assert.match(
      textOf(await w.say(`/status ${run!.id}`)),
      /\*\*Content Pipeline\*\* \(run `run[A-Za-z0-9]+`\) finished/,
    );
    assert.match(textOf(await w.say("/status run_nothere")), /I know of no run `run_nothere` in this conversation\./);
    assert.match(
      textOf(await w.say("/runs")),
      /^Recent runs:\n\n- `run[A-Za-z0-9]+` \*\*Content Pipeline\*\*: completed$/,
    );
    assert.equal(w.asked(), 0);
    assert.deepEqual(w.decisions(), [
      "list",
      "status",
      "list",
      "clarify",
      "cancel",
      "run",
      "confirm",
      "cancel",
      "status",
      "status",
      "list",
    ]);
  });

  test("resume run <id>: a failed run is shown and resumed from its failed step after yes", async () => {
    const w = await world();
    hooks.length = 0;
    hookStatus.push(404);
    w.classify(/tell the team/, { action: "run", system: "notify", confidence: 0.95, inputs: { message: "retry me" } });
    textOf(await w.say("tell the team retry me"));
    const failed = textOf(await w.say("yes"));
    assert.match(failed, /\*\*Notify\*\* \(run `(run[A-Za-z0-9]+)`\) failed at step/);
    const id = (await runOf(w))[0]!.id;
    assert.match(textOf(await w.say("resume run nosuchrun")), /I know of no run `nosuchrun` in this conversation\./);
    const calls = w.asked();
    const ask = textOf(await w.say(`resume run ${id}`));
    assert.match(
      ask,
      new RegExp(
        `^Run \`${id}\` of \\*\\*Notify\\*\\* is failed\\. Resume it from step \`[a-z0-9_-]+\`\\? \\(yes / no\\)$`,
      ),
    );
    assert.match(textOf(await w.say("yes")), /\*\*Notify\*\* finished/);
    assert.equal(w.asked(), calls, "no classifier call for resume and its yes");
    assert.equal((await w.runs.get(id))?.status, "completed");
    assert.deepEqual(hooks, [{ message: "retry me" }]);
    assert.deepEqual(w.decisions().slice(-2), ["confirm", "resume"]);
  });
});
