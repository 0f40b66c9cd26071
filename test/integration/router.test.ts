/**
 * The router end to end: a real bridge, the official `openai` client, real processes for command
 * systems, and a fake OpenAI upstream (the only faked part) that plays both the classifier and the
 * answer model. What is checked is what a person chatting through OpenClaw sees: transparent
 * answers, the clarify text, gathering across turns and across a restart, confirmation by hash and
 * exactly once, cancel without a model call, slash commands, the classifier's retry and fallback,
 * a plan's model step streamed as it is written, detach and the report on the next turn, a client
 * that goes away, and the HTTP API for runs.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { BridgeEvent } from "../../src/wire/events.js";
import { contentPipeline as seedSystem } from "../../testkit/systems.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";

const NODE = process.execPath;

/** The classifier's view: the person's message is what follows "Message:" in its user text. */
const isClassifier = (req: RecordedRequest) =>
  JSON.stringify(req.body?.messages?.[0] ?? "").includes("You classify ONE chat message");
const messageOf = (req: RecordedRequest) => req.lastUser.split("Message:\n").pop() ?? "";

type ClassifierRule = [RegExp, Record<string, unknown> | "bad" | "down"];

interface Upstream {
  fake: FakeOpenAI;
  rules: ClassifierRule[];
  answer: (req: RecordedRequest) => Reply;
  classifierCalls(): number;
}

async function startUpstream(): Promise<Upstream> {
  const u: Upstream = {
    fake: undefined as unknown as FakeOpenAI,
    rules: [],
    answer: (req) => ({
      kind: "text",
      chunks: ["ANSWER: ", req.lastUser.slice(0, 80)],
      usage: { prompt_tokens: 11, completion_tokens: 3 },
    }),
    classifierCalls: () => u.fake.requests.filter(isClassifier).length,
  };
  u.fake = await startFakeOpenAI((req) => {
    if (!isClassifier(req)) return u.answer(req);
    const msg = messageOf(req);
    const rule = u.rules.find(([re]) => re.test(msg));
    const verdict = rule?.[1] ?? { action: "answer", confidence: 0.05 };
    if (verdict === "down") return { kind: "error", status: 500, message: "classifier is down" };
    if (verdict === "bad") return { kind: "text", chunks: ["I think it is the blog one, probably."] };
    return { kind: "text", chunks: ["```json\n", JSON.stringify(verdict), "\n```"] };
  });
  return u;
}

const contentPipeline = seedSystem();

function config(
  up: Upstream,
  extra: { systems?: unknown[]; router?: Record<string, unknown>; server?: Record<string, unknown> } = {},
) {
  return {
    server: extra.server ?? {},
    backends: {
      up: { type: "openai", baseUrl: up.fake.url, apiKey: "x" },
      router: { type: "router", classifier: "cls", answer: "ans", ...(extra.router ?? {}) },
    },
    models: [
      { id: "cls", backend: "up" },
      { id: "ans", backend: "up" },
      { id: "router", backend: "router" },
    ],
    systems: extra.systems ?? [contentPipeline],
  };
}

/** One conversation as a client keeps it: the history grows with each answer. */
class Chat {
  readonly messages: OpenAI.ChatCompletionMessageParam[] = [];
  /** The last request's messages (a retry sends them again, as OpenClaw does after a timeout). */
  private sent: OpenAI.ChatCompletionMessageParam[] = [];
  constructor(
    private b: TestBridge,
    readonly key: string,
    private readonly apiKey = "k",
  ) {}
  client() {
    return new OpenAI({ baseURL: this.b.baseURL, apiKey: this.apiKey, maxRetries: 0 });
  }
  async say(
    text: string,
    opts: { retry?: boolean; signal?: AbortSignal; onText?: (t: string) => void } = {},
  ): Promise<{ text: string; finish?: string | null; toolCalls: number }> {
    if (!opts.retry)
      this.messages.push({
        role: "user",
        content: `[Sat 2026-11-21 09:${String(this.messages.length).padStart(2, "0")} UTC] ${text}`,
      });
    if (!opts.retry) this.sent = [...this.messages];
    const stream = await this.client().chat.completions.create(
      { model: "router", messages: this.sent, stream: true, stream_options: { include_usage: true } },
      { headers: { "x-session-id": this.key }, signal: opts.signal },
    );
    let out = "";
    let finish: string | null | undefined;
    let toolCalls = 0;
    for await (const c of stream) {
      const d = c.choices[0]?.delta;
      if (d?.content) {
        out += d.content;
        opts.onText?.(d.content);
      }
      if (d?.tool_calls) toolCalls += d.tool_calls.filter((t) => t.id).length;
      if (c.choices[0]?.finish_reason) finish = c.choices[0].finish_reason;
    }
    if (!opts.retry) this.messages.push({ role: "assistant", content: out });
    return { text: out, finish, toolCalls };
  }
  with(b: TestBridge): this {
    this.b = b;
    return this;
  }
}

const CLARIFY = [
  "I can run **Content Pipeline** for you, but I need a bit more info:",
  "",
  "- **tone** (string: formal, casual, technical): Writing tone",
  "",
  "Please provide the missing details.",
].join("\n");

describe("router", () => {
  let up: Upstream;
  let b: TestBridge;
  let events: BridgeEvent[];
  const runsOf = async (conv: string) =>
    (
      (await (await fetch(`${b.baseURL}/runs?conversation=${conv}`)).json()) as {
        data: Array<{ id: string; status: string; inputs: unknown; output: unknown }>;
      }
    ).data;

  before(async () => {
    up = await startUpstream();
    b = await startTestBridge(config(up), { retryBaseMs: 20 });
    events = [];
    b.bus.on((e) => events.push(e));
  });
  after(async () => {
    await b?.close();
    await up?.fake.close();
    cleanup(b.dataDir);
  });

  test("an everyday question is a transparent hand-over to the answer model (text, tool calls, usage)", async () => {
    const calls = up.classifierCalls();
    const chat = new Chat(b, "everyday");
    const res = await chat.say("what is the capital of France?");
    assert.match(res.text, /^ANSWER: .*capital of France/);
    assert.equal(res.finish, "stop");
    assert.equal(up.classifierCalls() - calls, 1, "one classifier call per routed message");

    // Tool calls of the answer model reach the client as they would directly; the tool-result
    // turn that follows is handed over without asking the classifier.
    up.answer = (req) =>
      req.body.messages.at(-1).role === "tool"
        ? { kind: "text", chunks: ["It is sunny."] }
        : { kind: "tool_calls", calls: [{ name: "get_weather", arguments: { city: "Paris" } }] };
    try {
      const client = chat.client();
      const tools = [
        {
          type: "function" as const,
          function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
        },
      ];
      chat.messages.push({ role: "user", content: "[Sat 2026-11-21 10:00 UTC] weather in Paris?" });
      const first = await client.chat.completions.create(
        { model: "router", messages: chat.messages, tools },
        { headers: { "x-session-id": chat.key } },
      );
      assert.equal(first.choices[0]!.finish_reason, "tool_calls");
      const call = first.choices[0]!.message.tool_calls![0]!;
      assert.equal(call.type === "function" && call.function.name, "get_weather");
      assert.ok(first.usage && first.usage.total_tokens > 0);
      const before = up.classifierCalls();
      chat.messages.push(first.choices[0]!.message, { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" });
      const second = await client.chat.completions.create(
        { model: "router", messages: chat.messages, tools },
        { headers: { "x-session-id": chat.key } },
      );
      assert.equal(second.choices[0]!.message.content, "It is sunny.");
      assert.equal(up.classifierCalls(), before, "a tool result never goes to the classifier");
      // The answer model got the tools and the whole history, as if asked directly.
      const last = up.fake.requests.filter((r) => !isClassifier(r)).at(-1)!;
      assert.equal(last.body.tools[0].function.name, "get_weather");
      assert.equal(last.body.messages.at(-1).role, "tool");
    } finally {
      up.answer = (req) => ({ kind: "text", chunks: ["ANSWER: ", req.lastUser.slice(0, 80)] });
    }
  });

  test("missing input → the seed's clarify text; the next message completes the run", async () => {
    up.rules = [
      [
        /blog post about cats/,
        { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { topic: "cats" } },
      ],
      [/make it casual/, { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { tone: "casual" } }],
    ];
    const chat = new Chat(b, "gather");
    const first = await chat.say("write a blog post about cats");
    assert.equal(first.text, CLARIFY);
    const g = events.find((e) => e.type === "gathering" && e.conversation === "gather");
    assert.ok(g && g.type === "gathering" && g.missing.includes("tone") && g.collected.includes("topic"));
    const second = await chat.say("make it casual");
    assert.match(second.text, /^Running \*\*Content Pipeline\*\*…/);
    assert.match(second.text, /post about cats in casual tone, any words/);
    const runs = await runsOf("gather");
    assert.equal(runs.length, 1);
    assert.equal(runs[0]!.status, "completed");
    assert.deepEqual(runs[0]!.inputs, { topic: "cats", tone: "casual" });
  });

  test("an invalid value is named with the allowed values; '800' becomes 800 where the schema says integer", async () => {
    up.rules = [
      [
        /article on dogs/,
        {
          action: "run",
          system: "content-pipeline",
          confidence: 0.95,
          inputs: { topic: "dogs", tone: "sarcastic", words: "800" },
        },
      ],
      [/formal then/, { action: "run", system: "content-pipeline", confidence: 0.95, inputs: { tone: "Formal" } }],
    ];
    const chat = new Chat(b, "invalid");
    const first = await chat.say("draft an article on dogs, sarcastic, 800 words");
    assert.match(first.text, /\*\*tone\*\* \(string: formal, casual, technical\)/);
    assert.match(first.text, /sarcastic/);
    const second = await chat.say("formal then");
    assert.match(second.text, /post about dogs in formal tone, 800 words/);
    const run = (await runsOf("invalid"))[0]!;
    assert.deepEqual(run.inputs, { topic: "dogs", tone: "formal", words: 800 });
  });

  test("'cancel' while gathering clears the state without a model call; an unrelated question drops it", async () => {
    up.rules = [
      [
        /blog post about owls/,
        { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { topic: "owls" } },
      ],
    ];
    const chat = new Chat(b, "cancel-gather");
    assert.equal(
      (await chat.say("write a blog post about owls")).text,
      CLARIFY.replace("Content Pipeline", "Content Pipeline"),
    );
    const calls = up.classifierCalls();
    const res = await chat.say("never mind");
    assert.equal(up.classifierCalls(), calls, "no classifier call for cancel");
    assert.doesNotMatch(res.text, /ANSWER/);
    // Gathering is gone: "casual" is now an ordinary message.
    const next = await chat.say("casual");
    assert.match(next.text, /^ANSWER/);
    assert.equal((await runsOf("cancel-gather")).length, 0);

    const chat2 = new Chat(b, "digress");
    await chat2.say("write a blog post about owls");
    const off = await chat2.say("by the way, how tall is Everest?");
    assert.match(off.text, /^ANSWER/);
    const after = await chat2.say("casual");
    assert.match(after.text, /^ANSWER/, "the gathering was dropped by the unrelated question");
  });

  test("gathering gives up politely after maxRounds, and when its time ran out", async () => {
    up.rules = [
      [
        /blog post about frogs/,
        { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { topic: "frogs" } },
      ],
      [/hmm|not sure/, { action: "run", system: "content-pipeline", confidence: 0.9, inputs: {} }],
    ];
    const rounds = await startTestBridge(config(up, { router: { gathering: { maxRounds: 2, ttlMinutes: 60 } } }));
    try {
      const chat = new Chat(rounds, "rounds");
      assert.equal((await chat.say("write a blog post about frogs")).text, CLARIFY);
      assert.equal((await chat.say("hmm")).text, CLARIFY, "asked a second time");
      const gaveUp = await chat.say("not sure");
      assert.doesNotMatch(gaveUp.text, /need a bit more info/);
      assert.match(gaveUp.text, /Content Pipeline/);
      assert.match((await chat.say("casual")).text, /^ANSWER/, "the question is gone");
    } finally {
      await rounds.close();
    }
    const ttl = await startTestBridge(config(up, { router: { gathering: { maxRounds: 4, ttlMinutes: 0.0005 } } }));
    try {
      const chat = new Chat(ttl, "ttl");
      assert.equal((await chat.say("write a blog post about frogs")).text, CLARIFY);
      await new Promise((r) => setTimeout(r, 100));
      const late = await chat.say("by the way, what time is it?");
      assert.match(
        late.text,
        /Content Pipeline[\s\S]*ANSWER/,
        "an expired question is mentioned, then the message answered",
      );
    } finally {
      await ttl.close();
    }
  });

  test("slash commands take no classifier call", async () => {
    const chat = new Chat(b, "slash");
    const calls = up.classifierCalls();
    assert.match((await chat.say("/systems")).text, /content-pipeline/);
    const run = await chat.say('/run content-pipeline topic="slash commands" tone=technical words=5');
    assert.match(run.text, /post about slash commands in technical tone, 5 words/);
    assert.match((await chat.say("/status")).text, /finished/);
    assert.match((await chat.say("/runs")).text, /content-pipeline|Content Pipeline/);
    assert.match((await chat.say("/cancel")).text, /nothing to cancel/i);
    assert.match((await chat.say("/run nope")).text, /no system `nope`/);
    assert.equal(up.classifierCalls(), calls);
  });

  test("a reply that does not parse is asked again once; a classifier that is down falls back to keywords on word boundaries", async () => {
    up.rules = [
      [/blog post about rain/, "bad"],
      [/address|blog post about snow/, "down"],
    ];
    const chat = new Chat(b, "fallback");
    let calls = up.classifierCalls();
    const res = await chat.say("write a blog post about rain");
    assert.equal(up.classifierCalls() - calls, 2, "asked again once");
    // The fallback matched the examples: it asks first (never runs on a keyword match alone), here for the missing tone.
    assert.match(res.text, /Content Pipeline/);
    calls = up.classifierCalls();
    const addr = await new Chat(b, "fallback-2").say("what is my address?");
    assert.equal(up.classifierCalls() - calls, 1, "an upstream error is not asked again");
    assert.match(addr.text, /^ANSWER/, "'address' is not a keyword match for anything");
  });

  test("side effects: confirm shows the inputs; 'yes' runs them once; a second 'yes' and a retried request do not run again", async () => {
    const marker = path.join(b.dataDir, "sent.log");
    const notify = {
      id: "notify",
      name: "Notify Team",
      description: "Sends a message to the team",
      inputs: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
      run: {
        kind: "command",
        argv: [
          NODE,
          "-e",
          "require('fs').appendFileSync(process.argv[1], process.argv[2] + '\\n'); console.log('sent')",
          marker,
          "${inputs.text}",
        ],
      },
    };
    const b2 = await startTestBridge(config(up, { systems: [contentPipeline, notify] }));
    try {
      up.rules = [
        [/tell the team/, { action: "run", system: "notify", confidence: 0.95, inputs: { text: "standup moved" } }],
      ];
      const chat = new Chat(b2, "confirm");
      const ask = await chat.say("tell the team standup moved");
      assert.match(ask.text, /\*\*text\*\*: standup moved/);
      assert.match(ask.text, /yes \/ no/);
      assert.ok(!existsSync(marker), "nothing ran before yes");
      const calls = up.classifierCalls();
      const yes = await chat.say("yes");
      assert.match(yes.text, /sent/);
      // OpenClaw retries a request that timed out: the same request again.
      const retried = await chat.say("yes", { retry: true });
      assert.match(retried.text, /run `run/);
      const again = await chat.say("yes");
      assert.equal(up.classifierCalls() - calls, 1, "only the last 'yes' (nothing pending) was classified");
      assert.doesNotMatch(again.text, /sent\n/);
      assert.equal(readFileSync(marker, "utf8"), "standup moved\n", "exactly one run");

      // "no" declines without running.
      await chat.say("tell the team standup moved");
      const no = await chat.say("no");
      assert.match(no.text, /Notify Team/);
      assert.equal(readFileSync(marker, "utf8"), "standup moved\n");
    } finally {
      await b2.close();
    }
  });

  test("gathering survives a restart between the question and the answer", async () => {
    const dataDir = tempDir("cb-router-restart-");
    up.rules = [
      [
        /blog post about bees/,
        { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { topic: "bees" } },
      ],
      [
        /technical please/,
        { action: "run", system: "content-pipeline", confidence: 0.9, inputs: { tone: "technical" } },
      ],
    ];
    let b1 = await startTestBridge({ ...config(up), dataDir });
    try {
      const chat = new Chat(b1, "restart");
      assert.equal((await chat.say("write a blog post about bees")).text, CLARIFY);
      await b1.close();
      b1 = await startTestBridge({ ...config(up), dataDir });
      const res = await chat.with(b1).say("technical please");
      assert.match(res.text, /post about bees in technical tone/);
    } finally {
      await b1.close();
      cleanup(dataDir);
    }
  });

  test("a long run detaches with its id; the next turn reports the result first", async () => {
    const slow = {
      id: "slow",
      name: "Slow Job",
      description: "takes a while",
      sideEffects: false,
      run: { kind: "command", argv: [NODE, "-e", "setTimeout(() => console.log('slow job done'), 1500)"] },
    };
    const b2 = await startTestBridge(config(up, { systems: [slow], router: { detachAfterSeconds: 0.3 } }));
    try {
      const chat = new Chat(b2, "detach");
      const first = await chat.say("/run slow");
      assert.match(first.text, /still running \(run `(run\w+)`\)/);
      const id = /run `(run\w+)`/.exec(first.text)![1]!;
      assert.ok(
        await eventually(
          async () =>
            ((await (await fetch(`${b2.baseURL}/runs/${id}`)).json()) as { status: string }).status === "completed",
          10_000,
        ),
      );
      const next = await chat.say("thanks, anything else?");
      assert.match(next.text, /\*\*Slow Job\*\* \(run `run\w+`\) finished[\s\S]*slow job done[\s\S]*ANSWER/);
      const later = await chat.say("ok");
      assert.doesNotMatch(later.text, /Slow Job/, "reported once");
    } finally {
      await b2.close();
    }
  });

  test("a plan's writer step streams to the chat as it is written; the run record has the whole text", async () => {
    const post = {
      id: "post-writer",
      name: "Post Writer",
      sideEffects: false,
      inputs: { type: "object", required: ["topic"], properties: { topic: { type: "string" } } },
      run: {
        kind: "plan",
        steps: [
          { id: "outline", uses: "model", with: { model: "ans", prompt: "Outline a post on ${inputs.topic}" } },
          {
            id: "writer",
            uses: "model",
            dependsOn: ["outline"],
            with: { model: "ans", prompt: "WRITE the post from: ${steps.outline.output}" },
          },
        ],
      },
    };
    const deltas = Array.from({ length: 20 }, (_, i) => `d${i} `);
    const answer = up.answer;
    up.answer = (req) =>
      req.lastUser.startsWith("WRITE") ? { kind: "text", chunks: deltas, delayMs: 40 } : answer(req);
    const b2 = await startTestBridge(config(up, { systems: [post] }));
    const seen: BridgeEvent[] = [];
    b2.bus.on((e) => seen.push(e));
    try {
      /** Writer pieces the client had before the run ended. */
      let live = 0;
      const res = await new Chat(b2, "stream").say("/run post-writer topic=wind", {
        onText: (t) => {
          if (deltas.some((d) => t.includes(d)) && !seen.some((e) => e.type === "run.completed")) live++;
        },
      });
      assert.ok(live >= 10, `separate writer chunks before the run ended: ${live}`);
      const whole = deltas.join("");
      assert.match(res.text, /\*\*outline\*\*: ANSWER: Outline a post on wind/);
      assert.ok(res.text.includes(`**writer**: ${whole}`), res.text);
      assert.equal(res.text.split(whole).length, 2, "the output, streamed, is not printed again");
      assert.match(res.text, /✓ \*\*Post Writer\*\* finished in/);
      const id = seen.find((e) => e.type === "run.completed")?.runId;
      assert.ok(id, "the run completed");
      const rec = (await (await fetch(`${b2.baseURL}/runs/${id}`)).json()) as { status: string; output: unknown };
      assert.equal(rec.status, "completed");
      assert.equal(rec.output, whole);
    } finally {
      up.answer = answer;
      await b2.close();
    }
  });

  test("a client that goes away cancels the run attached to its turn (the process group is ended)", async () => {
    const pidFile = path.join(b.dataDir, "long.pid");
    const long = {
      id: "long",
      name: "Long Job",
      sideEffects: false,
      run: { kind: "command", argv: ["/bin/sh", "-c", `echo $$ > ${pidFile}; echo started; sleep 30`] },
    };
    const b2 = await startTestBridge(config(up, { systems: [long] }));
    try {
      const chat = new Chat(b2, "abort");
      const ac = new AbortController();
      // (the openai client ends an aborted stream quietly)
      await chat
        .say("/run long", { signal: ac.signal, onText: (t) => t.includes("started") && ac.abort() })
        .catch(() => undefined);
      assert.ok(ac.signal.aborted, "the client went away once the command had started");
      const runs = async () =>
        ((await (await fetch(`${b2.baseURL}/runs?conversation=abort`)).json()) as { data: Array<{ status: string }> })
          .data;
      assert.ok(await eventually(async () => (await runs())[0]?.status === "cancelled", 10_000), "run cancelled");
      const pid = Number(readFileSync(pidFile, "utf8"));
      assert.ok(
        await eventually(() => {
          try {
            process.kill(pid, 0);
            return false;
          } catch {
            return true;
          }
        }, 10_000),
        "command ended",
      );
    } finally {
      await b2.close();
    }
  });

  test("maxConcurrent 1: routing never deadlocks on its own classifier call, nor a run on its model step", async () => {
    const summarise = {
      id: "summarise",
      name: "Summariser",
      sideEffects: false,
      inputs: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
      run: { kind: "model", model: "ans", prompt: "Summarise: ${inputs.text}" },
    };
    const b2 = await startTestBridge(
      config(up, { systems: [summarise], server: { maxConcurrent: 1, queueTimeoutSeconds: 5 } }),
    );
    try {
      up.rules = [
        [/summarise this/, { action: "run", system: "summarise", confidence: 0.9, inputs: { text: "a long story" } }],
      ];
      const res = await new Chat(b2, "one-slot").say("summarise this: a long story");
      assert.match(res.text, /ANSWER: Summarise: a long story/);
    } finally {
      await b2.close();
    }
  });

  test("decisions and state changes are published on the event bus", () => {
    const types = new Set(events.map((e) => e.type));
    for (const t of [
      "decision",
      "gathering",
      "state",
      "run.started",
      "step.started",
      "step.completed",
      "run.completed",
      "run.output",
    ])
      assert.ok(types.has(t as BridgeEvent["type"]), `event ${t}`);
    const actions = new Set(events.flatMap((e) => (e.type === "decision" ? [e.action] : [])));
    for (const a of ["answer", "clarify", "run", "cancel", "list", "status"])
      assert.ok(actions.has(a as never), `decision ${a}`);
  });
});

describe("systems and runs over HTTP", () => {
  let up: Upstream;
  let b: TestBridge;
  const KEY = "test-key-123456";
  const api = (p: string, init: RequestInit = {}) =>
    fetch(`${b.baseURL}${p}`, {
      ...init,
      headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json", ...(init.headers ?? {}) },
    });
  const counter = () => path.join(b.dataDir, "steps.count");

  before(async () => {
    up = await startUpstream();
    const dataDir = tempDir("cb-runs-http-");
    b = await restart(up, dataDir, KEY);
  });
  after(async () => {
    await b?.close();
    await up?.fake.close();
    cleanup(b.dataDir);
  });

  test("GET /v1/systems lists them behind the API key", async () => {
    assert.equal((await fetch(`${b.baseURL}/systems`)).status, 401);
    const list = (await (await api("/systems")).json()) as {
      data: Array<{ id: string; side_effects: boolean; inputs: unknown }>;
    };
    assert.deepEqual(list.data.map((s) => s.id).sort(), ["content-pipeline", "two-steps"]);
    assert.equal((await api("/systems/nope")).status, 404);
  });

  test("POST /v1/systems/:id/runs checks the inputs and names what is missing", async () => {
    const bad = await api("/systems/content-pipeline/runs", {
      method: "POST",
      body: JSON.stringify({ inputs: { topic: "x", words: "many" } }),
    });
    assert.equal(bad.status, 400);
    const err = ((await bad.json()) as { error: { message: string; param: string } }).error;
    assert.match(err.message, /missing tone/);
    assert.match(err.message, /words/);
    const notJson = await api("/systems/content-pipeline/runs", { method: "POST", body: "{" });
    assert.equal(notJson.status, 400);
    const ok = await api("/systems/content-pipeline/runs", {
      method: "POST",
      body: JSON.stringify({ inputs: { topic: "http", tone: "formal" }, wait: true }),
    });
    assert.equal(ok.status, 200);
    const run = (await ok.json()) as { id: string; status: string; output: string };
    assert.equal(run.status, "completed");
    assert.match(run.output, /post about http in formal tone/);
    const got = (await (await api(`/runs/${run.id}`)).json()) as { steps: Array<{ status: string }> };
    assert.equal(got.steps[0]!.status, "completed");
  });

  test("pause, resume from the first unfinished step, cancel", async () => {
    const started = (await (await api("/systems/two-steps/runs", { method: "POST", body: "{}" })).json()) as {
      id: string;
      status: string;
    };
    assert.equal(started.status, "pending", "written before it starts");
    const get = async () =>
      (await (await api(`/runs/${started.id}`)).json()) as {
        status: string;
        steps: Array<{ id: string; status: string }>;
        output: unknown;
      };
    assert.ok(await eventually(async () => (await get()).steps[1]!.status === "running", 10_000));
    const paused = (await (await api(`/runs/${started.id}/pause`, { method: "POST" })).json()) as { status: string };
    assert.equal(paused.status, "paused");
    assert.equal((await api(`/runs/${started.id}/pause`, { method: "POST" })).status, 409);
    const resumed = await api(`/runs/${started.id}/resume`, { method: "POST" });
    assert.equal(resumed.status, 200);
    assert.ok(await eventually(async () => (await get()).status === "completed", 10_000));
    assert.match(String((await get()).output), /two after one/);
    assert.equal(readFileSync(counter(), "utf8"), "first\n", "the completed first step was not run again");

    const other = (await (await api("/systems/two-steps/runs", { method: "POST", body: "{}" })).json()) as {
      id: string;
    };
    const cancelled = (await (await api(`/runs/${other.id}/cancel`, { method: "POST" })).json()) as { status: string };
    assert.equal(cancelled.status, "cancelled");
    assert.equal((await api(`/runs/${other.id}/cancel`, { method: "POST" })).status, 409);
    assert.equal((await api(`/runs/nope/resume`, { method: "POST" })).status, 404);
    const list = (await (await api("/runs?status=cancelled")).json()) as { data: Array<{ id: string }> };
    assert.ok(list.data.some((r) => r.id === other.id));
    assert.equal((await api("/runs?status=bogus")).status, 400);
  });

  test("a run the bridge stopped under becomes interrupted and is resumed only when asked", async () => {
    writeFileSync(counter(), "");
    const started = (await (
      await api("/systems/two-steps/runs", { method: "POST", body: JSON.stringify({ conversation: "resume-chat" }) })
    ).json()) as { id: string };
    assert.ok(
      await eventually(
        async () =>
          ((await (await api(`/runs/${started.id}`)).json()) as { steps: Array<{ status: string }> }).steps[1]!
            .status === "running",
        10_000,
      ),
    );
    const dataDir = b.dataDir;
    await b.close();
    b = await restart(up, dataDir, KEY);
    const rec = (await (await api(`/runs/${started.id}`)).json()) as { status: string };
    assert.equal(rec.status, "interrupted");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(
      ((await (await api(`/runs/${started.id}`)).json()) as { status: string }).status,
      "interrupted",
      "never re-run silently",
    );

    const chat = new Chat(b, "resume-chat", KEY);
    const first = await chat.say("thanks");
    assert.match(first.text, /interrupted/);
    const ask = await chat.say(`resume run ${started.id}`);
    assert.match(ask.text, /Resume it from step `second`\? \(yes \/ no\)/);
    const yes = await chat.say("yes");
    assert.match(yes.text, /two after one/);
    assert.equal(readFileSync(counter(), "utf8"), "first\n", "resumed from the first unfinished step");
  });
});

/** The HTTP suite's bridge (again, on the same data directory after a stop). */
async function restart(up: Upstream, dataDir: string, key: string): Promise<TestBridge> {
  const plan = {
    id: "two-steps",
    name: "Two Steps",
    sideEffects: false,
    run: {
      kind: "plan",
      steps: [
        {
          id: "first",
          uses: "command",
          with: {
            argv: [
              NODE,
              "-e",
              "require('fs').appendFileSync(process.argv[1], 'first\\n'); console.log('one')",
              path.join(dataDir, "steps.count"),
            ],
          },
        },
        {
          id: "second",
          uses: "command",
          dependsOn: ["first"],
          with: {
            argv: [
              NODE,
              "-e",
              "setTimeout(() => console.log('two after ' + process.argv[1]), 1500)",
              "${steps.first.output}",
            ],
          },
        },
      ],
    },
  };
  return startTestBridge(
    { ...config(up, { systems: [contentPipeline, plan], server: { apiKeys: [key] } }), dataDir },
    { retryBaseMs: 20 },
  );
}
