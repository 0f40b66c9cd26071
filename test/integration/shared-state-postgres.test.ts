/**
 * Two bridges on one PostgreSQL (issue 36: `store: { kind: postgres }`, a real PostgreSQL from
 * testkit/postgres.ts), in this process, each with its own data dir and its own pool, the same
 * fake model APIs as upstreams, driven by the official `openai` client:
 * - a backend that answered bridge A with a limit is skipped by bridge B without being tried (the
 *   limit book's NOTIFY): B's turn falls back to the next model at once;
 * - a Responses API chain begun on A is continued on B (`previous_response_id`): B's upstream
 *   gets the whole conversation;
 * - `GET /v1/admin/usage` on either bridge shows the turns of both.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import type { Usage } from "../../src/wire/admin.js";
import { startFakeOpenAI, type FakeOpenAI, type Reply } from "../../testkit/fakes/openai-api.js";
import { cleanup, eventually, startTestBridge, tempDir, type TestBridge } from "../helpers/bridge.js";
import { startPostgres, type TestPostgres } from "../../testkit/postgres.js";

const KEY = "shared-key";

/** The fake's answer: a 429 with Retry-After for a message with `<name>:429`, else an echo. */
function scripted(name: string): (req: { lastUser: string }) => Reply {
  return (req) =>
    req.lastUser.includes(`${name}:429`)
      ? {
          kind: "raw",
          status: 429,
          headers: { "content-type": "application/json", "retry-after": "120" },
          frames: [JSON.stringify({ error: { message: "Rate limit reached for requests", type: "rate_limit_error" } })],
        }
      : { kind: "text", chunks: [`${name} says: `, req.lastUser.split("\n").at(-1)!.slice(0, 60)] };
}

describe("two bridges on one PostgreSQL", () => {
  let pg: TestPostgres;
  let primary: FakeOpenAI;
  let second: FakeOpenAI;
  let a: TestBridge;
  let b: TestBridge;
  const dirs = [tempDir("cb-shared-a-"), tempDir("cb-shared-b-")];

  before(async () => {
    pg = await startPostgres();
    const url = await pg.database();
    primary = await startFakeOpenAI(scripted("A"));
    second = await startFakeOpenAI(scripted("B"));
    const config = (dataDir: string) => ({
      dataDir,
      store: { kind: "postgres", url, poolSize: 4 },
      server: { apiKeys: [KEY] },
      backends: {
        a: { type: "openai", baseUrl: primary.url, limits: { backoffSeconds: 60 } },
        b: { type: "openai", baseUrl: second.url },
      },
      models: [
        { id: "main", backend: "a", model: "m-a", fallback: ["backup"] },
        { id: "backup", backend: "b", model: "m-b" },
      ],
    });
    a = await startTestBridge(config(dirs[0]!));
    b = await startTestBridge(config(dirs[1]!));
  });

  after(async () => {
    await a?.close(0);
    await b?.close(0);
    await Promise.all([primary?.close(), second?.close()]);
    await pg?.stop();
    for (const d of dirs) cleanup(d);
  });

  const client = (bridge: TestBridge) =>
    new OpenAI({ baseURL: bridge.baseURL, apiKey: KEY, maxRetries: 0, timeout: 60_000 });

  async function chat(bridge: TestBridge, content: string) {
    const { data, response } = await client(bridge)
      .chat.completions.create(
        { model: "main", messages: [{ role: "user", content }] },
        { headers: { "x-session-id": `shared-${randomUUID()}` } },
      )
      .withResponse();
    return {
      text: data.choices[0]?.message.content ?? "",
      answeredBy: response.headers.get("x-clawbridge-answered-by"),
    };
  }

  async function usage(bridge: TestBridge): Promise<Usage> {
    const res = await fetch(`${bridge.url}/v1/admin/usage`, { headers: { authorization: `Bearer ${KEY}` } });
    assert.equal(res.status, 200);
    return (await res.json()) as Usage;
  }

  test("a limit met on A: B skips that backend without trying it and falls back at once", async () => {
    const tried = primary.mainRequests().length;
    const r1 = await chat(a, "hello A:429");
    assert.equal(r1.answeredBy, "backup");
    assert.equal(primary.mainRequests().length, tried + 1, "A tried the primary and met its limit");
    // B learns it by NOTIFY (a moment later), not by trying.
    const bBook = (b.pipeline as unknown as { deps: { limits: { exhausted(n: string): unknown } } }).deps.limits;
    assert.ok(await eventually(() => bBook.exhausted("a") !== undefined, 5000), "B knows backend a is at its limit");
    const r2 = await chat(b, "a question for B");
    assert.equal(r2.answeredBy, "backup");
    assert.match(r2.text, /^B says: a question for B/);
    assert.equal(primary.mainRequests().length, tried + 1, "B did not try the limited backend");
  });

  test("previous_response_id: a chain begun on A is continued on B, whose upstream gets the whole conversation", async () => {
    const r1 = await client(a).responses.create({ model: "backup", input: "first question FQ-1" });
    assert.equal(r1.status, "completed");
    const before = second.mainRequests().length;
    const r2 = await client(b).responses.create({
      model: "backup",
      previous_response_id: r1.id,
      input: "second question SQ-2",
    });
    assert.equal(r2.previous_response_id, r1.id);
    const sent = JSON.stringify(second.mainRequests().slice(before)[0]!.body.messages);
    assert.match(sent, /FQ-1/, "the first turn (asked on A) reaches B's upstream");
    assert.match(sent, /B says: first question FQ-1/, "with A's answer");
    assert.match(sent, /SQ-2/);
    // And B's response is kept for A.
    const got = await client(a).responses.retrieve(r2.id);
    assert.equal(got.id, r2.id);
  });

  test("usage: either bridge shows the turns of both", async () => {
    // Four turns ended: two chats (A, B) and two responses (A, B); each bridge writes its counts within a second.
    let seen: Usage[] = [];
    const both = await eventually(async () => {
      seen = await Promise.all([usage(a), usage(b)]);
      return seen.every((u) => u.totals.turns === 4);
    }, 10_000);
    assert.ok(both, `totals: ${JSON.stringify(seen.map((u) => u.totals))}`);
    assert.deepEqual(seen[0]!.totals, seen[1]!.totals);
    const row = seen[1]!.data.find((r) => r.backend === "a")!;
    assert.equal(row.limit_hits, 1, "A's limit hit, seen on B");
    assert.equal(seen[1]!.data.find((r) => r.backend === "b")!.turns, 4, "every turn was answered by b");
  });
});
