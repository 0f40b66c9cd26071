/**
 * The stateless prompt builder: the v4 regression (246 history messages cut off the user's
 * question), budgets with a correct running total, cuts from the oldest history first, the user
 * message never cut, tool results and live data within their budget, per-model budgets.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { resolveConfig } from "../../src/core/config/load.js";
import { DEFAULT_CONTEXT, DEFAULT_PREAMBLE, type ContextBudget } from "../../src/core/config/schema.js";
import { findCurrentUserTurn } from "../../src/request/context/metadata.js";
import {
  buildStatelessPrompt,
  fitHistory,
  renderHistory,
  systemText,
  type BuiltPrompt,
} from "../../src/request/context/stateless.js";
import type { ChatMessage } from "../../src/request/chat-api/schema.js";
import {
  openclawRequest,
  openclawSystemPrompt,
  type Generation,
  type OpenClawTurn,
} from "../../testkit/openclaw-request.js";

const HEADER = "CONVERSATION SO FAR:\n";
const budget = (b: Partial<ContextBudget> = {}): ContextBudget => ({ ...DEFAULT_CONTEXT, ...b });

/** Deterministic PRNG (mulberry32) so that "random" cases are reproducible. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)) };
}

const WORDS = [
  "deploy",
  "the",
  "server",
  "logs",
  "error",
  "budget",
  "tomorrow",
  "meeting",
  "otter",
  "coffee",
  "please",
  "check",
  "weather",
  "Tallinn",
  "invoice",
  "rust",
  "python",
  "why",
  "because",
  "done",
];

/** `n` realistic past turns (alternating user/assistant), single-line texts of varying length. */
function pastTurns(n: number, seed = 1): OpenClawTurn[] {
  const r = rng(seed);
  return Array.from({ length: n }, (_, i) => {
    const words = Array.from({ length: r.int(3, 60) }, () => WORDS[r.int(0, WORDS.length - 1)]).join(" ");
    return { role: i % 2 === 0 ? "user" : "assistant", text: `#${i} ${words}` } as OpenClawTurn;
  });
}

function request(
  turns: OpenClawTurn[],
  gen: Generation,
  extra: Parameters<typeof openclawRequest>[3] = {},
): ChatMessage[] {
  return (openclawRequest("m", turns, gen, extra) as { messages: ChatMessage[] }).messages;
}

/** The history lines kept in a built prompt (entries are single-line in these tests). */
function keptHistory(built: BuiltPrompt): string[] {
  const text = built.prompt.text;
  if (!text.startsWith(HEADER)) return [];
  const end = text.indexOf("\n\n", HEADER.length);
  return text.slice(HEADER.length, end).split("\n");
}

/** The prompt exactly as a backend receives it (see src/backends/opencode/backend.ts). */
const whole = (b: BuiltPrompt) => (b.prompt.system ? `${b.prompt.system}\n\n${b.prompt.text}` : b.prompt.text);

const userBlock = (text: string) => `USER: ${text}\n\nRespond:`;

describe("the v4 regression: 246 history messages", () => {
  for (const gen of ["2026.5", "2026.9"] as const) {
    test(`${gen}: the user message is whole, history within budget, newest kept in order`, () => {
      const question = "so what is the capital of Estonia, and how far is it from Helsinki by ferry?";
      const turns = [...pastTurns(246), { role: "user", text: question } as OpenClawTurn];
      const messages = request(turns, gen);
      assert.equal(messages.length, 248, "system + 246 history + the new message");
      assert.ok(JSON.stringify(messages).length > 60_000, "a realistic, large request");

      const b = budget();
      const built = buildStatelessPrompt(messages, b);

      // The user's question is there, whole, at the end.
      assert.equal(built.userText, question);
      assert.ok(built.prompt.text.endsWith(`\n\n${userBlock(question)}`), "the prompt ends with the question");

      // History: within maxHistoryChars with a correct running total.
      const kept = keptHistory(built);
      assert.ok(kept.length >= 5, `some history is kept (${kept.length})`);
      const runningTotal = kept.reduce((n, e) => n + e.length + 1, 0);
      assert.ok(runningTotal <= b.maxHistoryChars, `kept history ${runningTotal} ≤ ${b.maxHistoryChars}`);
      assert.equal(built.stats.historyEntries, kept.length);
      assert.equal(built.stats.historyEntries + built.stats.historyDropped, 246);

      // The kept entries are the NEWEST, in order.
      const all = renderHistory(messages.slice(0, -1));
      assert.equal(all.length, 246);
      assert.deepEqual(kept, all.slice(-kept.length));
      assert.match(kept.at(-1)!, /^ASSISTANT: #245 /);
      // And it is as much as fits: one more entry would have broken the budget.
      const next = all[all.length - kept.length - 1]!;
      assert.ok(runningTotal + next.length + 1 > b.maxHistoryChars, "no room was wasted");

      // Metadata never reaches the prompt.
      const w = whole(built);
      assert.ok(!w.includes("untrusted metadata"));
      assert.ok(!w.includes("[Sat 2026-11-21"));
      assert.ok(!w.includes("sessionId="));

      // The whole prompt is within maxPromptChars.
      assert.ok(w.length <= b.maxPromptChars, `${w.length} ≤ ${b.maxPromptChars}`);
      assert.equal(built.stats.totalChars, w.length);
    });
  }

  test("history with tool calls and tool results is rendered and budgeted the same way", () => {
    const messages: ChatMessage[] = [{ role: "system", content: openclawSystemPrompt() }];
    for (let i = 0; i < 82; i++) {
      messages.push({ role: "user", content: `[Sat 2026-11-21 09:13 UTC] question ${i}` });
      messages.push({
        role: "assistant",
        content: null,
        tool_calls: [
          { id: `call${i}`, type: "function", function: { name: "web_search", arguments: `{"q":"item ${i}"}` } },
        ],
      });
      messages.push({ role: "tool", tool_call_id: `call${i}`, content: `result ${i} ` + "data ".repeat(100) });
    }
    messages.push({ role: "user", content: "[Sat 2026-11-21 09:13 UTC] and now?" });
    assert.equal(messages.length, 248);
    const b = budget();
    const built = buildStatelessPrompt(messages, b);
    const kept = keptHistory(built);
    assert.ok(kept.reduce((n, e) => n + e.length + 1, 0) <= b.maxHistoryChars);
    assert.deepEqual(kept, renderHistory(messages.slice(0, -1)).slice(-kept.length));
    assert.ok(
      kept.some((e) => e.startsWith("TOOL RESULT (web_search): ")),
      "tool results named after their call",
    );
    assert.ok(
      kept.some((e) => e.includes('[called web_search({"q":"item 81"})]')),
      "assistant tool calls summarised",
    );
    assert.ok(built.prompt.text.endsWith(userBlock("and now?")));
  });
});

describe("fitHistory keeps a real running total", () => {
  test("the sum of kept entries (+1 newline each) never exceeds the budget", () => {
    const r = rng(7);
    for (let round = 0; round < 200; round++) {
      const entries = Array.from({ length: r.int(0, 80) }, (_, i) => `USER: ${i} ${"x".repeat(r.int(0, 400))}`);
      const b = r.int(0, 5000);
      const kept = fitHistory(entries, b);
      const total = kept.reduce((n, e) => n + e.length + 1, 0);
      assert.ok(total <= b, `round ${round}: ${total} ≤ ${b}`);
      // Whole entries kept are the newest ones, in order (the oldest kept one may be cut short).
      const wholeKept = kept.filter((e) => entries.includes(e));
      assert.deepEqual(wholeKept, entries.slice(entries.length - wholeKept.length));
    }
  });

  test("246 entries of 100 chars with a 2500 budget keep exactly the newest 24", () => {
    const entries = Array.from({ length: 246 }, (_, i) => `E${String(i).padStart(3, "0")}`.padEnd(100, "."));
    const kept = fitHistory(entries, 2500);
    assert.equal(kept.length, 24);
    assert.deepEqual(kept, entries.slice(-24));
  });

  test("a newest entry larger than the whole budget is cut, not dropped (when there is room for it)", () => {
    const big = `USER: ${"word ".repeat(1000)}`;
    const kept = fitHistory(["USER: old", big], 500);
    assert.equal(kept.length, 1);
    assert.ok(kept[0]!.length + 1 <= 500);
    assert.ok(kept[0]!.startsWith("USER: word"));
  });

  test("zero budget keeps nothing", () => {
    assert.deepEqual(fitHistory(["USER: a", "ASSISTANT: b"], 0), []);
  });
});

describe("the user message is never cut", () => {
  test("a 50 KB user message is included whole and everything else shrinks", () => {
    const big =
      "Please review this log:\n" + "line of a very long log that the person pasted into the chat\n".repeat(820);
    assert.ok(big.length > 50_000);
    const messages = request([...pastTurns(40), { role: "user", text: big }], "2026.9", {
      internalAfter: "Active exec sessions: none",
    });
    const built = buildStatelessPrompt(messages, budget());
    assert.equal(built.userText, big.trim());
    assert.ok(built.prompt.text.endsWith(userBlock(big.trim())), "the whole message is there, unchanged");
    assert.equal(built.stats.historyEntries, 0, "history gave way");
    assert.equal(built.stats.toolResultChars, 0, "background gave way");
    assert.equal(whole(built).length, built.stats.totalChars);
    assert.equal(built.prompt.text, userBlock(big.trim()), "nothing but the message");
  });

  test("a user message just under maxPromptChars leaves the rest only what is left", () => {
    const b = budget();
    const text = "q ".repeat(4000).trim(); // ~8000 chars
    const built = buildStatelessPrompt(request([...pastTurns(100), { role: "user", text }], "2026.5"), b);
    assert.ok(built.prompt.text.endsWith(userBlock(text)));
    assert.ok(whole(built).length <= b.maxPromptChars, `${whole(built).length} ≤ ${b.maxPromptChars}`);
  });

  test("the whole prompt (system + separator + text) stays within maxPromptChars when the user block only just fits", {}, () => {
    const b = budget();
    const over: string[] = [];
    for (let n = 9880; n <= 9984; n++) {
      const built = buildStatelessPrompt(
        [
          { role: "system", content: openclawSystemPrompt() },
          { role: "user", content: "q".repeat(n) },
        ],
        b,
      );
      if (whole(built).length > b.maxPromptChars) over.push(`${n}→${whole(built).length}`);
    }
    assert.deepEqual(over, []);
  });
});

/** 300 random conversations and budgets (seeded: the same every run). */
function randomCases() {
  const r = rng(2026);
  return Array.from({ length: 300 }, (_, round) => {
    const gen: Generation = r.next() < 0.5 ? "2026.5" : "2026.9";
    const question = "ask ".repeat(r.int(1, 3000)).trim();
    const turns = [...pastTurns(r.int(0, 260), round), { role: "user", text: question } as OpenClawTurn];
    const messages = request(turns, gen, r.next() < 0.3 ? { internalAfter: "bg ".repeat(r.int(1, 500)) } : {});
    if (r.next() < 0.3) {
      // Tool results of the current turn after the user's message.
      messages.push({
        role: "assistant",
        content: null,
        tool_calls: [{ id: "t1", type: "function", function: { name: "read", arguments: "{}" } }],
      });
      messages.push({ role: "tool", tool_call_id: "t1", content: "file ".repeat(r.int(1, 3000)) });
    }
    const b = budget({
      maxSystemChars: r.int(0, 4000),
      maxHistoryChars: r.int(0, 5000),
      maxToolResultChars: r.int(0, 5000),
      maxPromptChars: r.int(1000, 20000),
    });
    return { round, question, messages, b, built: buildStatelessPrompt(messages, b) };
  });
}

describe("budgets hold for random conversations and budgets", () => {
  const cases = randomCases();

  test("user message whole; system, history, tool results within their budgets; newest history kept", () => {
    for (const { round, question, messages, b, built } of cases) {
      assert.ok(built.prompt.text.endsWith(userBlock(question)), `round ${round}: user message whole`);
      assert.ok(built.prompt.system.length <= b.maxSystemChars, `round ${round}: system ≤ maxSystemChars`);
      assert.ok(
        built.stats.toolResultChars <= b.maxToolResultChars,
        `round ${round}: tool results ≤ maxToolResultChars`,
      );
      const kept = keptHistory(built);
      assert.ok(
        kept.reduce((n, e) => n + e.length + 1, 0) <= b.maxHistoryChars,
        `round ${round}: history ≤ maxHistoryChars`,
      );
      const all = renderHistory(messages.slice(0, findCurrentUserTurn(messages).index));
      const wholeKept = kept.filter((e) => all.includes(e));
      assert.deepEqual(wholeKept, all.slice(all.length - wholeKept.length), `round ${round}: newest history kept`);
      assert.equal(
        whole(built).length,
        built.stats.totalChars,
        `round ${round}: stats.totalChars is what the backend gets`,
      );
    }
  });

  test("the whole prompt is within maxPromptChars + 2 whenever the user message alone fits", () => {
    for (const { round, question, b, built } of cases) {
      if (userBlock(question).length > b.maxPromptChars) continue;
      assert.ok(
        whole(built).length <= b.maxPromptChars + 2,
        `round ${round}: ${whole(built).length} ≤ ${b.maxPromptChars} + 2`,
      );
    }
  });

  test("the whole prompt is within maxPromptChars whenever the user message and the two characters that join it fit", () => {
    const violations: string[] = [];
    for (const { round, question, b, built } of cases) {
      if (userBlock(question).length + 2 <= b.maxPromptChars && whole(built).length > b.maxPromptChars)
        violations.push(`round ${round}: ${whole(built).length} > ${b.maxPromptChars}`);
    }
    assert.deepEqual(violations, []);
  });
});

describe("cuts come from the oldest history first", () => {
  const turns = [...pastTurns(120, 3), { role: "user", text: "the question" } as OpenClawTurn];
  const messages = request(turns, "2026.9");

  test("a tighter prompt budget keeps a suffix of what a looser one keeps; system stays whole", () => {
    const loose = buildStatelessPrompt(messages, budget({ maxPromptChars: 10_000 }));
    const tight = buildStatelessPrompt(messages, budget({ maxPromptChars: 3_000 }));
    const looseKept = keptHistory(loose);
    const tightKept = keptHistory(tight);
    assert.ok(tightKept.length < looseKept.length, `${tightKept.length} < ${looseKept.length}`);
    assert.deepEqual(tightKept, looseKept.slice(-tightKept.length), "the newest survive");
    assert.equal(tight.prompt.system, loose.prompt.system, "history gives way before the system prompt");
    assert.ok(whole(tight).length <= 3000);
  });

  test("under prompt pressure history gives way before tool results", () => {
    const withTool: ChatMessage[] = [
      ...messages,
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "r1", type: "function", function: { name: "read", arguments: '{"path":"a.txt"}' } }],
      },
      { role: "tool", tool_call_id: "r1", content: "the file says 42" },
    ];
    const built = buildStatelessPrompt(withTool, budget({ maxPromptChars: 2600 }));
    assert.ok(built.prompt.text.includes("TOOL RESULT (read):\nthe file says 42"));
    assert.ok(whole(built).length <= 2600);
    assert.ok(built.stats.historyDropped > 100);
  });
});

describe("tool results and live data of the current turn", () => {
  const base = request([...pastTurns(30), { role: "user", text: "what does the page say?" }], "2026.9");
  const call = (id: string, name: string): ChatMessage => ({
    role: "assistant",
    content: null,
    tool_calls: [{ id, type: "function", function: { name, arguments: "{}" } }],
  });

  test("tool messages after the user message go to the tool section, named, within maxToolResultChars", () => {
    const huge = "page text ".repeat(3000);
    const messages: ChatMessage[] = [
      ...base,
      call("a1", "web_fetch"),
      { role: "tool", tool_call_id: "a1", content: huge },
      call("a2", "exec"),
      { role: "tool", tool_call_id: "a2", content: "exit 0" },
    ];
    const b = budget({ maxToolResultChars: 1500 });
    const built = buildStatelessPrompt(messages, b);
    assert.ok(built.stats.toolResultChars <= 1500, `${built.stats.toolResultChars} ≤ 1500`);
    assert.ok(built.stats.toolResultChars > 1000, "the budget is used");
    assert.ok(built.prompt.text.includes("TOOL RESULT (web_fetch):\npage text"));
    assert.ok(
      built.prompt.text.includes("TOOL RESULT (exec):\nexit 0"),
      "a small result is kept whole beside a huge one",
    );
    assert.ok(built.prompt.text.includes("YOU (earlier this turn): [called web_fetch({})]"));
    assert.ok(built.prompt.text.endsWith(userBlock("what does the page say?")), "the user block stays last");
    assert.ok(
      built.prompt.text.indexOf("TOOL RESULT (exec)") < built.prompt.text.indexOf("USER: what does the page say?"),
    );
    assert.ok(whole(built).length <= b.maxPromptChars);
  });

  test("live data blocks are included under their title, within maxToolResultChars", () => {
    const live = [
      { title: "LIVE WEB SEARCH RESULTS", body: "1. ERR: news one\n2. Postimees: news two" },
      { title: "LIVE WEB DATA", body: "article ".repeat(2000) },
    ];
    const b = budget({ maxToolResultChars: 3000 });
    const built = buildStatelessPrompt(base, b, live);
    assert.ok(built.prompt.text.includes("LIVE WEB SEARCH RESULTS:\n1. ERR: news one\n2. Postimees: news two"));
    assert.ok(built.prompt.text.includes("LIVE WEB DATA:\narticle"));
    assert.ok(built.stats.toolResultChars <= 3000);
    assert.ok(built.prompt.text.indexOf("LIVE WEB DATA") < built.prompt.text.indexOf("USER: what does the page say?"));
  });

  test("internal context (background) goes to the tool section, not the history, and the typed message stays the user message", () => {
    const messages = request([...pastTurns(10), { role: "user", text: "anything new?" }], "2026.9", {
      internalAfter: "Active exec sessions: none",
    });
    const built = buildStatelessPrompt(messages, budget());
    assert.equal(built.userText, "anything new?");
    assert.ok(built.prompt.text.includes("CONTEXT FROM OPENCLAW:\nActive exec sessions: none"));
    assert.ok(!built.prompt.text.includes("OPENCLAW_INTERNAL_CONTEXT"), "markers removed");
    assert.ok(built.prompt.text.endsWith(userBlock("anything new?")));
  });

  test("maxToolResultChars: 0 drops the tool section", () => {
    const built = buildStatelessPrompt(
      [...base, call("z", "read"), { role: "tool", tool_call_id: "z", content: "x" }],
      budget({ maxToolResultChars: 0 }),
      [{ title: "LIVE", body: "y" }],
    );
    assert.equal(built.stats.toolResultChars, 0);
    assert.ok(!built.prompt.text.includes("TOOL RESULT"));
    assert.ok(!built.prompt.text.includes("LIVE:"));
  });
});

describe("every budget is configurable", () => {
  const messages = request([...pastTurns(200, 9), { role: "user", text: "status?" }], "2026.9");

  test("each budget changes the output", () => {
    const def = buildStatelessPrompt(messages, budget());
    const smallSys = buildStatelessPrompt(messages, budget({ maxSystemChars: 600 }));
    assert.ok(smallSys.prompt.system.length <= 600 && def.prompt.system.length > 600);
    const bigHist = buildStatelessPrompt(messages, budget({ maxHistoryChars: 6000, maxPromptChars: 20_000 }));
    assert.ok(bigHist.stats.historyEntries > def.stats.historyEntries);
    assert.ok(keptHistory(bigHist).reduce((n, e) => n + e.length + 1, 0) <= 6000);
    const noHist = buildStatelessPrompt(messages, budget({ maxHistoryChars: 0 }));
    assert.equal(noHist.stats.historyEntries, 0);
    assert.ok(!noHist.prompt.text.includes(HEADER));
    const tiny = buildStatelessPrompt(messages, budget({ maxPromptChars: 1200, maxSystemChars: 300 }));
    assert.ok(whole(tiny).length <= 1200, `${whole(tiny).length} ≤ 1200`);
    assert.ok(tiny.stats.historyEntries < def.stats.historyEntries);
    const custom = buildStatelessPrompt(messages, budget({ preamble: "You speak only in haiku." }));
    assert.ok(custom.prompt.system.startsWith("You speak only in haiku."));
    assert.ok(!custom.prompt.system.includes(DEFAULT_PREAMBLE));
  });

  test("per-model budgets from resolveConfig change the output (model context over file context over defaults)", () => {
    const cfg = resolveConfig(
      {
        context: { maxHistoryChars: 1000, preamble: "Shared preamble for all models." },
        backends: { oc: { type: "opencode" } },
        models: [
          { id: "small", backend: "oc", context: { maxSystemChars: 500, maxHistoryChars: 400, maxPromptChars: 2000 } },
          {
            id: "large",
            backend: "oc",
            context: { maxHistoryChars: 8000, maxPromptChars: 30_000, preamble: "Large model preamble." },
          },
          { id: "plain", backend: "oc" },
        ],
      },
      "test",
    );
    const [small, large, plain] = cfg.models;
    assert.deepEqual(small!.context, {
      ...DEFAULT_CONTEXT,
      maxSystemChars: 500,
      maxHistoryChars: 400,
      maxPromptChars: 2000,
      preamble: "Shared preamble for all models.",
    });
    assert.equal(plain!.context.maxHistoryChars, 1000, "file-level context applies");
    assert.equal(plain!.context.maxSystemChars, DEFAULT_CONTEXT.maxSystemChars, "defaults fill the rest");

    const s = buildStatelessPrompt(messages, small!.context);
    const l = buildStatelessPrompt(messages, large!.context);
    const p = buildStatelessPrompt(messages, plain!.context);
    assert.ok(whole(s).length <= 2000);
    assert.ok(s.prompt.system.length <= 500);
    assert.ok(keptHistory(s).reduce((n, e) => n + e.length + 1, 0) <= 400);
    assert.ok(keptHistory(p).reduce((n, e) => n + e.length + 1, 0) <= 1000);
    assert.ok(
      keptHistory(l).reduce((n, e) => n + e.length + 1, 0) > 2500,
      "the large model gets more history than the default allows",
    );
    assert.ok(l.stats.historyEntries > p.stats.historyEntries && p.stats.historyEntries > s.stats.historyEntries);
    assert.ok(l.prompt.system.startsWith("Large model preamble."));
    assert.ok(s.prompt.system.startsWith("Shared preamble for all models."));
  });
});

describe("no persona is hard-coded", () => {
  test("the default preamble names nobody", () => {
    for (const name of ["Claw", "DaN", "Iselter", "🦞", "VPS", "Pebble"])
      assert.ok(!DEFAULT_PREAMBLE.includes(name), `preamble has no "${name}"`);
  });

  test("the identity comes from IDENTITY.md in the request", () => {
    const sys = (identity: string) =>
      [
        { role: "system", content: openclawSystemPrompt({ identity }) },
        { role: "user", content: "[Sat 2026-11-21 09:13 UTC] who are you?" },
      ] as ChatMessage[];
    const a = buildStatelessPrompt(sys("# IDENTITY.md\n\n- **Name:** Quill\n- **Creature:** a heron"), budget());
    const b = buildStatelessPrompt(sys("# IDENTITY.md\n\n- **Name:** Marlo\n- **Creature:** a fox"), budget());
    assert.ok(a.prompt.system.includes("Quill") && !a.prompt.system.includes("Marlo"));
    assert.ok(b.prompt.system.includes("Marlo") && !b.prompt.system.includes("Quill"));
    assert.ok(a.prompt.system.includes("Alex Example"), "the user profile from USER.md too");
  });

  test("no system prompt at all: only the configured preamble, no invented persona", () => {
    const built = buildStatelessPrompt([{ role: "user", content: "hi" }], budget());
    assert.equal(built.prompt.system, DEFAULT_PREAMBLE);
    const none = buildStatelessPrompt([{ role: "user", content: "hi" }], budget({ preamble: "" }));
    assert.equal(none.prompt.system, "");
    assert.equal(none.prompt.text, userBlock("hi"));
  });
});

describe("non-OpenClaw requests", () => {
  test("a plain system prompt is kept (after the preamble)", () => {
    const built = buildStatelessPrompt(
      [
        { role: "system", content: "You are a pirate. Always answer in pirate speak." },
        { role: "developer", content: "Never mention treasure maps." },
        { role: "user", content: "hello" },
      ],
      budget(),
    );
    assert.ok(built.prompt.system.includes("You are a pirate. Always answer in pirate speak."));
    assert.ok(built.prompt.system.includes("Never mention treasure maps."));
    assert.equal(built.prompt.text, userBlock("hello"));
  });

  test("a long plain system prompt is cut to maxSystemChars", () => {
    const built = buildStatelessPrompt(
      [
        { role: "system", content: "Rule. ".repeat(2000) },
        { role: "user", content: "go" },
      ],
      budget({ maxSystemChars: 700 }),
    );
    assert.ok(built.prompt.system.length <= 700);
    assert.ok(built.prompt.system.includes("Rule."));
  });

  test("systemText joins system and developer messages", () => {
    assert.equal(
      systemText([
        { role: "system", content: "a" },
        { role: "user", content: "x" },
        { role: "developer", content: [{ type: "text", text: "b" }] },
      ]),
      "a\n\nb",
    );
  });

  test("plain multi-turn history without metadata", () => {
    const built = buildStatelessPrompt(
      [
        { role: "user", content: "my name is Sam" },
        { role: "assistant", content: "Hi Sam" },
        { role: "user", content: "what is my name?" },
      ],
      budget(),
    );
    assert.ok(built.prompt.text.startsWith(`${HEADER}USER: my name is Sam\nASSISTANT: Hi Sam\n\n`));
    assert.ok(built.prompt.text.endsWith(userBlock("what is my name?")));
  });
});
