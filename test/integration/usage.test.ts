/**
 * Usage per backend per day (issue 28 item 4) on a real bridge: two `openai` backends, each against
 * its own fake OpenAI API that answers with known `usage`; real turns through the official `openai`
 * client (streamed and not); one upstream 429; a `backend.limited` published on the bridge's bus.
 * Then `GET /v1/admin/usage` counts per backend what each fake saw (turns, tokens in and out), the
 * failed turn, the limit hits, the last limit message and the next reset; `/metrics` has the limit
 * counter; `clawbridge usage --json` prints the same answer; and the counts survive a restart of
 * the bridge on the same data dir (`<dataDir>/usage.db`).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Command } from "commander";
import OpenAI from "openai";
import { addUsageCommand } from "../../src/ops/commands/usage.js";
import type { Usage } from "../../src/wire/admin.js";
import type { BridgeEvent } from "../../src/wire/events.js";
import { startFakeOpenAI } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, within, type TestBridge } from "../helpers/bridge.js";
import { parseMetrics, value } from "../helpers/prometheus.js";

const KEY = "usage-test-key-0123456789";
const auth = { authorization: `Bearer ${KEY}` };

async function usageOf(bridge: TestBridge, query = ""): Promise<Usage> {
  const res = await fetch(`${bridge.url}/v1/admin/usage${query}`, { headers: auth });
  assert.equal(res.status, 200, `GET /v1/admin/usage${query}: ${res.status}`);
  return (await res.json()) as Usage;
}

/** `clawbridge usage ...args` through commander, as main.ts registers it. */
async function usageCommand(args: string[]): Promise<{ out: string; err: string; code: number }> {
  let out = "";
  let err = "";
  const program = new Command().exitOverride();
  addUsageCommand(program, { out: (s) => (out += `${s}\n`), err: (s) => (err += `${s}\n`) });
  const before = process.exitCode;
  process.exitCode = undefined;
  try {
    await program.parseAsync(["node", "clawbridge", "usage", ...args]);
    return { out, err, code: Number(process.exitCode ?? 0) };
  } finally {
    process.exitCode = before;
  }
}

test("GET /v1/admin/usage counts per backend what each upstream saw; metrics and `clawbridge usage --json` agree; it survives a restart", async () => {
  // Each upstream answers with usage it is told by the message: "n=<prompt>,<completion>".
  const tokensOf = (text: string) => {
    const m = /n=(\d+),(\d+)/.exec(text);
    return m
      ? { prompt_tokens: Number(m[1]), completion_tokens: Number(m[2]) }
      : { prompt_tokens: 1, completion_tokens: 1 };
  };
  const fakeA = await startFakeOpenAI((req) => ({ kind: "text", chunks: ["ok"], usage: tokensOf(req.lastUser) }));
  const fakeB = await startFakeOpenAI((req) =>
    req.lastUser.includes("limit")
      ? { kind: "error", status: 429, message: "You exceeded your current quota, please check your plan." }
      : { kind: "text", chunks: ["ok"], usage: tokensOf(req.lastUser) },
  );
  const dataDir = tempDir("cb-usage-data-");
  const config = {
    dataDir,
    server: { apiKeys: [KEY] },
    backends: { alpha: { type: "openai", baseUrl: fakeA.url }, beta: { type: "openai", baseUrl: fakeB.url } },
    models: [
      { id: "a", backend: "alpha" },
      { id: "b", backend: "beta" },
    ],
  };
  let bridge = await startTestBridge(config);
  const seen: BridgeEvent[] = [];
  const off = bridge.bus.on((e) => void seen.push(e));
  try {
    const client = new OpenAI({ baseURL: bridge.baseURL, apiKey: KEY, maxRetries: 0, timeout: 20_000 });
    const ask = async (model: string, content: string, stream: boolean, session: string) => {
      if (!stream) {
        const r = await client.chat.completions.create(
          { model, messages: [{ role: "user", content }] },
          { headers: { "x-session-id": session } },
        );
        return r.choices[0]?.message.content;
      }
      const s = await client.chat.completions.create(
        { model, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content }] },
        { headers: { "x-session-id": session } },
      );
      let text = "";
      for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
      return text;
    };
    assert.equal(await within(ask("a", "n=100,10", false, "s1"), 20_000, "turn a1"), "ok");
    assert.equal(await within(ask("a", "n=200,20", true, "s2"), 20_000, "turn a2"), "ok");
    assert.equal(await within(ask("a", "n=300,30", false, "s3"), 20_000, "turn a3"), "ok");
    assert.equal(await within(ask("b", "n=7,3", true, "s4"), 20_000, "turn b1"), "ok");
    assert.equal(await within(ask("b", "n=5,2", false, "s5"), 20_000, "turn b2"), "ok");
    // The upstream's 429: a failed turn (a limit, once the openai backend says limit_reached).
    await assert.rejects(within(ask("b", "limit please", false, "s6"), 20_000, "turn b3"));
    // A limit published as the pipeline publishes it, with a reset an hour away.
    const resetAt = Date.now() + 3_600_000;
    bridge.bus.emit({
      type: "backend.limited",
      backend: "beta",
      message: "5-hour limit reached · resets 4:20am",
      resetAt,
      until: resetAt,
    });
    const ended = (b: string) =>
      seen.filter((e) => (e.type === "turn.completed" || e.type === "turn.failed") && e.backend === b).length;
    assert.ok(await eventually(() => ended("alpha") === 3 && ended("beta") === 3, 5000), "every turn ended on the bus");

    // What the fakes saw.
    const sum = (reqs: typeof fakeA.requests, ok: (t: string) => boolean) =>
      reqs
        .filter((r) => ok(r.lastUser))
        .reduce(
          (t, r) => {
            const u = tokensOf(r.lastUser);
            return { in: t.in + u.prompt_tokens, out: t.out + u.completion_tokens };
          },
          { in: 0, out: 0 },
        );
    const aSaw = sum(fakeA.mainRequests(), () => true);
    const bSaw = sum(fakeB.mainRequests(), (t) => !t.includes("limit"));
    assert.equal(fakeA.mainRequests().length, 3);
    assert.deepEqual(aSaw, { in: 600, out: 60 });
    assert.deepEqual(bSaw, { in: 12, out: 5 });
    const limitedEvents = seen.filter((e) => e.type === "backend.limited" && e.backend === "beta").length;

    const u = await usageOf(bridge);
    assert.equal(u.object, "usage");
    assert.equal(u.days, 7);
    const today = new Date().toISOString().slice(0, 10);
    assert.equal(u.to, today);
    const row = (b: string) => u.data.find((r) => r.backend === b && r.day === today)!;
    assert.deepEqual(
      [
        row("alpha").turns,
        row("alpha").failed,
        row("alpha").tokens_in,
        row("alpha").tokens_out,
        row("alpha").limit_hits,
      ],
      [fakeA.mainRequests().length, 0, aSaw.in, aSaw.out, 0],
    );
    assert.deepEqual(
      [row("beta").turns, row("beta").failed, row("beta").tokens_in, row("beta").tokens_out],
      [3, 1, bSaw.in, bSaw.out],
    );
    assert.equal(
      row("beta").limit_hits,
      limitedEvents,
      "one hit per backend.limited (a failed limit_reached turn is the same hit)",
    );
    assert.equal(row("beta").last_limit_message, "5-hour limit reached · resets 4:20am");
    const beta = u.backends.find((b) => b.backend === "beta")!;
    assert.equal(beta.next_reset_at, resetAt);
    assert.equal(beta.today.turns, 3);
    assert.equal(beta.last_limit_message, "5-hour limit reached · resets 4:20am");
    assert.equal(u.backends.find((b) => b.backend === "alpha")!.next_reset_at, null);
    assert.equal(u.totals.turns, 6);
    assert.equal(u.totals.tokens_in, aSaw.in + bSaw.in);

    // The admin route is behind the keys, and checks ?days=.
    assert.equal((await fetch(`${bridge.url}/v1/admin/usage`)).status, 401);
    const bad = await fetch(`${bridge.url}/v1/admin/usage?days=31`, { headers: auth });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { code: string } }).error.code, "invalid_days");
    assert.equal((await usageOf(bridge, "?days=30")).days, 30);

    // The metrics count the same limit hits.
    const res = await fetch(`${bridge.url}/metrics`, { headers: auth });
    const m = parseMetrics(await res.text());
    assert.equal(value(m, "clawbridge_backend_limit_hits_total", { backend: "beta" }), limitedEvents);
    assert.equal(value(m, "clawbridge_backend_limit_hits_total", { backend: "alpha" }), 0);
    assert.equal(value(m, "clawbridge_tokens_total", { model: "a", backend: "alpha", kind: "prompt" }), aSaw.in);
    assert.ok(m.families.get("clawbridge_fallbacks_total"), "the fallback family is exposed");

    // `clawbridge usage --json` prints what the route answers; the table names both backends.
    const cmd = await usageCommand(["--json", "--url", bridge.url, "--key", KEY]);
    assert.equal(cmd.code, 0, cmd.err);
    const printed = JSON.parse(cmd.out) as Usage;
    const again = await usageOf(bridge);
    assert.deepEqual({ ...printed, now: 0 }, { ...again, now: 0 });
    const table = await usageCommand(["--url", bridge.url, "--key", KEY, "--days", "1"]);
    assert.equal(table.code, 0, table.err);
    assert.match(table.out, /^alpha\s+3\s+0\s+600\s+60\s+0\s+0\s+-$/m);
    assert.match(table.out, /^beta\s+3\s+1\s+12\s+5\s+\d+\s+\d+\s+\S+/m);
    assert.match(table.out, /beta \(.+\): 5-hour limit reached/);
    const refused = await usageCommand(["--url", bridge.url, "--key", "wrong"]);
    assert.equal(refused.code, 1);

    // A restart on the same data dir keeps the counts (<dataDir>/usage.db).
    off();
    await within(bridge.close(), 15_000, "bridge close");
    bridge = await startTestBridge(config);
    const after = await usageOf(bridge);
    assert.deepEqual(after.totals, u.totals);
    assert.equal(after.backends.find((b) => b.backend === "beta")!.next_reset_at, resetAt);
  } finally {
    off();
    await within(bridge.close(), 15_000, "bridge close");
    await fakeA.close();
    await fakeB.close();
    cleanup(dataDir);
  }
});
