/**
 * Intent detection + tool pre-execution END TO END, through the real bridge: an OpenAI-style request
 * goes in, the bridge detects the intent, runs the tool against the fake web (test/fakes/web, on
 * 127.0.0.1), and the live data reaches the REAL CLI's model request — opencode (stateless) against
 * a fake OpenAI API, claude (resume) against a fake Anthropic API. Only remote services are faked;
 * nothing here talks to anything but 127.0.0.1 (every search provider points at the fake web, and
 * every page URL is a 127.0.0.1/localhost one).
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import path from "node:path";
import { Writable } from "node:stream";
import { after, before, beforeEach, describe, test } from "node:test";
import { createLogger } from "../../src/core/log/logger.js";
import { startFakeAnthropic, type FakeAnthropic } from "../../testkit/fakes/anthropic-api.js";
import { CLAUDE_BIN, claudeEnv } from "../../testkit/fakes/cli-env.js";
import { startFakeOpenAI, type FakeOpenAI, type RecordedRequest } from "../../testkit/fakes/openai-api.js";
import { OPENCODE_BIN, opencodeEnv } from "../../testkit/fakes/opencode-env.js";
import { ARTICLE_SENTENCE, ARTICLE_TITLE, defaultHits, FakeWeb } from "../fakes/web/server.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { openclawRequest } from "../../testkit/openclaw-request.js";

const ANSWER = "Here is my answer.";
const SEARCH_TIMEOUT_MS = 1500;
const NOISE = [
  "NAV_NOISE",
  "SCRIPT_NOISE",
  "ADS_NOISE",
  "SIDEBAR_NOISE",
  "FOOTER_NOISE",
  "IMAGE_ALT_NOISE",
  "tracking",
];
const LIVE_NOTE = "These are live data fetched from the web just now";

/** Collects the bridge's pino JSON lines. */
class LogCapture extends Writable {
  readonly lines: Array<Record<string, any>> = [];
  private partial = "";
  override _write(chunk: Buffer | string, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    const text = this.partial + chunk.toString();
    const parts = text.split("\n");
    this.partial = parts.pop() ?? "";
    for (const l of parts) {
      if (!l.trim()) continue;
      try {
        this.lines.push(JSON.parse(l));
      } catch {
        /* not JSON: ignore */
      }
    }
    cb();
  }
  /** Lines logged since index `from` with this message. */
  since(from: number, msg: string): Array<Record<string, any>> {
    return this.lines.slice(from).filter((l) => l.msg === msg);
  }
}

/** A loopback port nobody listens on. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((res) => srv.listen(0, "127.0.0.1", res));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((res) => srv.close(() => res()));
  return port;
}

/** The live-data block in a prompt: from its heading to the person's message. */
function liveBlock(prompt: string, title: "LIVE WEB SEARCH RESULTS" | "LIVE WEB DATA"): string | null {
  const i = prompt.indexOf(title);
  if (i < 0) return null;
  const end = prompt.indexOf("\n\nUSER: ", i);
  return prompt.slice(i, end < 0 ? undefined : end);
}

/** Results of a search block: number, title line, url, snippet line (may be ""). */
function searchEntries(block: string): Array<{ n: number; title: string; url: string; snippet: string }> {
  const lines = block.split("\n");
  const out: Array<{ n: number; title: string; url: string; snippet: string }> = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /^(\d+)\. (.+)$/.exec(lines[i]!);
    if (!m) continue;
    const url = (lines[i + 1] ?? "").trim();
    const next = lines[i + 2] ?? "";
    const snippet = next.startsWith("   ") && !/^\s+https?:\/\//.test(next) ? next.trim() : "";
    out.push({ n: Number(m[1]), title: m[2]!, url, snippet });
  }
  return out;
}

/** Assert every snippet is the original text or a word-boundary prefix of it marked with "…". */
function assertWordBoundarySnippets(block: string, query: string): number {
  const originals = new Map(defaultHits(query).map((h) => [h.url, h.snippet]));
  let trimmed = 0;
  const entries = searchEntries(block);
  assert.ok(entries.length >= 1, `at least one result in the block:\n${block}`);
  for (const e of entries) {
    const original = originals.get(e.url);
    assert.ok(original, `result URL ${e.url} comes from the fake provider`);
    if (!e.snippet) continue;
    if (e.snippet === original) continue;
    assert.ok(e.snippet.endsWith("…"), `a shortened snippet is marked: ${JSON.stringify(e.snippet)}`);
    const kept = e.snippet.slice(0, -1);
    assert.ok(original.startsWith(kept), `snippet is a prefix of the original: ${JSON.stringify(kept)}`);
    assert.match(
      original.charAt(kept.length),
      /[\s,;:\-–—]/,
      `cut at a word boundary, not mid-word: ${JSON.stringify(kept)}|${original.slice(kept.length, kept.length + 10)}`,
    );
    trimmed++;
  }
  return trimmed;
}

let web: FakeWeb;

before(async () => {
  web = await FakeWeb.start();
});
after(async () => {
  await web?.close();
});
beforeEach(() => {
  web.searchMode = "normal";
  web.emptyForSiteQueries = false;
  web.hits.clear();
});

/** Top-level intents: everything points at the fake web. */
function webIntents(extra: Record<string, unknown> = {}): Record<string, any> {
  return {
    search: { provider: "searxng", baseUrl: `${web.origin}/searxng`, timeoutMs: SEARCH_TIMEOUT_MS },
    fetch: { allowHosts: ["127.0.0.1"], timeoutMs: 3000 },
    news: { sites: ["lsm.lv", "delfi.lv"] },
    rules: [
      {
        id: "news-latvia",
        kind: "news",
        all: [
          ["latvia*", "läti*"],
          ["news", "uudis*"],
        ],
        lead: ["tell me", "give me"],
        fillers: ["please"],
      },
    ],
    ...extra,
  };
}

const searxRequests = () => web.requestsTo("/searxng/");

/** What the faked model API received, whichever CLI called it. */
interface ModelSide {
  /** Number of model calls so far. */
  count(): number;
  /** The prompt text (last user message) of each call since `n`. */
  promptsSince(n: number): string[];
}

interface TurnResult {
  status: number;
  content: string;
  /** The prompt the model received for this turn (the last model call's user text). */
  prompt: string;
}

/** One non-streaming turn through the bridge. */
async function postTurn(
  bridge: TestBridge,
  side: ModelSide,
  model: string,
  body: string | Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<TurnResult> {
  const before = side.count();
  const payload: Record<string, unknown> =
    typeof body === "string" ? { model, messages: [{ role: "user", content: body }] } : { ...body, model };
  payload.stream = false;
  delete payload.stream_options;
  // A generous client bound, not a timing assertion: a turn blocked by a tool would never answer.
  const res = await fetch(`${bridge.baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(payload),
    signal: AbortSignal.timeout(90_000),
  });
  const json = (await res.json()) as any;
  const prompts = side.promptsSince(before);
  assert.ok(
    prompts.length >= 1,
    `the CLI called the model (status ${res.status}: ${JSON.stringify(json).slice(0, 300)})`,
  );
  return { status: res.status, content: json?.choices?.[0]?.message?.content ?? "", prompt: prompts.at(-1)! };
}

describe("tool pre-execution through the bridge: stateless (real opencode)", () => {
  let fake: FakeOpenAI;
  let bridge: TestBridge;
  let home: string;
  let tmp: string;
  let debugLogFile: string;
  let side: ModelSide;

  const MAIN = "oc/main"; // small budgets: maxToolResultChars 600, maxPromptChars 4000
  const WIDE = "oc/wide"; // default budgets, same (top-level) intents

  before(async () => {
    fake = await startFakeOpenAI(() => ({
      kind: "text",
      chunks: [ANSWER],
      usage: { prompt_tokens: 10, completion_tokens: 4 },
    }));
    side = {
      count: () => fake.mainRequests().length,
      promptsSince: (n) =>
        fake
          .mainRequests()
          .slice(n)
          .map((r: RecordedRequest) => r.lastUser),
    };
    home = tempDir("cb-pe-home-");
    tmp = tempDir("cb-pe-tmp-");
    debugLogFile = path.join(tmp, "debug.log");
    bridge = await startTestBridge({
      logging: { debugLog: debugLogFile },
      backends: {
        oc: {
          type: "opencode",
          command: OPENCODE_BIN,
          env: opencodeEnv(fake.url, home),
          timeoutSeconds: 90,
          killGraceSeconds: 1,
          warm: { enabled: false },
        },
      },
      intents: webIntents(),
      models: [
        { id: MAIN, backend: "oc", model: "fake/m1", context: { maxToolResultChars: 600, maxPromptChars: 4000 } },
        { id: WIDE, backend: "oc", model: "fake/m1" },
      ],
    });
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    cleanup(home);
    cleanup(tmp);
    if (bridge) cleanup(bridge.dataDir);
  });

  test("1+9. web search: live results reach the model, marked as live data, within maxToolResultChars and maxPromptChars; the debug log records it", async () => {
    const q = "best AI tools 2026";
    const body = openclawRequest(
      MAIN,
      [
        { role: "user", text: "hi, remember that I like concise answers" },
        { role: "assistant", text: "Noted. ".repeat(60) },
        { role: "user", text: "what did we talk about yesterday? ".repeat(10) },
        { role: "assistant", text: "We talked about many things. ".repeat(40) },
        { role: "user", text: `search for ${q}` },
      ],
      "2026.9",
    );
    const n = searxRequests().length;
    const r = await postTurn(bridge, side, MAIN, body);
    assert.equal(r.status, 200);
    assert.equal(r.content, ANSWER);
    const seen = searxRequests().slice(n);
    assert.equal(seen.length, 1, "the fake provider was asked once");
    assert.equal(seen[0]!.query.get("q"), q, "the extracted query (OpenClaw metadata stripped, trigger removed)");
    const block = liveBlock(r.prompt, "LIVE WEB SEARCH RESULTS");
    assert.ok(block, `live search block in the model's prompt:\n${r.prompt.slice(-1500)}`);
    assert.match(
      block,
      new RegExp(`^LIVE WEB SEARCH RESULTS \\(fetched \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\) for "${q}":\\n`),
    );
    assert.ok(block.includes(LIVE_NOTE), "the model is told these are live data");
    assert.match(block, /^1\. Result 1 about best AI tools 2026/m, "the fake provider's results");
    assert.match(block, /https:\/\/site1\.example\/page\?id=1/);
    assert.ok(block.length <= 600, `live block within maxToolResultChars (${block.length})`);
    const trimmed = assertWordBoundarySnippets(block, q);
    assert.ok(trimmed >= 1, "the small budget made the bridge shorten snippets (at word boundaries)");
    // The whole prompt: system + history + live data + the user message, within maxPromptChars.
    assert.ok(r.prompt.length <= 4000, `prompt within maxPromptChars (${r.prompt.length})`);
    assert.match(
      r.prompt,
      /\n\nUSER: search for best AI tools 2026\n\nRespond:$/,
      "the user's message is last and whole",
    );
    assert.ok(
      r.prompt.indexOf("LIVE WEB SEARCH RESULTS") < r.prompt.lastIndexOf("USER: search for"),
      "live data comes before the message",
    );
    assert.match(r.prompt, /CONVERSATION SO FAR:\n/, "history kept alongside the live data");
    assert.match(r.prompt, /Pebble/, "the compressed system prompt is still there");

    // 9. The debug log (logging.debugLog) records the intent and a prompt built with tool context.
    const read = () => (existsSync(debugLogFile) ? readFileSync(debugLogFile, "utf8") : "");
    const ok = await eventually(
      () => /Intent detected: web_search/.test(read()) && /Prompt built: \d+ chars, tool_context: true/.test(read()),
      5000,
    );
    assert.ok(ok, `debug log lines present:\n${read()}`);
    assert.match(read(), /^\[\d\d:\d\d:\d\d\] Intent detected: web_search \(rule web-search\)$/m);
    assert.match(
      read(),
      /^\[\d\d:\d\d:\d\d\] Prompt built: \d+ chars, tool_context: true, history_entries: [1-9]\d*$/m,
    );
  });

  test("2. a URL in the message: the page's readable text reaches the prompt as LIVE WEB DATA, without page noise", async () => {
    const url = `${web.origin}/article`;
    const n = web.requestsTo("/article").length;
    const r = await postTurn(bridge, side, WIDE, `What does this article say? ${url}`);
    assert.equal(r.content, ANSWER);
    assert.equal(web.requestsTo("/article").length, n + 1, "the page was fetched once");
    const block = liveBlock(r.prompt, "LIVE WEB DATA");
    assert.ok(block, `live page block in the prompt:\n${r.prompt.slice(-1500)}`);
    assert.ok(block.startsWith(`LIVE WEB DATA from ${url} (fetched `), block.slice(0, 200));
    assert.match(block, /downloaded just now/, "the model is told this is live data");
    assert.ok(block.includes(`Title: ${ARTICLE_TITLE}`), "page title");
    assert.ok(block.includes(ARTICLE_SENTENCE), "the article's text");
    for (const noise of NOISE) assert.ok(!block.includes(noise), `no ${noise} in the live data`);
    // The article is longer than the budget: cut at a paragraph/sentence/word end, marked.
    assert.ok(block.length <= 3000, `within the default maxToolResultChars (${block.length})`);
    assert.match(block, /[\s.]…$/, `the cut is marked and falls between words: ${JSON.stringify(block.slice(-60))}`);
    assert.match(r.prompt, /USER: What does this article say\? http:\/\/127\.0\.0\.1:\d+\/article\n\nRespond:$/);
  });

  test("3a. news preset (English): a site-restricted query reaches the search provider", async () => {
    const n = searxRequests().length;
    const r = await postTurn(bridge, side, MAIN, "Tell me Estonian news for today");
    assert.equal(r.content, ANSWER);
    const qs = searxRequests()
      .slice(n)
      .map((x) => x.query.get("q"));
    assert.deepEqual(qs, ["Estonian news for today site:err.ee OR site:postimees.ee OR site:delfi.ee"]);
    const block = liveBlock(r.prompt, "LIVE WEB SEARCH RESULTS");
    assert.ok(block, "live block in the prompt");
    assert.match(block, /\(news from err\.ee, postimees\.ee, delfi\.ee\) for "Estonian news for today"/);
    assert.ok(block.includes(LIVE_NOTE));
  });

  test("3b. news preset (Estonian): nothing on the news sites → falls back to a general search", async () => {
    web.emptyForSiteQueries = true;
    const n = searxRequests().length;
    const r = await postTurn(bridge, side, MAIN, "mis on eesti uudised täna");
    assert.equal(r.content, ANSWER);
    const qs = searxRequests()
      .slice(n)
      .map((x) => x.query.get("q"));
    assert.deepEqual(qs, [
      "eesti uudised täna site:err.ee OR site:postimees.ee OR site:delfi.ee",
      "eesti uudised täna",
    ]);
    const block = liveBlock(r.prompt, "LIVE WEB SEARCH RESULTS");
    assert.ok(block, "live block from the general search");
    assert.match(block, /nothing found on err\.ee, postimees\.ee, delfi\.ee; general web search/);
    assert.match(block, /Result 1 about eesti uudised täna/);
  });
});

/**
 * The claude CLI is much quicker per turn than opencode, so the remaining checks (failures, cache,
 * guard, per-model settings) run on it — in stateless mode, plus a resume-mode model.
 */
describe("tool pre-execution through the bridge: real claude (stateless and resume)", () => {
  let fake: FakeAnthropic;
  let bridge: TestBridge;
  let home: string;
  let tmp: string;
  let debugLogFile: string;
  let side: ModelSide;
  const logs = new LogCapture();

  const RESUME = "cl/resume";
  const MAIN = "cl/main";

  before(async () => {
    fake = await startFakeAnthropic(() => ({ kind: "text", chunks: [ANSWER] }));
    side = {
      count: () => fake.messageCalls().length,
      promptsSince: (n) =>
        fake
          .messageCalls()
          .slice(n)
          .map((r) => r.lastUserText),
    };
    home = tempDir("cb-pe-claude-home-");
    tmp = tempDir("cb-pe-claude-tmp-");
    debugLogFile = path.join(tmp, "debug.log");
    const refusedPort = await closedPort();
    const stateless = { mode: "stateless" as const };
    // Per-model intents are given in full here (see the merge test below for why).
    const full = (extra: Record<string, unknown>) => webIntents(extra);
    bridge = await startTestBridge(
      {
        logging: { level: "info", debugLog: debugLogFile },
        backends: {
          cl: {
            type: "claude-code",
            command: CLAUDE_BIN,
            env: claudeEnv({ baseUrl: fake.baseUrl, home }),
            timeoutSeconds: 90,
            killGraceSeconds: 1,
          },
        },
        intents: webIntents(),
        models: [
          { id: RESUME, backend: "cl", model: "default", session: { mode: "resume" } },
          { id: MAIN, backend: "cl", model: "default", session: stateless },
          {
            id: "cl/intents-budget",
            backend: "cl",
            model: "default",
            session: stateless,
            intents: full({ maxToolResultChars: 600 }),
          },
          {
            id: "cl/merge",
            backend: "cl",
            model: "default",
            session: stateless,
            intents: { search: { maxResults: 2 } },
          },
          {
            id: "cl/refused",
            backend: "cl",
            model: "default",
            session: stateless,
            intents: full({
              search: {
                provider: "searxng",
                baseUrl: `http://127.0.0.1:${refusedPort}/searxng`,
                timeoutMs: SEARCH_TIMEOUT_MS,
              },
            }),
          },
          {
            id: "cl/strict",
            backend: "cl",
            model: "default",
            session: stateless,
            intents: full({ fetch: { allowHosts: [], allowPrivateAddresses: false, timeoutMs: 3000 } }),
          },
          { id: "cl/off", backend: "cl", model: "default", session: stateless, intents: full({ enabled: false }) },
          {
            id: "cl/custom",
            backend: "cl",
            model: "default",
            session: stateless,
            intents: full({
              preset: "none",
              rules: [
                {
                  id: "de-suche",
                  kind: "web_search",
                  triggers: ["suche nach", "such nach", "suche"],
                  lead: ["bitte", "kannst du"],
                  fillers: ["bitte", "im internet", "im web"],
                },
              ],
            }),
          },
        ],
      },
      { logger: createLogger("info", logs) },
    );
  });

  after(async () => {
    await bridge?.close(0);
    await fake?.close();
    cleanup(home);
    cleanup(tmp);
    if (bridge) cleanup(bridge.dataDir);
  });

  const turn = (model: string, body: string | Record<string, unknown>, headers: Record<string, string> = {}) =>
    postTurn(bridge, side, model, body, headers);
  const readDebug = () => (existsSync(debugLogFile) ? readFileSync(debugLogFile, "utf8") : "");

  test("4. resume mode: live data reaches the backend's new-turn text, on the first and on a resumed turn", async () => {
    const conv = { "x-session-id": "pe-resume-1" };
    const q1 = "search for resume live data one";
    const t1 = await turn(RESUME, q1, conv);
    assert.equal(t1.status, 200);
    assert.equal(t1.content, ANSWER);
    const b1 = t1.prompt.indexOf("LIVE WEB SEARCH RESULTS (fetched ");
    assert.ok(b1 >= 0, `live block in the new-session turn:\n${t1.prompt.slice(0, 1500)}`);
    assert.match(t1.prompt, /for "resume live data one":/);
    assert.ok(t1.prompt.includes(LIVE_NOTE));
    assert.match(t1.prompt, /Result 1 about resume live data one/);
    assert.ok(t1.prompt.indexOf(q1) > b1, "the person's message follows the live data");

    const before = fake.messageCalls().length;
    const q2 = "Can you look up resume live data two";
    const t2 = await turn(
      RESUME,
      {
        messages: [
          { role: "user", content: q1 },
          { role: "assistant", content: ANSWER },
          { role: "user", content: q2 },
        ],
      },
      conv,
    );
    assert.equal(t2.content, ANSWER);
    assert.match(
      t2.prompt,
      /LIVE WEB SEARCH RESULTS \(fetched [^)]+\) for "resume live data two":/,
      t2.prompt.slice(0, 1500),
    );
    assert.match(t2.prompt, /Result 1 about resume live data two/);
    assert.ok(t2.prompt.trimEnd().endsWith(q2), "the new message is last");
    assert.ok(!t2.prompt.includes("resume live data one"), "only the new turn's text is forwarded");
    // It really was a resumed session: the CLI sent turn 1 (from its own transcript) along with turn 2.
    const call = fake.messageCalls().slice(before).at(-1)!;
    const history = JSON.stringify(call.body?.messages ?? []);
    assert.ok(history.includes("resume live data one"), "turn 1 came from the CLI's transcript");
    const ok = await eventually(
      () => /Prompt built: \d+ chars \(resume, continuing\), tool_context: true/.test(readDebug()),
      5000,
    );
    assert.ok(ok, readDebug());
  });

  test("3c. a news rule without its own sites uses the configured news.sites", async () => {
    const n = searxRequests().length;
    const r = await turn(MAIN, "Tell me Latvian news please");
    assert.equal(r.content, ANSWER);
    const qs = searxRequests()
      .slice(n)
      .map((x) => x.query.get("q"));
    assert.deepEqual(qs, ["Latvian news site:lsm.lv OR site:delfi.lv"]);
    assert.match(liveBlock(r.prompt, "LIVE WEB SEARCH RESULTS") ?? "", /\(news from lsm\.lv, delfi\.lv\)/);
  });

  test("5a. search provider answers HTTP 500: the turn answers without live data, and the log says why", async () => {
    web.searchMode = "error500";
    const mark = logs.lines.length;
    const n = searxRequests().length;
    const r = await turn(MAIN, "search for flaky provider question");
    assert.equal(r.status, 200);
    assert.equal(r.content, ANSWER);
    assert.equal(searxRequests().length, n + 1, "the provider was tried");
    assert.ok(!r.prompt.includes("LIVE WEB"), "no live block");
    assert.match(r.prompt, /USER: search for flaky provider question\n\nRespond:/);
    const pre = logs.since(mark, "tool pre-execution");
    assert.equal(pre.length, 1, JSON.stringify(logs.lines.slice(mark)));
    assert.equal(pre[0]!.intent, "web_search");
    assert.match(String(pre[0]!.error), /HTTP 500/);
    assert.equal(logs.since(mark, "turn ended").at(-1)?.outcome, "completed");
    assert.ok(
      await eventually(() => readDebug().includes("Pre-exec failed, answering without it: web_search: HTTP 500"), 5000),
      "the debug log says why too",
    );
  });

  test("5b. search provider hangs past search.timeoutMs: the turn still answers, without live data", async () => {
    web.searchMode = "slow";
    const mark = logs.lines.length;
    const n = searxRequests().length;
    const r = await turn(MAIN, "search for hanging provider question");
    assert.equal(r.status, 200);
    assert.equal(r.content, ANSWER);
    assert.equal(searxRequests().length, n + 1, "the provider was asked (and never answered)");
    assert.ok(!r.prompt.includes("LIVE WEB"), "no live block");
    const pre = logs.since(mark, "tool pre-execution");
    assert.equal(pre.length, 1, JSON.stringify(logs.lines.slice(mark)));
    assert.match(String(pre[0]!.error), /timed out/);
    assert.equal(logs.since(mark, "turn ended").at(-1)?.outcome, "completed");
  });

  test("5c. search provider refuses connections: the turn still answers, without live data", async () => {
    const mark = logs.lines.length;
    const r = await turn("cl/refused", "search for unreachable provider question");
    assert.equal(r.status, 200);
    assert.equal(r.content, ANSWER);
    assert.ok(!r.prompt.includes("LIVE WEB"), "no live block");
    const pre = logs.since(mark, "tool pre-execution");
    assert.equal(pre.length, 1, JSON.stringify(logs.lines.slice(mark)));
    assert.match(String(pre[0]!.error), /ECONNREFUSED/);
  });

  test("5d. resume mode: a failing search never blocks the turn", async () => {
    web.searchMode = "error500";
    const r = await turn(RESUME, "search for resume failing provider", { "x-session-id": "pe-resume-2" });
    assert.equal(r.status, 200);
    assert.equal(r.content, ANSWER);
    assert.ok(!r.prompt.includes("LIVE WEB"), "no live block");
    assert.ok(r.prompt.includes("search for resume failing provider"));
  });

  test("6. a retry of the same question is answered from the cache (one provider request for two turns)", async () => {
    const n = searxRequests().length;
    const mark = logs.lines.length;
    const a = await turn(MAIN, "search for clawbridge cache probe");
    const b = await turn(MAIN, "search for clawbridge cache probe");
    assert.equal(a.content, ANSWER);
    assert.equal(b.content, ANSWER);
    assert.equal(searxRequests().length, n + 1, "one provider request for two turns");
    const blockA = liveBlock(a.prompt, "LIVE WEB SEARCH RESULTS");
    assert.ok(blockA);
    assert.equal(
      liveBlock(b.prompt, "LIVE WEB SEARCH RESULTS"),
      blockA,
      "the retry gets the same live data (same fetch time)",
    );
    assert.deepEqual(
      logs.since(mark, "tool pre-execution").map((l) => l.cached),
      [false, true],
    );
  });

  test("7. the address guard holds through the bridge: loopback URLs not allowed → no fetch, the answer still comes", async () => {
    const mark = logs.lines.length;
    const n = web.requestsTo("/article").length;
    const a = await turn("cl/strict", `read ${web.origin}/article?guard=1`);
    const b = await turn("cl/strict", `what is on http://localhost:${web.port}/article?guard=2`);
    for (const r of [a, b]) {
      assert.equal(r.status, 200);
      assert.equal(r.content, ANSWER);
      assert.ok(!r.prompt.includes("LIVE WEB"), "no live block");
    }
    assert.equal(web.requestsTo("/article").length, n, "the page server saw no request");
    const pre = logs.since(mark, "tool pre-execution");
    assert.equal(pre.length, 2, JSON.stringify(logs.lines.slice(mark)));
    assert.ok(pre.every((l) => l.intent === "web_fetch"));
    assert.match(String(pre[0]!.error), /loopback address 127\.0\.0\.1 is not allowed/);
    assert.match(String(pre[1]!.error), /localhost resolves to a loopback address/);
  });

  test("8a. intents disabled on a model: no pre-execution for it", async () => {
    const mark = logs.lines.length;
    const n = web.requests.length;
    const r = await turn("cl/off", "search for disabled model question");
    assert.equal(r.content, ANSWER);
    assert.equal(web.requests.length, n, "the fake web saw nothing");
    assert.ok(!r.prompt.includes("LIVE WEB"));
    assert.equal(logs.since(mark, "tool pre-execution").length, 0);
  });

  test("8b. preset none: preset rules are off, a custom German rule works end to end", async () => {
    const n = web.requests.length;
    const off = await turn("cl/custom", "search for preset rules are off");
    assert.equal(off.content, ANSWER);
    assert.equal(web.requests.length, n, "the English preset rule did not fire");
    assert.ok(!off.prompt.includes("LIVE WEB"));

    const r = await turn("cl/custom", "Bitte suche nach den besten Wanderwegen in Tirol");
    assert.equal(r.content, ANSWER);
    assert.equal(web.requests.length, n + 1);
    assert.deepEqual(
      searxRequests()
        .slice(-1)
        .map((x) => x.query.get("q")),
      ["den besten Wanderwegen in Tirol"],
    );
    const block = liveBlock(r.prompt, "LIVE WEB SEARCH RESULTS");
    assert.ok(block, "live block from the custom rule");
    assert.match(block, /for "den besten Wanderwegen in Tirol"/);
    assert.match(block, /Result 1 about den besten Wanderwegen in Tirol/);
  });

  test("config: intents.maxToolResultChars bounds the live block through the bridge", async () => {
    const r = await turn("cl/intents-budget", "search for intents budget probe");
    assert.equal(r.content, ANSWER);
    const block = liveBlock(r.prompt, "LIVE WEB SEARCH RESULTS");
    assert.ok(block);
    assert.ok(block.length <= 600, `live block within intents.maxToolResultChars 600 (got ${block.length})`);
  });

  test("config: a per-model intents section overrides only what it names; the top-level rest stays", async () => {
    const n = searxRequests().length;
    const r = await turn("cl/merge", "search for merge probe question");
    assert.equal(r.content, ANSWER);
    assert.equal(searxRequests().length, n + 1, "the top-level searxng provider was used");
    const block = liveBlock(r.prompt, "LIVE WEB SEARCH RESULTS");
    assert.ok(block, "live block");
    assert.equal(searchEntries(block).length, 2, "the model's maxResults: 2 applies");
  });
});
